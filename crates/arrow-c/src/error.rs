//! [`ArrowCError`]: why an Arrow C struct was refused, in kinds a binding maps to its own
//! exception types (Python: `ValueError`, `TypeError`, `BufferError`).

/// Why an Arrow C struct was refused, or could not be imported or exported.
#[derive(Debug)]
#[non_exhaustive]
pub enum ArrowCError {
    /// The struct breaks the C Data Interface (a `ValueError` in Python); the message names the
    /// field by its path (`ArrowArray.children[1].n_buffers`).
    Malformed(String),
    /// The struct is well formed but describes a type this crate cannot import (a `TypeError`).
    Unsupported(String),
    /// The data cannot be handed over without reading or copying device memory, which this crate
    /// never does (a `BufferError`).
    Device(String),
    /// A device chunk holds nulls, which a tensor cannot hold (a `TypeError`).
    Nulls(String),
    /// The tensor crate refused the tensor a device chunk describes.
    Tensor(arrow_dlpack_tensor::Error),
    /// `arrow-dlpack` refused a type: an invalid `arrow.fixed_shape_tensor` field, an element
    /// type that Arrow cannot carry.
    Arrow(arrow_dlpack::Error),
    /// arrow-rs refused the data of an export (a `ValueError`).
    ArrowRs(arrow_schema::ArrowError),
}

impl std::fmt::Display for ArrowCError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArrowCError::Malformed(message) => write!(f, "malformed Arrow C data: {message}"),
            ArrowCError::Unsupported(message) => write!(f, "unsupported Arrow C data: {message}"),
            ArrowCError::Device(message) | ArrowCError::Nulls(message) => f.write_str(message),
            ArrowCError::Tensor(error) => error.fmt(f),
            ArrowCError::Arrow(error) => error.fmt(f),
            ArrowCError::ArrowRs(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for ArrowCError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ArrowCError::Tensor(error) => Some(error),
            ArrowCError::Arrow(error) => Some(error),
            ArrowCError::ArrowRs(error) => Some(error),
            _ => None,
        }
    }
}

/// The result of this crate's checks, imports and exports.
pub type Result<T = (), E = ArrowCError> = std::result::Result<T, E>;

pub(crate) fn malformed(message: String) -> ArrowCError {
    ArrowCError::Malformed(message)
}
