//! The plan alone, over lengths made up here: every shard gets as many batches, the shards'
//! rows are disjoint and (unless dropped) complete, every batch within its budget, and the
//! batches' tokens close to each other.

use std::collections::BTreeSet;

use super::{PlanItem, PlanOptions, SourceLengths, plan_shard};
use crate::rng::Rng;
use crate::sequences::tokens::Cutting;
use crate::sequences::{Sequence, SequenceMode};

/// Units of `sizes` rows whose lengths are drawn from 1 to `longest` (a skewed draw: many short
/// rows, few long ones, as tokenized text has).
fn lengths(sizes: &[usize], longest: usize, seed: u64) -> SourceLengths {
    let mut rng = Rng::new(seed, 0);
    let mut lengths = SourceLengths::new(1);
    for &size in sizes {
        let unit: Vec<usize> = (0..size)
            .map(|_| {
                let a = rng.below(longest) + 1;
                let b = rng.below(longest) + 1;
                a.min(b)
            })
            .collect();
        lengths.push_unit(&[unit]).unwrap();
    }
    lengths
}

fn whole(lengths: &SourceLengths) -> Vec<PlanItem> {
    (0..lengths.units())
        .map(|unit| PlanItem { unit, rows: None })
        .collect()
}

/// Each shard's batches as lists of `(unit, row)`, and the number per shard.
fn shards(
    options: &PlanOptions<'_>,
    lengths: &SourceLengths,
    items: &[PlanItem],
) -> Vec<Vec<Vec<(usize, u32)>>> {
    (0..options.num_shards)
        .map(|shard| {
            let (batches, per_shard) = plan_shard(options, lengths, items, shard, 0).unwrap();
            assert_eq!(batches.len() as u64, per_shard, "shard {shard}");
            (0..batches.len())
                .map(|b| {
                    batches
                        .batch(b)
                        .iter()
                        .map(|&(read, row)| {
                            (items[batches.reads[read as usize] as usize].unit, row)
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

fn tokens(sequence: &Sequence, lengths: &SourceLengths, batch: &[(usize, u32)]) -> usize {
    let kept: Vec<usize> = batch
        .iter()
        .map(|&(unit, row)| sequence.kept(lengths.get(unit, row, 0)))
        .collect();
    match sequence.mode {
        SequenceMode::Pad => {
            kept.len() * sequence.padded_length(kept.iter().copied().max().unwrap_or(0))
        }
        _ => kept.iter().sum(),
    }
}

#[test]
fn every_shard_gets_as_many_batches_each_row_at_most_once_within_the_budget() {
    let sizes = [37, 5, 120, 64, 1, 90, 33, 70, 12, 48];
    let lengths = lengths(&sizes, 60, 4);
    let items = whole(&lengths);
    let total: usize = sizes.iter().sum();
    for mode in [SequenceMode::Pad, SequenceMode::Pack] {
        let sequences = [(0, Sequence::new("t", mode))];
        for (max_tokens, bucket) in [(Some(256), false), (Some(256), true), (None, true)] {
            for shuffle in [false, true] {
                for drop_last in [false, true] {
                    for num_shards in 1..=5 {
                        let options = PlanOptions {
                            cutting: Cutting {
                                max_tokens,
                                batch_size: 16,
                                bucket_by_length: bucket,
                            },
                            sequences: &sequences,
                            shuffle,
                            seed: 7,
                            buffer_size: 100,
                            drop_last,
                            num_shards,
                            loader_stream: None,
                            num_ranks: 0,
                        };
                        let case = format!(
                            "{mode} tokens {max_tokens:?} bucket {bucket} shuffle {shuffle} \
                             drop_last {drop_last} shards {num_shards}"
                        );
                        let got = shards(&options, &lengths, &items);
                        let counts: BTreeSet<usize> = got.iter().map(Vec::len).collect();
                        assert_eq!(counts.len(), 1, "{case}: {counts:?}");
                        assert!(!got[0].is_empty(), "{case}");
                        let mut seen = BTreeSet::new();
                        for batch in got.iter().flatten() {
                            assert!(!batch.is_empty() && batch.len() <= 16, "{case}");
                            if let Some(budget) = max_tokens {
                                assert!(
                                    tokens(&sequences[0].1, &lengths, batch) <= budget,
                                    "{case}"
                                );
                            }
                            for &row in batch {
                                assert!(seen.insert(row), "{case}: {row:?} twice");
                            }
                        }
                        if !drop_last {
                            assert_eq!(seen.len(), total, "{case}");
                        } else {
                            // At most the short batch and one batch per shard but one.
                            assert!(seen.len() + 16 * num_shards >= total, "{case}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_plan_depends_on_the_seed_and_is_the_same_for_every_caller() {
    let lengths = lengths(&[50; 8], 40, 1);
    let items = whole(&lengths);
    let sequences = [(0, Sequence::pad("t"))];
    let options = |seed| PlanOptions {
        cutting: Cutting {
            max_tokens: Some(200),
            batch_size: 64,
            bucket_by_length: true,
        },
        sequences: &sequences,
        shuffle: true,
        seed,
        buffer_size: 120,
        drop_last: false,
        num_shards: 3,
        loader_stream: None,
        num_ranks: 0,
    };
    let a = shards(&options(1), &lengths, &items);
    assert_eq!(a, shards(&options(1), &lengths, &items));
    assert_ne!(a, shards(&options(2), &lengths, &items));
}

#[test]
fn a_shard_resumed_at_a_batch_lists_the_batches_from_there() {
    let lengths = lengths(&[40; 6], 30, 2);
    let items = whole(&lengths);
    let sequences = [(0, Sequence::pack("t"))];
    let options = PlanOptions {
        cutting: Cutting {
            max_tokens: Some(120),
            batch_size: 100,
            bucket_by_length: false,
        },
        sequences: &sequences,
        shuffle: true,
        seed: 5,
        buffer_size: 50,
        drop_last: false,
        num_shards: 2,
        loader_stream: None,
        num_ranks: 0,
    };
    let rows_of = |from: u64| -> Vec<Vec<(usize, u32)>> {
        let (batches, _) = plan_shard(&options, &lengths, &items, 1, from).unwrap();
        (0..batches.len())
            .map(|b| {
                batches
                    .batch(b)
                    .iter()
                    .map(|&(read, row)| (batches.reads[read as usize] as usize, row))
                    .collect()
            })
            .collect()
    };
    let all = rows_of(0);
    assert_eq!(rows_of(3), all[3..]);
    assert!(rows_of(all.len() as u64).is_empty());
    let error = plan_shard(&options, &lengths, &items, 1, all.len() as u64 + 1).unwrap_err();
    assert!(error.to_string().contains("the shard has"), "{error}");
}

#[test]
fn balanced_batches_of_bucketed_rows_are_within_a_few_percent_of_each_other() {
    let lengths = lengths(&[1000; 20], 120, 3);
    let items = whole(&lengths);
    for mode in [SequenceMode::Pad, SequenceMode::Pack] {
        let sequences = [(0, Sequence::new("t", mode))];
        let options = PlanOptions {
            cutting: Cutting {
                max_tokens: Some(4096),
                batch_size: 1024,
                bucket_by_length: true,
            },
            sequences: &sequences,
            shuffle: true,
            seed: 9,
            buffer_size: 4000,
            drop_last: false,
            num_shards: 3,
            loader_stream: None,
            num_ranks: 0,
        };
        let got = shards(&options, &lengths, &items);
        let all: Vec<usize> = got
            .iter()
            .flatten()
            .map(|batch| tokens(&sequences[0].1, &lengths, batch))
            .collect();
        let mean = all.iter().sum::<usize>() as f64 / all.len() as f64;
        let max = *all.iter().max().unwrap() as f64;
        assert!(max / mean < 1.05, "{mode}: max {max}, mean {mean}");
    }
}

#[test]
fn items_of_some_rows_plan_only_those_rows() {
    let lengths = lengths(&[30, 30], 10, 6);
    let items = vec![
        PlanItem {
            unit: 0,
            rows: Some(vec![[2, 5], [10, 12]]),
        },
        PlanItem {
            unit: 1,
            rows: Some(vec![[20, u64::MAX]]),
        },
    ];
    let sequences = [(0, Sequence::pack("t"))];
    let options = PlanOptions {
        cutting: Cutting {
            max_tokens: Some(20),
            batch_size: 100,
            bucket_by_length: true,
        },
        sequences: &sequences,
        shuffle: true,
        seed: 1,
        buffer_size: 8,
        drop_last: false,
        num_shards: 2,
        loader_stream: None,
        num_ranks: 0,
    };
    let mut rows: Vec<(usize, u32)> = shards(&options, &lengths, &items)
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    rows.sort_unstable();
    let expected: Vec<(usize, u32)> = [2, 3, 4, 10, 11]
        .iter()
        .map(|&row| (0, row))
        .chain((20..30).map(|row| (1, row)))
        .collect();
    assert_eq!(rows, expected);
}

#[test]
fn plans_by_rows_alone_counted_without_listing_rows_give_every_row_once_to_even_shards() {
    // Units of any size, items of some rows only, windows of every size: the first pass counts
    // each window's batches and carried rows without listing its rows; the second lists them.
    let mut draw = Rng::new(11, 1);
    for case in 0..300u64 {
        let units: Vec<u64> = (0..1 + draw.below(6))
            .map(|_| draw.below(40) as u64)
            .collect();
        let lengths = SourceLengths::of_rows(units.iter().copied()).unwrap();
        let items: Vec<PlanItem> = (0..units.len())
            .map(|unit| PlanItem {
                unit,
                rows: (draw.below(3) == 0 && units[unit] > 4)
                    .then(|| vec![[1, 3], [4, units[unit]]]),
            })
            .collect();
        let wanted: usize = items
            .iter()
            .map(|item| match &item.rows {
                None => units[item.unit] as usize,
                Some(ranges) => ranges.iter().map(|[a, b]| (b - a) as usize).sum(),
            })
            .sum();
        let batch_size = 1 + draw.below(7);
        let num_shards = 1 + draw.below(4);
        let options = PlanOptions {
            cutting: Cutting {
                max_tokens: None,
                batch_size,
                bucket_by_length: false,
            },
            sequences: &[],
            shuffle: case % 2 == 1,
            seed: case,
            buffer_size: 1 + draw.below(20),
            drop_last: false,
            num_shards,
            loader_stream: None,
            num_ranks: 0,
        };
        let got = shards(&options, &lengths, &items);
        let counts: BTreeSet<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(counts.len(), 1, "case {case}: {counts:?}");
        // Step `j` of every shard holds as many rows, to within one.
        for step in 0..got[0].len() {
            let sizes: BTreeSet<usize> = got.iter().map(|shard| shard[step].len()).collect();
            let (least, most) = (sizes.first().unwrap(), sizes.last().unwrap());
            assert!(most - least <= 1, "case {case}, step {step}: {sizes:?}");
            assert!(*least >= 1 && *most <= batch_size, "case {case}: {sizes:?}");
        }
        let rows: Vec<(usize, u32)> = got.into_iter().flatten().flatten().collect();
        let distinct: BTreeSet<(usize, u32)> = rows.iter().copied().collect();
        assert_eq!(distinct.len(), rows.len(), "case {case}: a row given twice");
        // Every row, unless the shards cannot all get as many batches of a row at least
        // (fewer rows than shards, or batches of one row: the rows past a multiple of the
        // shards are dropped).
        if wanted >= num_shards && (batch_size > 1 || wanted.is_multiple_of(num_shards)) {
            assert_eq!(
                rows.len(),
                wanted,
                "case {case}: {units:?}, {batch_size}, {num_shards}"
            );
        } else {
            assert_eq!(rows.len(), wanted / num_shards * num_shards, "case {case}");
        }
    }
}

#[test]
fn a_ranks_workers_take_runs_of_the_ranks_batches_whole() {
    // Cut by rows and by a budget: the batches of a rank's workers, one run after another, are
    // the rank's batches in a plan without workers.
    let lengths = lengths(&[37, 5, 120, 64, 1, 90, 33, 70, 12, 48], 60, 6);
    let items = whole(&lengths);
    let sequences = [(0, Sequence::pack("t"))];
    for budget in [None, Some(300)] {
        for (ranks, workers) in [(1, 2), (2, 2), (3, 4), (2, 5)] {
            let options = |num_shards, num_ranks| PlanOptions {
                cutting: Cutting {
                    max_tokens: budget,
                    batch_size: 16,
                    bucket_by_length: false,
                },
                sequences: if budget.is_some() { &sequences } else { &[] },
                shuffle: true,
                seed: 9,
                buffer_size: 40,
                drop_last: false,
                num_shards,
                loader_stream: None,
                num_ranks,
            };
            let alone = shards(&options(ranks, 0), &lengths, &items);
            let dealt = shards(&options(ranks * workers, ranks), &lengths, &items);
            for rank in 0..ranks {
                let runs: Vec<_> = (0..workers)
                    .flat_map(|worker| dealt[worker * ranks + rank].clone())
                    .collect();
                assert_eq!(
                    runs, alone[rank],
                    "{budget:?} {ranks} x {workers}, rank {rank}"
                );
                let counts: Vec<usize> = (0..workers)
                    .map(|worker| dealt[worker * ranks + rank].len())
                    .collect();
                assert!(
                    counts.windows(2).all(|c| c[0] <= c[1] && c[1] <= c[0] + 1),
                    "{counts:?}"
                );
            }
        }
    }
}
