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

/// The decoding threads are blocked on full channels when the loader is dropped; `drop` wakes
/// and joins them (the count of this process's threads cannot be compared here, as other tests
/// run loaders at the same time; the reader test above proves the release).
#[test]
fn dropping_a_parquet_loader_early_wakes_and_joins_its_blocked_decoders() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("t.parquet"), &table(&[500; 20]), 100);
    let spec = BatchSpec {
        decode_threads: 3,
        prefetch: 1,
        ..spec(7, &["id", "emb"])
    };
    let mut loader = batches(Source::ParquetFiles(vec![path]), spec).unwrap();
    loader.next().unwrap().unwrap();
    // Let the decoders fill their channels and block.
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    drop(loader);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn an_error_is_yielded_at_its_batch_and_ends_the_iteration() {
    let reader = Endless {
        _token: Arc::new(()),
        next: 0,
        fail_at: Some(30),
    };
    let mut loader = batches(Source::reader(reader), spec(10, &["id"])).unwrap();
    for _ in 0..3 {
        loader.next().unwrap().unwrap();
    }
    let error = loader.next().unwrap().unwrap_err();
    assert!(matches!(error, Error::Arrow(_)));
    assert_eq!(error.to_string(), "Compute error: the source broke");
    assert!(loader.next().is_none());
    assert!(loader.next().is_none());
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
