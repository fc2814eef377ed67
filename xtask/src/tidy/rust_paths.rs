//! What a crate's files refer to: every `crate::`, `super::` and `self::` path of a Rust file,
//! made absolute from the module the path is written in, and followed through the `use`
//! declarations (re-exports) of the modules it passes, to the module that defines the item.
//!
//! A small reader, not a parser: comments, string and character literals are blanked first, so
//! that only code is read; inline `mod name { ... }` blocks are tracked by their braces, so that
//! `super::` inside `mod tests` means the file's own module. Glob imports (`use super::*`) name
//! no item and are skipped; macros are not expanded.

use std::collections::{BTreeMap, BTreeSet};

/// A module's path from the crate root: `[]` is `lib.rs`, `["state", "merge"]` is
/// `state/merge.rs`.
pub(super) type ModulePath = Vec<String>;

/// One file of a crate: the module it is, and its code with comments and literals blanked.
#[derive(Debug)]
pub(super) struct SourceFile {
    /// The module path of the file: `a.rs` and `a/mod.rs` are `[a]`, `a/b.rs` is `[a, b]`.
    pub(super) module: ModulePath,
    /// The file's code, comments and literals replaced by spaces.
    pub(super) code: String,
}

impl SourceFile {
    /// The file at `relative` (to the crate's `src/`, with `/` separators) holding `text`.
    pub(super) fn new(relative: &str, text: &str) -> SourceFile {
        let mut module: ModulePath = relative
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_string)
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        SourceFile {
            module,
            code: blank_comments_and_literals(text),
        }
    }
}

/// A path found in code: the absolute path it names, and the module it was written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Reference {
    /// The module (file, or inline module inside it) whose code holds the path.
    pub(super) from: ModulePath,
    /// The path made absolute: `super::a::B` in `x::y` gives `[x, a, B]`.
    pub(super) path: Vec<String>,
    /// Whether the path stands in a `use` declaration at the module's top level (not inside a
    /// function or an inline module), where it may re-export the item.
    pub(super) is_module_use: bool,
    /// The name the `use` gives the item (its last segment, or the `as` alias).
    pub(super) name: String,
}

/// Every `crate::`, `super::` and `self::` path of `file`, each use-tree leaf separately.
pub(super) fn references(file: &SourceFile) -> Vec<Reference> {
    let code = file.code.as_bytes();
    let mut found = Vec::new();
    // The inline modules open at the current position: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_module: Option<String> = None;
    let mut at = 0;
    while at < code.len() {
        let byte = code[at];
        if byte == b'{' {
            depth += 1;
            if let Some(name) = pending_module.take() {
                inline.push((name, depth));
            }
            at += 1;
            continue;
        }
        if byte == b'}' {
            if inline.last().is_some_and(|(_, open)| *open == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
            at += 1;
            continue;
        }
        if byte == b';' {
            pending_module = None;
        }
        if !is_word_start(code, at) {
            at += 1;
            continue;
        }
        let word = word_at(code, at);
        let after = at + word.len();
        match word {
            "mod" => {
                let name_start = skip_space(code, after);
                let name = word_at(code, name_start);
                if !name.is_empty() {
                    pending_module = Some(name.to_string());
                }
                at = name_start + name.len();
            }
            "use" => {
                // A `use` declaration: its paths may also start at a child module or at
                // another crate (`use error::Error`, `use std::fmt`), read as `self::` paths.
                let module = current(&file.module, &inline);
                let is_module_use = inline.last().map_or(0, |(_, open)| *open) == depth;
                let (leaves, end) = use_tree(code, after);
                for (segments, alias) in leaves {
                    record(&mut found, &module, &segments, alias, is_module_use);
                }
                at = end.max(after);
            }
            "crate" | "super" | "self" if code[after..].starts_with(b"::") => {
                let module = current(&file.module, &inline);
                let (leaves, end) = use_tree(code, at);
                for (segments, alias) in leaves {
                    record(&mut found, &module, &segments, alias, false);
                }
                at = end.max(after);
            }
            _ => at = after,
        }
    }
    found
}

/// The module whose code is at the current position: the file's, plus the inline modules open.
fn current(file_module: &[String], inline: &[(String, usize)]) -> ModulePath {
    let mut module = file_module.to_vec();
    module.extend(inline.iter().map(|(name, _)| name.clone()));
    module
}

/// Adds the reference of one path leaf, unless it is a glob or climbs above the root.
fn record(
    found: &mut Vec<Reference>,
    module: &[String],
    segments: &[String],
    alias: Option<String>,
    is_module_use: bool,
) {
    if let Some(path) = absolute(module, segments) {
        let name = alias.unwrap_or_else(|| path.last().cloned().unwrap_or_default());
        found.push(Reference {
            from: module.to_vec(),
            path,
            is_module_use,
            name,
        });
    }
}

/// `segments` made absolute from `module` (a path that starts with neither `crate`, `super` nor
/// `self` is read from `module`, as `use` reads it); `None` for a glob (`*`) or a path that climbs
/// above the crate root.
fn absolute(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    if segments.last().is_some_and(|last| last == "*") {
        return None;
    }
    let mut path: Vec<String> = match segments.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        _ => module.to_vec(),
    };
    let mut rest = segments;
    if rest.first().is_some_and(|first| first == "crate") {
        rest = &rest[1..];
    }
    for segment in rest {
        match segment.as_str() {
            "super" => {
                path.pop()?;
            }
            "self" => {}
            _ => path.push(segment.clone()),
        }
    }
    Some(path)
}

/// Where each item that modules re-export comes from: for each module, the names its top-level
/// `use` declarations bring in (public or not: descendants see private imports too), and the
/// absolute path each names.
pub(super) type Imports = BTreeMap<ModulePath, BTreeMap<String, Vec<String>>>;

/// The imports of every module of `files` (their top-level `use` declarations of local paths).
pub(super) fn imports(files: &[SourceFile]) -> Imports {
    let mut imports: Imports = BTreeMap::new();
    for file in files {
        for reference in references(file) {
            if reference.is_module_use && reference.from == file.module {
                imports
                    .entry(reference.from)
                    .or_default()
                    .insert(reference.name, reference.path);
            }
        }
    }
    imports
}

/// The module that defines what `path` names: the deepest module of `modules` along it, after
/// following every re-export (`use`) it passes through; `path` itself when it names a module.
pub(super) fn defining_module(
    path: &[String],
    modules: &BTreeSet<ModulePath>,
    imports: &Imports,
) -> ModulePath {
    let mut path = path.to_vec();
    // Each step follows one `use`; a chain longer than the number of imports loops.
    let limit = imports.values().map(BTreeMap::len).sum::<usize>() + 1;
    'follow: for _ in 0..limit {
        let mut module: ModulePath = Vec::new();
        for (index, segment) in path.iter().enumerate() {
            let mut next = module.clone();
            next.push(segment.clone());
            if modules.contains(&next) {
                module = next;
                continue;
            }
            if let Some(target) = imports.get(&module).and_then(|names| names.get(segment))
                && *target != path[..=index]
            {
                let mut followed = target.clone();
                followed.extend_from_slice(&path[index + 1..]);
                path = followed;
                continue 'follow;
            }
            return module;
        }
        return module;
    }
    Vec::new()
}

/// One leaf of a use tree: its segments and its `as` alias.
type Leaf = (Vec<String>, Option<String>);

/// The leaves of the use tree (or plain path) that starts at `start`, and where the tree ends.
fn use_tree(code: &[u8], start: usize) -> (Vec<Leaf>, usize) {
    let mut leaves = Vec::new();
    let end = tree_at(code, start, &[], &mut leaves);
    (leaves, end)
}

/// Reads one use tree at `at` under `prefix` into `leaves`; returns where it ends.
fn tree_at(code: &[u8], mut at: usize, prefix: &[String], leaves: &mut Vec<Leaf>) -> usize {
    let mut segments = prefix.to_vec();
    loop {
        at = skip_space(code, at);
        if code.get(at) == Some(&b'{') {
            // A group: subtrees separated by commas, up to the matching brace.
            at += 1;
            loop {
                at = skip_space(code, at);
                match code.get(at) {
                    None => return at,
                    Some(b'}') => return at + 1,
                    Some(b',') => at += 1,
                    Some(_) => {
                        let end = tree_at(code, at, &segments, leaves);
                        if end == at {
                            // Not a path: skip one byte rather than stop reading.
                            at += 1;
                        } else {
                            at = end;
                        }
                    }
                }
            }
        }
        if code.get(at) == Some(&b'*') {
            segments.push("*".to_string());
            leaves.push((segments, None));
            return at + 1;
        }
        let word = word_at(code, at);
        if word.is_empty() {
            if segments.len() > prefix.len() {
                leaves.push((segments, None));
            }
            return at;
        }
        segments.push(word.to_string());
        at += word.len();
        let next = skip_space(code, at);
        if code[next..].starts_with(b"::") {
            at = next + 2;
            continue;
        }
        let mut alias = None;
        if word_at(code, next) == "as" {
            let alias_start = skip_space(code, next + 2);
            let name = word_at(code, alias_start);
            alias = Some(name.to_string());
            at = alias_start + name.len();
        }
        leaves.push((segments, alias));
        return at;
    }
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// Whether a word starts at `at` (the byte before it, if any, is not part of a word).
fn is_word_start(code: &[u8], at: usize) -> bool {
    is_word_byte(code[at]) && (at == 0 || !is_word_byte(code[at - 1]))
}

/// The identifier (or keyword) that starts at `at`; empty when none does.
fn word_at(code: &[u8], at: usize) -> &str {
    let end = code[at.min(code.len())..]
        .iter()
        .position(|&byte| !is_word_byte(byte))
        .map_or(code.len(), |length| at + length);
    std::str::from_utf8(&code[at.min(end)..end]).unwrap_or("")
}

fn skip_space(code: &[u8], mut at: usize) -> usize {
    while code.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// `text` with every comment, string literal and character literal replaced by spaces (line
/// breaks kept), so that what remains is code.
pub(super) fn blank_comments_and_literals(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut out[from..to.min(bytes.len())] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&byte| byte == b'\n')
                .map_or(bytes.len(), |length| at + length);
            blank(&mut out, at, end);
            at = end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest.
            let mut nesting = 0;
            let mut end = at;
            while end < bytes.len() {
                if bytes[end..].starts_with(b"/*") {
                    nesting += 1;
                    end += 2;
                } else if bytes[end..].starts_with(b"*/") {
                    nesting -= 1;
                    end += 2;
                    if nesting == 0 {
                        break;
                    }
                } else {
                    end += 1;
                }
            }
            blank(&mut out, at, end);
            at = end;
        } else if let Some(hashes) = raw_string_start(bytes, at) {
            // r"...", r#"..."#, br"...": ends at a quote followed by as many hashes.
            let open = at
                + bytes[at..]
                    .iter()
                    .position(|&byte| byte == b'"')
                    .unwrap_or(0)
                + 1;
            let mut closing = vec![b'"'];
            closing.extend(std::iter::repeat_n(b'#', hashes));
            let end = bytes[open..]
                .windows(closing.len())
                .position(|window| window == closing.as_slice())
                .map_or(bytes.len(), |offset| open + offset + closing.len());
            blank(&mut out, at, end);
            at = end;
        } else if bytes[at] == b'"' {
            let mut end = at + 1;
            while end < bytes.len() && bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, at, end + 1);
            at = end + 1;
        } else if bytes[at] == b'\'' {
            // A character literal ('x', '\n', '\u{1F600}', a multi-byte character); otherwise a
            // lifetime or label, which is code.
            let end = if bytes.get(at + 1) == Some(&b'\\') {
                bytes[at + 2..]
                    .iter()
                    .position(|&byte| byte == b'\'')
                    .map(|length| at + 2 + length + 1)
            } else {
                let width = text[at + 1..].chars().next().map_or(1, char::len_utf8);
                (bytes.get(at + 1 + width) == Some(&b'\'')).then_some(at + 2 + width)
            };
            match end {
                Some(end) => {
                    blank(&mut out, at, end);
                    at = end;
                }
                None => at += 1,
            }
        } else {
            at += 1;
        }
    }
    // Only ASCII bytes were replaced, by ASCII spaces; a multi-byte character inside a blanked
    // range became spaces whole.
    String::from_utf8(out).unwrap_or_default()
}

/// The number of `#` of a raw string literal that starts at `at` (`r"`, `r#"`, `br"`), if one
/// does.
fn raw_string_start(bytes: &[u8], at: usize) -> Option<usize> {
    if at > 0 && is_word_byte(bytes[at - 1]) {
        return None;
    }
    let mut index = at;
    if bytes.get(index) == Some(&b'b') {
        index += 1;
    }
    if bytes.get(index) != Some(&b'r') {
        return None;
    }
    index += 1;
    let hashes = bytes[index..]
        .iter()
        .take_while(|&&byte| byte == b'#')
        .count();
    (bytes.get(index + hashes) == Some(&b'"')).then_some(hashes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

    fn paths(relative: &str, text: &str) -> Vec<Vec<String>> {
        references(&SourceFile::new(relative, text))
            .into_iter()
            .map(|reference| reference.path)
            .collect()
    }

    #[test]
    fn comments_and_literals_are_blanked_but_lifetimes_stay() {
        let text = "let a = \"crate::x\"; // crate::y\nlet b = r#\"crate::z\"#; /* crate::w */\n\
                    fn f<'a>(c: &'a str) -> char { '\\'' }\n";
        let code = blank_comments_and_literals(text);
        assert!(!code.contains("crate::"), "{code}");
        assert!(code.contains("fn f<'a>(c: &'a str)"), "{code}");
        assert_eq!(code.lines().count(), text.lines().count());
    }

    #[test]
    fn use_trees_give_one_absolute_path_per_leaf() {
        let text = "use crate::{Error, Result, a::{self, B as C}};\nuse super::d::E;\n\
                    fn f() { self::g::h(); }\n";
        assert_eq!(
            paths("x/y.rs", text),
            vec![
                strings(&["Error"]),
                strings(&["Result"]),
                strings(&["a"]),
                strings(&["a", "B"]),
                strings(&["x", "d", "E"]),
                strings(&["x", "y", "g", "h"]),
            ]
        );
    }

    #[test]
    fn super_inside_an_inline_module_is_the_files_own_module() {
        let text = "use crate::A;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::B;\n    \
                    fn f() { if true { super::C; } }\n}\nfn g() { super::D; }\n";
        assert_eq!(
            paths("error.rs", text),
            vec![
                strings(&["A"]),
                strings(&["error", "B"]),
                strings(&["error", "C"]),
                strings(&["D"]),
            ]
        );
    }

    #[test]
    fn re_exports_are_followed_to_the_defining_module() {
        let files = [
            SourceFile::new(
                "lib.rs",
                "mod dtype;\nmod error;\npub use dtype::DType;\npub use error::{Error, Result as R};\n",
            ),
            SourceFile::new("dtype.rs", "use crate::{Error, R};\n"),
            SourceFile::new("error.rs", "use crate::DType;\n"),
            SourceFile::new("state/mod.rs", "mod merge;\npub use merge::merge_states;\n"),
            SourceFile::new("state/merge.rs", "pub fn merge_states() {}\n"),
        ];
        let modules: BTreeSet<ModulePath> = files.iter().map(|file| file.module.clone()).collect();
        let imports = imports(&files);
        let defining = |path: &[&str]| defining_module(&strings(path), &modules, &imports);
        assert_eq!(defining(&["Error"]), strings(&["error"]));
        assert_eq!(defining(&["R"]), strings(&["error"]));
        assert_eq!(defining(&["DType"]), strings(&["dtype"]));
        assert_eq!(
            defining(&["state", "merge_states"]),
            strings(&["state", "merge"])
        );
        // An item of the root itself, and a name nobody defines, belong to the root.
        assert_eq!(defining(&["nothing"]), Vec::<String>::new());
    }

    #[test]
    fn a_use_of_itself_does_not_loop_forever() {
        let files = [SourceFile::new(
            "lib.rs",
            "pub use crate::a::b;\nmod a { pub use crate::b; }\n",
        )];
        let modules: BTreeSet<ModulePath> = files.iter().map(|file| file.module.clone()).collect();
        let imports = imports(&files);
        assert_eq!(
            defining_module(&strings(&["b"]), &modules, &imports),
            Vec::<String>::new()
        );
    }
}
