//! A folder that Hugging Face `datasets` saved (`Dataset.save_to_disk`): its data files are
//! the ones its `state.json` lists, not every `.arrow` file in it.
//!
//! `datasets` writes more into such a folder as it is used: `load_from_disk(folder).map(...)`
//! caches its result there as `cache-<fingerprint>.arrow`, so that a listing of the folder
//! would read the saved rows and every cached transform of them together. A `DatasetDict`
//! folder (`dataset_dict.json`) holds one folder per split, which a listing would mix.

use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use crate::{Error, Result};

/// The state file of a saved dataset.
const STATE: &str = "state.json";

/// The file that marks a saved `DatasetDict`.
const DATASET_DICT: &str = "dataset_dict.json";

/// The largest state file read: a few dozen bytes per data file, for up to a million files.
const MAX_STATE_BYTES: u64 = 64 << 20;

/// The data files of `dir` when `datasets` saved it, in the order its `state.json` lists them;
/// `None` for any other folder. A saved `DatasetDict`, a state that does not read as one, a
/// data file named outside the folder and a state with an indices mapping are errors naming
/// the folder.
pub(super) fn saved_dataset_files(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    if dir.join(DATASET_DICT).is_file() {
        return Err(refused(
            dir,
            format!(
                "it is a DatasetDict saved by Hugging Face datasets ({DATASET_DICT}), one \
                 folder per split{}; expected one split's folder",
                splits_of(dir)
            ),
        ));
    }
    let path = dir.join(STATE);
    let file = match fs::File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(Error::io(&path, error)),
    };
    if !file.metadata().map_err(|e| Error::io(&path, e))?.is_file() {
        return Ok(None);
    }
    let mut text = String::new();
    file.take(MAX_STATE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| Error::io(&path, error))?;
    if text.len() as u64 > MAX_STATE_BYTES {
        return Err(refused(
            dir,
            format!("its {STATE} is larger than {MAX_STATE_BYTES} bytes"),
        ));
    }
    let state: serde_json::Value = serde_json::from_str(&text)
        .map_err(|error| refused(dir, format!("its {STATE} does not read as JSON: {error}")))?;
    let listed = |key: &str| state.get(key).filter(|value| !value.is_null());
    if listed("_indices_data_files").is_some() {
        return Err(refused(
            dir,
            format!(
                "its {STATE} names an indices mapping, which selects and orders the rows of its \
                 data files; expected a folder saved without one (load it with \
                 datasets.load_from_disk and pass the Dataset)"
            ),
        ));
    }
    let Some(entries) = listed("_data_files").and_then(|files| files.as_array()) else {
        return Err(refused(
            dir,
            format!("its {STATE} has no list of data files (\"_data_files\")"),
        ));
    };
    let mut files = Vec::with_capacity(entries.len());
    for entry in entries {
        let Some(name) = entry.get("filename").and_then(|name| name.as_str()) else {
            return Err(refused(
                dir,
                format!("an entry of \"_data_files\" in its {STATE} has no \"filename\""),
            ));
        };
        let mut components = Path::new(name).components();
        if !matches!(
            (components.next(), components.next()),
            (Some(Component::Normal(_)), None)
        ) {
            return Err(refused(
                dir,
                format!(
                    "its {STATE} names the data file {name:?}; expected a file name in the folder"
                ),
            ));
        }
        files.push(dir.join(name));
    }
    if files.is_empty() {
        return Err(refused(dir, format!("its {STATE} lists no data file")));
    }
    Ok(Some(files))
}

/// The splits a saved `DatasetDict` names, as `" (train, test)"`, or nothing when its file
/// does not say.
fn splits_of(dir: &Path) -> String {
    let splits: Option<Vec<String>> = fs::read(dir.join(DATASET_DICT))
        .ok()
        .filter(|bytes| bytes.len() < (1 << 20))
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|value| {
            value.get("splits")?.as_array().map(|splits| {
                splits
                    .iter()
                    .filter_map(|split| split.as_str().map(str::to_string))
                    .collect()
            })
        });
    match splits {
        Some(splits) if !splits.is_empty() => format!(" ({})", splits.join(", ")),
        _ => String::new(),
    }
}

fn refused(dir: &Path, reason: String) -> Error {
    Error::InvalidSource {
        what: format!("the folder {}", dir.display()),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn a_saved_dataset_names_the_files_its_state_lists() {
        let dir = folder(&[
            (
                STATE,
                r#"{"_data_files": [{"filename": "data-00001-of-00002.arrow"},
                    {"filename": "data-00000-of-00002.arrow"}], "_indices_data_files": null}"#,
            ),
            ("cache-0123.arrow", ""),
        ]);
        let files = saved_dataset_files(dir.path()).unwrap().unwrap();
        assert_eq!(
            files,
            [
                dir.path().join("data-00001-of-00002.arrow"),
                dir.path().join("data-00000-of-00002.arrow")
            ]
        );
        assert!(
            saved_dataset_files(&dir.path().join("nothing"))
                .unwrap()
                .is_none()
        );
        let plain = folder(&[("a.arrow", "")]);
        assert!(saved_dataset_files(plain.path()).unwrap().is_none());
    }

    #[test]
    fn what_a_state_cannot_say_is_an_error_naming_the_folder() {
        for (state, expected) in [
            ("{", "does not read as JSON"),
            ("{}", "no list of data files"),
            (r#"{"_data_files": []}"#, "lists no data file"),
            (r#"{"_data_files": [{"name": "x"}]}"#, "has no \"filename\""),
            (
                r#"{"_data_files": [{"filename": "../x.arrow"}]}"#,
                "expected a file name",
            ),
            (
                r#"{"_data_files": [{"filename": "/etc/x.arrow"}]}"#,
                "expected a file name",
            ),
            (
                r#"{"_data_files": [{"filename": "a/b.arrow"}]}"#,
                "expected a file name",
            ),
            (
                r#"{"_data_files": [{"filename": "a.arrow"}], "_indices_data_files": [{"filename": "i.arrow"}]}"#,
                "indices mapping",
            ),
        ] {
            let dir = folder(&[(STATE, state)]);
            let error = saved_dataset_files(dir.path()).unwrap_err().to_string();
            assert!(error.contains("the folder"), "{error}");
            let reason = match saved_dataset_files(dir.path()).unwrap_err() {
                Error::InvalidSource { reason, .. } => reason,
                other => panic!("{other}"),
            };
            assert!(reason.contains(expected), "{state}: {reason}");
        }
        let dict = folder(&[(DATASET_DICT, r#"{"splits": ["train", "test"]}"#)]);
        let reason = match saved_dataset_files(dict.path()).unwrap_err() {
            Error::InvalidSource { reason, .. } => reason,
            other => panic!("{other}"),
        };
        assert!(
            reason.contains("DatasetDict") && reason.contains("(train, test)"),
            "{reason}"
        );
    }
}
