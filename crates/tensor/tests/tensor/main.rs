//! Integration tests of the tensor crate: one binary, one module per concern, and the
//! hand-built DLPack producer they share.

mod common;

mod import;
mod properties;
mod round_trip;
mod shares_memory;
mod typed;
