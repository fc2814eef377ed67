//! What a URL names in its store: one object, every object under a prefix, or the objects whose
//! keys match a glob; prefixes and globs are listed and sorted by key.
//!
//! A listing is bounded whatever the server answers: at most [`MAX_LISTED`] keys are looked at
//! and at most [`MAX_OBJECTS`] kept, each page of it at most the client's bound on an answer,
//! and glob matching is linear ([`PathPattern`]); a listing that goes on longer (a server that
//! hands out continuation tokens forever) is an error naming the URL.

use std::sync::atomic::{AtomicBool, Ordering};

use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreScheme};
use url::Url;

use super::redact::redacted;
use crate::file::{extension_of, is_hidden, is_listed};
use crate::path_pattern::{PathPattern, is_pattern};
use crate::{Error, Result};

/// The most keys one listing looks at.
pub(super) const MAX_LISTED: usize = 10_000_000;

/// The most objects one URL may name.
pub(super) const MAX_OBJECTS: usize = 1_000_000;

/// What one URL names.
#[derive(Debug)]
pub(super) enum Target {
    /// One object.
    Object(StorePath),
    /// Every object of a known format under a prefix, at any depth.
    Prefix(StorePath),
    /// The objects under `prefix` whose keys (relative to it) match `pattern`.
    Glob {
        prefix: StorePath,
        pattern: PathPattern,
    },
}

impl Target {
    /// What `url` names: a glob when a segment of its path holds `*`, `?` or `[`; a prefix
    /// when it ends with `/` or its last segment has no known extension; one object otherwise.
    pub(super) fn of(url: &Url) -> Result<Self> {
        let (_, path) = ObjectStoreScheme::parse(url).map_err(|error| Error::InvalidSource {
            what: redacted(url),
            reason: format!("it is not a URL of object storage: {error}"),
        })?;
        let segments: Vec<_> = path.parts().collect();
        if let Some(first) = segments.iter().position(|part| is_pattern(part.as_ref())) {
            let pattern: Vec<&str> = segments[first..].iter().map(|part| part.as_ref()).collect();
            return Ok(Target::Glob {
                prefix: StorePath::from_iter(segments[..first].iter().cloned()),
                pattern: PathPattern::parse(&pattern),
            });
        }
        let named_object = !url.path().ends_with('/')
            && segments
                .last()
                .is_some_and(|last| extension_of(last.as_ref()).is_some());
        Ok(if named_object {
            Target::Object(path)
        } else {
            Target::Prefix(path)
        })
    }

    /// The objects named, sorted by key; listings leave out names that start with `_` or `.`
    /// and names of no known format. A listing ends early, in an error, once `stop` is set.
    pub(super) async fn resolve(
        self,
        url: &Url,
        store: &dyn ObjectStore,
        stop: &AtomicBool,
    ) -> Result<Vec<StorePath>> {
        let (prefix, pattern) = match self {
            Target::Object(location) => return Ok(vec![location]),
            Target::Prefix(prefix) => (prefix, None),
            Target::Glob { prefix, pattern } => (prefix, Some(pattern)),
        };
        let name = super::display_name(url);
        let too_long = |what: String| Error::Io {
            path: name.clone(),
            source: std::io::Error::other(what),
        };
        let list_prefix = (!prefix.as_ref().is_empty()).then_some(&prefix);
        let mut stream = store.list(list_prefix);
        let mut found = Vec::new();
        let mut listed = 0usize;
        use futures_util::StreamExt;
        while let Some(meta) = stream.next().await {
            if stop.load(Ordering::Relaxed) {
                return Err(super::runtime::stopped(&name));
            }
            listed += 1;
            if listed > MAX_LISTED {
                return Err(too_long(format!(
                    "its listing goes on past {MAX_LISTED} keys; expected fewer (a narrower \
                     prefix or glob)"
                )));
            }
            let meta = meta.map_err(|error| super::store_error(&name, error))?;
            let location = meta.location;
            let Some(relative) = location.prefix_match(&prefix) else {
                continue;
            };
            let relative: Vec<String> = relative.map(|part| part.as_ref().to_string()).collect();
            let Some(file_name) = relative.last() else {
                continue;
            };
            if !is_listed(file_name) {
                continue;
            }
            let hidden = relative[..relative.len() - 1]
                .iter()
                .any(|part| is_hidden(part));
            if hidden {
                continue;
            }
            if let Some(pattern) = &pattern {
                let parts: Vec<&str> = relative.iter().map(String::as_str).collect();
                if !pattern.matches(&parts) {
                    continue;
                }
            }
            if found.len() == MAX_OBJECTS {
                return Err(too_long(format!(
                    "it names more than {MAX_OBJECTS} objects; expected fewer (a narrower prefix \
                     or glob)"
                )));
            }
            found.push(location);
        }
        if found.is_empty() {
            return Err(Error::Io {
                path: name,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no object of a known format (.parquet, .pq, .arrow, .feather, .ipc, \
                     .arrows) matches it",
                ),
            });
        }
        found.sort_by(|a, b| a.as_ref().cmp(b.as_ref()));
        found.dedup();
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_names_an_object_a_prefix_or_a_glob() {
        let target = |url: &str| Target::of(&Url::parse(url).unwrap()).unwrap();
        assert!(
            matches!(target("s3://b/train/a.parquet"), Target::Object(p) if p.as_ref() == "train/a.parquet")
        );
        assert!(matches!(target("s3://b/train/"), Target::Prefix(p) if p.as_ref() == "train"));
        assert!(matches!(target("s3://b/train"), Target::Prefix(p) if p.as_ref() == "train"));
        assert!(
            matches!(target("s3://b/train/*.parquet"), Target::Glob { prefix, pattern }
            if prefix.as_ref() == "train" && pattern == PathPattern::parse(&["*.parquet"]))
        );
        assert!(
            matches!(target("s3://b/a%20b/x.parquet"), Target::Object(p) if p.as_ref() == "a b/x.parquet")
        );
    }

    #[test]
    fn a_question_mark_is_a_glob_wildcard_and_an_http_query_or_a_fragment_is_refused() {
        // As a source names it: `ObjectSource::new` puts what the parser read as a query back.
        let source = |url: &str| crate::remote::ObjectSource::new([url], [("a", "b"); 0]);
        let urls = |url: &str| source(url).unwrap().urls;
        let target = |url: &str| Target::of(&urls(url)[0]).unwrap();
        assert!(
            matches!(target("s3://b/train/part-?.parquet"), Target::Glob { prefix, pattern }
            if prefix.as_ref() == "train" && pattern == PathPattern::parse(&["part-?.parquet"]))
        );
        assert!(
            matches!(target("gs://b/t/a?/*.arrow"), Target::Glob { prefix, pattern }
            if prefix.as_ref() == "t" && pattern == PathPattern::parse(&["a?", "*.arrow"]))
        );
        for refused in [
            "https://host/data/a.parquet?X-Amz-Signature=abc",
            "http://host/a.parquet?v=2",
            "s3://b/a.parquet#part",
        ] {
            let error = source(refused).unwrap_err();
            assert!(
                matches!(&error, Error::InvalidSource { reason, .. }
                    if reason.contains("query string") || reason.contains("fragment")),
                "{refused}: {error}"
            );
            assert!(!error.to_string().contains("abc"), "{error}");
        }
    }
}
