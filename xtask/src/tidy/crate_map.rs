//! README.md's crate map lists every workspace member, under its package name, and nothing else.
//!
//! The members and their package names come from [`workspace::members`]. The map is the README's table whose rows start with a path in backticks
//! (``| `crates/tensor` | `arrow-dlpack-tensor` | ...``): the first cell is the path, the second
//! starts with the package name.

use std::path::Path;

use crate::{Result, workspace};

/// The file that holds the crate map, relative to the repository root.
const README: &str = "README.md";

/// The problems of README.md's crate map: each member missing from it, each row naming no
/// member, and each row whose package name is not the member's.
pub(super) fn problems(root: &Path) -> Result<Vec<String>> {
    let members = workspace::members(root)?;
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
}
