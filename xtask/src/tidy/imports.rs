//! The imports between the files of each crate (every `crates/*/src` and `xtask/src`) run one
//! way, in every folder: tidy reads every path of each file that names something of its own
//! crate (`crate::`, `super::`, `self::`, and `use` declarations of child modules), follows each
//! through the `use` declarations that re-export it (`pub use error::Error` in `lib.rs` makes
//! `crate::Error` a reference to `error.rs`) to the module that defines it
//! (`tidy/rust_paths.rs`), and fails on any cycle except between a base class and its subclass
//! ([`ALLOWED_PAIRS`]).
//!
//! In each folder (the crate's `src/` first) a node is a child: a file `name.rs`, or a folder
//! `name/` whose files count as one (and are checked among themselves in turn). The folder's own
//! file (`lib.rs`, `main.rs`, `mod.rs`) is its API, which registers everything, so it is no node.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use super::rust_paths::{self, ModulePath, SourceFile, defining_module};
use crate::Result;

/// The folder whose files [`ALLOWED_PAIRS`] name: the only crate with Python classes.
const ALLOWED_PAIRS_FOLDER: &str = "crates/py-bindings/src";

/// Pairs of files of [`ALLOWED_PAIRS_FOLDER`] that may import each other: a base class and its
/// subclass. Each pair is one node of the graph, so a cycle through either file and a third is
/// reported.
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

/// The problems of every crate: each cycle between the files of one folder, once.
pub(super) fn problems(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    for source in source_folders(root)? {
        let allowed = if source == ALLOWED_PAIRS_FOLDER {
            ALLOWED_PAIRS
        } else {
            &[]
        };
        for (folder, cycle) in crate_cycles(&root.join(&source), allowed)? {
            let place = if folder.is_empty() {
                source.clone()
            } else {
                format!("{source}/{}", folder.join("/"))
            };
            problems.push(format!(
                "{place}: its files import each other in a circle ({}), counting re-exports; move \
                 the shared piece into a file below both (only a base class and its subclass in \
                 {ALLOWED_PAIRS_FOLDER}, {}, may refer to each other)",
                cycle.join(" -> "),
                ALLOWED_PAIRS
                    .iter()
                    .map(|(base, subclass)| format!("{base} and {subclass}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(problems)
}

/// Every cycle in the crate whose sources are in `source`: for each folder (the crate root
/// first), the cycles between its files and subfolders, with the folder's module path.
pub(super) fn crate_cycles(
    source: &Path,
    allowed: &[(&str, &str)],
) -> Result<Vec<(ModulePath, Vec<String>)>> {
    let files = read_crate(source)?;
    let mut folders: BTreeSet<ModulePath> = BTreeSet::from([Vec::new()]);
    for file in &files {
        for length in 1..file.module.len() {
            folders.insert(file.module[..length].to_vec());
        }
    }
    let graphs = graphs(&files);
    let mut found = Vec::new();
    for folder in folders {
        let graph = graphs.get(&folder).cloned().unwrap_or_default();
        // The allowed pairs are files of the crate's root folder.
        let allowed = if folder.is_empty() { allowed } else { &[] };
        for cycle in cycles(&graph, allowed) {
            found.push((folder.clone(), cycle));
        }
    }
    Ok(found)
}

/// The Rust files under `source`, each as the module it is.
fn read_crate(source: &Path) -> Result<Vec<SourceFile>> {
    let mut paths = Vec::new();
    super::walk(source, &mut paths)?;
    paths.sort();
    let mut files = Vec::new();
    for path in paths
        .iter()
        .filter(|path| path.extension() == Some("rs".as_ref()))
    {
        let relative = path
            .strip_prefix(source)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        files.push(SourceFile::new(&relative, &super::read(path)?));
    }
    Ok(files)
}

/// For each folder (module with children), the graph of its children: which child refers to
/// which other, through any path that ends, after re-exports are followed, in an item the other
/// defines. The folder's own file (`lib.rs`, `mod.rs`) is its API and no node.
fn graphs(files: &[SourceFile]) -> BTreeMap<ModulePath, Graph> {
    let modules: BTreeSet<ModulePath> = files.iter().map(|file| file.module.clone()).collect();
    let imports = rust_paths::imports(files);
    let mut graphs: BTreeMap<ModulePath, Graph> = BTreeMap::new();
    // Every module that is a child of a folder is a node, with or without edges.
    for module in &modules {
        if let Some((name, folder)) = module.split_last() {
            graphs
                .entry(folder.to_vec())
                .or_default()
                .entry(name.clone())
                .or_default();
        }
    }
    for file in files {
        for reference in rust_paths::references(file) {
            let target = defining_module(&reference.path, &modules, &imports);
            // The deepest folder holding both, and the child of it on each side.
            let shared = file
                .module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            if shared >= file.module.len() || shared >= target.len() {
                // One is inside the other: a module and its own children or API.
                continue;
            }
            graphs
                .entry(file.module[..shared].to_vec())
                .or_default()
                .entry(file.module[shared].clone())
                .or_default()
                .insert(target[shared].clone());
        }
    }
    graphs
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

    /// Writes `files` (paths relative to a `src/` folder, and texts) into a fresh folder and
    /// returns the cycles tidy finds there.
    fn cycles_of_tree(name: &str, files: &[(&str, &str)]) -> Vec<(ModulePath, Vec<String>)> {
        let source = std::env::temp_dir()
            .join(format!("xtask-imports-{name}-{}", std::process::id()))
            .join("src");
        for (path, text) in files {
            let path = source.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let found = crate_cycles(&source, &[]).unwrap();
        fs::remove_dir_all(source.parent().unwrap()).unwrap();
        found
    }

    #[test]
    fn a_loop_through_re_exports_of_the_crate_root_is_found() {
        // The tensor crate's old loop: each file names the other's item through `lib.rs`.
        let found = cycles_of_tree(
            "root",
            &[
                (
                    "lib.rs",
                    "mod dtype;\nmod error;\npub use dtype::DType;\npub use error::{Error, Result};\n",
                ),
                ("dtype.rs", "//! Dtypes.\nuse crate::{Error, Result};\n"),
                ("error.rs", "//! Errors.\nuse crate::DType;\n"),
            ],
        );
        assert_eq!(
            found,
            vec![(
                Vec::new(),
                vec![
                    "dtype".to_string(),
                    "error".to_string(),
                    "dtype".to_string()
                ]
            )]
        );
    }

    #[test]
    fn a_loop_through_a_folders_api_and_super_is_found() {
        // The loader's loop: `spec.rs` names `crate::state::LoaderState`, and a file inside
        // `state/` names `BatchSpec` through `super::super` and the root's re-export.
        let found = cycles_of_tree(
            "folder",
            &[
                (
                    "lib.rs",
                    "mod spec;\nmod state;\npub use spec::BatchSpec;\npub use state::LoaderState;\n",
                ),
                (
                    "spec.rs",
                    "use crate::state::LoaderState;\npub struct BatchSpec;\n",
                ),
                ("state/mod.rs", "mod merge;\npub use merge::LoaderState;\n"),
                (
                    "state/merge.rs",
                    "pub struct LoaderState;\nfn f() { let _ = super::super::BatchSpec; }\n",
                ),
            ],
        );
        assert_eq!(
            found,
            vec![(
                Vec::new(),
                vec!["spec".to_string(), "state".to_string(), "spec".to_string()]
            )]
        );
    }

    #[test]
    fn files_inside_a_folder_import_each_other_one_way_too() {
        let found = cycles_of_tree(
            "inner",
            &[
                ("lib.rs", "mod ragged;\n"),
                ("ragged/mod.rs", "mod pad;\nmod pack;\npub use pad::Side;\n"),
                (
                    "ragged/pad.rs",
                    "use super::pack::Packed;\npub enum Side {}\n",
                ),
                (
                    "ragged/pack.rs",
                    "use crate::ragged::Side;\npub struct Packed;\n",
                ),
            ],
        );
        assert_eq!(
            found,
            vec![(
                vec!["ragged".to_string()],
                vec!["pack".to_string(), "pad".to_string(), "pack".to_string()]
            )]
        );
    }

    #[test]
    fn a_one_way_tree_with_tests_and_comments_has_no_loop() {
        let found = cycles_of_tree(
            "clean",
            &[
                (
                    "lib.rs",
                    "mod dtype;\nmod error;\npub use dtype::DType;\npub use error::Error;\n",
                ),
                // A comment or a string naming the other file is no import.
                (
                    "dtype.rs",
                    "// crate::Error\nconst A: &str = \"crate::Error\";\n",
                ),
                (
                    "error.rs",
                    "use crate::DType;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
                ),
            ],
        );
        assert!(found.is_empty(), "{found:?}");
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
