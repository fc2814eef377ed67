//! `cargo xtask demo`: builds and installs the wheel, then runs the demo script with it.

use std::path::Path;

use crate::Result;
use crate::python::PythonEnv;

/// The demo script, relative to the project root.
const DEMO: &str = "crates/py-bindings/examples/demo.py";

/// The help of `cargo xtask demo`.
pub(crate) fn help() -> String {
    crate::wrap(
        &format!(
            "Builds the release wheel, installs it into the Python environment (below) and runs \
             {DEMO}; arguments after `--` go to the script."
        ),
        0,
    )
}

/// Runs the demo script with `forwarded` as its arguments.
pub(crate) fn run(root: &Path, forwarded: &[String]) -> Result {
    let script = root.join(DEMO);
    // Checked first, so that a missing script does not cost an environment and a release build.
    if !script.is_file() {
        return Err(format!(
            "{DEMO} does not exist, so there is nothing to demonstrate yet; \
             `cargo xtask test` builds and tests what exists"
        ));
    }
    let env = PythonEnv::ensure(root)?;
    env.build_and_install_wheel(root)?;
    env.command_outside_sources(root)?
        .arg(script)
        .args(forwarded)
        .run()
}
