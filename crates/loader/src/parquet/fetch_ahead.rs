//! The fetches a Parquet decoding worker keeps in flight for the row groups of objects it
//! decodes next ([`FetchesAhead`]).
//!
//! A request to object storage waits a round trip before its first byte (a few milliseconds in
//! the same region, tens of milliseconds across regions), and a worker decodes a small row group
//! in less than that: fetched one row group ahead, a worker over row groups of a megabyte waits
//! for the server most of the time. So the worker keeps fetching ahead while the row groups it
//! has asked for beyond the one it decodes hold at most [`FETCH_AHEAD_BYTES`] (always at least
//! one row group, whatever its size, and at most [`MAX_FETCH_AHEAD`]): large row groups are
//! fetched one ahead as before, small ones many at once. The loader's bound on requests in
//! flight (32) still holds across its workers.

use std::collections::VecDeque;

use super::{Location, ParquetFile, RowGroup};
use crate::remote::{Fetched, Pending};
use crate::{Error, Result};

/// The bytes of row groups a worker fetches ahead of the one it decodes (beyond the first row
/// group ahead, which is fetched whatever its size).
///
/// A worker decodes about 1 GB of compressed Snappy Parquet a second, so across a round trip of
/// 20 ms (a server in another region) it needs about 24 MB more in flight, plus the row group
/// being sent: two row groups of the common 16 MB ahead. Measured against nginx holding every
/// answer 20 ms (docs/benchmarks.md, "Read-ahead against latency"; 2,000,000 rows in row groups
/// of 16.8 MB): 0.254 s a pass with 32 MiB (one row group ahead), 0.218 s with 48 MiB, 0.222 s
/// with 64 MiB, against 0.119 s for the local file.
pub(crate) const FETCH_AHEAD_BYTES: u64 = 48 << 20;

/// The most row groups a worker fetches ahead of the one it decodes: with row groups of 1 MB
/// and a round trip of 20 ms, 16 ahead per worker (and 16 requests per loader) left the workers
/// waiting on the requests' turns, 0.420 s a pass against 0.289 s with 32 (and 0.281 s with 64;
/// 2,000,000 rows from nginx, the local file 0.148 s).
pub(crate) const MAX_FETCH_AHEAD: usize = 32;

/// The fetches a worker has started, by the position of the unit in the worker's own list.
#[derive(Default)]
pub(super) struct FetchesAhead {
    /// Each started fetch: the unit's position, the bytes it asks for, and the fetch.
    pending: VecDeque<(usize, u64, Pending<Fetched>)>,
    /// The first position not yet considered.
    next: usize,
}

impl FetchesAhead {
    /// Starts the fetch of the unit at `position`, and those after it that the budget allows.
    pub(super) fn start(&mut self, files: &[ParquetFile], mine: &[&RowGroup], position: usize) {
        let mut ahead: u64 = self
            .pending
            .iter()
            .filter(|(at, _, _)| *at > position)
            .map(|(_, bytes, _)| bytes)
            .sum();
        let last = (position + MAX_FETCH_AHEAD).min(mine.len().saturating_sub(1));
        while self.next <= last {
            // The unit being decoded and the first one after it are always fetched; the
            // others while the budget holds them.
            let first_ahead = self.next <= position + 1;
            let unit = mine[self.next];
            let file = &files[unit.file];
            if let Location::Remote(object) = &file.location {
                let ranges = file.row_group_ranges(object, unit.row_group);
                let bytes: u64 = ranges.iter().map(|range| range.end - range.start).sum();
                if !first_ahead && ahead + bytes > FETCH_AHEAD_BYTES {
                    // Over the budget: fetched once the worker comes closer.
                    break;
                }
                if self.next > position {
                    ahead += bytes;
                }
                let pending = object.remote().spawn(object.fetch_ranges(ranges));
                self.pending.push_back((self.next, bytes, pending));
            }
            self.next += 1;
        }
    }

    /// Waits for the fetch of the unit at `position`.
    pub(super) fn take(&mut self, position: usize) -> Result<Fetched> {
        while let Some((at, _, pending)) = self.pending.pop_front() {
            if at == position {
                return pending.wait();
            }
        }
        Err(Error::Panicked {
            message: format!("no fetch was started for the worker's unit {position}"),
        })
    }
}
