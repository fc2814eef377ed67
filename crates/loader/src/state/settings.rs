//! The settings a [`LoaderState`](super::LoaderState) records: what fixes the order and the
//! batches of a run ([`Settings`]), with the identity of its source ([`SourceIdentity`]), and
//! their comparison with a loader's, which names the first setting that differs and both values.
//!
//! Every setting is one field of [`Settings`], compared through its serde form: a new loader
//! option that changes which rows a batch holds adds one field here and one line where the
//! settings are made from a [`BatchSpec`](crate::BatchSpec), and is compared and reported with
//! no further code. The source is compared by its own rules ([`SourceIdentity::difference`]):
//! names are informative, sizes, modification times, ETags and digests decide.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The settings of a run that fix its order and its batches, as a [`LoaderState`] saves them
/// (see [`BatchSpec`](crate::BatchSpec) for each option).
///
/// Options that change only how the same rows are laid out (`allow_nulls`, `null_to_nan`,
/// `row_major`, `writable`, a sequence's `pad_value`, `padding_side` and `truncation_side`) and
/// those of the machinery (`prefetch`, `decode_threads`) are not recorded and may change between
/// runs; the shard and the epoch are recorded beside the settings, in the state.
///
/// [`LoaderState`]: super::LoaderState
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// What the rows come from.
    pub source: SourceIdentity,
    /// Rows per batch.
    pub batch_size: u64,
    /// Whether the last short batch is dropped.
    pub drop_last: bool,
    /// The single columns; `None` when every column not in a group is loaded (`Some` of an
    /// empty list loads none).
    pub columns: Option<Vec<String>>,
    /// The column groups: each group's name and its columns, in order.
    pub groups: BTreeMap<String, Vec<String>>,
    /// The columns whose validity is also given.
    pub masks: Vec<String>,
    /// The sequence columns, by column.
    pub sequences: BTreeMap<String, SequenceSettings>,
    /// Whether units and rows are shuffled.
    pub shuffle: bool,
    /// The seed of the shuffle.
    pub seed: u64,
    /// The rows of a shuffle window.
    pub buffer_size: u64,
    /// The token budget of a batch, when batches are cut by tokens.
    pub max_tokens: Option<u64>,
    /// Whether rows are sorted by length within windows.
    pub bucket_by_length: bool,
    /// The image columns, by column: each spec in its serde form (its random crops and flips,
    /// and with `on_error` `"skip"` which rows a batch holds, depend on every field). Absent
    /// from the saved form when there are none, so that a state without images reads as before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, Value>,
}

/// What a sequence column's settings change in the batches: the tokens a row counts for (its
/// layout, its cut and its padded length), on which token budgets and length buckets cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceSettings {
    /// The layout: `"pad"`, `"pack"` or `"jagged"`, as
    /// [`SequenceMode::as_str`](crate::SequenceMode::as_str) spells it.
    pub mode: String,
    /// Rows longer than this are cut to it.
    pub max_length: Option<u64>,
    /// The padded length is a multiple of this.
    pub pad_to_multiple_of: Option<u64>,
    /// The tokenizer of a text column: the digest of its JSON
    /// ([`SequenceTokenizer::digest`](crate::SequenceTokenizer::digest)); absent for a list
    /// column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Whether the tokenizer adds its special tokens; absent for a list column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_special_tokens: Option<bool>,
    /// The concat packing's token before every document, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bos_token_id: Option<i64>,
    /// The concat packing's token after every document, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eos_token_id: Option<i64>,
    /// Whether the concat packing splits documents across rows; absent for another mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_documents: Option<bool>,
}

/// The kinds of sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Parquet files (local or objects).
    ParquetFiles,
    /// Arrow IPC files (local or objects).
    IpcFiles,
    /// Arrow IPC streams (local or objects).
    IpcStreams,
    /// A reader of record batches.
    Reader,
}

/// What a run's rows came from: each file with what identifies its bytes, and for streams and
/// readers, whose bytes cannot be read twice to digest, the digest of their schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceIdentity {
    /// The kind of source.
    pub kind: SourceKind,
    /// The files or objects, in the order given (before any shuffle); empty for a reader.
    pub files: Vec<FileIdentity>,
    /// The digest of the schema of a stream or reader (of the first stream); `None` for files,
    /// whose footers' digests hold their schemas.
    pub schema: Option<String>,
}

/// One file or object of a source: its name (informative), and what decides whether it holds
/// the same bytes: its size, its modification time (local files) or ETag and last-modified time
/// (objects), and the digest of its footer (Parquet and IPC files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileIdentity {
    /// The file's name without its folder, or the object's URL without user name and password.
    pub name: String,
    /// The size in bytes.
    pub size: u64,
    /// A local file's modification time, in nanoseconds since the Unix epoch, when the platform
    /// tells it.
    pub modified_ns: Option<i64>,
    /// An object's ETag, when the store gives one.
    pub e_tag: Option<String>,
    /// An object's last-modified time, in milliseconds since the Unix epoch.
    pub last_modified_ms: Option<i64>,
    /// The digest of a Parquet file's footer, or of an IPC file's footer (its schema and the
    /// table of its blocks); `None` for a stream.
    pub digest: Option<String>,
}

/// A setting that differs between a saved state and a loader (or two states): where it is
/// (`seed`, `sequences["tok"].mode`, or a file's name and field) and both values, as a message
/// shows them: `seed: saved 1, given 0`, `train.parquet: size saved 1000, given 990`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    pub(crate) at: String,
    /// The field of a file, after its name in `at`.
    pub(crate) field: Option<&'static str>,
    pub(crate) saved: String,
    pub(crate) given: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field {
            Some(field) => write!(
                f,
                "{}: {field} saved {}, given {}",
                self.at, self.saved, self.given
            )?,
            None => write!(f, "{}: saved {}, given {}", self.at, self.saved, self.given)?,
        }
        if self.field == Some("modified_ns") {
            // The size and footer agree: the file was written again, or copied without its
            // time (a plain `cp`), since the state was saved.
            f.write_str(
                " (the file was modified since the state was saved, or copied without its \
                 modification time: a copy made with cp -p, rsync -t or touch -r keeps it)",
            )?;
        }
        Ok(())
    }
}

impl Settings {
    /// The first setting in which `given` differs from these (saved) settings: the source
    /// first, then `shuffle`, then the other fields in the order of their names.
    pub(crate) fn difference(&self, given: &Settings) -> Option<Difference> {
        if let Some(difference) = self.source.difference(&given.source) {
            return Some(difference);
        }
        let (Ok(Value::Object(mut saved)), Ok(Value::Object(mut now))) =
            (serde_json::to_value(self), serde_json::to_value(given))
        else {
            // The settings are plain data, which serde_json always writes as an object.
            return (self != given).then(|| Difference {
                at: "settings".to_string(),
                field: None,
                saved: "unreadable".to_string(),
                given: "unreadable".to_string(),
            });
        };
        saved.remove("source");
        now.remove("source");
        first_difference(String::new(), &Value::Object(saved), &Value::Object(now), 0)
    }
}

/// The first difference between two serde values, `at` the path to them: the settings are a
/// struct (fields named bare at depth 0) whose nested objects are maps keyed by column or group
/// (`["key"]`, odd depths) of structs (`.field`, even depths).
fn first_difference(at: String, saved: &Value, given: &Value, depth: usize) -> Option<Difference> {
    if saved == given {
        return None;
    }
    if let (Value::Object(saved), Value::Object(given)) = (saved, given) {
        let mut keys: Vec<&String> = saved.keys().chain(given.keys()).collect();
        // A switch is named before the settings it governs: a state saved shuffled and resumed
        // unshuffled differs in `shuffle`, whatever its seed.
        keys.sort_by_key(|key| (depth != 0 || key.as_str() != "shuffle", *key));
        keys.dedup();
        for key in keys {
            let inner = match depth {
                0 => key.clone(),
                d if d % 2 == 1 => format!("{at}[{}]", Value::String(key.clone())),
                _ => format!("{at}.{key}"),
            };
            match (saved.get(key), given.get(key)) {
                (Some(a), Some(b)) => {
                    if let Some(difference) = first_difference(inner, a, b, depth + 1) {
                        return Some(difference);
                    }
                }
                (a, b) => {
                    return Some(Difference {
                        at: inner,
                        field: None,
                        saved: a.map_or("absent".to_string(), Value::to_string),
                        given: b.map_or("absent".to_string(), Value::to_string),
                    });
                }
            }
        }
        return None;
    }
    Some(Difference {
        at,
        field: None,
        saved: saved.to_string(),
        given: given.to_string(),
    })
}

impl SourceIdentity {
    /// The first way in which the source `given` is not the saved one: its kind, its number of
    /// files, and for each file in order its size, digest and modification time (local files,
    /// when both tell it) or ETag (objects, when both have one; else the last-modified time);
    /// then the schema of a stream or reader. A file's name and folder do not decide: a file
    /// moved with its modification time kept is the same file.
    pub(crate) fn difference(&self, given: &SourceIdentity) -> Option<Difference> {
        let differ = |at: &str, saved: String, given: String| {
            Some(Difference {
                at: at.to_string(),
                field: None,
                saved,
                given,
            })
        };
        if self.kind != given.kind {
            return differ(
                "source.kind",
                json(&self.kind).to_string(),
                json(&given.kind).to_string(),
            );
        }
        if self.files.len() != given.files.len() {
            return differ(
                "source.files",
                format!("{} files", self.files.len()),
                format!("{} files", given.files.len()),
            );
        }
        for (saved, now) in self.files.iter().zip(&given.files) {
            if let Some((field, a, b)) = saved.difference(now) {
                let at = if saved.name == now.name {
                    saved.name.clone()
                } else {
                    format!("{} (given {})", saved.name, now.name)
                };
                return Some(Difference {
                    at,
                    field: Some(field),
                    saved: a,
                    given: b,
                });
            }
        }
        // A schema saved and none given, or the reverse, differs too: a state whose schema was
        // removed would resume over any stream.
        match (&self.schema, &given.schema) {
            (a, b) if a != b => differ(
                // The digest covers the metadata, where a Hugging Face dataset's fingerprint is.
                "source.schema (the stream's schema and metadata: another dataset, or one \
                 shuffled, selected, filtered or mapped otherwise)",
                json(a).to_string(),
                json(b).to_string(),
            ),
            _ => None,
        }
    }
}

impl FileIdentity {
    /// The first field that decides and differs: `(field, saved, given)`.
    fn difference(&self, given: &FileIdentity) -> Option<(&'static str, String, String)> {
        if self.size != given.size {
            return Some(("size", self.size.to_string(), given.size.to_string()));
        }
        // A footer's digest is there for both or for neither (the same kind of file), and a
        // local file's time for both local files: one removed from the state is a difference,
        // not a check skipped. (A local file and an object, of the same size and footer, are
        // the same data: an object has no such time.)
        if self.digest != given.digest {
            return Some((
                "digest",
                json(&self.digest).to_string(),
                json(&given.digest).to_string(),
            ));
        }
        // Both times are compared wherever both are there; one alone differs unless the other
        // side is an object.
        let object = |file: &FileIdentity| file.e_tag.is_some() || file.last_modified_ms.is_some();
        let differs = match (self.modified_ns, given.modified_ns) {
            (Some(a), Some(b)) => a != b,
            (Some(_), None) => !object(given),
            (None, Some(_)) => !object(self),
            (None, None) => false,
        };
        if differs {
            return Some((
                "modified_ns",
                json(&self.modified_ns).to_string(),
                json(&given.modified_ns).to_string(),
            ));
        }
        match (&self.e_tag, &given.e_tag) {
            (Some(a), Some(b)) if a != b => {
                return Some(("e_tag", json(a).to_string(), json(b).to_string()));
            }
            (None, None) => {
                if let (Some(a), Some(b)) = (self.last_modified_ms, given.last_modified_ms)
                    && a != b
                {
                    return Some(("last_modified_ms", a.to_string(), b.to_string()));
                }
            }
            _ => {}
        }
        None
    }
}

/// A value as JSON, for messages (strings quoted).
fn json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}
