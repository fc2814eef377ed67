//! A small HTTP/1.1 file server on loopback for the object-storage tests: `GET` and `HEAD` with
//! byte ranges, ETags and last-modified times, and switches that make it fail the next requests
//! with 503, stop answering, or cut its answers short.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
}

/// A served file: its bytes and ETag.
type Files = Arc<Mutex<HashMap<String, (Arc<Vec<u8>>, String)>>>;

/// The server; dropping it stops it and joins its threads.
pub(crate) struct Server {
    address: SocketAddr,
    files: Files,
    pub(crate) switches: Arc<Switches>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Starts a server on a free port of 127.0.0.1.
    pub(crate) fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let files: Files = Arc::default();
        let switches = Arc::new(Switches::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (files, switches, stop) = (files.clone(), switches.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut connections = Vec::new();
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (files, switches, stop) = (files.clone(), switches.clone(), stop.clone());
                    connections.push(std::thread::spawn(move || {
                        let _ = serve(stream, &files, &switches, &stop);
                    }));
                }
                for connection in connections {
                    let _ = connection.join();
                }
            })
        };
        Server {
            address,
            files,
            switches,
            stop,
            thread: Some(thread),
        }
    }

    /// Serves `bytes` at `/name` with a new ETag.
    pub(crate) fn put(&self, name: &str, bytes: Vec<u8>) {
        let mut files = self.files.lock().unwrap();
        let etag = format!("\"{}-{}\"", bytes.len(), files.len() + 1 + rand_tag(&bytes));
        files.insert(format!("/{name}"), (Arc::new(bytes), etag));
    }

    /// The URL of `/name`.
    pub(crate) fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.address)
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
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread.
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers the requests of one connection until it closes or the server stops.
fn serve(
    stream: TcpStream,
    files: &Files,
    switches: &Switches,
    stop: &AtomicBool,
) -> std::io::Result<()> {
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
        let seen = switches.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let stall_after = switches.stall_after.load(Ordering::SeqCst);
        if stall_after != 0 && seen > stall_after {
            switches.stall.store(true, Ordering::SeqCst);
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        if switches.stall.load(Ordering::SeqCst) {
            let start = Instant::now();
            while !stop.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(3600) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return Ok(());
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
        let Some((bytes, etag)) = files.lock().unwrap().get(&path).cloned() else {
            writer.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        };
        if headers.get("if-match").is_some_and(|tag| *tag != etag) {
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
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nETag: {etag}\r\nLast-Modified: Tue, 01 Dec \
             2026 00:00:00 GMT\r\nAccept-Ranges: bytes\r\nConnection: keep-alive\r\n",
            end - start
        );
        if range.is_some() {
            head.push_str(&format!(
                "Content-Range: bytes {start}-{}/{size}\r\n",
                end - 1
            ));
        }
        head.push_str("\r\n");
        writer.write_all(head.as_bytes())?;
        if method == "GET" {
            if switches.cut_short.load(Ordering::SeqCst) {
                writer.write_all(&bytes[start..start + (end - start) / 2])?;
                return Ok(());
            }
            writer.write_all(&bytes[start..end])?;
        }
    }
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
