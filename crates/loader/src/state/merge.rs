//! [`merge_states`]: the states of every shard of a run joined into one state of the work left,
//! which any number of new shards resume from; and the row ranges it works with.

use std::collections::BTreeMap;

use super::{Item, LoaderState, Position, STATE_VERSION, Work, bad};
use crate::rng::Rng;
use crate::{Error, Result};

/// Joins the states of every shard of a run (`shard` `0..n`, each once, all of one epoch and
/// one configuration) into one state of the work left: each remaining row once, whatever shard
/// had it. Resumed by any number of shards, they read every remaining row exactly once, in an
/// order that differs from the uninterrupted run's.
///
/// The rows left in a shuffle window are worked out by replaying the window's shuffle from the
/// sizes it records; a state saved inside a window whose batches are cut by tokens or sorted by
/// length (which only the data decide) is refused.
pub fn merge_states(states: &[LoaderState]) -> Result<LoaderState> {
    let Some(first) = states.first() else {
        return bad("there are no states to merge; expected the state of every shard".to_string());
    };
    let num_shards = states.len() as u64;
    let mut seen = vec![false; states.len()];
    for state in states {
        if state.version != first.version || state.version > STATE_VERSION || state.version == 0 {
            return bad(format!(
                "a state is of format version {}; expected version {STATE_VERSION} in every \
                 state",
                state.version
            ));
        }
        if state.config != first.config {
            let name = state
                .config
                .iter()
                .find(|(name, value)| first.config.get(*name) != Some(value))
                .or_else(|| first.config.iter().next())
                .map(|(name, _)| name.clone())
                .unwrap_or_default();
            return bad(format!(
                "the states were saved with different {name}; expected the states of one run"
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
        let Some([shard, shards]) = state.shard else {
            return bad("a state is already merged; expected the states of the shards".to_string());
        };
        if shards != num_shards || shard >= num_shards || seen[shard as usize] {
            return bad(format!(
                "a state is of shard {shard} of {shards}, with {num_shards} states given; \
                 expected one state of each shard 0..{num_shards}"
            ));
        }
        seen[shard as usize] = true;
    }
    first.work.check(first.work.units)?;
    let work = &first.work;
    let batch_size: u64 = first
        .config
        .get("batch_size")
        .and_then(|b| b.parse().ok())
        .filter(|&b| b > 0)
        .ok_or_else(|| Error::InvalidState {
            reason: "the state's batch_size is not a positive number".to_string(),
        })?;
    let exact = first.config.get("max_tokens").map(String::as_str) == Some("None")
        && first.config.get("bucket_by_length").map(String::as_str) == Some("false");
    // The rows left of partly read units, as ranges by unit; and the first unstarted global
    // index of each shard.
    let mut partial: BTreeMap<u64, Vec<[u64; 2]>> = BTreeMap::new();
    let mut first_unstarted = vec![0u64; states.len()];
    let item_of = |k: u64, shard: u64| -> Result<Item> {
        work.item(k, shard, num_shards)
            .ok_or_else(|| Error::InvalidState {
                reason: format!("item {k} of shard {shard} is past the end of the source"),
            })
    };
    for state in states {
        let [shard, _] = state.shard.expect("checked above");
        let next = match &state.position {
            None => 0,
            Some(Position::Rows { item, row }) if *row == 0 => *item,
            Some(Position::Rows { item, row }) => {
                let left = item_of(*item, shard)?;
                let ranges = left.rows.clone().unwrap_or_else(|| vec![[0, u64::MAX]]);
                partial
                    .entry(left.unit)
                    .or_default()
                    .extend(drop_rows(&ranges, *row));
                item + 1
            }
            Some(Position::Window {
                rng,
                carried,
                start,
                sizes,
                emitted,
            }) => {
                let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
                if total > 1 << 32 {
                    return bad(format!(
                        "the window of shard {shard} declares {total} rows; expected at most 2**32"
                    ));
                }
                let mut rows: Vec<[u64; 2]> = carried.clone();
                for (offset, &size) in sizes.iter().enumerate() {
                    let k = start.saturating_add(offset as u64);
                    rows.extend((0..size).map(|row| [k, row]));
                }
                if *emitted > 0 {
                    if !exact {
                        return bad("a state saved inside a window of batches cut by tokens or \
                                    sorted by length cannot be merged (its rows left depend on \
                                    the data); save between windows or resume with the same \
                                    shards"
                            .to_string());
                    }
                    if first.config.get("shuffle").map(String::as_str) == Some("true") {
                        Rng::from_state(*rng).shuffle(&mut rows);
                    }
                    let given = emitted.saturating_mul(batch_size).min(rows.len() as u64);
                    rows.truncate(rows.len() - given as usize);
                }
                for [k, row] in rows {
                    let item = item_of(k, shard)?;
                    let at = unit_row(&item, row).ok_or_else(|| Error::InvalidState {
                        reason: format!("row {row} of item {k} of shard {shard} is out of range"),
                    })?;
                    partial.entry(item.unit).or_default().push([at, at + 1]);
                }
                start.saturating_add(sizes.len() as u64)
            }
        };
        first_unstarted[shard as usize] = next.saturating_mul(num_shards).saturating_add(shard);
    }
    // Unstarted items: those of each shard from its first unstarted index on; below the largest
    // such index they are listed, from it on they are the rest.
    let listed = work.items.len() as u64;
    let bound = first_unstarted
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(listed);
    let mut items: BTreeMap<u64, Item> = BTreeMap::new();
    for (shard, &from) in first_unstarted.iter().enumerate() {
        let mut w = from;
        while w < bound {
            let Some(item) = work.global(w) else { break };
            if items.len() >= MAX_MERGED_ITEMS {
                return bad(format!(
                    "the shards' positions are too far apart (shard {shard} is at work item \
                     {from}, another at {bound}); expected positions of one run"
                ));
            }
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
        if !ranges.is_empty() {
            items.insert(
                unit,
                Item {
                    unit,
                    rows: Some(ranges),
                },
            );
        }
    }
    let items: Vec<Item> = items.into_values().collect();
    let rest_from = rest_from.max(items.last().map_or(0, |item| item.unit + 1));
    Ok(LoaderState {
        version: STATE_VERSION,
        config: first.config.clone(),
        epoch: first.epoch,
        shard: None,
        work: Work {
            items,
            rest_from,
            units: work.units,
        },
        position: None,
    })
}

/// The most items a merged state lists: more means positions no run could have saved.
const MAX_MERGED_ITEMS: usize = 1 << 24;

/// `ranges` without their first `rows` rows.
pub(super) fn drop_rows(ranges: &[[u64; 2]], rows: u64) -> Vec<[u64; 2]> {
    let mut left = rows;
    let mut out = Vec::new();
    for &[start, end] in ranges {
        let len = end - start;
        if left >= len {
            left -= len;
            continue;
        }
        out.push([start + left, end]);
        left = 0;
    }
    out
}

/// Ranges sorted and joined where they touch or overlap.
pub(super) fn join_ranges(mut ranges: Vec<[u64; 2]>) -> Vec<[u64; 2]> {
    ranges.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::new();
    for [start, end] in ranges {
        match out.last_mut() {
            Some(last) if start <= last[1] => last[1] = last[1].max(end),
            _ => out.push([start, end]),
        }
    }
    out
}

/// The unit row of the `row`-th row of `item`.
pub(super) fn unit_row(item: &Item, row: u64) -> Option<u64> {
    let Some(ranges) = &item.rows else {
        return Some(row);
    };
    let mut left = row;
    for &[start, end] in ranges {
        let len = end - start;
        if left < len {
            return Some(start + left);
        }
        left -= len;
    }
    None
}
