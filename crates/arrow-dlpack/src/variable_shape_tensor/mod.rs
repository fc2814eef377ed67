//! The `arrow.variable_shape_tensor` canonical extension type: a column whose every row is a
//! tensor of one element type and rank but of its own shape.
//!
//! The storage is `Struct<data: List<T>, shape: FixedSizeList<int32>[ndim]>`; the metadata
//! (`dim_names`, `permutation`, `uniform_shape`) is read and written here through serde, with
//! the specification's key `permutation` written and arrow-rs's `permutations` also read; see
//! `docs/variable-shape-tensor.md`.
//!
//! | module | what it holds |
//! |---|---|
//! | `metadata` | [`VariableShapeTensorMetadata`], the JSON under `ARROW:extension:metadata` |
//! | `tensor_type` | [`VariableShapeTensorType`]: element type, rank, metadata, storage type |
//! | `array` | [`VariableShapeTensorArray`]: storage checked row by row; each row a zero-copy tensor |
//! | `build` | `VariableShapeTensorArray::from_tensors`: tensors copied into one column |
//! | `padded` | `VariableShapeTensorArray::to_padded`, [`VariableShapePadOptions`] |
//! | `ragged` | `VariableShapeTensorArray::to_ragged`: rows that differ only in their first dimension as one [`RaggedTensor`](crate::RaggedTensor) |

mod array;
mod build;
mod metadata;
mod padded;
mod ragged;
mod tensor_type;

pub use array::VariableShapeTensorArray;
pub use metadata::VariableShapeTensorMetadata;
pub use padded::VariableShapePadOptions;
pub use tensor_type::VariableShapeTensorType;

/// The extension name of variable-shape tensors, stored under `ARROW:extension:name`.
pub const VARIABLE_SHAPE_TENSOR_NAME: &str = "arrow.variable_shape_tensor";
