//! Where a shard starts reading: the work and start position from the spec's state (or the
//! epoch's beginning), the shard's items from there, the rows it has left, and the record
//! batches cut to those items' rows and tagged with their place.

use std::collections::VecDeque;

use arrow_array::RecordBatch;

use super::planned::by_lengths;
use super::{Pieces, Raw, Tagged, total_rows};
use crate::state::{Item, Resuming, Settings, Start, Work};
use crate::{BatchSpec, Error, Result};

/// Whether a source plans its epoch, from the spec, the epoch's work and its units' rows: files
/// by [`is_planned`](super::planned::is_planned), record batches read in order by their own
/// rule.
pub(super) type PlansBy = fn(&BatchSpec, &Work, &[u64]) -> bool;

/// A source that plans no epoch (record batches dealt as they are read).
pub(super) fn never_planned(_: &BatchSpec, _: &Work, _: &[u64]) -> bool {
    false
}

/// Where the shard starts, and the work, from the spec's state (checked against `settings` and
/// the source's units, `unit_rows` when the metadata tells them) or the epoch's start. A source
/// whose units are known plans its epoch when `plans_by` says so
/// ([`is_planned`](super::planned::is_planned) for files).
pub(super) fn resume(
    spec: &BatchSpec,
    settings: &Settings,
    unit_rows: Option<&[u64]>,
    plans_by: PlansBy,
) -> Result<(Work, Start)> {
    let work = match &spec.state {
        Some(state) => &state.work,
        None => &Work::all(unit_rows.map(|rows| rows.len() as u64)),
    };
    let planned = unit_rows.is_some_and(|rows| plans_by(spec, work, rows));
    // A plan cut by rows alone records the units' rows it is cut from in the epoch's work, so
    // that its states merge; a resumed work that lacks them (a merged one) gets them here, once
    // the state was checked against the source.
    let mut work = work.clone();
    if planned && !by_lengths(spec) && work.unit_rows.is_none() {
        work.unit_rows = unit_rows.map(<[u64]>::to_vec);
    }
    let start = match &spec.state {
        Some(state) => state.start_for(&Resuming {
            settings,
            epoch: spec.epoch,
            shard: [spec.shard_index as u64, spec.num_shards as u64],
            ranks: spec.ranks() as u64,
            unit_rows,
            planned,
        })?,
        None => Start::beginning(settings, planned),
    };
    Ok((work, start))
}

/// The items the shard reads from `start` on, in order: for a window, those of the rows it
/// carries, then every item from the window's start. (A planned shard's items come from its
/// plan, never from here.)
fn requested(start: &Start) -> (Vec<u64>, u64) {
    match start {
        Start::Rows { item, .. } => (Vec::new(), *item),
        Start::Plan { .. } => (Vec::new(), 0),
        Start::Window(window) => {
            let mut carried: Vec<u64> = window.carried.iter().map(|&[item, _]| item).collect();
            carried.sort_unstable();
            carried.dedup();
            (carried, window.start)
        }
    }
}

/// The shard's items from `start` on, with their units, when the units are known (files).
pub(super) fn file_items(work: &Work, spec: &BatchSpec, start: &Start) -> Vec<(u64, Item)> {
    let (shard, shards) = (spec.shard_index as u64, spec.num_shards as u64);
    let (carried, from) = requested(start);
    let len = work.shard_len(shard, shards).unwrap_or(0);
    carried
        .into_iter()
        .chain(from..len)
        .filter_map(|k| work.item(k, shard, shards).map(|item| (k, item)))
        .collect()
}

/// The rows the shard has left from `start`, of `items` (as [`file_items`] lists them), whose
/// units have `unit_rows` rows.
pub(super) fn rows_left(
    items: &[(u64, Item)],
    unit_rows: impl Fn(u64) -> u64,
    start: &Start,
    spec: &BatchSpec,
) -> Result<u64> {
    let rows_of = |item: &Item| item.row_count(unit_rows(item.unit));
    match start {
        Start::Rows { item, row } => total_rows(items.iter().map(|(k, it)| {
            let rows = rows_of(it);
            if k == item {
                rows.saturating_sub(*row)
            } else {
                rows
            }
        })),
        Start::Window(window) => {
            let from = total_rows(
                items
                    .iter()
                    .filter(|(k, _)| *k >= window.start)
                    .map(|(_, it)| rows_of(it))
                    .chain([window.carried.len() as u64]),
            )?;
            Ok(from.saturating_sub(window.skip.saturating_mul(spec.batch_size as u64)))
        }
        Start::Plan { .. } => total_rows(items.iter().map(|(_, it)| rows_of(it))),
    }
}

/// The shard's items of a stream, whose record batches are its units in order: the batches of
/// other units are read and passed over. An error is kept wherever it falls, so that no shard
/// reads past it unaware.
pub(super) fn in_stream(
    batches: impl Iterator<Item = Result<RecordBatch>> + Send + 'static,
    work: &Work,
    spec: &BatchSpec,
    start: &Start,
) -> Raw {
    let (shard, shards) = (spec.shard_index as u64, spec.num_shards as u64);
    let (carried, from) = requested(start);
    let work = work.clone();
    let mut wanted = carried
        .into_iter()
        .chain(from..u64::MAX)
        .map_while(move |k| work.item(k, shard, shards).map(|item| (k, item)))
        .peekable();
    let mut unit = 0u64;
    Box::new(batches.filter_map(move |batch| {
        let this = unit;
        unit += 1;
        // Items come in ascending units: one whose unit is behind was not in the stream.
        while wanted.next_if(|(_, item)| item.unit < this).is_some() {}
        match batch {
            Err(error) => Some(Err(error)),
            Ok(batch) => {
                let (k, item) = wanted.next_if(|(_, item)| item.unit == this)?;
                Some(Ok((k, item, batch, true)))
            }
        }
    }))
}

/// The record batches of `raw` cut to their items' rows and tagged, from the start's row on:
/// no piece is empty, and the last piece of an item says so. `offset` names an item whose
/// batches start at a later row of its unit (not decoded from its start) and that row.
pub(super) fn select(raw: Raw, start: &Start, offset: Option<(u64, u64)>) -> Pieces {
    let skip = match start {
        Start::Rows { item, row } if *row > 0 => Some((*item, *row)),
        _ => None,
    };
    Box::new(Select {
        raw,
        skip,
        offset,
        item: None,
        at: 0,
        local: 0,
        pending: None,
        out: VecDeque::new(),
    })
}

/// The state of [`select`]: the current item, its unit rows and item rows seen, the piece held
/// back until the next tells whether it is the item's last.
struct Select {
    raw: Raw,
    skip: Option<(u64, u64)>,
    offset: Option<(u64, u64)>,
    item: Option<u64>,
    at: u64,
    local: u64,
    pending: Option<Tagged>,
    out: VecDeque<Result<Tagged>>,
}

impl Select {
    fn hold(&mut self, piece: Tagged) {
        if let Some(previous) = self.pending.replace(piece) {
            self.out.push_back(Ok(previous));
        }
    }

    fn flush(&mut self, last: bool) {
        if let Some(mut piece) = self.pending.take() {
            piece.last |= last;
            self.out.push_back(Ok(piece));
        }
    }

    /// At the end of the current item: refuses a start's row past the item's rows, which a
    /// stream's metadata could not tell when the state was checked (files refuse it there).
    fn end_item(&mut self) {
        if let (Some((item, row)), Some(k)) = (self.skip, self.item)
            && item == k
            && self.local < row
        {
            self.skip = None;
            self.out.push_back(Err(Error::InvalidState {
                reason: format!(
                    "the state's position is row {row} of item {item}, which has {} rows",
                    self.local
                ),
            }));
        }
    }

    fn take(&mut self, k: u64, item: &Item, batch: &RecordBatch, last: bool) {
        if self.item != Some(k) {
            self.end_item();
            self.flush(false);
            self.item = Some(k);
            let from = match self.offset {
                Some((item, row)) if item == k => row,
                _ => 0,
            };
            self.at = from;
            self.local = from;
        }
        let n = batch.num_rows() as u64;
        let all = [[0, u64::MAX]];
        let ranges = item.rows.as_deref().unwrap_or(&all);
        let skip = match self.skip {
            Some((item, row)) if item == k => row,
            _ => 0,
        };
        for &[a, b] in ranges {
            let (lo, hi) = (a.max(self.at), b.min(self.at + n));
            if lo >= hi {
                continue;
            }
            let first = self.local;
            self.local += hi - lo;
            // Rows before the start's row are passed over.
            let cut = skip.saturating_sub(first).min(hi - lo);
            if lo + cut < hi {
                let offset = (lo + cut - self.at) as usize;
                self.hold(Tagged {
                    batch: batch.slice(offset, (hi - lo - cut) as usize),
                    item: k,
                    first: first + cut,
                    last: false,
                });
            }
        }
        self.at += n;
        if last {
            self.end_item();
            self.flush(true);
        }
    }
}

impl Iterator for Select {
    type Item = Result<Tagged>;

    fn next(&mut self) -> Option<Result<Tagged>> {
        loop {
            if let Some(piece) = self.out.pop_front() {
                return Some(piece);
            }
            match self.raw.next() {
                None => {
                    self.end_item();
                    self.flush(false);
                    return self.out.pop_front();
                }
                Some(Err(error)) => {
                    self.flush(false);
                    self.out.push_back(Err(error));
                }
                Some(Ok((k, item, batch, last))) => self.take(k, &item, &batch, last),
            }
        }
    }
}
