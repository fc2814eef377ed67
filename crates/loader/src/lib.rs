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
//! | [`Source`] | IPC files, IPC streams, Parquet files, or a reader |
//! | [`BatchSpec`], [`ColumnGroup`] | batch size, columns and groups, nulls, shuffling, sharding, prefetch |
//! | [`Sequence`], [`SequenceMode`], [`PadValue`], [`Side`] | list columns as padded, packed or jagged tensors; with [`BatchSpec::max_tokens`] and [`BatchSpec::bucket_by_length`], batches by tokens and by length |
//! | [`TensorBatch`] | named [`Tensor`](arrow_dlpack_tensor::Tensor)s (and validity masks) of one batch |
//! | [`Error`] | the one error type |
//!
//! A batch that lies inside one record batch is made of views that share the record batch's
//! memory; a batch across record batches is copied in one pass into one fresh allocation per
//! tensor. Column groups, booleans, masks and shuffled batches are always copies.
//!
//! ```
//! use std::sync::Arc;
//! use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch, RecordBatchIterator};
//! use arrow_dlpack_loader::{BatchSpec, ColumnGroup, Source, batches};
//!
//! let batch = RecordBatch::try_from_iter([
//!     ("x0", Arc::new(Float32Array::from(vec![0.0, 1.0, 2.0, 3.0, 4.0])) as ArrayRef),
//!     ("x1", Arc::new(Float32Array::from(vec![5.0, 6.0, 7.0, 8.0, 9.0])) as ArrayRef),
//!     ("label", Arc::new(Int64Array::from(vec![0, 1, 0, 1, 0])) as ArrayRef),
//! ])?;
//! let reader = RecordBatchIterator::new([Ok(batch.clone())], batch.schema());
//! let spec = BatchSpec {
//!     batch_size: 2,
//!     drop_last: true,
//!     columns: vec!["label".into()],
//!     groups: vec![ColumnGroup::new("features", ["x0", "x1"])],
//!     ..BatchSpec::default()
//! };
//! let mut sizes = Vec::new();
//! for batch in batches(Source::reader(reader), spec)? {
//!     let batch = batch?;
//!     assert_eq!(batch.get("features").unwrap().shape(), &[2, 2]);
//!     assert_eq!(batch.get("label").unwrap().shape(), &[2]);
//!     sizes.push(batch.num_rows());
//! }
//! assert_eq!(sizes, [2, 2]); // the fifth row is dropped
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod assemble;
mod batch;
mod columns;
mod error;
mod file;
mod gather;
mod group_view;
mod ipc;
mod loader;
mod parquet;
mod parquet_bounds;
mod quiet_panic;
mod ragged;
mod rebatch;
mod rng;
mod sequence;
mod source;
mod spec;
mod thrift;
mod tokens;
mod writable;

pub use batch::{NamedTensor, TensorBatch};
pub use error::{Error, Result};
pub use loader::{Batches, batches};
pub use sequence::{PadValue, Sequence, SequenceMode, Side};
pub use source::Source;
pub use spec::{BatchSpec, ColumnGroup, MAX_DECODE_THREADS, MAX_PREFETCH};
