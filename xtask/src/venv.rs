//! `cargo xtask venv`: creates or updates the Python environment alone, for running Python
//! tools by hand against a wheel installed by `test` or `demo`.

use std::path::Path;

use crate::Result;
use crate::python::PythonEnv;

/// The help of `cargo xtask venv`.
pub(crate) fn help() -> String {
    "Only creates or updates the Python environment (below).".to_string()
}

/// Makes sure that the environment exists with the test requirements installed.
pub(crate) fn run(root: &Path) -> Result {
    let env = PythonEnv::ensure(root)?;
    println!(
        "venv: ready in {}; activate it with `source target/venv/bin/activate`",
        env.dir().display()
    );
    Ok(())
}
