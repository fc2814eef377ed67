//! Whole objects named by URL as rows name them: the image rows whose paths are (or resolve to)
//! URLs of object storage (`s3://bucket/images/a.jpg`).
//!
//! A [`UrlReader`] belongs to one loader. It starts its runtime at its first URL (a loader whose
//! rows are local files starts none), makes one store per bucket, container or host with the
//! source's storage options (or, for a local source, the environment's), and reads the URLs of
//! a batch [`MAX_REQUESTS`](super::runtime::MAX_REQUESTS) at once. Each object is refused past
//! `max_bytes` before its body is read, and its body is gathered as the ranges of planned objects
//! are (growing with what arrives, never past the size the answer announced).
//!
//! With a `cache_dir`, an object read whole is kept in the loader's [`RangeCache`] (its bytes,
//! keyed as a range of all of them, and a record of its size and validators keyed by its URL);
//! the next read of the URL (a later epoch, another worker) asks the store with `If-None-Match`
//! and reads the kept bytes when the answer is "not modified": one request either way, and no
//! body sent again. Only objects with a strong ETag are kept, as for ranges.
//!
//! A store whose request failed slowly (it stalled, or its connections failed through every
//! retry: [`STALLED`] or more) is probed before its next URLs are read: one request, within the
//! store's request `timeout` and without retries; when it answers, the rest are read, else they
//! fail at once, saying why. A file whose rows name a server that stopped answering then waits
//! one `timeout` per batch, where it waited `retry_timeout` for every 16 rows (with
//! `on_error="skip"` and the defaults, a job of hours); and a server that stalled for a moment
//! costs only the rows whose requests failed (failing its rows at once for a while instead, a
//! blip of a second lost every row of a file read in order, as skipped rows are refilled at once).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{GetOptions, ObjectStore, ObjectStoreScheme};
use tokio::sync::Semaphore;
use url::Url;

use super::cache::{CacheKey, RangeCache};
use super::client::WholeBodyLimit;
use super::kept::{Kept, RECORD_BYTES};
use super::object::{acquire, collect};
use super::options::StorageOptions;
use super::runtime::{MAX_REQUESTS, Remote};
use super::{MAX_URL_BYTES, display_name, is_object_url, store_error, url_start};
use crate::{Error, Result};

/// Reads whole objects by URL for one loader; see the module documentation.
pub(crate) struct UrlReader {
    options: StorageOptions,
    stop: Arc<AtomicBool>,
    /// The loader's `cache_dir`, when it has one.
    cache: Option<Arc<RangeCache>>,
    /// The runtime and the stores made so far; `None` until the first URL.
    started: Mutex<Option<Started>>,
}

struct Started {
    remote: Arc<Remote>,
    stores: BTreeMap<String, Arc<dyn ObjectStore>>,
    /// The stores (by the same key) whose last request failed slowly, with its error.
    failing: BTreeMap<String, String>,
}

/// A failed request that took this long marks its store failing (see the module documentation);
/// a store that answers an error at once (a missing object, a refused credential) is not.
const STALLED: Duration = Duration::from_millis(500);

impl std::fmt::Debug for UrlReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlReader").finish_non_exhaustive()
    }
}

impl UrlReader {
    /// A reader with `options` (the environment's alone when `None`), whose waits end once
    /// `stop` is set, keeping what it reads in the cache of `cache` when given.
    pub(crate) fn new(
        options: Option<StorageOptions>,
        stop: Arc<AtomicBool>,
        cache: Option<&super::CacheSettings>,
    ) -> Result<Self> {
        let options = match options {
            Some(options) => options,
            None => {
                let none: [(&str, String); 0] = [];
                StorageOptions::new(none)?
            }
        };
        Ok(UrlReader {
            options,
            stop,
            cache: cache.map(RangeCache::open_shared).transpose()?,
            started: Mutex::new(None),
        })
    }

    /// The bytes of the object at each of `urls`, each at most `max_bytes`, in order: each URL
    /// its own result, so that a row's failure is that row's; the outer error is the loader's
    /// (its runtime could not start, or it was stopped while the reads were in flight).
    ///
    /// A store that failed slowly before is probed first: one of its URLs, within the store's
    /// request `timeout` and without retries; its other URLs are read when it answers, and fail
    /// at once, saying why, when it does not.
    pub(crate) fn read_all(&self, urls: &[&str], max_bytes: u64) -> Result<Vec<Result<Bytes>>> {
        let mut targets = Vec::with_capacity(urls.len());
        let mut results: Vec<Option<Result<Bytes>>> = Vec::with_capacity(urls.len());
        let Some(remote) = self.targets(urls, &mut targets, &mut results)? else {
            return Ok(results.into_iter().flatten().collect());
        };
        let failing = self.failing();
        let mut probes = Vec::new();
        let mut rest = Vec::with_capacity(targets.len());
        for target in targets {
            let first = failing.contains_key(&target.store_key)
                && !probes
                    .iter()
                    .any(|probe: &Target| probe.store_key == target.store_key);
            if first {
                probes.push(target);
            } else {
                rest.push(target);
            }
        }
        let mut fetched = Vec::with_capacity(urls.len());
        if !probes.is_empty() {
            let probed = self.fetch(
                &remote,
                probes,
                max_bytes,
                Some(self.options.request_timeout()),
            )?;
            self.record(&probed);
            fetched.extend(probed);
        }
        let failing = self.failing();
        let (refused, rest): (Vec<Target>, Vec<Target>) = rest
            .into_iter()
            .partition(|target| failing.contains_key(&target.store_key));
        for target in refused {
            let words = &failing[&target.store_key];
            let store = super::redact::redacted_text(&target.store_key);
            results[target.index] = Some(Err(Error::Io {
                path: target.name,
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "not asked: {store} did not answer ({words}); it is asked again, one \
                         request first, with the next batch's rows"
                    ),
                ),
            }));
        }
        let read = self.fetch(&remote, rest, max_bytes, None)?;
        self.record(&read);
        fetched.extend(read);
        for (index, _, result, _) in fetched {
            results[index] = Some(result);
        }
        Ok(results
            .into_iter()
            .map(|result| result.expect("every URL was read or refused"))
            .collect())
    }

    /// Reads `targets` on the runtime, [`MAX_REQUESTS`] at once; each within `budget` when
    /// given (a probe, whose store failed before).
    fn fetch(
        &self,
        remote: &Remote,
        targets: Vec<Target>,
        max_bytes: u64,
        budget: Option<Duration>,
    ) -> Result<Vec<Fetched>> {
        if targets.is_empty() {
            return Ok(Vec::new());
        }
        let requests = remote.requests.clone();
        let cache = self.cache.clone();
        remote.run(async move {
            let reads: Vec<_> = targets
                .into_iter()
                .map(|target| {
                    let (index, key, name) =
                        (target.index, target.store_key.clone(), target.name.clone());
                    let read = read_target(target, requests.clone(), max_bytes, cache.clone());
                    async move {
                        let Some(budget) = budget else {
                            return read.await;
                        };
                        tokio::time::timeout(budget, read)
                            .await
                            .unwrap_or_else(|_| {
                                let error = Error::Io {
                                    path: name,
                                    source: io::Error::new(
                                        io::ErrorKind::TimedOut,
                                        format!(
                                            "no answer within the request timeout ({budget:?})"
                                        ),
                                    ),
                                };
                                (index, key, Err(error), budget)
                            })
                    }
                })
                .collect();
            let reads = futures_util::stream::iter(reads).buffer_unordered(MAX_REQUESTS);
            Ok(reads.collect::<Vec<_>>().await)
        })
    }

    /// The stores that failed slowly and have not answered since, with the error.
    fn failing(&self) -> BTreeMap<String, String> {
        let started = self
            .started
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        started
            .as_ref()
            .map(|started| started.failing.clone())
            .unwrap_or_default()
    }

    /// Marks the stores whose requests in `fetched` failed slowly (stalled, or their connections
    /// failed through every retry) as failing, and clears those that answered: any answer of a
    /// store, even an error about its object, clears it.
    fn record(&self, fetched: &[Fetched]) {
        let mut outcomes: BTreeMap<&str, Option<String>> = BTreeMap::new();
        for (_, key, result, took) in fetched {
            match result {
                Err(error) if is_transport_failure(error) => {
                    if *took >= STALLED {
                        // In the words of every level: the top one names only the URL.
                        let words = arrow_dlpack::Report::new(error).to_string();
                        outcomes.entry(key).or_insert(Some(words));
                    }
                }
                _ => {
                    outcomes.insert(key, None);
                }
            }
        }
        let mut started = self
            .started
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(started) = started.as_mut() else {
            return;
        };
        for (key, failure) in outcomes {
            match failure {
                Some(words) => {
                    started.failing.insert(key.to_string(), words);
                }
                None => {
                    started.failing.remove(key);
                }
            }
        }
    }

    /// Checks each URL and finds its store (made at the first URL of its bucket or host),
    /// filling `results` with the refused ones and `targets` with the rest; starts the runtime
    /// at the first URL, and returns it when there is something to read.
    fn targets(
        &self,
        urls: &[&str],
        targets: &mut Vec<Target>,
        results: &mut Vec<Option<Result<Bytes>>>,
    ) -> Result<Option<Arc<Remote>>> {
        let mut started = self
            .started
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for (index, text) in urls.iter().enumerate() {
            match self.target(text, &mut started) {
                Ok((name, store, location, store_key)) => {
                    results.push(None);
                    targets.push(Target {
                        index,
                        name,
                        store,
                        location,
                        store_key,
                    });
                }
                Err(error) => results.push(Some(Err(error))),
            }
        }
        Ok(started
            .as_ref()
            .filter(|_| !targets.is_empty())
            .map(|started| started.remote.clone()))
    }

    /// The store and location of the object at `text`.
    fn target(
        &self,
        text: &str,
        started: &mut Option<Started>,
    ) -> Result<(PathBuf, Arc<dyn ObjectStore>, StorePath, String)> {
        // HTTP stacks refuse (or, inside `object_store`, panic on) request lines this long; no
        // object's URL is.
        if text.len() > MAX_URL_BYTES {
            return Err(url_error(
                url_start(text),
                io::ErrorKind::InvalidInput,
                format!(
                    "the URL is {} bytes long; expected at most {MAX_URL_BYTES}",
                    text.len()
                ),
            ));
        }
        if !is_object_url(text) {
            return Err(url_error(
                text,
                io::ErrorKind::Unsupported,
                "it is not a URL of object storage; expected s3://, gs://, az://, abfs://, \
                 abfss://, http:// or https://"
                    .to_string(),
            ));
        }
        let url = Url::parse(text).map_err(|error| {
            url_error(
                text,
                io::ErrorKind::InvalidInput,
                format!("it is not a valid URL: {error}"),
            )
        })?;
        let name = display_name(&url);
        // Object storage names objects by path: a query or a fragment would not be sent, and
        // another object than the row names would be read.
        if url.query().is_some() || url.fragment().is_some() {
            return Err(url_error(
                text,
                io::ErrorKind::InvalidInput,
                "it has a query string or a fragment, which object storage does not take (an \
                 object is named by its path alone); expected the object's URL"
                    .to_string(),
            ));
        }
        self.options.check_for(&url)?;
        let (_, location) = ObjectStoreScheme::parse(&url).map_err(|error| Error::Io {
            path: name.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, error.to_string()),
        })?;
        let started = match started {
            Some(started) => started,
            None => started.insert(Started {
                remote: Remote::start(self.stop.clone(), name.clone())?,
                stores: BTreeMap::new(),
                failing: BTreeMap::new(),
            }),
        };
        let key = url[..url::Position::BeforePath].to_string();
        let store = match started.stores.get(&key) {
            Some(store) => store.clone(),
            None => {
                let made = self.options.store_for(&url)?;
                if let Some(credentials) = made.credentials {
                    let checked = name.clone();
                    started
                        .remote
                        .run(async move { credentials.check(&checked).await })?;
                }
                started.stores.insert(key.clone(), made.store.clone());
                made.store
            }
        };
        Ok((name, store, location, key))
    }
}

/// A URL to read.
struct Target {
    /// Its index among the URLs asked.
    index: usize,
    /// Its name in errors.
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: StorePath,
    /// Its store's key (scheme, host and port, or bucket).
    store_key: String,
}

/// What [`read_target`] gives: the URL's index, its store's key, the bytes, and how long the
/// request took once it was sent.
type Fetched = (usize, String, Result<Bytes>, Duration);

/// Reads `target` under the loader's bound on requests in flight.
async fn read_target(
    target: Target,
    requests: Arc<Semaphore>,
    max_bytes: u64,
    cache: Option<Arc<RangeCache>>,
) -> Fetched {
    match acquire(&requests).await {
        Ok(_permit) => {
            let sent = Instant::now();
            let result = match cache {
                Some(cache) => read_cached(&target, max_bytes, cache).await,
                None => read(&target, max_bytes, None)
                    .await
                    .map(|(bytes, _)| bytes)
                    .map_err(|unread| unread.into_error(&target.name)),
            };
            (target.index, target.store_key, result, sent.elapsed())
        }
        Err(error) => (target.index, target.store_key, Err(error), Duration::ZERO),
    }
}

/// Reads `target` through `cache`: with the ETag of the bytes kept for its URL, when there are
/// some, as the condition of the request; "not modified" serves the kept bytes, and an object
/// read is kept (see the module documentation).
async fn read_cached(target: &Target, max_bytes: u64, cache: Arc<RangeCache>) -> Result<Bytes> {
    let url = target.name.to_string_lossy().into_owned();
    let record = CacheKey::record(&url, RECORD_BYTES);
    let kept = cache
        .get_async(&record)
        .await
        .and_then(|bytes| Kept::decode(&bytes))
        .filter(|kept| kept.size <= max_bytes);
    let answer = match &kept {
        Some(kept) => match read(target, max_bytes, Some(&kept.e_tag)).await {
            Err(Unread::NotModified) => {
                if let Some(bytes) = cache.get_async(&kept.key(&url)).await {
                    return Ok(bytes);
                }
                // The bytes went (evicted) while the record stayed: read them again.
                read(target, max_bytes, None).await
            }
            answer => answer,
        },
        None => read(target, max_bytes, None).await,
    };
    let (bytes, meta) = answer.map_err(|unread| unread.into_error(&target.name))?;
    if let Some(fresh) = Kept::of(&meta) {
        let kept_bytes = bytes.clone();
        // Bytes that cannot be kept are served all the same.
        let _ = tokio::task::spawn_blocking(move || {
            cache.put(&fresh.key(&url), &kept_bytes);
            cache.put(&record, &fresh.encode());
        })
        .await;
    }
    Ok(bytes)
}

/// Whether `error` is the store's or the network's (a stall, a refused or reset connection,
/// 5xx answers through every retry) rather than the object's (missing, forbidden, too large, an
/// answer refused as not of the object asked for).
fn is_transport_failure(error: &Error) -> bool {
    match error {
        Error::Io { source, .. } => !matches!(
            source.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied | io::ErrorKind::InvalidData
        ),
        _ => false,
    }
}

/// Why [`read`] gave no bytes.
enum Unread {
    /// The store answered "not modified" to `If-None-Match`.
    NotModified,
    Failed(Error),
}

impl Unread {
    fn into_error(self, name: &std::path::Path) -> Error {
        match self {
            Unread::Failed(error) => error,
            Unread::NotModified => Error::Io {
                path: name.to_path_buf(),
                source: io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the store answered \"not modified\" to a request without a condition",
                ),
            },
        }
    }
}

impl From<Error> for Unread {
    fn from(error: Error) -> Self {
        Unread::Failed(error)
    }
}

/// Reads the object of `target` whole, refused past `max_bytes` before its body is read; with
/// `if_none_match`, "not modified" when its ETag is still that one. Gives the bytes and what the
/// answer said of the object.
async fn read(
    target: &Target,
    max_bytes: u64,
    if_none_match: Option<&str>,
) -> std::result::Result<(Bytes, object_store::ObjectMeta), Unread> {
    let name = &target.name;
    // The client bounds an answer without a range at 16 MiB; an image may be up to `max_bytes`.
    let mut options = GetOptions {
        if_none_match: if_none_match.map(str::to_string),
        ..GetOptions::default()
    };
    options.extensions.insert(WholeBodyLimit(max_bytes));
    let result = match target.store.get_opts(&target.location, options).await {
        Ok(result) => result,
        Err(object_store::Error::NotModified { .. }) if if_none_match.is_some() => {
            return Err(Unread::NotModified);
        }
        Err(error) => return Err(store_error(name, error).into()),
    };
    let size = result.meta.size;
    if size > max_bytes {
        return Err(Error::Io {
            path: name.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the object is {size} bytes; expected at most {max_bytes} bytes for an image"
                ),
            ),
        }
        .into());
    }
    let range = result.range.clone();
    if range != (0..size) {
        return Err(Error::Io {
            path: name.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "asked for the whole object of {size} bytes; the answer held bytes {}..{}",
                    range.start, range.end
                ),
            ),
        }
        .into());
    }
    let meta = result.meta.clone();
    Ok((collect(name, result, &range).await?, meta))
}

/// An I/O error of kind `kind` about the URL `text`, shown without its userinfo, query and
/// fragment (a pre-signed URL's query holds its signature and token).
fn url_error(text: &str, kind: io::ErrorKind, message: String) -> Error {
    let shown = text.split(['?', '#']).next().unwrap_or(text);
    Error::Io {
        path: PathBuf::from(super::redact::redacted_text(shown)),
        source: io::Error::new(kind, message),
    }
}
