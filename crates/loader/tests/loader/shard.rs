//! Sharding: the shards of a source are disjoint and together hold every row exactly once, and
//! shards of files get as many batches each.

use arrow_dlpack_loader::{BatchSpec, LoaderState, Position, Source, batches, merge_states};

use crate::data::{
    chain, collect, ids, reader, spec, table, write_ipc, write_parquet, write_stream,
};

fn shard(index: usize, count: usize, shuffle: bool) -> BatchSpec {
    BatchSpec {
        shard_index: index,
        num_shards: count,
        shuffle,
        seed: 3,
        buffer_size: 16,
        ..spec(4, &["id"])
    }
}

/// Checks that the shards of `make` are disjoint and complete over rows `0..rows`.
fn check_shards(make: &dyn Fn() -> Source, rows: i64, count: usize, shuffle: bool) {
    let mut all = Vec::new();
    for index in 0..count {
        let part = ids(&collect(make(), shard(index, count, shuffle)));
        assert!(!part.is_empty(), "shard {index} of {count} is empty");
        all.extend(part);
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (0..rows).collect::<Vec<_>>(),
        "{count} shards, shuffle {shuffle}"
    );
}

#[test]
fn two_and_four_shards_are_disjoint_and_complete_over_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[9, 9, 9, 9, 9, 9, 9, 5]);
    let ipc_a = write_ipc(&dir.path().join("a.arrow"), &data[..4]);
    let ipc_b = write_ipc(&dir.path().join("b.arrow"), &data[4..]);
    let parquet_a = write_parquet(&dir.path().join("a.parquet"), &data[..4], 7);
    let parquet_b = write_parquet(&dir.path().join("b.parquet"), &data[4..], 7);
    let ipc = move || Source::IpcFiles(vec![ipc_a.clone(), ipc_b.clone()]);
    let parquet = move || Source::ParquetFiles(vec![parquet_a.clone(), parquet_b.clone()]);
    for count in [2, 4] {
        for shuffle in [false, true] {
            check_shards(&ipc, 68, count, shuffle);
            check_shards(&parquet, 68, count, shuffle);
        }
    }
}

#[test]
fn shards_of_a_reader_are_dealt_by_record_batch() {
    for count in [2, 4] {
        check_shards(&|| reader(table(&[5, 6, 7, 8, 9])), 35, count, false);
    }
}

/// Makes a source anew for each loader.
type MakeSource = dyn Fn() -> Source;

/// Record batches of `sizes` rows as a local IPC stream in `dir`, and in memory.
fn streams_and_memory(dir: &std::path::Path, sizes: &[usize]) -> [Box<MakeSource>; 2] {
    let data = table(sizes);
    let schema = data[0].schema();
    let stream = write_stream(&dir.join("s.arrows"), &data);
    [
        Box::new(move || Source::IpcStreams(vec![stream.clone()])),
        Box::new(move || Source::record_batches(schema.clone(), data.clone())),
    ]
}

/// The batch counts of every shard of `make` with `spec`, and the ids of each shard's rows.
fn shard_passes(make: &dyn Fn() -> Source, spec: &BatchSpec, count: usize) -> Vec<Vec<Vec<i64>>> {
    (0..count)
        .map(|index| {
            let spec = BatchSpec {
                shard_index: index,
                num_shards: count,
                ..spec.clone()
            };
            let loader = batches(make(), spec).unwrap();
            let len = loader.len();
            let batches: Vec<Vec<i64>> = loader
                .map(|batch| ids(std::slice::from_ref(&batch.unwrap())))
                .collect();
            assert_eq!(
                len,
                Some(batches.len()),
                "shard {index}: len() before the first batch"
            );
            batches
        })
        .collect()
}

#[test]
fn shards_that_a_deal_of_units_would_leave_uneven_get_as_many_batches_each() {
    let dir = tempfile::tempdir().unwrap();
    // One row group of 101 rows, and two record batches of 90 and 11 rows: dealt by units, the
    // first gives shard 1 nothing and the second gives 23 and 3 batches of 4.
    let data = table(&[90, 11]);
    let parquet = write_parquet(&dir.path().join("one.parquet"), &data, 1000);
    let ipc = write_ipc(&dir.path().join("two.arrow"), &data);
    let sources: [(&str, Box<MakeSource>); 2] = [
        (
            "parquet",
            Box::new(move || Source::ParquetFiles(vec![parquet.clone()])),
        ),
        ("ipc", Box::new(move || Source::IpcFiles(vec![ipc.clone()]))),
    ];
    for (name, make) in &sources {
        for shuffle in [false, true] {
            for drop_last in [false, true] {
                let spec = BatchSpec {
                    shuffle,
                    seed: 9,
                    drop_last,
                    ..spec(4, &["id"])
                };
                let passes = shard_passes(make.as_ref(), &spec, 2);
                let counts: Vec<usize> = passes.iter().map(Vec::len).collect();
                let mut rows: Vec<i64> = passes.iter().flatten().flatten().copied().collect();
                rows.sort_unstable();
                if drop_last {
                    // 25 full batches, one dropped to make the count even.
                    assert_eq!(counts, [12, 12], "{name}, shuffle {shuffle}");
                    assert!(passes.iter().flatten().all(|batch| batch.len() == 4));
                    let read = rows.len();
                    rows.dedup();
                    assert_eq!((read, rows.len()), (96, 96), "{name}, shuffle {shuffle}");
                } else {
                    // 26 batches (the last short): 13 each, every row once.
                    assert_eq!(counts, [13, 13], "{name}, shuffle {shuffle}");
                    assert_eq!(
                        rows,
                        (0..101).collect::<Vec<_>>(),
                        "{name}, shuffle {shuffle}"
                    );
                }
                if !shuffle {
                    // In order: shard 0 takes the first half of the epoch, shard 1 the rest.
                    let order: Vec<i64> = passes.iter().flatten().flatten().copied().collect();
                    let expected: Vec<i64> = (0..order.len() as i64).collect();
                    assert_eq!(order, expected, "{name}, drop_last {drop_last}");
                }
            }
        }
    }
}

#[test]
fn shards_that_a_deal_of_units_leaves_even_keep_the_deal() {
    let dir = tempfile::tempdir().unwrap();
    // Four row groups of 8 rows over two shards: units 0 and 2 to shard 0, 1 and 3 to shard 1.
    let data = table(&[32]);
    let parquet = write_parquet(&dir.path().join("four.parquet"), &data, 8);
    let make = move || Source::ParquetFiles(vec![parquet.clone()]);
    let passes = shard_passes(&make, &spec(4, &["id"]), 2);
    let first: Vec<i64> = passes[0].iter().flatten().copied().collect();
    assert_eq!(
        first,
        [(0..8).collect::<Vec<_>>(), (16..24).collect()].concat()
    );
}

#[test]
fn a_planned_shard_of_rows_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[101]);
    let parquet = write_parquet(&dir.path().join("one.parquet"), &data, 1000);
    let make = move || Source::ParquetFiles(vec![parquet.clone()]);
    for shuffle in [false, true] {
        let spec = BatchSpec {
            shard_index: 1,
            num_shards: 2,
            shuffle,
            seed: 4,
            ..spec(4, &["id"])
        };
        let whole: Vec<Vec<i64>> = batches(make(), spec.clone())
            .unwrap()
            .map(|b| ids(std::slice::from_ref(&b.unwrap())))
            .collect();
        let mut loader = batches(make(), spec.clone()).unwrap();
        for _ in 0..5 {
            loader.next().unwrap().unwrap();
        }
        let state = serde_json::to_string(&loader.state()).unwrap();
        assert!(state.contains(r#""kind":"plan","batch":5"#), "{state}");
        let state: LoaderState = serde_json::from_str(&state).unwrap();
        let rest: Vec<Vec<i64>> = batches(make(), spec.clone().state(state))
            .unwrap()
            .map(|b| ids(std::slice::from_ref(&b.unwrap())))
            .collect();
        assert_eq!(rest, whole[5..], "shuffle {shuffle}");
    }
}

#[test]
fn states_of_an_epoch_planned_by_rows_merge_into_the_rows_left() {
    let dir = tempfile::tempdir().unwrap();
    // Units of 90 and 11 rows over two shards: planned by rows.
    let data = table(&[90, 11]);
    let ipc = write_ipc(&dir.path().join("two.arrow"), &data);
    let make = move || Source::IpcFiles(vec![ipc.clone()]);
    for shuffle in [false, true] {
        let spec = BatchSpec {
            shuffle,
            seed: 2,
            buffer_size: 16,
            ..spec(4, &["id"])
        };
        for stops in [[3, 0], [5, 9], [13, 13]] {
            let mut seen = Vec::new();
            let mut states = Vec::new();
            for (index, stop) in stops.into_iter().enumerate() {
                let mut loader = batches(make(), spec.clone().shard(index, 2)).unwrap();
                for batch in loader.by_ref().take(stop) {
                    seen.extend(ids(&[batch.unwrap()]));
                }
                let state = loader.state();
                let json = serde_json::to_string(&state).unwrap();
                if stop > 0 {
                    assert!(json.contains(r#""unit_rows":["#), "{json}");
                    assert!(
                        json.contains(r#""position":{"kind":"plan","batch":"#),
                        "{json}"
                    );
                    assert!(json.contains(r#""kind":"plan""#), "{json}");
                }
                states.push(state);
            }
            let merged = merge_states(&states).unwrap();
            for new_shards in [1, 3] {
                let mut all = seen.clone();
                for index in 0..new_shards {
                    let spec = spec.clone().shard(index, new_shards).state(merged.clone());
                    all.extend(ids(&collect(make(), spec)));
                }
                all.sort_unstable();
                assert_eq!(
                    all,
                    (0..101).collect::<Vec<_>>(),
                    "shuffle {shuffle}, stops {stops:?}, {new_shards} new shards"
                );
            }
        }
    }
}

#[test]
fn states_of_ranks_with_workers_resume_in_their_layout_or_merge_into_another() {
    let dir = tempfile::tempdir().unwrap();
    // Units that the ranks' deal leaves uneven (one plan of the epoch) and even (each rank
    // plans its own units).
    for (name, sizes) in [("uneven", &[90, 11][..]), ("even", &[25, 25, 25, 26][..])] {
        let data = table(sizes);
        let ipc = write_ipc(&dir.path().join(format!("{name}.arrow")), &data);
        let make = move || Source::IpcFiles(vec![ipc.clone()]);
        for shuffle in [false, true] {
            // Two ranks of two workers: shard `worker * 2 + rank`.
            let spec = BatchSpec {
                shuffle,
                seed: 5,
                buffer_size: 16,
                num_ranks: 2,
                ..spec(4, &["id"])
            };
            let mut seen = Vec::new();
            let mut states = Vec::new();
            for (index, stop) in [2, 0, 5, 1].into_iter().enumerate() {
                let shard = spec.clone().shard(index, 4);
                let whole = collect(make(), shard.clone());
                let mut loader = batches(make(), shard.clone()).unwrap();
                for batch in loader.by_ref().take(stop) {
                    seen.extend(ids(&[batch.unwrap()]));
                }
                let state = loader.state();
                assert_eq!(state.ranks, Some(2));
                // The same layout resumes the rest of the shard.
                let rest = collect(make(), shard.clone().state(state.clone()));
                let given: usize = whole.iter().map(|b| b.num_rows()).sum::<usize>();
                let left: usize = rest.iter().map(|b| b.num_rows()).sum();
                assert_eq!(ids(&rest), ids(&whole)[given - left..], "shard {index}");
                // The same shards in another number of ranks are refused, naming both.
                let other = BatchSpec {
                    num_ranks: 4,
                    ..shard.clone()
                };
                let error = batches(make(), other.state(state.clone())).err().unwrap();
                assert!(
                    chain(&error).contains("in 2 ranks; this loader is shard"),
                    "{}",
                    chain(&error)
                );
                states.push(state);
            }
            // One rank's states alone (its two workers') are not the run's: said in ranks.
            let error = merge_states(&[states[0].clone(), states[2].clone()]).unwrap_err();
            assert!(
                chain(&error).contains("(2 ranks of 2 DataLoader workers each: every rank's"),
                "{}",
                chain(&error)
            );
            // Merged, the rows left are read once by any other layout: 1 rank of 3 workers.
            let merged = merge_states(&states).unwrap();
            let mut all = seen.clone();
            for index in 0..3 {
                let new = BatchSpec {
                    num_ranks: 1,
                    ..spec.clone()
                };
                all.extend(ids(&collect(
                    make(),
                    new.shard(index, 3).state(merged.clone()),
                )));
            }
            all.sort_unstable();
            assert_eq!(
                all,
                (0..101).collect::<Vec<_>>(),
                "{name}, shuffle {shuffle}"
            );
        }
    }
}

#[test]
fn a_planned_state_whose_units_rows_were_altered_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[90, 11]);
    let ipc = write_ipc(&dir.path().join("two.arrow"), &data);
    let make = move || Source::IpcFiles(vec![ipc.clone()]);
    let spec = spec(4, &["id"]).shard(0, 2);
    let mut loader = batches(make(), spec.clone()).unwrap();
    loader.next().unwrap().unwrap();
    let state = loader.state();
    assert_eq!(state.work.unit_rows, Some(vec![90, 11]));
    assert_eq!(state.position, Some(Position::Plan { batch: 1 }));
    let other = batches(make(), spec.clone().shard(1, 2)).unwrap().state();
    // Both states of the run with the work's units' rows forged alike.
    let altered = |rows: Vec<u64>| {
        let (mut first, mut second) = (state.clone(), other.clone());
        first.work.units = Some(rows.len() as u64);
        first.work.unit_rows = Some(rows.clone());
        if rows.len() > 2 {
            first.settings.batch_size = 1;
        }
        second.work = first.work.clone();
        second.settings = first.settings.clone();
        (first, second)
    };
    // On resuming: the source's units are checked against the state's.
    let (forged, _) = altered(vec![50, 51]);
    let error = batches(make(), spec.clone().state(forged)).err().unwrap();
    assert!(
        chain(&error).contains("which differ from this source's"),
        "{}",
        chain(&error)
    );
    // In a merge, which has no source: rows past any real plan's, windows too large, units of
    // another count; 2^29 rows in batches of 1 (2^29 batches), and 2^32 rows: refused before
    // the replay, not after minutes.
    for rows in [
        vec![u64::MAX, 11],
        vec![1 << 40, 1 << 40],
        vec![1 << 23; 64],
        vec![1 << 23; 512],
    ] {
        let (first, second) = altered(rows.clone());
        let message = chain(&merge_states(&[first, second]).unwrap_err());
        assert!(message.contains("replays at most"), "{rows:?}: {message}");
    }
    let (mut first, mut second) = altered(vec![90]);
    first.work.units = Some(2);
    second.work.units = Some(2);
    let message = chain(&merge_states(&[first, second]).unwrap_err());
    assert!(
        message.contains("rows of 1 units, and has 2 units"),
        "{message}"
    );
}

#[test]
fn a_ranks_workers_take_runs_of_its_batches_and_only_its_last_is_short() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = |passes: &[Vec<Vec<i64>>]| -> Vec<Vec<usize>> {
        passes
            .iter()
            .map(|pass| pass.iter().map(Vec::len).collect())
            .collect()
    };
    // Four units over two ranks of two workers (shard `worker * 2 + rank`): each rank takes
    // the units dealt to it (0 and 2, 1 and 3), 12 rows in 3 batches, the batches it cuts
    // without workers, and its workers take runs of them, the longer run last.
    let data = table(&[8, 8, 4, 4]);
    let ipc = write_ipc(&dir.path().join("four.arrow"), &data);
    let make = move || Source::IpcFiles(vec![ipc.clone()]);
    let ranked = |num_ranks: usize| BatchSpec {
        num_ranks,
        ..spec(4, &["id"])
    };
    let passes = shard_passes(&make, &ranked(2), 4);
    let rows = |range: std::ops::Range<i64>| range.collect::<Vec<_>>();
    assert_eq!(passes[0], [rows(0..4)]);
    assert_eq!(passes[2], [rows(4..8), rows(16..20)]);
    assert_eq!(passes[1], [rows(8..12)]);
    assert_eq!(passes[3], [rows(12..16), rows(20..24)]);
    let alone = shard_passes(&make, &ranked(0), 2);
    for rank in 0..2 {
        assert_eq!(
            [passes[rank].clone(), passes[rank + 2].clone()].concat(),
            alone[rank]
        );
    }
    // Shuffled too: the rank's windows are cut as its loader without workers cuts them, so
    // its workers' runs are its batches (many small units, windows of several).
    let data = table(&[5; 40]);
    let ipc = write_ipc(&dir.path().join("forty.arrow"), &data);
    let make_forty = move || Source::IpcFiles(vec![ipc.clone()]);
    for (drop_last, buffer_size) in [(false, 12), (true, 12), (false, 4), (false, 1000)] {
        let shuffled = |num_ranks: usize| BatchSpec {
            shuffle: true,
            seed: 11,
            drop_last,
            buffer_size,
            num_ranks,
            ..spec(4, &["id"])
        };
        let alone = shard_passes(&make_forty, &shuffled(0), 2);
        for workers in [2, 3] {
            let passes = shard_passes(&make_forty, &shuffled(2), 2 * workers);
            for rank in 0..2 {
                let runs: Vec<Vec<i64>> = (0..workers)
                    .flat_map(|worker| passes[worker * 2 + rank].clone())
                    .collect();
                assert_eq!(
                    runs, alone[rank],
                    "drop_last {drop_last}, buffer {buffer_size}"
                );
            }
        }
    }
    // Every shard a rank: as many batches each.
    let counts: Vec<usize> = shard_passes(&make, &ranked(0), 4)
        .iter()
        .map(Vec::len)
        .collect();
    assert_eq!(counts, [2, 2, 2, 2]);
    // A count of ranks that does not divide the shards is refused.
    let spec3 = BatchSpec {
        num_ranks: 3,
        ..spec(4, &["id"]).shard(0, 4)
    };
    let error = batches(make(), spec3).err().unwrap();
    assert!(chain(&error).contains("num_ranks is 3; expected 0 or a divisor of num_shards (4)"));

    // One unit of 100 rows, one rank of two workers: the rank's 7 batches, the short one last
    // (a DataLoader takes batches 0, 3, 1, 4, 2, 5, 6).
    let data = table(&[100]);
    let ipc = write_ipc(&dir.path().join("one.arrow"), &data);
    let make = move || Source::IpcFiles(vec![ipc.clone()]);
    let one_rank = BatchSpec {
        num_ranks: 1,
        ..spec(16, &["id"])
    };
    let passes = shard_passes(&make, &one_rank, 2);
    assert_eq!(sizes(&passes), [vec![16; 3], vec![16, 16, 16, 4]]);
    assert_eq!(passes.concat().concat(), rows(0..100));
    // With drop_last only the rank's remainder is dropped (4 rows, not each worker's).
    let passes = shard_passes(&make, &one_rank.clone().drop_last(true), 2);
    assert_eq!(sizes(&passes), [vec![16; 3], vec![16; 3]]);
    assert_eq!(passes.concat().concat(), rows(0..96));
    // Shuffled, the same: runs of the rank's batches, every row once.
    let shuffled = BatchSpec {
        shuffle: true,
        seed: 3,
        buffer_size: 40,
        ..one_rank.clone()
    };
    let passes = shard_passes(&make, &shuffled, 2);
    assert_eq!(sizes(&passes), [vec![16; 3], vec![16, 16, 16, 4]]);
    let mut all = passes.concat().concat();
    all.sort_unstable();
    assert_eq!(all, rows(0..100));
    // Fewer batches than workers: the last workers take them.
    let data = table(&[3]);
    let ipc = write_ipc(&dir.path().join("three.arrow"), &data);
    let make_three = move || Source::IpcFiles(vec![ipc.clone()]);
    let passes = shard_passes(&make_three, &one_rank, 2);
    assert_eq!(passes, [vec![], vec![vec![0, 1, 2]]]);
    // Two units of 90 and 10 rows over two workers: the rank's batches, not a unit each.
    let data = table(&[90, 10]);
    let ipc = write_ipc(&dir.path().join("two.arrow"), &data);
    let make = move || Source::IpcFiles(vec![ipc.clone()]);
    let passes = shard_passes(&make, &one_rank, 2);
    assert_eq!(passes[1].concat(), rows(48..100));
}

#[test]
fn record_batches_in_memory_and_local_streams_that_deal_unevenly_are_planned_by_rows_too() {
    let dir = tempfile::tempdir().unwrap();
    let sources = streams_and_memory(dir.path(), &[90, 11]);
    for (make, shuffle) in sources
        .iter()
        .flat_map(|make| [(make.as_ref(), false), (make.as_ref(), true)])
    {
        let spec = BatchSpec {
            shuffle,
            seed: 6,
            ..spec(4, &["id"])
        };
        let passes = shard_passes(make, &spec, 2);
        assert_eq!(passes.iter().map(Vec::len).collect::<Vec<_>>(), [13, 13]);
        let mut rows: Vec<i64> = passes.iter().flatten().flatten().copied().collect();
        rows.sort_unstable();
        assert_eq!(rows, (0..101).collect::<Vec<_>>(), "shuffle {shuffle}");
        // Resumed from a state after 4 batches: the rest of the same shard.
        let shard = spec.clone().shard(1, 2);
        let mut loader = batches(make(), shard.clone()).unwrap();
        for _ in 0..4 {
            loader.next().unwrap().unwrap();
        }
        let rest = collect(make(), shard.state(loader.state()));
        assert_eq!(
            rest.iter()
                .map(|b| ids(std::slice::from_ref(b)))
                .collect::<Vec<_>>(),
            passes[1][4..]
        );
    }
}

#[test]
fn a_merged_state_of_a_local_stream_resumed_by_other_ranks_gives_them_as_many_batches() {
    let dir = tempfile::tempdir().unwrap();
    for make in streams_and_memory(dir.path(), &[37]) {
        // One shard gives 3 batches of 2 rows; its merged state is resumed by two ranks.
        let spec = spec(2, &["id"]);
        let mut loader = batches(make(), spec.clone()).unwrap();
        let mut given = Vec::new();
        for _ in 0..3 {
            given.extend(ids(&[loader.next().unwrap().unwrap()]));
        }
        let merged = merge_states(&[loader.state()]).unwrap();
        drop(loader);
        // One reader or two: each knows its length.
        let one = batches(make(), spec.clone().state(merged.clone())).unwrap();
        assert_eq!(one.len(), Some(16));
        let passes = shard_passes(&*make, &spec.clone().state(merged), 2);
        assert_eq!(passes[0].len(), passes[1].len(), "{passes:?}");
        given.extend(passes.iter().flatten().flatten());
        given.sort_unstable();
        assert_eq!(given, (0..37).collect::<Vec<_>>());
    }
}

#[test]
fn forged_positions_past_the_units_of_a_stream_or_record_batches_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for make in streams_and_memory(dir.path(), &[7, 7, 7]) {
        let spec = spec(2, &["id"]);
        let mut loader = batches(make(), spec.clone()).unwrap();
        loader.next().unwrap().unwrap();
        let state = loader.state();
        drop(loader);
        let forgeries: [fn(&mut LoaderState); 3] = [
            |state| state.position = Some(Position::Rows { item: 100, row: 0 }),
            |state| {
                state.position = Some(Position::Rows {
                    item: 1,
                    row: 1_000_000,
                })
            },
            |state| state.work.rest_from = u64::MAX,
        ];
        for forge in forgeries {
            let mut forged = state.clone();
            forge(&mut forged);
            let error = batches(make(), spec.clone().state(forged)).err().unwrap();
            assert!(
                chain(&error).contains("cannot resume from the state"),
                "{}",
                chain(&error)
            );
        }
    }
}
