//! Planned epochs: under a token budget or length buckets, every shard of files, local streams and
//! record batches in memory (2 and 3 ranks, and ranks x 2 workers) gets the same number of batches
//! in every epoch, shuffled and resumed, each row at most once (exactly once without `drop_last`),
//! every batch within its budget; a state of a planned epoch merges only before its first batch.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch};
use arrow_dlpack_loader::{
    BatchSpec, LoaderState, Sequence, SequenceMode, Source, TensorBatch, batches, merge_states,
    outline,
};

use parquet::arrow::ArrowWriter;

use crate::data::{chain, collect, ids, values, write_ipc, write_stream};

/// The tokens of row `id`: a skewed length from 1 to 40 (many short rows, few long ones).
fn length(id: i64) -> i64 {
    let a = (id * 37 + 11) % 40 + 1;
    let b = (id * 53 + 7) % 40 + 1;
    a.min(b)
}

/// Record batches of `sizes` rows: `id` and `tokens` (list<int32> of `length(id)` values).
fn table(sizes: &[usize]) -> Vec<RecordBatch> {
    let mut next = 0i64;
    sizes
        .iter()
        .map(|&size| {
            let ids: Vec<i64> = (next..next + size as i64).collect();
            next += size as i64;
            let rows = ids.iter().map(|&id| {
                Some(
                    (0..length(id))
                        .map(|p| Some((id * 100 + p) as i32))
                        .collect::<Vec<_>>(),
                )
            });
            let tokens: ArrayRef =
                Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(rows));
            RecordBatch::try_from_iter([
                ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
                ("tokens", tokens),
            ])
            .unwrap()
        })
        .collect()
}

/// Units of very different sizes, so that the round-robin deal gives some shards many more rows
/// (and, cut as they are read, many more batches) than others: 2 and 3 shards, shuffled or not.
const SIZES: [usize; 12] = [150, 4, 3, 12, 5, 2, 30, 3, 6, 40, 2, 5];

struct Files {
    _dir: tempfile::TempDir,
    parquet: PathBuf,
    ipc: PathBuf,
    /// The same record batches in two IPC streams (the first five, then the rest).
    streams: Vec<PathBuf>,
    /// And in memory.
    data: Vec<RecordBatch>,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&SIZES);
    let ipc = write_ipc(&dir.path().join("t.arrow"), &data);
    let parquet = dir.path().join("t.parquet");
    // One row group per record batch: the units are the same in both formats.
    let file = std::fs::File::create(&parquet).unwrap();
    let mut writer = ArrowWriter::try_new(file, data[0].schema(), None).unwrap();
    for batch in &data {
        writer.write(batch).unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    let streams = vec![
        write_stream(&dir.path().join("a.arrows"), &data[..5]),
        write_stream(&dir.path().join("b.arrows"), &data[5..]),
    ];
    Files {
        _dir: dir,
        parquet,
        ipc,
        streams,
        data,
    }
}

fn total_rows() -> i64 {
    SIZES.iter().sum::<usize>() as i64
}

type Maker = Box<dyn Fn() -> Source>;

fn sources(files: &Files) -> Vec<(&'static str, Maker)> {
    let parquet = files.parquet.clone();
    let ipc = files.ipc.clone();
    let streams = files.streams.clone();
    let data = files.data.clone();
    vec![
        (
            "parquet",
            Box::new(move || Source::ParquetFiles(vec![parquet.clone()])),
        ),
        ("ipc", Box::new(move || Source::IpcFiles(vec![ipc.clone()]))),
        (
            "streams",
            Box::new(move || Source::IpcStreams(streams.clone())),
        ),
        (
            "memory",
            Box::new(move || Source::record_batches(data[0].schema(), data.clone())),
        ),
    ]
}

/// The specs planned over several shards: a budget (padded and packed), buckets, both.
fn specs() -> Vec<BatchSpec> {
    let base = BatchSpec::new(16).columns(["id"]).buffer_size(48);
    vec![
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Pad))
            .max_tokens(200),
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Pack))
            .max_tokens(150)
            .shuffle(3),
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Pad))
            .bucket_by_length(true),
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Pad))
            .bucket_by_length(true)
            .shuffle(5),
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Jagged))
            .bucket_by_length(true)
            .max_tokens(120)
            .shuffle(7),
    ]
}

/// The tokens a batch's sequence tensor holds.
fn tokens_in(batch: &TensorBatch, mode: SequenceMode) -> usize {
    let tensor = batch.get("tokens").unwrap();
    match mode {
        SequenceMode::Pad => tensor.shape()[0] * tensor.shape()[1],
        _ => tensor.shape()[0],
    }
}

/// Checks the batches of every shard: as many per shard, as `outline` says; rows disjoint,
/// complete unless `drop_last`; within the budget; each id's tokens its own.
fn check_epoch(case: &str, spec: &BatchSpec, shards: &[Vec<TensorBatch>]) {
    let mode = spec.sequences[0].mode;
    let counts: Vec<usize> = shards.iter().map(Vec::len).collect();
    assert!(
        counts.iter().all(|&count| count == counts[0] && count > 0),
        "{case}: batches per shard {counts:?}"
    );
    let mut seen = BTreeSet::new();
    for batch in shards.iter().flatten() {
        if let Some(budget) = spec.max_tokens {
            assert!(tokens_in(batch, mode) <= budget, "{case}");
        }
        assert!(batch.num_rows() <= spec.batch_size, "{case}");
        let batch_ids = values::<i64>(batch.get("id").unwrap());
        if mode == SequenceMode::Pad {
            let lengths = values::<i64>(batch.get("tokens_lengths").unwrap());
            let expected: Vec<i64> = batch_ids.iter().map(|&id| length(id)).collect();
            assert_eq!(lengths, expected, "{case}");
        }
        for id in batch_ids {
            assert!(seen.insert(id), "{case}: row {id} twice");
        }
    }
    if spec.drop_last {
        assert!(seen.len() as i64 <= total_rows(), "{case}");
    } else {
        assert_eq!(seen, (0..total_rows()).collect(), "{case}");
    }
}

/// The batches of every shard of `count`, checked to be as many as `outline` says once the
/// shards are known to have as many.
fn epoch_of(make: &dyn Fn() -> Source, spec: &BatchSpec, count: usize) -> Vec<Vec<TensorBatch>> {
    let shards: Vec<Vec<TensorBatch>> = (0..count)
        .map(|index| collect(make(), spec.clone().shard(index, count)))
        .collect();
    let counts: Vec<usize> = shards.iter().map(Vec::len).collect();
    assert!(
        counts.iter().all(|&n| n == counts[0] && n > 0),
        "{count} shards: batches per shard {counts:?}: {spec:?}"
    );
    for index in 0..count {
        let planned = outline(make(), &spec.clone().shard(index, count)).unwrap();
        assert_eq!(
            planned.num_batches,
            Some(counts[0]),
            "shard {index} of {count}"
        );
    }
    shards
}

#[test]
fn two_and_three_ranks_and_two_workers_each_get_equal_batches_in_every_epoch() {
    let files = files();
    for (name, make) in sources(&files) {
        for spec in specs() {
            for drop_last in [false, true] {
                // 2 and 3 ranks, and each with 2 DataLoader workers (4 and 6 shards).
                for count in [2, 3, 4, 6] {
                    let mut orders = Vec::new();
                    for epoch in 0..3 {
                        let spec = spec.clone().drop_last(drop_last).epoch(epoch);
                        let case = format!(
                            "{name} {count} shards epoch {epoch} drop_last {drop_last}: {spec:?}"
                        );
                        let shards = epoch_of(make.as_ref(), &spec, count);
                        check_epoch(&case, &spec, &shards);
                        orders.push(ids(&shards[0]));
                    }
                    if spec.shuffle {
                        assert_ne!(orders[0], orders[1], "{name} {count}: {spec:?}");
                        assert_ne!(orders[1], orders[2], "{name} {count}: {spec:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn files_streams_and_memory_of_the_same_rows_plan_the_same_batches() {
    let files = files();
    let sources = sources(&files);
    for spec in specs() {
        for count in [2, 3] {
            let shard_ids = |make: &Maker| -> Vec<Vec<i64>> {
                epoch_of(make.as_ref(), &spec, count)
                    .iter()
                    .map(|shard| ids(shard))
                    .collect()
            };
            let parquet = shard_ids(&sources[0].1);
            // Files shuffle their units one by one; streams are shuffled whole, and record
            // batches in memory keep their order, so only the unshuffled plans are the same.
            let same = if spec.shuffle { 2 } else { sources.len() };
            for (name, make) in &sources[1..same] {
                assert_eq!(shard_ids(make), parquet, "{name}, {count} shards: {spec:?}");
            }
        }
    }
}

/// Every tensor of each batch as bytes.
fn dump(batches: impl Iterator<Item = arrow_dlpack_loader::Result<TensorBatch>>) -> Vec<Vec<u8>> {
    batches
        .map(|batch| {
            let batch = batch.unwrap();
            let mut bytes = Vec::new();
            for (name, tensor) in batch.tensors() {
                bytes.extend(name.as_bytes());
                let contiguous = tensor.to_contiguous().unwrap();
                bytes.extend(contiguous.row_major_buffer().unwrap().as_slice());
            }
            bytes
        })
        .collect()
}

#[test]
fn every_shard_resumed_after_any_batch_gives_the_rest_of_its_plan() {
    let files = files();
    for (name, make) in sources(&files) {
        for spec in specs() {
            for count in [2, 3] {
                for index in 0..count {
                    let spec = spec.clone().shard(index, count).epoch(1);
                    // One pass saves its state before every batch and after the last, as a
                    // training loop's checkpoints do, and gives the batches to compare with.
                    let mut loader = batches(make(), spec.clone()).unwrap();
                    let mut states = vec![loader.state()];
                    let mut full = Vec::new();
                    while let Some(batch) = loader.next() {
                        full.push(batch.unwrap());
                        states.push(loader.state());
                    }
                    let full = dump(full.into_iter().map(Ok));
                    for (k, state) in states.into_iter().enumerate() {
                        let json = serde_json::to_string(&state).unwrap();
                        let state: LoaderState = serde_json::from_str(&json).unwrap();
                        let resumed = batches(make(), spec.clone().state(state)).unwrap();
                        assert_eq!(resumed.num_batches(), Some(full.len() - k));
                        assert_eq!(
                            dump(resumed),
                            full[k..],
                            "{name} shard {index} of {count}, k = {k}: {spec:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_planned_state_is_refused_elsewhere_and_merges_only_before_its_first_batch() {
    let files = files();
    let make = || Source::ParquetFiles(vec![files.parquet.clone()]);
    let spec = specs().remove(3);
    let state_after = |index: usize, k: usize| {
        let mut loader = batches(make(), spec.clone().shard(index, 2)).unwrap();
        for _ in 0..k {
            loader.next().unwrap().unwrap();
        }
        loader.state()
    };
    // Before the first batch, the shards' states merge into the whole epoch for new shards.
    let merged = merge_states(&[state_after(0, 0), state_after(1, 0)]).unwrap();
    let shards: Vec<Vec<TensorBatch>> = (0..3)
        .map(|index| collect(make(), spec.clone().shard(index, 3).state(merged.clone())))
        .collect();
    check_epoch("merged at the start", &spec, &shards);
    // After it, which rows are left depends on the plan: refused, saying why.
    let error = merge_states(&[state_after(0, 2), state_after(1, 0)]).unwrap_err();
    let message = chain(&error);
    assert!(
        message.contains("planned from its rows' lengths"),
        "{message}"
    );
    // A planned position given to a loader that cuts as it reads (one shard) is refused.
    let saved = state_after(1, 2);
    let mut one = saved.clone();
    one.shard = Some([0, 1]);
    let error = batches(make(), spec.clone().state(one)).err().unwrap();
    assert!(chain(&error).contains("cannot resume"), "{}", chain(&error));
    // A position past the shard's plan is refused.
    let mut past = saved;
    past.position = Some(arrow_dlpack_loader::Position::Plan { batch: 10_000 });
    let error = batches(make(), spec.clone().shard(1, 2).state(past))
        .err()
        .unwrap();
    assert!(chain(&error).contains("batch 10000"), "{}", chain(&error));
}

#[test]
fn a_merged_state_of_an_unplanned_run_plans_the_rest_of_its_epoch_over_new_shards() {
    let files = files();
    let make = || Source::IpcFiles(vec![files.ipc.clone()]);
    // One shard cuts as it reads: in order, its state is a row inside a unit.
    let spec = specs().remove(0);
    let mut loader = batches(make(), spec.clone()).unwrap();
    let mut given = Vec::new();
    for _ in 0..5 {
        given.extend(values::<i64>(
            loader.next().unwrap().unwrap().get("id").unwrap(),
        ));
    }
    let merged = merge_states(&[loader.state()]).unwrap();
    drop(loader);
    for count in [2, 3] {
        let shards = epoch_of(&make, &spec.clone().state(merged.clone()), count);
        let mut rest: Vec<i64> = shards.iter().flat_map(|shard| ids(shard)).collect();
        rest.extend(&given);
        rest.sort_unstable();
        assert_eq!(
            rest,
            (0..total_rows()).collect::<Vec<_>>(),
            "{count} shards"
        );
    }
}

#[test]
fn rows_left_out_without_drop_last_are_counted_the_same_by_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    // One row group of 101 rows: dealt by units, the second rank would get nothing, so the
    // epoch is planned by rows; a budget plans it by the rows' tokens.
    let parquet = dir.path().join("one.parquet");
    let file = std::fs::File::create(&parquet).unwrap();
    let data = table(&[101]);
    let mut writer = ArrowWriter::try_new(file, data[0].schema(), None).unwrap();
    writer.write(&data[0]).unwrap();
    writer.close().unwrap();
    let make = move || Source::ParquetFiles(vec![parquet.clone()]);
    let by_rows = BatchSpec::new(1).columns(["id"]);
    let budget = BatchSpec::new(1)
        .columns(["id"])
        .sequence(Sequence::new("tokens", SequenceMode::Pad))
        .max_tokens(40);
    // (spec, ranks, the rows no rank reads): batches of one row leave out the rows past a
    // multiple of the ranks; batches of two or more, or drop_last (which drops on purpose),
    // leave none counted.
    let cases = [
        (by_rows.clone(), 2, 1),
        (by_rows.clone(), 3, 2),
        (by_rows.clone().shuffle(4), 3, 2),
        (BatchSpec::new(2).columns(["id"]), 3, 0),
        (by_rows.clone().drop_last(true), 3, 0),
        (budget.clone(), 2, 1),
        (
            BatchSpec {
                batch_size: 4,
                ..budget.clone()
            },
            2,
            0,
        ),
    ];
    for (spec, ranks, left_out) in cases {
        let mut read: Vec<i64> = Vec::new();
        for rank in 0..ranks {
            let loader = batches(make(), spec.clone().shard(rank, ranks)).unwrap();
            assert_eq!(
                loader.rows_left_out(),
                left_out,
                "rank {rank} of {ranks}: {spec:?}"
            );
            read.extend(ids(&loader.map(Result::unwrap).collect::<Vec<_>>()));
        }
        let mut unique = read.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), read.len(), "{spec:?}");
        if !spec.drop_last {
            assert_eq!(read.len() as u64 + left_out, 101, "{ranks} ranks: {spec:?}");
        }
    }
    // Unplanned (one rank, or a deal of units that leaves the ranks even) reads every row.
    let one = batches(make(), by_rows.clone()).unwrap();
    assert_eq!(one.rows_left_out(), 0);
}
