//! Integration tests of the loader: one binary, one module per concern.

mod data;
#[cfg(feature = "object-store")]
mod http_server;

mod balance;
mod boundaries;
mod codecs;
mod collate;
mod columns;
mod files;
#[cfg(feature = "images")]
mod images;
mod ipc_codecs;
mod lifecycle;
mod malformed;
mod null_to_nan;
mod options;
#[cfg(feature = "object-store")]
mod remote;
#[cfg(feature = "object-store")]
mod remote_hostile;
#[cfg(feature = "object-store")]
mod remote_trust;
mod resume;
mod resume_checks;
mod sequences;
mod shard;
mod shuffle;
mod shuffle_window;
mod spec;
mod text_concat;
mod text_concat_loader;
#[cfg(feature = "tokenizers")]
mod text_sequences;
#[cfg(feature = "tokenizers")]
mod text_tokenize;
