//! What a URL names in its store: one object, every object under a prefix, or the objects whose
//! keys match a glob; prefixes and globs are listed and sorted by key.

use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreScheme};
use url::Url;

use crate::file::format_of;
use crate::{Error, Result};

/// What one URL names.
#[derive(Debug)]
pub(super) enum Target {
    /// One object.
    Object(StorePath),
    /// Every object of a known format under a prefix, at any depth.
    Prefix(StorePath),
    /// The objects under `prefix` whose keys match `pattern` (segments of `*`, `?`, `[...]`
    /// within a segment, `**` for any number of segments).
    Glob {
        prefix: StorePath,
        pattern: Vec<String>,
    },
}

/// Whether `segment` holds a glob's special characters.
fn is_pattern(segment: &str) -> bool {
    segment.contains(['*', '?', '['])
}

impl Target {
    /// What `url` names: a glob when a segment of its path holds `*`, `?` or `[`; a prefix
    /// when it ends with `/` or its last segment has no known extension; one object otherwise.
    pub(super) fn of(url: &Url) -> Result<Self> {
        let (_, path) = ObjectStoreScheme::parse(url).map_err(|error| Error::InvalidSource {
            what: url.to_string(),
            reason: format!("it is not a URL of object storage: {error}"),
        })?;
        let segments: Vec<_> = path.parts().collect();
        if let Some(first) = segments.iter().position(|part| is_pattern(part.as_ref())) {
            return Ok(Target::Glob {
                prefix: StorePath::from_iter(segments[..first].iter().cloned()),
                pattern: segments[first..]
                    .iter()
                    .map(|part| part.as_ref().to_string())
                    .collect(),
            });
        }
        let named_object = !url.path().ends_with('/')
            && segments
                .last()
                .is_some_and(|last| format_of(last.as_ref()).is_some());
        Ok(if named_object {
            Target::Object(path)
        } else {
            Target::Prefix(path)
        })
    }

    /// The objects named, sorted by key; listings leave out names that start with `_` or `.`
    /// and names of no known format.
    pub(super) async fn resolve(
        self,
        url: &Url,
        store: &dyn ObjectStore,
    ) -> Result<Vec<StorePath>> {
        let (prefix, pattern) = match self {
            Target::Object(location) => return Ok(vec![location]),
            Target::Prefix(prefix) => (prefix, None),
            Target::Glob { prefix, pattern } => (prefix, Some(pattern)),
        };
        let name = super::display_name(url);
        let list_prefix = (!prefix.as_ref().is_empty()).then_some(&prefix);
        let mut stream = store.list(list_prefix);
        let mut found = Vec::new();
        use futures_util::StreamExt;
        while let Some(meta) = stream.next().await {
            let meta = meta.map_err(|error| super::store_error(&name, error))?;
            let location = meta.location;
            let Some(relative) = location.prefix_match(&prefix) else {
                continue;
            };
            let relative: Vec<String> = relative.map(|part| part.as_ref().to_string()).collect();
            let Some(file_name) = relative.last() else {
                continue;
            };
            if file_name.starts_with(['_', '.']) || format_of(file_name).is_none() {
                continue;
            }
            let hidden = relative[..relative.len() - 1]
                .iter()
                .any(|part| part.starts_with(['_', '.']));
            if hidden {
                continue;
            }
            if let Some(pattern) = &pattern {
                let parts: Vec<&str> = relative.iter().map(String::as_str).collect();
                let pattern: Vec<&str> = pattern.iter().map(String::as_str).collect();
                if !matches_path(&pattern, &parts) {
                    continue;
                }
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

/// Whether the key segments `parts` match the pattern segments `pattern`, where `**` matches
/// any number of segments.
fn matches_path(pattern: &[&str], parts: &[&str]) -> bool {
    match pattern.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|skip| matches_path(rest, &parts[skip..])),
        Some((first, rest)) => parts.split_first().is_some_and(|(part, others)| {
            matches_segment(first.as_bytes(), part.as_bytes()) && matches_path(rest, others)
        }),
    }
}

/// Whether `name` matches the segment pattern `pattern`: `*` any run of characters, `?` one,
/// `[abc]`, `[a-z]` and `[!abc]` one of (or none of) a set.
fn matches_segment(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| matches_segment(rest, &name[skip..])),
        Some((b'?', rest)) => !name.is_empty() && matches_segment(rest, &name[1..]),
        Some((b'[', rest)) => {
            let Some(close) = rest.iter().skip(1).position(|&c| c == b']').map(|p| p + 1) else {
                return name.first() == Some(&b'[') && matches_segment(rest, &name[1..]);
            };
            let Some((&c, others)) = name.split_first() else {
                return false;
            };
            let (negate, set) = match rest[..close].split_first() {
                Some((b'!' | b'^', set)) => (true, set),
                _ => (false, &rest[..close]),
            };
            let mut found = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == b'-' {
                    found |= (set[i]..=set[i + 2]).contains(&c);
                    i += 3;
                } else {
                    found |= set[i] == c;
                    i += 1;
                }
            }
            found != negate && matches_segment(&rest[close + 1..], others)
        }
        Some((&p, rest)) => name.first() == Some(&p) && matches_segment(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_segments_and_any_depth() {
        let matches = |pattern: &str, key: &str| {
            let pattern: Vec<&str> = pattern.split('/').collect();
            let parts: Vec<&str> = key.split('/').collect();
            matches_path(&pattern, &parts)
        };
        assert!(matches("*.parquet", "part-0.parquet"));
        assert!(!matches("*.parquet", "a/part-0.parquet"));
        assert!(matches("**/*.parquet", "a/b/part-0.parquet"));
        assert!(matches("**/*.parquet", "part-0.parquet"));
        assert!(matches("part-?.parquet", "part-7.parquet"));
        assert!(!matches("part-?.parquet", "part-17.parquet"));
        assert!(matches("part-[0-3].parquet", "part-2.parquet"));
        assert!(!matches("part-[!0-3].parquet", "part-2.parquet"));
        assert!(matches("day=*/x.parquet", "day=1/x.parquet"));
    }

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
            if prefix.as_ref() == "train" && pattern == ["*.parquet"])
        );
        assert!(
            matches!(target("s3://b/a%20b/x.parquet"), Target::Object(p) if p.as_ref() == "a b/x.parquet")
        );
    }
}
