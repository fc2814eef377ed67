//! Sources in object storage (`s3://`, `gs://`, `az://`, `abfs://`, `http(s)://`), read through
//! arrow-rs's `object_store` on an async runtime that lives on the loader's own threads.
//!
//! Nothing async leaves this module: every operation is a future spawned on the loader's runtime
//! and waited for through a channel, so that the planning thread, the decoding threads and the
//! loader thread stay synchronous (and a caller inside another async runtime does not nest
//! runtimes).
//!
//! | item | what it is |
//! |---|---|
//! | [`ObjectSource`] | the URLs and storage options a caller gives, checked when it is made |
//! | [`Remote`] | one loader's runtime, stores and bound on requests in flight |
//! | [`RemoteObject`] | an object pinned by size, ETag and last-modified time when it is planned |
//! | [`Fetched`] | byte ranges of an object, read by the Parquet and IPC decoders as a file |

mod fetched;
mod glob;
mod options;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore};
use tokio::sync::Semaphore;
use url::Url;

pub(crate) use fetched::{Fetched, coalesce};

use crate::file::{Format, format_of};
use crate::{Error, Result};

/// The bytes read from the end of an object when it is opened: a Parquet footer or an IPC
/// footer of this size or less costs one request.
const TAIL_GUESS: u64 = 64 * 1024;

/// Objects opened (their tails fetched) at once when a source is planned.
const OPEN_CONCURRENCY: usize = 16;

/// Requests in flight at once for one loader, over all its decoding threads.
pub(crate) const MAX_REQUESTS: usize = 16;

/// Threads of a loader's async runtime: they only wait on sockets and copy bodies.
const RUNTIME_THREADS: usize = 2;

/// Objects in object storage, named by URLs, with the options that reach their stores.
///
/// A URL names one object (`s3://bucket/train/part-0.parquet`), a prefix (a URL whose last
/// segment has no known extension, or that ends with `/`: every object under it), or a glob in
/// its last segments (`s3://bucket/train/*.parquet`, `**` for any depth). Prefixes and globs are
/// listed when the loader is planned and sorted by key, so that every rank and worker sees the
/// same objects in the same order; names that start with `_` or `.` (`_SUCCESS`, `.crc` files)
/// and names without a known extension are left out of listings.
///
/// Credentials, regions and endpoints come from the environment as `object_store` reads it
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
/// `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`, ...), and from the options, which
/// override them: the keys of `object_store`'s builders (`aws_access_key_id`, `endpoint`,
/// `region`, `timeout`, `allow_http`, ...; case-insensitive), plus `max_retries`,
/// `retry_timeout` and `retry_backoff` (durations such as `"30s"`) for the retries of
/// transient errors.
#[derive(Clone)]
pub struct ObjectSource {
    pub(crate) urls: Vec<Url>,
    pub(crate) options: options::StorageOptions,
}

impl fmt::Debug for ObjectSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<&str> = self.urls.iter().map(Url::as_str).collect();
        // The options may hold secrets: only their keys are shown.
        f.debug_struct("ObjectSource")
            .field("urls", &urls)
            .field("options", &self.options.keys())
            .finish()
    }
}

/// Whether `text` is a URL of a scheme the loader reads from object storage.
pub fn is_object_url(text: &str) -> bool {
    text.split_once("://").is_some_and(|(scheme, _)| {
        matches!(
            scheme.to_ascii_lowercase().as_str(),
            "s3" | "s3a" | "gs" | "az" | "azure" | "abfs" | "abfss" | "adl" | "http" | "https"
        )
    })
}

impl ObjectSource {
    /// The objects at `urls`, read with `options`; URLs of unknown schemes and unknown option
    /// keys are refused here, before anything is fetched.
    pub fn new<U: AsRef<str>, K: AsRef<str>, V: Into<String>>(
        urls: impl IntoIterator<Item = U>,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        let urls = urls
            .into_iter()
            .map(|url| {
                let text = url.as_ref();
                if !is_object_url(text) {
                    return Err(Error::InvalidSource {
                        what: format!("{text:?}"),
                        reason: "it is not a URL of object storage; expected s3://, gs://, \
                                 az://, abfs://, abfss://, http:// or https://"
                            .to_string(),
                    });
                }
                Url::parse(text).map_err(|error| Error::InvalidSource {
                    what: format!("{text:?}"),
                    reason: format!("it is not a valid URL: {error}"),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let options = options::StorageOptions::new(options)?;
        for url in &urls {
            options.check_for(url)?;
        }
        Ok(ObjectSource { urls, options })
    }
}

/// The name of an object in messages and errors: its URL, as a path (the loader's errors name
/// files by path).
fn display_name(url: &Url) -> PathBuf {
    PathBuf::from(url.as_str())
}

/// An `object_store` error as the loader's error about the object `name`: a missing object is a
/// not-found I/O error, refused credentials a permission error, a failed precondition a changed
/// object, anything else (a timeout after the retries, a reset) another I/O error.
pub(crate) fn store_error(name: &Path, error: object_store::Error) -> Error {
    let kind = match &error {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        object_store::Error::Precondition { .. } => {
            return Error::FileChanged {
                path: name.to_path_buf(),
                change: "its ETag no longer matches".to_string(),
            };
        }
        _ => io::ErrorKind::Other,
    };
    Error::Io {
        path: name.to_path_buf(),
        source: io::Error::new(kind, error),
    }
}

/// One loader's async runtime, its stores (one per bucket, container or host) and the bound on
/// its requests in flight.
pub(crate) struct Remote {
    /// `None` once dropped.
    runtime: Option<tokio::runtime::Runtime>,
    requests: Arc<Semaphore>,
    /// Set when the loader stops: a wait for a fetch then ends at once.
    stop: Arc<AtomicBool>,
}

impl Drop for Remote {
    fn drop(&mut self) {
        // Fetches in flight are cancelled without waiting for them (a server that stopped
        // answering must not hold up the loader's `drop`).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for Remote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Remote").finish_non_exhaustive()
    }
}

impl Remote {
    /// Starts the runtime.
    fn start() -> Result<Arc<Self>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("arrow-dlpack-fetch")
            .enable_all()
            .build()
            .map_err(|source| Error::Thread { source })?;
        Ok(Arc::new(Remote {
            runtime: Some(runtime),
            requests: Arc::new(Semaphore::new(MAX_REQUESTS)),
            stop: Arc::new(AtomicBool::new(false)),
        }))
    }

    /// Runs `future` on the runtime and waits for its output on the calling thread.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        self.spawn(future).wait()
    }

    /// Starts `future` on the runtime; its output is waited for with [`Pending::wait`], and
    /// dropping the [`Pending`] cancels it.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Pending<T> {
        let (sender, receiver) = mpsc::sync_channel(1);
        let runtime = self
            .runtime
            .as_ref()
            .expect("the runtime lives until `drop`");
        let task = runtime.spawn(async move {
            let _ = sender.send(future.await);
        });
        Pending {
            receiver,
            task,
            stop: self.stop.clone(),
        }
    }
}

/// A future started on a loader's runtime.
pub(crate) struct Pending<T> {
    receiver: mpsc::Receiver<Result<T>>,
    task: tokio::task::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

/// How often a wait for a fetch looks at the loader's stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

impl<T> Pending<T> {
    /// Waits for the output, or until the loader stops.
    pub(crate) fn wait(self) -> Result<T> {
        loop {
            match self.receiver.recv_timeout(STOP_POLL) {
                Ok(result) => return result,
                Err(mpsc::RecvTimeoutError::Timeout) if !self.stop.load(Ordering::Relaxed) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(Error::Panicked {
                        message: "the loader stopped while a fetch was in flight".to_string(),
                    });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::Panicked {
                        message: "a fetch of the loader's runtime ended without a result"
                            .to_string(),
                    });
                }
            }
        }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What an object was when it was planned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    size: u64,
    e_tag: Option<String>,
    last_modified: i64,
}

impl Stamp {
    fn of(meta: &ObjectMeta) -> Self {
        Stamp {
            size: meta.size,
            e_tag: meta.e_tag.clone(),
            last_modified: meta.last_modified.timestamp_millis(),
        }
    }

    /// Refuses `meta` when it describes an object other than the planned one.
    fn check(&self, name: &Path, meta: &ObjectMeta) -> Result<()> {
        let now = Stamp::of(meta);
        let change = if now.size != self.size {
            format!("its size is {} bytes, was {}", now.size, self.size)
        } else if now.e_tag != self.e_tag {
            format!("its ETag is {:?}, was {:?}", now.e_tag, self.e_tag)
        } else if self.e_tag.is_none() && now.last_modified != self.last_modified {
            "its last-modified time differs".to_string()
        } else {
            return Ok(());
        };
        Err(Error::FileChanged {
            path: name.to_path_buf(),
            change,
        })
    }
}

/// An object as the loader planned it: every read asks for the planned ETag (`If-Match`) and
/// checks the size, ETag and last-modified time of the answer, so that an object replaced after
/// planning is an error naming it instead of data other than planned.
#[derive(Clone)]
pub(crate) struct RemoteObject {
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: StorePath,
    stamp: Stamp,
    remote: Arc<Remote>,
}

impl fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RemoteObject").field(&self.name).finish()
    }
}

impl RemoteObject {
    /// The object's URL, as a path for messages.
    pub(crate) fn name(&self) -> &Path {
        &self.name
    }

    /// The object's size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.stamp.size
    }

    /// The object's ETag when it was planned, if the store gave one.
    pub(crate) fn e_tag(&self) -> Option<&str> {
        self.stamp.e_tag.as_deref()
    }

    /// The object's last-modified time when it was planned, in milliseconds since the Unix
    /// epoch.
    pub(crate) fn last_modified_ms(&self) -> i64 {
        self.stamp.last_modified
    }

    /// The loader's runtime.
    pub(crate) fn remote(&self) -> &Arc<Remote> {
        &self.remote
    }

    /// A future that fetches `ranges` (each inside the object), one request per range at most
    /// [`MAX_REQUESTS`] of the loader at once, and checks each answer against the plan.
    pub(crate) fn fetch_ranges(
        &self,
        ranges: impl IntoIterator<Item = Range<u64>>,
    ) -> impl Future<Output = Result<Fetched>> + Send + 'static {
        let object = FetchTarget::of(self);
        let ranges: Vec<Range<u64>> = ranges.into_iter().collect();
        async move {
            let parts = futures_util::future::try_join_all(ranges.into_iter().map(|range| {
                let object = object.clone();
                async move { Ok::<_, Error>((range.start, object.get(range).await?)) }
            }))
            .await?;
            Ok(Fetched::new(object.stamp.size, parts))
        }
    }

    /// Fetches `ranges` now, on the calling thread.
    pub(crate) fn fetch_now(
        &self,
        ranges: impl IntoIterator<Item = Range<u64>>,
    ) -> Result<Fetched> {
        self.remote.run(self.fetch_ranges(ranges))
    }
}

/// What a fetch needs of a [`RemoteObject`], without the runtime (a task must not own the
/// runtime it runs on).
#[derive(Clone)]
struct FetchTarget {
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: StorePath,
    stamp: Stamp,
    requests: Arc<Semaphore>,
}

impl FetchTarget {
    fn of(object: &RemoteObject) -> Self {
        FetchTarget {
            name: object.name.clone(),
            store: object.store.clone(),
            location: object.location.clone(),
            stamp: object.stamp.clone(),
            requests: object.remote.requests.clone(),
        }
    }

    /// Fetches `range`, pinned to the planned object.
    async fn get(&self, range: Range<u64>) -> Result<Bytes> {
        let _permit = self.requests.acquire().await.map_err(|_| Error::Panicked {
            message: "the loader's request bound was closed".to_string(),
        })?;
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: self.stamp.e_tag.clone(),
            ..GetOptions::default()
        };
        let result = self
            .store
            .get_opts(&self.location, options)
            .await
            .map_err(|error| store_error(&self.name, error))?;
        self.stamp.check(&self.name, &result.meta)?;
        let bytes = result
            .bytes()
            .await
            .map_err(|error| store_error(&self.name, error))?;
        let expected = range.end - range.start;
        if bytes.len() as u64 != expected {
            return Err(truncated(&self.name, &range, bytes.len()));
        }
        Ok(bytes)
    }
}

/// The error of an answer shorter than the range asked.
fn truncated(name: &Path, range: &Range<u64>, got: usize) -> Error {
    Error::Io {
        path: name.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "asked for bytes {}..{} and received {got}; expected the whole range (a \
                 truncated object or answer)",
                range.start, range.end
            ),
        ),
    }
}

/// The objects of a source, opened: each with the last bytes of its object (at least
/// [`TAIL_GUESS`] of them, or all), in the order the loader reads them.
pub(crate) struct Opened {
    pub(crate) format: Format,
    /// The flag that ends the waits for fetches when the loader stops.
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) objects: Vec<(RemoteObject, Fetched)>,
}

/// Lists the prefixes and globs of `source`, and opens every object: its metadata and its tail
/// in one request each, [`OPEN_CONCURRENCY`] at once.
pub(crate) fn open(source: ObjectSource) -> Result<Opened> {
    options::install_crypto();
    let remote = Remote::start()?;
    // One store per bucket, container or host, made from the first URL that names it.
    let mut stores: BTreeMap<String, Arc<dyn ObjectStore>> = BTreeMap::new();
    let mut targets: Vec<(Url, Arc<dyn ObjectStore>, glob::Target)> = Vec::new();
    for url in &source.urls {
        let key = url[..url::Position::BeforePath].to_string();
        let store = match stores.get(&key) {
            Some(store) => store.clone(),
            None => {
                let store = source.options.store_for(url)?;
                stores.insert(key, store.clone());
                store
            }
        };
        targets.push((url.clone(), store, glob::Target::of(url)?));
    }
    let listed: Vec<(Url, Arc<dyn ObjectStore>, StorePath)> = remote.run(async move {
        let mut all = Vec::new();
        for (url, store, target) in targets {
            for location in target.resolve(&url, store.as_ref()).await? {
                all.push((url.clone(), store.clone(), location));
            }
        }
        Ok(all)
    })?;
    let mut format = None;
    for (url, _, location) in &listed {
        let name = object_url(url, location);
        let Some(kind) = format_of(location.as_ref()) else {
            return Err(Error::UnknownFormat {
                path: display_name(&name),
            });
        };
        match format {
            None => format = Some((kind, name)),
            Some((first, ref first_name)) if first != kind => {
                return Err(Error::InvalidSpec {
                    reason: format!(
                        "{first_name} and {name} are of different formats; expected objects of \
                         one format"
                    ),
                });
            }
            Some(_) => {}
        }
    }
    let Some((format, _)) = format else {
        let urls: Vec<&str> = source.urls.iter().map(Url::as_str).collect();
        return Err(Error::InvalidSpec {
            reason: format!(
                "no objects of a known format (.parquet, .arrow, .arrows, ...) found at {urls:?}"
            ),
        });
    };
    let opening: Vec<_> = listed
        .into_iter()
        .map(|(url, store, location)| {
            let name = display_name(&object_url(&url, &location));
            Box::pin(open_one(name, store, location, remote.requests.clone()))
        })
        .collect();
    let opened = remote.run(async move {
        futures_util::stream::iter(opening)
            .buffered(OPEN_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await
    })?;
    let objects = opened
        .into_iter()
        .map(|(name, store, location, stamp, tail)| {
            (
                RemoteObject {
                    name,
                    store,
                    location,
                    stamp,
                    remote: remote.clone(),
                },
                tail,
            )
        })
        .collect();
    Ok(Opened {
        format,
        stop: remote.stop.clone(),
        objects,
    })
}

/// The URL of the object at `location` in the store of `url`.
fn object_url(url: &Url, location: &StorePath) -> Url {
    let mut object = url.clone();
    object.set_query(None);
    object.set_fragment(None);
    // The store's paths are relative to the container in the URL's path for Azure's and
    // HTTP's long forms; for the short forms (`s3://bucket/key`) the path is the key.
    object.set_path(&format!("/{location}"));
    object
}

/// What [`open_one`] gives: the object's name, store, location, stamp and tail.
type OpenedObject = (PathBuf, Arc<dyn ObjectStore>, StorePath, Stamp, Fetched);

/// Fetches the last [`TAIL_GUESS`] bytes of an object (all of a smaller one) with its metadata.
async fn open_one(
    name: PathBuf,
    store: Arc<dyn ObjectStore>,
    location: StorePath,
    requests: Arc<Semaphore>,
) -> Result<OpenedObject> {
    let _permit = requests.acquire().await.map_err(|_| Error::Panicked {
        message: "the loader's request bound was closed".to_string(),
    })?;
    let options = GetOptions {
        range: Some(GetRange::Suffix(TAIL_GUESS)),
        ..GetOptions::default()
    };
    let result = store
        .get_opts(&location, options)
        .await
        .map_err(|error| store_error(&name, error))?;
    let stamp = Stamp::of(&result.meta);
    let range = result.range.clone();
    let bytes = result
        .bytes()
        .await
        .map_err(|error| store_error(&name, error))?;
    if bytes.len() as u64 != range.end - range.start || range.end != stamp.size {
        return Err(truncated(&name, &range, bytes.len()));
    }
    let tail = Fetched::new(stamp.size, vec![(range.start, bytes)]);
    Ok((name, store, location, stamp, tail))
}
