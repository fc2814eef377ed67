//! docs/architecture.md's file lists are true: in each crate's section, every file it names
//! exists, and every source file of the crate is named, directly or through a folder entry.
//!
//! The convention the check reads:
//! - A crate's section is the `### ` heading that names its folder in backticks
//!   (``### `crates/tensor` (package ...)``, ``### `xtask` ``) and the text up to the next
//!   heading of that level or above.
//! - A file or folder is named in backticks: `` `tensor.rs` ``, `` `alloc/pool.rs` ``,
//!   `` `strided_copy/` `` (a folder ends with `/` and names everything under it).
//!   A name is looked up in the crate's `src/`, then in the crate's folder (`examples/...`,
//!   `tests/...`), then in the folders its list item named before it (`` - `ragged/`: ...
//!   `pad.rs` ``; `` In `copy/`, `fused.rs` `` inside that), then from the repository's root
//!   (another crate's file, which covers nothing of this crate).
//! - `lib.rs` and `main.rs` are the crate itself, which the whole section describes.

use std::path::Path;

use crate::Result;

/// The document whose file lists are checked, relative to the repository root.
const DOC: &str = "docs/architecture.md";

/// The problems of the document against the tree at `root`.
pub(super) fn problems(root: &Path) -> Result<Vec<String>> {
    let text = super::read(&root.join(DOC))?;
    let mut problems = Vec::new();
    for source in super::imports::source_folders(root)? {
        let crate_dir = source.trim_end_matches("/src");
        let Some(section) = section(&text, crate_dir) else {
            problems.push(format!(
                "{DOC}: no section `### `{crate_dir}`` describes the crate in {crate_dir}"
            ));
            continue;
        };
        let names = named_paths(&section);
        let mut covered: Vec<String> = Vec::new();
        for (name, folders) in &names {
            match resolve(root, crate_dir, name, folders) {
                Some(path) => covered.push(path),
                None => problems.push(format!(
                    "{DOC}: the section of `{crate_dir}` names `{name}`, which is not in \
                     {crate_dir}/src, {crate_dir} or the folder of its list item"
                )),
            }
        }
        let mut files = Vec::new();
        super::walk(&root.join(&source), &mut files)?;
        files.sort();
        for file in files
            .iter()
            .filter(|file| file.extension() == Some("rs".as_ref()))
        {
            let relative = super::relative(root, file);
            let in_src = relative.trim_start_matches(&format!("{source}/"));
            if in_src == "lib.rs" || in_src == "main.rs" {
                continue;
            }
            let named = covered.iter().any(|path| {
                path == &relative || (path.ends_with('/') && relative.starts_with(path.as_str()))
            });
            if !named {
                problems.push(format!(
                    "{DOC}: the section of `{crate_dir}` does not name `{in_src}` (name the file, \
                     or its folder as `folder/`)"
                ));
            }
        }
    }
    Ok(problems)
}

/// The text of the section whose `### ` heading names `crate_dir` in backticks.
fn section(text: &str, crate_dir: &str) -> Option<String> {
    let heading = format!("### `{crate_dir}`");
    let mut lines = text.lines();
    lines.find(|line| *line == heading || line.starts_with(&format!("{heading} ")))?;
    let body: Vec<&str> = lines
        .take_while(|line| !line.starts_with("### ") && !line.starts_with("## "))
        .collect();
    Some(body.join("\n"))
}

/// Every file or folder name in backticks in `section` (`.rs` files and names ending in `/`),
/// each with the folders of its list item that it may be relative to, innermost last: the
/// folders the item names before it, each inside the one before where it is.
fn named_paths(section: &str) -> Vec<(String, Vec<String>)> {
    let mut names = Vec::new();
    let mut item_folders: Vec<String> = Vec::new();
    for line in section.lines() {
        if line.starts_with("- ") || !line.starts_with("  ") {
            item_folders.clear();
        }
        for span in line.split('`').skip(1).step_by(2) {
            let is_path = !span.is_empty()
                && span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
                && (span.ends_with(".rs") || (span.ends_with('/') && span.len() > 1));
            if !is_path {
                continue;
            }
            names.push((span.to_string(), item_folders.clone()));
            if span.ends_with('/') {
                // A folder inside the last one named, or one of its own.
                let nested = item_folders.last().map(|last| format!("{last}{span}"));
                item_folders.extend(nested);
                item_folders.push(span.to_string());
            }
        }
    }
    names
}

/// The path, relative to the root, that `name` names from the section of the crate at
/// `crate_dir`: in its `src/`, in the crate's folder, in one of `folders` (relative to `src/`,
/// innermost first), or from the repository's root or `crates/` (a file of another crate,
/// which exists but covers nothing of this one); a folder keeps its `/`.
fn resolve(root: &Path, crate_dir: &str, name: &str, folders: &[String]) -> Option<String> {
    let mut candidates = vec![
        format!("{crate_dir}/src/{name}"),
        format!("{crate_dir}/{name}"),
    ];
    candidates.extend(
        folders
            .iter()
            .rev()
            .map(|folder| format!("{crate_dir}/src/{folder}{name}")),
    );
    candidates.push(name.to_string());
    candidates.push(format!("crates/{name}"));
    candidates.into_iter().find(|candidate| {
        let path = root.join(candidate.trim_end_matches('/'));
        if name.ends_with('/') {
            path.is_dir()
        } else {
            path.is_file()
        }
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn named_paths_read_backticked_files_and_folders_with_their_list_items_folders() {
        let section = "Intro naming `Tensor` and `tensor.rs`.\n\
                       - `table/`: tables (`copy.rs`). In `copy/`, `fused.rs`.\n  \
                       more about `tests.rs`\n\
                       - `dtype.rs`: dtypes, not `float32` or `a b.rs`.\n";
        let strings = |items: &[&str]| {
            items
                .iter()
                .map(|item| item.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            named_paths(section),
            vec![
                ("tensor.rs".to_string(), vec![]),
                ("table/".to_string(), vec![]),
                ("copy.rs".to_string(), strings(&["table/"])),
                ("copy/".to_string(), strings(&["table/"])),
                (
                    "fused.rs".to_string(),
                    strings(&["table/", "table/copy/", "copy/"])
                ),
                (
                    "tests.rs".to_string(),
                    strings(&["table/", "table/copy/", "copy/"])
                ),
                ("dtype.rs".to_string(), vec![]),
            ]
        );
    }

    #[test]
    fn a_missing_file_and_an_unnamed_file_are_both_reported() {
        let root = std::env::temp_dir().join(format!("xtask-doc-files-{}", std::process::id()));
        let src = root.join("crates").join("demo").join("src");
        fs::create_dir_all(src.join("kernels")).unwrap();
        fs::create_dir_all(root.join("xtask").join("src")).unwrap();
        fs::create_dir_all(root.join("docs")).unwrap();
        for file in [
            "lib.rs",
            "named.rs",
            "forgotten.rs",
            "kernels/mod.rs",
            "kernels/fast.rs",
        ] {
            fs::write(src.join(file), "//! A file.\n").unwrap();
        }
        fs::write(
            root.join("xtask").join("src").join("main.rs"),
            "//! Main.\n",
        )
        .unwrap();
        fs::write(
            root.join("docs").join("architecture.md"),
            "# Architecture\n\n### `crates/demo`\n\n- `named.rs`: named.\n- `kernels/`: all.\n\
             - `gone.rs`: removed long ago.\n\n### `xtask`\n\nThe tool.\n",
        )
        .unwrap();
        let found = problems(&root).unwrap();
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            found,
            vec![
                "docs/architecture.md: the section of `crates/demo` names `gone.rs`, which is \
                 not in crates/demo/src, crates/demo or the folder of its list item"
                    .to_string(),
                "docs/architecture.md: the section of `crates/demo` does not name \
                 `forgotten.rs` (name the file, or its folder as `folder/`)"
                    .to_string(),
            ]
        );
    }
}
