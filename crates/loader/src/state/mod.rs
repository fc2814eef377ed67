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
//! carried over and the batches it already gave), or, when the epoch's batches are planned
//! before reading (several shards under a token budget or length buckets, or whose deal of
//! units would leave their batch counts uneven), the number of the shard's planned batches
//! given.
//!
//! The files: `settings.rs` holds what fixes the batches ([`Settings`], with the source's
//! identity) and its comparison; `start.rs` checks a state against the loader that resumes it,
//! every number against the source's real counts before anything is sized by it; `merge.rs`
//! joins shards' states within bounds the states themselves back; `ranges.rs` has the row
//! ranges they share. This module imports nothing of the loader's options: the source plan makes
//! the [`Settings`] from a [`BatchSpec`](crate::BatchSpec).

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod bounds;
mod concat;
mod merge;
mod merge_plan;
mod ranges;
mod settings;
mod start;

pub use bounds::{MAX_MERGED_ENTRIES, MAX_PLANNED_BATCHES, MAX_PLANNED_ROWS, MAX_REPLAY_ROWS};
pub use concat::{CarriedRow, ConcatCarry, ConcatPosition};
pub use merge::merge_states;
pub use settings::{FileIdentity, SequenceSettings, Settings, SourceIdentity, SourceKind};
pub(crate) use start::{Resuming, Start, WindowStart};

/// The format of [`LoaderState`] this build writes; it reads this one and, where nothing
/// changed, the one before. A state of another format is refused: a newer one because this
/// build cannot know it, an older one because it records the settings in a form this build no
/// longer reads, or its position in batches this build cuts differently.
///
/// Format 4 records the ranks among the shards ([`LoaderState::ranks`]): a planned epoch gives
/// every rank as many batches and deals each rank's batches to its DataLoader workers in runs,
/// where format 3 gave every shard as many. A format 3 state reads as format 4 of one rank per
/// shard, which is what its plan was.
///
/// Format 3 deals an epoch planned by rows alone (shards whose deal of units was uneven) as
/// runs of rows cut into full batches and a short last one on every shard; format 2 split the
/// epoch's largest batches, so its states of such an epoch (those whose work records the units'
/// rows) are refused, and its other states read as format 3. Format 2 records the settings as
/// typed values ([`Settings`]) and the source by the identity of its files (sizes,
/// modification times or ETags, footer digests); format 1 recorded them as text.
pub const STATE_VERSION: u32 = 4;

/// Where a stream of batches stands: enough to continue it, batch for batch and byte for byte,
/// in a new loader (even in a new process) made with the same source and spec plus this state.
///
/// Plain data: it serialises with serde (JSON, for example), and the Python binding hands it
/// out as a dict of ints, strings, lists and dicts. Deserialising reads the format version
/// first, so that a state of another format is refused as such rather than by a field it lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Versioned")]
pub struct LoaderState {
    /// The format, [`STATE_VERSION`] when written by this build.
    pub version: u32,
    /// The settings that fix the order and the batches, the source's identity among them; a
    /// loader resumed with other settings, or over other data, is refused, naming the first
    /// setting that differs and both values.
    pub settings: Settings,
    /// The epoch (see [`BatchSpec::epoch`](crate::BatchSpec::epoch)).
    pub epoch: u64,
    /// `[shard_index, num_shards]` of the loader that saved it; `None` for a state made by
    /// [`merge_states`], which any layout of shards resumes from.
    pub shard: Option<[u64; 2]>,
    /// The ranks of a distributed run among the shards of the loader that saved it (see
    /// [`BatchSpec::num_ranks`](crate::BatchSpec::num_ranks)), each rank's other shards being
    /// its DataLoader workers; `None` for a merged state, and for a state of format 3, whose
    /// every shard was a rank of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u64>,
    /// The work of the epoch that the shards share out.
    pub work: Work,
    /// Where this shard stands in its items; `None` at the start.
    pub position: Option<Position>,
    /// Where the packing of a `"concat"` sequence stands; `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concat: Option<ConcatPosition>,
}

/// A state as read: its version first, then the fields of that version.
#[derive(Deserialize)]
struct Versioned {
    version: u32,
    #[serde(flatten)]
    fields: serde_json::Map<String, serde_json::Value>,
}

/// The fields of a state of format [`STATE_VERSION`] besides the version.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    settings: Settings,
    epoch: u64,
    shard: Option<[u64; 2]>,
    #[serde(default)]
    ranks: Option<u64>,
    work: Work,
    position: Option<Position>,
    #[serde(default)]
    concat: Option<ConcatPosition>,
}

impl TryFrom<Versioned> for LoaderState {
    type Error = String;

    fn try_from(read: Versioned) -> std::result::Result<Self, String> {
        check_version(read.version, None)?;
        let fields: Fields = serde_json::from_value(serde_json::Value::Object(read.fields))
            .map_err(|error| error.to_string())?;
        check_version(read.version, Some(&fields.work))?;
        // Format 3 recorded no ranks (one per shard); a later state of a shard must say them,
        // or a merge would replay another plan than the one its batches came from.
        if read.version == 3 && fields.ranks.is_some() {
            return Err(
                "the state of format 3 has the key \"ranks\", which format 3 does not record; \
                 expected the state as the loader gave it"
                    .to_string(),
            );
        }
        if read.version > 3 && fields.shard.is_some() && fields.ranks.is_none() {
            return Err(format!(
                "the state of a shard lacks the key \"ranks\" (the ranks among its shards), \
                 which format {} records; expected the state as the loader gave it",
                read.version
            ));
        }
        Ok(LoaderState {
            version: read.version,
            settings: fields.settings,
            epoch: fields.epoch,
            shard: fields.shard,
            ranks: fields.ranks,
            work: fields.work,
            position: fields.position,
            concat: fields.concat,
        })
    }
}

/// Refuses a format other than [`STATE_VERSION`], saying what to do, except a format 2 state
/// whose `work` (when known) planned no epoch by rows.
fn check_version(version: u32, work: Option<&Work>) -> std::result::Result<(), String> {
    let planned_by_rows = work.is_some_and(|work| work.unit_rows.is_some());
    check_state_format(u64::from(version), planned_by_rows)
        .map_err(|reason| format!("the state {reason}"))
}

/// Whether this build reads a saved state of format `version` (see [`STATE_VERSION`]), whose
/// work records its units' rows when `planned_by_rows`; the reason if not, to follow the name of
/// the state ("is of format version 1, ...").
pub fn check_state_format(version: u64, planned_by_rows: bool) -> std::result::Result<(), String> {
    if version > u64::from(STATE_VERSION) {
        Err(format!(
            "is of format version {version}, newer than this build reads ({STATE_VERSION}); \
             resume with the version of arrow-dlpack that saved it"
        ))
    } else if version == 2 && planned_by_rows {
        Err(format!(
            "is of format version 2, saved by an older version of arrow-dlpack in an epoch \
             planned by rows, whose batches this build (format {STATE_VERSION}) cuts \
             differently: start the epoch again without it, or resume with the version that \
             saved it"
        ))
    } else if version < 2 {
        Err(format!(
            "is of format version {version}, saved by an older version of arrow-dlpack; this \
             build reads formats 2 to {STATE_VERSION}: start the epoch again without it, or \
             resume with the version that saved it"
        ))
    } else {
        Ok(())
    }
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
    /// The rows of each unit of the epoch's order, when the epoch is planned by rows alone (no
    /// budget, no buckets), which are all its plan is cut from: [`merge_states`] works the plan
    /// out again from them, and a source whose units hold other rows is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_rows: Option<Vec<u64>>,
}

/// A unit, or some of its rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// The unit's ordinal in the epoch's order.
    pub unit: u64,
    /// Half-open ranges `[start, end)` of the unit's rows, ascending and disjoint; `None` for
    /// every row. An `end` of `2**64 - 1` reaches the unit's last row (a merged state, which
    /// does not know the units' sizes, writes it).
    pub rows: Option<Vec<[u64; 2]>>,
}

impl Item {
    /// The rows this item holds of its unit, which has `unit_rows` rows.
    pub(crate) fn row_count(&self, unit_rows: u64) -> u64 {
        match &self.rows {
            None => unit_rows,
            Some(ranges) => ranges
                .iter()
                .map(|&[a, b]| b.min(unit_rows).saturating_sub(a))
                .sum(),
        }
    }
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
        /// The rows carried over, in the order they had: `[item, row]`; fewer than a batch,
        /// each once.
        carried: Vec<[u64; 2]>,
        /// The first item the window read.
        start: u64,
        /// The rows of each item the window read, from `start` on (empty between windows).
        sizes: Vec<u64>,
        /// The batches of this window already given.
        emitted: u64,
    },
    /// Batches of a planned epoch (several shards under a token budget or length buckets, or
    /// whose deal of units would leave their batch counts uneven; every shard works out the
    /// epoch's batches from the rows' lengths or counts before reading): the next batch
    /// is batch `batch` of the shard's planned batches. The plan itself is not saved: it is
    /// worked out again, the same, from the source, the settings, the epoch and the shards.
    Plan {
        /// The batches of the shard's plan already given.
        batch: u64,
    },
}

impl Work {
    /// The whole epoch: every unit.
    pub(crate) fn all(units: Option<u64>) -> Self {
        Work {
            items: Vec::new(),
            rest_from: 0,
            units,
            unit_rows: None,
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

    /// The number of items of the dealt sequence, when the units are known.
    pub(crate) fn total(&self) -> Option<u64> {
        let units = self.units?;
        Some(self.items.len() as u64 + units.saturating_sub(self.rest_from))
    }

    /// The number of items of shard `shard` of `num_shards`, when the units are known.
    pub(crate) fn shard_len(&self, shard: u64, num_shards: u64) -> Option<u64> {
        Some(self.total()?.saturating_sub(shard).div_ceil(num_shards))
    }

    /// Checks the items on their own and against the source's units: ascending, in range,
    /// ranges well formed; with `unit_rows` (each unit's rows, when the source tells), every
    /// range inside its unit (an end of `2**64 - 1` reaches the unit's end).
    fn check(&self, units: Option<u64>, unit_rows: Option<&[u64]>) -> Result<()> {
        if self.units != units {
            return bad(format!(
                "the state is of a source of {} units; this source has {} units",
                show_units(self.units),
                show_units(units)
            ));
        }
        if let (Some(saved), Some(rows)) = (&self.unit_rows, unit_rows)
            && saved.as_slice() != rows
        {
            return bad(format!(
                "the state's work was planned by the rows of {} units, which differ from this \
                 source's (the same rows in other record batches, or another source of the same \
                 schema); expected the source the state was saved with",
                saved.len()
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
            let Some(ranges) = &item.rows else { continue };
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
            let rows =
                unit_rows.and_then(|rows| rows.get(usize::try_from(item.unit).ok()?).copied());
            if let (Some(rows), Some(&[start, stop])) = (rows, ranges.last())
                && (start > rows || (stop > rows && stop != u64::MAX))
            {
                return bad(format!(
                    "the rows of unit {} reach [{start}, {stop}); the unit has {rows} rows",
                    item.unit
                ));
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

#[cfg(test)]
mod tests;
