//! An object as the loader planned it ([`RemoteObject`]), pinned by what its first answer said
//! ([`Stamp`]), and the reading of its ranges: every range checked against the object's size
//! before it is asked for, every answer checked against the plan, and its bytes gathered in a
//! buffer that grows with the bytes that arrive (fallibly), never past the range asked.

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, GetResult, ObjectMeta, ObjectStore};
use tokio::sync::Semaphore;

use super::cache::{CacheKey, RangeCache};
use super::fetched::Fetched;
use super::gather::Gather;
use super::runtime::Remote;
use super::store_error;
use crate::{Error, Result};

/// The bytes read from the end of an object when it is opened: a Parquet footer or an IPC
/// footer of this size or less costs one request.
pub(super) const TAIL_GUESS: u64 = 64 * 1024;

/// What an object was when it was planned: its size and validators (ETag, last-modified time).
#[derive(Debug, Clone)]
pub(super) struct Stamp {
    meta: ObjectMeta,
}

impl Stamp {
    pub(super) fn of(meta: &ObjectMeta) -> Self {
        Stamp { meta: meta.clone() }
    }

    /// The object's size in bytes.
    pub(super) fn size(&self) -> u64 {
        self.meta.size
    }

    /// Whether the object has a validator: an ETag or a last-modified time (`object_store`
    /// gives the Unix epoch for an answer without one).
    pub(super) fn has_validator(&self) -> bool {
        self.meta.e_tag.is_some() || self.meta.last_modified.timestamp_millis() != 0
    }

    /// The preconditions of a request for a range of the planned object: its ETag (`If-Match`)
    /// when it is a strong one (a weak ETag never matches `If-Match`), else its last-modified
    /// time (`If-Unmodified-Since`) when it has one: an object with a weak ETag is pinned by its
    /// time, since a weak ETag may stay the same when the bytes change.
    fn preconditions(&self, range: Range<u64>) -> GetOptions {
        let strong = self.meta.e_tag.clone().filter(|tag| !tag.starts_with("W/"));
        let unmodified = (strong.is_none() && self.meta.last_modified.timestamp_millis() != 0)
            .then_some(self.meta.last_modified);
        GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: strong,
            if_unmodified_since: unmodified,
            ..GetOptions::default()
        }
    }

    /// The key of `range` of the object `name` in a [`RangeCache`]: only for an object with a
    /// strong ETag, which names its bytes. A weak ETag (`W/"..."`) may stay the same when the
    /// bytes change, and a last-modified time has a resolution of a second, so an object
    /// rewritten within it would read as the old one: such objects are pinned within a loader
    /// as before, and never cached across loaders.
    fn cache_key(&self, name: &Path, range: &Range<u64>) -> Option<CacheKey> {
        let strong = self
            .meta
            .e_tag
            .as_deref()
            .is_some_and(|tag| !tag.starts_with("W/"));
        strong.then(|| {
            CacheKey::new(
                &name.to_string_lossy(),
                self.meta.size,
                self.meta.e_tag.as_deref(),
                self.meta.last_modified.timestamp_millis(),
                range,
            )
        })
    }

    /// Refuses `meta` when it describes an object other than the planned one.
    fn check(&self, name: &Path, meta: &ObjectMeta) -> Result<()> {
        let (was, now) = (&self.meta, meta);
        let change = if now.size != was.size {
            format!("its size is {} bytes, was {}", now.size, was.size)
        } else if now.e_tag != was.e_tag {
            let shown = |e_tag: &Option<String>| match e_tag {
                Some(e_tag) => e_tag.clone(),
                None => "absent".to_string(),
            };
            format!(
                "its ETag is {}, was {}",
                shown(&now.e_tag),
                shown(&was.e_tag)
            )
        } else if was.e_tag.is_none() && now.last_modified != was.last_modified {
            format!(
                "its last-modified time is {}, was {}",
                now.last_modified, was.last_modified
            )
        } else {
            return Ok(());
        };
        Err(Error::FileChanged {
            path: name.to_path_buf(),
            change,
        })
    }
}

/// An object as the loader planned it: every read asks for the planned ETag (`If-Match`, or
/// `If-Unmodified-Since` without one) and checks the size, ETag and last-modified time of the
/// answer, so that an object replaced after planning is an error naming it instead of data
/// other than planned.
#[derive(Clone)]
pub(crate) struct RemoteObject {
    pub(super) name: PathBuf,
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) location: StorePath,
    pub(super) stamp: Stamp,
    pub(super) remote: Arc<Remote>,
    /// Where fetched ranges are kept on local disk, when the loader has a `cache_dir`.
    pub(super) cache: Option<Arc<RangeCache>>,
}

impl fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RemoteObject").field(&self.name).finish()
    }
}

impl RemoteObject {
    /// The object's URL (its userinfo hidden), as a path for messages.
    pub(crate) fn name(&self) -> &Path {
        &self.name
    }

    /// The object's size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.stamp.size()
    }

    /// The object's ETag when it was planned, if the store gave one.
    pub(crate) fn e_tag(&self) -> Option<&str> {
        self.stamp.meta.e_tag.as_deref()
    }

    /// The object's last-modified time when it was planned, in milliseconds since the Unix
    /// epoch (0 when the store gave none).
    pub(crate) fn last_modified_ms(&self) -> i64 {
        self.stamp.meta.last_modified.timestamp_millis()
    }

    /// The loader's runtime.
    pub(crate) fn remote(&self) -> &Arc<Remote> {
        &self.remote
    }

    /// A future that fetches `ranges` (each inside the object, or the fetch is refused before
    /// any request), one request per range, at most [`MAX_REQUESTS`](super::runtime::MAX_REQUESTS) of
    /// the loader at once, and checks each answer against the plan.
    pub(crate) fn fetch_ranges(
        &self,
        ranges: impl IntoIterator<Item = Range<u64>>,
    ) -> impl Future<Output = Result<Fetched>> + Send + 'static {
        let object = FetchTarget::of(self);
        let ranges: Vec<Range<u64>> = ranges.into_iter().collect();
        async move {
            for range in &ranges {
                check_range(&object.name, range, object.stamp.size())?;
            }
            let parts = futures_util::future::try_join_all(ranges.into_iter().map(|range| {
                let object = object.clone();
                async move { Ok::<_, Error>((range.start, object.get(range).await?)) }
            }))
            .await?;
            Ok(Fetched::new(object.stamp.size(), parts))
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

/// Refuses a range that is empty or reaches past the object's `size` bytes.
fn check_range(name: &Path, range: &Range<u64>, size: u64) -> Result<()> {
    if range.start < range.end && range.end <= size {
        return Ok(());
    }
    Err(Error::Io {
        path: name.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the loader planned to read bytes {}..{} of it; expected a range inside its {size} \
                 bytes (a corrupt footer)",
                range.start, range.end
            ),
        ),
    })
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
    cache: Option<Arc<RangeCache>>,
}

impl FetchTarget {
    fn of(object: &RemoteObject) -> Self {
        FetchTarget {
            name: object.name.clone(),
            store: object.store.clone(),
            location: object.location.clone(),
            stamp: object.stamp.clone(),
            requests: object.remote.requests.clone(),
            cache: object.cache.clone(),
        }
    }

    /// The bytes of `range`: from the cache when it holds them, else fetched (and then kept
    /// there, one process fetching a range at a time: [`RangeCache::get_or_fetch`]).
    async fn get(&self, range: Range<u64>) -> Result<Bytes> {
        let cached = (self.cache.as_ref())
            .and_then(|cache| Some((cache, self.stamp.cache_key(&self.name, &range)?)));
        match cached {
            Some((cache, key)) => cache.get_or_fetch(key, self.fetch(range)).await,
            None => self.fetch(range).await,
        }
    }

    /// Fetches `range`, pinned to the planned object.
    async fn fetch(&self, range: Range<u64>) -> Result<Bytes> {
        let _permit = acquire(&self.requests).await?;
        let result = self
            .store
            .get_opts(&self.location, self.stamp.preconditions(range.clone()))
            .await
            .map_err(|error| store_error(&self.name, error))?;
        self.stamp.check(&self.name, &result.meta)?;
        if result.range != range {
            return Err(other_range(&self.name, &range, &result.range));
        }
        collect(&self.name, result, &range).await
    }
}

/// A permit of the loader's bound on requests in flight.
pub(super) async fn acquire(requests: &Semaphore) -> Result<tokio::sync::SemaphorePermit<'_>> {
    requests.acquire().await.map_err(|_| Error::Panicked {
        message: "the loader's request bound was closed".to_string(),
    })
}

/// The bytes of the answer `result` to a request for `range`: gathered as they arrive, in a
/// buffer that grows with them ([`Gather`]) and that an allocation failure refuses instead of
/// aborting; an answer that goes past the range is
/// refused at its first byte too many, and the connection dropped.
pub(super) async fn collect(name: &Path, result: GetResult, range: &Range<u64>) -> Result<Bytes> {
    let expected = range.end - range.start;
    let capacity = usize::try_from(expected).map_err(|_| {
        io_error(
            name,
            io::ErrorKind::OutOfMemory,
            format!(
                "bytes {}..{} do not fit in this machine's memory",
                range.start, range.end
            ),
        )
    })?;
    let mut stream = result.into_stream();
    // One part is kept as it came (no copy); a second one starts the buffer.
    let mut first: Option<Bytes> = None;
    let mut buffer = Gather::new(capacity);
    let refused = |(target, error): (usize, String)| {
        io_error(
            name,
            io::ErrorKind::OutOfMemory,
            format!(
                "cannot allocate {target} bytes for bytes {}..{}: {error}",
                range.start, range.end
            ),
        )
    };
    let mut received = 0u64;
    while let Some(part) = stream.next().await {
        let part = part.map_err(|error| store_error(name, error))?;
        received += part.len() as u64;
        if received > expected {
            return Err(io_error(
                name,
                io::ErrorKind::InvalidData,
                format!(
                    "asked for bytes {}..{} and the answer went on past them; expected {expected} \
                     bytes",
                    range.start, range.end
                ),
            ));
        }
        if first.is_none() && buffer.len() == 0 {
            first = Some(part);
            continue;
        }
        if let Some(first) = first.take() {
            buffer.push(&first).map_err(refused)?;
        }
        buffer.push(&part).map_err(refused)?;
    }
    let bytes = first.unwrap_or_else(|| buffer.into_bytes());
    if bytes.len() as u64 != expected {
        return Err(truncated(name, range, bytes.len()));
    }
    Ok(bytes)
}

/// An I/O error of kind `kind` about the object `name`.
fn io_error(name: &Path, kind: io::ErrorKind, message: String) -> Error {
    Error::Io {
        path: name.to_path_buf(),
        source: io::Error::new(kind, message),
    }
}

/// The error of an answer shorter than the range asked.
fn truncated(name: &Path, range: &Range<u64>, got: usize) -> Error {
    io_error(
        name,
        io::ErrorKind::UnexpectedEof,
        format!(
            "asked for bytes {}..{} and received {got}; expected the whole range (a truncated \
             object or answer)",
            range.start, range.end
        ),
    )
}

/// The error of an answer for other bytes than asked.
fn other_range(name: &Path, asked: &Range<u64>, got: &Range<u64>) -> Error {
    io_error(
        name,
        io::ErrorKind::InvalidData,
        format!(
            "asked for bytes {}..{} and the answer holds bytes {}..{}; expected the range asked",
            asked.start, asked.end, got.start, got.end
        ),
    )
}

/// What [`open_one`] gives: the object's stamp and tail.
pub(super) type Opened = (Stamp, Fetched);

/// Fetches the last [`TAIL_GUESS`] bytes of an object (all of a smaller one) with its metadata;
/// an object without a validator is refused unless `allow_without_validator`. Of a Parquet
/// object (`parquet`), only the footer is kept (the planning holds every object's tail at once).
pub(super) async fn open_one(
    name: &Path,
    store: &dyn ObjectStore,
    location: &StorePath,
    requests: &Semaphore,
    allow_without_validator: bool,
    parquet: bool,
) -> Result<Opened> {
    let _permit = acquire(requests).await?;
    let result = tail(store, location)
        .await
        .map_err(|error| store_error(name, error))?;
    let stamp = Stamp::of(&result.meta);
    if !stamp.has_validator() && !allow_without_validator {
        return Err(Error::InvalidSource {
            what: name.display().to_string(),
            reason: "its server sends neither an ETag nor a Last-Modified time, so a change of \
                     the object between the loader's requests could not be detected; expected \
                     a server that sends one, or the storage option \
                     allow_objects_without_validators set to true (the object is then pinned by \
                     its size only)"
                .to_string(),
        });
    }
    let range = result.range.clone();
    let asked = stamp.size().saturating_sub(TAIL_GUESS)..stamp.size();
    if range != asked {
        return Err(other_range(name, &asked, &range));
    }
    let mut bytes = collect(name, result, &range).await?;
    if parquet {
        bytes = parquet_footer(bytes);
    }
    let start = range.end - bytes.len() as u64;
    let tail = Fetched::new(stamp.size(), vec![(start, bytes)]);
    Ok((stamp, tail))
}

/// The last [`TAIL_GUESS`] bytes of an object (all of a smaller one) with its metadata: one
/// request for the suffix where the store takes it; else (Azure refuses suffix ranges before it
/// sends anything) the object's metadata first, then its last bytes, asked for with that
/// metadata's validators so that both answers are of one object.
async fn tail(store: &dyn ObjectStore, location: &StorePath) -> object_store::Result<GetResult> {
    let suffix = GetOptions {
        range: Some(GetRange::Suffix(TAIL_GUESS)),
        ..GetOptions::default()
    };
    match store.get_opts(location, suffix).await {
        Err(object_store::Error::NotSupported { .. }) => {
            let meta = object_store::ObjectStoreExt::head(store, location).await?;
            let start = meta.size.saturating_sub(TAIL_GUESS);
            let mut options = Stamp::of(&meta).preconditions(start..meta.size);
            if meta.size == 0 {
                // An empty object has no range to ask for: the whole of it.
                options.range = None;
            }
            store.get_opts(location, options).await
        }
        answer => answer,
    }
}

/// The footer at the end of `tail` (the last bytes of a Parquet file: the footer, its length
/// and `PAR1`), copied out of it when it is shorter; `tail` itself otherwise, and when its last
/// bytes are not a footer's (the planning reports that).
fn parquet_footer(tail: Bytes) -> Bytes {
    let Some(at) = tail.len().checked_sub(8) else {
        return tail;
    };
    let length = u32::from_le_bytes([tail[at], tail[at + 1], tail[at + 2], tail[at + 3]]);
    match usize::try_from(length)
        .ok()
        .and_then(|length| length.checked_add(8))
        .filter(|&kept| kept < tail.len())
    {
        Some(kept) => Bytes::copy_from_slice(&tail[tail.len() - kept..]),
        None => tail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parquet_tail_keeps_its_footer_only() {
        let mut tail = vec![7u8; 100];
        tail.extend_from_slice(&[1, 2, 3]);
        tail.extend_from_slice(&3u32.to_le_bytes());
        tail.extend_from_slice(b"PAR1");
        assert_eq!(&parquet_footer(Bytes::from(tail.clone()))[..], &tail[100..]);
        // A length past the tail keeps the tail, for the footer's checks to report.
        let at = tail.len() - 8;
        tail[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parquet_footer(Bytes::from(tail.clone())).len(), tail.len());
        assert_eq!(parquet_footer(Bytes::from_static(b"PAR1")).len(), 4);
    }

    /// A store that refuses suffix ranges before it sends anything, as `object_store`'s Azure
    /// client does, over an in-memory store; it counts the requests that reach the latter.
    #[derive(Debug, Default)]
    struct NoSuffixes {
        inner: object_store::memory::InMemory,
        requests: std::sync::atomic::AtomicUsize,
    }

    impl fmt::Display for NoSuffixes {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "NoSuffixes")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for NoSuffixes {
        async fn put_opts(
            &self,
            location: &StorePath,
            payload: object_store::PutPayload,
            options: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, options).await
        }

        async fn put_multipart_opts(
            &self,
            location: &StorePath,
            options: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, options).await
        }

        async fn get_opts(
            &self,
            location: &StorePath,
            options: GetOptions,
        ) -> object_store::Result<GetResult> {
            if let Some(GetRange::Suffix(_)) = options.range {
                return Err(object_store::Error::NotSupported {
                    source: "no suffix ranges here".into(),
                });
            }
            self.requests
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: futures_util::stream::BoxStream<'static, object_store::Result<StorePath>>,
        ) -> futures_util::stream::BoxStream<'static, object_store::Result<StorePath>> {
            self.inner.delete_stream(locations)
        }

        fn list(
            &self,
            prefix: Option<&StorePath>,
        ) -> futures_util::stream::BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(
            &self,
            prefix: Option<&StorePath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(
            &self,
            from: &StorePath,
            to: &StorePath,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    #[test]
    fn a_store_without_suffix_ranges_gives_the_tail_after_the_metadata() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let store = NoSuffixes::default();
        for size in [0u64, 10, TAIL_GUESS, 3 * TAIL_GUESS + 5] {
            let location = StorePath::from(format!("object-{size}"));
            let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            runtime
                .block_on(object_store::ObjectStoreExt::put(
                    &store,
                    &location,
                    bytes.clone().into(),
                ))
                .unwrap();
            let before = store.requests.load(std::sync::atomic::Ordering::Relaxed);
            let result = runtime.block_on(tail(&store, &location)).unwrap();
            assert_eq!(result.meta.size, size);
            let start = size.saturating_sub(TAIL_GUESS);
            assert_eq!(result.range, start..size);
            let got = runtime.block_on(result.bytes()).unwrap();
            assert_eq!(&got[..], &bytes[start as usize..], "size {size}");
            // The metadata, then the tail.
            let requests = store.requests.load(std::sync::atomic::Ordering::Relaxed) - before;
            assert_eq!(requests, 2, "size {size}");
        }
    }

    #[test]
    fn ranges_outside_the_object_are_refused_before_any_request() {
        let name = Path::new("s3://b/k");
        assert!(check_range(name, &(0..10), 10).is_ok());
        for range in [5..5, 0..11, (1 << 40)..(2 << 40)] {
            let error = check_range(name, &range, 10).unwrap_err();
            assert!(error.to_string().contains("s3://b/k"), "{error}");
        }
    }
}
