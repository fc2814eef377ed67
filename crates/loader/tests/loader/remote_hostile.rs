//! Object storage against hostile servers: answers longer than asked, footers that declare
//! more than an object holds, redirects to other hosts, listings that never end or explode.
//! Each is refused with an error that names the URL, at a cost bounded by what was asked for.
//! (`remote_trust.rs` has the credentials and the validators.)

use std::sync::atomic::Ordering;
use std::time::Duration;

use arrow_dlpack_loader::{BatchSpec, Error, Source, batches};

use crate::data::{chain, collect, ids, table, write_parquet};
use crate::http_server::{Answer, Request, Server};

/// Options that make a test's failures quick.
pub(crate) const QUICK: [(&str, &str); 4] = [
    ("timeout", "5s"),
    ("max_retries", "0"),
    ("retry_timeout", "5s"),
    ("retry_backoff", "10ms"),
];

/// The most body bytes a server can write before a client that stopped reading makes its
/// writes fail: what loopback's socket buffers hold, and more.
pub(crate) const BUFFERED: u64 = 16 << 20;

/// The error of making a loader over `source`, or of its first failing batch.
pub(crate) fn first_error(source: Source) -> Error {
    match batches(source, BatchSpec::new(100).columns(["id"])) {
        Err(error) => error,
        Ok(mut loader) => loader
            .find_map(Result::err)
            .expect("expected an error from the loader"),
    }
}

/// The options of `QUICK` and `more`.
pub(crate) fn quick_and(more: &[(&str, &str)]) -> Vec<(String, String)> {
    QUICK
        .iter()
        .chain(more)
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

/// The header `name` of `request`.
pub(crate) fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.get(name).map(String::as_str)
}

/// A Parquet file of 3,000 rows in row groups of 1,000, served by a new server at `/a.parquet`;
/// also gives its bytes.
pub(crate) fn served_parquet(dir: &std::path::Path) -> (Server, std::path::PathBuf, Vec<u8>) {
    let path = write_parquet(&dir.join("a.parquet"), &table(&[3000]), 1000);
    let bytes = std::fs::read(&path).unwrap();
    let server = Server::start();
    server.put("a.parquet", bytes.clone());
    (server, path, bytes)
}

#[test]
fn an_answer_longer_than_its_range_is_cut_off_at_the_range() {
    // The 64 KiB tail of a 64 KiB object, answered with a body that goes on for 256 MiB: with
    // a Content-Length of 10^12, and without any length (ended by closing the connection).
    for length in ["Content-Length: 1000000000000\r\n", ""] {
        let server = Server::start();
        let head = format!(
            "HTTP/1.1 206 Partial Content\r\n{length}Content-Range: bytes 0-65535/65536\r\n\
             ETag: \"e\"\r\nLast-Modified: Tue, 01 Dec 2026 00:00:00 GMT"
        );
        server.handle(move |_| Answer::Stream {
            head: head.clone(),
            total: 256 << 20,
            pause: Duration::ZERO,
        });
        let url = server.url("a.parquet");
        let error = first_error(Source::from_urls([&url], QUICK).unwrap());
        let message = chain(&error);
        assert!(message.contains(&url), "{message}");
        if !length.is_empty() {
            assert!(
                message.contains("announces 1000000000000 bytes"),
                "{message}"
            );
        }
        let sent = server.streamed_after_streams_end(Duration::from_secs(30));
        assert!(
            sent < BUFFERED,
            "{sent} bytes were sent for a range of 65536 ({length:?})"
        );
    }
}

/// The footer of `bytes` (a Parquet file) with the first column chunk of the first row group
/// declaring `size` bytes.
fn footer_with_chunk_of(bytes: &[u8], size: i64) -> Vec<u8> {
    use parquet::file::metadata::{ParquetMetaDataReader, ParquetMetaDataWriter};
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::copy_from_slice(bytes))
        .unwrap();
    let mut groups = metadata.row_groups().to_vec();
    let mut columns = groups[0].columns().to_vec();
    columns[0] = columns[0]
        .clone()
        .into_builder()
        .set_total_compressed_size(size)
        .build()
        .unwrap();
    groups[0] = groups[0]
        .clone()
        .into_builder()
        .set_column_metadata(columns)
        .build()
        .unwrap();
    let forged = metadata.into_builder().set_row_groups(groups).build();
    let mut footer = Vec::new();
    ParquetMetaDataWriter::new(&mut footer, &forged)
        .finish()
        .unwrap();
    footer
}

/// Run in a child process by the test below (a process abort there is a failed test, not a
/// dead test binary): an object of 2 TiB, as its server says, whose footer declares a column
/// chunk of 1 TiB; the server sends 64 MiB of it and closes. Prints the error and the peak
/// resident memory.
fn terabyte_chunk_child() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("a.parquet"), &table(&[3000]), 1000);
    let footer = footer_with_chunk_of(&std::fs::read(&path).unwrap(), 1 << 40);
    let size: u64 = 2 << 40;
    let server = Server::start();
    server.handle(move |request| {
        let range = header(request, "range").unwrap_or_default().to_string();
        let validators = "ETag: \"e\"\r\nLast-Modified: Tue, 01 Dec 2026 00:00:00 GMT";
        if let Some(suffix) = range.strip_prefix("bytes=-") {
            let length: u64 = suffix.parse().unwrap();
            let mut body = vec![0u8; length as usize - footer.len()];
            body.extend_from_slice(&footer);
            return Answer::Raw {
                head: format!(
                    "HTTP/1.1 206 Partial Content\r\nContent-Length: {length}\r\nContent-Range: \
                     bytes {}-{}/{size}\r\n{validators}",
                    size - length,
                    size - 1
                ),
                body,
            };
        }
        let (first, last) = range
            .strip_prefix("bytes=")
            .unwrap()
            .split_once('-')
            .unwrap();
        let (first, last): (u64, u64) = (first.parse().unwrap(), last.parse().unwrap());
        Answer::Stream {
            head: format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes \
                 {first}-{last}/{size}\r\n{validators}",
                last - first + 1
            ),
            total: 64 << 20,
            pause: Duration::ZERO,
        }
    });
    let url = server.url("big.parquet");
    let error = first_error(Source::from_urls([&url], QUICK).unwrap());
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    // On lines of their own: libtest prints the test's name before them.
    println!("\nrefused: {}", chain(&error));
    println!("\npeak resident KiB: {peak_kib}");
}

#[test]
fn a_terabyte_column_chunk_costs_the_bytes_sent_not_the_bytes_declared() {
    if std::env::var_os("AD_TERABYTE_CHILD").is_some() {
        return terabyte_chunk_child();
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "remote_hostile::a_terabyte_column_chunk_costs_the_bytes_sent_not_the_bytes_declared",
            "--test-threads",
            "1",
            "--nocapture",
        ])
        .env("AD_TERABYTE_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{:?}\n{stdout}\n{stderr}",
        output.status
    );
    let refused = stdout
        .lines()
        .find_map(|line| line.strip_prefix("refused: "))
        .unwrap_or_else(|| panic!("no error from the child: {stdout}"));
    assert!(refused.contains("/big.parquet"), "{refused}");
    let peak_kib: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("peak resident KiB: "))
        .unwrap()
        .parse()
        .unwrap();
    // The 64 MiB sent, gathered once, and the test binary; never the terabyte declared.
    assert!(peak_kib < 1 << 20, "peak resident memory {peak_kib} KiB");
}

#[test]
fn a_redirect_to_another_host_is_refused_and_the_other_host_gets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (other, path, _) = served_parquet(dir.path());
    other.put("bkt/a.parquet", std::fs::read(&path).unwrap());
    let endpoint = Server::start();
    let target = other.base();
    endpoint.handle(move |request| Answer::Raw {
        head: format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}{}\r\nContent-Length: 0",
            request.path
        ),
        body: Vec::new(),
    });
    let s3 = |more: &[(&str, &str)]| {
        let base = endpoint.base();
        let mut options = quick_and(&[
            ("endpoint", base.as_str()),
            ("region", "us-east-1"),
            ("aws_access_key_id", "AKIDEXAMPLE"),
            ("aws_secret_access_key", "wJalrXUtnFEMI"),
            ("aws_session_token", "the-session-token"),
        ]);
        options.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Source::from_urls(["s3://bkt/a.parquet"], options).unwrap()
    };
    let error = first_error(s3(&[]));
    let message = chain(&error);
    assert!(message.contains("s3://bkt/a.parquet"), "{message}");
    assert!(message.contains("redirected to another host"), "{message}");
    assert!(
        message.contains("allow_redirects_to_other_hosts"),
        "{message}"
    );
    assert!(other.requests().is_empty(), "{:?}", other.requests());
    // Opted in: the redirect is followed, without a credential or a signed header.
    let spec = BatchSpec::new(500).columns(["id"]);
    let got = collect(
        s3(&[("allow_redirects_to_other_hosts", "true")]),
        spec.clone(),
    );
    assert_eq!(
        ids(&got),
        ids(&collect(Source::from_paths([&path]).unwrap(), spec))
    );
    let received = other.requests();
    assert!(!received.is_empty());
    for request in &received {
        for name in request.headers.keys() {
            assert!(
                !(name == "authorization" || name.starts_with("x-amz-")),
                "the other host received {name}: {request:?}"
            );
        }
    }
    assert!(
        endpoint
            .requests()
            .iter()
            .all(|request| header(request, "x-amz-security-token") == Some("the-session-token"))
    );
}

#[test]
fn redirects_within_the_host_are_followed_and_loops_end() {
    let dir = tempfile::tempdir().unwrap();
    let (server, path, _) = served_parquet(dir.path());
    server.handle(|request| match request.path.as_str() {
        "/old.parquet" => Answer::Raw {
            head: "HTTP/1.1 301 Moved Permanently\r\nLocation: /a.parquet\r\nContent-Length: 0"
                .to_string(),
            body: Vec::new(),
        },
        "/loop.parquet" => Answer::Raw {
            head: "HTTP/1.1 302 Found\r\nLocation: /loop.parquet\r\nContent-Length: 0".to_string(),
            body: Vec::new(),
        },
        "/metadata.parquet" => Answer::Raw {
            head: "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://[fe80::1]:9/x\r\n\
                   Content-Length: 0"
                .to_string(),
            body: Vec::new(),
        },
        _ => Answer::Files,
    });
    let spec = BatchSpec::new(500).columns(["id"]);
    let got = collect(
        Source::from_urls([server.url("old.parquet")], QUICK).unwrap(),
        spec.clone(),
    );
    assert_eq!(
        ids(&got),
        ids(&collect(Source::from_paths([&path]).unwrap(), spec))
    );
    let url = server.url("loop.parquet");
    let message = chain(&first_error(Source::from_urls([&url], QUICK).unwrap()));
    assert!(
        message.contains("redirected more than 10 times"),
        "{message}"
    );
    assert!(message.contains(&url), "{message}");
    // A link-local address is never a redirect's target, opted in or not.
    let url = server.url("metadata.parquet");
    let options = quick_and(&[("allow_redirects_to_other_hosts", "true")]);
    let message = chain(&first_error(Source::from_urls([&url], options).unwrap()));
    assert!(message.contains("a link-local address"), "{message}");
}

#[test]
fn a_whole_object_or_another_range_for_a_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _, bytes) = served_parquet(dir.path());
    let size = bytes.len();
    // The whole object (and a length that says so) for every range asked.
    server.handle(move |request| match header(request, "range") {
        Some(_) => Answer::Stream {
            head: format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: \"e\"",
                256 << 20
            ),
            total: 256 << 20,
            pause: Duration::ZERO,
        },
        None => Answer::Files,
    });
    let url = server.url("a.parquet");
    let message = chain(&first_error(Source::from_urls([&url], QUICK).unwrap()));
    assert!(message.contains(&url), "{message}");
    assert!(server.streamed_after_streams_end(Duration::from_secs(30)) < BUFFERED);
    // Bytes one past those asked for.
    let server = Server::start();
    server.handle(move |_| Answer::Raw {
        head: format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Length: 100\r\nContent-Range: bytes \
             {}-{}/{size}\r\nETag: \"e\"",
            size - 101,
            size - 2
        ),
        body: vec![0; 100],
    });
    let url = server.url("a.parquet");
    let message = chain(&first_error(Source::from_urls([&url], QUICK).unwrap()));
    assert!(message.contains(&url), "{message}");
}

#[test]
fn an_error_document_is_read_up_to_64_kib() {
    // A 404 whose document goes on for 256 MiB: its text would end up in the message.
    let server = Server::start();
    server.handle(|_| Answer::Stream {
        head: "HTTP/1.1 404 Not Found\r\nContent-Type: application/xml".to_string(),
        total: 256 << 20,
        pause: Duration::ZERO,
    });
    let url = server.url("a.parquet");
    let message = chain(&first_error(Source::from_urls([&url], QUICK).unwrap()));
    assert!(message.contains(&url), "{message}");
    assert!(
        message.len() < 70 << 10,
        "a message of {} bytes",
        message.len()
    );
    assert!(server.streamed_after_streams_end(Duration::from_secs(30)) < BUFFERED);
}

#[test]
fn a_server_that_trickles_its_answer_ends_in_a_timeout() {
    let server = Server::start();
    server.handle(|_| Answer::Stream {
        head: "HTTP/1.1 206 Partial Content\r\nContent-Length: 65536\r\nContent-Range: bytes \
               0-65535/65536\r\nETag: \"e\""
            .to_string(),
        total: 65536,
        pause: Duration::from_millis(20),
    });
    let url = server.url("a.parquet");
    let options = [
        ("timeout", "1s"),
        ("max_retries", "0"),
        ("retry_timeout", "1s"),
    ];
    let message = chain(&first_error(Source::from_urls([&url], options).unwrap()));
    assert!(message.contains(&url), "{message}");
    assert!(message.to_lowercase().contains("timed out"), "{message}");
}

/// An S3 store whose endpoint is `server`, reading without credentials.
fn unsigned_s3(server: &Server, url: &str) -> Source {
    let base = server.base();
    let options = quick_and(&[
        ("endpoint", base.as_str()),
        ("region", "us-east-1"),
        ("skip_signature", "true"),
    ]);
    Source::from_urls([url], options).unwrap()
}

/// A page of an S3 listing with `keys`, and a continuation token when `next` is given.
fn listing_page(keys: &[String], next: Option<usize>) -> Vec<u8> {
    let mut page = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult \
         xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>bkt</Name>",
    );
    match next {
        Some(token) => page.push_str(&format!(
            "<IsTruncated>true</IsTruncated><NextContinuationToken>t{token}</NextContinuationToken>"
        )),
        None => page.push_str("<IsTruncated>false</IsTruncated>"),
    }
    for key in keys {
        page.push_str(&format!(
            "<Contents><Key>{key}</Key><LastModified>2026-12-01T00:00:00.000Z</LastModified>\
             <ETag>\"e\"</ETag><Size>1</Size></Contents>"
        ));
    }
    page.push_str("</ListBucketResult>");
    page.into_bytes()
}

fn xml(body: Vec<u8>) -> Answer {
    Answer::Raw {
        head: format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: {}",
            body.len()
        ),
        body,
    }
}

#[test]
fn hostile_listings_are_refused() {
    // An entity that expands to 10^9 `lol`s.
    let mut entities = String::from("<!ENTITY l0 \"lol\">");
    for level in 1..10 {
        let previous = format!("&l{};", level - 1);
        entities.push_str(&format!("<!ENTITY l{level} \"{}\">", previous.repeat(10)));
    }
    let bomb = format!(
        "<?xml version=\"1.0\"?><!DOCTYPE r [{entities}]><ListBucketResult><IsTruncated>false\
         </IsTruncated><Contents><Key>data/&l9;.parquet</Key><Size>1</Size><LastModified>\
         2026-12-01T00:00:00.000Z</LastModified></Contents></ListBucketResult>"
    );
    let server = Server::start();
    server.handle(move |_| xml(bomb.clone().into_bytes()));
    let message = chain(&first_error(unsigned_s3(
        &server,
        "s3://bkt/data/*.parquet",
    )));
    assert!(message.contains("s3://bkt/data/*.parquet"), "{message}");
    // A page of 20 MiB.
    let server = Server::start();
    server.handle(|_| Answer::Stream {
        head: format!("HTTP/1.1 200 OK\r\nContent-Length: {}", 20 << 20),
        total: 20 << 20,
        pause: Duration::ZERO,
    });
    let message = chain(&first_error(unsigned_s3(&server, "s3://bkt/data/")));
    assert!(message.contains("announces 20971520 bytes"), "{message}");
}

#[test]
fn a_listing_that_never_ends_is_stopped_by_its_stop_handle() {
    let server = Server::start();
    let pages = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = pages.clone();
    server.handle(move |_| {
        let page = counted.fetch_add(1, Ordering::SeqCst);
        xml(listing_page(&[format!("data/{page}.txt")], Some(page + 1)))
    });
    let source = unsigned_s3(&server, "s3://bkt/data/");
    let Source::Objects(objects) = &source else {
        panic!("expected objects");
    };
    let handle = objects.stop_handle();
    let (sender, receiver) = std::sync::mpsc::channel();
    let planning = std::thread::spawn(move || {
        let _ = sender.send(batches(source, BatchSpec::new(10)).err());
    });
    while pages.load(Ordering::SeqCst) < 20 {
        std::thread::sleep(Duration::from_millis(5));
    }
    handle.stop();
    let error = receiver
        .recv_timeout(Duration::from_secs(60))
        .expect("the planning did not stop")
        .expect("expected an error");
    planning.join().unwrap();
    let Error::Io { path, source } = &error else {
        panic!("expected an I/O error, got {error:?}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::Interrupted);
    assert_eq!(path.to_str(), Some("s3://bkt/data/"));
}
