//! `cargo xtask valgrind`: the Rust test binaries of the tensor and Arrow layers and of the
//! loader under memcheck, then the hostile Python suites against the installed wheel.
//!
//! Those are the crates that own foreign memory (imported managed tensors, exported buffers) or
//! raw memory of their own (the loader's memory maps, its gathers into uninitialised buffers and
//! its writable copies), so leaks and invalid reads there are what memcheck is for.
//! Doc tests are not run: rustdoc builds them on the fly, outside `cargo test --no-run`.
//!
//! The Python run uses the system allocator everywhere (`PYTHONMALLOC=malloc`,
//! `ARROW_DEFAULT_MEMORY_POOL=system`), so that memcheck sees every allocation, and fails on any
//! invalid read or write whose stack passes through the native module `_arrow_dlpack`; errors
//! wholly inside CPython, numpy or pyarrow are reported in the log but are not ours to fix.

use std::fs;
use std::path::{Path, PathBuf};

use crate::Result;
use crate::process::Cmd;
use crate::python::PythonEnv;

/// The packages whose test binaries run under valgrind.
const PACKAGES: &[&str] = &[
    "arrow-dlpack-tensor",
    "arrow-dlpack",
    "arrow-dlpack-c",
    "arrow-dlpack-loader",
];

/// The lines of a memcheck log that summarise a run.
const SUMMARY_MARKERS: &[&str] = &[
    "in use at exit:",
    "total heap usage:",
    "definitely lost:",
    "indirectly lost:",
    "possibly lost:",
    "still reachable:",
    "ERROR SUMMARY:",
];

/// One test binary that cargo built.
#[derive(Debug, PartialEq)]
struct TestBinary {
    executable: PathBuf,
    /// The directory of the package's manifest, where `cargo test` would run the binary.
    package_dir: PathBuf,
}

/// The help of `cargo xtask valgrind`.
pub(crate) fn help() -> String {
    crate::wrap(
        &format!(
            "Builds the test binaries of {} and runs each under valgrind memcheck, failing on \
             errors and definite leaks (arguments after `--` go to every test binary: a test name \
             filter, say; doc tests are not run); then the hostile Python suites against the \
             release wheel, failing on an error whose stack passes through the native module.",
            PACKAGES.join(", ")
        ),
        0,
    )
}

/// Builds the test binaries and runs each under memcheck with `forwarded` as its arguments.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    let mut build = Cmd::cargo(root).args(["test", "--no-run", "--tests"]);
    for package in PACKAGES {
        build = build.args(["--package", package]);
    }
    // Diagnostics go to the terminal as usual; standard output carries one JSON object a line.
    let messages = build
        .arg("--message-format=json-render-diagnostics")
        .read_stdout()?;
    let binaries = test_binaries(&messages);
    if binaries.is_empty() {
        return Err(format!(
            "cargo built no test binary for {}",
            PACKAGES.join(", ")
        ));
    }

    let logs = root.join("target").join("valgrind");
    fs::create_dir_all(&logs)
        .map_err(|error| format!("could not create {}: {error}", logs.display()))?;
    let mut failures = Vec::new();
    for binary in &binaries {
        let name = binary
            .executable
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let log = logs.join(format!("{name}.log"));
        let memcheck = Cmd::new(root, "valgrind")
            .args([
                "--tool=memcheck",
                "--error-exitcode=1",
                "--leak-check=full",
                "--errors-for-leak-kinds=definite",
            ])
            .arg(format!("--log-file={}", log.display()))
            .arg(&binary.executable)
            .args(forwarded)
            // Snapshots are compared, never written, as in `cargo xtask test`.
            .env("INSTA_UPDATE", "no")
            .env("CI", "true")
            // Property tests run far fewer cases than natively: memcheck makes each case
            // tens of times slower, and the leaks it looks for show up in the first cases.
            .env(
                "PROPTEST_CASES",
                std::env::var("PROPTEST_CASES").unwrap_or_else(|_| "16".to_string()),
            )
            .current_dir(&binary.package_dir);
        let display = memcheck.display();
        let status = memcheck.status()?;
        let report = fs::read_to_string(&log).unwrap_or_default();
        for line in summary(&report) {
            println!("    {line}");
        }
        if !status.success() {
            failures.push(format!(
                "`{display}` failed: {status} (full memcheck log: {})",
                log.display()
            ));
        }
    }
    if let Err(failure) = python_suites(root, &logs) {
        failures.push(failure);
    }
    if failures.is_empty() {
        println!(
            "valgrind: {} test binaries with no memcheck error; the hostile Python suites with no \
             invalid access in _arrow_dlpack",
            binaries.len()
        );
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The Python suites run under memcheck, relative to the Python test directory.
const PYTHON_SUITES: &[&str] = &[
    "test_hostile_producers.py",
    "test_valid_producers.py",
    "test_hostile_devices.py",
    "test_hostile_arrow_c.py",
];

/// The native module's file name stem, which marks its frames in memcheck stacks.
const NATIVE_MODULE: &str = "_arrow_dlpack";

/// Runs the hostile Python suites under memcheck against a freshly installed release wheel.
fn python_suites(root: &Path, logs: &Path) -> Result {
    let env = PythonEnv::ensure(root)?;
    env.build_and_install_wheel(root)?;
    let log = logs.join("python-hostile.log");
    let mut memcheck = Cmd::new(root, "valgrind")
        .args(["--tool=memcheck", "--error-limit=no", "--num-callers=40"])
        .arg(format!("--log-file={}", log.display()))
        .arg(env.python())
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
        ])
        .env("PYTHONMALLOC", "malloc")
        .env("ARROW_DEFAULT_MEMORY_POOL", "system")
        // Our warm-page pool off too: every output is then its own allocation, freed when its
        // buffer is dropped, so memcheck sees a read after the free instead of a pooled block.
        .env("ARROW_DLPACK_MEMORY_POOL_LIMIT", "0")
        .current_dir(&root.join("target"));
    for suite in PYTHON_SUITES {
        memcheck = memcheck.arg(root.join(crate::test::PYTHON_TESTS).join(suite));
    }
    let display = memcheck.display();
    let status = memcheck.status()?;
    let report = fs::read_to_string(&log).unwrap_or_default();
    for line in summary(&report) {
        println!("    {line}");
    }
    let ours = invalid_accesses_through(&report, NATIVE_MODULE);
    println!("    invalid reads or writes through {NATIVE_MODULE}: {ours}");
    if !status.success() {
        return Err(format!(
            "`{display}` failed: {status} (full memcheck log: {})",
            log.display()
        ));
    }
    if ours > 0 {
        return Err(format!(
            "memcheck found {ours} invalid read(s) or write(s) through {NATIVE_MODULE} (full log: \
             {})",
            log.display()
        ));
    }
    Ok(())
}

/// The number of memcheck errors that are invalid reads or writes with `module` in their stack.
fn invalid_accesses_through(report: &str, module: &str) -> usize {
    let mut count = 0;
    let mut in_invalid = false;
    let mut counted = false;
    for line in report.lines() {
        let body = match line.split_once("== ") {
            Some((prefix, rest)) if prefix.starts_with("==") => rest,
            _ => line.trim_start_matches(|c: char| c == '=' || c.is_ascii_digit()),
        };
        if body.starts_with("Invalid read") || body.starts_with("Invalid write") {
            in_invalid = true;
            counted = false;
        } else if body.trim().is_empty() {
            in_invalid = false;
        } else if in_invalid && !counted && body.contains(module) {
            count += 1;
            counted = true;
        }
    }
    count
}

/// The test binaries in `cargo --message-format=json` output: artifacts built with the test
/// profile that have an executable.
fn test_binaries(messages: &str) -> Vec<TestBinary> {
    messages
        .lines()
        .filter(|line| line.contains(r#""reason":"compiler-artifact""#))
        .filter(|line| profile_is_test(line))
        .filter_map(|line| {
            let executable = PathBuf::from(string_field(line, "executable")?);
            let manifest = PathBuf::from(string_field(line, "manifest_path")?);
            Some(TestBinary {
                executable,
                package_dir: manifest.parent()?.to_path_buf(),
            })
        })
        .collect()
}

/// Whether the artifact's `profile` object (flat, so it ends at the first `}`) says `test`.
fn profile_is_test(line: &str) -> bool {
    line.split_once(r#""profile":{"#)
        .and_then(|(_, rest)| rest.split_once('}'))
        .is_some_and(|(profile, _)| profile.contains(r#""test":true"#))
}

/// The value of the first string field `name` in a line of JSON, unescaped; `None` when the
/// field is absent or not a string (`"executable":null`).
fn string_field(line: &str, name: &str) -> Option<String> {
    let (_, rest) = line.split_once(&format!("\"{name}\":\""))?;
    let mut value = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'r' => value.push('\r'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

/// The summary lines of a memcheck log, without the `==pid==` prefix.
fn summary(report: &str) -> Vec<&str> {
    report
        .lines()
        .map(|line| match line.split_once("== ") {
            Some((prefix, rest)) if prefix.starts_with("==") => rest,
            _ => line,
        })
        .filter(|line| SUMMARY_MARKERS.iter().any(|marker| line.contains(marker)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGES: &str = concat!(
        r#"{"reason":"compiler-artifact","package_id":"path+file:///repo/crates/tensor#arrow-dlpack-tensor@0.1.0","manifest_path":"/repo/crates/tensor/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"arrow_dlpack_tensor","src_path":"/repo/crates/tensor/src/lib.rs","edition":"2024","doc":true,"doctest":true,"test":true},"profile":{"opt_level":"0","debuginfo":2,"debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/repo/target/debug/deps/arrow_dlpack_tensor-1"],"executable":"/repo/target/debug/deps/arrow_dlpack_tensor-1","fresh":true}"#,
        "\n",
        r#"{"reason":"compiler-artifact","package_id":"path+file:///repo/crates/tensor#arrow-dlpack-tensor@0.1.0","manifest_path":"/repo/crates/tensor/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"arrow_dlpack_tensor","src_path":"/repo/crates/tensor/src/lib.rs","edition":"2024","doc":true,"doctest":true,"test":true},"profile":{"opt_level":"0","debuginfo":2,"debug_assertions":true,"overflow_checks":true,"test":false},"features":[],"filenames":["/repo/target/debug/deps/libarrow_dlpack_tensor-2.rlib"],"executable":null,"fresh":true}"#,
        "\n",
        r#"{"reason":"compiler-artifact","package_id":"registry+https://example/#serde@1.0.0","manifest_path":"/cargo/serde/Cargo.toml","target":{"kind":["custom-build"],"crate_types":["bin"],"name":"build-script-build","src_path":"/cargo/serde/build.rs","edition":"2021","doc":false,"doctest":false,"test":false},"profile":{"opt_level":"0","debuginfo":0,"debug_assertions":true,"overflow_checks":true,"test":false},"features":[],"filenames":["/repo/target/debug/build/serde-3/build-script-build"],"executable":null,"fresh":true}"#,
        "\n",
        r#"{"reason":"compiler-artifact","package_id":"path+file:///repo/crates/tensor#arrow-dlpack-tensor@0.1.0","manifest_path":"/repo/crates/tensor/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"import","src_path":"/repo/crates/tensor/tests/import.rs","edition":"2024","doc":false,"doctest":false,"test":true},"profile":{"opt_level":"0","debuginfo":2,"debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/repo/target/debug/deps/import-4"],"executable":"/repo/target/debug/deps/import-4","fresh":false}"#,
        "\n",
        r#"{"reason":"build-finished","success":true}"#,
        "\n",
    );

    #[test]
    fn test_binaries_are_the_test_profile_artifacts_with_executables() {
        assert_eq!(
            test_binaries(MESSAGES),
            vec![
                TestBinary {
                    executable: PathBuf::from("/repo/target/debug/deps/arrow_dlpack_tensor-1"),
                    package_dir: PathBuf::from("/repo/crates/tensor"),
                },
                TestBinary {
                    executable: PathBuf::from("/repo/target/debug/deps/import-4"),
                    package_dir: PathBuf::from("/repo/crates/tensor"),
                },
            ]
        );
    }

    #[test]
    fn string_field_unescapes_and_refuses_null() {
        let line = r#"{"executable":null,"path":"C:\\dir\\a \"b\" \u00e9"}"#;
        assert_eq!(string_field(line, "executable"), None);
        assert_eq!(
            string_field(line, "path").as_deref(),
            Some(r#"C:\dir\a "b" é"#)
        );
    }

    #[test]
    fn invalid_accesses_are_counted_only_through_the_module() {
        let report = "\
==7== Invalid read of size 8
==7==    at 0x1: decode (_arrow_dlpack.abi3.so)
==7==    by 0x2: PyObject_Call (python3.11)
==7== 
==7== Invalid write of size 4
==7==    at 0x3: memset (libc.so.6)
==7== 
==7== Conditional jump or move depends on uninitialised value(s)
==7==    at 0x4: f (_arrow_dlpack.abi3.so)
==7== 
==7== Invalid read of size 1
==7==    at 0x5: g (libpython3.11.so)
==7==    by 0x6: h (_arrow_dlpack.abi3.so)
==7==    by 0x7: i (_arrow_dlpack.abi3.so)
==7== 
";
        assert_eq!(invalid_accesses_through(report, "_arrow_dlpack"), 2);
        assert_eq!(invalid_accesses_through(report, "numpy"), 0);
    }

    #[test]
    fn summary_keeps_the_summary_lines_without_the_pid() {
        let report = "\
==42== Memcheck, a memory error detector
==42== HEAP SUMMARY:
==42==     in use at exit: 0 bytes in 0 blocks
==42==   total heap usage: 10 allocs, 10 frees, 1,024 bytes allocated
==42== All heap blocks were freed -- no leaks are possible
==42== ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 0 from 0)
";
        assert_eq!(
            summary(report),
            vec![
                "    in use at exit: 0 bytes in 0 blocks",
                "  total heap usage: 10 allocs, 10 frees, 1,024 bytes allocated",
                "ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 0 from 0)",
            ]
        );
    }
}
