//! Checks of what a Parquet file declares against what it can hold, made before the parquet
//! crate reads the same bytes.
//!
//! The crate allocates from declared counts (a schema element's `num_children`, a dictionary
//! page's `num_values`, a page's uncompressed size) before it has seen the data that should back
//! them, so a few edited bytes can ask for gigabytes and abort the process. The footer's schema
//! tree is checked here before the crate parses it, and the page headers of every column chunk
//! are read and checked here before the crate decodes the row group.

use std::path::Path;

use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::basic::Type as PhysicalType;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::reader::ChunkReader;

use super::thrift::{Kind, Reader};
use crate::{Error, Result};

/// The deepest schema the loader reads; the crate walks the schema tree recursively.
const MAX_SCHEMA_DEPTH: usize = 64;

/// The first bytes read for a page header; a header that does not fit is read again from more.
const HEADER_WINDOW: usize = 1024;

/// Slack allowed on top of the per-value bound of a page's uncompressed size: level-encoding
/// headers, bit-packing padding, delta-encoding block headers.
const PAGE_SLACK: i64 = 4096;

/// Checks the footer of the Parquet file `file` (named `path` in errors; a local file or the
/// fetched tail of an object): its length against the file's, and its schema tree (every
/// element's `num_children` against the elements that follow it).
///
/// Files this check cannot parse are left to the crate, whose own errors are more precise; only
/// counts the crate would allocate from are refused here. Returns the footer's bytes (the
/// metadata, without its length and magic) when the file has a footer, for the digest that
/// identifies the file in a saved state.
pub(crate) fn check_footer(path: &Path, file: &impl ChunkReader) -> Result<Option<Bytes>> {
    let corrupt =
        |reason: String| Error::parquet(path, parquet::errors::ParquetError::General(reason));
    let len = file.len();
    if len < 12 {
        return Ok(None);
    }
    let tail = file
        .get_bytes(len - 8, 8)
        .map_err(|error| Error::parquet(path, error))?;
    if &tail[4..] != b"PAR1" {
        return Ok(None);
    }
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if footer_len + 12 > len {
        return Err(corrupt(format!(
            "the footer declares {footer_len} bytes; the file of {len} bytes holds at most {}",
            len - 12
        )));
    }
    // The length is checked against the file above, so this allocation is backed by the file.
    let footer = file
        .get_bytes(len - 8 - footer_len, footer_len as usize)
        .map_err(|error| Error::parquet(path, error))?;
    let children =
        schema_children(&footer).map_err(|reason| corrupt(format!("invalid footer: {reason}")))?;
    check_schema_tree(&children).map_err(|reason| corrupt(format!("invalid schema: {reason}")))?;
    Ok(Some(footer))
}

/// The `num_children` of every schema element of the `FileMetaData` in `footer` (0 when unset).
fn schema_children(footer: &[u8]) -> std::result::Result<Vec<i64>, String> {
    let mut reader = Reader::new(footer);
    let mut last = 0;
    let mut children = Vec::new();
    while let Some(kind) = reader.field(&mut last)? {
        if last != 2 || kind != Kind::List {
            reader.skip(kind)?;
            continue;
        }
        let (element, size) = reader.list()?;
        if element != Kind::Struct {
            return Err(format!(
                "the schema is a list of {element:?}; expected structs"
            ));
        }
        // The list's size is checked against the bytes left, so this allocation is bounded by
        // the footer's length.
        children = Vec::with_capacity(size);
        for _ in 0..size {
            let mut field_id = 0;
            let mut count = 0;
            while let Some(kind) = reader.field(&mut field_id)? {
                if field_id == 5 && kind == Kind::I32 {
                    count = reader.integer()?;
                } else {
                    reader.skip(kind)?;
                }
            }
            children.push(count);
        }
    }
    Ok(children)
}

/// Checks that `children` (the `num_children` of each element, in depth-first order) describe
/// one tree that uses every element and nests at most [`MAX_SCHEMA_DEPTH`] levels.
fn check_schema_tree(children: &[i64]) -> std::result::Result<(), String> {
    // The count of elements still to read at each open level.
    let mut open: Vec<i64> = vec![1];
    let mut index = 0;
    while let Some(left) = open.last_mut() {
        if *left == 0 {
            open.pop();
            continue;
        }
        *left -= 1;
        let Some(&count) = children.get(index) else {
            return Err(format!(
                "the schema tree needs more than the {} elements the footer holds",
                children.len()
            ));
        };
        let following = children.len() - index - 1;
        if count < 0 || count as u64 > following as u64 {
            return Err(format!(
                "schema element {index} declares {count} children; expected at most the \
                 {following} elements that follow it"
            ));
        }
        index += 1;
        if count > 0 {
            if open.len() > MAX_SCHEMA_DEPTH {
                return Err(format!(
                    "the schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
                ));
            }
            open.push(count);
        }
    }
    if index != children.len() && !children.is_empty() {
        return Err(format!(
            "the schema tree holds {index} of the footer's {} elements",
            children.len()
        ));
    }
    Ok(())
}

/// One page header's fields that the crate sizes allocations from.
#[derive(Debug, Default)]
struct PageHeader {
    kind: i64,
    uncompressed: i64,
    compressed: i64,
    num_values: i64,
    /// The bytes of the header itself.
    len: usize,
}

/// Reads the page header at the start of `bytes`.
fn page_header(bytes: &[u8]) -> std::result::Result<PageHeader, String> {
    let mut reader = Reader::new(bytes);
    let mut header = PageHeader::default();
    let mut last = 0;
    while let Some(kind) = reader.field(&mut last)? {
        match (last, kind) {
            (1, Kind::I32) => header.kind = reader.integer()?,
            (2, Kind::I32) => header.uncompressed = reader.integer()?,
            (3, Kind::I32) => header.compressed = reader.integer()?,
            // The data page, dictionary page and data page v2 headers all hold `num_values` as
            // their field 1.
            (5 | 7 | 8, Kind::Struct) => {
                let mut inner = 0;
                while let Some(kind) = reader.field(&mut inner)? {
                    if inner == 1 && kind == Kind::I32 {
                        header.num_values = reader.integer()?;
                    } else {
                        reader.skip(kind)?;
                    }
                }
            }
            _ => reader.skip(kind)?,
        }
    }
    header.len = reader.position();
    Ok(header)
}

/// The page types of the Parquet format.
const DATA_PAGE: i64 = 0;
const DICTIONARY_PAGE: i64 = 2;
const DATA_PAGE_V2: i64 = 3;

/// Checks row group `row_group` of `file`'s `metadata` before it is decoded: its row count, and
/// for every column of `mask`, its byte range against the file and every page header against the
/// chunk; then that a record batch of `decode_rows` of its rows can be allocated. `path` names
/// the file in errors.
pub(crate) fn check_row_group(
    path: &Path,
    file: &impl ChunkReader,
    metadata: &ParquetMetaData,
    row_group: usize,
    mask: &ProjectionMask,
    decode_rows: usize,
) -> Result<()> {
    let group = metadata.row_group(row_group);
    let rows = group.num_rows();
    let mut decoded: u64 = 0;
    for (leaf, column) in group.columns().iter().enumerate() {
        if !mask.leaf_included(leaf) {
            continue;
        }
        check_column_chunk(file, rows, column).map_err(|reason| Error::CorruptParquet {
            path: path.to_path_buf(),
            row_group,
            column: column.column_path().string(),
            reason,
        })?;
        decoded = decoded.saturating_add(decoded_bytes(column));
    }
    // The crate's allocations while it decodes cannot fail but abort: a record batch of
    // `decode_rows` rows larger than the memory the process may have (an honest row group of
    // highly compressed zeros, under an address-space limit) is refused as out of memory
    // instead, its decoded size reserved and freed first. Smaller batches are not probed.
    let rows = u64::try_from(rows).unwrap_or(0).max(1);
    let batch = decoded.saturating_mul(rows.min(decode_rows as u64)) / rows;
    if batch >= PROBED_DECODE_BYTES {
        crate::memory::ensure_available(usize::try_from(batch).unwrap_or(usize::MAX))?;
    }
    Ok(())
}

/// Record batches whose decoded columns take this many bytes and more are reserved before they
/// are decoded (see [`check_row_group`]).
const PROBED_DECODE_BYTES: u64 = 64 << 20;

/// About the bytes that decoding `column` holds at once: its values (each of its fixed size, or
/// the uncompressed pages' bytes for byte arrays) and its repetition and definition levels (two
/// bytes a value each, where the column has them).
fn decoded_bytes(column: &ColumnChunkMetaData) -> u64 {
    let values = u64::try_from(column.num_values()).unwrap_or(0);
    let (bits, fixed) = value_bits(column);
    let value_bytes = if fixed {
        values.saturating_mul(bits.max(0) as u64) / 8
    } else {
        u64::try_from(column.uncompressed_size()).unwrap_or(0)
    };
    let descriptor = column.column_descr();
    let level_kinds =
        u64::from(descriptor.max_rep_level() > 0) + u64::from(descriptor.max_def_level() > 0);
    value_bytes.saturating_add(values.saturating_mul(2 * level_kinds))
}

/// The bits of one value of `column`, and whether every value has that size.
fn value_bits(column: &ColumnChunkMetaData) -> (i64, bool) {
    let descriptor = column.column_descr();
    match descriptor.physical_type() {
        PhysicalType::BOOLEAN => (1, true),
        PhysicalType::INT32 | PhysicalType::FLOAT => (32, true),
        PhysicalType::INT64 | PhysicalType::DOUBLE => (64, true),
        PhysicalType::INT96 => (96, true),
        // A byte array's plain encoding is its 4-byte length and its bytes.
        PhysicalType::BYTE_ARRAY => (32, false),
        PhysicalType::FIXED_LEN_BYTE_ARRAY => {
            (i64::from(descriptor.type_length().max(0)) * 8, true)
        }
    }
}

/// The bytes a column chunk declares, its first page's offset and its compressed size as
/// given, `(offset, size)`; read without the parquet crate's `byte_range`, which panics on a
/// negative value.
fn declared_bytes(column: &ColumnChunkMetaData) -> (i64, i64) {
    let start = column
        .dictionary_page_offset()
        .unwrap_or_else(|| column.data_page_offset());
    (start, column.compressed_size())
}

/// The byte range a column chunk declares, when it is one: a negative offset or size, or an
/// end past `u64`, is `None` (and refused by [`check_row_group`]). The ranges an object's fetch
/// asks for.
#[cfg(feature = "object-store")]
pub(crate) fn chunk_range(column: &ColumnChunkMetaData) -> Option<std::ops::Range<u64>> {
    let (start, len) = declared_bytes(column);
    let start = u64::try_from(start).ok()?;
    let len = u64::try_from(len).ok()?;
    Some(start..start.checked_add(len)?)
}

/// Checks one column chunk of a row group of `rows` rows.
fn check_column_chunk(
    file: &impl ChunkReader,
    rows: i64,
    column: &ColumnChunkMetaData,
) -> std::result::Result<(), String> {
    let (start, len) = declared_bytes(column);
    let declared = column.num_values();
    let file_len = file.len();
    let end = start.checked_add(len);
    if start < 0 || len < 0 || declared < 0 || end.is_none_or(|end| end as u64 > file_len) {
        return Err(format!(
            "the column chunk declares {len} bytes at offset {start} and {declared} values; \
             expected bytes inside the file of {file_len} bytes"
        ));
    }
    if rows < 0 {
        return Err(format!("the row group declares {rows} rows"));
    }
    if column.column_descr().max_rep_level() == 0 && declared != rows {
        return Err(format!(
            "the column chunk declares {declared} values; expected one per row, {rows}"
        ));
    }
    let (bits, fixed) = value_bits(column);
    let (start, end) = (start as u64, start as u64 + len as u64);
    let mut offset = start;
    let mut values: i64 = 0;
    let mut pages = 0usize;
    while offset < end {
        let left = end - offset;
        let header = read_page_header(file, offset, left)?;
        let at = offset - start;
        if header.compressed < 0 || header.uncompressed < 0 || header.num_values < 0 {
            return Err(format!(
                "the page at byte {at} of the chunk declares {} compressed bytes, {} \
                 uncompressed bytes and {} values; expected counts that are not negative",
                header.compressed, header.uncompressed, header.num_values
            ));
        }
        let page_end = header.len as u64 + header.compressed as u64;
        if page_end > left {
            return Err(format!(
                "the page at byte {at} of the chunk declares {} bytes; only {} are left in the \
                 column chunk",
                page_end, left
            ));
        }
        // An upper bound of a page's decoded bytes: every value at its full width, plus
        // repetition and definition levels of at most 2 bytes each per value.
        let most_bytes =
            (header.num_values.saturating_mul((bits + 7) / 8 + 4)).saturating_add(PAGE_SLACK);
        let bounded = if fixed {
            header.uncompressed <= most_bytes
        } else {
            header.uncompressed <= column.uncompressed_size().max(0)
        };
        if !bounded {
            return Err(format!(
                "the page at byte {at} of the chunk declares {} uncompressed bytes for {} values; \
                 expected at most {}",
                header.uncompressed,
                header.num_values,
                if fixed {
                    most_bytes
                } else {
                    column.uncompressed_size()
                }
            ));
        }
        match header.kind {
            DICTIONARY_PAGE => {
                if pages != 0 {
                    return Err(format!(
                        "the page at byte {at} of the chunk is a dictionary page after a data page; \
                         expected the dictionary first"
                    ));
                }
                // A dictionary page holds its values plainly encoded, each at least `bits` wide.
                if header.num_values.saturating_mul(bits) > header.uncompressed.saturating_mul(8) {
                    return Err(format!(
                        "the dictionary page declares {} values in {} bytes; expected at most {}",
                        header.num_values,
                        header.uncompressed,
                        header.uncompressed.saturating_mul(8) / bits.max(1)
                    ));
                }
            }
            DATA_PAGE | DATA_PAGE_V2 => {
                values = values.saturating_add(header.num_values);
                if values > declared {
                    return Err(format!(
                        "the pages up to byte {at} of the chunk hold {values} values; the \
                         chunk declares {declared}"
                    ));
                }
            }
            _ => {}
        }
        pages += 1;
        offset += page_end;
    }
    if values != declared {
        return Err(format!(
            "the pages of the chunk hold {values} values; the chunk declares {declared}"
        ));
    }
    Ok(())
}

/// Reads the page header at `offset`, `left` bytes before the end of its column chunk: from a
/// small window first, then from larger ones when the header does not fit.
fn read_page_header(
    file: &impl ChunkReader,
    offset: u64,
    left: u64,
) -> std::result::Result<PageHeader, String> {
    let mut window = HEADER_WINDOW as u64;
    loop {
        let size = window.min(left);
        // `size` is at most the bytes left in the column chunk, which lies inside the file.
        let bytes: Bytes = file
            .get_bytes(offset, size as usize)
            .map_err(|error| error.to_string())?;
        match page_header(&bytes) {
            Ok(header) => return Ok(header),
            Err(_) if size < left => window = window.saturating_mul(8),
            Err(reason) => return Err(format!("invalid page header at offset {offset}: {reason}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_tree_must_use_every_element_within_its_counts() {
        assert_eq!(check_schema_tree(&[2, 0, 0]), Ok(()));
        assert_eq!(check_schema_tree(&[1, 1, 0]), Ok(()));
        assert_eq!(
            check_schema_tree(&[i64::from(i32::MAX), 0]),
            Err(
                "schema element 0 declares 2147483647 children; expected at most the 1 \
                 elements that follow it"
                    .to_string()
            )
        );
        assert_eq!(
            check_schema_tree(&[1, 0, 0]),
            Err("the schema tree holds 2 of the footer's 3 elements".to_string())
        );
        assert_eq!(
            check_schema_tree(&[2, 1, 0]),
            Err("the schema tree needs more than the 3 elements the footer holds".to_string())
        );
    }
}
