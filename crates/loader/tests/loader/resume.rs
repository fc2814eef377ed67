//! Resuming: a run stopped after `k` batches, its state saved as JSON and handed to a new
//! loader (in this process, and in a new process), continues exactly as the uninterrupted run;
//! merged states of every shard let other shards read each remaining row exactly once; states
//! from other arguments or corrupt ones are refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch};
use arrow_dlpack_loader::{
    BatchSpec, Error, LoaderState, STATE_VERSION, Sequence, SequenceMode, Source, TensorBatch,
    batches, merge_states,
};

use crate::data::{chain, ids, reader, spec, table, write_ipc, write_parquet, write_stream};

/// Every tensor of a batch as bytes with its name, dtype and shape: equal bytes, equal batches.
fn bytes_of(batch: &TensorBatch) -> Vec<(String, String, Vec<usize>, Vec<u8>)> {
    batch
        .tensors()
        .iter()
        .chain(batch.masks())
        .map(|(name, tensor)| {
            let contiguous = tensor.to_contiguous().unwrap();
            let buffer = contiguous.row_major_buffer().unwrap();
            (
                name.clone(),
                format!("{:?}", tensor.dtype()),
                tensor.shape().to_vec(),
                buffer.as_slice().to_vec(),
            )
        })
        .collect()
}

type Dump = Vec<Vec<(String, String, Vec<usize>, Vec<u8>)>>;

fn dump(batches: impl Iterator<Item = Result<TensorBatch, Error>>) -> Dump {
    batches.map(|batch| bytes_of(&batch.unwrap())).collect()
}

/// The state after `k` batches of `make()` with `spec`, as JSON, and the batches after it.
fn stop_after(make: &dyn Fn() -> Source, spec: &BatchSpec, k: usize) -> String {
    let mut loader = batches(make(), spec.clone()).unwrap();
    for _ in 0..k {
        loader.next().unwrap().unwrap();
    }
    serde_json::to_string(&loader.state()).unwrap()
}

/// The batches of `make()` with `spec` resumed from the JSON `state`.
fn resumed(make: &dyn Fn() -> Source, spec: &BatchSpec, state: &str) -> Dump {
    let state: LoaderState = serde_json::from_str(state).unwrap();
    dump(batches(make(), spec.clone().state(state)).unwrap())
}

struct Files {
    _dir: tempfile::TempDir,
    ipc: PathBuf,
    parquet: PathBuf,
    stream: PathBuf,
}

/// The same rows as an IPC file, a Parquet file (row groups of 6 rows) and an IPC stream.
fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[7, 5, 9, 3, 8, 6]);
    Files {
        ipc: write_ipc(&dir.path().join("t.arrow"), &data),
        parquet: write_parquet(&dir.path().join("t.parquet"), &data, 6),
        stream: write_stream(&dir.path().join("t.arrows"), &data),
        _dir: dir,
    }
}

/// A named way to make a source afresh.
type Maker = (&'static str, Box<dyn Fn() -> Source>);

fn sources(files: &Files) -> Vec<Maker> {
    let (ipc, parquet, stream) = (
        files.ipc.clone(),
        files.parquet.clone(),
        files.stream.clone(),
    );
    vec![
        ("ipc", Box::new(move || Source::IpcFiles(vec![ipc.clone()]))),
        (
            "parquet",
            Box::new(move || Source::ParquetFiles(vec![parquet.clone()])),
        ),
        (
            "stream",
            Box::new(move || Source::IpcStreams(vec![stream.clone()])),
        ),
        ("reader", Box::new(|| reader(table(&[7, 5, 9, 3, 8, 6])))),
    ]
}

fn specs() -> Vec<(&'static str, BatchSpec)> {
    let plain = BatchSpec {
        masks: vec!["x".to_string()],
        allow_nulls: true,
        ..spec(4, &["id", "emb", "flag"]).group("xs", ["x", "small"])
    };
    vec![
        ("in order", plain.clone()),
        ("in order, drop_last", plain.clone().drop_last(true)),
        ("shuffled", plain.clone().shuffle(5).buffer_size(10)),
        (
            "shuffled, drop_last, epoch 3",
            plain
                .clone()
                .shuffle(9)
                .buffer_size(7)
                .drop_last(true)
                .epoch(3),
        ),
    ]
}

#[test]
fn every_stopping_point_resumes_to_the_same_batches() {
    let files = files();
    for (source_name, make) in sources(&files) {
        for (spec_name, spec) in specs() {
            let full = dump(batches(make(), spec.clone()).unwrap());
            assert!(full.len() > 5, "{source_name}, {spec_name}");
            // Every k: 0, inside the first unit, at unit boundaries, inside windows, after the
            // last batch.
            for k in 0..=full.len() {
                let state = stop_after(&*make, &spec, k);
                assert_eq!(
                    resumed(&*make, &spec, &state),
                    full[k..],
                    "{source_name}, {spec_name}, stopped after {k} batches: {state}"
                );
            }
        }
    }
}

#[test]
fn a_resumed_loader_knows_how_many_batches_it_has_left_where_the_rows_are_known() {
    let files = files();
    let data = table(&[7, 5, 9, 3, 8, 6]);
    let schema = data[0].schema();
    let mut makers = sources(&files);
    makers.retain(|(name, _)| *name != "reader");
    makers.push((
        "in memory",
        Box::new(move || Source::record_batches(schema.clone(), data.clone())),
    ));
    for (source_name, make) in &makers {
        for (spec_name, spec) in specs() {
            for shard in [spec.clone(), spec.clone().shard(1, 2)] {
                let full = dump(batches(make(), shard.clone()).unwrap());
                for k in 0..=full.len() {
                    let state: LoaderState =
                        serde_json::from_str(&stop_after(&**make, &shard, k)).unwrap();
                    let loader = batches(make(), shard.clone().state(state)).unwrap();
                    assert_eq!(
                        loader.len(),
                        Some(full.len() - k),
                        "{source_name}, {spec_name}, shard {}, after {k}",
                        shard.shard_index
                    );
                }
            }
        }
    }
}

#[test]
fn a_resumed_run_saves_the_states_of_the_uninterrupted_run() {
    let files = files();
    let make = || Source::ParquetFiles(vec![files.parquet.clone()]);
    for (_, spec) in specs() {
        let mut whole = batches(make(), spec.clone()).unwrap();
        let mut states = vec![whole.state()];
        while whole.next().is_some() {
            states.push(whole.state());
        }
        let mut resumed = batches(make(), spec.clone().state(states[3].clone())).unwrap();
        assert_eq!(resumed.state(), states[3]);
        for expected in &states[4..] {
            resumed.next().unwrap().unwrap();
            assert_eq!(&resumed.state(), expected);
        }
    }
}

/// Records `(id, tokens)` whose token lists have `id % 5` values.
fn token_table(sizes: &[usize]) -> Vec<RecordBatch> {
    let mut next = 0i64;
    sizes
        .iter()
        .map(|&size| {
            let ids: Vec<i64> = (next..next + size as i64).collect();
            next += size as i64;
            let rows = ids.iter().map(|&id| {
                Some(
                    (0..id % 5)
                        .map(|p| Some((id * 10 + p) as i32))
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

#[test]
fn sequence_modes_token_budgets_and_buckets_resume_to_the_same_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(
        &dir.path().join("s.parquet"),
        &token_table(&[9, 7, 11, 5]),
        8,
    );
    let make = || Source::ParquetFiles(vec![path.clone()]);
    let base = BatchSpec::new(4).columns(["id"]);
    let cases = [
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Pad)),
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Pack))
            .max_tokens(9),
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Jagged))
            .bucket_by_length(true)
            .buffer_size(10),
        base.clone()
            .sequence(Sequence::new("tokens", SequenceMode::Pad))
            .bucket_by_length(true)
            .shuffle(4)
            .buffer_size(12)
            .max_tokens(12),
    ];
    for spec in cases {
        let full = dump(batches(make(), spec.clone()).unwrap());
        for k in 0..=full.len() {
            let state = stop_after(&make, &spec, k);
            assert_eq!(
                resumed(&make, &spec, &state),
                full[k..],
                "{spec:?}, k = {k}"
            );
        }
    }
}

/// Run as a child process by [`a_new_process_resumes_from_a_saved_state`]: resumes from the
/// state in the file named by `AD_RESUME_STATE` and writes the batches' bytes as JSON.
#[test]
fn resume_child() {
    let Ok(state_path) = std::env::var("AD_RESUME_STATE") else {
        return;
    };
    let state = std::fs::read_to_string(&state_path).unwrap();
    let (source, spec) = child_case(Path::new(&std::env::var("AD_RESUME_FILE").unwrap()));
    let out = resumed(&move || source_of(&source), &spec, &state);
    std::fs::write(
        std::env::var("AD_RESUME_OUT").unwrap(),
        serde_json::to_string(&out).unwrap(),
    )
    .unwrap();
}

fn child_case(path: &Path) -> (PathBuf, BatchSpec) {
    let shuffle = path.to_string_lossy().contains("shuffled");
    let spec = spec(4, &["id", "emb"]).group("xs", ["x", "small"]);
    let spec = if shuffle {
        spec.shuffle(11).buffer_size(9)
    } else {
        spec
    };
    (path.to_path_buf(), spec)
}

fn source_of(path: &Path) -> Source {
    Source::from_paths([path]).unwrap()
}

#[test]
fn a_new_process_resumes_from_a_saved_state() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[7, 5, 9, 3, 8, 6]);
    for name in ["plain", "shuffled"] {
        let paths = [
            write_ipc(&dir.path().join(format!("{name}.arrow")), &data),
            write_parquet(&dir.path().join(format!("{name}.parquet")), &data, 6),
            write_stream(&dir.path().join(format!("{name}.arrows")), &data),
        ];
        for path in paths {
            let (_, spec) = child_case(&path);
            let make = || source_of(&path);
            let full = dump(batches(make(), spec.clone()).unwrap());
            for k in [0, 1, 4, full.len()] {
                let state_path = dir.path().join("state.json");
                std::fs::write(&state_path, stop_after(&make, &spec, k)).unwrap();
                let out_path = dir.path().join("out.json");
                let status = std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "resume::resume_child", "--test-threads", "1"])
                    .env("AD_RESUME_STATE", &state_path)
                    .env("AD_RESUME_FILE", &path)
                    .env("AD_RESUME_OUT", &out_path)
                    .stdout(std::process::Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
                let out: Dump =
                    serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
                assert_eq!(out, full[k..], "{}, k = {k}", path.display());
            }
        }
    }
}

#[test]
fn merged_states_let_other_shards_read_each_remaining_row_once() {
    let files = files();
    for (source_name, make) in sources(&files) {
        for shuffle in [false, true] {
            let mut spec = spec(3, &["id"]);
            if shuffle {
                spec = spec.shuffle(2).buffer_size(7);
            }
            for stops in [[0, 0], [1, 2], [3, 1], [2, 5], [20, 20]] {
                // Two shards stopped after some batches; what they read, and their states.
                let mut seen = Vec::new();
                let mut states = Vec::new();
                for (shard, stop) in stops.into_iter().enumerate() {
                    let mut loader = batches(make(), spec.clone().shard(shard, 2)).unwrap();
                    for batch in loader.by_ref().take(stop) {
                        seen.extend(ids(&[batch.unwrap()]));
                    }
                    let json = serde_json::to_string(&loader.state()).unwrap();
                    states.push(serde_json::from_str::<LoaderState>(&json).unwrap());
                }
                let merged = merge_states(&states).unwrap();
                for new_shards in [1, 3] {
                    let mut all = seen.clone();
                    for shard in 0..new_shards {
                        let spec = spec.clone().shard(shard, new_shards).state(merged.clone());
                        let rest: Vec<TensorBatch> = batches(make(), spec)
                            .unwrap()
                            .collect::<Result<_, _>>()
                            .unwrap();
                        all.extend(ids(&rest));
                    }
                    all.sort_unstable();
                    assert_eq!(
                        all,
                        (0..38).collect::<Vec<_>>(),
                        "{source_name}, shuffle {shuffle}, stops {stops:?}, {new_shards} new shards"
                    );
                }
            }
        }
    }
}

#[test]
fn a_state_resumed_after_a_merge_resumes_again() {
    let files = files();
    let make = || Source::IpcFiles(vec![files.ipc.clone()]);
    let spec = spec(3, &["id"]).shuffle(8).buffer_size(5);
    let states: Vec<LoaderState> = (0..2)
        .map(|shard| {
            let mut loader = batches(make(), spec.clone().shard(shard, 2)).unwrap();
            loader.next().unwrap().unwrap();
            loader.state()
        })
        .collect();
    let merged = merge_states(&states).unwrap();
    let spec = spec.shard(0, 1).state(merged);
    let full = dump(batches(make(), spec.clone()).unwrap());
    for k in 0..=full.len() {
        let state = stop_after(&make, &spec, k);
        let resumed_spec = BatchSpec {
            state: None,
            ..spec.clone()
        };
        assert_eq!(resumed(&make, &resumed_spec, &state), full[k..], "k = {k}");
    }
}

fn refusal(make: &dyn Fn() -> Source, spec: BatchSpec, state: LoaderState) -> String {
    match batches(make(), spec.state(state)) {
        Err(error @ Error::InvalidState { .. }) => chain(&error),
        Err(other) => panic!("expected an invalid state, got {other}"),
        Ok(_) => panic!("the state was accepted"),
    }
}

#[test]
fn states_of_other_arguments_are_refused_naming_what_differs() {
    let files = files();
    let make = || Source::ParquetFiles(vec![files.parquet.clone()]);
    let spec = spec(4, &["id"]).shuffle(1).buffer_size(8);
    let mut loader = batches(make(), spec.clone()).unwrap();
    loader.next().unwrap().unwrap();
    let state = loader.state();
    let cases: Vec<(BatchSpec, &str)> = vec![
        (
            BatchSpec {
                batch_size: 5,
                ..spec.clone()
            },
            "batch_size",
        ),
        (spec.clone().columns(["x"]), "columns"),
        (spec.clone().shuffle(2), "seed"),
        (spec.clone().buffer_size(9), "buffer_size"),
        (spec.clone().epoch(1), "epoch"),
        (spec.clone().shard(1, 2), "shard 0 of 1"),
        (spec.clone().drop_last(true), "drop_last"),
    ];
    for (other, name) in cases {
        let message = refusal(&make, other, state.clone());
        assert!(message.contains(name), "{name}: {message}");
    }
    let message = refusal(
        &|| Source::IpcFiles(vec![files.ipc.clone()]),
        spec.clone(),
        state.clone(),
    );
    assert!(message.contains("source"), "{message}");
    let newer = LoaderState {
        version: STATE_VERSION + 1,
        ..state.clone()
    };
    assert!(refusal(&make, spec.clone(), newer).contains("newer"));
}

#[test]
fn corrupt_states_are_errors_not_panics() {
    let files = files();
    for (source_name, make) in sources(&files) {
        for shuffle in [false, true] {
            let mut spec = spec(4, &["id"]);
            if shuffle {
                spec = spec.shuffle(3).buffer_size(6);
            }
            let mut loader = batches(make(), spec.clone()).unwrap();
            loader.next().unwrap().unwrap();
            let json = serde_json::to_string(&loader.state()).unwrap();
            let value: serde_json::Value = serde_json::from_str(&json).unwrap();
            for hostile in hostile_values(&value) {
                let text = hostile.to_string();
                let Ok(state) = serde_json::from_str::<LoaderState>(&text) else {
                    continue;
                };
                // Accepted or refused, never a panic (not even one caught on the loader's
                // thread); what is accepted ends or errs cleanly.
                match batches(make(), spec.clone().state(state)) {
                    Ok(loader) => {
                        for batch in loader.take(100) {
                            match batch {
                                Ok(_) => {}
                                Err(error @ Error::Panicked { .. }) => {
                                    panic!("{source_name}: {text}: {error}")
                                }
                                Err(_) => break,
                            }
                        }
                    }
                    Err(error @ Error::Panicked { .. }) => panic!("{text}: {error}"),
                    Err(_) => {}
                }
            }
        }
    }
}

/// `value` with each number replaced by hostile numbers, each key dropped, a key added.
fn hostile_values(value: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut paths = Vec::new();
    collect_paths(value, &mut Vec::new(), &mut paths);
    for path in &paths {
        for number in [0u64, 1, 7, 1 << 40, u64::MAX, u64::MAX - 1] {
            let mut copy = value.clone();
            if let Some(slot) = at(&mut copy, path)
                && slot.is_number()
            {
                *slot = serde_json::json!(number);
                out.push(copy);
            }
        }
    }
    out
}

fn collect_paths(value: &serde_json::Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                prefix.push(key.clone());
                collect_paths(inner, prefix, out);
                prefix.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                prefix.push(index.to_string());
                collect_paths(inner, prefix, out);
                prefix.pop();
            }
        }
        _ => out.push(prefix.clone()),
    }
}

fn at<'a>(value: &'a mut serde_json::Value, path: &[String]) -> Option<&'a mut serde_json::Value> {
    let mut here = value;
    for key in path {
        here = match here {
            serde_json::Value::Object(map) => map.get_mut(key)?,
            serde_json::Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(here)
}
