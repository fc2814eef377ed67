//! A small HTTP/1.1 file server on loopback for the object-storage tests: `GET` and `HEAD` with
//! byte ranges, ETags, last-modified times and their preconditions, and switches that make it
//! fail the next requests with 503, stop answering, cut its answers short or leave out its
//! validators; a test may also answer requests itself ([`Server::handle`]), as a hostile server
//! would, and read the requests the server received ([`Server::requests`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A request as the server read it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// The path and query.
    pub(crate) path: String,
    /// Header names in lowercase.
    pub(crate) headers: HashMap<String, String>,
}

/// What a test's handler answers.
pub(crate) enum Answer {
    /// What the server answers on its own (its files).
    Files,
    /// This status line and headers (without the blank line that ends them), then `body`, then
    /// the connection is closed.
    Raw { head: String, body: Vec<u8> },
    /// This status line and headers, then zeros in 64 KiB writes with `pause` between them until
    /// `total` bytes were sent or the client went away, then the connection is closed.
    Stream {
        head: String,
        total: u64,
        pause: Duration,
    },
}

/// A test's handler of requests.
type Handler = Arc<dyn Fn(&Request) -> Answer + Send + Sync>;

/// What the server does with the next requests.
#[derive(Default)]
pub(crate) struct Switches {
    /// Requests still to answer with 503 Service Unavailable.
    pub(crate) fail_next: AtomicUsize,
    /// Accept requests and never answer them (until the server stops).
    pub(crate) stall: AtomicBool,
    /// Answer this many requests, then stall (0: never).
    pub(crate) stall_after: AtomicUsize,
    /// Answer `GET`s with half the bytes their `Content-Length` declares, then close.
    pub(crate) cut_short: AtomicBool,
    /// Requests received.
    pub(crate) requests: AtomicUsize,
    /// `GET` requests for a range received.
    pub(crate) range_requests: AtomicUsize,
    /// Answer without `ETag` and `Last-Modified` headers.
    pub(crate) no_validators: AtomicBool,
    /// Answer without an `ETag` header (with `Last-Modified`).
    pub(crate) no_etag: AtomicBool,
    /// Send weak ETags (`W/"..."`), which `If-Match` never matches.
    pub(crate) weak_etags: AtomicBool,
    /// Bytes of bodies written by [`Answer::Stream`] answers.
    pub(crate) streamed: AtomicU64,
    /// [`Answer::Stream`] answers still being written.
    pub(crate) streaming: AtomicUsize,
}

/// A served file: its bytes, ETag and last-modified time.
type Files = Arc<Mutex<HashMap<String, (Arc<Vec<u8>>, String, String)>>>;

/// What the server shares with its connections.
#[derive(Clone, Default)]
struct Shared {
    files: Files,
    switches: Arc<Switches>,
    stop: Arc<AtomicBool>,
    handler: Arc<Mutex<Option<Handler>>>,
    seen: Arc<Mutex<Vec<Request>>>,
}

/// The server; dropping it stops it and joins its threads.
pub(crate) struct Server {
    address: SocketAddr,
    shared: Shared,
    pub(crate) switches: Arc<Switches>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts a server on a free port of 127.0.0.1.
    pub(crate) fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let shared = Shared::default();
        let thread = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let mut connections = Vec::new();
                for stream in listener.incoming() {
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let shared = shared.clone();
                    connections.push(std::thread::spawn(move || {
                        let _ = serve(stream, &shared);
                    }));
                }
                for connection in connections {
                    let _ = connection.join();
                }
            })
        };
        Server {
            address,
            switches: shared.switches.clone(),
            shared,
            thread: Some(thread),
        }
    }

    /// Serves `bytes` at `/name` with a new ETag and a later last-modified time.
    pub(crate) fn put(&self, name: &str, bytes: Vec<u8>) {
        let mut files = self.shared.files.lock().unwrap();
        let version = files.len() + 1 + rand_tag(&bytes) % 1000;
        let etag = format!("\"{}-{version}\"", bytes.len());
        let modified = format!(
            "Tue, 01 Dec 2026 {:02}:{:02}:{:02} GMT",
            version / 3600 % 24,
            version / 60 % 60,
            version % 60
        );
        files.insert(format!("/{name}"), (Arc::new(bytes), etag, modified));
    }

    /// The URL of `/name`.
    pub(crate) fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.address)
    }

    /// The server's scheme, host and port.
    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Answers every later request with `handler` (which may answer [`Answer::Files`]).
    pub(crate) fn handle(&self, handler: impl Fn(&Request) -> Answer + Send + Sync + 'static) {
        *self.shared.handler.lock().unwrap() = Some(Arc::new(handler));
    }

    /// The requests received so far.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Waits until every [`Answer::Stream`] ended (at most `limit`), and gives the bytes they
    /// wrote.
    pub(crate) fn streamed_after_streams_end(&self, limit: Duration) -> u64 {
        let start = Instant::now();
        while self.switches.streaming.load(Ordering::SeqCst) > 0 && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.switches.streamed.load(Ordering::SeqCst)
    }
}

/// A tag that differs between different contents of one length.
fn rand_tag(bytes: &[u8]) -> usize {
    bytes.iter().fold(0usize, |hash, &byte| {
        hash.wrapping_mul(31).wrapping_add(byte as usize)
    })
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread.
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers the requests of one connection until it closes or the server stops.
fn serve(stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let (switches, stop) = (&shared.switches, &shared.stop);
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        loop {
            match reader.read_line(&mut request_line) {
                Ok(0) => return Ok(()),
                Ok(_) => break,
                Err(_) if !stop.load(Ordering::SeqCst) => continue,
                Err(error) => return Err(error),
            }
        }
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        // A request body (the metadata service's token `PUT` has none) is read and dropped.
        let length: usize = headers
            .get("content-length")
            .and_then(|length| length.parse().ok())
            .unwrap_or(0);
        std::io::Read::read_exact(&mut reader, &mut vec![0; length])?;
        let seen = switches.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let stall_after = switches.stall_after.load(Ordering::SeqCst);
        if stall_after != 0 && seen > stall_after {
            switches.stall.store(true, Ordering::SeqCst);
        }
        let mut parts = request_line.split_whitespace();
        let request = Request {
            method: parts.next().unwrap_or_default().to_string(),
            path: parts.next().unwrap_or_default().to_string(),
            headers,
        };
        shared.seen.lock().unwrap().push(request.clone());
        if switches.stall.load(Ordering::SeqCst) {
            let start = Instant::now();
            while !stop.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(3600) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return Ok(());
        }
        let handler = shared.handler.lock().unwrap().clone();
        match handler.map_or(Answer::Files, |handler| handler(&request)) {
            Answer::Files => {}
            Answer::Raw { head, body } => {
                writer.write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes())?;
                writer.write_all(&body)?;
                return Ok(());
            }
            Answer::Stream { head, total, pause } => {
                switches.streaming.fetch_add(1, Ordering::SeqCst);
                let result = stream_zeros(&mut writer, &head, total, pause, switches, stop);
                switches.streaming.fetch_sub(1, Ordering::SeqCst);
                return result;
            }
        }
        if switches
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            writer.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
            )?;
            continue;
        }
        let path = request.path.split('?').next().unwrap_or_default();
        let Some((bytes, etag, modified)) = shared.files.lock().unwrap().get(path).cloned() else {
            writer.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
        let headers = &request.headers;
        let weak = switches.weak_etags.load(Ordering::SeqCst);
        let etag = if weak { format!("W/{etag}") } else { etag };
        // `If-Match` compares strongly: a weak ETag matches nothing.
        let changed = headers
            .get("if-match")
            .is_some_and(|tag| *tag != etag || weak)
            || headers
                .get("if-unmodified-since")
                .is_some_and(|time| *time != modified);
        if changed {
            writer.write_all(b"HTTP/1.1 412 Precondition Failed\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        }
        let size = bytes.len();
        let range = headers
            .get("range")
            .and_then(|range| parse_range(range, size));
        let (status, start, end) = match range {
            Some((start, end)) => {
                switches.range_requests.fetch_add(1, Ordering::SeqCst);
                ("206 Partial Content", start, end)
            }
            None => ("200 OK", 0, size),
        };
        let mut head = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\nConnection: \
             keep-alive\r\n",
            end - start
        );
        if !switches.no_validators.load(Ordering::SeqCst) {
            if !switches.no_etag.load(Ordering::SeqCst) {
                head.push_str(&format!("ETag: {etag}\r\n"));
            }
            head.push_str(&format!("Last-Modified: {modified}\r\n"));
        }
        if range.is_some() {
            head.push_str(&format!(
                "Content-Range: bytes {start}-{}/{size}\r\n",
                end - 1
            ));
        }
        head.push_str("\r\n");
        writer.write_all(head.as_bytes())?;
        if request.method == "GET" {
            if switches.cut_short.load(Ordering::SeqCst) {
                writer.write_all(&bytes[start..start + (end - start) / 2])?;
                return Ok(());
            }
            writer.write_all(&bytes[start..end])?;
        }
    }
}

/// Writes `head` and zeros as [`Answer::Stream`] says, counting the body's bytes.
fn stream_zeros(
    writer: &mut TcpStream,
    head: &str,
    total: u64,
    pause: Duration,
    switches: &Switches,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    writer.write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes())?;
    let chunk = vec![0u8; 64 * 1024];
    let mut sent = 0u64;
    while sent < total && !stop.load(Ordering::SeqCst) {
        let size = chunk.len().min((total - sent) as usize);
        let size = if pause.is_zero() { size } else { 1 };
        writer.write_all(&chunk[..size])?;
        sent += size as u64;
        switches.streamed.fetch_add(size as u64, Ordering::SeqCst);
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    Ok(())
}

/// The `start..end` of a `Range: bytes=...` header over `size` bytes.
fn parse_range(header: &str, size: usize) -> Option<(usize, usize)> {
    let spec = header.strip_prefix("bytes=")?;
    let (first, last) = spec.split_once('-')?;
    if first.is_empty() {
        let suffix: usize = last.parse().ok()?;
        return Some((size.saturating_sub(suffix), size));
    }
    let start: usize = first.parse().ok()?;
    let end = if last.is_empty() {
        size
    } else {
        (last.parse::<usize>().ok()? + 1).min(size)
    };
    (start < end).then_some((start, end))
}
