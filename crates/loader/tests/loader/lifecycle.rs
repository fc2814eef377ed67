//! Threads and ownership: dropping the iterator early stops the threads and releases the
//! source; errors end the iteration at the batch where they happen; the iterator is `Send`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_dlpack_loader::{BatchSpec, Batches, Error, Source, batches};
use arrow_schema::{ArrowError, SchemaRef};

use crate::data::{batch_of, schema, spec, table, write_parquet};

/// An endless reader that holds `token` and counts what it made.
struct Endless {
    /// Held, never read: its strong count tells whether the reader is still alive.
    _token: Arc<()>,
    next: i64,
    fail_at: Option<i64>,
}

impl Iterator for Endless {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.next;
        self.next += 10;
        if self.fail_at == Some(start) {
            return Some(Err(ArrowError::ComputeError(
                "the source broke".to_string(),
            )));
        }
        Some(Ok(batch_of(&(start..start + 10).collect::<Vec<_>>())))
    }
}

impl RecordBatchReader for Endless {
    fn schema(&self) -> SchemaRef {
        schema()
    }
}

#[test]
fn dropping_the_iterator_early_stops_the_thread_and_releases_the_source() {
    let token = Arc::new(());
    let reader = Endless {
        _token: token.clone(),
        next: 0,
        fail_at: None,
    };
    let mut loader = batches(Source::reader(reader), spec(4, &["id", "emb"])).unwrap();
    for _ in 0..3 {
        loader.next().unwrap().unwrap();
    }
    assert_eq!(
        Arc::strong_count(&token),
        2,
        "the thread still holds the reader"
    );
    let started = Instant::now();
    drop(loader);
    assert_eq!(Arc::strong_count(&token), 1, "the reader was not released");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A loader over a Parquet file of 20 row groups, with `threads` decoders that have filled their
/// channels and block (alive), one batch taken; the directory must outlive the loader.
fn parquet_loader_with_blocked_decoders(threads: usize) -> (Batches, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("t.parquet"), &table(&[500; 20]), 100);
    let spec = BatchSpec {
        decode_threads: threads,
        prefetch: 1,
        ..spec(7, &["id", "emb"])
    };
    let mut loader = batches(Source::ParquetFiles(vec![path]), spec).unwrap();
    loader.next().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    (loader, dir)
}

/// The decoding threads are blocked on full channels when the loader is dropped; `drop` wakes
/// and joins them (the count of this process's threads cannot be compared here, as other tests
/// run loaders at the same time; the reader test above proves the release).
#[test]
fn dropping_a_parquet_loader_early_wakes_and_joins_its_blocked_decoders() {
    let (loader, _dir) = parquet_loader_with_blocked_decoders(3);
    let started = Instant::now();
    drop(loader);
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// The nice value of each of this process's threads whose name starts with `prefix`
/// (field 19 of /proc/self/task/TID/stat, after the parenthesised name).
#[cfg(target_os = "linux")]
fn nice_values(prefix: &str) -> Vec<i64> {
    let mut values = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let path = task.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        if name.starts_with(prefix) {
            let after_name = &stat[stat.rfind(')').unwrap() + 2..];
            // Fields 3.. follow the name; the nice value is field 19.
            let nice = after_name.split(' ').nth(19 - 3).unwrap();
            values.push(nice.parse().unwrap());
        }
    }
    values
}

/// Decoding works ahead of the consumer at a lower priority, so that on a busy machine the
/// training loop (and the loader thread) run first.
#[cfg(target_os = "linux")]
#[test]
fn parquet_decoders_run_at_a_lower_priority_than_the_consumer() {
    // The first task is the main thread, which the test harness leaves at its inherited nice value.
    let own = nice_values("")[0];
    let (loader, _dir) = parquet_loader_with_blocked_decoders(2);
    // Thread names are cut to 15 bytes: "arrow-dlpack-pa". The tests of this binary run in
    // parallel in one process, so a decoder of another test may be seen in the instant between
    // its start and its first call, which lowers its priority: it is looked at again.
    let started = std::time::Instant::now();
    let decoders = loop {
        let decoders = nice_values("arrow-dlpack-pa");
        if decoders.iter().all(|&nice| nice > own) || started.elapsed().as_secs() >= 5 {
            break decoders;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(!decoders.is_empty(), "no decoding thread found");
    assert!(
        decoders.iter().all(|&nice| nice > own),
        "decoders at {decoders:?}, the main thread at {own}"
    );
    drop(loader);
}

/// A loader of batches of 10 rows over an endless reader that fails at row `at`.
fn failing_at(at: i64) -> Batches {
    let reader = Endless {
        _token: Arc::new(()),
        next: 0,
        fail_at: Some(at),
    };
    batches(Source::reader(reader), spec(10, &["id"])).unwrap()
}

#[test]
fn an_error_is_yielded_at_its_batch_and_ends_the_iteration() {
    let mut loader = failing_at(30);
    for _ in 0..3 {
        loader.next().unwrap().unwrap();
    }
    let error = loader.next().unwrap().unwrap_err();
    assert!(matches!(error, Error::Arrow(_)));
    assert_eq!(error.to_string(), "Compute error: the source broke");
    assert!(loader.next().is_none());
    assert!(loader.next().is_none());
}

/// Waits until the loader has its next item at hand.
fn wait_for_item(loader: &mut Batches) {
    while !loader.wait(Duration::from_millis(100)) {}
}

#[test]
fn a_batch_at_hand_is_ready_at_once_and_an_error_is_not() {
    let mut loader = failing_at(10);
    wait_for_item(&mut loader);
    assert!(loader.ready_at_once(), "a batch waits");
    loader.next().unwrap().unwrap();
    // The error that comes next ends the iteration and joins the threads: never "at once",
    // so that a binding lets go of its interpreter's lock for it.
    wait_for_item(&mut loader);
    assert!(!loader.ready_at_once());
    assert!(loader.next().unwrap().is_err());
    assert!(!loader.ready_at_once());
}

#[test]
fn a_batch_taken_back_leaves_the_count_and_the_state_as_before_it() {
    let source = || Source::record_batches(schema(), table(&[40]));
    let mut loader = batches(source(), spec(10, &["id"])).unwrap();
    loader.next().unwrap().unwrap();
    let (len, state) = (loader.len(), loader.state());
    loader.next().unwrap().unwrap();
    assert!(loader.take_back());
    assert!(!loader.take_back(), "taken back already");
    assert_eq!((loader.len(), loader.state()), (len, state.clone()));
    loader.give_again();
    assert_ne!(loader.state(), state);
    // A loader resumed from the state after the batch taken back starts with that batch.
    assert!(loader.take_back());
    let mut resumed = batches(source(), spec(10, &["id"]).state(loader.state())).unwrap();
    let first = resumed.next().unwrap().unwrap();
    let id = first.get("id").unwrap();
    assert_eq!(id.to_vec::<i64>().unwrap()[0], 10);
}

#[test]
fn the_iterator_can_move_to_another_thread() {
    fn assert_send<T: Send>(_: &T) {}
    let loader = batches(crate::data::reader(table(&[5])), spec(2, &["id"])).unwrap();
    assert_send(&loader);
    let count = std::thread::spawn(move || Batches::count(loader))
        .join()
        .unwrap();
    assert_eq!(count, 3);
}
