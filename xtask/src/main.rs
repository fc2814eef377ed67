//! `cargo xtask`: the workspace's one command surface.
//!
//! Each command lives in its own module with a `run` function; `.cargo/config.toml` wires the
//! `cargo xtask` alias to this binary.
//! Children are started with argument vectors through `process::Cmd`, never through a shell,
//! from the project root, which comes from `CARGO_MANIFEST_DIR` at compile time.
//! Everything after `--` on the command line is forwarded to the tool a command wraps.

mod bench;
mod cache;
mod demo;
mod gpu_check;
mod lint;
mod process;
mod python;
mod stages;
mod test;
mod tidy;
mod valgrind;
mod venv;
mod workspace;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The error of every step: a message that says which step failed and why.
type Result<T = ()> = std::result::Result<T, String>;

const HELP: &str = "\
cargo xtask <command> [-- <arguments for the wrapped tool>]

Commands:
  test       Every Rust test, then every Python test against the installed wheel:
             1. cargo test --workspace --features arrow-dlpack/ndarray (with INSTA_UPDATE=no
                and CI=true: snapshots are never written; the feature builds and runs the
                ndarray interop and crates/arrow-dlpack/examples/rust_user.rs);
             2. the Python environment (see below), made or found beside step 1, its
                installers' output in target/python-env-logs (shown when one fails);
             3. the debug-build pass: the wheel built in the dev profile (debug assertions,
                overflow checks, unsafe-precondition checks), installed, and against it the
                hostile suites (hostile producers and devices, hostile Arrow C, no panics,
                read-only rules) and python -m mypy.stubtest arrow_dlpack (with
                crates/py-bindings/stubtest-allowlist.txt when that file exists), each on one
                core, while the release wheel is built beside them (maturin, into
                target/wheels/release);
             4. the release wheel installed into the environment with pip;
             5. pytest on crates/py-bindings/tests, on every core (pytest-xdist, at most four
                workers, one file per worker); arguments after `--` go to pytest.
                A run that collects no test fails.
             The time of each stage is printed at the end.
  demo       Builds and installs the wheel like `test`, then runs
             crates/py-bindings/examples/demo.py; arguments after `--` go to the script.
  lint       cargo fmt --all --check; cargo clippy --workspace --all-targets
             --features arrow-dlpack/ndarray -- -D warnings;
             cargo doc --workspace --no-deps --features arrow-dlpack/ndarray with
             RUSTDOCFLAGS=\"-D warnings -D rustdoc::broken_intra_doc_links
             -D rustdoc::private_intra_doc_links\". The time of each is printed at the end.
  bench      cargo bench -p arrow-dlpack-tensor -p arrow-dlpack with
             CRITERION_HOME=target/criterion, then cargo bench -p
             arrow-dlpack-loader with CRITERION_HOME=target/criterion-loader (criterion;
             arguments after `--` go to both), then builds and installs the wheel (the
             profiling profile: release with line tables) and runs
             bench/bench_exchange.py --output docs/benchmarks.md
             --criterion-dir target/criterion when that script exists; then installs
             bench/requirements-bench.txt (duckdb, transformers, pydantic) into the environment,
             runs bench/bench_loader.py --output target/bench/loader.md
             --criterion-dir target/criterion-loader (the loader beside pyarrow, polars,
             duckdb, Ray Data and datasets; about 10 minutes) and puts that section into
             docs/benchmarks.md under `## The loader`; builds the release wheel (not
             installed) and puts its size under `## The wheel`; last, runs
             bench/charts.py --page docs/benchmarks.md --out docs/, which
             draws the page's tables as docs/benchmarks-exchange.svg and
             docs/benchmarks-loader.svg (the page embeds them).
  tidy       Repository hygiene: every .rs file starts with `//!`, the crates' dependencies
             follow the layer graph of docs/architecture.md, only arrow-dlpack-python depends on
             pyo3, the files of each crate import each other one way, no tracked file refers to
             documents outside the repository or to tracker numbers, README's crate map lists
             every workspace member, the `unsafe` blocks of each crate are as many as
             docs/architecture.md says (the counts are printed), and no *.snap.new or
             *.pending-snap file exists. Also runs as a test.
  valgrind   Builds the test binaries of arrow-dlpack-tensor and arrow-dlpack and runs each under
             valgrind memcheck, failing on errors and definite leaks; arguments after `--` go to
             every test binary (a test name filter, say). Doc tests are not run.
  venv       Only creates or updates the Python environment (below).
  gpu-check  On a machine with an NVIDIA GPU (it fails at once, saying so, without one):
             uses the machine's Python ($ARROW_DLPACK_PYTHON or python3) when a CUDA torch
             and CuPy import there (no venv, no network); otherwise creates target/gpu-venv
             with gpu/requirements-gpu.txt (torch, cupy-cuda13x) and tries
             cudf-cu13 then pylibcudf-cu13 from pypi.nvidia.com. Builds and installs the
             wheel, and runs gpu/gpu_check.py (which needs only the wheel,
             torch and CuPy; cuDF is skipped, with a note, when absent): CuPy -> arrow_dlpack
             -> torch with the same pointer, the device interface both ways with a real event,
             stream ordering for import and export, a second GPU read while the first is
             current, and the loader's batches on the GPU. It prints one summary line;
             arguments after `--` go to the script.
  help       This text.

Builds:
  Every Cargo and maturin command that xtask starts builds in <cache>/arrow-dlpack/target
  (<cache> is $XDG_CACHE_HOME or ~/.cache), shared by every clone on the machine, so that the
  dependencies are compiled once; CARGO_TARGET_DIR, when set, names another directory. One
  xtask command at a time builds there (the others wait), and when another clone built there
  last, the workspace's own crates are built again from this one.

The Python environment:
  One per machine, shared by every clone: <cache>/arrow-dlpack/venv-<key>, where <cache> is
  $XDG_CACHE_HOME or ~/.cache and <key> hashes the requirement lines (not the comments) of
  crates/py-bindings/requirements-test.txt and
  the interpreter's path and version. It is made with `python3 -m venv` (set
  ARROW_DLPACK_PYTHON to use another interpreter) and gets the requirements from the package
  registry; a changed file or interpreter makes a new one, and one whose stamp does not match
  its key exactly (an interrupted install) is made again. ARROW_DLPACK_VENV names another
  directory for it. target/venv is a link to it; environments of other keys unused for 14
  days are removed when a new one is made.

Examples:
  cargo xtask test -- -k fixed_shape -x
  cargo xtask bench -- export
  cargo xtask valgrind -- import
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, own, forwarded) = split_args(&args);
    let root = project_root();
    // Held until the command ends; `help` builds nothing and waits for nobody.
    let _build_dir = match command {
        None | Some("help" | "--help" | "-h") => None,
        Some(_) => match cache::claim_build_dir(&root) {
            Ok(claim) => Some(claim),
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::FAILURE;
            }
        },
    };
    let result = match command {
        None | Some("help" | "--help" | "-h") => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Some(command) if !own.is_empty() => Err(format!(
            "unexpected argument `{}` for `cargo xtask {command}`; \
             arguments for the wrapped tool go after `--`",
            own[0]
        )),
        Some("test") => test::run(&root, forwarded),
        Some("demo") => demo::run(&root, forwarded),
        Some("lint") => no_forwarded("lint", forwarded).and_then(|()| lint::run(&root)),
        Some("bench") => bench::run(&root, forwarded),
        Some("tidy") => no_forwarded("tidy", forwarded).and_then(|()| tidy::run(&root)),
        Some("valgrind") => valgrind::run(&root, forwarded),
        Some("venv") => no_forwarded("venv", forwarded).and_then(|()| venv::run(&root)),
        Some("gpu-check") => gpu_check::run(&root, forwarded),
        Some(unknown) => {
            eprint!("{HELP}");
            Err(format!(
                "unknown command `{unknown}`; the commands are listed above"
            ))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Splits the command line into the command, the command's own arguments and the arguments
/// after the first `--`, which belong to the wrapped tool.
fn split_args(args: &[String]) -> (Option<&str>, &[String], &[String]) {
    let (before, forwarded) = match args.iter().position(|arg| arg == "--") {
        Some(separator) => (&args[..separator], &args[separator + 1..]),
        None => (args, &args[args.len()..]),
    };
    match before.split_first() {
        Some((command, own)) => (Some(command.as_str()), own, forwarded),
        None => (None, before, forwarded),
    }
}

/// Refuses `--` arguments for a command that wraps several tools or none.
fn no_forwarded(command: &str, forwarded: &[String]) -> Result {
    if forwarded.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "`cargo xtask {command}` forwards no arguments, but got `{}`",
            forwarded.join(" ")
        ))
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| arg.to_string()).collect()
    }

    #[test]
    fn split_args_forwards_everything_after_the_first_separator() {
        let args = strings(&["test", "--", "-k", "x", "--", "y"]);
        let (command, own, forwarded) = split_args(&args);
        assert_eq!(command, Some("test"));
        assert!(own.is_empty());
        assert_eq!(forwarded, strings(&["-k", "x", "--", "y"]));
    }

    #[test]
    fn split_args_keeps_arguments_before_the_separator_as_the_commands_own() {
        let args = strings(&["bench", "extra"]);
        let (command, own, forwarded) = split_args(&args);
        assert_eq!(command, Some("bench"));
        assert_eq!(own, strings(&["extra"]));
        assert!(forwarded.is_empty());
    }

    #[test]
    fn split_args_of_nothing_has_no_command() {
        let (command, own, forwarded) = split_args(&[]);
        assert_eq!(command, None);
        assert!(own.is_empty() && forwarded.is_empty());
    }

    #[test]
    fn help_documents_every_command_and_forwarding() {
        for command in [
            "test",
            "demo",
            "lint",
            "bench",
            "tidy",
            "valgrind",
            "venv",
            "gpu-check",
            "help",
        ] {
            assert!(
                HELP.lines()
                    .any(|line| line.trim_start().starts_with(command)),
                "help does not document `{command}`"
            );
        }
        assert!(HELP.contains("after `--`"));
        assert!(HELP.contains(python::PYTHON_VARIABLE));
        assert!(HELP.contains(cache::VENV_VARIABLE));
    }

    #[test]
    fn project_root_is_the_workspace_root() {
        let manifest = std::fs::read_to_string(project_root().join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"));
    }
}
