//! [`Fetched`]: byte ranges of one object held in memory, read by the Parquet decoder (a
//! [`ChunkReader`]) and the IPC decoder as if they were the object; and the coalescing of the
//! ranges one decode needs into few requests.

use std::ops::Range;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

/// Ranges closer than this are fetched as one request (the gap is read and dropped): a request
/// costs more than a megabyte of loopback or datacenter bandwidth. `object_store`'s own default.
pub(crate) const COALESCE_GAP: u64 = object_store::OBJECT_STORE_COALESCE_DEFAULT;

/// Byte ranges of an object of `len` bytes, sorted by offset.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    len: u64,
    parts: Arc<Vec<(u64, Bytes)>>,
}

impl Fetched {
    /// The `parts` (offset, bytes) of an object of `len` bytes.
    pub(crate) fn new(len: u64, mut parts: Vec<(u64, Bytes)>) -> Self {
        parts.sort_by_key(|(offset, _)| *offset);
        Fetched {
            len,
            parts: Arc::new(parts),
        }
    }

    /// The bytes `start..start + length`, when one fetched part holds them all.
    pub(crate) fn slice(&self, start: u64, length: u64) -> Option<Bytes> {
        let end = start.checked_add(length)?;
        // The last part that starts at or before `start`.
        let index = self.parts.partition_point(|(offset, _)| *offset <= start);
        let (offset, bytes) = self.parts.get(index.checked_sub(1)?)?;
        let from = usize::try_from(start - offset).ok()?;
        let to = usize::try_from(end - offset).ok()?;
        (to <= bytes.len()).then(|| bytes.slice(from..to))
    }

    /// These ranges and those of `other` (of the same object).
    pub(crate) fn with(self, other: &Fetched) -> Fetched {
        let mut parts: Vec<(u64, Bytes)> = self.parts.iter().cloned().collect();
        parts.extend(other.parts.iter().cloned());
        Fetched::new(self.len, parts)
    }

    /// The error of a read outside the fetched ranges: a decoder that reads other bytes than
    /// the metadata said it would (a corrupt file) is refused, not served by a new request.
    fn outside(&self, start: u64, length: u64) -> ParquetError {
        ParquetError::EOF(format!(
            "expected {length} bytes at offset {start}, inside the ranges fetched for this read \
             of an object of {} bytes",
            self.len
        ))
    }
}

impl Length for Fetched {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for Fetched {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        // A reader to the end of the part that holds `start`.
        let index = self.parts.partition_point(|(offset, _)| *offset <= start);
        let part = index
            .checked_sub(1)
            .and_then(|index| self.parts.get(index))
            .filter(|(offset, bytes)| start - offset <= bytes.len() as u64);
        match part {
            Some((offset, bytes)) => Ok(bytes.slice((start - offset) as usize..).reader()),
            None => Err(self.outside(start, 1)),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, length as u64)
            .ok_or_else(|| self.outside(start, length as u64))
    }
}

/// `ranges` merged where they overlap or lie less than [`COALESCE_GAP`] apart, sorted; empty
/// ranges are dropped.
pub(crate) fn coalesce(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.retain(|range| range.start < range.end);
    ranges.sort_by_key(|range| range.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end.saturating_add(COALESCE_GAP) => {
                last.end = last.end.max(range.end);
            }
            _ => merged.push(range),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_ranges_are_merged_and_far_ones_kept_apart() {
        let far = COALESCE_GAP + 1;
        assert_eq!(coalesce(vec![10..20, 0..5, 18..30, 30..30]), vec![0..30]);
        assert_eq!(
            coalesce(vec![0..10, 10 + far..20 + far]),
            vec![0..10, 10 + far..20 + far]
        );
    }

    #[test]
    fn reads_are_served_from_the_parts_only() {
        let fetched = Fetched::new(
            100,
            vec![
                (50, Bytes::from_static(b"0123456789")),
                (0, Bytes::from_static(b"ab")),
            ],
        );
        assert_eq!(
            fetched.get_bytes(52, 3).unwrap(),
            Bytes::from_static(b"234")
        );
        assert_eq!(fetched.get_bytes(0, 2).unwrap(), Bytes::from_static(b"ab"));
        assert!(fetched.get_bytes(58, 3).is_err());
        assert!(fetched.get_bytes(20, 1).is_err());
        let mut text = String::new();
        std::io::Read::read_to_string(&mut fetched.get_read(57).unwrap(), &mut text).unwrap();
        assert_eq!(text, "789");
    }
}
