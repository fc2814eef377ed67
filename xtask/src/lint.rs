//! `cargo xtask lint`: formatting, clippy and rustdoc, each with warnings denied.

use std::path::Path;

use crate::Result;
use crate::process::Cmd;
use crate::stages::Stages;

/// Runs the three checks in turn, stops at the first that fails, and prints the time of each.
pub(crate) fn run(root: &Path) -> Result {
    let mut stages = Stages::new("cargo xtask lint");
    stages.run("rustfmt", || {
        Cmd::cargo(root).args(["fmt", "--all", "--check"]).run()
    })?;
    stages.run("clippy", || {
        Cmd::cargo(root)
            .args(["clippy", "--workspace", "--all-targets"])
            .args(crate::test::FEATURES)
            .args(["--", "-D", "warnings"])
            .run()
    })?;
    stages.run("rustdoc", || {
        Cmd::cargo(root)
            .args(["doc", "--workspace", "--no-deps"])
            .args(crate::test::FEATURES)
            .env("RUSTDOCFLAGS", "-D warnings")
            .run()
    })
}
