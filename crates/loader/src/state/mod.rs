//! Where a stream of batches stands, as a value that can be saved and handed back:
//! [`LoaderState`], what [`Batches::state`](crate::Batches::state) gives and
//! [`BatchSpec::state`](crate::BatchSpec::state) resumes from, and [`merge_states`], which joins
//! the states of every shard of a run into one that any number of new shards resume from.
//!
//! The model: an epoch has one global order of units (IPC record batches, Parquet row groups,
//! the record batches of a stream), the same in every shard. The epoch's work is a list of items
//! (a unit, or some rows of a unit) followed by every unit from some ordinal on ([`Work`]); the
//! items are dealt round-robin to the shards, so shard `t` of `n` reads items `t`, `t + n`, ...
//! A shard's [`Position`] is an index into its own items: the next row in order, or, when rows
//! are shuffled, the window being drawn from (replayed from its generator's state, the rows it
//! carried over and the batches it already gave).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod merge;

pub use merge::merge_states;

/// The format of [`LoaderState`] this build writes and reads; a state of a newer format is
/// refused.
pub const STATE_VERSION: u32 = 1;

/// Where a stream of batches stands: enough to continue it, batch for batch and byte for byte,
/// in a new loader (even in a new process) made with the same source and spec plus this state.
///
/// Plain data: it serialises with serde (JSON, for example), and the Python binding hands it
/// out as a dict of ints, strings and lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoaderState {
    /// The format, [`STATE_VERSION`] when written by this build.
    pub version: u32,
    /// The arguments that fix the order and the batches (the source, batch size, columns,
    /// shuffle, seed, ...), each as text; a loader resumed with other arguments is refused,
    /// naming the first that differs.
    pub config: BTreeMap<String, String>,
    /// The epoch (see [`BatchSpec::epoch`](crate::BatchSpec::epoch)).
    pub epoch: u64,
    /// `[shard_index, num_shards]` of the loader that saved it; `None` for a state made by
    /// [`merge_states`], which any layout of shards resumes from.
    pub shard: Option<[u64; 2]>,
    /// The work of the epoch that the shards share out.
    pub work: Work,
    /// Where this shard stands in its items; `None` at the start.
    pub position: Option<Position>,
}

/// The work of an epoch, dealt round-robin to the shards: `items`, then every unit from
/// `rest_from` on (to the source's end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Work {
    /// Units (ordinals in the epoch's order), in ascending order, each whole or with only some
    /// of its rows.
    pub items: Vec<Item>,
    /// The first unit of the rest, after every unit in `items`.
    pub rest_from: u64,
    /// The number of units in the epoch when the source's metadata tells (files); `None` for
    /// streams.
    pub units: Option<u64>,
}

/// A unit, or some of its rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// The unit's ordinal in the epoch's order.
    pub unit: u64,
    /// Half-open ranges `[start, end)` of the unit's rows, ascending and disjoint; `None` for
    /// every row.
    pub rows: Option<Vec<[u64; 2]>>,
}

/// Where a shard stands in its items (numbered from 0 in the order it reads them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Position {
    /// Rows in order: the next row to read is row `row` (counting the item's rows only) of
    /// item `item`.
    Rows {
        /// The item.
        item: u64,
        /// The row within the item.
        row: u64,
    },
    /// Rows drawn from shuffle windows (or sorted by length): the window that starts at item
    /// `start` with the rows `carried` over from earlier windows, shuffled by the generator
    /// whose state is `rng`, of which `emitted` batches were given.
    Window {
        /// The shuffle generator's state before the window was shuffled.
        rng: u64,
        /// The rows carried over, in the order they had: `[item, row]`.
        carried: Vec<[u64; 2]>,
        /// The first item the window read.
        start: u64,
        /// The rows of each item the window read, from `start` on (empty between windows).
        sizes: Vec<u64>,
        /// The batches of this window already given.
        emitted: u64,
    },
}

impl Work {
    /// The whole epoch: every unit.
    pub(crate) fn all(units: Option<u64>) -> Self {
        Work {
            items: Vec::new(),
            rest_from: 0,
            units,
        }
    }

    /// The item at global index `w` of the dealt sequence, or `None` past the source's end.
    pub(crate) fn global(&self, w: u64) -> Option<Item> {
        if let Some(item) = usize::try_from(w).ok().and_then(|w| self.items.get(w)) {
            return Some(item.clone());
        }
        let unit = self.rest_from.checked_add(w - self.items.len() as u64)?;
        if self.units.is_some_and(|units| unit >= units) {
            return None;
        }
        Some(Item { unit, rows: None })
    }

    /// Item `k` of shard `shard` of `num_shards`.
    pub(crate) fn item(&self, k: u64, shard: u64, num_shards: u64) -> Option<Item> {
        let w = k.checked_mul(num_shards)?.checked_add(shard)?;
        self.global(w)
    }

    /// The number of items of shard `shard` of `num_shards`, when the units are known.
    pub(crate) fn shard_len(&self, shard: u64, num_shards: u64) -> Option<u64> {
        let units = self.units?;
        let total = self.items.len() as u64 + units.saturating_sub(self.rest_from);
        Some(total.saturating_sub(shard).div_ceil(num_shards))
    }

    /// Checks the items against the source's units: ascending, in range, ranges well formed.
    fn check(&self, units: Option<u64>) -> Result<()> {
        if self.units != units {
            return bad(format!(
                "the state is of a source of {} units; this source has {}",
                show_units(self.units),
                show_units(units)
            ));
        }
        let mut previous: Option<u64> = None;
        for item in &self.items {
            if previous.is_some_and(|p| item.unit <= p) {
                return bad(format!(
                    "work item unit {} follows unit {}; expected ascending units",
                    item.unit,
                    previous.unwrap_or(0)
                ));
            }
            previous = Some(item.unit);
            if let Some(ranges) = &item.rows {
                let mut end = 0;
                for &[start, stop] in ranges {
                    if start < end || stop <= start {
                        return bad(format!(
                            "the rows of unit {} are [{start}, {stop}) after row {end}; expected \
                             ascending, non-empty ranges",
                            item.unit
                        ));
                    }
                    end = stop;
                }
            }
        }
        if let Some(p) = previous.filter(|&p| p >= self.rest_from) {
            return bad(format!(
                "work item unit {p} is not before rest_from {}",
                self.rest_from
            ));
        }
        if let Some(units) = units {
            if let Some(p) = previous.filter(|&p| p >= units) {
                return bad(format!(
                    "work item unit {p} is out of range; the source has {units} units"
                ));
            }
            if self.rest_from > units {
                return bad(format!(
                    "rest_from is {}; the source has {units} units",
                    self.rest_from
                ));
            }
        }
        Ok(())
    }
}

fn show_units(units: Option<u64>) -> String {
    units.map_or("an unknown number of".to_string(), |n| n.to_string())
}

/// The error for a state that cannot be resumed.
fn bad<T>(reason: String) -> Result<T> {
    Err(Error::InvalidState { reason })
}

/// Where a resumed shard starts.
#[derive(Debug, Clone)]
pub(crate) enum Start {
    /// Rows in order from `row` of item `item`.
    Rows { item: u64, row: u64 },
    /// Shuffle windows, from the window record.
    Window(WindowStart),
}

/// A shuffled stream's start: the generator, the rows carried over, the first item to read, and
/// the batches of the first window to pass over.
#[derive(Debug, Clone)]
pub(crate) struct WindowStart {
    pub(crate) rng: Option<u64>,
    pub(crate) carried: Vec<[u64; 2]>,
    pub(crate) start: u64,
    pub(crate) skip: u64,
}

impl LoaderState {
    /// Checks this state against the loader about to resume it (its `config`, `epoch`, `shard`
    /// `[index, count]`, whether it draws rows from windows, and its units) and returns where the
    /// shard starts.
    pub(crate) fn start_for(
        &self,
        epoch: u64,
        [shard, num_shards]: [u64; 2],
        windowed: bool,
        config: &BTreeMap<String, String>,
        units: Option<u64>,
    ) -> Result<Start> {
        if self.version > STATE_VERSION {
            return bad(format!(
                "the state is of format version {}, newer than this build reads ({STATE_VERSION}); \
                 expected a state saved by this or an older version",
                self.version
            ));
        }
        if self.version == 0 {
            return bad("the state's version is 0; expected at least 1".to_string());
        }
        for (name, value) in config {
            let saved = self.config.get(name);
            if saved != Some(value) {
                return bad(format!(
                    "the state was saved with {name} = {}; this loader has {name} = {value}",
                    saved.map_or("(missing)", String::as_str)
                ));
            }
        }
        if let Some(name) = self.config.keys().find(|name| !config.contains_key(*name)) {
            return bad(format!(
                "the state has a setting {name:?} that this loader does not know"
            ));
        }
        if self.epoch != epoch {
            return bad(format!(
                "the state was saved in epoch {}; this loader reads epoch {epoch}",
                self.epoch
            ));
        }
        if let Some([saved_shard, saved_shards]) = self.shard
            && (saved_shard, saved_shards) != (shard, num_shards)
        {
            return bad(format!(
                "the state was saved by shard {saved_shard} of {saved_shards}; this loader is \
                 shard {shard} of {num_shards} (to resume with another number of shards, merge \
                 the states of every shard with merge_states)"
            ));
        }
        self.work.check(units)?;
        let len = self.work.shard_len(shard, num_shards);
        let item_rows =
            |k: u64| -> Option<u64> { item_len(&self.work.item(k, shard, num_shards)?) };
        let check_item = |k: u64, what: &str| -> Result<()> {
            match len {
                Some(len) if k > len => bad(format!(
                    "the state's {what} is item {k}; this shard has {len} items"
                )),
                _ => Ok(()),
            }
        };
        match (&self.position, windowed) {
            (None, false) => Ok(Start::Rows { item: 0, row: 0 }),
            (None, true) => Ok(Start::Window(WindowStart {
                rng: None,
                carried: Vec::new(),
                start: 0,
                skip: 0,
            })),
            (Some(Position::Rows { item, row }), false) => {
                check_item(*item, "position")?;
                if let Some(rows) = item_rows(*item).filter(|rows| row > rows) {
                    return bad(format!(
                        "the state's position is row {row} of item {item}, which has {rows} rows"
                    ));
                }
                Ok(Start::Rows {
                    item: *item,
                    row: *row,
                })
            }
            (
                Some(Position::Window {
                    rng,
                    carried,
                    start,
                    sizes,
                    emitted,
                }),
                true,
            ) => {
                check_item(*start, "window start")?;
                if let Some(len) = len
                    && sizes.len() as u64 > len - start
                {
                    return bad(format!(
                        "the state's window reads {} items from item {start}; this shard has \
                         {len} items",
                        sizes.len()
                    ));
                }
                if let Some(&[item, _]) = carried.iter().find(|[item, _]| item >= start) {
                    return bad(format!(
                        "the state carries a row of item {item}, not before the window's start \
                         {start}"
                    ));
                }
                let total: u128 =
                    sizes.iter().map(|&s| u128::from(s)).sum::<u128>() + carried.len() as u128;
                if u128::from(*emitted) > total {
                    return bad(format!(
                        "the state's window gave {emitted} batches of at most {total} rows"
                    ));
                }
                Ok(Start::Window(WindowStart {
                    rng: Some(*rng),
                    carried: carried.clone(),
                    start: *start,
                    skip: *emitted,
                }))
            }
            (Some(_), windowed) => bad(format!(
                "the state's position is of a stream {} rows by window; this loader {}",
                if windowed { "not drawing" } else { "drawing" },
                if windowed {
                    "shuffles or buckets"
                } else {
                    "reads in order"
                }
            )),
        }
    }
}

/// The number of rows of `item` when its ranges say (an open range does not).
pub(crate) fn item_len(item: &Item) -> Option<u64> {
    let ranges = item.rows.as_ref()?;
    if ranges.last().is_some_and(|r| r[1] == u64::MAX) {
        return None;
    }
    Some(ranges.iter().map(|[a, b]| b - a).sum())
}

#[cfg(test)]
mod tests;
