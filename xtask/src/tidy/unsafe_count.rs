//! The number of `unsafe` blocks in each crate's `src/`, printed by tidy and held against the
//! table under "Unsafe code" in docs/architecture.md, so that the count a reader is told is the
//! count there is.
//!
//! A block is the word `unsafe` followed, after any white space, by `{`, outside `//` comments:
//! `unsafe fn`, `unsafe impl` and `unsafe extern` are declarations, not blocks. Blocks in unit
//! tests under `src/` count too; integration tests in `tests/` do not.

use std::path::Path;

use crate::Result;

/// The document that holds the table, relative to the repository root.
const DOC: &str = "docs/architecture.md";

/// Each crate (its folder) and the number of `unsafe` blocks in its `src/`.
pub(super) type Counts = Vec<(String, usize)>;

/// The counted source folders and their counts, then the problems: a crate whose row is missing
/// or whose row gives another number, and a row that names no crate.
pub(super) fn problems(root: &Path) -> Result<(Counts, Vec<String>)> {
    let mut counts = Vec::new();
    for source in super::imports::source_folders(root)? {
        let mut files = Vec::new();
        super::walk(&root.join(&source), &mut files)?;
        let mut count = 0;
        for file in files
            .iter()
            .filter(|file| file.extension() == Some("rs".as_ref()))
        {
            count += count_blocks(&super::read(file)?);
        }
        let name = source.trim_end_matches("/src").to_string();
        counts.push((name, count));
    }
    let rows = table_rows(&super::read(&root.join(DOC))?);
    let mut problems = Vec::new();
    for (name, count) in &counts {
        match rows.iter().find(|(row, _)| row == name) {
            None => problems.push(format!(
                "{DOC}: the table of `unsafe` blocks has no row for `{name}` (it has {count})"
            )),
            Some((_, stated)) if stated != count => problems.push(format!(
                "{DOC}: the table says `{name}` has {stated} `unsafe` block(s) in src/; it has \
                 {count}"
            )),
            Some(_) => {}
        }
    }
    for (row, _) in &rows {
        if !counts.iter().any(|(name, _)| name == row) {
            problems.push(format!(
                "{DOC}: the table of `unsafe` blocks names `{row}`, which is no crate"
            ));
        }
    }
    Ok((counts, problems))
}

/// The number of `unsafe` blocks in a Rust source text.
fn count_blocks(text: &str) -> usize {
    let mut count = 0;
    for line in text.lines() {
        let code = line.split_once("//").map_or(line, |(code, _)| code);
        let mut rest = code;
        while let Some(at) = rest.find("unsafe") {
            let before = rest[..at].chars().next_back();
            let after = rest[at + "unsafe".len()..].trim_start();
            let word_start = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
            if word_start && after.starts_with('{') {
                count += 1;
            }
            rest = &rest[at + "unsafe".len()..];
        }
    }
    count
}

/// The rows ``| `crates/x` | N |`` of the table: each crate's path and its stated count.
fn table_rows(doc: &str) -> Vec<(String, usize)> {
    doc.lines()
        .filter_map(|line| {
            let mut cells = line.trim().strip_prefix('|')?.split('|').map(str::trim);
            let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let count = cells.next()?.parse().ok()?;
            Some((name.to_string(), count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_blocks_but_not_declarations_comments_or_longer_words() {
        // The word is spliced in, so that this file's own count is not changed by its tests.
        let u = "unsafe";
        let text = format!(
            "// SAFETY: an {u} {{ in a comment\n\
             let a = {u} {{ f() }};\n\
             let b = {u}{{ g() }}; let c = {u} {{\n\
             {u} fn h() {{}}\n\
             {u} impl Send for X {{}}\n\
             {u} extern \"C\" {{}}\n\
             let not_{u} {{ }}\n"
        );
        assert_eq!(count_blocks(&text), 3);
    }

    #[test]
    fn reads_the_rows_of_the_table() {
        let doc = "| crate | `unsafe` blocks in `src/` |\n|---|---|\n| `crates/tensor` | 106 |\n\
                   | `xtask` | 1 |\n| `crates/x` | many |\n";
        assert_eq!(
            table_rows(doc),
            vec![("crates/tensor".to_string(), 106), ("xtask".to_string(), 1)]
        );
    }
}
