//! The remainder of an epoch planned under a budget or buckets: the batches dropped or split so
//! that their number is a multiple of the number of shards, and the split of a batch into
//! balanced parts (an epoch cut by rows alone is dealt by `rows.rs` instead).
//!
//! With `drop_last`, the epoch's last short batch is dropped, and then the fewest batches that
//! make the count a multiple of the shards, those of the fewest tokens (rows, when buckets cut
//! them without a budget). Without it no row is dropped while the rows suffice: the count is raised to the
//! next multiple by splitting the batches of the most tokens per part into balanced parts, each
//! at most as large as the batch (so every part stays within the budget). Only when the epoch
//! has fewer rows than that multiple of batches are the batches of the fewest tokens dropped, to
//! the multiple below.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::ops::Range;

use super::{Context, Row};
use crate::Result;
use crate::sequences::tokens::{Budget, Cutting, Fit};

/// What the cut says of one batch, for the remainder: its rows, its weight (tokens with a
/// budget, rows without) and whether it is the epoch's last, short batch.
#[derive(Debug, Clone, Copy)]
pub(super) struct Summary {
    pub(super) rows: u64,
    pub(super) weight: u64,
    pub(super) short: bool,
}

/// The parts each batch becomes (0: dropped, 1: kept, more: split), so that their sum is a
/// multiple of `shards`.
pub(super) fn parts(batches: &[Summary], shards: usize, drop_last: bool) -> Vec<u32> {
    let shards = shards.max(1) as u64;
    let mut parts: Vec<u32> = batches.iter().map(|_| 1).collect();
    let count = batches.len() as u64;
    if drop_last {
        let mut kept = count;
        for (part, batch) in parts.iter_mut().zip(batches) {
            if batch.short {
                *part = 0;
                kept -= 1;
            }
        }
        drop_lightest(batches, &mut parts, kept % shards);
        return parts;
    }
    let rows: u64 = batches.iter().map(|batch| batch.rows).sum();
    let target = count.div_ceil(shards) * shards;
    let target = if target > rows {
        rows / shards * shards
    } else {
        target
    };
    if target < count {
        drop_lightest(batches, &mut parts, count - target);
    } else {
        split_heaviest(batches, &mut parts, target - count);
    }
    parts
}

/// Drops the `count` batches still kept of the least weight (the later first on ties).
fn drop_lightest(batches: &[Summary], parts: &mut [u32], count: u64) {
    let mut kept: Vec<usize> = (0..batches.len()).filter(|&b| parts[b] > 0).collect();
    kept.sort_by_key(|&b| (batches[b].weight, std::cmp::Reverse(b)));
    for &b in kept.iter().take(count as usize) {
        parts[b] = 0;
    }
}

/// A batch in the queue of splits: its weight per part, as `weight / parts`.
#[derive(PartialEq, Eq)]
struct Candidate {
    weight: u64,
    parts: u32,
    index: usize,
}

impl Ord for Candidate {
    /// The larger weight per part first; the earlier batch on ties.
    fn cmp(&self, other: &Self) -> Ordering {
        let mine = u128::from(self.weight) * u128::from(other.parts);
        let theirs = u128::from(other.weight) * u128::from(self.parts);
        mine.cmp(&theirs).then(other.index.cmp(&self.index))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Adds `extra` parts, one at a time to the batch of the largest weight per part that has a row
/// for one more part.
fn split_heaviest(batches: &[Summary], parts: &mut [u32], extra: u64) {
    let mut queue: BinaryHeap<Candidate> = batches
        .iter()
        .enumerate()
        .filter(|(_, batch)| batch.rows >= 2)
        .map(|(index, batch)| Candidate {
            weight: batch.weight,
            parts: 1,
            index,
        })
        .collect();
    for _ in 0..extra {
        let Some(mut candidate) = queue.pop() else {
            return;
        };
        candidate.parts += 1;
        parts[candidate.index] = candidate.parts;
        if batches[candidate.index].rows > u64::from(candidate.parts) {
            queue.push(candidate);
        }
    }
}

/// The weight of rows `rows`: their tokens with a budget, their number without.
pub(super) fn weight(context: &Context<'_>, rows: &[Row]) -> Result<u64> {
    if context.options.cutting.max_tokens.is_none() {
        return Ok(rows.len() as u64);
    }
    let unbounded = Cutting {
        max_tokens: None,
        batch_size: usize::MAX,
        bucket_by_length: false,
    };
    let mut budget = Budget::new(unbounded, context.options.sequences);
    for &row in rows {
        budget.add(|c| context.kept(row, c))?;
    }
    Ok(budget.tokens() as u64)
}

/// `rows` cut into `parts` consecutive parts (at most its rows) whose largest weight is the
/// least it can be.
pub(super) fn split(
    context: &Context<'_>,
    rows: &[Row],
    parts: usize,
) -> Result<Vec<Range<usize>>> {
    let parts = parts.clamp(1, rows.len().max(1));
    if parts == 1 {
        let whole = 0..rows.len();
        return Ok(vec![whole]);
    }
    // Every part holds a row, so no part weighs less than the heaviest row; the whole weighs the
    // most. The fewest parts of a greedy cut within a cap falls as the cap grows.
    let mut low = 0;
    for &row in rows {
        low = low.max(weight(context, &[row])?);
    }
    let mut high = weight(context, rows)?.max(low);
    while low < high {
        let cap = low + (high - low) / 2;
        if greedy(context, rows, cap)?.len() <= parts {
            high = cap;
        } else {
            low = cap + 1;
        }
    }
    let mut cut = greedy(context, rows, high)?;
    // A cap that gives fewer parts than asked: the parts of the most rows are halved, which
    // keeps every part within the cap.
    while cut.len() < parts {
        let (at, _) = cut
            .iter()
            .enumerate()
            .max_by_key(|(at, part)| (part.len(), std::cmp::Reverse(*at)))
            .expect("a cut has a part");
        let part = cut[at].clone();
        let middle = part.start + part.len() / 2;
        cut[at] = part.start..middle;
        cut.insert(at + 1, middle..part.end);
    }
    Ok(cut)
}

/// `rows` cut greedily from the start into parts of at most `cap` weight (no row weighs more).
fn greedy(context: &Context<'_>, rows: &[Row], cap: u64) -> Result<Vec<Range<usize>>> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let cutting = match context.options.cutting.max_tokens {
        Some(_) => Cutting {
            max_tokens: Some(cap),
            batch_size: usize::MAX,
            bucket_by_length: false,
        },
        None => Cutting {
            max_tokens: None,
            batch_size: cap.max(1),
            bucket_by_length: false,
        },
    };
    let mut cut = Vec::new();
    let mut start = 0;
    let mut budget = Budget::new(cutting, context.options.sequences);
    for (at, &row) in rows.iter().enumerate() {
        if budget.add(|c| context.kept(row, c))? == Fit::Full {
            cut.push(start..at);
            start = at;
            budget = Budget::new(cutting, context.options.sequences);
            budget.add(|c| context.kept(row, c))?;
        }
    }
    cut.push(start..rows.len());
    Ok(cut)
}

#[cfg(test)]
mod tests {
    use super::{Summary, parts};

    fn batches(weights: &[(u64, u64)]) -> Vec<Summary> {
        weights
            .iter()
            .map(|&(rows, weight)| Summary {
                rows,
                weight,
                short: false,
            })
            .collect()
    }

    #[test]
    fn a_count_short_of_a_multiple_is_raised_by_splitting_the_heaviest_batches() {
        // 5 batches over 3 shards: 6 parts, the heaviest batch split.
        let got = parts(
            &batches(&[(4, 10), (4, 12), (4, 9), (4, 11), (1, 3)]),
            3,
            false,
        );
        assert_eq!(got, [1, 2, 1, 1, 1]);
        // 4 batches over 3 shards: 2 more parts, the two heaviest each split once.
        let got = parts(&batches(&[(4, 10), (4, 12), (4, 9), (4, 11)]), 3, false);
        assert_eq!(got, [1, 2, 1, 2]);
    }

    #[test]
    fn a_batch_is_split_again_when_its_parts_stay_the_heaviest() {
        let got = parts(&batches(&[(8, 40), (2, 5)]), 4, false);
        assert_eq!(got, [3, 1]);
    }

    #[test]
    fn drop_last_drops_the_short_batch_then_the_lightest() {
        let mut all = batches(&[(4, 10), (4, 12), (4, 9), (4, 11), (1, 3)]);
        all[4].short = true;
        assert_eq!(parts(&all, 3, true), [1, 1, 0, 1, 0]);
        assert_eq!(parts(&all, 2, true), [1, 1, 1, 1, 0]);
    }

    #[test]
    fn too_few_rows_for_the_next_multiple_drop_to_the_one_below() {
        // 3 single-row batches cannot become 4 parts: none is kept for 4 shards.
        assert_eq!(
            parts(&batches(&[(1, 5), (1, 6), (1, 7)]), 4, false),
            [0, 0, 0]
        );
        // 5 batches of 7 rows over 4 shards: 8 parts would need 8 rows; 4 are kept.
        let got = parts(
            &batches(&[(1, 5), (3, 6), (1, 7), (1, 2), (1, 9)]),
            4,
            false,
        );
        assert_eq!(got, [1, 1, 1, 0, 1]);
    }
}
