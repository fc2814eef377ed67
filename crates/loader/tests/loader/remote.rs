//! Sources in object storage, read over HTTP from a server on loopback: the same batches as the
//! same files on local disk (with shuffling, sharding, column groups and fixed-shape tensors),
//! retries of transient errors, and clear errors for missing, truncated, changed and unanswered
//! objects.

use arrow_dlpack_loader::{BatchSpec, Error, Source, TensorBatch, batches};

use crate::data::{chain, collect, table, values, write_ipc, write_parquet, write_stream};
use crate::http_server::Server;

/// Options that make a test's failures quick: short timeouts, few retries, short backoff.
const QUICK: [(&str, &str); 4] = [
    ("timeout", "2s"),
    ("max_retries", "3"),
    ("retry_timeout", "5s"),
    ("retry_backoff", "10ms"),
];

/// A tensor as (name, shape, bytes), for comparison.
type Contents = (String, Vec<usize>, Vec<u8>);

/// Every tensor of every batch, sorted by name within a batch.
fn contents(batches: &[TensorBatch]) -> Vec<Vec<Contents>> {
    batches
        .iter()
        .map(|batch| {
            let mut tensors: Vec<_> = batch
                .tensors()
                .iter()
                .map(|(name, tensor)| {
                    (
                        name.to_string(),
                        tensor.shape().to_vec(),
                        // Every tensor compared here is of 4- or 8-byte elements, read through
                        // its strides.
                        if tensor.dtype().size() == 8 {
                            values::<i64>(tensor)
                                .iter()
                                .flat_map(|v| v.to_le_bytes())
                                .collect()
                        } else {
                            values::<u32>(tensor)
                                .iter()
                                .flat_map(|v| v.to_le_bytes())
                                .collect()
                        },
                    )
                })
                .collect();
            tensors.sort_by(|a, b| a.0.cmp(&b.0));
            tensors
        })
        .collect()
}

/// A spec with shuffling, a column group, a fixed-shape tensor and shard `shard` of 2.
fn rich_spec(shard: usize) -> BatchSpec {
    BatchSpec::new(300)
        .columns(["id", "emb"])
        .group("features", ["x", "small"])
        .shuffle(11)
        .buffer_size(700)
        .shard(shard, 2)
        .decode_threads(2)
}

fn remote(urls: &[String]) -> Source {
    Source::from_urls(urls, QUICK).unwrap()
}

#[test]
fn parquet_over_http_gives_the_batches_of_the_local_files() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let mut local = Vec::new();
    let mut urls = Vec::new();
    for (index, sizes) in [[1000, 1500, 500], [700, 300, 2000]].iter().enumerate() {
        let name = format!("part-{index}.parquet");
        let path = write_parquet(&dir.path().join(&name), &table(sizes), 400);
        server.put(&name, std::fs::read(&path).unwrap());
        local.push(path);
        urls.push(server.url(&name));
    }
    for shard in 0..2 {
        let expected = collect(Source::from_paths(&local).unwrap(), rich_spec(shard));
        let got = collect(remote(&urls), rich_spec(shard));
        assert!(!expected.is_empty());
        assert_eq!(contents(&got), contents(&expected), "shard {shard}");
    }
    // Row groups are fetched by range, never as whole objects.
    assert!(
        server
            .switches
            .range_requests
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
    );
}

#[test]
fn ipc_files_and_streams_over_http_give_the_batches_of_the_local_files() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let batches_of = table(&[800, 1200, 64, 1000]);
    let file = write_ipc(&dir.path().join("a.arrow"), &batches_of);
    let stream = write_stream(&dir.path().join("a.arrows"), &batches_of);
    server.put("a.arrow", std::fs::read(&file).unwrap());
    server.put("a.arrows", std::fs::read(&stream).unwrap());
    for (path, name) in [(file, "a.arrow"), (stream, "a.arrows")] {
        let spec = BatchSpec::new(256).columns(["id", "x", "emb"]).shuffle(3);
        let expected = collect(Source::from_paths([&path]).unwrap(), spec.clone());
        let got = collect(remote(&[server.url(name)]), spec);
        assert_eq!(contents(&got), contents(&expected), "{name}");
    }
}

#[test]
fn transient_errors_are_retried() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let path = write_parquet(&dir.path().join("a.parquet"), &table(&[2000]), 500);
    server.put("a.parquet", std::fs::read(&path).unwrap());
    server
        .switches
        .fail_next
        .store(2, std::sync::atomic::Ordering::SeqCst);
    let spec = BatchSpec::new(512).columns(["id"]);
    let got = collect(remote(&[server.url("a.parquet")]), spec.clone());
    let expected = collect(Source::from_paths([&path]).unwrap(), spec);
    assert_eq!(contents(&got), contents(&expected));
    assert_eq!(
        server
            .switches
            .fail_next
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

/// The error of making a loader over `urls`, or of its first failing batch.
fn first_error(source: Source) -> Error {
    match batches(source, BatchSpec::new(100).columns(["id"])) {
        Err(error) => error,
        Ok(mut loader) => loader
            .find_map(Result::err)
            .expect("expected an error from the loader"),
    }
}

#[test]
fn a_missing_object_is_a_not_found_error_naming_its_url() {
    let server = Server::start();
    let url = server.url("nowhere.parquet");
    let error = first_error(remote(std::slice::from_ref(&url)));
    let Error::Io { path, source } = &error else {
        panic!("expected an I/O error, got {error:?}");
    };
    assert_eq!(path.to_str(), Some(url.as_str()));
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_truncated_object_is_refused_naming_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let path = write_parquet(&dir.path().join("a.parquet"), &table(&[3000]), 500);
    let bytes = std::fs::read(&path).unwrap();
    server.put("cut.parquet", bytes[..bytes.len() / 2].to_vec());
    let url = server.url("cut.parquet");
    let message = chain(&first_error(remote(std::slice::from_ref(&url))));
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("parquet"), "{message}");
}

#[test]
fn an_answer_cut_short_is_an_error_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let path = write_parquet(&dir.path().join("a.parquet"), &table(&[3000]), 500);
    server.put("a.parquet", std::fs::read(&path).unwrap());
    let url = server.url("a.parquet");
    let loader = batches(remote(std::slice::from_ref(&url)), BatchSpec::new(100));
    server
        .switches
        .cut_short
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let error = match loader {
        Err(error) => error,
        Ok(mut loader) => loader.find_map(Result::err).expect("expected an error"),
    };
    let message = chain(&error);
    assert!(message.contains(&url), "{message}");
}

#[test]
fn an_object_replaced_after_planning_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let path = write_parquet(&dir.path().join("a.parquet"), &table(&[3000]), 500);
    let bytes = std::fs::read(&path).unwrap();
    server.put("a.parquet", bytes.clone());
    let url = server.url("a.parquet");
    let loader = batches(remote(std::slice::from_ref(&url)), BatchSpec::new(100)).unwrap();
    let mut changed = bytes;
    let last = changed.len() - 9;
    changed[last] ^= 1;
    server.put("a.parquet", changed);
    let error = { loader }.find_map(Result::err).expect("expected an error");
    assert!(
        matches!(&error, Error::FileChanged { path, .. } if path.to_str() == Some(url.as_str())),
        "{error:?}"
    );
}

#[test]
fn a_server_that_stops_answering_is_a_timeout_error() {
    let server = Server::start();
    server.put("a.parquet", vec![0; 100]);
    server
        .switches
        .stall
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let url = server.url("a.parquet");
    let source = Source::from_urls(
        [&url],
        [
            ("timeout", "300ms"),
            ("max_retries", "1"),
            ("retry_timeout", "1s"),
            ("retry_backoff", "10ms"),
        ],
    )
    .unwrap();
    let error = first_error(source);
    let Error::Io { path, .. } = &error else {
        panic!("expected an I/O error, got {error:?}");
    };
    assert_eq!(path.to_str(), Some(url.as_str()));
    let message = chain(&error).to_lowercase();
    assert!(
        message.contains("timed out") || message.contains("timeout"),
        "{message}"
    );
}

#[test]
fn urls_and_options_are_checked_when_the_source_is_made() {
    let error = Source::from_urls(["ftp://host/a.parquet"], [("region", "x")]).unwrap_err();
    assert!(
        error.to_string().contains("ftp://host/a.parquet"),
        "{error}"
    );
    let error =
        Source::from_urls(["s3://bucket/a.parquet"], [("no_such_option", "1")]).unwrap_err();
    assert!(error.to_string().contains("no_such_option"), "{error}");
    let error =
        Source::from_urls(["s3://bucket/a.parquet"], [("retry_timeout", "soon")]).unwrap_err();
    assert!(error.to_string().contains("retry_timeout"), "{error}");
}

#[test]
fn a_loader_waiting_for_a_server_that_stopped_answering_drops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let path = write_parquet(&dir.path().join("a.parquet"), &table(&[3000]), 500);
    server.put("a.parquet", std::fs::read(&path).unwrap());
    // The footer's request is answered; every row group's fetch then waits for ever (the
    // timeout is an hour): dropping the loader must not wait for them.
    server
        .switches
        .stall_after
        .store(1, std::sync::atomic::Ordering::SeqCst);
    let source = Source::from_urls(
        [server.url("a.parquet")],
        [("timeout", "1h"), ("max_retries", "0")],
    )
    .unwrap();
    let loader = batches(source, BatchSpec::new(100).decode_threads(2)).unwrap();
    while server
        .switches
        .requests
        .load(std::sync::atomic::Ordering::SeqCst)
        < 2
    {
        std::thread::yield_now();
    }
    drop(loader);
    assert!(
        server
            .switches
            .stall
            .load(std::sync::atomic::Ordering::SeqCst)
    );
}

#[test]
fn the_checks_of_parquet_footers_apply_to_objects() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start();
    let path = write_parquet(&dir.path().join("a.parquet"), &table(&[3000]), 500);
    let mut bytes = std::fs::read(&path).unwrap();
    // The footer's length, forged to more than the object holds.
    let at = bytes.len() - 8;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    server.put("forged.parquet", bytes);
    let url = server.url("forged.parquet");
    let error = first_error(remote(std::slice::from_ref(&url)));
    let message = chain(&error);
    assert!(matches!(error, Error::Parquet { .. }), "{error:?}");
    assert!(message.contains(&url), "{message}");
    assert!(
        message.contains("the footer declares 4294967295 bytes"),
        "{message}"
    );
}
