//! README.md's crate map lists every workspace member, under its package name, and nothing else.
//!
//! The members come from the root `Cargo.toml`'s `[workspace] members` (a trailing `/*` stands
//! for every folder below that holds a `Cargo.toml`); each member's package name from its own
//! `Cargo.toml`. The map is the README's table whose rows start with a path in backticks
//! (``| `crates/tensor` | `arrow-dlpack-tensor` | ...``): the first cell is the path, the second
//! starts with the package name.

use std::fs;
use std::path::Path;

use crate::Result;

/// The file that holds the crate map, relative to the repository root.
const README: &str = "README.md";

/// The problems of README.md's crate map: each member missing from it, each row naming no
/// member, and each row whose package name is not the member's.
pub(super) fn problems(root: &Path) -> Result<Vec<String>> {
    let manifest = super::read(&root.join("Cargo.toml"))?;
    let mut members = Vec::new();
    for pattern in member_patterns(&manifest)? {
        for path in expand(root, &pattern)? {
            let package_manifest = super::read(&root.join(&path).join("Cargo.toml"))?;
            let name = package_name(&package_manifest)
                .ok_or_else(|| format!("{path}/Cargo.toml: no `name` in its `[package]` table"))?;
            members.push((path, name));
        }
    }
    let rows = map_rows(&super::read(&root.join(README))?);
    Ok(compare(&members, &rows))
}

/// The problems of `rows` (path, first backticked name of the package cell) against `members`
/// (path, package name).
fn compare(members: &[(String, String)], rows: &[(String, Option<String>)]) -> Vec<String> {
    let mut problems = Vec::new();
    for (path, name) in members {
        match rows.iter().find(|(row_path, _)| row_path == path) {
            None => problems.push(format!(
                "{README}: the crate map has no row for the workspace member `{path}` (package \
                 `{name}`); add `| `{path}` | `{name}` | what it is |`"
            )),
            Some((_, row_name)) if row_name.as_deref() != Some(name.as_str()) => {
                problems.push(format!(
                    "{README}: the crate map's row for `{path}` names the package {}; expected \
                     `{name}`",
                    row_name
                        .as_deref()
                        .map_or_else(|| "nowhere".to_string(), |found| format!("`{found}`"))
                ));
            }
            Some(_) => {}
        }
    }
    for (path, _) in rows {
        if !members.iter().any(|(member, _)| member == path) {
            problems.push(format!(
                "{README}: the crate map lists `{path}`, which is not a workspace member"
            ));
        }
    }
    problems
}

/// The quoted strings of `members = [...]` in the `[workspace]` table of `manifest`, which may
/// span several lines.
fn member_patterns(manifest: &str) -> Result<Vec<String>> {
    let table = table(manifest, "workspace")
        .ok_or("Cargo.toml: no `[workspace]` table to read the members from")?;
    let start = table
        .lines()
        .position(|line| {
            line.trim_start()
                .strip_prefix("members")
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .ok_or("Cargo.toml: the `[workspace]` table has no `members`")?;
    let mut value = String::new();
    for line in table.lines().skip(start) {
        // A comment may follow a value; members' paths hold no `#`.
        value.push_str(line.split('#').next().unwrap_or_default());
        if line.contains(']') {
            break;
        }
    }
    let open = value
        .find('[')
        .ok_or("Cargo.toml: `members` is not an array")?;
    let close = value
        .rfind(']')
        .ok_or("Cargo.toml: `members` is not closed by `]`")?;
    Ok(value[open + 1..close]
        .split(',')
        .map(|item| item.trim().trim_matches('"').to_string())
        .filter(|item| !item.is_empty())
        .collect())
}

/// The lines of the TOML table `[name]`, up to the next table header.
fn table<'a>(manifest: &'a str, name: &str) -> Option<&'a str> {
    let header = format!("[{name}]");
    let mut offset = 0;
    let mut start = None;
    for line in manifest.split_inclusive('\n') {
        let trimmed = line.trim();
        match start {
            None if trimmed == header => start = Some(offset + line.len()),
            Some(begin) if trimmed.starts_with('[') => return Some(&manifest[begin..offset]),
            _ => {}
        }
        offset += line.len();
    }
    start.map(|begin| &manifest[begin..])
}

/// The member folders that `pattern` names, as paths relative to `root` with `/` separators,
/// sorted: `dir/*` is every folder of `dir` with a `Cargo.toml`, anything else one folder.
fn expand(root: &Path, pattern: &str) -> Result<Vec<String>> {
    let Some(dir) = pattern.strip_suffix("/*") else {
        return Ok(vec![pattern.to_string()]);
    };
    let listed = root.join(dir);
    let entries = fs::read_dir(&listed)
        .map_err(|error| format!("could not list {}: {error}", listed.display()))?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|error| format!("could not list {}: {error}", listed.display()))?;
        if entry.path().join("Cargo.toml").is_file() {
            paths.push(format!("{dir}/{}", entry.file_name().to_string_lossy()));
        }
    }
    paths.sort();
    Ok(paths)
}

/// The `name` of the `[package]` table of a member's manifest.
fn package_name(manifest: &str) -> Option<String> {
    table(manifest, "package")?.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix("name")?.trim_start();
        let value = rest.strip_prefix('=')?.trim();
        Some(value.trim_matches('"').to_string())
    })
}

/// The crate map's rows of `readme`: each line that starts with ``| ` `` gives its first cell's
/// path and the first backticked name of its second cell.
fn map_rows(readme: &str) -> Vec<(String, Option<String>)> {
    readme
        .lines()
        .filter_map(|line| {
            let mut cells = line.strip_prefix("| `")?.split('|');
            let path = cells.next()?.trim().trim_end_matches('`').to_string();
            let package = cells
                .next()
                .and_then(|cell| cell.trim().strip_prefix('`'))
                .and_then(|cell| cell.split('`').next())
                .map(str::to_string);
            Some((path, package))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "\
[workspace]
resolver = \"3\"
members = [
    \"crates/*\", # every crate
    \"xtask\",
]
default-members = [\"crates/a\"]

[workspace.package]
version = \"0.1.0\"
";

    const README_MAP: &str = "\
# Title

| path | package | what it is |
|---|---|---|
| `crates/a` | `package-a` | the first |
| `crates/b` | `package-b`, wheel `b` | the second |
| `xtask` | `xtask` | commands |

Text with `code` | and a bar.
";

    fn members() -> Vec<(String, String)> {
        [
            ("crates/a", "package-a"),
            ("crates/b", "package-b"),
            ("xtask", "xtask"),
        ]
        .iter()
        .map(|(path, name)| (path.to_string(), name.to_string()))
        .collect()
    }

    #[test]
    fn members_are_read_across_lines_and_comments() {
        assert_eq!(member_patterns(MANIFEST).unwrap(), ["crates/*", "xtask"]);
        let one_line = "[package]\nname = \"x\"\n\n[workspace]\nmembers = [\"a\", \"b/*\"]\n";
        assert_eq!(member_patterns(one_line).unwrap(), ["a", "b/*"]);
        assert!(member_patterns("[package]\nmembers = [\"a\"]\n").is_err());
    }

    #[test]
    fn package_names_come_from_the_package_table() {
        let manifest =
            "[package]\nname = \"arrow-dlpack-loader\"\n\n[dependencies]\nname = \"x\"\n";
        assert_eq!(
            package_name(manifest).as_deref(),
            Some("arrow-dlpack-loader")
        );
        assert_eq!(package_name("[lib]\nname = \"x\"\n"), None);
    }

    #[test]
    fn rows_give_the_path_and_the_package() {
        let rows = map_rows(README_MAP);
        assert_eq!(
            rows,
            [
                ("crates/a".to_string(), Some("package-a".to_string())),
                ("crates/b".to_string(), Some("package-b".to_string())),
                ("xtask".to_string(), Some("xtask".to_string())),
            ]
        );
    }

    #[test]
    fn a_complete_map_has_no_problems() {
        assert_eq!(
            compare(&members(), &map_rows(README_MAP)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_missing_member_is_reported_with_the_row_to_add() {
        let readme =
            README_MAP.replace("| `crates/b` | `package-b`, wheel `b` | the second |\n", "");
        let problems = compare(&members(), &map_rows(&readme));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0]
                .contains("no row for the workspace member `crates/b` (package `package-b`)"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_wrong_package_name_and_a_stale_row_are_reported() {
        let readme = README_MAP.replace("`package-a`", "`package-z`").replace(
            "| `xtask` |",
            "| `crates/gone` | `gone` | old |\n| `xtask` |",
        );
        let problems = compare(&members(), &map_rows(&readme));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0]
                .contains("row for `crates/a` names the package `package-z`; expected `package-a`"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("lists `crates/gone`, which is not a workspace member"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_workspace_members_are_expanded_from_the_disk() {
        let root = crate::project_root();
        let members = expand(&root, "crates/*").unwrap();
        assert!(
            members.contains(&"crates/loader".to_string()),
            "{members:?}"
        );
        assert!(
            members.contains(&"crates/tensor".to_string()),
            "{members:?}"
        );
        assert_eq!(expand(&root, "xtask").unwrap(), ["xtask"]);
    }
}
