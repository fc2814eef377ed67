//! The project's directory in the user's cache, shared by every clone on the machine: the Python
//! environment (see `python.rs`) and the Cargo build directory of xtask's own builds.

use std::path::{Path, PathBuf};

use crate::Result;

/// The variable that names the Python environment's directory instead of the cache.
pub(crate) const VENV_VARIABLE: &str = "ARROW_DLPACK_VENV";

/// The variable through which Cargo, and maturin through it, are told where to build.
const TARGET_DIR_VARIABLE: &str = "CARGO_TARGET_DIR";

/// `$XDG_CACHE_HOME/arrow-dlpack`, or `~/.cache/arrow-dlpack`.
pub(crate) fn dir() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if Path::new(&dir).is_absolute() => PathBuf::from(dir),
        _ => match std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")) {
            Some(home) if !home.is_empty() => PathBuf::from(home).join(".cache"),
            _ => {
                return Err(format!(
                    "neither XDG_CACHE_HOME nor HOME is set, so there is no cache directory for \
                     the Python environment and the builds; set {VENV_VARIABLE} and \
                     {TARGET_DIR_VARIABLE}"
                ));
            }
        },
    };
    Ok(base.join("arrow-dlpack"))
}

/// The build directory of every Cargo and maturin command that xtask starts: the one named by
/// `CARGO_TARGET_DIR` when that is set, and otherwise `<cache>/target`, shared by every clone.
///
/// Dependencies are then compiled once per machine and profile rather than once per clone: a
/// fresh clone rebuilds only the workspace's own crates. Cargo locks the directory, so two
/// clones building at once take turns. The choice is made once, here, and handed to the
/// children through the variable, so that all of them (cargo test, clippy, rustdoc, maturin)
/// build in the same place.
pub(crate) fn target_dir() -> Result<PathBuf> {
    match std::env::var_os(TARGET_DIR_VARIABLE) {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => Ok(dir()?.join("target")),
    }
}

/// Sets `CARGO_TARGET_DIR` for every child that xtask starts from now on.
pub(crate) fn use_shared_target_dir() -> Result {
    let target = target_dir()?;
    // SAFETY: called at the start of `main`, before xtask starts any thread, so no other thread
    // can read the environment while it changes.
    unsafe { std::env::set_var(TARGET_DIR_VARIABLE, &target) };
    Ok(())
}
