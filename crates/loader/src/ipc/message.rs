//! The checks of an IPC message's header, made before the decoder reads its body: every field
//! node's null count within its length, every buffer inside the body and aligned, the body's
//! compression one that this build reads, and, for a compressed body, every buffer's declared
//! decompressed length within what its compressed bytes can hold and allocatable.
//!
//! arrow-ipc sizes the decompression of a buffer by the length the buffer declares
//! (`Vec::with_capacity`), which aborts the process when the allocation fails; so a declared
//! length is checked against the codec's largest expansion first, and the decompressed bytes of
//! the whole body are reserved (and released) fallibly before the decoder runs, so that a forged
//! length is an error, not an abort.

use arrow_ipc::{CompressionType, MessageHeader, root_as_message};
use arrow_schema::{DataType, Schema};

/// The prefix of an encapsulated message written with the continuation marker.
pub(crate) const CONTINUATION: [u8; 4] = [0xFF; 4];

/// The most bytes that one compressed byte of LZ4's frame format decompresses to: a match
/// length grows by 255 per byte of its extension.
const LZ4_MAX_EXPANSION: u64 = 256;

/// The most bytes that one compressed byte of Zstandard decompresses to: a run-length block of
/// 4 bytes (a 3-byte header and the byte) gives at most a block's 128 KiB.
const ZSTD_MAX_EXPANSION: u64 = 32 * 1024;

/// Bytes of frame headers that a compressed buffer may hold besides its blocks.
const FRAME_SLACK: u64 = 64;

/// What the header of a record batch (or of a dictionary batch's data) says, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    /// Whether it is a dictionary batch's (else a record batch's).
    pub(crate) dictionary: bool,
    /// The rows it declares.
    pub(crate) rows: usize,
    /// Whether its buffers are compressed (LZ4 or ZSTD).
    pub(crate) compressed: bool,
    /// The null count of each field node, in the schema's depth-first order.
    pub(crate) node_nulls: Vec<u64>,
}

/// The header of the encapsulated message `metadata` (its length prefix included), which
/// announces a body of `body_length` bytes: a record batch's, or a dictionary batch's data.
/// `None` for another message (a schema).
pub(crate) fn batch_header(
    metadata: &[u8],
    body_length: i64,
) -> Result<Option<BatchHeader>, String> {
    let message = message_bytes(metadata)?;
    let message = root_as_message(message).map_err(|error| format!("invalid message: {error}"))?;
    if message.bodyLength() != body_length {
        return Err(format!(
            "the message declares a body of {} bytes; the footer's block has {body_length}",
            message.bodyLength()
        ));
    }
    let dictionary = match message.header_type() {
        MessageHeader::RecordBatch => false,
        MessageHeader::DictionaryBatch => true,
        _ => return Ok(None),
    };
    let header = if dictionary {
        message
            .header_as_dictionary_batch()
            .and_then(|dictionary| dictionary.data())
    } else {
        message.header_as_record_batch()
    }
    .ok_or_else(|| "the message's header is missing".to_string())?;
    check_header(&header, body_length, dictionary).map(Some)
}

/// The flatbuffer of an encapsulated message: after its length prefix (with or without the
/// continuation marker), as long as the prefix says (the rest is padding).
pub(crate) fn message_bytes(metadata: &[u8]) -> Result<&[u8], String> {
    let (prefix, rest) = match metadata {
        // The continuation marker, `CONTINUATION`, then the length.
        [0xFF, 0xFF, 0xFF, 0xFF, a, b, c, d, rest @ ..] => ([*a, *b, *c, *d], rest),
        [0xFF, 0xFF, 0xFF, 0xFF, ..] => {
            return Err("the message is shorter than its length prefix".to_string());
        }
        [a, b, c, d, rest @ ..] => ([*a, *b, *c, *d], rest),
        _ => return Err("the message is shorter than its length prefix".to_string()),
    };
    let declared = i32::from_le_bytes(prefix);
    usize::try_from(declared)
        .ok()
        .and_then(|len| rest.get(..len))
        .ok_or_else(|| {
            format!(
                "the message declares {declared} bytes of metadata; the block holds {}",
                rest.len()
            )
        })
}

/// Checks a record batch header against a body of `body_length` bytes: null counts within the
/// nodes' lengths, buffers inside the body and aligned, a codec this build reads.
fn check_header(
    header: &arrow_ipc::RecordBatch<'_>,
    body_length: i64,
    dictionary: bool,
) -> Result<BatchHeader, String> {
    // Readers disagree on a null count outside the node's length (pyarrow reads the column as
    // all null, arrow-rs ignores the count), so such a node is refused.
    let mut node_nulls = Vec::new();
    for node in header.nodes().into_iter().flatten() {
        if node.length() < 0 || node.null_count() < 0 || node.null_count() > node.length() {
            return Err(format!(
                "a column declares {} nulls in {} rows; expected between 0 and its rows",
                node.null_count(),
                node.length()
            ));
        }
        node_nulls.push(node.null_count() as u64);
    }
    // The decoder slices every buffer out of the body and panics on one that lies outside it.
    for buffer in header.buffers().into_iter().flatten() {
        let end = buffer.offset().checked_add(buffer.length());
        if buffer.offset() < 0
            || buffer.length() < 0
            || end.is_none_or(|end| end > body_length)
            || buffer.offset() % 8 != 0
        {
            return Err(format!(
                "a buffer of {} bytes at offset {} lies outside the body of {body_length} bytes \
                 or is not aligned to 8 bytes",
                buffer.length(),
                buffer.offset(),
            ));
        }
    }
    let compressed = match header.compression() {
        None => false,
        Some(compression) => {
            codec_compiled_in(compression.codec())?;
            true
        }
    };
    let rows = usize::try_from(header.length())
        .map_err(|_| format!("negative row count {}", header.length()))?;
    Ok(BatchHeader {
        dictionary,
        rows,
        compressed,
        node_nulls,
    })
}

/// Refuses a codec that this build does not read, naming the feature that reads it.
fn codec_compiled_in(codec: CompressionType) -> Result<(), String> {
    let (name, feature, compiled) = match codec {
        CompressionType::LZ4_FRAME => ("LZ4", "lz4", cfg!(feature = "lz4")),
        CompressionType::ZSTD => ("ZSTD", "zstd", cfg!(feature = "zstd")),
        other => {
            return Err(format!(
                "its buffers are compressed with codec {}; expected LZ4 or ZSTD",
                other.0
            ));
        }
    };
    if compiled {
        return Ok(());
    }
    Err(format!(
        "its buffers are compressed with {name}, which this build cannot read; expected a codec \
         compiled in (enable the `{feature}` feature of arrow-dlpack-loader)"
    ))
}

/// Checks the compressed buffers of the record batch (or dictionary batch) message `metadata`
/// against its `body`, before the decoder decompresses them: each declared decompressed length
/// within the codec's largest expansion of the buffer's bytes, and all of them together
/// allocatable (reserved and released here, fallibly). `Ok(())` for an uncompressed message.
///
/// The error says whether the bytes could not be allocated (`Err(Refused::Memory)`) or the
/// message is malformed.
pub(crate) fn check_compressed_body(metadata: &[u8], body: &[u8]) -> Result<(), Refused> {
    let message = message_bytes(metadata).map_err(Refused::Malformed)?;
    let message = root_as_message(message)
        .map_err(|error| Refused::Malformed(format!("invalid message: {error}")))?;
    let header = match message.header_type() {
        MessageHeader::RecordBatch => message.header_as_record_batch(),
        MessageHeader::DictionaryBatch => message
            .header_as_dictionary_batch()
            .and_then(|dictionary| dictionary.data()),
        _ => None,
    };
    let Some(header) = header else {
        return Ok(());
    };
    let Some(compression) = header.compression() else {
        return Ok(());
    };
    let expansion = match compression.codec() {
        CompressionType::LZ4_FRAME => LZ4_MAX_EXPANSION,
        _ => ZSTD_MAX_EXPANSION,
    };
    let mut total: u64 = 0;
    for buffer in header.buffers().into_iter().flatten() {
        let (Ok(offset), Ok(length)) = (
            usize::try_from(buffer.offset()),
            usize::try_from(buffer.length()),
        ) else {
            return Err(Refused::Malformed(
                "a buffer has a negative offset or length".to_string(),
            ));
        };
        let Some(bytes) = offset
            .checked_add(length)
            .and_then(|end| body.get(offset..end))
        else {
            return Err(Refused::Malformed(format!(
                "a buffer of {length} bytes at offset {offset} lies outside the body of {} bytes",
                body.len()
            )));
        };
        // An empty buffer is empty; a buffer holds an 8-byte decompressed length (-1: stored
        // uncompressed), then the compressed bytes.
        let Some((prefix, compressed)) = bytes.split_first_chunk::<8>() else {
            continue;
        };
        let declared = i64::from_le_bytes(*prefix);
        if declared <= 0 {
            continue;
        }
        let declared = declared as u64;
        let most = (compressed.len() as u64)
            .saturating_mul(expansion)
            .saturating_add(FRAME_SLACK);
        if declared > most {
            return Err(Refused::Malformed(format!(
                "a compressed buffer of {} bytes declares {declared} bytes decompressed; \
                 expected at most {most}, what its codec can expand it to",
                compressed.len()
            )));
        }
        total = total.saturating_add(declared);
    }
    let bytes = usize::try_from(total).unwrap_or(usize::MAX);
    let mut probe: Vec<u8> = Vec::new();
    probe
        .try_reserve_exact(bytes)
        .map_err(|error| Refused::Memory(format!("cannot allocate {total} bytes: {error}")))?;
    Ok(())
}

/// Why a compressed body is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The message is malformed: what is wrong.
    Malformed(String),
    /// Its decompressed bytes cannot be allocated.
    Memory(String),
}

/// The index of the first field node of each top-level field of `schema`, in the depth-first
/// order in which a record batch's header lists them.
pub(crate) fn first_nodes(schema: &Schema) -> Vec<usize> {
    let mut next = 0;
    schema
        .fields()
        .iter()
        .map(|field| {
            let first = next;
            next += node_count(field.data_type());
            first
        })
        .collect()
}

/// The field nodes that a column of `data_type` has in a record batch's header: one, and those
/// of its children (a dictionary's values come in dictionary batches, not here).
fn node_count(data_type: &DataType) -> usize {
    match data_type {
        DataType::List(child)
        | DataType::LargeList(child)
        | DataType::ListView(child)
        | DataType::LargeListView(child)
        | DataType::FixedSizeList(child, _)
        | DataType::Map(child, _) => 1 + node_count(child.data_type()),
        DataType::Struct(fields) => {
            1 + fields
                .iter()
                .map(|f| node_count(f.data_type()))
                .sum::<usize>()
        }
        DataType::Union(fields, _) => {
            1 + fields
                .iter()
                .map(|(_, f)| node_count(f.data_type()))
                .sum::<usize>()
        }
        DataType::RunEndEncoded(run_ends, values) => {
            1 + node_count(run_ends.data_type()) + node_count(values.data_type())
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;
    use std::sync::Arc;

    #[test]
    fn top_level_fields_start_at_their_first_node() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new_list("b", Field::new_list_field(DataType::Int32, true), true),
            Field::new_struct(
                "c",
                vec![
                    Field::new("x", DataType::Float32, true),
                    Field::new_fixed_size_list(
                        "y",
                        Field::new_list_field(DataType::Float32, true),
                        4,
                        true,
                    ),
                ],
                true,
            ),
            Field::new_dictionary("d", DataType::Int32, DataType::Utf8, true),
            Field::new("e", DataType::Float64, true),
        ]);
        assert_eq!(first_nodes(&schema), [0, 1, 3, 7, 8]);
        let _ = Arc::new(schema);
    }

    #[test]
    fn a_message_is_as_long_as_its_prefix_says() {
        let mut bytes = CONTINUATION.to_vec();
        bytes.extend_from_slice(&3i32.to_le_bytes());
        bytes.extend_from_slice(b"abcdefgh");
        assert_eq!(message_bytes(&bytes).unwrap(), b"abc");
        assert_eq!(message_bytes(&bytes[4..]).unwrap(), b"abc");
        bytes[4..8].copy_from_slice(&100i32.to_le_bytes());
        assert!(message_bytes(&bytes).unwrap_err().contains("100 bytes"));
        assert!(message_bytes(&[0xFF; 6]).is_err());
    }
}
