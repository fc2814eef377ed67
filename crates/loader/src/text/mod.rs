//! Text and token sequences: texts to token ids with Hugging Face's `tokenizers` (feature
//! `tokenizers`), and the `"concat"` packing of token sequences into rows of exactly
//! `max_length` tokens for pretraining.
//!
//! | item | what it does |
//! |---|---|
//! | [`Tokenizer`] | a `tokenizer.json` (a path or its text), its vocabulary size and id type (int32, or int64 when the vocabulary needs it) |
//! | [`tokenize_column`], [`TokenizeOptions`] | a `utf8`, `large_utf8` or `utf8_view` column to a list column of ids, on several threads |
//! | [`tokenize_to_file`], [`TokenizeToFileOptions`], [`TokenizeSummary`] | a [`Source`](crate::Source)'s text column tokenized once, written with its other columns to an Arrow IPC or Parquet file |
//! | [`ConcatPacker`], [`ConcatPackOptions`], [`ConcatBatch`], [`ConcatCarry`] | documents' token ids packed into rows of `max_length` tokens with position ids and `cu_seqlens` (any integer list column; no feature needed) |
//!
//! Ids are those of the Python package `tokenizers` (whose Rust crate this one pins) for the
//! same `tokenizer.json`: `Tokenizer.encode_batch(texts, add_special_tokens=...)`'s `.ids`.
//! Tokenizing never uses the `tokenizers` crate's own thread pool: the threads are this
//! module's, as many as [`TokenizeOptions::threads`] says.

pub(crate) mod concat;

pub use concat::{
    CarriedRow, ConcatBatch, ConcatCarry, ConcatPackOptions, ConcatPacker, DEFAULT_OPEN_ROWS,
};

#[cfg(feature = "tokenizers")]
mod column;
#[cfg(feature = "tokenizers")]
mod read;
#[cfg(feature = "tokenizers")]
mod sequence;
#[cfg(feature = "tokenizers")]
mod to_file;
#[cfg(feature = "tokenizers")]
mod tokenizer;

#[cfg(feature = "tokenizers")]
pub use column::{TEXT_TYPES, TokenizeOptions, tokenize_column};
#[cfg(feature = "tokenizers")]
pub use to_file::{TokenizeSummary, TokenizeToFileOptions, tokenize_to_file};
#[cfg(feature = "tokenizers")]
pub use tokenizer::Tokenizer;
