//! Criterion benchmarks of the tensor layer (filled in with the foundation issue).
fn main() {}
