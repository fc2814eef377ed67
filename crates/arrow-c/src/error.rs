//! [`ArrowCError`]: why an Arrow C struct was refused, in kinds a binding maps to its own
//! exception types (Python: `ValueError`, `TypeError`, `BufferError`).

use arrow_dlpack_tensor::Device;
use arrow_schema::{ArrowError, DataType};

/// Why an Arrow C struct was refused, or could not be imported or exported.
///
/// A message describes its own level; the cause, where there is one (arrow-rs's validation, the
/// tensor and Arrow layers), is its [`source`](std::error::Error::source), and
/// [`report`](ArrowCError::report) prints both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArrowCError {
    /// The struct breaks the C Data Interface (a `ValueError` in Python).
    #[error("malformed Arrow C data: {field} {problem}")]
    Malformed {
        /// The field by its path, `ArrowArray.children[1].n_buffers`.
        field: String,
        /// What is wrong with it: what it holds and what was expected.
        problem: String,
    },
    /// The checked struct's values break their type's rules, as arrow-rs's validation found
    /// (offsets out of order, invalid UTF-8, dictionary keys out of range; a `ValueError`).
    #[error("malformed Arrow C data: {field} holds values its type does not allow")]
    InvalidValues {
        /// The array by its path, `ArrowArray.children[0]`.
        field: String,
        /// arrow-rs's finding.
        source: ArrowError,
    },
    /// The struct is well formed but describes a type this crate cannot import (a `TypeError`).
    #[error("unsupported Arrow C data: {field}: {problem}")]
    Unsupported {
        /// The struct by its path.
        field: String,
        /// The type, and why it cannot be imported.
        problem: String,
    },
    /// A format string that arrow-rs does not read (a `TypeError`).
    #[error("unsupported Arrow C data: {field} is a format arrow-rs cannot read")]
    UnsupportedFormat {
        /// The `format` field by its path, `ArrowSchema.children[0].format`.
        field: String,
        /// arrow-rs's reason.
        source: ArrowError,
    },
    /// A column on a device whose type cannot stay there as a tensor: importing it would read
    /// device memory, which this crate never does (a `BufferError`).
    #[error(
        "cannot import a {data_type} column held on {} device {} without reading device memory: \
         arrow_dlpack keeps device columns as tensors, which needs fixed-width numeric values, \
         fixed-size lists of them or arrow.fixed_shape_tensor",
        .device.type_name(),
        .device.device_id
    )]
    DeviceColumnType {
        /// The column's type.
        data_type: DataType,
        /// Where its memory is.
        device: Device,
    },
    /// A device column whose null count is unknown (`-1`) and whose validity bitmap is on the
    /// device: counting would read device memory (a `BufferError`).
    #[error(
        "{field}.null_count is -1 (unknown) and its validity bitmap is on {} device {}: counting \
         the nulls would read device memory, which arrow_dlpack does not do; export the column \
         with its null_count",
        .device.type_name(),
        .device.device_id
    )]
    DeviceNullCount {
        /// The array by its path.
        field: String,
        /// Where its memory is.
        device: Device,
    },
    /// A device column with nulls, which a tensor cannot hold (a `TypeError`).
    #[error(
        "{field} has {nulls} nulls on {} device {}; a tensor cannot hold nulls",
        .device.type_name(),
        .device.device_id
    )]
    Nulls {
        /// The array by its path.
        field: String,
        /// Its null count.
        nulls: i64,
        /// Where its memory is.
        device: Device,
    },
    /// A device tensor that an Arrow array can share only through a copy, which this crate does
    /// not make of device memory (a `BufferError`).
    #[error(
        "an Arrow array shares a tensor's memory only when the tensor is row-major with at least \
         one dimension (shape {shape:?}, strides {strides:?}); a copy would be needed, which \
         arrow_dlpack does not make of data on {} device {}",
        .device.type_name(),
        .device.device_id
    )]
    DeviceNotRowMajor {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        strides: Vec<isize>,
        /// Where its memory is.
        device: Device,
    },
    /// A device stream of other than one chunk: joining chunks, or making an empty one, would
    /// need a device copy (a `BufferError`).
    #[error(
        "the ArrowDeviceArrayStream holds {chunks} chunks on {} devices: arrow_dlpack keeps device \
         data as one tensor, and joining chunks (or making an empty one) would need a device \
         copy; expected one chunk",
        .device.type_name()
    )]
    DeviceChunks {
        /// The number of chunks.
        chunks: usize,
        /// The stream's device.
        device: Device,
    },
    /// A stream's producer failed a call: its callback returned an error code (an errno value,
    /// as the C Stream Interface has them), with the message of its `get_last_error` when it
    /// gave one (a Python exception raised in a generator behind a pyarrow reader, an I/O
    /// error of the producer's own; a `ValueError`).
    #[error(
        "the producer of the Arrow stream failed in {call}{} (error {status}){}",
        .chunk.map(|chunk| format!(" at chunk {chunk}")).unwrap_or_default(),
        .message.as_deref().map(|message| format!(": {message}")).unwrap_or_default()
    )]
    ProducerFailed {
        /// The callback, `ArrowArrayStream.get_next`.
        call: &'static str,
        /// The chunk asked for, for `get_next`.
        chunk: Option<usize>,
        /// The code it returned.
        status: i32,
        /// What its `get_last_error` said.
        message: Option<String>,
    },
    /// The tensor crate refused the tensor a device chunk describes.
    #[error(transparent)]
    Tensor(#[from] arrow_dlpack_tensor::Error),
    /// `arrow-dlpack` refused a type: an invalid `arrow.fixed_shape_tensor` field, an element
    /// type that Arrow cannot carry.
    #[error(transparent)]
    Arrow(#[from] arrow_dlpack::Error),
    /// arrow-rs refused to build the array of an export (a `ValueError`).
    #[error("cannot export the tensor as an Arrow array")]
    Export {
        /// arrow-rs's reason.
        #[from]
        source: ArrowError,
    },
}

impl ArrowCError {
    /// The error with its chain of causes, for printing on one line:
    /// `format!("{}", error.report())` gives every message from this one to the innermost cause,
    /// joined by `: `, as anyhow's `{:#}` does (this error's own `Display` describes its level
    /// only).
    pub fn report(&self) -> arrow_dlpack::Report<'_> {
        arrow_dlpack::Report::new(self)
    }
}

/// The result of this crate's checks, imports and exports.
pub type Result<T = (), E = ArrowCError> = std::result::Result<T, E>;

/// A [`ArrowCError::Malformed`]: `field` (its path) and what is wrong with it.
pub(crate) fn malformed(field: impl Into<String>, problem: impl Into<String>) -> ArrowCError {
    ArrowCError::Malformed {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A [`ArrowCError::Unsupported`]: `field` (its path) and why its type cannot be imported.
pub(crate) fn unsupported(field: impl Into<String>, problem: impl Into<String>) -> ArrowCError {
    ArrowCError::Unsupported {
        field: field.into(),
        problem: problem.into(),
    }
}

/// A [`ArrowCError::InvalidValues`] of the array at `field`.
pub(crate) fn invalid_values(field: &str, source: ArrowError) -> ArrowCError {
    ArrowCError::InvalidValues {
        field: field.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use arrow_dlpack_tensor::test_support::assert_every_variant_chains;

    use super::*;

    /// The variants, in declaration order; the match is exhaustive, so a new variant does not
    /// compile until it has an index here and a sample in [`samples`].
    fn index(error: &ArrowCError) -> usize {
        match error {
            ArrowCError::Malformed { .. } => 0,
            ArrowCError::InvalidValues { .. } => 1,
            ArrowCError::Unsupported { .. } => 2,
            ArrowCError::UnsupportedFormat { .. } => 3,
            ArrowCError::DeviceColumnType { .. } => 4,
            ArrowCError::DeviceNullCount { .. } => 5,
            ArrowCError::Nulls { .. } => 6,
            ArrowCError::DeviceNotRowMajor { .. } => 7,
            ArrowCError::DeviceChunks { .. } => 8,
            ArrowCError::ProducerFailed { .. } => 9,
            ArrowCError::Tensor(_) => 10,
            ArrowCError::Arrow(_) => 11,
            ArrowCError::Export { .. } => 12,
        }
    }

    const VARIANTS: usize = 13;

    const CUDA: Device = Device {
        device_type: 2,
        device_id: 1,
    };

    /// One error of every variant, with causes where the variant has them.
    fn samples() -> Vec<ArrowCError> {
        vec![
            malformed(
                "ArrowArray.children[1].n_buffers",
                "is 3; expected 2 for Int32",
            ),
            invalid_values(
                "ArrowArray",
                ArrowError::InvalidArgumentError("offset at slot 2 is out of order".to_string()),
            ),
            unsupported("ArrowSchema", "arrays of type Union cannot be imported"),
            ArrowCError::UnsupportedFormat {
                field: "ArrowSchema.format".to_string(),
                source: ArrowError::CDataInterface("unsupported format \"+x\"".to_string()),
            },
            ArrowCError::DeviceColumnType {
                data_type: DataType::Utf8,
                device: CUDA,
            },
            ArrowCError::DeviceNullCount {
                field: "ArrowDeviceArray.array".to_string(),
                device: CUDA,
            },
            ArrowCError::Nulls {
                field: "ArrowDeviceArray.array".to_string(),
                nulls: 1,
                device: CUDA,
            },
            ArrowCError::DeviceNotRowMajor {
                shape: vec![2, 3],
                strides: vec![1, 2],
                device: CUDA,
            },
            ArrowCError::DeviceChunks {
                chunks: 2,
                device: CUDA,
            },
            ArrowCError::ProducerFailed {
                call: "ArrowArrayStream.get_next",
                chunk: Some(1),
                status: 22,
                message: Some("Invalid: boom".to_string()),
            },
            ArrowCError::Tensor(arrow_dlpack_tensor::Error::NullShape { ndim: 2 }),
            ArrowCError::Arrow(arrow_dlpack::Error::ZeroDimensional),
            ArrowCError::Export {
                source: ArrowError::InvalidArgumentError("buffer too small".to_string()),
            },
        ]
    }

    #[test]
    fn every_variant_prints_its_chain_without_repeating_a_cause() {
        assert_every_variant_chains(&samples(), index, VARIANTS);
    }

    #[test]
    fn a_report_gives_the_struct_and_arrow_rs_finding_on_one_line() {
        let error = invalid_values(
            "ArrowArray.children[0]",
            ArrowError::InvalidArgumentError("offset at slot 2 is out of order".to_string()),
        );
        assert_eq!(
            error.to_string(),
            "malformed Arrow C data: ArrowArray.children[0] holds values its type does not allow"
        );
        assert_eq!(
            error.report().to_string(),
            "malformed Arrow C data: ArrowArray.children[0] holds values its type does not allow: \
             Invalid argument error: offset at slot 2 is out of order"
        );
    }
}
