//! `cargo xtask tidy`: repository hygiene, also run by `cargo test` through the test below.
//!
//! - Every `.rs` file starts with a `//!` comment that says what it is.
//! - The crates depend on each other only along the layer graph of `docs/architecture.md`:
//!   `dlpack-sys` <- `arrow-dlpack-tensor` <- `arrow-dlpack` <- `arrow-dlpack-loader` <-
//!   `arrow-dlpack-python`.
//! - Only `arrow-dlpack-python` depends on pyo3.
//! - No pending insta snapshot (`*.snap.new`, `*.pending-snap`) is left in the tree.

use std::fs;
use std::path::{Path, PathBuf};

use crate::Result;

/// Each package of the workspace and the internal packages it may depend on, lowest layer first.
///
/// A new crate must be added here, and to `docs/architecture.md`, before tidy passes.
const LAYERS: &[(&str, &[&str])] = &[
    ("dlpack-sys", &[]),
    ("arrow-dlpack-tensor", &["dlpack-sys"]),
    ("arrow-dlpack", &["arrow-dlpack-tensor", "dlpack-sys"]),
    (
        "arrow-dlpack-loader",
        &["arrow-dlpack", "arrow-dlpack-tensor", "dlpack-sys"],
    ),
    (
        "arrow-dlpack-python",
        &[
            "arrow-dlpack-loader",
            "arrow-dlpack",
            "arrow-dlpack-tensor",
            "dlpack-sys",
        ],
    ),
    ("xtask", &[]),
];

/// The one package allowed to depend on pyo3.
const PYO3_PACKAGE: &str = "arrow-dlpack-python";

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
    for manifest in manifests(root)? {
        let relative = manifest
            .strip_prefix(root)
            .unwrap_or(&manifest)
            .display()
            .to_string();
        problems.extend(layer_problems(&relative, &read(&manifest)?));
    }
    Ok(problems)
}

/// Collects every file under `dir`, skipping build output and hidden directories (`.git`).
fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result {
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

/// The manifests of `crates/*` and of `xtask`.
fn manifests(root: &Path) -> Result<Vec<PathBuf>> {
    let crates = root.join("crates");
    let entries = fs::read_dir(&crates)
        .map_err(|error| format!("could not list {}: {error}", crates.display()))?;
    let mut manifests = vec![root.join("xtask").join("Cargo.toml")];
    for entry in entries {
        let manifest = entry
            .map_err(|error| format!("could not list {}: {error}", crates.display()))?
            .path()
            .join("Cargo.toml");
        if manifest.is_file() {
            manifests.push(manifest);
        }
    }
    manifests.sort();
    Ok(manifests)
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|error| format!("could not read {}: {error}", path.display()))
}

/// The problems of one manifest with the layer graph and the pyo3 rule.
fn layer_problems(relative: &str, manifest: &str) -> Vec<String> {
    let scanned = scan_manifest(manifest);
    let Some(package) = scanned.package else {
        return vec![format!("{relative}: has no `[package]` name")];
    };
    let Some((_, allowed)) = LAYERS.iter().find(|(name, _)| *name == package) else {
        return vec![format!(
            "{relative}: package `{package}` has no place in the layer graph; add it to LAYERS in \
             xtask/src/tidy.rs and to docs/architecture.md"
        )];
    };
    let mut problems = Vec::new();
    for dependency in &scanned.dependencies {
        let name = dependency.package.as_str();
        let internal = LAYERS.iter().any(|(layer, _)| *layer == name);
        if internal && !allowed.contains(&name) {
            problems.push(format!(
                "{relative}: `{package}` depends on `{name}` in [{}], but the layer graph lets it \
                 depend only on {}",
                dependency.table,
                describe(allowed)
            ));
        }
        let is_pyo3 = name == "pyo3" || name.starts_with("pyo3-");
        if is_pyo3 && package != PYO3_PACKAGE {
            problems.push(format!(
                "{relative}: `{package}` depends on `{name}` in [{}], but only `{PYO3_PACKAGE}` \
                 may know pyo3",
                dependency.table
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

/// What tidy needs from a `Cargo.toml`.
#[derive(Debug, Default, PartialEq)]
struct ScannedManifest {
    package: Option<String>,
    dependencies: Vec<Dependency>,
}

/// One entry of a dependency table.
#[derive(Debug, PartialEq)]
struct Dependency {
    /// The table it is in, such as `dependencies` or `target.'cfg(unix)'.dev-dependencies`.
    table: String,
    /// The package depended on: the key, or its `package = "..."` rename.
    package: String,
}

/// Reads the package name and every dependency, of every kind, from a manifest.
///
/// This understands the TOML that manifests are written in: tables, dotted keys
/// (`foo.workspace = true`), inline tables over several lines, `[dependencies.foo]` tables and
/// `package` renames; comments and brackets inside strings are ignored.
fn scan_manifest(manifest: &str) -> ScannedManifest {
    let mut scanned = ScannedManifest::default();
    let mut table: Vec<String> = Vec::new();
    // The dependency named by a `[dependencies.foo]` header, whose keys follow.
    let mut table_dependency: Option<usize> = None;
    for entry in entries(manifest) {
        match entry {
            Entry::Table(header) => {
                table = split_dotted(&header);
                table_dependency = None;
                if let Some((name, kind)) = table.split_last()
                    && is_dependency_table(kind)
                {
                    scanned.dependencies.push(Dependency {
                        table: kind.join("."),
                        package: name.clone(),
                    });
                    table_dependency = Some(scanned.dependencies.len() - 1);
                }
            }
            Entry::ArrayTable => {
                table = vec!["[[array]]".to_string()];
                table_dependency = None;
            }
            Entry::KeyValue(key, value) => {
                let key = split_dotted(&key);
                if table == ["package"] && key == ["name"] {
                    scanned.package = string_value(&value);
                } else if let Some(index) = table_dependency {
                    if key == ["package"]
                        && let Some(renamed) = string_value(&value)
                    {
                        scanned.dependencies[index].package = renamed;
                    }
                } else if is_dependency_table(&table)
                    && let Some(name) = key.first()
                {
                    let package = if key.len() == 1 {
                        inline_package(&value).unwrap_or_else(|| name.clone())
                    } else {
                        name.clone()
                    };
                    scanned.dependencies.push(Dependency {
                        table: table.join("."),
                        package,
                    });
                }
            }
        }
    }
    scanned
}

/// Whether a table path is `dependencies`, `dev-dependencies`, `build-dependencies` or one of
/// those under `target.<cfg>`.
fn is_dependency_table(table: &[String]) -> bool {
    let kinds = ["dependencies", "dev-dependencies", "build-dependencies"];
    match table {
        [kind] => kinds.contains(&kind.as_str()),
        [target, _, kind] => target == "target" && kinds.contains(&kind.as_str()),
        _ => false,
    }
}

/// One logical line of TOML.
#[derive(Debug, PartialEq)]
enum Entry {
    /// `[a.b]`, with the text between the brackets.
    Table(String),
    /// `[[a]]`, whose keys tidy never needs.
    ArrayTable,
    /// `key = value`, with the value possibly spanning several lines.
    KeyValue(String, String),
}

/// Splits TOML text into logical entries, joining values whose brackets or braces span lines.
fn entries(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut pending: Option<(String, String, i32)> = None;
    for line in text.lines() {
        let line = strip_comment(line);
        if let Some((key, mut value, depth)) = pending.take() {
            value.push('\n');
            value.push_str(&line);
            let depth = depth + bracket_depth(&line);
            if depth > 0 {
                pending = Some((key, value, depth));
            } else {
                entries.push(Entry::KeyValue(key, value));
            }
            continue;
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with("[[") {
            entries.push(Entry::ArrayTable);
        } else if let Some(header) = line.strip_prefix('[') {
            let header = header.strip_suffix(']').unwrap_or(header);
            entries.push(Entry::Table(header.trim().to_string()));
        } else if let Some(equals) = find_unquoted(line, '=') {
            let key = line[..equals].trim().to_string();
            let value = line[equals + 1..].trim().to_string();
            let depth = bracket_depth(&value);
            if depth > 0 {
                pending = Some((key, value, depth));
            } else {
                entries.push(Entry::KeyValue(key, value));
            }
        }
    }
    if let Some((key, value, _)) = pending {
        entries.push(Entry::KeyValue(key, value));
    }
    entries
}

/// The characters of `text` that are outside strings, each with its byte index.
fn unquoted(text: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    text.char_indices().filter(move |&(_, c)| match quote {
        Some(q) => {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            false
        }
        None => {
            if c == '"' || c == '\'' {
                quote = Some(c);
                false
            } else {
                true
            }
        }
    })
}

fn strip_comment(line: &str) -> String {
    match unquoted(line).find(|&(_, c)| c == '#') {
        Some((index, _)) => line[..index].to_string(),
        None => line.to_string(),
    }
}

fn find_unquoted(text: &str, wanted: char) -> Option<usize> {
    unquoted(text)
        .find(|&(_, c)| c == wanted)
        .map(|(index, _)| index)
}

/// Opening minus closing brackets and braces outside strings.
fn bracket_depth(text: &str) -> i32 {
    unquoted(text)
        .map(|(_, c)| match c {
            '[' | '{' => 1,
            ']' | '}' => -1,
            _ => 0,
        })
        .sum()
}

/// Splits `a."b.c".d` into `a`, `b.c`, `d`, unquoting each part.
fn split_dotted(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (index, c) in unquoted(text) {
        if c == '.' {
            parts.push(unquote(&text[start..index]));
            start = index + 1;
        }
    }
    parts.push(unquote(&text[start..]));
    parts
}

fn unquote(text: &str) -> String {
    let text = text.trim();
    for quote in ['"', '\''] {
        if let Some(inner) = text
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
        {
            return inner.to_string();
        }
    }
    text.to_string()
}

/// The text of a string value, or `None` for any other value.
fn string_value(value: &str) -> Option<String> {
    let value = value.trim();
    (value.len() >= 2 && (value.starts_with('"') || value.starts_with('\'')))
        .then(|| unquote(value))
}

/// The `package = "..."` entry of an inline table, if there is one.
fn inline_package(value: &str) -> Option<String> {
    let inner = value.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut start = 0;
    let mut depth = 0;
    let mut fields = Vec::new();
    for (index, c) in unquoted(inner) {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                fields.push(&inner[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    fields.push(&inner[start..]);
    fields.into_iter().find_map(|field| {
        let equals = find_unquoted(field, '=')?;
        (unquote(&field[..equals]) == "package")
            .then(|| string_value(&field[equals + 1..]))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_is_tidy() {
        run(&crate::project_root()).unwrap();
    }

    fn dependency(table: &str, package: &str) -> Dependency {
        Dependency {
            table: table.to_string(),
            package: package.to_string(),
        }
    }

    #[test]
    fn scan_reads_every_dependency_form() {
        let manifest = r#"
[package]
name = "arrow-dlpack" # the package
version.workspace = true

[dependencies]
arrow-dlpack-tensor.workspace = true
"dlpack-sys" = { workspace = true }
python = { package = "pyo3", version = "0.30", features = [
    "macros", # a comment with ] and }
    "abi3-py39",
] }

[dev-dependencies.renamed]
version = "1"
package = "pyo3-ffi"

[target.'cfg(unix)'.build-dependencies]
cc = "1"

[[bench]]
name = "not-a-dependency"

[features]
extension-module = ["pyo3/extension-module"]
"#;
        assert_eq!(
            scan_manifest(manifest),
            ScannedManifest {
                package: Some("arrow-dlpack".to_string()),
                dependencies: vec![
                    dependency("dependencies", "arrow-dlpack-tensor"),
                    dependency("dependencies", "dlpack-sys"),
                    dependency("dependencies", "pyo3"),
                    dependency("dev-dependencies", "pyo3-ffi"),
                    dependency("target.cfg(unix).build-dependencies", "cc"),
                ],
            }
        );
    }

    #[test]
    fn layers_accept_the_allowed_edges() {
        let manifest = r#"
[package]
name = "arrow-dlpack"
[dependencies]
arrow-dlpack-tensor.workspace = true
dlpack-sys.workspace = true
arrow-array.workspace = true
"#;
        assert_eq!(
            layer_problems("crates/arrow-dlpack/Cargo.toml", manifest),
            Vec::<String>::new()
        );
    }

    #[test]
    fn layers_reject_a_dependency_on_a_higher_layer() {
        let manifest = r#"
[package]
name = "arrow-dlpack-tensor"
[dev-dependencies]
arrow-dlpack = { path = "../arrow-dlpack" }
"#;
        assert_eq!(
            layer_problems("crates/tensor/Cargo.toml", manifest),
            vec![
                "crates/tensor/Cargo.toml: `arrow-dlpack-tensor` depends on `arrow-dlpack` in \
                 [dev-dependencies], but the layer graph lets it depend only on `dlpack-sys`"
                    .to_string()
            ]
        );
    }

    #[test]
    fn layers_reject_pyo3_outside_the_python_crate() {
        let manifest = r#"
[package]
name = "dlpack-sys"
[dependencies]
pyo3 = { workspace = true }
"#;
        assert_eq!(
            layer_problems("crates/dlpack-sys/Cargo.toml", manifest),
            vec![
                "crates/dlpack-sys/Cargo.toml: `dlpack-sys` depends on `pyo3` in [dependencies], \
                 but only `arrow-dlpack-python` may know pyo3"
                    .to_string()
            ]
        );
    }

    #[test]
    fn layers_accept_pyo3_in_the_python_crate() {
        let manifest = r#"
[package]
name = "arrow-dlpack-python"
[dependencies]
arrow-dlpack.workspace = true
pyo3 = { workspace = true, features = ["macros"] }
"#;
        assert!(layer_problems("crates/py-bindings/Cargo.toml", manifest).is_empty());
    }

    #[test]
    fn layers_reject_an_unknown_package() {
        let manifest = "[package]\nname = \"arrow-dlpack-extra\"\n";
        let problems = layer_problems("crates/extra/Cargo.toml", manifest);
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
        fs::create_dir_all(root.join("xtask")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::write(
            root.join("xtask").join("Cargo.toml"),
            "[package]\nname = \"xtask\"\n",
        )
        .unwrap();
        fs::write(
            root.join("crates").join("demo").join("Cargo.toml"),
            "[package]\nname = \"dlpack-sys\"\n",
        )
        .unwrap();
        fs::write(src.join("lib.rs"), "//! A library.\n").unwrap();
        fs::write(src.join("bad.rs"), "// Not a module comment.\n").unwrap();
        fs::write(src.join("lib__case.snap.new"), "").unwrap();
        // Build output is not the repository's.
        fs::write(root.join("target").join("generated.rs"), "fn main() {}\n").unwrap();

        let problems = problems(&root).unwrap();
        fs::remove_dir_all(&root).unwrap();
        let mut problems = problems;
        problems.sort();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("crates/demo/src/bad.rs: does not start with a `//!`"));
        assert!(problems[1].starts_with("crates/demo/src/lib__case.snap.new: pending insta"));
    }
}
