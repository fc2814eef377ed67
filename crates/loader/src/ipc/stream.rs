//! IPC streams, local files or objects read in order, one stream after another.
//!
//! A stream is read message by message here, not by arrow-ipc's `StreamReader`, so that every
//! message is checked before arrow-ipc's decoder reads it: its metadata and body within the
//! bytes the stream has left (never an allocation sized by a length the stream declares beyond
//! them), its header's buffers inside its body, and a compressed body's declared lengths
//! (`message.rs`). Each checked message, whole in one buffer, goes to arrow-ipc's
//! `StreamDecoder`, which decodes it as slices of that buffer.

use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::{MessageHeader, root_as_message};
use arrow_schema::SchemaRef;

use super::message::{
    BatchHeader, CONTINUATION, Refused, batch_header, check_compressed_body, first_nodes,
    message_bytes,
};
use crate::file::{self, PinnedFile, PlannedFile};
use crate::quiet_panic::catch_quietly;
#[cfg(feature = "object-store")]
use crate::remote::RemoteObject;
use crate::{Error, Result};

/// The bytes of one read of an IPC stream in object storage.
pub(crate) const STREAM_CHUNK: u64 = 8 << 20;

/// The bytes of the first read of a stream opened for its schema alone (when a loader is made):
/// a schema message is small, and the stream is read again from its start for its batches, so
/// a first read of [`STREAM_CHUNK`] would fetch 8 MB twice (reads double from there, so a
/// longer schema costs a few more reads, not 8 MB).
const SCHEMA_CHUNK: u64 = 64 << 10;

/// An IPC stream: a local file, or an object read in order.
pub(crate) enum StreamInput {
    /// A local file.
    Path(PathBuf),
    /// A local file as it was when the loader was planned (its headers read then): reopened by
    /// path when it is read, and refused if it is then another file, or another length or
    /// modification time, as a planned IPC file is.
    Planned(PlannedFile),
    /// An object in object storage.
    #[cfg(feature = "object-store")]
    Remote(RemoteObject),
}

impl StreamInput {
    /// The name of the stream in errors: its path, or the object's URL.
    pub(crate) fn name(&self) -> &Path {
        match self {
            StreamInput::Path(path) => path,
            StreamInput::Planned(planned) => planned.path(),
            #[cfg(feature = "object-store")]
            StreamInput::Remote(object) => object.name(),
        }
    }

    /// Another reader of the same local stream (a second pass over it), or `None` for an
    /// object, which is read once.
    pub(crate) fn local_copy(&self) -> Option<StreamInput> {
        match self {
            StreamInput::Path(path) => Some(StreamInput::Path(path.clone())),
            StreamInput::Planned(planned) => Some(StreamInput::Planned(planned.clone())),
            #[cfg(feature = "object-store")]
            StreamInput::Remote(_) => None,
        }
    }

    /// The stream's messages, from its start; an object's first read is `first_read` bytes
    /// ([`SCHEMA_CHUNK`] or [`STREAM_CHUNK`]), each later one twice the last, up to
    /// [`STREAM_CHUNK`].
    #[cfg_attr(not(feature = "object-store"), allow(unused_variables))]
    fn messages(&self, first_read: u64) -> Result<Messages<Box<dyn Read + Send>>> {
        let (read, size): (Box<dyn Read + Send>, u64) = match self {
            StreamInput::Path(path) => {
                let file = file::open(path)?;
                let size = file
                    .metadata()
                    .map_err(|error| Error::io(path, error))?
                    .len();
                (Box::new(BufReader::new(file)), size)
            }
            StreamInput::Planned(planned) => {
                let path = planned.path();
                let file = file::open(path)?;
                let metadata = file.metadata().map_err(|error| Error::io(path, error))?;
                planned.check(&metadata)?;
                (Box::new(BufReader::new(file)), metadata.len())
            }
            #[cfg(feature = "object-store")]
            StreamInput::Remote(object) => (
                Box::new(RemoteRead {
                    object: object.clone(),
                    offset: 0,
                    chunk: bytes::Bytes::new(),
                    next_read: first_read,
                }),
                object.size(),
            ),
        };
        Ok(Messages {
            reader: read,
            name: self.name().to_path_buf(),
            left: size,
            index: 0,
        })
    }

    /// Opens the stream: its messages, a decoder that has been given its schema message, and
    /// the schema (which the decoder holds only once the next message reaches it); an object's
    /// first read is `first_read` bytes.
    fn open(&self, first_read: u64) -> Result<Opened> {
        let mut messages = self.messages(first_read)?;
        let mut decoder = StreamDecoder::new();
        let Some(message) = messages.next()? else {
            return Err(Error::ipc(
                self.name(),
                "the stream holds no message; expected a schema message first, as an arrow ipc \
                 stream starts",
            ));
        };
        if message.kind != MessageHeader::Schema {
            return Err(Error::ipc(
                self.name(),
                format!(
                    "its first message is a {:?} message; expected a schema message, as an arrow \
                     ipc stream starts",
                    message.kind
                ),
            ));
        }
        let schema = message_schema(&message, self.name())?;
        decode(&mut decoder, message, self.name())?;
        Ok((messages, decoder, schema))
    }
}

/// A stream opened: its messages, a decoder given its schema message, and its schema.
type Opened = (Messages<Box<dyn Read + Send>>, StreamDecoder, SchemaRef);

/// The schema of the schema message `message`.
fn message_schema(message: &Message, name: &Path) -> Result<SchemaRef> {
    let metadata = &message.bytes.as_slice()[..message.meta_len];
    let flatbuffer = message_bytes(metadata).map_err(|reason| Error::ipc(name, reason))?;
    let message = root_as_message(flatbuffer)
        .map_err(|error| Error::ipc(name, format!("invalid message: {error}")))?;
    let schema = message
        .header_as_schema()
        .ok_or_else(|| Error::ipc(name, "the schema message has no schema"))?;
    let schema = catch_quietly(|| arrow_ipc::convert::try_fb_to_schema(schema))
        .map_err(|payload| Error::decode_panic(name, "the schema".to_string(), payload))?
        .map_err(|error| Error::ipc(name, format!("invalid schema: {error}")))?;
    Ok(Arc::new(schema))
}

/// One message of a stream, whole: its prefix, metadata and body in one buffer.
struct Message {
    bytes: Buffer,
    /// The bytes of the prefix and the metadata, before the body.
    meta_len: usize,
    kind: MessageHeader,
    /// Whether its body is compressed.
    compressed: bool,
    /// Which message of the stream it is, for errors.
    index: usize,
}

/// The messages of a stream read from `reader`, which has `left` bytes.
struct Messages<R> {
    reader: R,
    name: PathBuf,
    left: u64,
    /// The index of the next message.
    index: usize,
}

impl<R: Read> Messages<R> {
    /// Reads exactly `buf.len()` bytes, which the stream must have left.
    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let wanted = buf.len() as u64;
        if wanted > self.left {
            return Err(self.malformed(format!(
                "{what} of {wanted} bytes reaches past the end of the stream, {} bytes later; \
                 expected a complete stream",
                self.left
            )));
        }
        self.reader
            .read_exact(buf)
            .map_err(|error| self.read_error(error))?;
        self.left -= wanted;
        Ok(())
    }

    /// A read's I/O error, naming the stream; the error of an object's fetch (which names the
    /// object and says what failed) is kept as it is.
    fn read_error(&self, error: std::io::Error) -> Error {
        if error.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            let inner = error.into_inner().expect("an error with an inner error");
            return *inner
                .downcast::<Error>()
                .expect("checked to be a loader error");
        }
        Error::io(&self.name, error)
    }

    /// A malformed message, naming it.
    fn malformed(&self, reason: String) -> Error {
        Error::ipc(&self.name, format!("message {}: {reason}", self.index))
    }

    /// The length prefix of the next message (after its continuation marker, if any), and the
    /// prefix's bytes; `None` at the end of the stream: its end-of-stream marker, or the end of
    /// its bytes between two messages.
    fn prefix(&mut self) -> Result<Option<(u32, Vec<u8>)>> {
        if self.left == 0 {
            return Ok(None);
        }
        let mut word = [0u8; 4];
        self.read_exact(&mut word, "a message's length")?;
        let mut prefix = word.to_vec();
        if word == CONTINUATION {
            self.read_exact(&mut word, "a message's length")?;
            prefix.extend_from_slice(&word);
        }
        let length = u32::from_le_bytes(word);
        if length == 0 {
            // The end-of-stream marker; what follows it is not read.
            return Ok(None);
        }
        if length > i32::MAX as u32 {
            return Err(self.malformed(format!(
                "its metadata length is {}; expected a positive 32-bit length",
                length as i32
            )));
        }
        Ok(Some((length, prefix)))
    }

    /// The prefix and metadata of the next message, checked, with its kind, its body's length
    /// (within the bytes left) and its header when it is a record batch or a dictionary batch;
    /// `None` at the end of the stream.
    fn header(&mut self) -> Result<Option<Header>> {
        let Some((length, prefix)) = self.prefix()? else {
            return Ok(None);
        };
        if u64::from(length) > self.left {
            return Err(self.malformed(format!(
                "it declares {length} bytes of metadata; the stream has {} bytes left",
                self.left
            )));
        }
        let mut metadata = try_zeroed(&self.name, prefix.len() + length as usize)?;
        metadata[..prefix.len()].copy_from_slice(&prefix);
        let after_prefix = prefix.len();
        self.read_exact(&mut metadata[after_prefix..], "its metadata")?;
        let (kind, body_length) = {
            let flatbuffer = message_bytes(&metadata).map_err(|reason| self.malformed(reason))?;
            let message = root_as_message(flatbuffer)
                .map_err(|error| self.malformed(format!("invalid message: {error}")))?;
            (message.header_type(), message.bodyLength())
        };
        let body_len = u64::try_from(body_length)
            .ok()
            .filter(|&body| body <= self.left)
            .ok_or_else(|| {
                self.malformed(format!(
                    "it declares a body of {body_length} bytes; the stream has {} bytes left",
                    self.left
                ))
            })?;
        let batch =
            batch_header(&metadata, body_length).map_err(|reason| self.malformed(reason))?;
        Ok(Some(Header {
            metadata,
            kind,
            body_len: body_len as usize,
            batch,
        }))
    }

    /// The next message, checked, whole; `None` at the end of the stream.
    fn next(&mut self) -> Result<Option<Message>> {
        let Some(header) = self.header()? else {
            return Ok(None);
        };
        let meta_len = header.metadata.len();
        let mut bytes = try_zeroed(&self.name, meta_len + header.body_len)?;
        bytes[..meta_len].copy_from_slice(&header.metadata);
        self.read_exact(&mut bytes[meta_len..], "its body")?;
        let message = Message {
            bytes: bytes.into(),
            meta_len,
            kind: header.kind,
            compressed: header.batch.is_some_and(|batch| batch.compressed),
            index: self.index,
        };
        self.index += 1;
        Ok(Some(message))
    }
}

/// A message's prefix and metadata, as [`Messages::header`] reads them.
struct Header {
    metadata: MutableBuffer,
    kind: MessageHeader,
    body_len: usize,
    batch: Option<BatchHeader>,
}

impl<R: Read + Seek> Messages<R> {
    /// The header of the next message, its body skipped; `None` at the end of the stream.
    fn next_header(&mut self) -> Result<Option<Header>> {
        let Some(header) = self.header()? else {
            return Ok(None);
        };
        self.reader
            .seek_relative(header.body_len as i64)
            .map_err(|error| self.read_error(error))?;
        self.left -= header.body_len as u64;
        self.index += 1;
        Ok(Some(header))
    }
}

/// `len` zeroed bytes, or an out-of-memory error naming the stream.
fn try_zeroed(name: &Path, len: usize) -> Result<MutableBuffer> {
    MutableBuffer::try_from_len_zeroed(len).map_err(|error| {
        Error::io(
            name,
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("cannot allocate {len} bytes for a message: {error}"),
            ),
        )
    })
}

/// The end-of-stream marker: the continuation marker and a metadata length of 0.
const END_OF_STREAM: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];

/// Decodes `message` with `decoder`, after checking its compressed body: the record batch it
/// completes, if any.
fn decode(
    decoder: &mut StreamDecoder,
    message: Message,
    name: &Path,
) -> Result<Option<RecordBatch>> {
    let unit = format!("message {}", message.index);
    if message.compressed {
        let (meta, body) = message.bytes.as_slice().split_at(message.meta_len);
        check_compressed_body(meta, body).map_err(|refused| match refused {
            Refused::Malformed(reason) => Error::ipc(name, format!("{unit}: {reason}")),
            Refused::Memory(reason) => Error::io(
                name,
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    format!("{unit}: {reason} to decompress it"),
                ),
            ),
        })?;
    }
    // arrow-rs's decoder reads a message's body only once more bytes follow its metadata, so a
    // record batch without body bytes (no rows, or only null-type columns) would be decoded with
    // the next message's bytes, leaving them over. Such a message is given an end-of-stream
    // marker after it, which the decoder leaves over instead.
    let empty_body =
        message.kind == MessageHeader::RecordBatch && message.bytes.len() == message.meta_len;
    let mut bytes = if empty_body {
        let mut padded = MutableBuffer::new(message.bytes.len() + END_OF_STREAM.len());
        padded.extend_from_slice(message.bytes.as_slice());
        padded.extend_from_slice(&END_OF_STREAM);
        Buffer::from(padded)
    } else {
        message.bytes
    };
    let decoded = catch_quietly(|| decoder.decode(&mut bytes))
        .map_err(|payload| Error::decode_panic(name, unit.clone(), payload))?
        .map_err(|error| Error::ipc(name, format!("{unit}: {error}")))?;
    if empty_body && decoded.is_some() && bytes.as_slice() == END_OF_STREAM {
        return Ok(decoded);
    }
    if !bytes.is_empty() {
        return Err(Error::ipc(
            name,
            format!("{unit}: the decoder left {} bytes of it", bytes.len()),
        ));
    }
    Ok(decoded)
}

/// An object read in order, [`STREAM_CHUNK`] bytes per request (the first ones may be shorter,
/// doubling up to it).
#[cfg(feature = "object-store")]
struct RemoteRead {
    object: RemoteObject,
    offset: u64,
    chunk: bytes::Bytes,
    /// The bytes of the next request.
    next_read: u64,
}

#[cfg(feature = "object-store")]
impl Read for RemoteRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.chunk.is_empty() && self.offset < self.object.size() {
            let end = (self.offset + self.next_read).min(self.object.size());
            self.next_read = (self.next_read * 2).min(STREAM_CHUNK);
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
            match input.open(STREAM_CHUNK) {
                Ok((mut messages, mut decoder, _)) => {
                    let mut failed = false;
                    Box::new(std::iter::from_fn(move || {
                        if failed {
                            return None;
                        }
                        let next = loop {
                            let message = match messages.next() {
                                Ok(Some(message)) => message,
                                Ok(None) => break None,
                                Err(error) => break Some(Err(error)),
                            };
                            match decode(&mut decoder, message, input.name()) {
                                Ok(Some(batch)) => break Some(Ok(batch)),
                                Ok(None) => continue,
                                Err(error) => break Some(Err(error)),
                            }
                        };
                        failed = matches!(next, Some(Err(_)));
                        // A local stream read as planned that fails because it changed (cut
                        // short while it is read) is named as changed, as an IPC file is.
                        if let (Some(Err(_)), StreamInput::Planned(planned)) = (&next, &input)
                            && let Err(changed) = planned.check_path()
                        {
                            return Some(Err(changed));
                        }
                        next
                    }))
                }
                Err(error) => Box::new(std::iter::once(Err(error))),
            }
        },
    )
}

/// What the planning reads of an IPC stream: its schema and, where asked, its rows and the
/// nulls of each top-level column over its record batches (from their headers; a local stream
/// only).
pub(crate) struct StreamSummary {
    pub(crate) schema: SchemaRef,
    /// The rows that the record batches' headers declare; `None` when not read (an object, or
    /// not asked) or past `u64`.
    pub(crate) rows: Option<u64>,
    /// The rows of each record batch, in order, as their headers declare them; `None` when not
    /// read.
    pub(crate) batch_rows: Option<Vec<u64>>,
    /// The nulls of each top-level column, as the record batches' headers declare them;
    /// `None` when not read (an object, or not asked).
    pub(crate) null_counts: Option<Vec<Option<u64>>>,
    /// The local file whose headers were read, as it was then; `None` when not read.
    pub(crate) planned: Option<PlannedFile>,
}

/// The schema of the IPC stream `input`, from its first message; with `headers`, a local
/// stream's record-batch headers are read too (their bodies skipped) for its rows and the nulls
/// of each column.
pub(crate) fn stream_summary(input: &StreamInput, headers: bool) -> Result<StreamSummary> {
    let (_, _, schema) = input.open(SCHEMA_CHUNK)?;
    let path = match input {
        StreamInput::Path(path) if headers => Some(path.as_path()),
        StreamInput::Planned(planned) if headers => Some(planned.path()),
        _ => None,
    };
    let Some(path) = path else {
        return Ok(StreamSummary {
            schema,
            rows: None,
            batch_rows: None,
            null_counts: None,
            planned: None,
        });
    };
    let headers = scan_headers(path, &schema)?;
    Ok(StreamSummary {
        schema,
        rows: headers.rows,
        batch_rows: Some(headers.batch_rows),
        null_counts: Some(headers.null_counts),
        planned: Some(headers.planned),
    })
}

/// The rows of the local stream `path` of schema `schema` and the nulls of each top-level
/// column, summed over its record batches' headers; its bodies are skipped, not read.
fn scan_headers(path: &Path, schema: &SchemaRef) -> Result<Headers> {
    let pinned = PinnedFile::open(path)?;
    let size = pinned.planned().size();
    let mut messages = Messages {
        reader: BufReader::new(pinned.file()),
        name: path.to_path_buf(),
        left: size,
        index: 0,
    };
    let firsts = first_nodes(schema);
    let mut rows = Some(0u64);
    let mut batch_rows = Vec::new();
    let mut counts: Vec<Option<u64>> = vec![Some(0); firsts.len()];
    while let Some(header) = messages.next_header()? {
        if header.kind == MessageHeader::Schema && messages.index > 1 {
            return Err(Error::ipc(
                path,
                format!(
                    "message {} is a second schema message; expected one schema, first (two \
                     streams joined into one file are two files)",
                    messages.index - 1
                ),
            ));
        }
        let Some(header) = header.batch.filter(|batch| !batch.dictionary) else {
            continue;
        };
        batch_rows.push(header.rows as u64);
        // Rows are counted as a 64-bit signed integer, as Arrow's lengths are: more in all is
        // no stream anyone wrote.
        rows = rows
            .and_then(|rows| rows.checked_add(header.rows as u64))
            .filter(|&rows| i64::try_from(rows).is_ok());
        if rows.is_none() {
            return Err(Error::ipc(
                path,
                "its record batches declare more than 2**63 - 1 rows in all; expected a row \
                 count that fits in 64 bits",
            ));
        }
        for (count, &first) in counts.iter_mut().zip(&firsts) {
            *count = match (*count, header.node_nulls.get(first)) {
                (Some(total), Some(&nulls)) => total.checked_add(nulls),
                _ => None,
            };
        }
    }
    Ok(Headers {
        rows,
        batch_rows,
        null_counts: counts,
        planned: pinned.planned().clone(),
    })
}

/// What the record-batch headers of a local stream declare, and the file as it was read.
struct Headers {
    rows: Option<u64>,
    batch_rows: Vec<u64>,
    null_counts: Vec<Option<u64>>,
    planned: PlannedFile,
}
