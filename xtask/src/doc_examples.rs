//! Every Rust example of the documentation compiled, and run, from the user's side of the
//! dependency, as a stage of `cargo xtask test`.
//!
//! rustdoc tests an example inside its own crate, where the crate's private dependencies are in
//! scope: an example of the tensor crate that names `arrow_dlpack_tensor::Device` passes there
//! and fails (E0432) in a user's crate, which depends on `arrow-dlpack` alone. So the examples
//! (the ```` ``` ```` blocks of `///` and `//!` comments, and the ```` ```rust ```` blocks of
//! README.md and docs/*.md) are written into user crates under `target/doc-examples`, each
//! depending, by path, only on the crate a user of that example depends on (and on the Arrow
//! crates such a user has anyway), and `cargo test` runs them in one workspace that shares the
//! build directory and the lock file of this one:
//!
//! - `arrow-dlpack-user`: `arrow-dlpack` (feature `ndarray`); the examples of the tensor crate
//!   and of `arrow-dlpack`, and the Markdown examples that name neither the loader nor the C
//!   interfaces;
//! - `loader-user`: `arrow-dlpack-loader`; the loader's examples and the Markdown ones that name
//!   `arrow_dlpack_loader`;
//! - `arrow-c-user`: `arrow-dlpack-c` and `arrow-dlpack`; the examples of the C interfaces.
//!
//! The tensor crate's own examples map `arrow_dlpack` onto that crate with one hidden line
//! (`# mod arrow_dlpack { ... }`), so that they are written as a user writes them; that line is
//! left out here, where `arrow_dlpack` is the real crate. An example is a test (`no_run`: compiled
//! only; `ignore` and `compile_fail`: left out, as rustdoc does); one with a `fn main` runs it,
//! any other runs as a function body whose last expression may be a `Result`.

use std::fs;
use std::path::{Path, PathBuf};

use crate::Result;
use crate::process::Cmd;

/// Where the user crates are written, relative to the project root.
const OUTPUT: &str = "target/doc-examples";

/// The crates that a user of these crates has as dependencies anyway (Arrow's, and `image` to make
/// the encoded pictures that the image examples decode), with the workspace's
/// requirements (so that the build directory's artifacts serve).
const COMMON_DEPENDENCIES: &str = "\
arrow-array = { version = \"60\", default-features = false, features = [\"ffi\"] }
arrow-buffer = { version = \"60\", default-features = false }
arrow-schema = { version = \"60\", default-features = false, features = [\"ffi\"] }
image = { version = \"0.25.10\", default-features = false, features = [\"jpeg\", \"png\", \"webp\", \"gif\", \"bmp\"] }
";

/// One user crate: its name, its dependencies on the workspace's crates, the source folders
/// whose doc comments it compiles, and the names by which a Markdown example belongs to it.
struct UserCrate {
    name: &'static str,
    dependencies: &'static [(&'static str, &'static str, &'static str)],
    sources: &'static [&'static str],
    markdown_marks: &'static [&'static str],
}

/// The user crates; a Markdown example goes to the first whose marks it contains, the last
/// taking the rest.
const USER_CRATES: &[UserCrate] = &[
    UserCrate {
        name: "loader-user",
        dependencies: &[(
            "arrow-dlpack-loader",
            "crates/loader",
            // The features the workspace's build gives it (the Python bindings turn these on).
            "[\"object-store\", \"images\"]",
        )],
        sources: &["crates/loader/src"],
        markdown_marks: &["arrow_dlpack_loader"],
    },
    UserCrate {
        name: "arrow-c-user",
        dependencies: &[
            ("arrow-dlpack-c", "crates/arrow-c", "[]"),
            ("arrow-dlpack", "crates/arrow-dlpack", "[\"ndarray\"]"),
        ],
        sources: &["crates/arrow-c/src"],
        markdown_marks: &["arrow_dlpack_c"],
    },
    UserCrate {
        name: "arrow-dlpack-user",
        // The features the workspace's build gives it (the Rust stage and the bindings).
        dependencies: &[(
            "arrow-dlpack",
            "crates/arrow-dlpack",
            "[\"ndarray\", \"images\"]",
        )],
        sources: &["crates/tensor/src", "crates/arrow-dlpack/src"],
        markdown_marks: &[],
    },
];

/// The Markdown files whose ```` ```rust ```` blocks are examples, besides `docs/*.md`.
const MARKDOWN: &[&str] = &["README.md"];

/// One example: where it is written, its code (hidden lines shown) and how rustdoc would treat
/// it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Example {
    /// `path:line` of the opening fence.
    pub(crate) place: String,
    pub(crate) code: String,
    /// Compiled, not run.
    pub(crate) no_run: bool,
    pub(crate) should_panic: bool,
}

/// The help of `cargo xtask doc-examples`.
pub(crate) fn help() -> String {
    crate::wrap(
        &format!(
            "Only the doc-examples stage of `test`: every Rust example of the documentation \
             compiled and run in user crates under {OUTPUT}, each depending on one crate of the \
             workspace only."
        ),
        0,
    )
}

/// Writes the user crates and runs `cargo test` on them.
pub(crate) fn run(root: &Path) -> Result {
    let output = root.join(OUTPUT);
    let mut markdown: Vec<PathBuf> = MARKDOWN.iter().map(|path| root.join(path)).collect();
    let docs = root.join("docs");
    let mut entries: Vec<PathBuf> = fs::read_dir(&docs)
        .map_err(|error| format!("could not list {}: {error}", docs.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension() == Some("md".as_ref()))
        .collect();
    entries.sort();
    markdown.extend(entries);
    let mut markdown_examples = Vec::new();
    for path in &markdown {
        markdown_examples.extend(markdown_blocks(&relative(root, path), &read(path)?));
    }
    let mut members = Vec::new();
    let mut total = 0;
    for (index, user) in USER_CRATES.iter().enumerate() {
        let mut examples = Vec::new();
        for source in user.sources {
            let mut files = Vec::new();
            crate::tidy::walk(&root.join(source), &mut files)?;
            files.sort();
            for file in files
                .iter()
                .filter(|file| file.extension() == Some("rs".as_ref()))
            {
                examples.extend(comment_blocks(&relative(root, file), &read(file)?));
            }
        }
        let last = index + 1 == USER_CRATES.len();
        examples.extend(
            markdown_examples
                .iter()
                .filter(|example| {
                    let earlier = USER_CRATES[..index].iter().any(|other| {
                        other
                            .markdown_marks
                            .iter()
                            .any(|mark| example.code.contains(mark))
                    });
                    let mine = user
                        .markdown_marks
                        .iter()
                        .any(|mark| example.code.contains(mark));
                    !earlier && (mine || last)
                })
                .cloned(),
        );
        total += examples.len();
        write_crate(root, &output.join(user.name), user, &examples)?;
        members.push(user.name);
    }
    write(
        &output.join("Cargo.toml"),
        &workspace_manifest(&read(&root.join("Cargo.toml"))?, &members),
    )?;
    // The workspace's lock file, so that the examples build against the versions it tests
    // (and reuse their artifacts); cargo adds the user crates to it.
    write(&output.join("Cargo.lock"), &read(&root.join("Cargo.lock"))?)?;
    println!(
        "doc examples: {total} in {} user crates under {OUTPUT}",
        members.len()
    );
    Cmd::cargo(root)
        .args(["test", "--workspace", "--manifest-path"])
        .arg(output.join("Cargo.toml"))
        .run()
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|error| format!("could not read {}: {error}", path.display()))
}

/// Writes `text` to `path` unless it holds exactly that already (so that cargo does not
/// rebuild what did not change), making its folder.
fn write(path: &Path, text: &str) -> Result {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|error| format!("could not create {}: {error}", parent.display()))?;
    }
    fs::write(path, text).map_err(|error| format!("could not write {}: {error}", path.display()))
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// The manifest of the examples' workspace: its members, and the profiles of the project's
/// manifest (`root_manifest`), so that the build directory's artifacts are reused.
fn workspace_manifest(root_manifest: &str, members: &[&str]) -> String {
    let mut manifest = format!(
        "# Generated by `cargo xtask test` (xtask/src/doc_examples.rs); not part of the project.\n\
         [workspace]\nresolver = \"3\"\nmembers = [{}]\n",
        members
            .iter()
            .map(|member| format!("\"{member}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut in_profile = false;
    for line in root_manifest.lines() {
        if line.starts_with('[') {
            in_profile = line.starts_with("[profile.");
        }
        if in_profile {
            manifest.push_str(line);
            manifest.push('\n');
        }
    }
    manifest
}

/// Writes one user crate: its manifest, an empty library and the examples as tests.
fn write_crate(root: &Path, dir: &Path, user: &UserCrate, examples: &[Example]) -> Result {
    let mut manifest = format!(
        "[package]\nname = \"{}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\n",
        user.name
    );
    for (name, path, features) in user.dependencies {
        manifest.push_str(&format!(
            "{name} = {{ path = \"{}\", features = {features} }}\n",
            root.join(path).display()
        ));
    }
    manifest.push_str(COMMON_DEPENDENCIES);
    write(&dir.join("Cargo.toml"), &manifest)?;
    write(
        &dir.join("src").join("lib.rs"),
        "//! A user's crate, generated by `cargo xtask test`: its tests are the documentation's \
         examples.\n",
    )?;
    write(&dir.join("tests").join("examples.rs"), &test_file(examples))
}

/// The test file of `examples`: one module per example.
pub(crate) fn test_file(examples: &[Example]) -> String {
    let mut text = String::from(
        "//! The documentation's examples, generated by `cargo xtask test`.\n\n\
         /// What an example's code ends with: nothing, or a `Result` that must be `Ok`.\n\
         trait Outcome {\n    fn check(self);\n}\n\n\
         impl Outcome for () {\n    fn check(self) {}\n}\n\n\
         impl<E: std::fmt::Debug> Outcome for Result<(), E> {\n    \
         fn check(self) {\n        self.unwrap();\n    }\n}\n",
    );
    for (index, example) in examples.iter().enumerate() {
        let attributes = match (example.no_run, example.should_panic) {
            (true, _) => "#[allow(dead_code)]",
            (false, true) => "#[test]\n    #[should_panic]",
            (false, false) => "#[test]",
        };
        let has_main = example
            .code
            .lines()
            .any(|line| line.trim_start().starts_with("fn main(") || line.contains(" fn main("));
        let body = if has_main {
            format!(
                "{}\n    {attributes}\n    fn example() {{\n        crate::Outcome::check(main());\n    }}\n",
                example.code
            )
        } else if ends_with_result(&example.code) {
            format!(
                "    {attributes}\n    fn example() {{\n        let outcome = (|| {{\n{}\n        }})();\n        \
                 crate::Outcome::check(outcome);\n    }}\n",
                example.code
            )
        } else {
            // A fragment (of a Markdown page, say) whose `?` needs a function that returns a
            // `Result`: it gets one, as a reader would write it.
            format!(
                "    {attributes}\n    fn example() {{\n        let outcome = (|| -> Result<(), Box<dyn std::error::Error>> {{\n{}\n        \
                 Ok(())\n        }})();\n        crate::Outcome::check(outcome);\n    }}\n",
                example.code
            )
        };
        text.push_str(&format!(
            "\n// {}\n#[allow(unused, clippy::all)]\nmod example_{index} {{\n{body}}}\n",
            example.place
        ));
    }
    text
}

/// Whether `code` ends with an expression `Ok(...)` (rustdoc's way of letting an example use
/// `?`, as `Ok::<(), Error>(())`).
fn ends_with_result(code: &str) -> bool {
    code.lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .is_some_and(|line| line.starts_with("Ok(") || line.starts_with("Ok::<"))
}

/// The examples of the `///` and `//!` comments of a Rust file.
pub(crate) fn comment_blocks(path: &str, text: &str) -> Vec<Example> {
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let content = ["///", "//!"].iter().find_map(|marker| {
            trimmed
                .strip_prefix(marker)
                .filter(|rest| !rest.starts_with('/'))
        });
        lines.push((
            number + 1,
            content.map(|rest| rest.strip_prefix(' ').unwrap_or(rest)),
        ));
    }
    fenced_blocks(path, &lines, true)
}

/// The ```` ```rust ```` examples of a Markdown file.
pub(crate) fn markdown_blocks(path: &str, text: &str) -> Vec<Example> {
    let lines: Vec<(usize, Option<&str>)> = text
        .lines()
        .enumerate()
        .map(|(number, line)| (number + 1, Some(line)))
        .collect();
    fenced_blocks(path, &lines, false)
}

/// The Rust examples among fenced blocks of `lines` (each with its line number, `None` where a
/// line is not documentation); an unlabelled fence is Rust where `unlabelled_is_rust` (rustdoc's
/// rule for doc comments).
fn fenced_blocks(
    path: &str,
    lines: &[(usize, Option<&str>)],
    unlabelled_is_rust: bool,
) -> Vec<Example> {
    let mut examples = Vec::new();
    let mut open: Option<(usize, Vec<String>, Vec<String>)> = None;
    for (number, line) in lines {
        let Some(line) = line else {
            open = None;
            continue;
        };
        let trimmed = line.trim();
        match open.as_mut() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let tokens: Vec<String> = info
                        .split([',', ' '])
                        .map(str::trim)
                        .filter(|token| !token.is_empty())
                        .map(str::to_string)
                        .collect();
                    open = Some((*number, tokens, Vec::new()));
                }
            }
            Some((start, tokens, code)) => {
                if trimmed == "```" {
                    if let Some(example) = example(path, *start, tokens, code, unlabelled_is_rust) {
                        examples.push(example);
                    }
                    open = None;
                } else {
                    code.push(line.to_string());
                }
            }
        }
    }
    examples
}

/// The example of one fenced block, if it is a Rust example that rustdoc would compile.
fn example(
    path: &str,
    start: usize,
    tokens: &[String],
    code: &[String],
    unlabelled_is_rust: bool,
) -> Option<Example> {
    const ATTRIBUTES: &[&str] = &["rust", "no_run", "should_panic", "ignore", "compile_fail"];
    let is_rust = if tokens.is_empty() {
        unlabelled_is_rust
    } else {
        tokens
            .iter()
            .all(|token| ATTRIBUTES.contains(&token.as_str()) || token.starts_with("edition"))
            && (unlabelled_is_rust || tokens.iter().any(|token| token == "rust"))
    };
    let has = |name: &str| tokens.iter().any(|token| token == name);
    if !is_rust || has("ignore") || has("compile_fail") {
        return None;
    }
    let lines: Vec<String> = code
        .iter()
        // The tensor crate's line that maps `arrow_dlpack` onto itself.
        .filter(|line| !line.trim_start().starts_with("# mod arrow_dlpack"))
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed == "#" {
                String::new()
            } else if let Some(shown) = trimmed.strip_prefix("# ") {
                let indent = &line[..line.len() - trimmed.len()];
                format!("{indent}{shown}")
            } else {
                line.clone()
            }
        })
        .collect();
    Some(Example {
        place: format!("{path}:{start}"),
        code: lines.join("\n"),
        no_run: has("no_run"),
        should_panic: has("should_panic"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_comment_blocks_are_rust_unless_labelled_otherwise_and_hidden_lines_are_shown() {
        let text = "//! Crate.\n//!\n//! ```\n//! # mod arrow_dlpack { pub use x::*; }\n\
                    //! use arrow_dlpack::Tensor;\n//! # let hidden = 1;\n//! ```\n\
                    /// ```toml\n/// [dependencies]\n/// ```\n\
                    /// ```no_run\n/// run();\n/// ```\n\
                    /// ```ignore\n/// broken\n/// ```\nfn f() {}\n";
        let examples = comment_blocks("src/lib.rs", text);
        assert_eq!(
            examples,
            vec![
                Example {
                    place: "src/lib.rs:3".to_string(),
                    code: "use arrow_dlpack::Tensor;\nlet hidden = 1;".to_string(),
                    no_run: false,
                    should_panic: false,
                },
                Example {
                    place: "src/lib.rs:11".to_string(),
                    code: "run();".to_string(),
                    no_run: true,
                    should_panic: false,
                },
            ]
        );
    }

    #[test]
    fn markdown_blocks_are_rust_only_when_labelled_rust() {
        let text = "# Title\n\n```\nplain\n```\n\n```python\nimport x\n```\n\n```rust\nfn main() {}\n```\n";
        let examples = markdown_blocks("README.md", text);
        assert_eq!(examples.len(), 1);
        assert_eq!(examples[0].place, "README.md:11");
        assert_eq!(examples[0].code, "fn main() {}");
    }

    #[test]
    fn examples_become_tests_that_run_main_or_the_body_and_check_its_result() {
        let examples = [
            Example {
                place: "a.rs:1".to_string(),
                code: "fn main() -> Result<(), String> { Ok(()) }".to_string(),
                no_run: false,
                should_panic: false,
            },
            Example {
                place: "b.rs:2".to_string(),
                code: "let x = 1;\nOk::<(), String>(())".to_string(),
                no_run: true,
                should_panic: false,
            },
        ];
        let file = test_file(&examples);
        assert!(
            file.contains("// a.rs:1\n#[allow(unused, clippy::all)]\nmod example_0 {\nfn main()"),
            "{file}"
        );
        assert!(
            file.contains("#[test]\n    fn example() {\n        crate::Outcome::check(main());"),
            "{file}"
        );
        assert!(file.contains("mod example_1 {\n    #[allow(dead_code)]\n    fn example() {\n        let outcome = (|| {\nlet x = 1;"), "{file}");
    }

    #[test]
    fn the_workspace_manifest_keeps_the_projects_profiles() {
        let manifest = workspace_manifest(
            "[workspace]\nmembers = []\n\n[profile.dev.package.\"*\"]\ndebug = false\n\n[workspace.lints.rust]\nx = 1\n",
            &["a-user"],
        );
        assert!(manifest.contains("members = [\"a-user\"]"), "{manifest}");
        assert!(
            manifest.contains("[profile.dev.package.\"*\"]\ndebug = false\n"),
            "{manifest}"
        );
        assert!(!manifest.contains("lints"), "{manifest}");
    }
}
