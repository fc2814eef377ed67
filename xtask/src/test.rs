//! `cargo xtask test`: every Rust test, then every Python test against the debug wheel.

use std::path::Path;

use crate::Result;
use crate::process::Cmd;
use crate::python::{PythonEnv, WheelProfile};
use crate::stages::Stages;

/// The pytest suite, relative to the project root.
pub(crate) const PYTHON_TESTS: &str = "crates/py-bindings/tests";

/// The tests of the repository's tooling (the benchmark charts), run in the same pytest session.
const TOOLING_TESTS: &str = "bench/tests";

/// Entries that `mypy.stubtest` may ignore, relative to the project root; used when it exists.
const STUBTEST_ALLOWLIST: &str = "crates/py-bindings/stubtest-allowlist.txt";

/// The optional features that tests and lints turn on: the `ndarray` interop (which also builds
/// and runs `crates/arrow-dlpack/examples/rust_user.rs`) and image decoding (which the bindings
/// turn on anyway, named here so that the crate's own tests of it run whatever the bindings do).
/// Not `--all-features`: the bindings' `extension-module` feature leaves libpython unlinked, so
/// their test binaries would not link.
pub(crate) const FEATURES: &[&str] = &[
    "--features",
    "arrow-dlpack/ndarray,arrow-dlpack/images,arrow-dlpack-loader/images",
];

/// The stages of `cargo xtask test`, in order: the name printed with its time at the end, and
/// what it does, for the help. `run` runs them under these names.
pub(crate) const STAGES: &[(&str, &str)] = &[
    (
        RUST_TESTS,
        "cargo test --workspace --features \
         arrow-dlpack/ndarray,arrow-dlpack/images,arrow-dlpack-loader/images, with \
         INSTA_UPDATE=no and CI=true (snapshots are never written); it runs the examples of \
         arrow-dlpack and the loader too",
    ),
    (
        DOC_EXAMPLES,
        "every Rust example of the documentation (doc comments, README.md, docs/*.md) \
         compiled and run in user crates under target/doc-examples, each depending on the \
         crate it documents and the layers below it only, as a user's does",
    ),
    (
        LOADER_WITHOUT_CODECS,
        "the loader's codec tests with only its snappy feature: a Parquet file of another codec \
         is refused by name",
    ),
    (
        PYTHON_ENV,
        "the Python environment (below), made or found beside the Rust tests, its installers' \
         output in target/python-env-logs (shown when one fails); and nginx with its echo \
         module, the object-storage bench's S3 server, installed (Debian's nginx-light) where it \
         is missing and apt-get may run",
    ),
    (
        WHEEL_BUILD,
        "the wheel in the dev profile (debug assertions, overflow checks, unsafe-precondition \
         checks), into target/wheels/dev",
    ),
    (
        WHEEL_INSTALL,
        "that wheel installed into the environment with pip",
    ),
    (
        PYTHON_TESTS_STAGE,
        "pytest on crates/py-bindings/tests and bench/tests on every core (pytest-xdist, at most \
         four workers, one file per worker; a run that collects no test fails), and beside it \
         python -m mypy.stubtest arrow_dlpack",
    ),
];

const RUST_TESTS: &str = "rust tests";
const DOC_EXAMPLES: &str = "doc examples from users' crates";
const LOADER_WITHOUT_CODECS: &str = "loader tests without its default codecs";
const PYTHON_ENV: &str = "python environment, made beside the rust tests";
const WHEEL_BUILD: &str = "debug wheel build";
const WHEEL_INSTALL: &str = "debug wheel install";
const PYTHON_TESTS_STAGE: &str = "python tests, stubtest beside them";

/// The help of `cargo xtask test`: its stages, from [`STAGES`].
pub(crate) fn help() -> String {
    let mut text = String::from(
        "Every Rust test, then every Python test against the debug wheel, in stages whose\n\
         times are printed at the end; arguments after `--` go to pytest:\n",
    );
    for (number, (stage, what)) in STAGES.iter().enumerate() {
        text.push_str(&crate::wrap(&format!("{}. {stage}: {what}", number + 1), 3));
    }
    text
}

/// pytest's exit status when it collected no test.
const PYTEST_NO_TESTS_COLLECTED: i32 = 5;

/// The number of pytest-xdist workers: the cores this process may use, at most four.
fn pytest_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get().min(4))
}

/// Runs the Rust tests, builds and installs the debug wheel, checks the stubs and runs pytest with
/// `forwarded` appended; prints the time of each stage at the end.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    let mut stages = Stages::new("cargo xtask test");
    // The Python environment is made (or found) beside the Rust tests: on a new machine its
    // install is mostly downloading and unpacking, while the Rust build keeps both cores busy.
    let logs = root.join("target").join("python-env-logs");
    let making_env = {
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            let env = PythonEnv::ensure_logged(&root, Some(&logs));
            // The bench's S3 servers are tested with it (bench/tests/test_s3_servers.py).
            crate::nginx::ensure(
                &root,
                "the tests of the bench's nginx server will fail, saying what to install",
            );
            env
        })
    };
    // The py-bindings crate is included: with `extension-module` off, pyo3 links libpython, so
    // its unit tests link and run like any other crate's.
    stages.run(RUST_TESTS, || {
        Cmd::cargo(root)
            .args(["test", "--workspace"])
            .args(FEATURES)
            // A test run never writes snapshots: a changed snapshot fails instead of leaving a
            // `.snap.new` behind, as on CI.
            .env("INSTA_UPDATE", "no")
            .env("CI", "true")
            .run()
    })?;
    stages.run(DOC_EXAMPLES, || crate::doc_examples::run(root))?;
    // The loader with one codec: a Parquet file compressed with a codec left out is refused by
    // name. Only the loader and its test binary are rebuilt (parquet keeps its features, which
    // the loader's tests turn on to write the files).
    stages.run(LOADER_WITHOUT_CODECS, || {
        Cmd::cargo(root)
            .args(["test", "-p", "arrow-dlpack-loader", "--no-default-features"])
            .args(["--features", "snappy", "--test", "loader", "codecs"])
            .run()
    })?;

    let env = stages.run(PYTHON_ENV, || {
        making_env
            .join()
            .map_err(|_| "the thread that makes the Python environment panicked".to_string())?
    })?;

    // The suite runs against a wheel in the dev profile: debug assertions, overflow checks and
    // the standard library's unsafe-precondition checks abort the run on a misaligned read or an
    // overflow instead of letting it pass silently. The release wheel, the same code optimised,
    // is built by `demo`, `bench` and `pip install`; building it here too took half of a first
    // run's time on two cores, and the suite takes about as long on either wheel.
    let wheel = stages.run(WHEEL_BUILD, || env.build(root, WheelProfile::Debug))?;
    stages.run(WHEEL_INSTALL, || env.install(root, &wheel))?;
    stages.run(PYTHON_TESTS_STAGE, || {
        // The stubs are checked against the same module, beside the suite (one core for a few
        // seconds); its output is shown when it ends.
        let mut stubtest =
            env.command_outside_sources(root)?
                .args(["-m", "mypy.stubtest", "arrow_dlpack"]);
        let allowlist = root.join(STUBTEST_ALLOWLIST);
        if allowlist.exists() {
            stubtest = stubtest.arg("--allowlist").arg(allowlist);
        }
        let stubtest = stubtest.spawn_logged(&root.join("target").join("stubtest.log"))?;
        let pytest = env
            .command_outside_sources(root)?
            .args(["-m", "pytest"])
            .arg(root.join(PYTHON_TESTS))
            .arg(root.join(TOOLING_TESTS))
            // No `.pytest_cache` in the source tree, and test modules imported by path rather
            // than by putting their directory on `sys.path`.
            .args(["-p", "no:cacheprovider", "--import-mode=importlib"])
            // pytest-xdist: one worker per core, at most four (each imports torch and JAX),
            // with each test file kept in one worker so that module fixtures are made once.
            .args(["-n", &pytest_workers().to_string(), "--dist", "loadfile"])
            // A worker that dies (a crash, or the suite's memory guard ending it) fails the run
            // naming its test. Replacing it would not help: with `loadfile`, pytest-xdist 3
            // fails on the replacement (`INTERNALERROR ... KeyError: <WorkerController>`) and
            // the run could hang instead of ending.
            .arg("--max-worker-restart=0")
            // Python's output is captured per test, but not file descriptor 2: what native code
            // writes there as a worker dies (a Rust abort, an allocator's failure) reaches this
            // log, where pytest-xdist itself says only "node down: Not properly terminated".
            .arg("--capture=sys")
            // The slowest tests at the end of every run: the suite's time is watched (a warm CI
            // run has a budget), and this says where it goes without another run.
            .arg("--durations=20")
            .args(forwarded);
        let display = pytest.display();
        let status = pytest.status();
        // Waited for in any case, so that its output is shown even when the suite failed.
        let stubtest = stubtest.wait();
        let status = status?;
        if status.code() == Some(PYTEST_NO_TESTS_COLLECTED) {
            return Err(format!(
                "`{display}` collected no test (exit status 5); a test run that tests nothing \
                 fails"
            ));
        }
        crate::process::check(&display, status).and(stubtest)
    })
}
