//! Whole objects named by URL as rows name them: the image rows whose paths are (or resolve to)
//! URLs of object storage (`s3://bucket/images/a.jpg`).
//!
//! A [`UrlReader`] belongs to one loader. It starts its runtime at its first URL (a loader whose
//! rows are local files starts none), makes one store per bucket, container or host with the
//! source's storage options (or, for a local source, the environment's), and reads the URLs of
//! a batch [`MAX_REQUESTS`](super::runtime::MAX_REQUESTS) at once. Each object is refused past
//! `max_bytes` before its body is read, and its body is gathered as the ranges of planned objects
//! are (growing with what arrives, never past the size the answer announced).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{GetOptions, ObjectStore, ObjectStoreScheme};
use tokio::sync::Semaphore;
use url::Url;

use super::client::WholeBodyLimit;
use super::object::{acquire, collect};
use super::options::StorageOptions;
use super::runtime::{MAX_REQUESTS, Remote};
use super::{MAX_URL_BYTES, display_name, is_object_url, store_error, url_start};
use crate::{Error, Result};

/// Reads whole objects by URL for one loader; see the module documentation.
pub(crate) struct UrlReader {
    options: StorageOptions,
    stop: Arc<AtomicBool>,
    /// The runtime and the stores made so far; `None` until the first URL.
    started: Mutex<Option<Started>>,
}

struct Started {
    remote: Arc<Remote>,
    stores: BTreeMap<String, Arc<dyn ObjectStore>>,
}

impl std::fmt::Debug for UrlReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlReader").finish_non_exhaustive()
    }
}

impl UrlReader {
    /// A reader with `options`, whose waits end once `stop` is set.
    pub(crate) fn new(options: StorageOptions, stop: Arc<AtomicBool>) -> Self {
        UrlReader {
            options,
            stop,
            started: Mutex::new(None),
        }
    }

    /// A reader with the options of the environment alone.
    pub(crate) fn from_environment(stop: Arc<AtomicBool>) -> Result<Self> {
        let none: [(&str, String); 0] = [];
        Ok(UrlReader::new(StorageOptions::new(none)?, stop))
    }

    /// The bytes of the object at each of `urls`, each at most `max_bytes`, in order: each URL
    /// its own result, so that a row's failure is that row's; the outer error is the loader's
    /// (its runtime could not start, or it was stopped while the reads were in flight).
    pub(crate) fn read_all(&self, urls: &[&str], max_bytes: u64) -> Result<Vec<Result<Bytes>>> {
        let mut targets = Vec::with_capacity(urls.len());
        let mut results: Vec<Option<Result<Bytes>>> = Vec::with_capacity(urls.len());
        let Some(remote) = self.targets(urls, &mut targets, &mut results)? else {
            return Ok(results.into_iter().flatten().collect());
        };
        let requests = remote.requests.clone();
        let fetched = remote.run(async move {
            let reads: Vec<_> = targets
                .into_iter()
                .map(|target| read_target(target, requests.clone(), max_bytes))
                .collect();
            let reads = futures_util::stream::iter(reads).buffer_unordered(MAX_REQUESTS);
            Ok(reads.collect::<Vec<_>>().await)
        })?;
        for (index, result) in fetched {
            results[index] = Some(result);
        }
        Ok(results
            .into_iter()
            .map(|result| result.expect("every URL was read or refused"))
            .collect())
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
                Ok((name, store, location)) => {
                    results.push(None);
                    targets.push((index, name, store, location));
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
    ) -> Result<(PathBuf, Arc<dyn ObjectStore>, StorePath)> {
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
                started.stores.insert(key, made.store.clone());
                made.store
            }
        };
        Ok((name, store, location))
    }
}

/// A URL to read: its index among the URLs asked, its name in errors, its store and location.
type Target = (usize, PathBuf, Arc<dyn ObjectStore>, StorePath);

/// Reads `target` under the loader's bound on requests in flight.
async fn read_target(
    (index, name, store, location): Target,
    requests: Arc<Semaphore>,
    max_bytes: u64,
) -> (usize, Result<Bytes>) {
    let result = match acquire(&requests).await {
        Ok(_permit) => read(&name, &*store, &location, max_bytes).await,
        Err(error) => Err(error),
    };
    (index, result)
}

/// Reads the object at `location` whole, refused past `max_bytes` before its body is read.
async fn read(
    name: &std::path::Path,
    store: &dyn ObjectStore,
    location: &StorePath,
    max_bytes: u64,
) -> Result<Bytes> {
    // The client bounds an answer without a range at 16 MiB; an image may be up to `max_bytes`.
    let mut options = GetOptions::default();
    options.extensions.insert(WholeBodyLimit(max_bytes));
    let result = store
        .get_opts(location, options)
        .await
        .map_err(|error| store_error(name, error))?;
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
        });
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
        });
    }
    collect(name, result, &range).await
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
