//! Integration tests of the loader: one binary, one module per concern.

mod data;

mod boundaries;
mod codecs;
mod collate;
mod columns;
mod files;
mod lifecycle;
mod malformed;
mod resume;
mod sequences;
mod shard;
mod shuffle;
mod shuffle_window;
mod spec;
