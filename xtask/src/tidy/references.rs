//! The repository reads complete on its own: no tracked text file refers to documents kept
//! outside it (the developers' design, reference and style notes, or the folder beside the
//! checkout that holds them) or to tracker issues by number.
//!
//! A reader of the repository has neither those notes nor the tracker, so a pointer to them is a
//! dead end; the facts belong in the project's own `docs/`, and a change is described by what it
//! does, not by the number of the issue that asked for it.
//!
//! The check scans every file that `git ls-files` lists, except insta snapshots (`*.snap`, which
//! hold program output) and binary files (a NUL byte, or not UTF-8). Its matcher is written by
//! hand, as xtask has no dependencies. The needles below spell their dots, slashes, spaces and
//! hash signs as escapes (`\x2E`, `\x2F`, `\x20`, `\x23`), so that this file does not match its
//! own check.

use std::fs;
use std::path::Path;

use crate::Result;
use crate::process::Cmd;

/// Names of the developers' notes that live outside the repository.
const OUTSIDE_DOCUMENTS: &[&str] = &["DESIGN\x2Emd", "REFERENCE\x2Emd", "STYLE\x2Emd"];

/// The folder beside the checkout that holds those notes, as a path prefix.
const SHARED_FOLDER: &str = "shared\x2F";

/// The same folder reached from inside the checkout.
const SHARED_PARENT: &str = "..\x2Fshared";

/// The problems of every tracked text file, one per line that refers outside the repository.
pub(super) fn problems(root: &Path) -> Result<Vec<String>> {
    let listing = Cmd::new(root, "git")
        .args(["ls-files", "-z"])
        .read_stdout()?;
    let mut problems = Vec::new();
    for relative in listing.split('\0').filter(|path| !path.is_empty()) {
        if relative.ends_with(".snap") {
            continue;
        }
        let path = root.join(relative);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            // Tracked but deleted in the working tree: there is nothing left to read.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(format!("could not read {}: {error}", path.display())),
        };
        if bytes.contains(&0) {
            continue;
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        for (index, line) in text.lines().enumerate() {
            for reference in references(line) {
                problems.push(format!(
                    "{relative}:{}: {reference}; the repository must read complete on its own, so \
                     write the fact into the project's docs/ and point there",
                    index + 1
                ));
            }
        }
    }
    Ok(problems)
}

/// What `line` refers to outside the repository, each described in words, in the order of the
/// rules (at most one description per rule).
fn references(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(name) = OUTSIDE_DOCUMENTS.iter().find(|name| line.contains(**name)) {
        found.push(format!("names `{name}`, a document outside the repository"));
    }
    if let Some(path) = shared_path(line) {
        found.push(format!("names `{path}`, a folder outside the repository"));
    }
    if let Some(issue) = issue_word(line).or_else(|| hash_number(line)) {
        found.push(format!("names the tracker issue `{issue}`"));
    }
    found
}

/// Whether `c` continues a word (as `\w` in a regular expression).
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the text before byte `at` of `line` ends a word, so that a match at `at` does not
/// start in the middle of one (`\b` before a word character).
fn starts_word(line: &str, at: usize) -> bool {
    !line[..at].chars().next_back().is_some_and(is_word)
}

/// The shared folder as a path: [`SHARED_FOLDER`] not in the middle of a word (after a slash, a
/// space or a bracket), or [`SHARED_PARENT`] not followed by more of a word.
fn shared_path(line: &str) -> Option<&str> {
    for (at, needle) in line.match_indices(SHARED_PARENT) {
        let after = &line[at + needle.len()..];
        if !after.chars().next().is_some_and(is_word) {
            return Some(path_at(line, at));
        }
    }
    for (at, _) in line.match_indices(SHARED_FOLDER) {
        if starts_word(line, at) {
            return Some(path_at(line, at));
        }
    }
    None
}

/// The path that starts at byte `at` of `line`: up to the first space, quote or bracket.
fn path_at(line: &str, at: usize) -> &str {
    let rest = &line[at..];
    let end = rest
        .find(|c: char| c.is_whitespace() || "\"'`()[]<>,;".contains(c))
        .unwrap_or(rest.len());
    rest[..end].trim_end_matches(['.', ':'])
}

/// The word issue or issues, one space, an optional hash sign and a number:
/// `\b[Ii]ssues? #?\d+`.
fn issue_word(line: &str) -> Option<&str> {
    for (at, _) in line.match_indices("ssue") {
        let Some(start) = at.checked_sub(1) else {
            continue;
        };
        if !matches!(line.as_bytes()[start], b'I' | b'i') || !starts_word(line, start) {
            continue;
        }
        let mut rest = &line[at + "ssue".len()..];
        rest = rest.strip_prefix('s').unwrap_or(rest);
        let Some(after_space) = rest.strip_prefix(' ') else {
            continue;
        };
        let number = after_space.strip_prefix('#').unwrap_or(after_space);
        let digits = leading_digits(number);
        if digits > 0 {
            let end = line.len() - number.len() + digits;
            return Some(&line[start..end]);
        }
    }
    None
}

/// A hash sign at the start of the line or after whitespace, then one to four digits that end a
/// word:
/// `(?:^|\s)#\d{1,4}\b`. Rust attributes (`#[`), shebangs (`#!`), Markdown headings (`# Title`)
/// and hexadecimal colours with letters (`#1e1e1e`) never match; a number that starts with 0
/// (`#000`) is a colour, never an issue, and is left alone too.
fn hash_number(line: &str) -> Option<&str> {
    for (at, _) in line.match_indices('#') {
        let preceded_by_space = line[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        if !preceded_by_space {
            continue;
        }
        let number = &line[at + 1..];
        let digits = leading_digits(number);
        let ends_word = !number[digits..].chars().next().is_some_and(is_word);
        if (1..=4).contains(&digits) && ends_word && !number.starts_with('0') {
            return Some(&line[at..at + 1 + digits]);
        }
    }
    None
}

/// How many ASCII digits `text` starts with (each one byte long).
fn leading_digits(text: &str) -> usize {
    text.bytes().take_while(u8::is_ascii_digit).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The cases spell the needles with escapes, as the module's constants do, so that this file
    // does not match its own check.

    #[test]
    fn outside_documents_are_found() {
        for line in [
            "See DESIGN\x2Emd section 4.",
            "//! the layouts of REFERENCE\x2Emd",
            "(STYLE\x2Emd)",
        ] {
            let found = references(line);
            assert_eq!(found.len(), 1, "{line:?}: {found:?}");
            assert!(
                found[0].contains("a document outside the repository"),
                "{found:?}"
            );
        }
    }

    #[test]
    fn shared_paths_are_found_with_the_whole_path() {
        let cases = [
            (
                "guide (shared\x2Fseed/guide.txt), with",
                "shared\x2Fseed/guide.txt",
            ),
            ("shared\x2Fseed", "shared\x2Fseed"),
            ("read /work/shared\x2FREADME.", "shared\x2FREADME"),
            ("cat ..\x2Fshared\x2Fnotes.md", "..\x2Fshared\x2Fnotes.md"),
            ("cd ..\x2Fshared", "..\x2Fshared"),
        ];
        for (line, path) in cases {
            assert_eq!(shared_path(line), Some(path), "{line:?}");
        }
    }

    #[test]
    fn words_that_merely_contain_shared_are_left_alone() {
        for line in [
            "the shared export tensor",
            "unshared\x2Fpath and overshared\x2F",
            "a_shared\x2Fthing",
            "..\x2Fshared_memory/pool.rs",
            "shared / 2",
        ] {
            assert_eq!(shared_path(line), None, "{line:?}");
            assert!(references(line).is_empty(), "{line:?}");
        }
    }

    #[test]
    fn issue_numbers_in_words_are_found() {
        let cases = [
            ("the target of issue\x2011.", "issue\x2011"),
            ("Issue\x2011's targets", "Issue\x2011"),
            ("issues\x203 and 4", "issues\x203"),
            ("fixed in issue\x20\x2312", "issue\x20\x2312"),
            ("(issue\x20100)", "issue\x20100"),
        ];
        for (line, issue) in cases {
            assert_eq!(issue_word(line), Some(issue), "{line:?}");
            assert_eq!(
                references(line),
                [format!("names the tracker issue `{issue}`")]
            );
        }
    }

    #[test]
    fn issue_words_without_a_number_are_left_alone() {
        for line in [
            "this issue is known",
            "reissue\x2011 times",
            "tissue\x2012",
            "issue: 11",
            "issue\x20number",
            "ISSUE\x2011",
            "issue",
        ] {
            assert_eq!(issue_word(line), None, "{line:?}");
        }
    }

    #[test]
    fn hash_numbers_after_whitespace_are_found() {
        let cases = [
            ("see\x20\x2312 for why", "\x2312"),
            ("\x2320 at the start", "\x2320"),
            ("fixed (tab)\t\x239999.", "\x239999"),
        ];
        for (line, issue) in cases {
            assert_eq!(hash_number(line), Some(issue), "{line:?}");
            assert_eq!(references(line).len(), 1, "{line:?}");
        }
    }

    #[test]
    fn hash_signs_that_are_not_issues_are_left_alone() {
        for line in [
            "#[derive(Debug)]",
            "#![warn(missing_docs)]",
            "#!/usr/bin/env python3",
            "# Heading",
            "## 4. The Python contract",
            "color: #000;",
            "background: #1e1e1e;",
            "color: #fff",
            "apache/arrow#39296",
            "format!(\"{:#04x}\")",
            "a\x20\x2312345 five digits",
            "x\x20\x2312a",
            "value\x2312",
            "#",
        ] {
            assert_eq!(hash_number(line), None, "{line:?}");
            assert!(references(line).is_empty(), "{line:?}");
        }
    }

    #[test]
    fn one_line_may_break_several_rules() {
        let line = "DESIGN\x2Emd and shared\x2FREFERENCE\x2Emd, issue\x2010";
        let found = references(line);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].contains("DESIGN"));
        assert!(found[1].contains("shared\x2FREFERENCE\x2Emd"));
        assert!(found[2].contains("issue\x2010"));
    }
}
