//! Every error variant: its chain of causes printed without repeats, and its message.

use super::*;
use crate::test_support::assert_every_variant_chains;

/// The variants, in declaration order; the match is exhaustive, so a new variant does not
/// compile until it has an index here and a sample in [`samples`].
fn index(error: &Error) -> usize {
    match error {
        Error::UnknownTypeCode { .. } => 0,
        Error::UnsupportedBits { .. } => 1,
        Error::UnsupportedLanes { .. } => 2,
        Error::UnsupportedDevice { .. } => 3,
        Error::DeviceMemory { .. } => 4,
        Error::UnsupportedVersion { .. } => 5,
        Error::NullManagedTensor => 6,
        Error::InvalidNdim { .. } => 7,
        Error::NullShape { .. } => 8,
        Error::NegativeExtent { .. } => 9,
        Error::StridesLength { .. } => 10,
        Error::DimNamesLength { .. } => 11,
        Error::Overflow { .. } => 12,
        Error::NullData { .. } => 13,
        Error::Misaligned { .. } => 14,
        Error::BeforeBuffer { .. } => 15,
        Error::PastBuffer { .. } => 16,
        Error::InvalidPermutation { .. } => 17,
        Error::OutOfMemory { .. } => 18,
        Error::Allocation { .. } => 19,
        Error::DTypeMismatch { .. } => 20,
        Error::ElementCount { .. } => 21,
        Error::NotRowMajor { .. } => 22,
        Error::IndexLength { .. } => 23,
        Error::IndexOutOfBounds { .. } => 24,
        Error::NdimMismatch { .. } => 25,
    }
}

const VARIANTS: usize = 26;

/// One error of every variant.
fn samples() -> Vec<Error> {
    vec![
        Error::UnknownTypeCode { code: 99, bits: 8 },
        Error::UnsupportedBits {
            kind: "float",
            bits: 12,
            expected: "16, 32 or 64",
        },
        Error::UnsupportedLanes { lanes: 4 },
        Error::UnsupportedDevice {
            device_type: 2,
            device_id: 0,
            name: "cuda",
        },
        Error::DeviceMemory {
            operation: "read the elements",
            device_type: 2,
            device_id: 1,
            name: "cuda",
        },
        Error::UnsupportedVersion {
            major: 2,
            minor: 0,
            expected_major: 1,
        },
        Error::NullManagedTensor,
        Error::InvalidNdim {
            ndim: -1,
            max: 1024,
        },
        Error::NullShape { ndim: 2 },
        Error::NegativeExtent { dim: 1, extent: -3 },
        Error::StridesLength {
            ndim: 2,
            strides: 1,
        },
        Error::DimNamesLength { ndim: 1, names: 2 },
        Error::Overflow {
            what: "the element count",
        },
        Error::NullData { elements: 1 },
        Error::Misaligned {
            address: 0x1001,
            alignment: 4,
            dtype: DType::Float32,
        },
        Error::BeforeBuffer {
            offset: 0,
            lowest: 2,
        },
        Error::PastBuffer {
            needed: 16,
            available: 8,
        },
        Error::InvalidPermutation {
            ndim: 2,
            order: vec![0, 0],
        },
        Error::OutOfMemory { bytes: 1 << 40 },
        Error::Allocation {
            reason: "no memory for a managed tensor of 96 bytes".to_string(),
        },
        Error::DTypeMismatch {
            expected: DType::Float32,
            found: DType::Int64,
            rust_type: "i64",
        },
        Error::ElementCount {
            shape: vec![2, 3],
            expected: 6,
            found: 5,
        },
        Error::NotRowMajor {
            shape: vec![2, 3],
            strides: vec![1, 2],
        },
        Error::IndexLength {
            expected: 1,
            found: 2,
        },
        Error::IndexOutOfBounds {
            dim: 0,
            index: 3,
            extent: 3,
        },
        Error::NdimMismatch {
            expected: 2,
            found: 3,
        },
    ]
}

#[test]
fn every_variant_prints_its_chain_without_repeating_a_cause() {
    assert_every_variant_chains(&samples(), index, VARIANTS);
}

#[test]
fn counts_take_the_plural_they_need() {
    let one = Error::IndexLength {
        expected: 1,
        found: 2,
    };
    assert_eq!(
        one.to_string(),
        "index length mismatch: expected 1 entry, one per dimension, found 2"
    );
}

#[test]
fn a_dtype_mismatch_names_the_rust_type_to_read_with() {
    let error = Error::DTypeMismatch {
        expected: DType::Float32,
        found: DType::Int64,
        rust_type: "i64",
    };
    assert_eq!(
        error.to_string(),
        "element type mismatch: the tensor has dtype float32; expected f32, found i64 (dtype \
         int64)"
    );
    let complex = Error::DTypeMismatch {
        expected: DType::Complex64,
        found: DType::Float32,
        rust_type: "f32",
    };
    assert!(
        complex
            .to_string()
            .contains("expected a Rust type that reads complex64, which this crate does not have"),
        "{complex}"
    );
}
