//! [`merge_states`]: the states of every shard of a run joined into one state of the work left,
//! which any number of new shards resume from.
//!
//! A merge has no source to count rows against, so its cost is bounded by what the states
//! themselves back, checked before anything is allocated: a window's rows by the window's own
//! rules and at most [`MAX_REPLAY_ROWS`] replayed, the merged state at most
//! [`MAX_MERGED_ENTRIES`] items and ranges beyond those the states list. The merged state's
//! numbers are checked against the source's real counts when a loader resumes it.

use std::collections::BTreeMap;

use super::bounds::{MAX_MERGED_ENTRIES, MAX_REPLAY_ROWS};
use super::merge_plan::planned_work_left;
use super::ranges::{drop_rows, item_len, join_ranges, unit_ranges, unit_row};
use super::start::{check_carried, check_emitted, check_window_size};
use super::{Item, LoaderState, Position, STATE_VERSION, Work, bad, check_version};
use crate::Result;
use crate::rng::Rng;

/// Joins the states of every shard of a run (`shard` `0..n`, each once, all of one epoch and
/// one configuration) into one state of the work left: each remaining row once, whatever shard
/// had it. Resumed by any number of shards, they read every remaining row exactly once, in an
/// order that differs from the uninterrupted run's.
///
/// The rows left in a shuffle window are worked out by replaying the window's shuffle from the
/// sizes it records; a state saved inside a window whose batches are cut by tokens or sorted by
/// length (which only the data decide) is refused, and so is a state of an epoch planned from
/// its rows' lengths after its first batch (see [`Position::Plan`]); an epoch planned by rows
/// alone is worked out again from the units' rows its states record. A window of more than
/// [`MAX_REPLAY_ROWS`] rows, or a merged state of more than [`MAX_MERGED_ENTRIES`] new items and
/// ranges (shards that far apart), is refused before anything is allocated for it.
pub fn merge_states(states: &[LoaderState]) -> Result<LoaderState> {
    let Some(first) = states.first() else {
        return bad("there are no states to merge; expected the state of every shard".to_string());
    };
    let num_shards = states.len() as u64;
    check_one_run(states)?;
    // The rows a concat packing carries mix the documents of one shard: they cannot be dealt to
    // other shards.
    if states.iter().any(|state| state.concat.is_some()) {
        return bad(
            "the states are of a \"concat\" sequence, whose packed rows carried between batches \
             belong to their shard; expected states without one (resume each shard with its own \
             state)"
                .to_string(),
        );
    }
    let work = &first.work;
    work.check(work.units, None)?;
    let settings = &first.settings;
    if settings.batch_size == 0 {
        return bad("the state's batch_size is 0; expected at least 1".to_string());
    }
    if let Some(left) = planned_work_left(states)? {
        return Ok(merged(first, left));
    }
    let windowed = settings.shuffle || settings.bucket_by_length;
    // The rows left of partly read units, as ranges by unit; the first unstarted global index
    // of each shard; and the ranges made so far, for the bound.
    let mut partial: BTreeMap<u64, Vec<[u64; 2]>> = BTreeMap::new();
    let mut first_unstarted = vec![0u64; states.len()];
    let mut entries: u64 = 0;
    for state in states {
        let [shard, _] = state.shard.unwrap_or_default();
        let shard_len = work.shard_len(shard, num_shards);
        let item_of = |k: u64| -> Result<Item> {
            if let Some(len) = shard_len.filter(|&len| k >= len) {
                return bad(format!(
                    "the state of shard {shard} names its item {k}; the shard has {len} items"
                ));
            }
            match work.item(k, shard, num_shards) {
                Some(item) => Ok(item),
                None => bad(format!(
                    "item {k} of shard {shard} is past the end of the source"
                )),
            }
        };
        let is_window = matches!(state.position, Some(Position::Window { .. }));
        let is_plan = matches!(state.position, Some(Position::Plan { .. }));
        if state.position.is_some() && !is_plan && is_window != windowed {
            return bad(format!(
                "the state of shard {shard} has a position {} rows by window, and its settings \
                 {}",
                if windowed { "not drawing" } else { "drawing" },
                if windowed {
                    "shuffle or bucket"
                } else {
                    "read in order"
                }
            ));
        }
        let next = match &state.position {
            // A plan past its first batch was merged by `planned_work_left` above.
            None | Some(Position::Plan { .. }) => 0,
            Some(Position::Rows { item, row }) if *row == 0 => {
                if let Some(len) = shard_len.filter(|&len| *item > len) {
                    return bad(format!(
                        "the state of shard {shard} is at its item {item}; the shard has {len} \
                         items"
                    ));
                }
                *item
            }
            // No unit has 2^64 - 1 rows: the rest of such an item would be empty, and its
            // rows lost, where a resume refuses the position.
            Some(Position::Rows { item, row }) if *row == u64::MAX => {
                return bad(format!(
                    "the state of shard {shard} is at row {row} of its item {item}, past the rows \
                     any unit has"
                ));
            }
            Some(Position::Rows { item, row }) => {
                let left = item_of(*item)?;
                if let Some(rows) = item_len(&left).filter(|rows| row > rows) {
                    return bad(format!(
                        "the state of shard {shard} is at row {row} of its item {item}, which \
                         has {rows} rows"
                    ));
                }
                let ranges = left.rows.clone().unwrap_or_else(|| vec![[0, u64::MAX]]);
                let rest = drop_rows(&ranges, *row);
                entries += rest.len() as u64;
                partial.entry(left.unit).or_default().extend(rest);
                past(*item, || {
                    format!("the state of shard {shard} is at its item")
                })?
            }
            Some(Position::Window {
                rng,
                carried,
                start,
                sizes,
                emitted,
            }) => {
                let window = Window {
                    rng: *rng,
                    carried,
                    start: *start,
                    sizes,
                    emitted: *emitted,
                };
                window.left(state, &item_of, &mut partial, &mut entries)?;
                start.saturating_add(sizes.len() as u64)
            }
        };
        first_unstarted[shard as usize] = next.saturating_mul(num_shards).saturating_add(shard);
    }
    // Unstarted items: those of each shard from its first unstarted index on; below the largest
    // such index they are listed, from it on they are the rest. Counted before they are listed.
    let listed = work.items.len() as u64;
    let bound = first_unstarted
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(listed);
    let limit = bound.min(work.total().unwrap_or(u64::MAX));
    let unstarted: u128 = first_unstarted
        .iter()
        .filter(|&&from| from < limit)
        .map(|&from| u128::from((limit - from).div_ceil(num_shards)))
        .sum();
    if unstarted + u128::from(entries) > u128::from(MAX_MERGED_ENTRIES) + u128::from(listed) {
        return bad(format!(
            "the shards' positions leave {unstarted} items and {entries} row ranges to list \
             (shard positions far apart, or windows read in part); a merged state lists at most \
             {MAX_MERGED_ENTRIES} beyond the states' own: resume with the same shards instead"
        ));
    }
    let mut items: BTreeMap<u64, Item> = BTreeMap::new();
    for &from in &first_unstarted {
        let mut w = from;
        while w < limit {
            let Some(item) = work.global(w) else { break };
            items.insert(item.unit, item);
            w += num_shards;
        }
    }
    let mut rest_from = work.rest_from.saturating_add(bound - listed);
    if let Some(units) = work.units {
        rest_from = rest_from.min(units);
    }
    // The partly read units' rows, joined with any of their rows still unstarted.
    for (unit, mut ranges) in partial {
        if let Some(item) = items.get(&unit) {
            ranges.extend(item.rows.clone().unwrap_or_else(|| vec![[0, u64::MAX]]));
        }
        let ranges = join_ranges(ranges);
        if ranges.is_empty() {
            continue;
        }
        items.insert(
            unit,
            Item {
                unit,
                rows: Some(ranges),
            },
        );
    }
    let items: Vec<Item> = items.into_values().collect();
    let after_items = match items.last() {
        Some(item) => past(item.unit, || "a state's work names unit".to_string())?,
        None => 0,
    };
    let rest_from = rest_from.max(after_items);
    Ok(merged(
        first,
        Work {
            items,
            rest_from,
            units: work.units,
            unit_rows: None,
        },
    ))
}

/// The merged state of the run of `first`, whose work left is `work`.
fn merged(first: &LoaderState, work: Work) -> LoaderState {
    LoaderState {
        version: STATE_VERSION,
        settings: first.settings.clone(),
        epoch: first.epoch,
        shard: None,
        ranks: None,
        work,
        position: None,
        concat: None,
    }
}

/// Refuses states that are not one of each shard of one run: the same format, settings, epoch,
/// work and ranks, shards `0..n` once each.
fn check_one_run(states: &[LoaderState]) -> Result<()> {
    let Some(first) = states.first() else {
        return Ok(());
    };
    let num_shards = states.len() as u64;
    let mut seen = vec![false; states.len()];
    // Every state of the same run first: states of two sources (or settings) are said to be
    // so, rather than miscounted as too few shards of one.
    for state in states {
        if let Err(reason) = check_version(state.version, Some(&state.work)) {
            return bad(reason);
        }
        if let Some(difference) = first.settings.difference(&state.settings) {
            return bad(format!(
                "the states were saved with different settings ({difference}; saved is the \
                 first state's, given another's); expected the states of one run"
            ));
        }
        if state.epoch != first.epoch {
            return bad(format!(
                "the states are of epochs {} and {}; expected one epoch",
                first.epoch, state.epoch
            ));
        }
        if state.work != first.work {
            return bad(
                "the states share out different work; expected the states of one run".to_string(),
            );
        }
    }
    for state in states {
        let Some([shard, shards]) = state.shard else {
            return bad("a state is already merged; expected the states of the shards".to_string());
        };
        if shards != num_shards {
            let given = match num_shards {
                1 => "1 state was given".to_string(),
                count => format!("{count} states were given"),
            };
            // Shards of several ranks with workers: say so, since a user counts ranks.
            let layout = match state.layout_ranks() {
                Ok(Some(ranks)) if ranks < shards => format!(
                    " ({ranks} ranks of {} DataLoader workers each: every rank's states are \
                     needed, with each of its workers')",
                    shards / ranks
                ),
                _ => String::new(),
            };
            return bad(format!(
                "{given}, and one is of shard {shard} of {shards}; expected one state of each \
                 shard 0 to {}{layout}",
                shards.saturating_sub(1)
            ));
        }
        if shard >= num_shards {
            return bad(format!(
                "a state is of shard {shard} of {shards}; expected a shard below {shards}"
            ));
        }
        if seen[shard as usize] {
            return bad(format!(
                "two states are of shard {shard} of {shards}; expected one state of each shard \
                 0 to {}",
                shards.saturating_sub(1)
            ));
        }
        seen[shard as usize] = true;
        if state.layout_ranks()? != first.layout_ranks()? {
            return bad(format!(
                "the states are of {} and {} ranks; expected the states of one run",
                first.layout_ranks()?.unwrap_or_default(),
                state.layout_ranks()?.unwrap_or_default()
            ));
        }
    }
    Ok(())
}

/// A shard's shuffle window, as its state records it.
struct Window<'a> {
    rng: u64,
    carried: &'a [[u64; 2]],
    start: u64,
    sizes: &'a [u64],
    emitted: u64,
}

impl Window<'_> {
    /// Adds the window's rows not yet given to `partial` (ranges by unit), counting the ranges
    /// in `entries`; `item_of` finds the shard's items.
    fn left(
        &self,
        state: &LoaderState,
        item_of: &dyn Fn(u64) -> Result<Item>,
        partial: &mut BTreeMap<u64, Vec<[u64; 2]>>,
        entries: &mut u64,
    ) -> Result<()> {
        let settings = &state.settings;
        let [shard, _] = state.shard.unwrap_or_default();
        check_carried(self.carried, self.start, settings.batch_size)?;
        check_window_size(self.carried.len(), self.sizes, settings)?;
        let total: u128 =
            self.sizes.iter().map(|&s| u128::from(s)).sum::<u128>() + self.carried.len() as u128;
        check_emitted(self.emitted, total, settings)?;
        // The window's items, and the carried rows' items, from the state's own work.
        let items: Vec<Item> = (0..self.sizes.len() as u64)
            .map(|offset| match self.start.checked_add(offset) {
                Some(item) => item_of(item),
                None => bad(format!(
                    "the state's window starts at item {}, and its {} items go past the items \
                     any source has",
                    self.start,
                    self.sizes.len()
                )),
            })
            .collect::<Result<_>>()?;
        for (offset, (item, &size)) in items.iter().zip(self.sizes).enumerate() {
            if let Some(rows) = item_len(item).filter(|&rows| rows != size) {
                return bad(format!(
                    "the window of shard {shard} read {size} rows of its item {}, which has \
                     {rows} rows",
                    self.start + offset as u64
                ));
            }
        }
        let mut carried_at = Vec::with_capacity(self.carried.len());
        for &[k, row] in self.carried {
            let item = item_of(k)?;
            let Some(at) = unit_row(&item, row).filter(|&at| at < u64::MAX) else {
                return bad(format!(
                    "the window of shard {shard} carries row {row} of its item {k}, which has \
                     fewer rows"
                ));
            };
            carried_at.push((item.unit, at));
        }
        let mut add = |unit: u64, ranges: Vec<[u64; 2]>| {
            *entries += ranges.len() as u64;
            partial.entry(unit).or_default().extend(ranges);
        };
        if self.emitted == 0 {
            // Nothing of the window was given: its carried rows and its items are all left.
            for (unit, at) in carried_at {
                add(unit, vec![[at, at + 1]]);
            }
            for item in items {
                add(item.unit, item.rows.unwrap_or_else(|| vec![[0, u64::MAX]]));
            }
            return Ok(());
        }
        if settings.max_tokens.is_some() || settings.bucket_by_length {
            return bad(
                "a state saved inside a window of batches cut by tokens or sorted by \
                        length cannot be merged (its rows left depend on the data); save between \
                        windows or resume with the same shards"
                    .to_string(),
            );
        }
        if total > u128::from(MAX_REPLAY_ROWS) {
            return bad(format!(
                "the window of shard {shard} holds {total} rows; a merge replays at most \
                 {MAX_REPLAY_ROWS} (resume with the same shards instead)"
            ));
        }
        // The window's rows as indices: the carried rows, then each item's rows in turn,
        // shuffled as the loader shuffled them; the batches given took them from the end.
        let mut order: Vec<u32> = (0..total as u32).collect();
        if settings.shuffle {
            Rng::from_state(self.rng).shuffle(&mut order);
        }
        let given = u128::from(self.emitted) * u128::from(settings.batch_size);
        order.truncate(total.saturating_sub(given) as usize);
        order.sort_unstable();
        let carried_len = self.carried.len() as u32;
        let split = order.partition_point(|&index| index < carried_len);
        for &index in &order[..split] {
            let (unit, at) = carried_at[index as usize];
            add(unit, vec![[at, at + 1]]);
        }
        let mut rest = &order[split..];
        let mut first_row = u64::from(carried_len);
        for (item, &size) in items.iter().zip(self.sizes) {
            let end = first_row + size;
            let here = rest.partition_point(|&index| u64::from(index) < end);
            let rows: Vec<u64> = rest[..here]
                .iter()
                .map(|&index| u64::from(index) - first_row)
                .collect();
            let (ranges, outside) = unit_ranges(item, &rows);
            if outside > 0 {
                return bad(format!(
                    "the window of shard {shard} read {size} rows of unit {}, which has fewer",
                    item.unit
                ));
            }
            add(item.unit, ranges);
            rest = &rest[here..];
            first_row = end;
        }
        Ok(())
    }
}

/// The index after `index`, or the error of a state whose index (`what`, then the index) is the
/// last a `u64` holds: an edited state, as no source has so many items.
fn past(index: u64, what: impl FnOnce() -> String) -> Result<u64> {
    match index.checked_add(1) {
        Some(next) => Ok(next),
        None => bad(format!("{} {index}, past the items any source has", what())),
    }
}
