//! `cargo xtask venv`: creates or updates the Python environment alone, for running Python
//! tools by hand against a wheel installed by `test` or `demo`.

use std::path::Path;

use crate::Result;
use crate::python::PythonEnv;

/// Makes sure that `target/venv` exists with the test requirements installed.
pub(crate) fn run(root: &Path) -> Result {
    PythonEnv::ensure(root)?;
    println!("venv: ready; activate it with `source target/venv/bin/activate`");
    Ok(())
}
