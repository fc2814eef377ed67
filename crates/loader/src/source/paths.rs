//! Local paths as the files they name: a file names itself, a directory every Parquet or Arrow
//! file under it (a folder that Hugging Face `datasets` saved, the data files its state lists:
//! `saved_dataset.rs`), and a glob (`data/part-*.parquet`, `data/**/*.parquet`) the files it matches,
//! with the same matcher and the same listing rules as globs and prefixes in object storage.
//!
//! A listing (a directory's, or a glob's) is walked when the source is made and sorted by path,
//! so that every rank and DataLoader worker sees the same files in the same order; hidden names
//! and names starting with `_` (files and folders: `.crc`, `_SUCCESS`, `_temporary/`) and files
//! of no known extension are left out, as `pyarrow.dataset` leaves them out. A walk is bounded
//! ([`MAX_LISTED`] entries looked at, [`MAX_FILES`] kept) and follows symbolic links (the
//! Hugging Face cache links its files), each folder visited once.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::file::{KNOWN_EXTENSIONS, is_hidden, is_listed};
use crate::path_pattern::{PathPattern, is_pattern};
use crate::{Error, Result};

/// The most directory entries one listing looks at.
pub(crate) const MAX_LISTED: usize = 10_000_000;

/// The most files one directory or glob may name.
pub(crate) const MAX_FILES: usize = 1_000_000;

/// The files that `paths` name, in the order given, each directory and glob expanded in place
/// (sorted). An empty list, a directory with no file to read and a glob that matches none are
/// errors naming them.
pub(super) fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    if paths.is_empty() {
        return Err(Error::InvalidSource {
            what: "the list of paths".to_string(),
            reason: "it is empty; expected at least one file, directory or glob".to_string(),
        });
    }
    let mut files = Vec::new();
    for path in paths {
        match fs::metadata(path) {
            Ok(metadata) if metadata.is_dir() => {
                // A folder that Hugging Face datasets saved: the files its state lists, not
                // the cache files its later transforms wrote beside them.
                let found = match super::saved_dataset::saved_dataset_files(path)? {
                    Some(saved) => saved,
                    None => list(path, path, None)?,
                };
                if found.is_empty() {
                    return Err(nothing_found(path, "no file to read lies under it"));
                }
                files.extend(found);
            }
            Ok(_) => files.push(path.clone()),
            // A path that is not there (a file, or a directory: a name without an extension
            // often is one) is not found, whatever its extension.
            Err(error) if error.kind() == io::ErrorKind::NotFound => match glob(path)? {
                Some(found) => files.extend(found),
                None => return Err(Error::io(path, error)),
            },
            Err(error) => return Err(Error::io(path, error)),
        }
        if files.len() > MAX_FILES {
            return Err(too_many(
                path,
                format!("it names more than {MAX_FILES} files"),
            ));
        }
    }
    for file in &files {
        refuse_irregular(file)?;
    }
    Ok(files)
}

/// Refuses a path that is not a regular file (after links): opening a FIFO blocks until a
/// writer comes, and a device (`/dev/zero`) never ends, where the loader reads a file's first
/// or last bytes when it is made.
fn refuse_irregular(path: &Path) -> Result<()> {
    let metadata = fs::metadata(path).map_err(|error| Error::io(path, error))?;
    if metadata.is_file() {
        return Ok(());
    }
    Err(Error::io(
        path,
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, a socket or a device); expected a file",
        ),
    ))
}

/// The files the glob `path` matches, sorted; `None` when `path` holds no glob character (a
/// path that does not exist, which its caller reports).
fn glob(path: &Path) -> Result<Option<Vec<PathBuf>>> {
    let components: Vec<Component<'_>> = path.components().collect();
    let is_glob = |component: &Component<'_>| match component {
        Component::Normal(name) => is_pattern(&name.to_string_lossy()),
        _ => false,
    };
    let Some(first) = components.iter().position(is_glob) else {
        return Ok(None);
    };
    let mut base: PathBuf = components[..first].iter().collect();
    if base.as_os_str().is_empty() {
        base = PathBuf::from(".");
    }
    let mut segments = Vec::with_capacity(components.len() - first);
    for component in &components[first..] {
        match component {
            Component::Normal(name) => segments.push(name.to_string_lossy().into_owned()),
            // `..` or `.` after a wildcard: a pattern of segments cannot say which folder that is.
            _ => {
                return Err(Error::InvalidSource {
                    what: format!("the glob {}", path.display()),
                    reason: "it has `.` or `..` after a wildcard; expected them only before the \
                             first segment with *, ? or ["
                        .to_string(),
                });
            }
        }
    }
    let pattern = PathPattern::parse(&segments);
    // Without `**`, a match has exactly as many segments as the pattern: no deeper walk.
    let depth = (!segments.iter().any(|segment| segment == "**")).then_some(segments.len());
    let found = match fs::metadata(&base) {
        Ok(metadata) if metadata.is_dir() => list(&base, path, Some((&pattern, depth)))?,
        Ok(_) => Vec::new(),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(Error::io(&base, error)),
    };
    if found.is_empty() {
        return Err(nothing_found(
            path,
            &format!("no file of a known extension ({KNOWN_EXTENSIONS}) matches it"),
        ));
    }
    Ok(Some(found))
}

/// The files under `root` that a listing keeps, sorted by their path relative to `root` (its
/// segments joined by `/`, as keys in object storage are sorted); with a pattern, those whose
/// relative path matches it, walking at most `depth` levels when the pattern bounds the depth.
/// `named` is what the caller gave, for errors.
fn list(
    root: &Path,
    named: &Path,
    pattern: Option<(&PathPattern, Option<usize>)>,
) -> Result<Vec<PathBuf>> {
    let max_depth = pattern.and_then(|(_, depth)| depth);
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    let mut visited: HashSet<(u64, u64)> = HashSet::new();
    let mut listed = 0usize;
    // Folders still to read: the folder, and the segments of its path below `root`.
    let mut pending: Vec<(PathBuf, Vec<String>)> = vec![(root.to_path_buf(), Vec::new())];
    while let Some((folder, segments)) = pending.pop() {
        if let Some(identity) = folder_identity(&folder)?
            && !visited.insert(identity)
        {
            // A symbolic link back to a folder already walked.
            continue;
        }
        let entries = fs::read_dir(&folder).map_err(|error| Error::io(&folder, error))?;
        for entry in entries {
            let entry = entry.map_err(|error| Error::io(&folder, error))?;
            listed += 1;
            if listed > MAX_LISTED {
                return Err(too_many(
                    named,
                    format!(
                        "its listing goes on past {MAX_LISTED} entries; expected fewer (a \
                         narrower folder or glob)"
                    ),
                ));
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_hidden(&name) {
                continue;
            }
            let path = entry.path();
            // Symbolic links are followed: a link to a file is a file, to a folder a folder.
            let metadata = fs::metadata(&path).map_err(|error| Error::io(&path, error))?;
            let mut relative = segments.clone();
            relative.push(name);
            if metadata.is_dir() {
                if max_depth.is_none_or(|depth| relative.len() < depth) {
                    pending.push((path, relative));
                }
                continue;
            }
            if !is_listed(relative.last().map_or("", String::as_str)) {
                continue;
            }
            if let Some((pattern, _)) = pattern {
                let parts: Vec<&str> = relative.iter().map(String::as_str).collect();
                if !pattern.matches(&parts) {
                    continue;
                }
            }
            if found.len() == MAX_FILES {
                return Err(too_many(
                    named,
                    format!("it names more than {MAX_FILES} files; expected fewer"),
                ));
            }
            found.push((relative.join("/"), path));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

/// The device and inode of `folder`, which identify it whatever link it is reached through;
/// `None` where the platform has none.
fn folder_identity(folder: &Path) -> Result<Option<(u64, u64)>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = fs::metadata(folder).map_err(|error| Error::io(folder, error))?;
        Ok(Some((metadata.dev(), metadata.ino())))
    }
    #[cfg(not(unix))]
    {
        let _ = folder;
        Ok(None)
    }
}

/// The error of a directory or glob that names no file: not found, naming it.
fn nothing_found(path: &Path, reason: &str) -> Error {
    Error::io(
        path,
        io::Error::new(io::ErrorKind::NotFound, reason.to_string()),
    )
}

/// The error of a listing past its bounds, naming what was listed.
fn too_many(path: &Path, reason: String) -> Error {
    Error::io(path, io::Error::other(reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(root: &Path, relative: &str) {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"x").unwrap();
    }

    fn relative(root: &Path, files: Vec<PathBuf>) -> Vec<String> {
        files
            .iter()
            .map(|file| {
                let parts: Vec<String> = file
                    .strip_prefix(root)
                    .unwrap()
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                parts.join("/")
            })
            .collect()
    }

    #[test]
    fn a_directory_names_its_files_sorted_without_hidden_or_unknown_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in [
            "b/part-1.parquet",
            "a.parquet",
            "b/part-0.parquet",
            "_SUCCESS",
            "_tmp/x.parquet",
            ".hidden/y.parquet",
            "b/.part-2.parquet.crc",
            "b/_part-3.parquet",
            "dataset_info.json",
            "c/d/e.PQ",
        ] {
            touch(root, name);
        }
        let files = expand(&[root.to_path_buf()]).unwrap();
        assert_eq!(
            relative(root, files),
            [
                "a.parquet",
                "b/part-0.parquet",
                "b/part-1.parquet",
                "c/d/e.PQ"
            ]
        );
    }

    #[test]
    fn globs_match_one_level_or_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in [
            "data/part-0.parquet",
            "data/part-1.parquet",
            "data/other.parquet",
            "data/sub/part-2.parquet",
            "data/_part-3.parquet",
        ] {
            touch(root, name);
        }
        let one = expand(&[root.join("data/part-*.parquet")]).unwrap();
        assert_eq!(
            relative(root, one),
            ["data/part-0.parquet", "data/part-1.parquet"]
        );
        let deep = expand(&[root.join("data/**/part-*.parquet")]).unwrap();
        assert_eq!(
            relative(root, deep),
            [
                "data/part-0.parquet",
                "data/part-1.parquet",
                "data/sub/part-2.parquet"
            ]
        );
        let folders = expand(&[root.join("*/sub/*.parquet")]).unwrap();
        assert_eq!(relative(root, folders), ["data/sub/part-2.parquet"]);
    }

    #[test]
    fn nothing_to_read_is_an_error_naming_what_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(root, "empty/notes.txt");
        let error = expand(&[root.join("empty")]).unwrap_err();
        let Error::Io { path, source } = &error else {
            panic!("{error:?}")
        };
        assert_eq!(path, &root.join("empty"));
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
        let error = expand(&[root.join("empty/*.parquet")]).unwrap_err();
        assert!(error.to_string().contains("*.parquet"), "{error}");
        assert!(
            matches!(&error, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
        );
        let error = expand(&[root.join("missing.parquet")]).unwrap_err();
        assert!(
            matches!(&error, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
        );
        let error = expand(&[]).unwrap_err();
        assert!(error.to_string().contains("empty"), "{error}");
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_followed_and_a_loop_is_walked_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(root, "blobs/abc123");
        touch(root, "data/a.parquet");
        std::os::unix::fs::symlink(root.join("blobs/abc123"), root.join("data/b.parquet")).unwrap();
        std::os::unix::fs::symlink(root.join("data"), root.join("data/again")).unwrap();
        let files = expand(&[root.join("data")]).unwrap();
        assert_eq!(relative(root, files), ["data/a.parquet", "data/b.parquet"]);
    }

    #[test]
    fn an_existing_file_whose_name_has_glob_characters_is_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(root, "data[1].parquet");
        touch(root, "data1.parquet");
        let files = expand(&[root.join("data[1].parquet")]).unwrap();
        assert_eq!(relative(root, files), ["data[1].parquet"]);
    }
}
