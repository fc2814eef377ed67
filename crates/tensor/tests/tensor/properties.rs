//! Property tests: arbitrary DLPack metadata never panics the importer, and what it accepts stays
//! consistent with the memory it describes; random views round-trip through DLPack exactly.

use arrow_buffer::Buffer;
use arrow_dlpack_tensor::{DType, ExportOptions, Tensor, layout};
use dlpack_sys::{DLDataType, DLDataTypeCode};
use proptest::prelude::*;

use crate::common::{Data, Spec, count, versioned};

fn extent() -> impl Strategy<Value = i64> {
    prop_oneof![8 => 0i64..5, 1 => Just(-1i64), 1 => Just(i64::MAX), 1 => Just(1i64 << 40)]
}

fn stride() -> impl Strategy<Value = i64> {
    prop_oneof![8 => -6i64..7, 1 => Just(i64::MAX), 1 => Just(i64::MIN), 1 => Just(1i64 << 50)]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whatever the metadata, import either refuses it (running the deleter once) or yields a
    /// tensor whose every element lies inside the 256 bytes the producer actually owns.
    #[test]
    fn import_never_panics_and_accepted_tensors_stay_in_bounds(
        shape in proptest::collection::vec(extent(), 0..4),
        strides in proptest::option::of(proptest::collection::vec(stride(), 0..4)),
        byte_offset in prop_oneof![Just(0u64), 0u64..64, Just(u64::MAX)],
        code in 0u8..20,
        bits in prop_oneof![Just(8u8), Just(16), Just(32), Just(64), Just(128), 0u8..=255],
        lanes in prop_oneof![4 => Just(1u16), 1 => 0u16..4],
    ) {
        let mut spec = Spec::float32(&[64]);
        spec.dtype = DLDataType { code: DLDataTypeCode(code), bits, lanes };
        spec.ndim = Some(shape.len() as i32);
        spec.shape = Some(shape.clone());
        // Strides, when given, must have one entry per dimension to be readable at all.
        spec.strides = strides.map(|mut s| { s.resize(shape.len(), 1); s });
        spec.byte_offset = byte_offset;
        spec.data = Data::Offset(16);
        let (raw, deleted) = versioned(&spec);
        // SAFETY: freshly built; shape and strides hold `ndim` entries.
        let base = unsafe { (*raw).dl_tensor.data } as usize - 16;
        // SAFETY: freshly built and owned.
        match unsafe { Tensor::from_raw_versioned(raw) } {
            Err(_) => prop_assert_eq!(count(&deleted), 1),
            Ok(tensor) => {
                let start = tensor.buffer().as_ptr() as usize;
                let end = start + tensor.buffer().len();
                if !tensor.is_empty() {
                    // The producer's declared extent is trusted (DLPack cannot prove it), but the
                    // importer's arithmetic must match it exactly: the buffer is the span of the
                    // addressed elements, inside the address space, and the first element sits
                    // at data + byte_offset.
                    prop_assert!(start > 0 && start <= end);
                    let (low, high) = layout::span(tensor.shape(), tensor.strides()).unwrap().unwrap();
                    let size = tensor.dtype().size() as i128;
                    prop_assert_eq!((end - start) as i128, (high - low + 1) * size);
                    prop_assert_eq!(tensor.offset() as i128, -low);
                    let first = base as i128 + 16 + byte_offset as i128;
                    prop_assert_eq!(tensor.data_ptr() as i128, first);
                }
                drop(tensor);
                prop_assert_eq!(count(&deleted), 1);
            }
        }
    }

    /// Random views (zero, gapped and negative strides, offsets, every dtype) round-trip through
    /// both ABIs element for element, sharing memory.
    #[test]
    fn random_views_round_trip_exactly(
        dtype_index in 0usize..DType::ALL.len(),
        dims in proptest::collection::vec((1usize..4, -3isize..4), 0..4),
        copy in any::<bool>(),
        legacy in any::<bool>(),
    ) {
        let dtype = DType::ALL[dtype_index];
        let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
        let strides: Vec<isize> = dims.iter().map(|d| d.1).collect();
        let (low, high) = layout::span(&shape, &strides).unwrap().unwrap();
        let offset = (-low) as usize;
        let len = (high - low + 1) as usize;
        let bytes: Vec<u8> = (0..len * dtype.size()).map(|i| (i * 31 + 7) as u8).collect();
        let tensor = Tensor::try_new(Buffer::from_vec(bytes), dtype, shape, strides, offset).unwrap();
        let options = ExportOptions::copy(Some(copy));
        let back = if legacy {
            Tensor::from_managed(tensor.to_dlpack_legacy(options).unwrap()).unwrap()
        } else {
            Tensor::from_managed(tensor.to_dlpack_versioned(options).unwrap()).unwrap()
        };
        prop_assert_eq!(back.shape(), tensor.shape());
        prop_assert_eq!(back.to_contiguous().unwrap().row_major_buffer(), tensor.to_contiguous().unwrap().row_major_buffer());
        prop_assert_eq!(back.data_ptr() == tensor.data_ptr(), !copy);
    }
}

/// Reads every element by its index, independently of `to_contiguous`.
fn reference_elements(tensor: &Tensor) -> Vec<u8> {
    let size = tensor.dtype().size();
    let bytes = tensor.buffer().as_slice();
    let mut out = Vec::new();
    let total: usize = tensor.shape().iter().product();
    for flat in 0..total {
        let mut rest = flat;
        let mut offset = tensor.offset() as isize;
        for (dim, &extent) in tensor.shape().iter().enumerate().rev() {
            offset += (rest % extent) as isize * tensor.strides()[dim];
            rest /= extent;
        }
        let start = offset as usize * size;
        out.extend_from_slice(&bytes[start..start + size]);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    /// `to_contiguous` agrees with an index-by-index reference for every layout, including the
    /// tiled path for transposed planes larger than a tile.
    #[test]
    fn to_contiguous_matches_an_element_by_element_reference(
        dtype_index in 0usize..DType::ALL.len(),
        dims in proptest::collection::vec((1usize..70, -80isize..80), 0..4),
    ) {
        let dtype = DType::ALL[dtype_index];
        let shape: Vec<usize> = dims.iter().map(|d| d.0).collect();
        let strides: Vec<isize> = dims.iter().map(|d| d.1).collect();
        let (low, high) = layout::span(&shape, &strides).unwrap().unwrap();
        let len = (high - low + 1) as usize;
        prop_assume!(len * dtype.size() < 1 << 24);
        let bytes: Vec<u8> = (0..len * dtype.size()).map(|i| (i * 31 + 7) as u8).collect();
        let tensor =
            Tensor::try_new(Buffer::from_vec(bytes), dtype, shape, strides, (-low) as usize).unwrap();
        let copy = tensor.to_contiguous().unwrap();
        prop_assert!(copy.is_row_major());
        let copied = copy.row_major_buffer().unwrap();
        prop_assert_eq!(copied.as_slice(), &reference_elements(&tensor)[..]);
    }
}

/// The kernels for transposed planes (unit row stride, 8 x 8 tiles in 64 x 64 blocks, SSE2 for
/// four-byte elements) and reversed runs agree with the reference on shapes that fill no tile,
/// part of one, exactly one and more, for every dtype, with positive and negative column strides
/// and an outer dimension.
#[test]
fn transposed_and_reversed_kernels_match_the_reference_on_odd_sizes() {
    let extents = [1usize, 3, 7, 8, 9, 63, 64, 65, 130];
    for dtype in DType::ALL {
        for &rows in &extents {
            for &cols in &extents {
                for (outer, sign) in [(1usize, 1isize), (2, 1), (1, -1)] {
                    // Source: `outer` row-major (cols, rows) matrices, read transposed.
                    let plane = rows * cols;
                    let elements = outer * plane;
                    let bytes: Vec<u8> = (0..elements * dtype.size())
                        .map(|i| (i * 31 + 7) as u8)
                        .collect();
                    let col_stride = sign * rows as isize;
                    let offset = if sign < 0 { (cols - 1) * rows } else { 0 };
                    let tensor = Tensor::try_new(
                        Buffer::from_vec(bytes),
                        dtype,
                        vec![outer, rows, cols],
                        vec![plane as isize, 1, col_stride],
                        offset,
                    )
                    .unwrap();
                    assert_copy_is_the_reference(
                        &tensor,
                        &format!("{dtype:?} {outer} x {rows} x {cols}, sign {sign}"),
                    );
                }
            }
        }
        for len in [1usize, 2, 7, 8, 63, 64, 65, 1000] {
            let bytes: Vec<u8> = (0..len * dtype.size())
                .map(|i| (i * 13 + 1) as u8)
                .collect();
            let reversed =
                Tensor::try_new(Buffer::from_vec(bytes), dtype, vec![len], vec![-1], len - 1)
                    .unwrap();
            assert_copy_is_the_reference(&reversed, &format!("{dtype:?} reversed {len}"));
        }
    }
}

/// Asserts that `to_contiguous` of `tensor` gives the reference's bytes.
fn assert_copy_is_the_reference(tensor: &Tensor, what: &str) {
    let copy = tensor.to_contiguous().unwrap();
    assert_eq!(
        copy.row_major_buffer().unwrap().as_slice(),
        &reference_elements(tensor)[..],
        "{what}"
    );
}
