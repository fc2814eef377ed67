//! The imports between the files of each crate (every `crates/*/src` and `xtask/src`) run one
//! way: tidy reads every `crate::name` path of each file (its `use` lines and inline paths), and
//! fails on any cycle except between a base class and its subclass ([`ALLOWED_PAIRS`]).
//!
//! A file is a top-level module: `name.rs`, or a folder `name/` whose files count as one.
//! `lib.rs` and `main.rs` are the roots that register everything, so they are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use crate::Result;

/// Pairs of files that may import each other: a base class and its subclass (both in
/// `crates/py-bindings/src`, the only crate with Python classes).
/// Each pair is one node of the graph, so a cycle through either file and a third is reported.
const ALLOWED_PAIRS: &[(&str, &str)] = &[
    ("array", "fixed_shape_tensor"),
    ("array", "variable_shape_tensor"),
    ("array", "list_array"),
];

/// Which files of the crate each file refers to, through `crate::` paths.
pub(super) type Graph = BTreeMap<String, BTreeSet<String>>;

/// The source folders of the workspace's crates, relative to the repository root.
pub(super) fn source_folders(root: &Path) -> Result<Vec<String>> {
    let crates = root.join("crates");
    let entries = fs::read_dir(&crates)
        .map_err(|error| format!("could not list {}: {error}", crates.display()))?;
    let mut folders = vec!["xtask/src".to_string()];
    for entry in entries {
        let entry =
            entry.map_err(|error| format!("could not list {}: {error}", crates.display()))?;
        if entry.path().join("src").is_dir() {
            folders.push(format!(
                "crates/{}/src",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    folders.sort();
    Ok(folders)
}

/// The problems of every crate: each cycle between the files of one crate, once.
pub(super) fn problems(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for source in source_folders(root)? {
        let graph = read_graph(&root.join(&source))?;
        problems.extend(cycles(&graph, ALLOWED_PAIRS).into_iter().map(|cycle| {
            format!(
                "{source}: its files import each other in a circle ({}); move the shared piece \
                 into a file below both (only a base class and its subclass, {}, may refer to \
                 each other)",
                cycle.join(" -> "),
                ALLOWED_PAIRS
                    .iter()
                    .map(|(base, subclass)| format!("{base} and {subclass}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }));
    }
    Ok(problems)
}

/// The graph of the files under `source` (each `.rs` file or folder one module, `lib.rs` and
/// `main.rs` left out).
fn read_graph(source: &Path) -> Result<Graph> {
    let entries = fs::read_dir(source)
        .map_err(|error| format!("could not list {}: {error}", source.display()))?;
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for entry in entries {
        let entry =
            entry.map_err(|error| format!("could not list {}: {error}", source.display()))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut files = Vec::new();
            super::walk(&path, &mut files)?;
            let mut text = String::new();
            for file in files
                .iter()
                .filter(|file| file.extension() == Some("rs".as_ref()))
            {
                text.push_str(&super::read(file)?);
                text.push('\n');
            }
            texts.insert(name, text);
        } else if let Some(stem) = name.strip_suffix(".rs")
            && stem != "lib"
            && stem != "main"
        {
            texts.insert(stem.to_string(), super::read(&path)?);
        }
    }
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    Ok(texts
        .iter()
        .map(|(module, text)| {
            let used = crate_paths(text)
                .into_iter()
                .filter(|used| used != module && modules.contains(used))
                .collect();
            (module.clone(), used)
        })
        .collect())
}

/// The first segment of every `crate::` path in `text`, comments left out: `crate::a::B` gives
/// `a`, `crate::{a, b::C}` gives `a` and `b`.
pub(super) fn crate_paths(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The items of the group, split at its top-level commas.
            let mut depth = 0;
            let mut item = String::new();
            for character in group.chars() {
                match character {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(character);
            }
            found.insert(first_segment(&item));
        } else {
            found.insert(first_segment(rest));
        }
    }
    found.remove("");
    found
}

/// The identifier at the start of `path`, spaces skipped.
fn first_segment(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|character| character.is_ascii_alphanumeric() || *character == '_')
        .collect()
}

/// Each cycle of `graph`, the files of each `allowed` pair taken as one, as a path that starts
/// and ends at the same file; one cycle per strongly connected group of files.
pub(super) fn cycles(graph: &Graph, allowed: &[(&str, &str)]) -> Vec<Vec<String>> {
    // Each file's node: the first file of its allowed pair, or itself.
    let node = |file: &str| -> String {
        allowed
            .iter()
            .find(|(_, subclass)| *subclass == file)
            .map_or(file, |(base, _)| base)
            .to_string()
    };
    let mut merged: Graph = BTreeMap::new();
    for (file, used) in graph {
        let from = node(file);
        let edges = merged.entry(from.clone()).or_default();
        edges.extend(used.iter().map(|used| node(used)).filter(|to| *to != from));
    }
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut found = Vec::new();
    for start in merged.keys() {
        if reported.contains(start) {
            continue;
        }
        if let Some(path) = path_back(&merged, start) {
            reported.extend(path.iter().cloned());
            found.push(path);
        }
    }
    found
}

/// The shortest path from `start` back to itself (breadth first), if there is one.
fn path_back(graph: &Graph, start: &str) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.to_string()]);
    while let Some(file) = queue.pop_front() {
        for next in graph.get(&file).into_iter().flatten() {
            if next == start {
                // Back along the predecessors to `start`, which has none.
                let mut path = vec![file.clone()];
                let mut at = file;
                while let Some(previous) = came_from.get(&at) {
                    path.push(previous.clone());
                    at = previous.clone();
                }
                path.reverse();
                path.push(start.to_string());
                return Some(path);
            }
            if next != start && !came_from.contains_key(next) {
                came_from.insert(next.clone(), file.clone());
                queue.push_back(next.clone());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> Graph {
        edges
            .iter()
            .map(|(file, used)| {
                (
                    file.to_string(),
                    used.iter().map(|used| used.to_string()).collect(),
                )
            })
            .collect()
    }

    fn names(found: &[&str]) -> BTreeSet<String> {
        found.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn crate_paths_read_use_lines_groups_and_inline_paths_but_not_comments() {
        let text = "use crate::{copies, errors, protocols};\n\
                    use crate::array::{Column, PyArray};\n\
                    use crate::{\n    conveniences::{self, Selection},\n    numpy,\n};\n\
                    /// See [`crate::pretty`].\n\
                    // crate::tables is not used here.\n\
                    fn f() { crate::counters::count_import(); }\n";
        assert_eq!(
            crate_paths(text),
            names(&[
                "array",
                "conveniences",
                "copies",
                "counters",
                "errors",
                "numpy",
                "protocols"
            ])
        );
    }

    #[test]
    fn a_one_way_graph_has_no_cycle() {
        let one_way = graph(&[
            ("tensor", &["tables", "errors"]),
            ("tables", &["column", "errors"]),
            ("column", &[]),
            ("errors", &[]),
        ]);
        assert!(cycles(&one_way, &[]).is_empty());
    }

    #[test]
    fn a_cycle_is_reported_as_a_path_once() {
        let circle = graph(&[
            ("array", &["tensor"]),
            ("tensor", &["tables"]),
            ("tables", &["array"]),
            ("errors", &[]),
        ]);
        assert_eq!(
            cycles(&circle, &[]),
            vec![vec!["array", "tensor", "tables", "array"]]
        );
    }

    #[test]
    fn a_base_class_and_its_subclass_may_import_each_other_and_nothing_else() {
        let pair = graph(&[
            ("array", &["fixed_shape_tensor", "column"]),
            ("fixed_shape_tensor", &["array", "column"]),
            ("column", &[]),
        ]);
        let allowed = [("array", "fixed_shape_tensor")];
        assert!(cycles(&pair, &allowed).is_empty());
        assert_eq!(cycles(&pair, &[]).len(), 1);

        // A third file between them closes a circle through the pair.
        let through = graph(&[
            ("array", &["fixed_shape_tensor"]),
            ("fixed_shape_tensor", &["tensor"]),
            ("tensor", &["array"]),
        ]);
        assert_eq!(
            cycles(&through, &allowed),
            vec![vec!["array", "tensor", "array"]]
        );
    }
}
