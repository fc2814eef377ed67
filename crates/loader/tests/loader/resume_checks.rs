//! Saved states tried as a careless user and a forger would: a state over other data of the same
//! name (refused, naming the file and what differs; a file moved with its modification time
//! kept resumes), and forged numbers (a row carried twice, a position past its unit's rows,
//! window sizes and ranges past the real ones, merges sized by counts no run saved), each
//! refused before anything is sized by it. Merges of forged states run in a child process,
//! whose peak memory is reported back.

use std::fs::{File, FileTimes};
use std::path::Path;
use std::time::{Duration, SystemTime};

use arrow_dlpack_loader::{
    BatchSpec, Error, Item, LoaderState, MAX_MERGED_ENTRIES, Position, Source, batches,
    merge_states,
};

use crate::data::{
    batch_of, chain, collect, ids, reader, spec, table, write_ipc, write_parquet, write_stream,
};

/// The state after `k` batches of `source` with `spec`.
fn state_after(source: Source, spec: &BatchSpec, k: usize) -> LoaderState {
    let mut loader = batches(source, spec.clone()).unwrap();
    for _ in 0..k {
        loader.next().unwrap().unwrap();
    }
    loader.state()
}

/// The message of the refusal of `state` by a loader of `source` with `spec`.
fn refusal(source: Source, spec: &BatchSpec, state: LoaderState) -> String {
    match batches(source, spec.clone().state(state)) {
        Err(error @ Error::InvalidState { .. }) => chain(&error),
        Err(other) => panic!("expected an invalid state, got {}", chain(&other)),
        Ok(_) => panic!("the state was accepted"),
    }
}

fn parquet(path: &Path) -> Source {
    Source::ParquetFiles(vec![path.to_path_buf()])
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

fn set_modified(path: &Path, time: SystemTime) {
    let file = File::options().write(true).open(path).unwrap();
    file.set_times(FileTimes::new().set_modified(time)).unwrap();
}

/// Rows `ids` shifted by `by`, in record batches of `sizes` rows.
fn shifted(sizes: &[usize], by: i64) -> Vec<arrow_array::RecordBatch> {
    let mut start = by;
    sizes
        .iter()
        .map(|&size| {
            let rows: Vec<i64> = (start..start + size as i64).collect();
            start += size as i64;
            batch_of(&rows)
        })
        .collect()
}

#[test]
fn a_state_over_other_rows_in_a_file_of_the_same_name_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["v1", "v2"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    let spec = spec(8, &["id"]);
    // Parquet: the same row groups, other values; the footers (their statistics) differ.
    let v1 = write_parquet(&dir.path().join("v1/train.parquet"), &table(&[50, 50]), 50);
    let v2 = write_parquet(
        &dir.path().join("v2/train.parquet"),
        &shifted(&[50, 50], 1000),
        50,
    );
    let message = refusal(parquet(&v2), &spec, state_after(parquet(&v1), &spec, 2));
    assert!(
        message.starts_with("cannot resume from the state: train.parquet: "),
        "{message}"
    );
    // IPC: fixed-width rows without nulls give the same size and footer; the modification time
    // tells the files apart.
    let v1 = write_ipc(&dir.path().join("v1/train.arrow"), &table(&[50, 50]));
    let v2 = write_ipc(
        &dir.path().join("v2/train.arrow"),
        &shifted(&[50, 50], 1000),
    );
    set_modified(&v2, modified(&v1) + Duration::from_secs(1));
    let ipc = |path: &Path| Source::IpcFiles(vec![path.to_path_buf()]);
    let saved = state_after(ipc(&v1), &spec, 2);
    let message = refusal(ipc(&v2), &spec, saved.clone());
    assert!(
        message.starts_with("cannot resume from the state: train.arrow: modified_ns saved "),
        "{message}"
    );
    let files = &saved.settings.source.files;
    assert_eq!(files[0].name, "train.arrow");
    assert_eq!(files[0].size, std::fs::metadata(&v1).unwrap().len());
    assert!(files[0].digest.as_deref().unwrap().starts_with("xxh3-128:"));
}

#[test]
fn a_state_of_a_100_row_file_over_a_99_row_file_elsewhere_is_refused_with_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["a", "b"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    let spec = spec(8, &["id"]);
    let a = write_parquet(&dir.path().join("a/t.parquet"), &table(&[100]), 100);
    let b = write_parquet(&dir.path().join("b/t.parquet"), &table(&[99]), 100);
    let (size_a, size_b) = (
        std::fs::metadata(&a).unwrap().len(),
        std::fs::metadata(&b).unwrap().len(),
    );
    assert_ne!(size_a, size_b);
    assert_eq!(
        refusal(parquet(&b), &spec, state_after(parquet(&a), &spec, 3)),
        format!("cannot resume from the state: t.parquet: size saved {size_a}, given {size_b}")
    );
}

#[test]
fn states_of_two_files_are_refused_as_of_two_sources_not_as_too_few_shards() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(8, &["id"]);
    let a = write_parquet(&dir.path().join("a.parquet"), &table(&[100]), 100);
    let b = write_parquet(&dir.path().join("b.parquet"), &table(&[99]), 100);
    let states = [
        state_after(parquet(&a), &spec, 3),
        state_after(parquet(&b), &spec, 3),
    ];
    let message = chain(&merge_states(&states).unwrap_err());
    assert!(
        message
            .contains("the states were saved with different settings (a.parquet (given b.parquet)"),
        "{message}"
    );
}

#[test]
fn a_file_moved_with_its_modification_time_resumes_and_a_fresh_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["a", "b", "c"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
    }
    let spec = spec(8, &["id"]).shuffle(3).buffer_size(16);
    let original = write_parquet(&dir.path().join("a/t.parquet"), &table(&[30, 30, 30]), 30);
    let full = ids(&collect(parquet(&original), spec.clone()));
    let state = state_after(parquet(&original), &spec, 4);
    // Moved to another folder under another name, its time kept (as `mv` and `cp -p` do).
    let moved = dir.path().join("b/renamed.parquet");
    std::fs::copy(&original, &moved).unwrap();
    set_modified(&moved, modified(&original));
    let rest = ids(&collect(parquet(&moved), spec.clone().state(state.clone())));
    assert_eq!(rest, full[4 * 8..]);
    // A copy with a time of its own cannot be told from a rewrite of the same shape.
    let copied = dir.path().join("c/t.parquet");
    std::fs::copy(&original, &copied).unwrap();
    set_modified(&copied, modified(&original) + Duration::from_secs(5));
    let message = refusal(parquet(&copied), &spec, state);
    assert!(
        message.starts_with("cannot resume from the state: t.parquet: modified_ns saved "),
        "{message}"
    );
}

#[test]
fn readers_and_streams_of_another_schema_are_refused_and_settings_are_named_with_both_values() {
    let spec = spec(4, &["id"]);
    let state = state_after(reader(table(&[10, 10])), &spec, 1);
    let schema = state.settings.source.schema.clone().unwrap();
    assert!(schema.starts_with("xxh3-128:"), "{schema}");
    let narrow = arrow_array::RecordBatch::try_from_iter([(
        "id",
        std::sync::Arc::new(arrow_array::Int64Array::from_iter_values(0..20))
            as arrow_array::ArrayRef,
    )])
    .unwrap();
    let message = refusal(reader(vec![narrow]), &spec, state.clone());
    assert!(
        message.starts_with(
            "cannot resume from the state: source.schema (the stream's schema and metadata: \
             another dataset, or one shuffled, selected, filtered or mapped otherwise): saved \
             \"xxh3-128:"
        ),
        "{message}"
    );
    assert_eq!(
        refusal(
            reader(table(&[10, 10])),
            &spec.clone().shuffle(0),
            state_after(reader(table(&[10, 10])), &spec.clone().shuffle(1), 1)
        ),
        "cannot resume from the state: seed: saved 1, given 0"
    );
    let dir = tempfile::tempdir().unwrap();
    let stream = write_stream(&dir.path().join("t.arrows"), &table(&[10, 10]));
    let streams = || Source::IpcStreams(vec![stream.clone()]);
    let state = state_after(streams(), &spec, 1);
    assert_eq!(state.settings.source.files[0].name, "t.arrows");
    assert_eq!(
        refusal(streams(), &spec.clone().drop_last(true), state),
        "cannot resume from the state: drop_last: saved false, given true"
    );
}

/// A Parquet file of two row groups of 50 rows, and the state of a loader over it after one
/// batch, with `spec`.
fn fifty_fifty(dir: &Path, spec: &BatchSpec) -> (std::path::PathBuf, LoaderState) {
    let path = write_parquet(&dir.join("t.parquet"), &table(&[50, 50]), 50);
    let state = state_after(parquet(&path), spec, 1);
    (path, state)
}

fn window(carried: Vec<[u64; 2]>, start: u64, sizes: Vec<u64>, emitted: u64) -> Position {
    Position::Window {
        rng: 7,
        carried,
        start,
        sizes,
        emitted,
    }
}

#[test]
fn a_forged_window_that_carries_a_row_three_times_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(8, &["id"]).shuffle(1).buffer_size(16);
    let (path, state) = fifty_fifty(dir.path(), &spec);
    let forged = LoaderState {
        position: Some(window(vec![[0, 5], [0, 5], [0, 5]], 1, vec![], 0)),
        ..state
    };
    assert_eq!(
        refusal(parquet(&path), &spec, forged),
        "cannot resume from the state: the state carries row 5 of item 0 more than once; \
         expected each row once"
    );
}

#[test]
fn a_position_past_the_rows_of_its_unit_is_refused_with_the_units_rows() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(8, &["id"]);
    let (path, state) = fifty_fifty(dir.path(), &spec);
    for row in [51, u64::MAX] {
        let forged = LoaderState {
            position: Some(Position::Rows { item: 0, row }),
            ..state.clone()
        };
        assert_eq!(
            refusal(parquet(&path), &spec, forged),
            format!(
                "cannot resume from the state: the state's position is row {row} of item 0, \
                 which has 50 rows"
            )
        );
    }
    // The end of the unit is a position (the next batch starts the next unit).
    let at_end = LoaderState {
        position: Some(Position::Rows { item: 0, row: 50 }),
        ..state
    };
    let rest = ids(&collect(parquet(&path), spec.state(at_end)));
    assert_eq!(rest, (50..100).collect::<Vec<_>>());
}

#[test]
fn window_sizes_carried_rows_ranges_and_batches_past_the_real_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(8, &["id"]).shuffle(1).buffer_size(16);
    let (path, state) = fifty_fifty(dir.path(), &spec);
    let with = |position: Position| LoaderState {
        position: Some(position),
        ..state.clone()
    };
    let cases: Vec<(LoaderState, &str)> = vec![
        (
            with(window(vec![], 0, vec![1 << 32], 1)),
            "the state's window read 4294967296 rows of item 0, which has 50 rows",
        ),
        (
            with(window(vec![[0, 50]], 1, vec![50], 0)),
            "the state carries row 50 of item 0, which has 50 rows",
        ),
        (
            with(window(vec![[0, 1]; 8], 1, vec![], 0)),
            "the state carries 8 rows into its window; a window leaves over fewer rows than a \
             batch (8)",
        ),
        (
            with(window(vec![], 0, vec![50, 50], 0)),
            "the state's window holds 50 rows before its last item; a window of 16 rows reads \
             no item once it holds that many",
        ),
        (
            with(window(vec![], 0, vec![50], 7)),
            "the state's window gave 7 batches of a window of 50 rows; expected fewer than 7",
        ),
        (
            LoaderState {
                work: arrow_dlpack_loader::Work {
                    items: vec![Item {
                        unit: 0,
                        rows: Some(vec![[10, 60]]),
                    }],
                    rest_from: 1,
                    units: Some(2),
                    unit_rows: None,
                },
                position: None,
                ..state.clone()
            },
            "the rows of unit 0 reach [10, 60); the unit has 50 rows",
        ),
    ];
    for (forged, expected) in cases {
        assert_eq!(
            refusal(parquet(&path), &spec, forged),
            format!("cannot resume from the state: {expected}")
        );
    }
}

/// Run as a child process by [`merge_states_refuses_forged_counts_before_allocating_for_them`]:
/// merges the states in the file named by `AD_MERGE_STATES` and writes the outcome and the
/// peak resident memory growth (KiB) as JSON.
#[test]
fn merge_child() {
    let Ok(states_path) = std::env::var("AD_MERGE_STATES") else {
        return;
    };
    let states: Vec<LoaderState> =
        serde_json::from_str(&std::fs::read_to_string(&states_path).unwrap()).unwrap();
    let before = peak_kib();
    let outcome = match merge_states(&states) {
        Ok(merged) => format!("merged {} items", merged.work.items.len()),
        Err(error) => chain(&error),
    };
    let growth = peak_kib() - before;
    std::fs::write(
        std::env::var("AD_MERGE_OUT").unwrap(),
        serde_json::to_string(&(outcome, growth)).unwrap(),
    )
    .unwrap();
}

/// The peak resident memory of this process, in KiB.
fn peak_kib() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` is a valid, writable `rusage`, which `getrusage` fills.
    let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(status, 0);
    // SAFETY: `getrusage` succeeded, so it wrote the whole struct.
    unsafe { usage.assume_init() }.ru_maxrss
}

/// Merges `states` in a child process: its outcome (the merged item count or the error), and
/// its peak memory growth in KiB; `None` when the child did not finish (an abort).
fn merge_in_child(dir: &Path, states: &[LoaderState]) -> Option<(String, i64)> {
    let states_path = dir.join("states.json");
    let out_path = dir.join("out.json");
    let _ = std::fs::remove_file(&out_path);
    std::fs::write(&states_path, serde_json::to_string(states).unwrap()).unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "resume_checks::merge_child",
            "--test-threads",
            "1",
        ])
        .env("AD_MERGE_STATES", &states_path)
        .env("AD_MERGE_OUT", &out_path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    if !status.success() {
        return None;
    }
    Some(serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap())
}

#[test]
fn merge_states_refuses_forged_counts_before_allocating_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let stream = write_stream(&dir.path().join("t.arrows"), &table(&[4; 40]));
    let streams = || Source::IpcStreams(vec![stream.clone()]);
    let states = |spec: &BatchSpec| -> Vec<LoaderState> {
        (0..2)
            .map(|shard| state_after(streams(), &spec.clone().shard(shard, 2), 1))
            .collect()
    };
    // A legitimate merge, for the outcome's form.
    let in_order = spec(4, &["id"]);
    let legit = states(&in_order);
    let (outcome, _) = merge_in_child(dir.path(), &legit).unwrap();
    assert!(outcome.starts_with("merged "), "{outcome}");
    // A stream position of 2**40 items, and of 2**22: the items the other shard has not read
    // would be listed one by one.
    for item in [1u64 << 40, 1 << 22] {
        let mut forged = legit.clone();
        forged[0].position = Some(Position::Rows { item, row: 0 });
        let (outcome, growth) = merge_in_child(dir.path(), &forged).expect("the child aborted");
        assert!(
            outcome.contains(&format!(
                "a merged state lists at most {MAX_MERGED_ENTRIES}"
            )),
            "{item}: {outcome}"
        );
        assert!(growth < 32 * 1024, "{item}: the merge grew by {growth} KiB");
    }
    // A window of 2**32 rows given in part: replaying it would take 2**32 indices.
    let shuffled = spec(4, &["id"]).shuffle(5).buffer_size(8);
    let mut forged = states(&shuffled);
    forged[0].position = Some(window(vec![], 3, vec![1 << 32], 1));
    let (outcome, growth) = merge_in_child(dir.path(), &forged).expect("the child aborted");
    assert_eq!(
        outcome,
        "cannot resume from the state: the window of shard 0 holds 4294967296 rows; a merge \
         replays at most 16777216 (resume with the same shards instead)"
    );
    assert!(growth < 32 * 1024, "the merge grew by {growth} KiB");
    // The same window, nothing of it given: its items are left whole, whatever their sizes.
    forged[0].position = Some(window(vec![], 3, vec![1 << 32], 0));
    // Shard 0 is said to have read its items 0 to 3 (units 0, 2, 4 and 6, of 4 rows each) into
    // that window: units 0, 2 and 4 are done, unit 6 is left whole.
    let merged = merge_states(&forged).unwrap();
    let mut rest: Vec<i64> = (0..2)
        .flat_map(|shard| {
            ids(&collect(
                streams(),
                shuffled.clone().shard(shard, 2).state(merged.clone()),
            ))
        })
        .collect();
    rest.sort_unstable();
    let count = rest.len();
    rest.dedup();
    assert_eq!(rest.len(), count, "a row was read twice");
    for unit in [0, 2, 4] {
        assert!(!rest.contains(&(unit * 4)), "unit {unit}");
    }
    assert!((24..28).all(|id| rest.contains(&id)));
}

/// An object is identified by its URL, size, ETag and footer digest: replaced by other rows
/// under the same URL, its state is refused naming the URL; unchanged, it resumes.
#[cfg(feature = "object-store")]
#[test]
fn a_state_over_an_object_replaced_at_its_url_is_refused_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let server = crate::http_server::Server::start();
    let spec = spec(8, &["id"]);
    let v1 = write_parquet(&dir.path().join("v1.parquet"), &table(&[50, 50]), 50);
    let v2 = write_parquet(
        &dir.path().join("v2.parquet"),
        &shifted(&[50, 50], 1000),
        50,
    );
    server.put("train.parquet", std::fs::read(&v1).unwrap());
    let url = server.url("train.parquet");
    let object = || Source::from_urls([&url], [("timeout", "5s")]).unwrap();
    let state = state_after(object(), &spec, 2);
    let file = &state.settings.source.files[0];
    assert_eq!(file.name, url);
    assert_eq!(file.size, std::fs::metadata(&v1).unwrap().len());
    assert!(file.e_tag.is_some() && file.modified_ns.is_none());
    let rest = ids(&collect(object(), spec.clone().state(state.clone())));
    assert_eq!(rest, (16..100).collect::<Vec<_>>());
    server.put("train.parquet", std::fs::read(&v2).unwrap());
    let message = refusal(object(), &spec, state);
    assert!(
        message.starts_with(&format!("cannot resume from the state: {url}: ")),
        "{message}"
    );
}

/// Every number of a shard's state replaced by hostile ones, merged with the other shard's:
/// merged or refused, never a panic (the tests run with overflow checks).
#[test]
fn merge_states_of_states_with_hostile_numbers_merges_or_refuses_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let stream = write_stream(&dir.path().join("t.arrows"), &table(&[7, 5, 9, 3, 8, 6]));
    let parquet_path = write_parquet(&dir.path().join("t.parquet"), &table(&[7, 5, 9, 3]), 6);
    let sources: [&dyn Fn() -> Source; 2] = [&|| Source::IpcStreams(vec![stream.clone()]), &|| {
        parquet(&parquet_path)
    }];
    let (mut merged, mut refused) = (0, 0);
    for make in sources {
        for shuffle in [false, true] {
            let mut spec = spec(4, &["id"]);
            if shuffle {
                spec = spec.shuffle(3).buffer_size(6);
            }
            let states: Vec<LoaderState> = (0..2)
                .map(|shard| state_after(make(), &spec.clone().shard(shard, 2), 1))
                .collect();
            let value = serde_json::to_value(&states[0]).unwrap();
            let mut numbers = Vec::new();
            number_paths(&value, &mut Vec::new(), &mut numbers);
            for path in &numbers {
                for number in [0u64, 1, 7, 1 << 32, 1 << 40, u64::MAX - 1, u64::MAX] {
                    let mut copy = value.clone();
                    *at_path(&mut copy, path) = serde_json::json!(number);
                    let Ok(hostile) = serde_json::from_value::<LoaderState>(copy) else {
                        continue;
                    };
                    match merge_states(&[hostile, states[1].clone()]) {
                        Ok(_) => merged += 1,
                        Err(Error::InvalidState { .. }) => refused += 1,
                        Err(other) => panic!("{path:?} = {number}: {}", chain(&other)),
                    }
                }
            }
        }
    }
    assert!(
        merged > 0 && refused > 0,
        "{merged} merged, {refused} refused"
    );
}

fn number_paths(value: &serde_json::Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                prefix.push(key.clone());
                number_paths(inner, prefix, out);
                prefix.pop();
            }
        }
        serde_json::Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                prefix.push(index.to_string());
                number_paths(inner, prefix, out);
                prefix.pop();
            }
        }
        serde_json::Value::Number(_) => out.push(prefix.clone()),
        _ => {}
    }
}

fn at_path<'a>(value: &'a mut serde_json::Value, path: &[String]) -> &'a mut serde_json::Value {
    path.iter().fold(value, |here, key| match here {
        serde_json::Value::Object(map) => map.get_mut(key).unwrap(),
        serde_json::Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
        _ => unreachable!("a path to a number passes through objects and arrays"),
    })
}
