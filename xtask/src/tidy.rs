//! `cargo xtask tidy`: repository hygiene, also run by `cargo test` through the test below.
//!
//! - Every `.rs` file starts with a `//!` comment that says what it is.
//! - The crates depend on each other only along the layer graph of `docs/architecture.md`:
//!   `dlpack-sys` <- `arrow-dlpack-tensor` <- `arrow-dlpack` <- (`arrow-dlpack-c`,
//!   `arrow-dlpack-loader`) <- `arrow-dlpack-python`.
//! - Only `arrow-dlpack-python` depends on pyo3, and only `dlpack-sys` on dlpark (with the
//!   exceptions listed in [`DLPARK_EXCEPTIONS`]).
//! - The files of every crate import each other one way, in every folder, re-exports followed:
//!   no cycle, except between a base class and its subclass (`tidy/imports.rs`).
//! - No pending insta snapshot (`*.snap.new`, `*.pending-snap`) is left in the tree.
//! - The repository's root holds only the entries of [`ROOT_ENTRIES`]: a reproduction's data
//!   or a scratch file committed there by mistake is caught (the tracked files, as `git ls-files`
//!   lists them; the folder's own entries where git is not at hand).
//! - No tracked text file refers to documents outside the repository or to tracker issues by
//!   number (`tidy/references.rs`).
//! - README.md's crate map lists every workspace member under its package name
//!   (`tidy/crate_map.rs`).
//! - docs/architecture.md names every source file of each crate in the crate's section, and
//!   only files that exist (`tidy/doc_files.rs`).
//!
//! The dependencies come from `cargo metadata --no-deps`, read with the small JSON reader of
//! `tidy/json.rs` (xtask depends on the standard library only).

use std::fs;
use std::path::{Path, PathBuf};

use crate::Result;
use crate::process::Cmd;

mod crate_map;
mod doc_files;
mod imports;
mod json;
mod references;
mod rust_paths;
mod unsafe_count;

/// Each package of the workspace and the internal packages it may depend on, lowest layer first.
///
/// A new crate must be added here, and to `docs/architecture.md`, before tidy passes.
const LAYERS: &[(&str, &[&str])] = &[
    ("dlpack-sys", &[]),
    ("arrow-dlpack-tensor", &["dlpack-sys"]),
    ("arrow-dlpack", &["arrow-dlpack-tensor", "dlpack-sys"]),
    (
        "arrow-dlpack-c",
        &["arrow-dlpack", "arrow-dlpack-tensor", "dlpack-sys"],
    ),
    (
        "arrow-dlpack-loader",
        &["arrow-dlpack", "arrow-dlpack-tensor", "dlpack-sys"],
    ),
    (
        "arrow-dlpack-python",
        &[
            "arrow-dlpack-loader",
            "arrow-dlpack-c",
            "arrow-dlpack",
            "arrow-dlpack-tensor",
            "dlpack-sys",
        ],
    ),
    ("xtask", &[]),
];

/// The one package allowed to depend on pyo3.
const PYO3_PACKAGE: &str = "arrow-dlpack-python";

/// The one package that names dlpark: the others reach the DLPack ABI through it.
const DLPARK_PACKAGE: &str = "dlpack-sys";

/// Packages that still name dlpark, with the dependency kind (`normal`, `dev`, `build`) and why.
/// Each is a known gap in the rule that dlpack-sys is the only crate that names dlpark
/// (docs/architecture.md), listed so that tidy catches any new one; remove an entry when its crate
/// stops naming dlpark.
const DLPARK_EXCEPTIONS: &[(&str, &str, &str)] = &[
    (
        "arrow-dlpack-tensor",
        "normal",
        "re-exports dlpark::Managed and builds managed tensors with dlpark's ownership machinery",
    ),
    (
        "arrow-dlpack",
        "dev",
        "its tests play a foreign producer and consumer with dlpark's ndarray adapter",
    ),
    (
        "arrow-dlpack-python",
        "normal",
        "imports dlpark::python for the capsule protocol",
    ),
];

/// What the repository's root may hold; anything else there is a file left behind by mistake
/// (data files belong beside the test or bench that makes them, scratch files outside the tree).
const ROOT_ENTRIES: &[&str] = &[
    ".cargo",
    ".ci",
    ".gitignore",
    "Cargo.lock",
    "Cargo.toml",
    "README.md",
    "bench",
    "crates",
    "docs",
    "gpu",
    "rustfmt.toml",
    "xtask",
];

/// The help of `cargo xtask tidy`.
pub(crate) fn help() -> String {
    crate::wrap(
        "Repository hygiene, also run as a test: every .rs file starts with `//!`; the crates' \
         dependencies follow the layer graph of docs/architecture.md, and only \
         arrow-dlpack-python depends on pyo3; the files of each crate import each other one \
         way, re-exports followed; docs/architecture.md names every source file and only files \
         that exist, and its table of `unsafe` blocks is true (the counts are printed); no \
         tracked file refers to documents outside the repository or to tracker numbers; \
         README's crate map lists every workspace member; no *.snap.new or *.pending-snap file \
         exists.",
        0,
    )
}

/// Runs every check and reports all problems at once.
pub(crate) fn run(root: &Path) -> Result {
    println!("==> tidy");
    let problems = problems(root)?;
    if problems.is_empty() {
        println!("tidy: ok");
        Ok(())
    } else {
        Err(format!(
            "tidy found {} problem(s):\n  {}",
            problems.len(),
            problems.join("\n  ")
        ))
    }
}

fn problems(root: &Path) -> Result<Vec<String>> {
    let mut problems = file_problems(root)?;
    problems.extend(root_problems(&root_entries(root)?));
    let metadata = Cmd::cargo(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .read_stdout()?;
    for package in packages(&metadata)? {
        problems.extend(layer_problems(root, &package));
    }
    problems.extend(imports::problems(root)?);
    problems.extend(references::problems(root)?);
    problems.extend(crate_map::problems(root)?);
    problems.extend(doc_files::problems(root)?);
    let (unsafe_counts, unsafe_problems) = unsafe_count::problems(root)?;
    println!(
        "tidy: `unsafe` blocks in src/: {}",
        unsafe_counts
            .iter()
            .map(|(name, count)| format!("{name} {count}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    problems.extend(unsafe_problems);
    Ok(problems)
}

/// The problems of the files themselves: headers and pending snapshots.
fn file_problems(root: &Path) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    let mut files = Vec::new();
    walk(root, &mut files)?;
    for file in &files {
        let relative = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        if name.ends_with(".snap.new") || name.ends_with(".pending-snap") {
            problems.push(format!(
                "{relative}: pending insta snapshot; review it with `cargo insta review` or delete \
                 it (only `.snap` files are committed)"
            ));
        }
        if name.ends_with(".rs") {
            let text = read(file)?;
            if !text.starts_with("//!") {
                problems.push(format!(
                    "{relative}: does not start with a `//!` comment that says what the file is"
                ));
            }
        }
    }
    Ok(problems)
}

/// The top-level names of the repository's tracked files, or of the folder's entries (hidden
/// ones and `target` left out) where git cannot list them, as in a source archive.
fn root_entries(root: &Path) -> Result<Vec<String>> {
    if let Ok(listed) = Cmd::new(root, "git").args(["ls-files", "-z"]).read_stdout() {
        let mut names: Vec<String> = listed
            .split('\0')
            .filter(|path| !path.is_empty())
            .map(|path| path.split('/').next().unwrap_or(path).to_owned())
            .collect();
        names.sort_unstable();
        names.dedup();
        return Ok(names);
    }
    let entries = fs::read_dir(root)
        .map_err(|error| format!("could not list {}: {error}", root.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|error| format!("could not list {}: {error}", root.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "target" && (!name.starts_with('.') || ROOT_ENTRIES.contains(&name.as_str())) {
            names.push(name);
        }
    }
    Ok(names)
}

/// The entries of the root that [`ROOT_ENTRIES`] does not name.
fn root_problems(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|name| !ROOT_ENTRIES.contains(&name.as_str()))
        .map(|name| {
            format!(
                "{name}: not an entry the repository's root holds (tidy's ROOT_ENTRIES); move it \
                 beside what uses it, or remove it"
            )
        })
        .collect()
}

/// Collects every file under `dir`, skipping build output and hidden directories (`.git`).
pub(crate) fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result {
    let entries =
        fs::read_dir(dir).map_err(|error| format!("could not list {}: {error}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|error| format!("could not list {}: {error}", dir.display()))?;
        let file_type = entry
            .file_type()
            .map_err(|error| format!("could not inspect {}: {error}", entry.path().display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if file_type.is_dir() {
            if name != "target" && !name.starts_with('.') {
                walk(&entry.path(), files)?;
            }
        } else if file_type.is_file() {
            files.push(entry.path());
        }
    }
    Ok(())
}

/// `path` relative to `root`, with `/` separators.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|error| format!("could not read {}: {error}", path.display()))
}

/// A workspace package, as `cargo metadata` describes it.
#[derive(Debug, PartialEq)]
struct Package {
    name: String,
    manifest_path: String,
    dependencies: Vec<Dependency>,
}

/// One dependency of a package, of any kind.
#[derive(Debug, PartialEq)]
struct Dependency {
    /// The package depended on (cargo resolves `package = "..."` renames).
    name: String,
    /// `normal`, `dev` or `build`.
    kind: String,
    /// The `cfg(...)` or target triple of a target-specific dependency.
    target: Option<String>,
}

impl Dependency {
    /// The manifest table the dependency is written in, as tidy's messages name it.
    fn table(&self) -> String {
        let kind = match self.kind.as_str() {
            "normal" => "dependencies".to_string(),
            kind => format!("{kind}-dependencies"),
        };
        match &self.target {
            Some(target) => format!("target.{target}.{kind}"),
            None => kind,
        }
    }
}

/// The packages of `cargo metadata --format-version 1` output.
fn packages(metadata: &str) -> Result<Vec<Package>> {
    let metadata = json::parse(metadata)?;
    let field = |value: &json::Value, key: &str| -> Result<String> {
        value
            .get(key)
            .and_then(json::Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("cargo metadata: expected a string `{key}` in {value:?}"))
    };
    let list = |value: &'_ json::Value, key: &str| -> Result<Vec<json::Value>> {
        value
            .get(key)
            .and_then(json::Value::as_array)
            .map(<[json::Value]>::to_vec)
            .ok_or_else(|| format!("cargo metadata: expected an array `{key}`"))
    };
    let mut packages = Vec::new();
    for package in list(&metadata, "packages")? {
        let mut dependencies = Vec::new();
        for dependency in list(&package, "dependencies")? {
            dependencies.push(Dependency {
                name: field(&dependency, "name")?,
                // `kind` is null for normal dependencies, `target` null for every target.
                kind: field(&dependency, "kind").unwrap_or_else(|_| "normal".to_string()),
                target: field(&dependency, "target").ok(),
            });
        }
        packages.push(Package {
            name: field(&package, "name")?,
            manifest_path: field(&package, "manifest_path")?,
            dependencies,
        });
    }
    Ok(packages)
}

/// The problems of one package with the layer graph, the pyo3 rule and the dlpark rule.
fn layer_problems(root: &Path, package: &Package) -> Vec<String> {
    let manifest = Path::new(&package.manifest_path);
    let relative = manifest.strip_prefix(root).unwrap_or(manifest).display();
    let name = package.name.as_str();
    let Some((_, allowed)) = LAYERS.iter().find(|(layer, _)| *layer == name) else {
        return vec![format!(
            "{relative}: package `{name}` has no place in the layer graph; add it to LAYERS in \
             xtask/src/tidy.rs and to docs/architecture.md"
        )];
    };
    let mut problems = Vec::new();
    for dependency in &package.dependencies {
        let on = dependency.name.as_str();
        let table = dependency.table();
        let internal = LAYERS.iter().any(|(layer, _)| *layer == on);
        if internal && !allowed.contains(&on) {
            problems.push(format!(
                "{relative}: `{name}` depends on `{on}` in [{table}], but the layer graph lets it \
                 depend only on {}",
                describe(allowed)
            ));
        }
        let is_pyo3 = on == "pyo3" || on.starts_with("pyo3-");
        if is_pyo3 && name != PYO3_PACKAGE {
            problems.push(format!(
                "{relative}: `{name}` depends on `{on}` in [{table}], but only `{PYO3_PACKAGE}` \
                 may know pyo3"
            ));
        }
        let excepted = DLPARK_EXCEPTIONS
            .iter()
            .any(|&(package, kind, _)| package == name && kind == dependency.kind);
        if on == "dlpark" && name != DLPARK_PACKAGE && !excepted {
            problems.push(format!(
                "{relative}: `{name}` depends on `dlpark` in [{table}], but only \
                 `{DLPARK_PACKAGE}` may name dlpark; reach the ABI through its re-exports"
            ));
        }
    }
    problems
}

fn describe(allowed: &[&str]) -> String {
    if allowed.is_empty() {
        "no internal crate".to_string()
    } else {
        allowed
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_is_tidy() {
        run(&crate::project_root()).unwrap();
    }

    /// `cargo metadata` output for one package with `dependencies`, each `(name, kind, target)`.
    #[test]
    fn stray_entries_at_the_root_are_named() {
        let names: Vec<String> = ["crates", "src.arrow", "README.md", "repro01_streams"]
            .iter()
            .map(|name| name.to_string())
            .collect();
        let problems = root_problems(&names);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("src.arrow: not an entry"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("repro01_streams: not an entry"),
            "{problems:?}"
        );
    }

    fn metadata(package: &str, dependencies: &[(&str, &str, &str)]) -> String {
        let dependencies: Vec<String> = dependencies
            .iter()
            .map(|(name, kind, target)| {
                format!(
                    r#"{{"name":"{name}","source":null,"req":"*","kind":{kind},"rename":null,"optional":false,"uses_default_features":true,"features":[],"target":{target},"registry":null}}"#
                )
            })
            .collect();
        format!(
            r#"{{"packages":[{{"name":"{package}","version":"0.1.0","id":"path+file:///w#0.1.0","description":"a \"quoted\" \u00e9 \ud83d\ude00 text","authors":[],"dependencies":[{}],"targets":[],"features":{{}},"manifest_path":"/w/crates/x/Cargo.toml","metadata":null,"edition":"2024","rust_version":"1.89","links":null,"publish":null}}],"workspace_members":[],"resolve":null,"target_directory":"/w/target","version":1,"workspace_root":"/w","metadata":null}}"#,
            dependencies.join(",")
        )
    }

    fn problems_of(package: &str, dependencies: &[(&str, &str, &str)]) -> Vec<String> {
        let packages = packages(&metadata(package, dependencies)).unwrap();
        assert_eq!(packages.len(), 1);
        layer_problems(Path::new("/w"), &packages[0])
    }

    #[test]
    fn packages_read_every_dependency_kind_and_target() {
        let text = metadata(
            "arrow-dlpack",
            &[
                ("dlpack-sys", "null", "null"),
                ("pyo3-ffi", r#""dev""#, "null"),
                ("cc", r#""build""#, r#""cfg(unix)""#),
            ],
        );
        let packages = packages(&text).unwrap();
        let tables: Vec<(String, String)> = packages[0]
            .dependencies
            .iter()
            .map(|dependency| (dependency.name.clone(), dependency.table()))
            .collect();
        assert_eq!(packages[0].name, "arrow-dlpack");
        assert_eq!(packages[0].manifest_path, "/w/crates/x/Cargo.toml");
        assert_eq!(
            tables,
            [
                ("dlpack-sys".to_string(), "dependencies".to_string()),
                ("pyo3-ffi".to_string(), "dev-dependencies".to_string()),
                (
                    "cc".to_string(),
                    "target.cfg(unix).build-dependencies".to_string()
                ),
            ]
        );
    }

    #[test]
    fn layers_accept_the_allowed_edges() {
        let dependencies = [
            ("arrow-dlpack-tensor", "null", "null"),
            ("dlpack-sys", "null", "null"),
            ("arrow-array", "null", "null"),
        ];
        assert_eq!(
            problems_of("arrow-dlpack", &dependencies),
            Vec::<String>::new()
        );
    }

    #[test]
    fn layers_reject_a_dependency_on_a_higher_layer() {
        assert_eq!(
            problems_of(
                "arrow-dlpack-tensor",
                &[("arrow-dlpack", r#""dev""#, "null")]
            ),
            vec![
                "crates/x/Cargo.toml: `arrow-dlpack-tensor` depends on `arrow-dlpack` in \
                 [dev-dependencies], but the layer graph lets it depend only on `dlpack-sys`"
                    .to_string()
            ]
        );
    }

    #[test]
    fn the_arrow_c_layer_sits_between_arrow_dlpack_and_the_python_crate() {
        let below = [
            ("arrow-dlpack", "null", "null"),
            ("arrow-dlpack-tensor", "null", "null"),
            ("dlpack-sys", "null", "null"),
        ];
        assert!(problems_of("arrow-dlpack-c", &below).is_empty());
        assert!(
            problems_of("arrow-dlpack-python", &[("arrow-dlpack-c", "null", "null")]).is_empty()
        );
        for above in ["pyo3", "arrow-dlpack-python", "arrow-dlpack-loader"] {
            assert_eq!(
                problems_of("arrow-dlpack-c", &[(above, "null", "null")]).len(),
                1,
                "arrow-dlpack-c may not depend on {above}"
            );
        }
        assert_eq!(
            problems_of("arrow-dlpack", &[("arrow-dlpack-c", "null", "null")]).len(),
            1
        );
    }

    #[test]
    fn layers_reject_pyo3_outside_the_python_crate() {
        assert_eq!(
            problems_of("dlpack-sys", &[("pyo3", "null", "null")]),
            vec![
                "crates/x/Cargo.toml: `dlpack-sys` depends on `pyo3` in [dependencies], but only \
                 `arrow-dlpack-python` may know pyo3"
                    .to_string()
            ]
        );
        assert!(problems_of("arrow-dlpack-python", &[("pyo3", "null", "null")]).is_empty());
    }

    #[test]
    fn dlpark_is_named_only_by_dlpack_sys_and_the_listed_exceptions() {
        assert!(problems_of("dlpack-sys", &[("dlpark", "null", "null")]).is_empty());
        assert!(problems_of("arrow-dlpack", &[("dlpark", r#""dev""#, "null")]).is_empty());
        assert_eq!(
            problems_of("arrow-dlpack", &[("dlpark", "null", "null")]),
            vec![
                "crates/x/Cargo.toml: `arrow-dlpack` depends on `dlpark` in [dependencies], but \
                 only `dlpack-sys` may name dlpark; reach the ABI through its re-exports"
                    .to_string()
            ]
        );
        assert_eq!(
            problems_of("arrow-dlpack-loader", &[("dlpark", "null", "null")]).len(),
            1
        );
    }

    #[test]
    fn layers_reject_an_unknown_package() {
        let problems = problems_of("arrow-dlpack-extra", &[]);
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains("has no place in the layer graph"),
            "{problems:?}"
        );
    }

    #[test]
    fn tidy_reports_missing_headers_and_pending_snapshots() {
        let root = std::env::temp_dir().join(format!("xtask-tidy-{}", std::process::id()));
        let src = root.join("crates").join("demo").join("src");
        fs::create_dir_all(&src).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::write(src.join("lib.rs"), "//! A library.\n").unwrap();
        fs::write(src.join("bad.rs"), "// Not a module comment.\n").unwrap();
        fs::write(src.join("lib__case.snap.new"), "").unwrap();
        // Build output is not the repository's.
        fs::write(root.join("target").join("generated.rs"), "fn main() {}\n").unwrap();

        let problems = file_problems(&root).unwrap();
        fs::remove_dir_all(&root).unwrap();
        let mut problems = problems;
        problems.sort();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("crates/demo/src/bad.rs: does not start with a `//!`"));
        assert!(problems[1].starts_with("crates/demo/src/lib__case.snap.new: pending insta"));
    }
}
