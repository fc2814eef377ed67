//! Record-batch streams to exact-size batches of tensors, made on background threads.
//!
//! This is the loader layer of arrow-dlpack, above [`arrow_dlpack`]: it reads Arrow IPC files
//! (memory-mapped, zero-copy), Arrow IPC streams, Parquet files (projected, row groups decoded in
//! parallel) or any [`RecordBatchReader`](arrow_array::RecordBatchReader), and yields
//! [`TensorBatch`]es of exactly [`BatchSpec::batch_size`] rows for a training loop.
//!
//! | item | what it is |
//! |---|---|
//! | [`batches`], [`Batches`] | the iterator of `Result<TensorBatch>`, fed by a background thread through a bounded channel |
//! | [`outline`], [`Outline`] | the checks and counts of a loader, without reading data or starting a thread |
//! | [`collate`] | one batch of every row of some record batches, made on the calling thread, for a caller that cuts batches itself |
//! | [`Source`] | IPC files, IPC streams, Parquet files, or a reader; with the `object-store` feature, the same files in object storage (`ObjectSource`, `Source::from_urls`) |
//! | [`BatchSpec`], [`ColumnGroup`], [`NullToNan`] | batch size, columns and groups, nulls, shuffling, sharding, prefetch; [`BatchSpec::new`] and a builder method per field |
//! | [`BatchSpec::OPTIONS`], [`OptionDecl`], [`OptionType`], [`OptionScope`], [`OptionValue`] | every field of the spec declared once, with its type and default, and set or read by name (what the Python binding takes its keywords from) |
//! | [`Sequence`], [`SequenceMode`], [`PadValue`], [`Side`], [`SequenceTokenizer`] | list columns (or text columns with a tokenizer, feature `tokenizers`) as padded, packed or jagged tensors ([`PadValue`] and [`Side`] are `arrow_dlpack`'s); with [`BatchSpec::max_tokens`] and [`BatchSpec::bucket_by_length`], batches by tokens and by length |
//! | [`LoaderState`], [`Settings`], [`merge_states`] | where a stream stands ([`Batches::state`]), resumed with [`BatchSpec::state`], with the settings and the source's identity it was saved with; the states of every shard joined for a resume with other shards |
//! | [`ConcatPacker`], [`ConcatPackOptions`], [`ConcatBatch`], [`ConcatCarry`] | token sequences packed into rows of exactly `max_length` tokens for pretraining, with position ids and `cu_seqlens` |
//! | [`Tokenizer`], [`tokenize_column`], [`tokenize_to_file`] | (feature `tokenizers`) text columns to token ids with Hugging Face's `tokenizers`, ids identical to its Python package's; a source's text tokenized once into an IPC or Parquet file |
//! | [`ImageColumn`], [`BatchSpec::image`], `ImageSpec` and its choices | (feature `images`) columns of encoded images (binary, or Hugging Face's `Image` structs) decoded, resized and cropped into `(B, C, H, W)` tensors on the loader's threads |
//! | [`TensorBatch`] | named [`Tensor`](arrow_dlpack::Tensor)s (and validity masks) of one batch, by name with [`TensorBatch::tensor`] or `batch["x"]` |
//! | [`Error`], [`Result`] | the one error type |
//!
//! A batch that lies inside one record batch is made of views that share the record batch's
//! memory; a batch across record batches is copied in one pass into one fresh allocation per
//! tensor. Column groups, booleans, masks and shuffled batches are always copies.
//!
//! ```
//! use std::sync::Arc;
//! use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch, RecordBatchIterator};
//! use arrow_dlpack_loader::{BatchSpec, Source, batches};
//!
//! let batch = RecordBatch::try_from_iter([
//!     ("x0", Arc::new(Float32Array::from(vec![0.0, 1.0, 2.0, 3.0, 4.0])) as ArrayRef),
//!     ("x1", Arc::new(Float32Array::from(vec![5.0, 6.0, 7.0, 8.0, 9.0])) as ArrayRef),
//!     ("label", Arc::new(Int64Array::from(vec![0, 1, 0, 1, 0])) as ArrayRef),
//! ])?;
//! let reader = RecordBatchIterator::new([Ok(batch.clone())], batch.schema());
//! let spec = BatchSpec::new(2)
//!     .drop_last(true)
//!     .columns(["label"])
//!     .group("features", ["x0", "x1"]);
//! let mut sizes = Vec::new();
//! for batch in batches(Source::reader(reader), spec)? {
//!     let batch = batch?;
//!     assert_eq!(batch.tensor("features")?.shape(), &[2, 2]);
//!     assert_eq!(batch["label"].shape(), &[2]);
//!     sizes.push(batch.num_rows());
//! }
//! assert_eq!(sizes, [2, 2]); // the fifth row is dropped
//! # Ok::<(), arrow_dlpack_loader::Error>(())
//! ```
//!
//! Errors: one [`Error`] enum, into which the errors of the lower layers convert with `?`.
//! A message describes its own level, and the cause (an I/O error, the Arrow layer's reason) is
//! its [`source`](std::error::Error::source); [`Error::report`] prints the whole chain on one
//! line, each text once:
//!
//! ```
//! use arrow_dlpack_loader::{BatchSpec, Source, batches};
//!
//! let error = Source::from_paths(["data/nope.parquet"])
//!     .and_then(|source| batches(source, BatchSpec::new(8)))
//!     .err()
//!     .expect("there is no such file");
//! assert_eq!(error.to_string(), "cannot read data/nope.parquet"); // this level only
//! // cannot read data/nope.parquet: No such file or directory (os error 2)
//! let report = error.report().to_string();
//! assert!(report.starts_with("cannot read data/nope.parquet: "), "{report}");
//! ```
//!
//! Features: Parquet's codecs, each a feature on by default: `snappy`, `lz4`, `zstd`, `brotli`
//! and `gzip`. `zstd` compiles C code; `default-features = false` with only the codecs a
//! dataset uses keeps the build small, and a file compressed with a codec that is not compiled
//! in is refused with an error naming the codec. `object-store` (off by default) reads the same
//! files from `s3://`, `gs://`, `az://`/`abfs://` and `http(s)://` URLs through arrow-rs's
//! `object_store`, on an async runtime owned by the loader; it adds an HTTP client (reqwest on
//! rustls with `ring`) and tokio to the build. `tokenizers` (off by default) adds Hugging
//! Face's `tokenizers` crate, pure Rust (its regex engine is `fancy-regex`, not the C of
//! `onig`), for [`Tokenizer`] and the functions that use it.

#![warn(missing_docs)]

mod assemble;
mod batch;
mod collate;
mod columns;
mod digest;
mod error;
mod file;
mod handoff;
mod images;
mod ipc;
mod loader;
mod memory;
mod parquet;
mod path_pattern;
mod quiet_panic;
mod rebatch;
#[cfg(feature = "object-store")]
mod remote;
mod rng;
mod sequences;
mod source;
mod spec;
mod state;
mod text;

/// The image spec types of `arrow_dlpack::images`, for [`BatchSpec::image`] (feature `images`).
#[cfg(feature = "images")]
pub use arrow_dlpack::images::{
    Crop, ImageDType, ImageSize, ImageSpec, Interpolation, Layout, Mode, OnError,
};
/// The element type of a tensor, for [`ColumnGroup::dtype`].
pub use arrow_dlpack_tensor::DType;
pub use batch::{NamedTensor, TensorBatch};
pub use collate::collate;
#[cfg(feature = "images")]
pub use columns::IMAGE_TYPES;
pub use error::{Error, Result};
pub use images::ImageColumn;
pub use loader::{Batches, Outline, Stopper, batches, outline};
#[cfg(feature = "object-store")]
pub use remote::{ObjectSource, StopHandle, is_object_url};
pub use sequences::{
    PadValue, Sequence, SequenceMode, SequenceTokenizer, Side, TOKENIZED_TEXT_TYPES,
};
pub use source::Source;
pub use spec::{
    BatchSpec, ColumnGroup, MAX_DECODE_THREADS, MAX_PREFETCH, NullToNan, OptionDecl, OptionScope,
    OptionType, OptionValue,
};
pub use state::{
    ConcatPosition, FileIdentity, Item, LoaderState, MAX_MERGED_ENTRIES, MAX_PLANNED_BATCHES,
    MAX_PLANNED_ROWS, MAX_REPLAY_ROWS, Position, STATE_VERSION, SequenceSettings, Settings,
    SourceIdentity, SourceKind, Work, check_state_format, merge_states,
};
pub use text::{
    CarriedRow, ConcatBatch, ConcatCarry, ConcatPackOptions, ConcatPacker, DEFAULT_OPEN_ROWS,
};
#[cfg(feature = "tokenizers")]
pub use text::{
    TEXT_TYPES, TokenizeOptions, TokenizeSummary, TokenizeToFileOptions, Tokenizer,
    tokenize_column, tokenize_to_file,
};
