//! The merge of the states of an epoch planned by rows alone (see [`Position::Plan`]): the plan
//! is worked out again from the units' rows its work records ([`Work::unit_rows`]), the
//! settings, the epoch and the numbers of shards and ranks (per rank, where the loaders planned
//! each rank's own units for its DataLoader workers), each shard's given batches are listed from
//! it, and the work left is every row of the epoch not in one of them.
//!
//! The replay counts every window's rows and lists those of the batches given; it is bounded
//! before anything is allocated: every unit and every window of at most [`MAX_REPLAY_ROWS`]
//! rows, the epoch of at most [`MAX_PLANNED_ROWS`].

use std::collections::BTreeMap;

use super::bounds::{MAX_MERGED_ENTRIES, MAX_PLANNED_BATCHES, MAX_PLANNED_ROWS, MAX_REPLAY_ROWS};
use super::ranges::remove_rows;
use super::{Item, LoaderState, Position, Work, bad};
use crate::Result;
use crate::rng::row_stream;
use crate::sequences::plan::{
    EpochPlan, PlanItem, PlanOptions, SourceLengths, rank_items, row_batches, uneven_ranks,
};
use crate::sequences::tokens::Cutting;

/// The work left by `states` (one per shard, checked to be of one run), when a shard is past
/// the first batch of a planned epoch; `None` when none is (the merge is then the same as
/// before any batch).
pub(super) fn planned_work_left(states: &[LoaderState]) -> Result<Option<Work>> {
    let Some(first) = states.first() else {
        return Ok(None);
    };
    // Past the first batch of a planned epoch, a merge needs the plan again; the states are of
    // one run, so they share one work and its units' rows.
    let Some((shard, batch)) = states.iter().find_map(|state| match state.position {
        Some(Position::Plan { batch }) if batch > 0 => {
            Some((state.shard.unwrap_or_default()[0], batch))
        }
        _ => None,
    }) else {
        return Ok(None);
    };
    let Some(unit_rows) = &first.work.unit_rows else {
        let settings = &first.settings;
        if settings.max_tokens.is_some() || settings.bucket_by_length {
            return bad(format!(
                "the state of shard {shard} is {batch} batches into an epoch planned from its \
                 rows' lengths (a token budget or length buckets), so a merge cannot tell which \
                 rows are left; resume with the same shards, or start the epoch again"
            ));
        }
        return bad(format!(
            "the state of shard {shard} is {batch} batches into an epoch planned by rows, and \
             its work records no rows of its units (work.unit_rows), which a merge needs to tell \
             which rows are left; expected the states as the loaders gave them"
        ));
    };
    if let Some(state) = states.iter().find(|state| {
        matches!(
            state.position,
            Some(Position::Rows { .. } | Position::Window { .. })
        )
    }) {
        return bad(format!(
            "the state of shard {} reads its units as dealt, and another's is in a planned \
             epoch; expected the states of one run",
            state.shard.unwrap_or_default()[0]
        ));
    }
    let settings = &first.settings;
    if settings.max_tokens.is_some() || settings.bucket_by_length {
        return bad(
            "the state of an epoch cut by a token budget or length buckets records its units' \
             rows; expected a plan cut by rows alone"
                .to_string(),
        );
    }
    let work = &first.work;
    if work.units != Some(unit_rows.len() as u64) {
        return bad(format!(
            "the state's work records the rows of {} units, and has {} units",
            unit_rows.len(),
            work.units
                .map_or("no count of".to_string(), |units| units.to_string())
        ));
    }
    let total = check_replay(settings.batch_size, settings.buffer_size, unit_rows)?;
    reserve_for_replay(total)?;
    let usize_of = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
    let work_items: Vec<Item> = (0..work.total().unwrap_or(0))
        .map_while(|w| work.global(w))
        .collect();
    let item_rows: Vec<u64> = work_items
        .iter()
        .map(|item| item.row_count(unit_rows.get(usize_of(item.unit)).copied().unwrap_or(0)))
        .collect();
    let items: Vec<PlanItem> = work_items
        .into_iter()
        .map(|item| PlanItem {
            unit: usize_of(item.unit),
            rows: item.rows,
        })
        .collect();
    let lengths = SourceLengths::of_rows(unit_rows.iter().copied())?;
    let shards = states.len();
    let ranks = usize_of(first.layout_ranks()?.unwrap_or_default()).max(1);
    // As the loaders planned it (see the source's `per_rank`): with DataLoader workers over an
    // even deal of units to the ranks, each rank's plan is of its own items, over its workers.
    let batch_size = usize_of(settings.batch_size);
    let per_rank = shards > ranks
        && !uneven_ranks(&item_rows, ranks, |rows| {
            row_batches(rows, batch_size, settings.drop_last)
        });
    let options = |num_shards, num_ranks, loader_stream| PlanOptions {
        cutting: Cutting {
            max_tokens: None,
            batch_size,
            bucket_by_length: false,
        },
        sequences: &[],
        shuffle: settings.shuffle,
        seed: settings.seed.wrapping_add(first.epoch),
        buffer_size: usize_of(settings.buffer_size),
        drop_last: settings.drop_last,
        num_shards,
        loader_stream,
        num_ranks,
    };
    // Per rank, shuffled, each rank's windows are cut as its loader cuts them (its stream).
    let (option_sets, rank_items): (Vec<PlanOptions<'_>>, Vec<Vec<PlanItem>>) = if per_rank {
        (0..ranks)
            .map(|rank| {
                let stream = settings.shuffle.then(|| row_stream(rank as u64));
                (
                    options(shards / ranks, 1, stream),
                    rank_items(&items, rank, ranks),
                )
            })
            .unzip()
    } else {
        (vec![options(shards, ranks, None)], vec![items.clone()])
    };
    let plans = option_sets
        .iter()
        .zip(&rank_items)
        .map(|(options, items)| EpochPlan::new(options, &lengths, items))
        .collect::<Result<Vec<_>>>()?;
    // The rows given, by unit.
    let mut given: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for state in states {
        let Some(Position::Plan { batch, .. }) = state.position else {
            continue;
        };
        let [shard, _] = state.shard.unwrap_or_default();
        let (plan, shard_of_plan) = match per_rank {
            true => (&plans[usize_of(shard) % ranks], usize_of(shard) / ranks),
            false => (&plans[0], usize_of(shard)),
        };
        let count = plan.shard_count(shard_of_plan);
        if batch > count {
            return bad(format!(
                "the state of shard {shard} is {batch} batches into its plan; the plan gives \
                 the shard {count} batches"
            ));
        }
        let listed = plan.batches(shard_of_plan, 0..batch)?;
        for &(read, row) in &listed.rows {
            given
                .entry(plan.unit_of(&listed, read))
                .or_default()
                .push(u64::from(row));
        }
    }
    let mut left = Vec::new();
    let mut entries: u64 = 0;
    for item in &items {
        let all = unit_rows.get(item.unit).copied().unwrap_or(0);
        let whole = [[0, all]];
        let ranges = item.rows.as_deref().unwrap_or(&whole);
        let rows = match given.get_mut(&item.unit) {
            None => item.rows.clone(),
            Some(rows) => {
                rows.sort_unstable();
                let rest = remove_rows(ranges, all, rows);
                if rest.is_empty() {
                    continue;
                }
                entries += rest.len() as u64;
                Some(rest)
            }
        };
        entries += 1;
        if entries > MAX_MERGED_ENTRIES + work.items.len() as u64 {
            return bad(format!(
                "the rows left of the planned epoch take more than {MAX_MERGED_ENTRIES} items \
                 and ranges beyond the states' own: resume with the same shards instead"
            ));
        }
        left.push(Item {
            unit: item.unit as u64,
            rows,
        });
    }
    Ok(Some(Work {
        items: left,
        rest_from: work.units.unwrap_or(0),
        units: work.units,
        unit_rows: Some(unit_rows.clone()),
    }))
}

/// Refuses a replay that would hold a window of more than [`MAX_REPLAY_ROWS`] rows, pass over
/// more than [`MAX_PLANNED_ROWS`], or plan more than [`MAX_PLANNED_BATCHES`] batches of
/// `batch_size`, before anything is allocated for it: `max(batch_size, buffer_size)` rows (at
/// least) make a window, plus those of the unit that filled it.
fn check_replay(batch_size: u64, buffer_size: u64, unit_rows: &[u64]) -> Result<u64> {
    let window = batch_size.max(buffer_size);
    let largest = unit_rows.iter().copied().max().unwrap_or(0);
    let total = unit_rows
        .iter()
        .try_fold(0u64, |sum, &rows| sum.checked_add(rows))
        .unwrap_or(u64::MAX);
    let held = window.saturating_add(largest).min(total);
    let batches = total.div_ceil(batch_size.max(1));
    if held > MAX_REPLAY_ROWS || total > MAX_PLANNED_ROWS || batches > MAX_PLANNED_BATCHES {
        return bad(format!(
            "the planned epoch's replay would pass over {total} rows in windows of up to \
             {held}, in {batches} batches; a merge replays at most {MAX_PLANNED_ROWS} rows in \
             windows of at most {MAX_REPLAY_ROWS}, in at most {MAX_PLANNED_BATCHES} batches: \
             resume with the same shards instead"
        ));
    }
    Ok(total)
}

/// The bytes a replay holds per row of the epoch, at most: the row in the listing of the
/// batches given and among the rows given of its unit, and the rows left.
const BYTES_PER_ROW: usize = 24;

/// Makes sure that a replay over `rows` rows can hold what it lists, before it starts: the
/// memory is reserved, then freed for the replay to use, so that a merge larger than the
/// process may allocate is an out-of-memory error rather than an abort midway.
fn reserve_for_replay(rows: u64) -> Result<()> {
    let bytes = usize::try_from(rows)
        .unwrap_or(usize::MAX)
        .saturating_mul(BYTES_PER_ROW);
    crate::memory::ensure_available(bytes)
}
