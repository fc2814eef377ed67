//! `cargo xtask lint`: formatting, clippy and rustdoc, each with warnings denied.

use std::path::Path;

use crate::Result;
use crate::process::Cmd;
use crate::stages::Stages;

/// The rustdoc lints: every warning, and by name the two link lints, so that a link that does
/// not resolve, or that resolves to a private item, fails the build whatever their default level.
pub(crate) const RUSTDOC_FLAGS: &str =
    "-D warnings -D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links";

/// The help of `cargo xtask lint`.
pub(crate) fn help() -> String {
    crate::wrap(
        &format!(
            "cargo fmt --all --check; cargo clippy --workspace --all-targets {} -- -D warnings; \
             cargo doc --workspace --no-deps {} with RUSTDOCFLAGS=\"{RUSTDOC_FLAGS}\". The time \
             of each is printed at the end.",
            crate::test::FEATURES.join(" "),
            crate::test::FEATURES.join(" ")
        ),
        0,
    )
}

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
            .env("RUSTDOCFLAGS", RUSTDOC_FLAGS)
            .run()
    })
}
