//! Arrow arrays to and from DLPack tensors, zero-copy.
//!
//! This is the Arrow layer of arrow-dlpack, and the one crate a Rust user needs: it turns arrow-rs
//! arrays into [`Tensor`]s that share their memory, and tensors (built in Rust or imported from
//! any DLPack producer) back into arrays that own the producer's memory. The tensor layer's types
//! are re-exported here (and the whole layer as [`tensor`]): DLPack export and import are
//! [`Tensor::to_dlpack_versioned`] and [`Tensor::from_managed`], typed reads are
//! [`Tensor::as_slice`], [`Tensor::get`] and [`Tensor::iter`].
//!
//! ```toml
//! [dependencies]
//! # The path of this crate in a clone of its repository (it is not published yet).
//! arrow-dlpack = { path = "../arrow-dlpack/crates/arrow-dlpack", features = ["ndarray"] }
//! arrow-array = "60"
//! ```
//!
//! | item | direction | what it does |
//! |---|---|---|
//! | [`array_to_tensor`], [`ArrayToTensorOptions`] | Arrow -> tensor | primitive array -> 1-D, (nested) fixed-size list -> `[len, l1, ...]`; zero-copy, nulls refused unless `allow_nulls`; booleans unpacked to one byte each when `allow_copy` |
//! | [`validity_to_tensor`] | Arrow -> tensor | an array's validity as a `bool` tensor (true = valid) |
//! | [`tensor_to_array`], [`TensorToArrayOptions`] | tensor -> Arrow | 1-D contiguous -> `PrimitiveArray`, zero-copy; bool -> `BooleanArray` when a copy is allowed |
//! | [`tensor_to_fixed_size_list`] | tensor -> Arrow | n-d row-major -> nested `FixedSizeListArray`, zero-copy |
//! | [`FixedShapeTensorType`], [`FixedShapeTensorMetadata`] | both | the `arrow.fixed_shape_tensor` extension type and its JSON metadata, PyArrow-compatible |
//! | [`FixedShapeTensorArray`] | both | `to_tensor` (permutation applied exactly) and `from_tensor` (permutation derived from strides), with the same options |
//! | [`VariableShapeTensorType`], [`VariableShapeTensorMetadata`], [`VARIABLE_SHAPE_TENSOR_NAME`] | both | the `arrow.variable_shape_tensor` extension type and its JSON metadata (key `permutation` written, `permutations` also read) |
//! | [`VariableShapeTensorArray`], [`VariableShapePadOptions`] | both | storage checked row by row; `row(i)` a zero-copy tensor of the row's own shape, `from_tensors` (a copy), `to_padded` with the shapes |
//! | [`concat_chunks`], [`ConcatOptions`], [`chunks_need_copy`] | Arrow | one chunk zero-copy; several concatenated only when a copy is allowed |
//! | [`list_to_ragged`], [`ListToRaggedOptions`], [`RaggedTensor`] | Arrow -> tensor | `list`, `large_list` and list views -> values `(N, *inner)` (zero-copy view of the referenced elements) and offsets `(B + 1,)`; rows, slices, `take`, `concat` |
//! | [`RaggedTensor::to_padded`], [`pad_pieces`], [`PadOptions`], [`PadValue`], [`Side`] | tensor | ragged rows -> `(B, L, *inner)`, padded and truncated on either side, by one memory-speed kernel; [`RaggedTensor::from_padded`] back |
//! | [`RaggedTensor::to_packed`], [`pack_pieces`], [`PackedTensor`] | tensor | values, `cu_seqlens` (int32), `position_ids` (int64) and `max_seqlen` for varlen attention |
//! | [`RaggedTensor::to_list_array`], [`RaggedTensor::from_rows`] | tensor -> Arrow | back to a `list` / `large_list` array sharing the buffers; ragged from a list of tensors |
//! | [`Table`] | Arrow | the columns of a `RecordBatch`, a `StructArray`, or names and arrays |
//! | [`table_to_tensor`], [`TableToTensorOptions`] | Arrow -> tensor | numeric columns -> one writable 2-D tensor (a copy), row- or column-major, PyArrow's type promotion, nulls refused or NaN |
//! | [`table_to_tensors`], [`ColumnTensorOptions`] | Arrow -> tensor | one zero-copy tensor per column, named; nulls located by [`NullLocation`] |
//! | [`arrow_type_of`], [`dtype_of`], [`ARROW_DTYPES`] | both | the dtype <-> Arrow type correspondence |
//! | [`Tensor`], [`DType`], [`Device`], [`ExportOptions`], [`MAX_NDIM`] | | the tensor layer, re-exported: a checked strided view over an Arrow buffer, DLPack out and in |
//! | [`Tensor::from_vec`], [`Tensor::as_slice`], [`Tensor::get`], [`Tensor::iter`], [`NativeDType`] | | typed values: build from a `Vec<T>`, read as `T` for any strides, dtype checked |
//! | [`Managed`], [`dlpack_sys`] | | DLPack managed tensors (what `to_dlpack_*` returns and `from_managed` takes) and the raw C ABI |
//! | [`FixedShapeTensorArray::into_field_and_array`] | Arrow | a fixed-shape tensor column as the `(Field, ArrayRef)` a `RecordBatch` takes |
//! | `Tensor::view`, `Tensor::from_ndarray`, `FixedShapeTensorArray::from_ndarray`, `FixedShapeTensorArray::to_ndarray`, `ndarray` (feature `ndarray`) | both | ndarray views of any tensor, arrays to tensors and fixed-shape tensor columns |
//! | [`shares_memory`], [`Tensor::shares_memory`], [`Tensor::shares_memory_with_buffer`] | | whether a tensor views an array's, a buffer's or another tensor's memory: the zero-copy check |
//! | `images::decode_images`, `images::ImageSpec` (feature `images`) | Arrow -> tensor | a column of encoded images (JPEG, PNG, WebP, GIF, BMP; binary or Hugging Face `Image` structs) -> one `(B, C, H, W)` tensor, decoded, resized and cropped on the caller's threads |
//! | [`available_cores`] | | the cores this process may use, read once (the default thread count of image decoding and of the loader) |
//! | [`Error`] | | the one error type |
//!
//! Tensors made from arrays are read-only: Arrow buffers are immutable, and DLPack exports flag
//! them `READ_ONLY`.
//!
//! Arrow to DLPack and back, sharing one buffer the whole way:
//!
//! ```
//! use arrow_array::{Array, Float32Array};
//! use arrow_dlpack::{
//!     ArrayToTensorOptions, ExportOptions, Tensor, TensorToArrayOptions, array_to_tensor,
//!     tensor_to_array,
//! };
//!
//! let array = Float32Array::from(vec![1.0, 2.0, 3.0, 4.0]).slice(1, 3);
//! let tensor = array_to_tensor(&array, ArrayToTensorOptions::default())?;
//! assert_eq!(tensor.as_slice::<f32>()?, &[2.0, 3.0, 4.0]);
//! let managed = tensor.to_dlpack_versioned(ExportOptions::default())?;
//!
//! // ... a consumer (numpy, PyTorch, a C library) reads `managed` and hands it back ...
//! let imported = Tensor::from_managed(managed)?;
//! let back = tensor_to_array(&imported, TensorToArrayOptions::default())?;
//!
//! let back = back.as_any().downcast_ref::<Float32Array>().unwrap();
//! assert_eq!(back.values().as_ref(), &[2.0, 3.0, 4.0]);
//! assert_eq!(back.values().as_ptr(), array.values().as_ptr());
//! # Ok::<(), arrow_dlpack::Error>(())
//! ```
//!
//! A tensor to a fixed-shape tensor column and back; the permutation records the transposition:
//!
//! ```
//! use arrow_dlpack::{ArrayToTensorOptions, FixedShapeTensorArray, Tensor, TensorToArrayOptions};
//!
//! let images = Tensor::from_vec((0..24i64).collect(), vec![2, 3, 4])?
//!     .permuted(&[0, 2, 1])?; // two 4x3 images, stored as 3x4
//!
//! let column = FixedShapeTensorArray::from_tensor(&images, TensorToArrayOptions::default())?;
//! assert_eq!(column.extension_type().shape(), &[3, 4]);
//! assert_eq!(column.extension_type().metadata_json(), r#"{"shape":[3,4],"permutation":[1,0]}"#);
//! let field = column.field("images"); // carries ARROW:extension:name and metadata
//!
//! let tensor = column.to_tensor(ArrayToTensorOptions::default())?;
//! assert_eq!(tensor.shape(), &[2, 4, 3]);
//! assert_eq!(tensor.strides(), images.strides());
//! # Ok::<(), arrow_dlpack::Error>(())
//! ```
//!
//! Errors: one [`Error`] enum, into which the tensor layer's errors convert with `?`; a message
//! describes its own level, its cause is its [`source`](std::error::Error::source), and
//! `error.report()` ([`Report`]) prints the whole chain on one line:
//!
//! ```
//! use arrow_array::Int32Array;
//! use arrow_dlpack::{ArrayToTensorOptions, array_to_tensor};
//!
//! let with_nulls = Int32Array::from(vec![Some(1), None]);
//! let error = array_to_tensor(&with_nulls, ArrayToTensorOptions::default()).unwrap_err();
//! eprintln!("{}", error.report());
//! assert!(error.report().to_string().contains("null"));
//! ```

#![warn(missing_docs)]

mod chunked;
mod column_parts;
mod cores;
mod data_type;
mod error;
mod fixed_shape_tensor;
mod from_tensor;
#[cfg(feature = "images")]
pub mod images;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
mod ragged;
mod shares_memory;
mod table;
mod to_tensor;
mod variable_shape_tensor;

pub use chunked::{ConcatOptions, chunks_need_copy, concat_chunks};
pub use cores::available_cores;
pub use data_type::{ARROW_DTYPES, arrow_type_of, dtype_of};
pub use error::{Error, NullLocation, Result};
pub use fixed_shape_tensor::{
    EXTENSION_NAME, FixedShapeTensorArray, FixedShapeTensorMetadata, FixedShapeTensorType,
};
pub use from_tensor::{TensorToArrayOptions, tensor_to_array, tensor_to_fixed_size_list};
pub use ragged::{
    ListToRaggedOptions, PackedTensor, PadOptions, PadValue, RaggedTensor, Side, list_to_ragged,
    pack_pieces, pad_pieces,
};
pub use shares_memory::shares_memory;
pub use table::{
    ColumnTensorOptions, RecordBatchToTensorOptions, RowsDestination, Table, TableToTensorOptions,
    WriteRowsOptions, columns_to_tensor, table_dtype, table_to_tensor, table_to_tensors,
    tables_to_tensor, write_rows,
};
pub use to_tensor::{ArrayToTensorOptions, array_to_tensor, validity_to_tensor};
pub use variable_shape_tensor::{
    VARIABLE_SHAPE_TENSOR_NAME, VariableShapePadOptions, VariableShapeTensorArray,
    VariableShapeTensorMetadata, VariableShapeTensorType,
};

/// The Arrow buffers a [`Tensor`] views or is built from ([`Tensor::buffer`],
/// [`Tensor::try_new`], [`Tensor::from_scalar_buffer`]), so that a tensor can be built and checked
/// with this crate alone.
#[doc(no_inline)]
pub use arrow_buffer::{Buffer, ScalarBuffer};
/// The tensor layer, whole: [`tensor::layout`], [`tensor::Iter`] and everything re-exported above.
pub use arrow_dlpack_tensor as tensor;
pub use arrow_dlpack_tensor::{
    DType, Device, ExportOptions, ImportOptions, MAX_NDIM, Managed, NativeDType, Report, Tensor,
    check_error_chain, error_messages, join_messages,
};
/// The raw DLPack C ABI (`DLManagedTensorVersioned`, `DLDataType`, ...), to name the structs that
/// [`Managed`] holds and to hand them to C.
pub use dlpack_sys;
/// The half-precision element types, [`half::f16`] and [`half::bf16`], that [`NativeDType`] reads.
pub use half;
/// The ndarray version that [`Tensor::view`] and [`Tensor::from_ndarray`] speak.
#[cfg(feature = "ndarray")]
pub use ndarray;
