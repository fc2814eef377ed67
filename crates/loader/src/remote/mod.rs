//! Sources in object storage (`s3://`, `gs://`, `az://`, `abfs://`, `http(s)://`), read through
//! arrow-rs's `object_store` on an async runtime that lives on the loader's own threads.
//!
//! Nothing async leaves this module: every operation is a future spawned on the loader's runtime
//! and waited for through a channel, so that the planning thread, the decoding threads and the
//! loader thread stay synchronous (and a caller inside another async runtime does not nest
//! runtimes).
//!
//! A server is not trusted: its answers are bounded by what was asked (`client.rs`,
//! `object.rs`), its redirects kept to the host asked (`client.rs`), its listings bounded
//! (`glob.rs`), and the URLs it is reached by never printed with their credentials
//! (`redact.rs`).
//!
//! | item | what it is |
//! |---|---|
//! | [`ObjectSource`] | the URLs and storage options a caller gives, checked when it is made |
//! | [`StopHandle`] | stops the planning of an [`ObjectSource`] (its listings and first requests) |
//! | [`Remote`] | one loader's runtime, bound on requests in flight, and stop flag |
//! | [`RemoteObject`] | an object pinned by size, ETag and last-modified time when it is planned |
//! | [`Fetched`] | byte ranges of an object, read by the Parquet and IPC decoders as a file |
//! | [`RangeCache`](cache::RangeCache) | fetched ranges kept on local disk (`cache_dir`) |
//! | [`UrlReader`] | whole objects by URL, as image rows name them, for one loader |
//! | `kept::Kept` | the record of an object read whole by URL, kept in the cache with its bytes |

mod cache;
mod client;
mod credentials;
mod fetched;
mod gather;
mod glob;
#[cfg(feature = "images")]
mod kept;
mod object;
mod options;
mod redact;
mod runtime;
#[cfg(feature = "images")]
mod urls;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::{StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path as StorePath;
use url::Url;

pub(crate) use cache::CacheSettings;
pub(crate) use fetched::{Fetched, coalesce};
pub(crate) use object::RemoteObject;
pub(crate) use redact::redacted_text;
pub(crate) use runtime::{Pending, Remote};
#[cfg(feature = "images")]
pub(crate) use urls::UrlReader;

use crate::file::{Extension, Format, arrow_format_of, arrow_format_of_tail, extension_of};
use crate::{Error, Result};

/// The longest URL read (8 KiB, what common servers take in a request line; `object_store`'s
/// HTTP stack panics on much longer ones).
pub(crate) const MAX_URL_BYTES: usize = 8 << 10;

/// The first 200 bytes of a long URL (cut at a character), for its message.
pub(crate) fn url_start(text: &str) -> &str {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Objects opened (their tails fetched) at once when a source is planned.
const OPEN_CONCURRENCY: usize = 16;

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
/// `region`, `timeout`, `allow_http`, `skip_signature`, ...; case-insensitive), plus
/// `max_retries`, `retry_timeout` and `retry_backoff` (durations such as `"30s"`) for the
/// retries of transient errors, `allow_redirects_to_other_hosts` (follow a redirect to another
/// scheme, host or port, without credentials; off by default) and
/// `allow_objects_without_validators` (read an object whose server sends neither an ETag nor a
/// last-modified time, pinned by its size only; off by default).
///
/// The user name and password of an `http(s)://` URL (`https://user:password@host/a.parquet`)
/// are sent as HTTP basic auth to that URL's host only; other URLs, and URLs in options, must
/// not carry any. No message, `Debug` or object name shows them.
#[derive(Clone)]
pub struct ObjectSource {
    pub(crate) urls: Vec<Url>,
    pub(crate) options: options::StorageOptions,
    /// Set by a [`StopHandle`]: the planning's waits end at once.
    stop: Arc<AtomicBool>,
}

impl fmt::Debug for ObjectSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(redact::redacted).collect();
        // The options may hold secrets: only their keys are shown.
        f.debug_struct("ObjectSource")
            .field("urls", &urls)
            .field("options", &self.options.keys())
            .finish()
    }
}

/// Stops the planning of an [`ObjectSource`] from another thread: its listings and first
/// requests end at once in an [`Error::Io`] of kind [`Interrupted`](io::ErrorKind::Interrupted)
/// (the Python bindings stop it so on Ctrl-C).
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Stops the planning, or the loader once it is planned.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
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
                if text.len() > MAX_URL_BYTES {
                    let start = url_start(text);
                    return Err(Error::InvalidSource {
                        what: format!("{:?}", redact::redacted_text(start)),
                        reason: format!(
                            "the URL is {} bytes long; expected at most {MAX_URL_BYTES}",
                            text.len()
                        ),
                    });
                }
                let what = format!("{:?}", redact::redacted_text(text));
                if !is_object_url(text) {
                    return Err(Error::InvalidSource {
                        what,
                        reason: "it is not a URL of object storage; expected s3://, gs://, \
                                 az://, abfs://, abfss://, http:// or https://"
                            .to_string(),
                    });
                }
                let url = Url::parse(text).map_err(|error| Error::InvalidSource {
                    what,
                    reason: format!("it is not a valid URL: {error}"),
                })?;
                glob_query_into_path(url).map_err(|reason| {
                    // Shown without its query and fragment: a pre-signed URL's query holds its
                    // signature.
                    let shown = redact::redacted_text(text);
                    let cut = shown.find(['?', '#']).unwrap_or(shown.len());
                    Error::InvalidSource {
                        what: format!("{:?}", format!("{}...", &shown[..cut])),
                        reason,
                    }
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let options = options::StorageOptions::new(options)?;
        for url in &urls {
            options.check_for(url)?;
        }
        Ok(ObjectSource {
            urls,
            options,
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A handle that stops this source's planning (and the loader made from it) from another
    /// thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }
}

/// `url` with what a URL parser reads as its query put back into its path, where a URL of a
/// bucket or container has it: `s3://bucket/part-?.parquet` is a glob whose `?` matches one
/// character (the parser would have read `.parquet` as a query, which object storage never
/// receives, and listed the prefix `part-`). An `http(s)://` URL's query would not be sent
/// either (the object is named by its path alone, so a pre-signed URL's signature would be
/// lost), and no URL's fragment would: both are refused, saying why.
fn glob_query_into_path(mut url: Url) -> std::result::Result<Url, String> {
    if url.fragment().is_some() {
        return Err(
            "it has a fragment (after `#`), which object storage does not take (an \
                    object is named by its path alone); expected the object's URL"
                .to_string(),
        );
    }
    let Some(query) = url.query().map(str::to_string) else {
        return Ok(url);
    };
    if matches!(url.scheme(), "http" | "https") {
        return Err(
            "it has a query string (after `?`), which the loader does not send (an \
                    object is named by its path alone, so a pre-signed URL cannot be read); \
                    expected the object's URL"
                .to_string(),
        );
    }
    let path = format!("{}?{query}", url.path());
    url.set_query(None);
    url.set_path(&path);
    Ok(url)
}

/// The name of an object in messages and errors: its URL without its userinfo, as a path (the
/// loader's errors name files by path).
fn display_name(url: &Url) -> PathBuf {
    PathBuf::from(redact::redacted(url))
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
                change: "its ETag or last-modified time no longer matches".to_string(),
            };
        }
        // An answer refused as not of the object asked for (a partial one, a resume without a
        // strong ETag): the object's answer, not the network failing.
        _ if client::is_refused(&error) => io::ErrorKind::InvalidData,
        _ => io::ErrorKind::Other,
    };
    // A server (or a proxy's error page) may echo the request's headers in its body, which
    // `object_store` quotes: its authorization values are masked, in the words of every level
    // of the error (a timeout is said only by its innermost cause).
    let words = arrow_dlpack::Report::new(&error).to_string();
    Error::Io {
        path: name.to_path_buf(),
        source: io::Error::new(kind, redact::masked_authorization(&words)),
    }
}

/// The objects of a source, opened: each with the last bytes of its object (at least
/// 64 KiB of them, or all), in the order the loader reads them.
pub(crate) struct Opened {
    pub(crate) format: Format,
    /// The flag that ends the waits for fetches when the loader stops.
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) objects: Vec<(RemoteObject, Fetched)>,
}

/// The source in words for errors that are not about one object: its first URL, and how many
/// more there are.
fn label_of(urls: &[Url]) -> PathBuf {
    let first = urls.first().map(redact::redacted).unwrap_or_default();
    match urls.len() {
        0 | 1 => PathBuf::from(first),
        more => PathBuf::from(format!("{first} (and {} more URLs)", more - 1)),
    }
}

/// Checks the credentials of stores that would ask the instance metadata service, lists the
/// prefixes and globs of `source`, and opens every object: its metadata and its tail in one
/// request each, [`OPEN_CONCURRENCY`] at once. The source's [`StopHandle`] ends it. With
/// `cache`, the objects' ranges are read from and kept in that cache on local disk.
pub(crate) fn open(source: ObjectSource, cache: Option<&CacheSettings>) -> Result<Opened> {
    let cache = cache.map(cache::RangeCache::open_shared).transpose()?;
    let remote = Remote::start(source.stop.clone(), label_of(&source.urls))?;
    // One store per bucket, container or host, made from the first URL that names it.
    let mut stores: BTreeMap<String, Arc<dyn ObjectStore>> = BTreeMap::new();
    let mut checks = Vec::new();
    let mut targets: Vec<(Url, Arc<dyn ObjectStore>, glob::Target)> = Vec::new();
    for url in &source.urls {
        let key = url[..url::Position::BeforePath].to_string();
        let store = match stores.get(&key) {
            Some(store) => store.clone(),
            None => {
                let made = source.options.store_for(url)?;
                if let Some(credentials) = made.credentials {
                    checks.push((display_name(url), credentials));
                }
                stores.insert(key, made.store.clone());
                made.store
            }
        };
        targets.push((url.clone(), store, glob::Target::of(url)?));
    }
    remote.run(async move {
        for (name, credentials) in checks {
            credentials.check(&name).await?;
        }
        Ok(())
    })?;
    let stop = source.stop.clone();
    let listed: Vec<(Url, Arc<dyn ObjectStore>, StorePath)> = remote.run(async move {
        let mut all = Vec::new();
        for (url, store, target) in targets {
            for location in target.resolve(&url, store.as_ref(), &stop).await? {
                all.push((url.clone(), store.clone(), location));
            }
        }
        Ok(all)
    })?;
    let mut format = None;
    for (url, _, location) in &listed {
        let name = display_name(&object_url(url, location));
        let Some(kind) = extension_of(location.as_ref()) else {
            return Err(Error::UnknownFormat {
                path: name,
                read: false,
            });
        };
        match format {
            None => format = Some((kind, name)),
            Some((first, ref first_name)) if first != kind => {
                return Err(Error::InvalidSpec {
                    reason: format!(
                        "{} and {} are of different formats (parquet and arrow); expected \
                         objects of one format",
                        first_name.display(),
                        name.display()
                    ),
                });
            }
            Some(_) => {}
        }
    }
    let Some((extension, _)) = format else {
        let urls: Vec<String> = source.urls.iter().map(redact::redacted).collect();
        return Err(Error::InvalidSpec {
            reason: format!(
                "no objects of a known format (.parquet, .arrow, .arrows, ...) found at {urls:?}"
            ),
        });
    };
    let allow_without_validator = source.options.objects_without_validators;
    let parquet = extension == Extension::Parquet;
    let requests = remote.requests.clone();
    let opening: Vec<_> = listed
        .into_iter()
        .map(|(url, store, location)| {
            let name = display_name(&object_url(&url, &location));
            let requests = requests.clone();
            Box::pin(async move {
                let (stamp, tail) = object::open_one(
                    &name,
                    store.as_ref(),
                    &location,
                    &requests,
                    allow_without_validator,
                    parquet,
                )
                .await?;
                Ok::<_, Error>((name, store, location, stamp, tail))
            })
        })
        .collect();
    let opened = remote.run(async move {
        futures_util::stream::iter(opening)
            .buffered(OPEN_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await
    })?;
    let objects: Vec<(RemoteObject, Fetched)> = opened
        .into_iter()
        .map(|(name, store, location, stamp, tail)| {
            (
                RemoteObject {
                    name,
                    store,
                    location,
                    stamp,
                    remote: remote.clone(),
                    cache: cache.clone(),
                },
                tail,
            )
        })
        .collect();
    let format = match extension {
        Extension::Parquet => Format::Parquet,
        Extension::Arrow => arrow_format(&objects)?,
    };
    Ok(Opened {
        format,
        stop: remote.stop.clone(),
        objects,
    })
}

/// The format of Arrow objects (of extension [`Extension::Arrow`]), one for all: an IPC file
/// starts and ends with `ARROW1` and a stream does neither, so the tail already fetched tells
/// (the first bytes where the tail is the whole object). Files and streams mixed are refused.
fn arrow_format(objects: &[(RemoteObject, Fetched)]) -> Result<Format> {
    let mut first: Option<(Format, &Path)> = None;
    for (object, tail) in objects {
        let name = object.name();
        let size = object.size();
        let format = match tail.slice(0, size.min(8)) {
            Some(head) => arrow_format_of(name, &head)?,
            None => {
                let last = tail.slice(size.saturating_sub(8), size.min(8));
                arrow_format_of_tail(name, last.as_deref().unwrap_or_default())?
            }
        };
        match first {
            None => first = Some((format, name)),
            Some((expected, first_name)) if expected != format => {
                return Err(Error::InvalidSpec {
                    reason: format!(
                        "{} is {} and {} is {}; expected objects of one format",
                        first_name.display(),
                        expected.describe(),
                        name.display(),
                        format.describe()
                    ),
                });
            }
            Some(_) => {}
        }
    }
    Ok(first.map_or(Format::IpcFile, |(format, _)| format))
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
