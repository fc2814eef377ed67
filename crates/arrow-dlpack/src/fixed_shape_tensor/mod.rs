//! The `arrow.fixed_shape_tensor` canonical extension type: a column whose every value is a tensor
//! of one shape, stored row-major in a fixed-size list.
//!
//! The metadata is written and read here through serde, following the specification (key
//! `permutation`, absent keys omitted, nullable storage child accepted), because arrow-rs's own
//! `FixedShapeTensor` writes a form PyArrow rejects; see `docs/fixed-shape-tensor.md`.
//!
//! | module | what it holds |
//! |---|---|
//! | `metadata` | [`FixedShapeTensorMetadata`], the JSON under `ARROW:extension:metadata` |
//! | `tensor_type` | [`FixedShapeTensorType`]: shape, permutation, dimension names, storage type |
//! | `array` | [`FixedShapeTensorArray`]: storage and type together, to and from tensors |

mod array;
mod metadata;
mod tensor_type;

pub use array::FixedShapeTensorArray;
pub use metadata::FixedShapeTensorMetadata;
pub use tensor_type::FixedShapeTensorType;
pub(crate) use tensor_type::is_permutation;

/// The extension name, stored under `ARROW:extension:name`.
pub const EXTENSION_NAME: &str = "arrow.fixed_shape_tensor";
