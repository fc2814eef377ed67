//! `cargo xtask test`: every Rust test, then every Python test against the installed wheel.

use std::path::Path;

use crate::Result;
use crate::process::Cmd;
use crate::python::{PythonEnv, WheelProfile};
use crate::stages::Stages;

/// The pytest suite, relative to the project root.
pub(crate) const PYTHON_TESTS: &str = "crates/py-bindings/tests";

/// Entries that `mypy.stubtest` may ignore, relative to the project root; used when it exists.
const STUBTEST_ALLOWLIST: &str = "crates/py-bindings/stubtest-allowlist.txt";

/// The optional features that tests and lints turn on: the `ndarray` interop (which also builds
/// and runs `crates/arrow-dlpack/examples/rust_user.rs`). Not `--all-features`: the bindings'
/// `extension-module` feature leaves libpython unlinked, so their test binaries would not link.
pub(crate) const FEATURES: &[&str] = &["--features", "arrow-dlpack/ndarray"];

/// The suites of hostile input, which the debug-build pass runs (relative to [`PYTHON_TESTS`]).
pub(crate) const HOSTILE_SUITES: &[&str] = &[
    "test_hostile_producers.py",
    "test_hostile_devices.py",
    "test_hostile_arrow_c.py",
    "test_no_panics.py",
    "test_read_only.py",
];

/// pytest's exit status when it collected no test.
const PYTEST_NO_TESTS_COLLECTED: i32 = 5;

/// Runs the Rust tests, builds and installs the wheel, checks the stubs and runs pytest with
/// `forwarded` appended; prints the time of each stage at the end.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    let mut stages = Stages::new("cargo xtask test");
    // The py-bindings crate is included: with `extension-module` off, pyo3 links libpython, so
    // its unit tests link and run like any other crate's.
    stages.run("rust tests", || {
        Cmd::cargo(root)
            .args(["test", "--workspace"])
            .args(FEATURES)
            // A test run never writes snapshots: a changed snapshot fails instead of leaving a
            // `.snap.new` behind, as on CI.
            .env("INSTA_UPDATE", "no")
            .env("CI", "true")
            .run()
    })?;

    let env = stages.run("python environment", || PythonEnv::ensure(root))?;

    // The debug-build pass: the hostile suites against a wheel with debug assertions, overflow
    // checks and the standard library's unsafe-precondition checks, so that a misaligned read or
    // an overflow aborts the run instead of passing silently.
    stages.run("debug wheel build", || {
        env.build_and_install(root, WheelProfile::Debug)
    })?;
    stages.run("hostile suites on the debug wheel", || {
        let mut debug_pass = env
            .command_outside_sources(root)?
            .args(["-m", "pytest"])
            .args(["-p", "no:cacheprovider", "--import-mode=importlib", "-q"]);
        for suite in HOSTILE_SUITES {
            debug_pass = debug_pass.arg(root.join(PYTHON_TESTS).join(suite));
        }
        debug_pass.run()
    })?;

    stages.run("release wheel build", || env.build_and_install_wheel(root))?;

    stages.run("stubtest", || {
        let mut stubtest =
            env.command_outside_sources(root)?
                .args(["-m", "mypy.stubtest", "arrow_dlpack"]);
        let allowlist = root.join(STUBTEST_ALLOWLIST);
        if allowlist.exists() {
            stubtest = stubtest.arg("--allowlist").arg(allowlist);
        }
        stubtest.run()
    })?;

    stages.run("python tests", || {
        let pytest = env
            .command_outside_sources(root)?
            .args(["-m", "pytest"])
            .arg(root.join(PYTHON_TESTS))
            // No `.pytest_cache` in the source tree, and test modules imported by path rather
            // than by putting their directory on `sys.path`.
            .args(["-p", "no:cacheprovider", "--import-mode=importlib"])
            .args(forwarded);
        let display = pytest.display();
        let status = pytest.status()?;
        if status.code() == Some(PYTEST_NO_TESTS_COLLECTED) {
            return Err(format!(
                "`{display}` collected no test (exit status 5); a test run that tests nothing \
                 fails"
            ));
        }
        crate::process::check(&display, status)
    })
}
