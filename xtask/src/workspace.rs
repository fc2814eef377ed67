//! The workspace's members, read from the manifests: the root `Cargo.toml`'s `[workspace]
//! members` (a trailing `/*` stands for every folder below that holds a `Cargo.toml`), each with
//! the package name of its own `Cargo.toml`.
//!
//! Read by tidy (the README's crate map lists every member) and by the build-directory claim
//! (whose fingerprints are the workspace's own); a small reader of the few TOML forms the
//! manifests use, so that xtask needs no TOML parser.

use std::fs;
use std::path::Path;

use crate::Result;

/// Every member of the workspace at `root`: its path relative to `root` (with `/` separators)
/// and its package name, sorted by path within each pattern.
pub(crate) fn members(root: &Path) -> Result<Vec<(String, String)>> {
    let manifest = read(&root.join("Cargo.toml"))?;
    let mut members = Vec::new();
    for pattern in member_patterns(&manifest)? {
        for path in expand(root, &pattern)? {
            let package_manifest = read(&root.join(&path).join("Cargo.toml"))?;
            let name = package_name(&package_manifest)
                .ok_or_else(|| format!("{path}/Cargo.toml: no `name` in its `[package]` table"))?;
            members.push((path, name));
        }
    }
    Ok(members)
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|error| format!("could not read {}: {error}", path.display()))
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

    #[test]
    fn every_member_of_this_workspace_is_found_with_its_package_name() {
        let members = members(&crate::project_root()).unwrap();
        for expected in [
            ("crates/loader", "arrow-dlpack-loader"),
            ("crates/dlpack-sys", "dlpack-sys"),
            ("xtask", "xtask"),
        ] {
            assert!(
                members.contains(&(expected.0.to_string(), expected.1.to_string())),
                "{members:?}"
            );
        }
    }
}
