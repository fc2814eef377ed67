//! Object storage and what the loader trusts: credentials in URLs (sent as basic auth, never
//! shown), no credentials at all (a clear permission error), and objects that cannot be pinned
//! (no validators, only a last-modified time, a weak ETag).

use std::sync::atomic::Ordering;

use arrow_dlpack_loader::{BatchSpec, Error, Source, batches};

use crate::data::{chain, collect, ids};
use crate::http_server::{Answer, Server};
use crate::remote_hostile::{QUICK, first_error, header, quick_and, served_parquet};

#[test]
fn credentials_in_an_http_url_are_sent_as_basic_auth_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let (server, path, _) = served_parquet(dir.path());
    // "alice:s3cret" in base64.
    server.handle(|request| {
        match header(request, "authorization") == Some("Basic YWxpY2U6czNjcmV0") {
            true => Answer::Files,
            false => Answer::Raw {
                head: "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0".to_string(),
                body: Vec::new(),
            },
        }
    });
    let with_password = |name: &str| {
        server
            .url(name)
            .replacen("http://", "http://alice:s3cret@", 1)
    };
    let spec = BatchSpec::new(500).columns(["id"]);
    let source = Source::from_urls([with_password("a.parquet")], QUICK).unwrap();
    let shown = format!("{source:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("alice"),
        "{shown}"
    );
    let got = collect(source, spec.clone());
    assert_eq!(
        ids(&got),
        ids(&collect(Source::from_paths([&path]).unwrap(), spec))
    );
    let error = first_error(Source::from_urls([with_password("missing.parquet")], QUICK).unwrap());
    let Error::Io { source, .. } = &error else {
        panic!("expected an I/O error, got {error:?}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
    let message = format!("{} | {error:?}", chain(&error));
    assert!(
        !message.contains("s3cret") && !message.contains("alice"),
        "{message}"
    );
    let redacted = server
        .url("missing.parquet")
        .replacen("http://", "http://***@", 1);
    assert!(message.contains(&redacted), "{message}");
}

#[test]
fn an_object_without_validators_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (server, path, _) = served_parquet(dir.path());
    server.switches.no_validators.store(true, Ordering::SeqCst);
    let url = server.url("a.parquet");
    let error = first_error(Source::from_urls([&url], QUICK).unwrap());
    assert!(matches!(error, Error::InvalidSource { .. }), "{error:?}");
    let message = chain(&error);
    assert!(message.contains(&url), "{message}");
    assert!(
        message.contains("neither an ETag nor a Last-Modified"),
        "{message}"
    );
    assert!(
        message.contains("allow_objects_without_validators"),
        "{message}"
    );
    // Only the tail was asked for: no row of the object was read.
    assert_eq!(server.switches.requests.load(Ordering::SeqCst), 1);
    let options = quick_and(&[("allow_objects_without_validators", "true")]);
    let spec = BatchSpec::new(500).columns(["id"]);
    let got = collect(Source::from_urls([&url], options).unwrap(), spec.clone());
    assert_eq!(
        ids(&got),
        ids(&collect(Source::from_paths([&path]).unwrap(), spec))
    );
}

#[test]
fn an_object_without_an_etag_replaced_by_one_of_the_same_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _, bytes) = served_parquet(dir.path());
    server.switches.no_etag.store(true, Ordering::SeqCst);
    let url = server.url("a.parquet");
    let loader = batches(
        Source::from_urls([&url], QUICK).unwrap(),
        BatchSpec::new(100).columns(["id"]),
    )
    .unwrap();
    let mut changed = bytes;
    changed[10] ^= 1;
    server.put("a.parquet", changed);
    let error = { loader }.find_map(Result::err).expect("expected an error");
    assert!(
        matches!(&error, Error::FileChanged { path, .. } if path.to_str() == Some(url.as_str())),
        "{error:?}"
    );
    // Every read of a range asked for the planned last-modified time.
    let ranged: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|request| header(request, "range").is_some_and(|r| !r.starts_with("bytes=-")))
        .collect();
    assert!(!ranged.is_empty());
    assert!(
        ranged
            .iter()
            .all(|request| header(request, "if-unmodified-since").is_some())
    );
}

#[test]
fn an_object_with_a_weak_etag_is_read_and_a_replacement_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, path, bytes) = served_parquet(dir.path());
    server.switches.weak_etags.store(true, Ordering::SeqCst);
    let url = server.url("a.parquet");
    let spec = BatchSpec::new(500).columns(["id"]);
    let got = collect(Source::from_urls([&url], QUICK).unwrap(), spec.clone());
    assert_eq!(
        ids(&got),
        ids(&collect(Source::from_paths([&path]).unwrap(), spec))
    );
    let loader = batches(
        Source::from_urls([&url], QUICK).unwrap(),
        BatchSpec::new(100).columns(["id"]),
    )
    .unwrap();
    let mut changed = bytes;
    changed[10] ^= 1;
    server.put("a.parquet", changed);
    let error = { loader }.find_map(Result::err).expect("expected an error");
    assert!(
        matches!(&error, Error::FileChanged { path, .. } if path.to_str() == Some(url.as_str())),
        "{error:?}"
    );
}

#[test]
fn no_credentials_anywhere_is_a_permission_error_that_says_where_they_were_looked_for() {
    let endpoint = Server::start();
    let metadata = Server::start();
    metadata.handle(|_| Answer::Raw {
        head: "HTTP/1.1 403 Forbidden\r\nContent-Length: 0".to_string(),
        body: Vec::new(),
    });
    let base = endpoint.base();
    let metadata_base = metadata.base();
    let options = quick_and(&[
        ("endpoint", base.as_str()),
        ("region", "us-east-1"),
        ("metadata_endpoint", metadata_base.as_str()),
    ]);
    let error = first_error(Source::from_urls(["s3://bkt/a.parquet"], options).unwrap());
    let Error::Io { path, source } = &error else {
        panic!("expected an I/O error, got {error:?}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::PermissionDenied);
    assert_eq!(path.to_str(), Some("s3://bkt/a.parquet"));
    let message = chain(&error);
    assert!(message.contains("no credentials found"), "{message}");
    assert!(message.contains("AWS_ACCESS_KEY_ID"), "{message}");
    assert!(message.contains(&metadata_base), "{message}");
    assert!(message.contains("skip_signature set to true"), "{message}");
    assert!(endpoint.requests().is_empty());
    assert!(
        metadata
            .requests()
            .iter()
            .any(|request| request.method == "PUT" && request.path == "/latest/api/token")
    );
}
