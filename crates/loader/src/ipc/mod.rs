//! Arrow IPC: files, memory-mapped, whose footer and every record batch's header are read and
//! checked when the file is opened, and whose record batches are decoded on demand as zero-copy
//! slices of the map; and streams, read one file after another.
//!
//! IPC files in object storage are read the same way: the footer, the dictionaries and every
//! record batch's header are fetched when the file is planned (the headers' ranges coalesced
//! into few requests), and each record batch's block is fetched when it is read, up to
//! [`FETCH_AHEAD`] blocks ahead of the one decoded. Streams in object storage are read in
//! order, a range of [`STREAM_CHUNK`](stream::STREAM_CHUNK) bytes at a time (`stream.rs`).

#[cfg(feature = "object-store")]
use std::collections::VecDeque;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::{FileDecoder, read_footer_length};
use arrow_ipc::{Block, root_as_footer};
use arrow_schema::SchemaRef;

use crate::digest;
use crate::file::{self, IPC_FILE_MAGIC, PinnedFile, PlannedFile};
use crate::quiet_panic::catch_quietly;
#[cfg(feature = "object-store")]
use crate::remote::{self, Fetched, Pending, RemoteObject};
use crate::{Error, Result};

mod message;
mod stream;

use message::{BatchHeader, Refused, batch_header, check_compressed_body, first_nodes};
pub(crate) use stream::{StreamInput, StreamSummary, read_streams, stream_summary};

/// Record batches of an IPC file in object storage fetched ahead of the one decoded.
#[cfg(feature = "object-store")]
pub(crate) const FETCH_AHEAD: usize = 4;

/// The bytes of an IPC file: its memory map, or the ranges fetched from an object.
enum Data {
    Mapped(Buffer),
    #[cfg(feature = "object-store")]
    Fetched(Fetched),
}

impl Data {
    /// `len` bytes at `offset`, when they are mapped or fetched.
    fn range(&self, offset: usize, len: usize) -> Option<Buffer> {
        match self {
            Data::Mapped(buffer) => {
                let end = offset.checked_add(len)?;
                (end <= buffer.len()).then(|| buffer.slice_with_length(offset, len))
            }
            #[cfg(feature = "object-store")]
            Data::Fetched(fetched) => fetched.slice(offset as u64, len as u64).map(Buffer::from),
        }
    }
}

/// Where an IPC file's bytes are.
enum Location {
    /// A memory-mapped local file, checked against its plan before each read.
    Local(PlannedFile),
    /// An object in object storage, pinned by its ETag, size and last-modified time.
    #[cfg(feature = "object-store")]
    Remote(RemoteObject),
}

/// The magic bytes that open and close an Arrow IPC file.
const MAGIC: &[u8; 6] = IPC_FILE_MAGIC;

/// One memory-mapped Arrow IPC file.
pub(crate) struct IpcFile {
    location: Location,
    /// The file's length.
    len: usize,
    /// The map of a local file; for an object, its footer, dictionaries and record-batch
    /// headers.
    data: Data,
    decoder: FileDecoder,
    blocks: Vec<Block>,
    rows: Vec<usize>,
    /// Whether each record batch's buffers are compressed.
    compressed: Vec<bool>,
    /// The nulls of each top-level column of the full schema, over every record batch, as the
    /// record batches' headers declare them; `None` for a column whose headers do not say.
    null_counts: Vec<Option<u64>>,
    schema: SchemaRef,
    full_schema: SchemaRef,
    /// The digest of the footer (the schema and the table of blocks), which identifies the
    /// file in a saved state.
    footer_digest: String,
}

impl IpcFile {
    /// Maps `path` and reads its footer, dictionaries and record-batch headers; `columns`, when
    /// given, projects the decoding onto those columns (names absent from the file are left for
    /// the column resolution to report).
    pub(crate) fn open(path: &Path, columns: Option<&[String]>) -> Result<Self> {
        let file = PinnedFile::open(path)?;
        // SAFETY: the map is private and copy-on-write: a consumer that writes through a batch
        // (DLPack consumers such as torch ignore the read-only flag) changes this process's copy
        // of the page only, never the file, and this loader's own reads go through the `Buffer`
        // below, which keeps the map alive as long as any record batch points into it. Each
        // loader maps anew, so pages written by the consumers of one pass are not read by the
        // next. Like every memory map (and PyArrow's `memory_map`), it relies on the file not
        // being truncated by another process while it is mapped; the loader checks the file's
        // identity, length and modification time before each record batch, and docs/loader.md
        // documents the rest.
        let map = unsafe { memmap2::MmapOptions::new().map_copy(file.file()) }
            .map_err(|error| Error::io(path, error))?;
        let buffer = Buffer::from(bytes::Bytes::from_owner(map));
        let len = buffer.len();
        let starts = buffer.get(..MAGIC.len()) == Some(&MAGIC[..]);
        if len < 2 * MAGIC.len() + 4 || !starts {
            return Err(Error::NotIpcFile {
                path: path.to_path_buf(),
                len,
                truncated: starts,
            });
        }
        Self::from_data(
            Location::Local(file.planned().clone()),
            path,
            len,
            Data::Mapped(buffer),
            columns,
            |_| Ok(None),
        )
    }

    /// Opens the IPC file object `object`, whose last bytes `tail` were fetched when it was
    /// listed: the rest of a longer footer, the dictionaries and the record batches' headers are
    /// fetched here.
    #[cfg(feature = "object-store")]
    pub(crate) fn open_remote(
        object: RemoteObject,
        tail: Fetched,
        columns: Option<&[String]>,
    ) -> Result<Self> {
        let name = object.name().to_path_buf();
        let size = object.size();
        let len = usize::try_from(size).map_err(|_| {
            Error::ipc(
                &name,
                format!("the object of {size} bytes is too large to address"),
            )
        })?;
        if len < 2 * MAGIC.len() + 4 {
            return Err(Error::ipc(
                &name,
                format!("the object is {len} bytes; expected an arrow ipc file"),
            ));
        }
        let footer_len = tail
            .slice(size - 10, 4)
            .map(|bytes| i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
            .and_then(|len| u64::try_from(len).ok())
            .filter(|&footer| footer + 10 <= size);
        let tail = match footer_len {
            Some(footer) if tail.slice(size - 10 - footer, footer + 10).is_none() => {
                object.fetch_now(std::iter::once(size - 10 - footer..size))?
            }
            _ => tail,
        };
        let fetch_object = object.clone();
        Self::from_data(
            Location::Remote(object),
            &name,
            len,
            Data::Fetched(tail.clone()),
            columns,
            move |ranges| {
                let mut parts = fetch_object.fetch_now(remote::coalesce(ranges))?;
                parts = parts.with(&tail);
                Ok(Some(Data::Fetched(parts)))
            },
        )
    }

    /// Reads the footer, dictionaries and record-batch headers of the file `path` of `len`
    /// bytes from `data`; `more` is given the ranges of the dictionaries and of the headers,
    /// and returns the data that holds them when `data` does not.
    fn from_data(
        location: Location,
        path: &Path,
        len: usize,
        mut data: Data,
        columns: Option<&[String]>,
        more: impl FnOnce(Vec<Range<u64>>) -> Result<Option<Data>>,
    ) -> Result<Self> {
        let corrupt = |reason: String| Error::ipc(path, reason);
        let mut tail = [0u8; 10];
        let last = data
            .range(len - 10, 10)
            .ok_or_else(|| corrupt("cannot read the footer's length".to_string()))?;
        tail.copy_from_slice(&last);
        let footer_len = read_footer_length(tail).map_err(|error| corrupt(error.to_string()))?;
        let footer_start = (len - 10)
            .checked_sub(footer_len)
            .filter(|&start| start >= MAGIC.len())
            .ok_or_else(|| {
                corrupt(format!(
                    "footer length {footer_len} does not fit in a file of {len} bytes; expected \
                     a complete file"
                ))
            })?;
        let footer_bytes = data
            .range(footer_start, footer_len)
            .ok_or_else(|| corrupt("cannot read the footer".to_string()))?;
        let footer_digest = digest::of_bytes(&footer_bytes);
        let footer = root_as_footer(&footer_bytes)
            .map_err(|error| corrupt(format!("invalid footer: {error}")))?;
        let fb_schema = footer
            .schema()
            .ok_or_else(|| corrupt("the footer has no schema".to_string()))?;
        // The decoder reads buffers in the machine's byte order whatever the file declares.
        let native = if cfg!(target_endian = "little") {
            arrow_ipc::Endianness::Little
        } else {
            arrow_ipc::Endianness::Big
        };
        if fb_schema.endianness() != native {
            return Err(corrupt(format!(
                "the file declares byte order {:?}; expected {native:?}, this machine's",
                fb_schema.endianness()
            )));
        }
        let schema = Arc::new(
            arrow_ipc::convert::try_fb_to_schema(fb_schema)
                .map_err(|error| corrupt(error.to_string()))?,
        );
        let mut decoder = FileDecoder::new(schema.clone(), footer.version());
        let mut projected = schema.clone();
        if let Some(columns) = columns {
            let indices = file::projection(&schema, columns);
            if indices.len() == columns.len() {
                projected = Arc::new(schema.project(&indices)?);
                decoder = decoder.with_projection(indices);
            }
        }
        let dictionaries: Vec<Block> = footer
            .dictionaries()
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let blocks: Vec<Block> = footer
            .recordBatches()
            .map(|blocks| blocks.iter().copied().collect())
            .unwrap_or_default();
        // What the rest of the planning reads: whole dictionaries, record batches' headers.
        let wanted = dictionaries
            .iter()
            .filter_map(|block| block_range(block, len).ok())
            .chain(blocks.iter().filter_map(|block| {
                let (offset, _) = block_range(block, len).ok()?;
                Some((offset, block.metaDataLength() as usize))
            }))
            .map(|(offset, size)| offset as u64..(offset + size) as u64)
            .collect();
        if let Some(fetched) = more(wanted)? {
            data = fetched;
        }
        for (index, block) in dictionaries.iter().enumerate() {
            let bytes = block_data(&data, len, block).map_err(corrupt)?;
            let unit = format!("dictionary {index}");
            let header = block_header(&bytes, block)
                .map_err(|reason| corrupt(format!("{unit}: {reason}")))?;
            if header.is_some_and(|header| header.compressed) {
                check_body(path, &unit, &bytes, block)?;
            }
            catch_quietly(|| decoder.read_dictionary(block, &bytes))
                .map_err(|payload| Error::decode_panic(path, unit.clone(), payload))?
                .map_err(|error| corrupt(format!("invalid dictionary: {error}")))?;
        }
        let firsts = first_nodes(&schema);
        let mut null_counts: Vec<Option<u64>> = vec![Some(0); firsts.len()];
        let mut rows = Vec::with_capacity(blocks.len());
        let mut compressed = Vec::with_capacity(blocks.len());
        for (i, block) in blocks.iter().enumerate() {
            let header = block_rows(&data, len, block)
                .map_err(|reason| corrupt(format!("record batch {i}: {reason}")))?;
            for (count, &first) in null_counts.iter_mut().zip(&firsts) {
                *count = match (*count, header.node_nulls.get(first)) {
                    (Some(total), Some(&nulls)) => total.checked_add(nulls),
                    _ => None,
                };
            }
            rows.push(header.rows);
            compressed.push(header.compressed);
        }
        Ok(IpcFile {
            location,
            len,
            data,
            decoder,
            blocks,
            rows,
            compressed,
            null_counts,
            schema: projected,
            full_schema: schema,
            footer_digest,
        })
    }

    /// The number of rows of each record batch.
    pub(crate) fn rows(&self) -> &[usize] {
        &self.rows
    }

    /// The nulls of each top-level column of the full schema over every record batch, as their
    /// headers declare them.
    pub(crate) fn null_counts(&self) -> &[Option<u64>] {
        &self.null_counts
    }

    /// The (projected) schema.
    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The schema of every column of the file, before projection: what the spec is checked
    /// against, so that an error names every column the file has.
    pub(crate) fn full_schema(&self) -> &SchemaRef {
        &self.full_schema
    }

    /// The digest of the file's footer.
    pub(crate) fn footer_digest(&self) -> &str {
        &self.footer_digest
    }

    /// The local file as planned, or `None` for an object.
    pub(crate) fn planned(&self) -> Option<&PlannedFile> {
        match &self.location {
            Location::Local(planned) => Some(planned),
            #[cfg(feature = "object-store")]
            Location::Remote(_) => None,
        }
    }

    /// The object, or `None` for a local file.
    #[cfg(feature = "object-store")]
    pub(crate) fn object(&self) -> Option<&RemoteObject> {
        match &self.location {
            Location::Local(_) => None,
            Location::Remote(object) => Some(object),
        }
    }

    /// The name of the file in errors: its path, or an object's URL.
    pub(crate) fn path(&self) -> &Path {
        match &self.location {
            Location::Local(planned) => planned.path(),
            #[cfg(feature = "object-store")]
            Location::Remote(object) => object.name(),
        }
    }

    /// Decodes record batch `index`, sharing the map's memory; checks first that the file is
    /// unchanged, and then that the batch has the rows its header declares. An object's block
    /// is fetched here unless `fetched` holds it.
    pub(crate) fn read(&self, index: usize, fetched: Option<Buffer>) -> Result<RecordBatch> {
        let path = self.path();
        let block = &self.blocks[index];
        let corrupt = |reason: String| Error::ipc(path, format!("record batch {index}: {reason}"));
        let data = match (&self.location, fetched) {
            (_, Some(data)) => data,
            (Location::Local(planned), None) => {
                planned.check_path()?;
                block_data(&self.data, self.len, block).map_err(corrupt)?
            }
            #[cfg(feature = "object-store")]
            (Location::Remote(_), None) => match self.start_fetch(index) {
                Some(pending) => pending.wait()?,
                None => block_data(&self.data, self.len, block).map_err(corrupt)?,
            },
        };
        if self.compressed[index] {
            check_body(path, &format!("record batch {index}"), &data, block)?;
        }
        let decoded =
            catch_quietly(|| self.decoder.read_record_batch(block, &data)).map_err(|payload| {
                Error::decode_panic(path, format!("record batch {index}"), payload)
            })?;
        match decoded {
            Ok(Some(batch)) if batch.num_rows() == self.rows[index] => Ok(batch),
            Ok(Some(batch)) => Err(Error::RowCount {
                path: path.to_path_buf(),
                unit: format!("record batch {index}"),
                found: batch.num_rows() as u64,
                expected: self.rows[index] as u64,
            }),
            Ok(None) => Err(corrupt("the block holds no record batch".to_string())),
            Err(error) => Err(corrupt(error.to_string())),
        }
    }

    /// Starts fetching the block of record batch `index` of an object; `None` for a local file
    /// (or a block outside the object, which [`block_data`] reports).
    #[cfg(feature = "object-store")]
    fn start_fetch(&self, index: usize) -> Option<Pending<Buffer>> {
        let Location::Remote(object) = &self.location else {
            return None;
        };
        let (offset, len) = block_range(&self.blocks[index], self.len).ok()?;
        let fetch = object.fetch_ranges(std::iter::once(offset as u64..(offset + len) as u64));
        Some(object.remote().spawn(async move {
            let fetched = fetch.await?;
            Ok(Buffer::from(
                fetched.slice(offset as u64, len as u64).unwrap_or_default(),
            ))
        }))
    }
}

/// A unit of IPC-file work: a record batch of a file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IpcRecordBatch {
    pub(crate) file: usize,
    pub(crate) index: usize,
    pub(crate) rows: usize,
}

/// The planned record batches `units` of `files`, decoded in their order on the loader thread;
/// the blocks of objects are fetched up to [`FETCH_AHEAD`] record batches ahead.
pub(crate) fn read_planned(
    files: Arc<Vec<IpcFile>>,
    units: Vec<IpcRecordBatch>,
) -> impl Iterator<Item = Result<RecordBatch>> + Send {
    #[cfg(feature = "object-store")]
    let mut ahead: VecDeque<Option<Pending<Buffer>>> = VecDeque::new();
    let mut next = 0;
    std::iter::from_fn(move || {
        let unit = *units.get(next)?;
        #[cfg(feature = "object-store")]
        let fetched = {
            let end = (next + 1 + FETCH_AHEAD).min(units.len());
            while next + ahead.len() < end {
                let later = units[next + ahead.len()];
                ahead.push_back(files[later.file].start_fetch(later.index));
            }
            match ahead.pop_front().flatten().map(Pending::wait) {
                Some(Ok(buffer)) => Some(buffer),
                Some(Err(error)) => {
                    next = units.len();
                    return Some(Err(error));
                }
                None => None,
            }
        };
        #[cfg(not(feature = "object-store"))]
        let fetched = None;
        next += 1;
        Some(files[unit.file].read(unit.index, fetched))
    })
}

/// The offset and length of `block` (metadata and body), checked against the file's length
/// `len` and the format's alignment.
fn block_range(block: &Block, len: usize) -> std::result::Result<(usize, usize), String> {
    let offset = usize::try_from(block.offset()).ok();
    let meta = usize::try_from(block.metaDataLength()).ok();
    let body = usize::try_from(block.bodyLength()).ok();
    let range = offset
        .zip(meta)
        .zip(body)
        .and_then(|((offset, meta), body)| {
            let end = offset.checked_add(meta)?.checked_add(body)?;
            (meta >= 8 && end <= len).then_some((offset, end - offset))
        });
    let aligned = [
        block.offset(),
        i64::from(block.metaDataLength()),
        block.bodyLength(),
    ]
    .iter()
    .all(|value| value % 8 == 0);
    if !aligned {
        return Err(format!(
            "block at offset {} with {} metadata and {} body bytes is not aligned to 8 bytes; \
             expected aligned blocks, as the format requires",
            block.offset(),
            block.metaDataLength(),
            block.bodyLength()
        ));
    }
    range.ok_or_else(|| {
        format!(
            "block at offset {} with {} metadata and {} body bytes lies outside the file of {} \
             bytes; expected a complete file",
            block.offset(),
            block.metaDataLength(),
            block.bodyLength(),
            len
        )
    })
}

/// The bytes of `block` (metadata and body) of a file of `len` bytes, checked against its
/// length.
fn block_data(data: &Data, len: usize, block: &Block) -> std::result::Result<Buffer, String> {
    let (offset, size) = block_range(block, len)?;
    data.range(offset, size)
        .ok_or_else(|| format!("the block at offset {offset} was not read"))
}

/// The checked header of the record batch of `block`.
fn block_rows(data: &Data, len: usize, block: &Block) -> std::result::Result<BatchHeader, String> {
    let (offset, _) = block_range(block, len)?;
    let meta = data
        .range(offset, block.metaDataLength() as usize)
        .ok_or_else(|| format!("the header at offset {offset} was not read"))?;
    match block_header(&meta, block)? {
        Some(header) if !header.dictionary => Ok(header),
        _ => Err("found a message that is not a record batch; expected a record batch".to_string()),
    }
}

/// The checked header of the block `block` whose bytes (at least its metadata) are `bytes`:
/// `None` for a message that is neither a record batch nor a dictionary batch.
fn block_header(bytes: &[u8], block: &Block) -> std::result::Result<Option<BatchHeader>, String> {
    let meta = bytes
        .get(..block.metaDataLength() as usize)
        .ok_or_else(|| "the block is shorter than its metadata".to_string())?;
    batch_header(meta, block.bodyLength())
}

/// Checks the compressed buffers of `block`, whose bytes (metadata and body) are `bytes`, before
/// the decoder decompresses them; `unit` names it in errors.
fn check_body(path: &Path, unit: &str, bytes: &[u8], block: &Block) -> Result<()> {
    let meta_len = block.metaDataLength() as usize;
    let (meta, body) = bytes.split_at(meta_len.min(bytes.len()));
    check_compressed_body(meta, body).map_err(|refused| match refused {
        Refused::Malformed(reason) => Error::ipc(path, format!("{unit}: {reason}")),
        Refused::Memory(reason) => Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("{unit}: {reason} to decompress it"),
            ),
        ),
    })
}
