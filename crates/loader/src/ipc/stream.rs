//! IPC streams, local files or objects read in order, one stream after another.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_schema::SchemaRef;

use crate::file;
use crate::quiet_panic::catch_quietly;
#[cfg(feature = "object-store")]
use crate::remote::RemoteObject;
use crate::{Error, Result};

/// The bytes of one read of an IPC stream in object storage.
#[cfg(feature = "object-store")]
pub(crate) const STREAM_CHUNK: u64 = 8 << 20;

/// An IPC stream: a local file, or an object read in order.
pub(crate) enum StreamInput {
    /// A local file.
    Path(PathBuf),
    /// An object in object storage.
    #[cfg(feature = "object-store")]
    Remote(RemoteObject),
}

impl StreamInput {
    /// The name of the stream in errors: its path, or the object's URL.
    pub(crate) fn name(&self) -> &Path {
        match self {
            StreamInput::Path(path) => path,
            #[cfg(feature = "object-store")]
            StreamInput::Remote(object) => object.name(),
        }
    }

    /// Opens the stream and reads its schema.
    fn open(&self) -> Result<StreamReader<BufReader<Box<dyn Read + Send>>>> {
        let read: Box<dyn Read + Send> = match self {
            StreamInput::Path(path) => Box::new(file::open(path)?),
            #[cfg(feature = "object-store")]
            StreamInput::Remote(object) => Box::new(RemoteRead {
                object: object.clone(),
                offset: 0,
                chunk: bytes::Bytes::new(),
            }),
        };
        StreamReader::try_new(BufReader::new(read), None)
            .map_err(|error| stream_error(self.name(), error))
    }
}

/// A stream reader's error: an I/O error of an object (a failed fetch, which the reader wraps)
/// keeps its kind and names the object; anything else is invalid IPC.
fn stream_error(name: &Path, error: arrow_schema::ArrowError) -> Error {
    match error {
        arrow_schema::ArrowError::IoError(_, source)
            if source.kind() != std::io::ErrorKind::UnexpectedEof =>
        {
            Error::Io {
                path: name.to_path_buf(),
                source,
            }
        }
        error => Error::ipc(name, error.to_string()),
    }
}

/// An object read in order, [`STREAM_CHUNK`] bytes per request.
#[cfg(feature = "object-store")]
struct RemoteRead {
    object: RemoteObject,
    offset: u64,
    chunk: bytes::Bytes,
}

#[cfg(feature = "object-store")]
impl Read for RemoteRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.chunk.is_empty() && self.offset < self.object.size() {
            let end = (self.offset + STREAM_CHUNK).min(self.object.size());
            let fetched = self
                .object
                .fetch_now(std::iter::once(self.offset..end))
                .map_err(std::io::Error::other)?;
            self.chunk = fetched
                .slice(self.offset, end - self.offset)
                .unwrap_or_default();
            self.offset = end;
        }
        let count = buf.len().min(self.chunk.len());
        buf[..count].copy_from_slice(&self.chunk[..count]);
        bytes::Buf::advance(&mut self.chunk, count);
        Ok(count)
    }
}

/// The record batches of the IPC streams `inputs`, one after another; each is opened when the
/// previous one ends, and one that cannot be opened yields an error in its place.
pub(crate) fn read_streams(
    inputs: Vec<StreamInput>,
) -> impl Iterator<Item = Result<RecordBatch>> + Send {
    inputs.into_iter().flat_map(
        |input| -> Box<dyn Iterator<Item = Result<RecordBatch>> + Send> {
            match input.open() {
                Ok(mut reader) => {
                    let mut index = 0;
                    let mut failed = false;
                    Box::new(std::iter::from_fn(move || {
                        if failed {
                            return None;
                        }
                        let path = input.name();
                        let next = match catch_quietly(|| reader.next()) {
                            Ok(item) => {
                                item.map(|batch| batch.map_err(|error| stream_error(path, error)))
                            }
                            Err(payload) => {
                                let unit = format!("record batch {index}");
                                Some(Err(Error::decode_panic(path, unit, payload)))
                            }
                        };
                        index += 1;
                        failed = matches!(next, Some(Err(_)));
                        next
                    }))
                }
                Err(error) => Box::new(std::iter::once(Err(error))),
            }
        },
    )
}

/// The schema of the IPC stream `input`, read from its first message.
pub(crate) fn stream_schema(input: &StreamInput) -> Result<SchemaRef> {
    Ok(input.open()?.schema())
}
