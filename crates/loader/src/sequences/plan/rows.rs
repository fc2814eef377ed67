//! The deal of an epoch cut by rows alone (no budget, no buckets): the epoch's rows, in the
//! order the windows give them, are shared out as evenly as rows allow, and every shard cuts its
//! share into as many batches as every other, so that step `j` of every shard holds as many rows
//! (to within one).
//!
//! Cut by rows, the epoch is one sequence of rows (each window's rows after its shuffle, the
//! rows it carries over left for the next window), which the windows cut into batches of
//! `batch_size` in turn. Shard `s` of `n` takes the `s`-th run of that sequence: `⌊R / n⌋` rows,
//! one more for the first `R mod n` shards. Its batches are full ones and a last, short batch,
//! so that a run of 1,000 rows over 3 shards in batches of 100 gives every shard
//! `[100, 100, 100, 34 or 33]`, as `DistributedSampler` and a `DataLoader` do without repeating
//! rows; the shards of one row less shorten their last batch, or, where it would hold no row,
//! take the row from the batch before it (`[…, 100, 1]` and `[…, 99, 1]`).
//! With `drop_last` every shard takes the same number of full batches and the rows after them
//! are dropped. Rows are dropped without `drop_last` only where the shards cannot all get as
//! many batches of at least a row each (fewer rows than shards, or batches of one row whose
//! rows are not a multiple of the shards): the epoch's last rows, down to a multiple of the
//! shards.

use std::ops::Range;

use super::{Context, ShardBatches, Window};
use crate::Result;
use crate::memory::reserve;

/// The batches of `rows` rows cut by rows alone into batches of `batch_size`: full batches, and
/// a short last one unless `drop_last`.
pub(crate) fn row_batches(rows: u64, batch_size: usize, drop_last: bool) -> usize {
    let rows = usize::try_from(rows).unwrap_or(usize::MAX);
    let batch_size = batch_size.max(1);
    if drop_last {
        rows / batch_size
    } else {
        rows.div_ceil(batch_size)
    }
}

/// How an epoch of rows cut by rows alone is dealt to its shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowsDeal {
    batch_size: u64,
    /// The batches every shard gets.
    per_shard: u64,
    /// The rows of every shard, less one for the shards from `longer` on.
    rows: u64,
    /// The shards with one row more than the others (the first ones).
    longer: u64,
}

impl RowsDeal {
    /// The deal of `rows` rows over `shards` shards in batches of `batch_size`.
    pub(crate) fn new(rows: u64, batch_size: usize, shards: usize, drop_last: bool) -> Self {
        let batch_size = batch_size.max(1) as u64;
        let shards = shards.max(1) as u64;
        if drop_last {
            let per_shard = rows / shards / batch_size;
            return RowsDeal {
                batch_size,
                per_shard,
                rows: per_shard * batch_size,
                longer: 0,
            };
        }
        let base = rows / shards;
        let mut longer = rows % shards;
        // The shorter shards need a row for each of the longer shards' batches.
        if longer > 0 && base < (base + 1).div_ceil(batch_size) {
            longer = 0;
        }
        let most = base + u64::from(longer > 0);
        RowsDeal {
            batch_size,
            per_shard: most.div_ceil(batch_size),
            rows: base,
            longer,
        }
    }

    /// The batches every shard gets.
    pub(crate) fn per_shard(&self) -> u64 {
        self.per_shard
    }

    /// The rows the deal leaves out of `rows` (the epoch's last).
    pub(crate) fn dropped(&self, rows: u64, shards: usize) -> u64 {
        rows - (self.rows * shards.max(1) as u64 + self.longer)
    }

    /// Shard `shard`'s rows, as positions in the epoch's sequence of rows.
    fn shard_rows(&self, shard: u64) -> Range<u64> {
        let start = shard * self.rows + shard.min(self.longer);
        start..start + self.rows + u64::from(shard < self.longer)
    }

    /// Where batch `batch` (at most [`per_shard`](Self::per_shard)) of a shard starts among its
    /// rows: the shard's rows when `batch` is `per_shard`.
    fn batch_start(&self, shard: u64, batch: u64) -> u64 {
        let rows = self.shard_rows(shard);
        let rows = rows.end - rows.start;
        if batch >= self.per_shard {
            return rows;
        }
        let start = batch * self.batch_size;
        // A shorter shard whose last batch would be empty takes its row from the batch before.
        let last = self.per_shard - 1;
        if batch == last && start >= rows {
            start - 1
        } else {
            start
        }
    }
}

/// Lists the rows of batches `batches` of shard `shard` under `deal` (its batches among the
/// shard's), from the windows that hold them (a batch may start in one window and end in the
/// next), numbering the items as the batches first need them.
pub(super) fn shard_batches(
    context: &Context<'_>,
    windows: &[Window],
    deal: &RowsDeal,
    shard: u64,
    batches: Range<u64>,
) -> Result<ShardBatches> {
    let mut out = ShardBatches::default();
    let base = deal.shard_rows(shard).start;
    // The end of each batch wanted, as a position in the epoch's rows.
    let ends: Vec<u64> = (batches.start..batches.end)
        .map(|batch| base + deal.batch_start(shard, batch + 1))
        .collect();
    let (Some(&last), true) = (ends.last(), batches.start < batches.end) else {
        return Ok(out);
    };
    let wanted = base + deal.batch_start(shard, batches.start)..last;
    reserve(&mut out.rows, (wanted.end - wanted.start) as usize)?;
    reserve(&mut out.ends, ends.len())?;
    let mut read_of: Vec<u32> = vec![u32::MAX; context.items.len()];
    let mut ends = ends.into_iter().peekable();
    let mut at: u64 = 0;
    for (index, window) in windows.iter().enumerate() {
        let count: u64 = window.batches.iter().map(|batch| batch.rows).sum();
        let held = at..at + count;
        at += count;
        if held.end <= wanted.start || held.start >= wanted.end {
            continue;
        }
        let cut = window.cut(context, index)?;
        let from = wanted.start.max(held.start);
        let to = wanted.end.min(held.end);
        for position in from..to {
            out.push_row(&mut read_of, cut.rows[(position - held.start) as usize]);
            while ends.next_if(|&end| end == position + 1).is_some() {
                out.ends.push(out.rows.len());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::RowsDeal;

    /// Each shard's batch sizes under the deal.
    fn sizes(rows: u64, batch_size: usize, shards: usize, drop_last: bool) -> Vec<Vec<u64>> {
        let deal = RowsDeal::new(rows, batch_size, shards, drop_last);
        (0..shards as u64)
            .map(|shard| {
                (0..deal.per_shard())
                    .map(|b| deal.batch_start(shard, b + 1) - deal.batch_start(shard, b))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_step_holds_as_many_rows_on_every_shard_to_within_one() {
        assert_eq!(
            sizes(1000, 100, 3, false),
            [
                vec![100, 100, 100, 34],
                vec![100, 100, 100, 33],
                vec![100, 100, 100, 33]
            ]
        );
        assert_eq!(sizes(40, 16, 2, false), [vec![16, 4], vec![16, 4]]);
        // The shorter shards' last batch would be empty: they give up a row of the one before.
        assert_eq!(
            sizes(301, 100, 3, false),
            [vec![100, 1], vec![99, 1], vec![99, 1]]
        );
    }

    #[test]
    fn drop_last_gives_every_shard_the_same_full_batches() {
        assert_eq!(sizes(1000, 100, 3, true), vec![vec![100; 3]; 3]);
        assert_eq!(RowsDeal::new(1000, 100, 3, true).dropped(1000, 3), 100);
    }

    #[test]
    fn rows_are_dropped_only_where_the_shards_cannot_all_get_as_many_batches() {
        assert_eq!(sizes(3, 8, 4, false), vec![Vec::<u64>::new(); 4]);
        assert_eq!(RowsDeal::new(3, 8, 4, false).dropped(3, 4), 3);
        // Batches of one row: 7 rows over 3 shards give 2 each, the last row dropped.
        assert_eq!(sizes(7, 1, 3, false), vec![vec![1, 1]; 3]);
        assert_eq!(RowsDeal::new(7, 1, 3, false).dropped(7, 3), 1);
        for rows in 0..200 {
            for batch_size in 1..9 {
                for shards in 1..6 {
                    let deal = RowsDeal::new(rows, batch_size, shards, false);
                    let all = sizes(rows, batch_size, shards, false);
                    let given: u64 = all.iter().flatten().sum();
                    assert_eq!(given + deal.dropped(rows, shards), rows);
                    assert!(all.iter().flatten().all(|&size| size >= 1));
                    assert!(all.iter().flatten().all(|&size| size <= batch_size as u64));
                    if batch_size > 1 && rows >= shards as u64 {
                        assert_eq!(deal.dropped(rows, shards), 0, "{rows} {batch_size}");
                    }
                    for step in 0..deal.per_shard() as usize {
                        let most = all.iter().map(|s| s[step]).max().unwrap();
                        let least = all.iter().map(|s| s[step]).min().unwrap();
                        assert!(most - least <= 1, "{rows} {batch_size} {shards}: {all:?}");
                    }
                }
            }
        }
    }
}
