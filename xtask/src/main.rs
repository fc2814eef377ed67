//! `cargo xtask`: the workspace's one command surface.
fn main() {}
