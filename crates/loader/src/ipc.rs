//! Arrow IPC: files, memory-mapped, whose footer and every record batch's header are read and
//! checked when the file is opened, and whose record batches are decoded on demand as zero-copy
//! slices of the map; and streams, read one file after another.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::{FileDecoder, StreamReader, read_footer_length};
use arrow_ipc::{Block, root_as_footer, root_as_message};
use arrow_schema::SchemaRef;

use crate::file::{self, PinnedFile, PlannedFile};
use crate::quiet_panic::catch_quietly;
use crate::{Error, Result};

/// The magic bytes that open and close an Arrow IPC file.
const MAGIC: &[u8; 6] = b"ARROW1";

/// The prefix of an encapsulated message written with the continuation marker.
const CONTINUATION: [u8; 4] = [0xFF; 4];

/// One memory-mapped Arrow IPC file.
pub(crate) struct IpcFile {
    planned: PlannedFile,
    buffer: Buffer,
    decoder: FileDecoder,
    blocks: Vec<Block>,
    rows: Vec<usize>,
    schema: SchemaRef,
    full_schema: SchemaRef,
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
        let corrupt = |reason: String| Error::ipc(path, reason);
        let len = buffer.len();
        if len < 2 * MAGIC.len() + 4 || &buffer[..MAGIC.len()] != MAGIC {
            return Err(corrupt(format!(
                "the file is {len} bytes and does not start with ARROW1; expected an arrow ipc \
                 file (for a stream, use Source::ipc_streams)"
            )));
        }
        let mut tail = [0u8; 10];
        tail.copy_from_slice(&buffer[len - 10..]);
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
        let footer = root_as_footer(&buffer[footer_start..len - 10])
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
        for block in footer.dictionaries().into_iter().flatten() {
            let data = block_data(&buffer, block).map_err(corrupt)?;
            catch_quietly(|| decoder.read_dictionary(block, &data))
                .map_err(|payload| Error::decode_panic(path, "a dictionary".to_string(), payload))?
                .map_err(|error| corrupt(format!("invalid dictionary: {error}")))?;
        }
        let blocks: Vec<Block> = footer
            .recordBatches()
            .map(|blocks| blocks.iter().copied().collect())
            .unwrap_or_default();
        let rows = blocks
            .iter()
            .enumerate()
            .map(|(i, block)| {
                block_rows(&buffer, block)
                    .map_err(|reason| corrupt(format!("record batch {i}: {reason}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(IpcFile {
            planned: file.planned().clone(),
            buffer,
            decoder,
            blocks,
            rows,
            schema: projected,
            full_schema: schema,
        })
    }

    /// The number of rows of each record batch.
    pub(crate) fn rows(&self) -> &[usize] {
        &self.rows
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

    /// Decodes record batch `index`, sharing the map's memory; checks first that the file is
    /// unchanged, and then that the batch has the rows its header declares.
    pub(crate) fn read(&self, index: usize) -> Result<RecordBatch> {
        let path = self.planned.path();
        self.planned.check_path()?;
        let block = &self.blocks[index];
        let corrupt = |reason: String| Error::ipc(path, format!("record batch {index}: {reason}"));
        let data = block_data(&self.buffer, block).map_err(corrupt)?;
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
}

/// A unit of IPC-file work: a record batch of a file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IpcRecordBatch {
    pub(crate) file: usize,
    pub(crate) index: usize,
    pub(crate) rows: usize,
}

/// The record batches of the IPC stream files `paths`, one file after another; each file is
/// opened when the previous one ends, and one that cannot be opened yields an error in its place.
pub(crate) fn read_streams(
    paths: Vec<PathBuf>,
) -> impl Iterator<Item = Result<RecordBatch>> + Send {
    paths.into_iter().flat_map(
        |path| -> Box<dyn Iterator<Item = Result<RecordBatch>> + Send> {
            match open_stream(&path) {
                Ok(mut reader) => {
                    let mut index = 0;
                    let mut failed = false;
                    Box::new(std::iter::from_fn(move || {
                        if failed {
                            return None;
                        }
                        let next = match catch_quietly(|| reader.next()) {
                            Ok(item) => item.map(|batch| {
                                batch.map_err(|error| Error::ipc(&path, error.to_string()))
                            }),
                            Err(payload) => {
                                let unit = format!("record batch {index}");
                                Some(Err(Error::decode_panic(&path, unit, payload)))
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

/// The schema of the IPC stream file `path`, read from its first message.
pub(crate) fn stream_schema(path: &Path) -> Result<SchemaRef> {
    Ok(open_stream(path)?.schema())
}

/// Opens the IPC stream file `path` and reads its schema.
fn open_stream(path: &Path) -> Result<StreamReader<BufReader<File>>> {
    let file = file::open(path)?;
    StreamReader::try_new(BufReader::new(file), None)
        .map_err(|error| Error::ipc(path, error.to_string()))
}

/// The bytes of `block` (metadata and body), checked against the file's length.
fn block_data(buffer: &Buffer, block: &Block) -> std::result::Result<Buffer, String> {
    let offset = usize::try_from(block.offset()).ok();
    let meta = usize::try_from(block.metaDataLength()).ok();
    let body = usize::try_from(block.bodyLength()).ok();
    let range = offset
        .zip(meta)
        .zip(body)
        .and_then(|((offset, meta), body)| {
            let end = offset.checked_add(meta)?.checked_add(body)?;
            (meta >= 8 && end <= buffer.len()).then_some((offset, end - offset))
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
    match range {
        Some((offset, len)) => Ok(buffer.slice_with_length(offset, len)),
        None => Err(format!(
            "block at offset {} with {} metadata and {} body bytes lies outside the file of {} \
             bytes; expected a complete file",
            block.offset(),
            block.metaDataLength(),
            block.bodyLength(),
            buffer.len()
        )),
    }
}

/// The row count in the header of the record batch of `block`.
fn block_rows(buffer: &Buffer, block: &Block) -> std::result::Result<usize, String> {
    let data = block_data(buffer, block)?;
    let meta = &data[..block.metaDataLength() as usize];
    let (prefix, rest) = if meta[..4] == CONTINUATION {
        (&meta[4..8], &meta[8..])
    } else {
        (&meta[..4], &meta[4..])
    };
    // The message is as long as its prefix says (the rest of the block's metadata is padding),
    // as other readers take it: a prefix that disagrees with the footer's block is refused.
    let declared = i32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let message = usize::try_from(declared)
        .ok()
        .and_then(|len| rest.get(..len))
        .ok_or_else(|| {
            format!(
                "the message declares {declared} bytes of metadata; the block holds {}",
                rest.len()
            )
        })?;
    let message = root_as_message(message).map_err(|error| format!("invalid message: {error}"))?;
    let header = message.header_as_record_batch().ok_or_else(|| {
        format!(
            "found a {:?} message; expected a record batch",
            message.header_type()
        )
    })?;
    if message.bodyLength() != block.bodyLength() {
        return Err(format!(
            "the message declares a body of {} bytes; the footer's block has {}",
            message.bodyLength(),
            block.bodyLength()
        ));
    }
    // Readers disagree on a null count outside the node's length (pyarrow reads the column as
    // all null, arrow-rs ignores the count), so such a node is refused.
    for node in header.nodes().into_iter().flatten() {
        if node.length() < 0 || node.null_count() < 0 || node.null_count() > node.length() {
            return Err(format!(
                "a column declares {} nulls in {} rows; expected between 0 and its rows",
                node.null_count(),
                node.length()
            ));
        }
    }
    // The decoder slices every buffer out of the body and panics on one that lies outside it.
    for buffer in header.buffers().into_iter().flatten() {
        let end = buffer.offset().checked_add(buffer.length());
        if buffer.offset() < 0
            || buffer.length() < 0
            || end.is_none_or(|end| end > block.bodyLength())
            || buffer.offset() % 8 != 0
        {
            return Err(format!(
                "a buffer of {} bytes at offset {} lies outside the body of {} bytes or is not \
                 aligned to 8 bytes",
                buffer.length(),
                buffer.offset(),
                block.bodyLength()
            ));
        }
    }
    usize::try_from(header.length()).map_err(|_| format!("negative row count {}", header.length()))
}
