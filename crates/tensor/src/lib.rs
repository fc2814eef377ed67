//! A strided n-dimensional tensor over an Arrow buffer, with checked DLPack export and import.
//!
//! This is the middle layer of arrow-dlpack: it knows DLPack and `arrow_buffer::Buffer`, and
//! nothing of Arrow arrays or Python.
//!
//! | item | what it is |
//! |---|---|
//! | [`Tensor`] | buffer, [`DType`], shape, signed strides in elements, offset, dimension names, read-only flag, [`Device`] |
//! | [`Tensor::try_new`] | checked construction: every element inside the buffer, no overflow, aligned |
//! | [`Tensor::is_row_major`], [`Tensor::is_column_major`], [`Tensor::is_contiguous`] | numpy's contiguity rules |
//! | [`Tensor::to_contiguous`] | a row-major copy of exactly the logical elements |
//! | [`Tensor::from_vec`], [`NativeDType`], [`DType::of`] | a tensor that owns a `Vec<T>`; the Rust element types |
//! | [`Tensor::as_slice`], [`Tensor::get`], [`Tensor::iter`], [`Tensor::to_vec`] | typed, checked reads: a row-major slice, one element, every element for any strides, a `Vec` of them |
//! | `==`, `{}` | equality of dtype, shape and values whatever the layout; the values nested by dimension |
//! | [`Tensor::to_dlpack_versioned`], [`Tensor::to_dlpack_legacy`] | export; the managed tensor keeps the buffer alive |
//! | [`Tensor::from_managed`], [`Tensor::from_raw_versioned`], [`Tensor::from_raw_legacy`] | zero-copy import; the buffer owns the producer's tensor |
//! | `Tensor::view`, `Tensor::from_ndarray`, `Tensor::from_ndarray_view` (feature `ndarray`) | an `ndarray::ArrayViewD` of any strides; an owned array without a copy |
//! | [`Tensor::shares_memory`], [`Tensor::shares_memory_with_buffer`], [`Tensor::byte_range`] | whether two tensors, or a tensor and an Arrow buffer, address the same bytes: the zero-copy check |
//! | [`layout`] | element counts, spans and contiguity on plain shapes and strides |
//! | [`alloc::UninitBuffer`], [`alloc::PooledVec`] | fallible, aligned allocation for copies: `OutOfMemory` instead of an abort; 4 MiB and more from a pool that keeps freed pages warm ([`alloc::stats`], [`alloc::set_limit`], [`alloc::release_unused`]) |
//! | [`Error`], [`Report`] | the one error type; `error.report()` prints it with its causes on one line |
//!
//! A round trip through DLPack shares the memory both ways:
//!
//! ```
//! # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
//! use arrow_dlpack::Buffer;
//! use arrow_dlpack::{DType, ExportOptions, Tensor};
//!
//! let buffer = Buffer::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
//! let tensor = Tensor::try_new_row_major(buffer, DType::Float32, vec![2, 3])?;
//!
//! let managed = tensor.to_dlpack_versioned(ExportOptions::default())?;
//! let imported = Tensor::from_managed(managed)?;
//!
//! assert_eq!(imported.shape(), &[2, 3]);
//! assert_eq!(imported.data_ptr(), tensor.data_ptr());
//! assert!(imported.is_read_only());
//! # Ok::<(), arrow_dlpack::Error>(())
//! ```
//!
//! Ownership: an exported managed tensor holds a clone of the buffer in its context, released by
//! its deleter; an imported tensor's buffer holds the producer's managed tensor and calls its
//! deleter exactly once, when the last clone of the buffer drops, or before an error is returned.

pub mod alloc;
mod device;
mod dims;
mod dtype;
mod error;
mod export;
mod import;
pub mod layout;
mod native;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
mod shares_memory;
mod strided_copy;
mod tensor;
mod typed;
mod values;

pub use device::Device;
pub use dtype::DType;
pub use error::{Error, Report, Result, check_error_chain, error_messages, join_messages};
pub use export::ExportOptions;
pub use import::ImportOptions;
pub use native::NativeDType;
pub use tensor::{MAX_NDIM, Tensor};
pub use typed::Iter;

/// What the tests of the workspace's crates share; not part of the API.
#[doc(hidden)]
pub mod test_support {
    pub use crate::error::assert_every_variant_chains;
}

/// The managed-tensor handle of dlpark, re-exported so callers name one type.
pub use dlpark::Managed;
