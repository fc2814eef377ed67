//! `cargo xtask lint`: formatting, clippy and rustdoc, each with warnings denied.

use std::path::Path;

use crate::Result;
use crate::process::Cmd;

/// Runs the three checks in turn and stops at the first that fails.
pub(crate) fn run(root: &Path) -> Result {
    Cmd::cargo(root).args(["fmt", "--all", "--check"]).run()?;
    Cmd::cargo(root)
        .args(["clippy", "--workspace", "--all-targets"])
        .args(crate::test::FEATURES)
        .args(["--", "-D", "warnings"])
        .run()?;
    Cmd::cargo(root)
        .args(["doc", "--workspace", "--no-deps"])
        .args(crate::test::FEATURES)
        .env("RUSTDOCFLAGS", "-D warnings")
        .run()
}
