//! The one error type of this crate.

use crate::DType;

/// Everything that can go wrong when building, exporting or importing a [`Tensor`](crate::Tensor).
///
/// Messages are lowercase, name the field that is wrong, and say what was expected and what was
/// found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A DLPack type code that this crate does not know.
    #[error(
        "unsupported dtype: unknown DLPack type code {code} (with bits {bits}); expected int, \
         uint, float, bfloat, complex, bool or a float8 kind"
    )]
    UnknownTypeCode {
        /// The `dtype.code` field.
        code: u8,
        /// The `dtype.bits` field.
        bits: u8,
    },

    /// A known type code with a bit width DLPack or this crate does not define for it.
    #[error("unsupported dtype: {kind} with dtype.bits {bits}; expected bits {expected}")]
    UnsupportedBits {
        /// The kind named by the type code, for example `"float"`.
        kind: &'static str,
        /// The `dtype.bits` field.
        bits: u8,
        /// The widths that this kind supports, for example `"16, 32 or 64"`.
        expected: &'static str,
    },

    /// Vector types (`lanes != 1`) cannot be represented.
    #[error("unsupported dtype: lanes is {lanes}; expected 1")]
    UnsupportedLanes {
        /// The `dtype.lanes` field.
        lanes: u16,
    },

    /// Memory that is not host memory.
    #[error(
        "unsupported device: device_type {device_type} ({name}) with device_id {device_id}; \
         expected the CPU (device_type 1)"
    )]
    UnsupportedDevice {
        /// The `device.device_type` field.
        device_type: u32,
        /// The `device.device_id` field.
        device_id: i32,
        /// The DLPack name of the device type.
        name: &'static str,
    },

    /// An operation that reads the data (a copy, a typed read) asked of a tensor whose memory is
    /// not host memory; nothing in this crate dereferences device memory.
    #[error(
        "cannot {operation}: the memory is on {name} device {device_id} (device_type \
         {device_type}), and only host memory can be read"
    )]
    DeviceMemory {
        /// What was asked.
        operation: &'static str,
        /// The device type.
        device_type: u32,
        /// The device index.
        device_id: i32,
        /// The DLPack name of the device type.
        name: &'static str,
    },

    /// A versioned managed tensor whose major version differs from this crate's.
    #[error("unsupported DLPack version {major}.{minor}; expected major version {expected_major}")]
    UnsupportedVersion {
        /// The `version.major` field.
        major: u32,
        /// The `version.minor` field.
        minor: u32,
        /// The major version this crate implements.
        expected_major: u32,
    },

    /// A NULL managed-tensor pointer.
    #[error("managed tensor pointer is NULL")]
    NullManagedTensor,

    /// `ndim` is negative or above [`MAX_NDIM`](crate::MAX_NDIM).
    #[error("invalid ndim {ndim}; expected 0 to {max}")]
    InvalidNdim {
        /// The rank found.
        ndim: i64,
        /// The largest rank accepted.
        max: usize,
    },

    /// `shape` is NULL although `ndim` is positive.
    #[error("shape is NULL but ndim is {ndim}")]
    NullShape {
        /// The `ndim` field.
        ndim: i32,
    },

    /// A negative extent.
    #[error("shape[{dim}] is {extent}; expected an extent >= 0")]
    NegativeExtent {
        /// The dimension.
        dim: usize,
        /// The extent found.
        extent: i64,
    },

    /// `strides` does not have one entry per dimension.
    #[error(
        "strides has {} but shape has {ndim}; expected one stride per dimension",
        plural(*strides, "entry", "entries")
    )]
    StridesLength {
        /// Number of dimensions.
        ndim: usize,
        /// Number of strides given.
        strides: usize,
    },

    /// `dim_names` does not have one entry per dimension.
    #[error(
        "dim_names has {} but the tensor has {}; expected one name per dimension",
        plural(*names, "entry", "entries"),
        plural(*ndim, "dimension", "dimensions")
    )]
    DimNamesLength {
        /// Number of dimensions.
        ndim: usize,
        /// Number of names given.
        names: usize,
    },

    /// An intermediate size or offset does not fit the integer type that must hold it.
    #[error("integer overflow computing {what}")]
    Overflow {
        /// What was being computed, for example `"the element count"`.
        what: &'static str,
    },

    /// `data` is NULL although the tensor has elements.
    #[error(
        "data is NULL but the tensor has {}; expected a data pointer",
        plural(*elements, "element", "elements")
    )]
    NullData {
        /// The number of elements described by the shape.
        elements: usize,
    },

    /// The first element is not aligned for the dtype.
    #[error(
        "data address {address:#x} is not aligned for {dtype}; expected a multiple of {alignment} \
         bytes"
    )]
    Misaligned {
        /// The address of the element at the lowest address.
        address: usize,
        /// The alignment the dtype requires.
        alignment: usize,
        /// The dtype.
        dtype: DType,
    },

    /// Some addressed element lies before the start of the buffer.
    #[error(
        "element offset {offset} with these strides reaches {lowest} elements before the start \
         of the buffer; expected every element inside the buffer"
    )]
    BeforeBuffer {
        /// The element offset of the logical first element.
        offset: usize,
        /// How many elements before the buffer start the lowest element lies.
        lowest: u128,
    },

    /// Some addressed element lies past the end of the buffer.
    #[error(
        "tensor needs {needed} bytes from the start of the buffer but the buffer has {available}"
    )]
    PastBuffer {
        /// Bytes needed to hold the element at the highest address.
        needed: u128,
        /// Bytes in the buffer.
        available: usize,
    },

    /// A permutation that is not a reordering of `0..ndim`.
    #[error("invalid permutation {order:?}; expected each of 0..{ndim} exactly once")]
    InvalidPermutation {
        /// Number of dimensions.
        ndim: usize,
        /// The order given.
        order: Vec<usize>,
    },

    /// The allocator refused the memory an operation needed (a copy, a loader's plan).
    #[error("cannot allocate {bytes} bytes")]
    OutOfMemory {
        /// The size asked for.
        bytes: usize,
    },

    /// dlpark could not allocate the managed tensor header and its shape and strides.
    #[error("cannot allocate the managed tensor: {reason}")]
    Allocation {
        /// The allocator's message.
        reason: String,
    },

    /// A typed read or build whose Rust element type does not match the tensor's dtype.
    #[error(
        "element type mismatch: the tensor has dtype {expected}; expected {}, found \
         {rust_type} (dtype {found})",
        reader_of(*expected)
    )]
    DTypeMismatch {
        /// The tensor's dtype.
        expected: crate::DType,
        /// The dtype of the Rust type asked for.
        found: crate::DType,
        /// The Rust type asked for, for example `"f32"`.
        rust_type: &'static str,
    },

    /// A number of values that does not fill the shape exactly.
    #[error(
        "element count mismatch: expected {expected} values for shape {shape:?}, found {found}"
    )]
    ElementCount {
        /// The shape asked for.
        shape: Vec<usize>,
        /// The element count of the shape.
        expected: usize,
        /// The number of values given.
        found: usize,
    },

    /// A slice of the elements was asked of a tensor that is not row-major.
    #[error(
        "layout mismatch: expected a row-major tensor, found shape {shape:?} with strides \
         {strides:?}"
    )]
    NotRowMajor {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        strides: Vec<isize>,
    },

    /// An index with the wrong number of entries.
    #[error(
        "index length mismatch: expected {}, one per dimension, found {found}",
        plural(*expected, "entry", "entries")
    )]
    IndexLength {
        /// The tensor's rank.
        expected: usize,
        /// The number of entries in the index.
        found: usize,
    },

    /// An index entry at or past the extent of its dimension.
    #[error(
        "index {index} is out of bounds for dimension {dim} of extent {extent}; expected an \
         index below {extent}"
    )]
    IndexOutOfBounds {
        /// The dimension.
        dim: usize,
        /// The index entry found.
        index: usize,
        /// The extent of the dimension.
        extent: usize,
    },

    /// A view of a fixed number of dimensions asked of a tensor with another number.
    #[error("dimension count mismatch: the view has {expected} dimensions, the tensor {found}")]
    NdimMismatch {
        /// The view's number of dimensions.
        expected: usize,
        /// The tensor's.
        found: usize,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `count` and the noun in the number it takes: `1 entry`, `2 entries`.
fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// The Rust type that reads `dtype`, for [`Error::DTypeMismatch`].
fn reader_of(dtype: DType) -> String {
    match dtype.rust_type() {
        Some(name) => name.to_string(),
        None => format!("a Rust type that reads {dtype}, which this crate does not have"),
    }
}

impl Error {
    /// The error with its chain of causes, for printing on one line:
    /// `format!("{}", error.report())` gives every message from this one to the innermost cause,
    /// joined by `: `, as anyhow's `{:#}` does (this error's own `Display` describes its level
    /// only).
    pub fn report(&self) -> Report<'_> {
        Report::new(self)
    }
}

mod chain;
#[cfg(test)]
mod tests;

pub use chain::{
    Report, assert_every_variant_chains, check_error_chain, error_messages, join_messages,
};
