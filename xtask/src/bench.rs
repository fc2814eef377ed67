//! `cargo xtask bench`: the criterion benchmarks, then the Python exchange benchmark.
//!
//! The Python script owns `docs/benchmarks.md`: xtask runs it after criterion and passes it
//! `--output docs/benchmarks.md` (where to write the page) and `--criterion-dir target/criterion`
//! (where criterion left its estimates), as absolute paths.

use std::path::Path;

use crate::Result;
use crate::process::Cmd;
use crate::python::PythonEnv;

/// The Python benchmark script, relative to the project root.
const PYTHON_BENCH: &str = "crates/py-bindings/bench/bench_exchange.py";

/// The page the Python benchmark writes, relative to the project root.
const OUTPUT: &str = "docs/benchmarks.md";

/// Runs criterion with `forwarded` as its arguments, then the Python benchmark if it exists.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    let mut criterion =
        Cmd::cargo(root).args(["bench", "-p", "arrow-dlpack-tensor", "-p", "arrow-dlpack"]);
    if !forwarded.is_empty() {
        criterion = criterion.arg("--").args(forwarded);
    }
    criterion.run()?;

    let script = root.join(PYTHON_BENCH);
    if !script.is_file() {
        println!("==> skipping the Python benchmark: {PYTHON_BENCH} does not exist");
        return Ok(());
    }
    let env = PythonEnv::ensure(root)?;
    env.build_and_install_wheel(root)?;
    env.command_outside_sources(root)?
        .arg(script)
        .arg("--output")
        .arg(root.join(OUTPUT))
        .arg("--criterion-dir")
        .arg(root.join("target").join("criterion"))
        .run()
}
