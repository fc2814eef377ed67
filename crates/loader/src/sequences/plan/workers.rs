//! The deal of a rank's planned batches to its DataLoader workers: each worker takes a run of
//! consecutive batches, the runs as long as each other to within one, the longer runs last.
//!
//! A `torch.utils.data.DataLoader` takes a batch from each of its workers in turn, so the
//! batches it gives are the rank's batches, whole, in a fixed interleaving; taking runs (not
//! every `workers`-th batch) keeps each worker reading about `1 / workers` of the rank's units
//! rather than a part of every one. With the longer runs last, the worker whose run ends the
//! rank's batches (the short last batch, where there is one) gives the DataLoader's last batch:
//! with 5 batches over 2 workers, worker 0 takes batches 0 and 1, worker 1 batches 2, 3 and 4,
//! and the DataLoader gives 0, 2, 1, 3, 4.

use std::ops::Range;

/// Whether dealing the epoch's items round-robin to `ranks` ranks (item `w` to rank
/// `w % ranks`), with `item_rows` rows each in the epoch's order, gives the ranks different
/// numbers of batches (`batches` of a rank's rows), or gives a rank a batch while another gets
/// no item. Where it does not, each rank's batches are those it cuts from its own items.
pub(crate) fn uneven_ranks(
    item_rows: &[u64],
    ranks: usize,
    batches: impl Fn(u64) -> usize,
) -> bool {
    let ranks = ranks.max(1);
    // Only the ranks below the number of items get items; the others get no batch.
    let dealt = ranks.min(item_rows.len());
    let mut rows = vec![0u64; dealt];
    for (w, &count) in item_rows.iter().enumerate() {
        let rank = &mut rows[w % ranks];
        *rank = rank.saturating_add(count);
    }
    let counts: Vec<usize> = rows.into_iter().map(batches).collect();
    let unserved = ranks > dealt;
    counts
        .iter()
        .any(|&count| count != counts[0] || (unserved && count > 0))
}

/// The items of rank `rank` of `ranks`, dealt round-robin: indices `rank`, `rank + ranks`, ...
/// of `items`.
pub(crate) fn rank_items<T: Clone>(items: &[T], rank: usize, ranks: usize) -> Vec<T> {
    items
        .iter()
        .skip(rank)
        .step_by(ranks.max(1))
        .cloned()
        .collect()
}

/// The batches, among its rank's `per_rank`, of worker `worker` of `workers`.
pub(crate) fn worker_run(per_rank: u64, workers: u64, worker: u64) -> Range<u64> {
    let workers = workers.max(1);
    let worker = worker.min(workers - 1);
    let base = per_rank / workers;
    // The last `longer` workers take one batch more.
    let longer = per_rank % workers;
    let shorter = workers - longer;
    let start = worker * base + worker.saturating_sub(shorter);
    start..start + base + u64::from(worker >= shorter)
}

#[cfg(test)]
mod tests {
    use super::worker_run;

    #[test]
    fn the_runs_cover_the_rank_in_order_the_longer_ones_last() {
        assert_eq!(worker_run(5, 2, 0), 0..2);
        assert_eq!(worker_run(5, 2, 1), 2..5);
        assert_eq!(worker_run(2, 3, 0), 0..0);
        assert_eq!(worker_run(2, 3, 1), 0..1);
        assert_eq!(worker_run(2, 3, 2), 1..2);
        for per_rank in 0..40 {
            for workers in 1..7 {
                let runs: Vec<_> = (0..workers)
                    .map(|w| worker_run(per_rank, workers, w))
                    .collect();
                assert_eq!(runs[0].start, 0);
                assert_eq!(runs[workers as usize - 1].end, per_rank);
                for pair in runs.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                    // Never longer than the next, and by at most one batch.
                    let (a, b) = (pair[0].end - pair[0].start, pair[1].end - pair[1].start);
                    assert!(a <= b && b <= a + 1, "{per_rank} {workers}: {runs:?}");
                }
            }
        }
    }
}
