//! `RaggedTensor` itself: checked construction, rows, slices, take, concat, from_rows, truncate.

use arrow_array::cast::AsArray;
use arrow_buffer::Buffer;
use arrow_dlpack::{DType, Error, RaggedTensor, Side, Tensor};
use proptest::prelude::*;

use super::{i32_tensor, rows_i32};

fn offsets_error(values: Vec<i32>, offsets: Tensor) -> Error {
    RaggedTensor::new(i32_tensor(values), offsets).unwrap_err()
}

#[test]
fn malformed_offsets_are_refused() {
    let cases = [
        (vec![1, 2], i32_tensor(vec![1, 2])), // does not start at 0
        (vec![1, 2], i32_tensor(vec![0, 2, 1, 2])), // decreasing
        (vec![1, 2], i32_tensor(vec![0, 3])), // past the values
        (vec![1, 2], i32_tensor(vec![0, 1])), // short of the values
        (vec![1, 2], i32_tensor(vec![0, -1, 2])), // negative
        (vec![1, 2], i32_tensor(vec![])),     // no offsets
        (
            vec![1, 2],
            Tensor::from_vec(vec![0u32, 2], vec![2]).unwrap(),
        ), // dtype
        (
            vec![1, 2],
            Tensor::from_vec(vec![0i32, 2], vec![1, 2]).unwrap(),
        ), // shape
    ];
    for (values, offsets) in cases {
        let error = offsets_error(values, offsets.clone());
        assert!(
            matches!(error, Error::InvalidOffsets { .. }),
            "{offsets:?}: {error}"
        );
    }
    let scalar = Tensor::from_vec(vec![1i32], vec![]).unwrap();
    assert!(matches!(
        RaggedTensor::new(scalar, i32_tensor(vec![0])),
        Err(Error::ZeroDimensional)
    ));
}

#[test]
fn new_reads_its_own_copy_of_the_offsets_and_shares_the_values() {
    // Offsets may come from memory another owner still writes (a numpy array through
    // DLPack): the ragged tensor checks and keeps a copy, so no later write moves a row.
    let values = i32_tensor(vec![1, 2, 3]);
    let offsets = i32_tensor(vec![0, 2, 3]);
    let ragged = RaggedTensor::new(values.clone(), offsets.clone()).unwrap();
    assert_ne!(ragged.offsets().data_ptr(), offsets.data_ptr());
    assert!(ragged.offsets().is_read_only());
    assert_eq!(ragged.offsets().as_slice::<i32>().unwrap(), &[0, 2, 3]);
    assert_eq!(ragged.values().data_ptr(), values.data_ptr());
    // The list array made of it shares the copy, not the caller's offsets.
    let list = ragged.to_list_array().unwrap();
    let list = list.as_list::<i32>();
    assert_eq!(
        list.value_offsets().as_ptr().cast::<u8>(),
        ragged.offsets().data_ptr()
    );
}

#[test]
fn strided_offsets_are_made_contiguous() {
    let buffer = Buffer::from_vec(vec![0i64, 99, 2, 99, 3, 99]);
    let offsets = Tensor::try_new(buffer, DType::Int64, vec![3], vec![2], 0).unwrap();
    let ragged = RaggedTensor::new(i32_tensor(vec![1, 2, 3]), offsets).unwrap();
    assert_eq!(ragged.offsets().as_slice::<i64>().unwrap(), &[0, 2, 3]);
    assert_eq!(rows_i32(&ragged), vec![vec![1, 2], vec![3]]);
}

#[test]
fn rows_and_slices_are_views() {
    let ragged = RaggedTensor::new(
        i32_tensor(vec![1, 2, 3, 4, 5]),
        i32_tensor(vec![0, 3, 3, 5]),
    )
    .unwrap();
    let row = ragged.row(2).unwrap();
    assert_eq!(row.as_slice::<i32>().unwrap(), &[4, 5]);
    assert_eq!(row.data_ptr(), ragged.values().data_ptr().wrapping_add(12));
    assert!(matches!(
        ragged.row(3),
        Err(Error::RowsOutOfRange { start: 3, .. })
    ));
    let head = ragged.slice(0, 2).unwrap();
    assert_eq!(head.offsets().data_ptr(), ragged.offsets().data_ptr());
    assert_eq!(rows_i32(&head), vec![vec![1, 2, 3], vec![]]);
    let tail = ragged.slice(1, 2).unwrap();
    assert_eq!(tail.offsets().as_slice::<i32>().unwrap(), &[0, 0, 2]);
    assert_eq!(tail.values().data_ptr(), row.data_ptr());
    assert!(ragged.slice(2, 2).is_err());
    assert!(ragged.slice(usize::MAX, 2).is_err());
    assert_eq!(
        ragged.lengths().unwrap().as_slice::<i64>().unwrap(),
        &[3, 0, 2]
    );
}

#[test]
fn take_gathers_rows_in_order() {
    let ragged = RaggedTensor::new(
        i32_tensor(vec![1, 2, 3, 4, 5]),
        i32_tensor(vec![0, 3, 3, 5]),
    )
    .unwrap();
    let taken = ragged.take(&[2, 0, 2, 1]).unwrap();
    assert_eq!(
        rows_i32(&taken),
        vec![vec![4, 5], vec![1, 2, 3], vec![4, 5], vec![]]
    );
    assert!(matches!(
        ragged.take(&[0, 3]),
        Err(Error::RowsOutOfRange { start: 3, .. })
    ));
    assert!(ragged.take(&[]).unwrap().is_empty());
}

#[test]
fn concat_copies_and_keeps_one_piece() {
    let a = RaggedTensor::new(i32_tensor(vec![1, 2]), i32_tensor(vec![0, 2])).unwrap();
    let b = RaggedTensor::new(
        i32_tensor(vec![3]),
        Tensor::from_vec(vec![0i64, 0, 1], vec![3]).unwrap(),
    )
    .unwrap();
    let both = RaggedTensor::concat(&[a.clone(), b]).unwrap();
    assert_eq!(both.offsets().dtype(), DType::Int64);
    assert_eq!(rows_i32(&both), vec![vec![1, 2], vec![], vec![3]]);
    let one = RaggedTensor::concat(std::slice::from_ref(&a)).unwrap();
    assert_eq!(one.values().data_ptr(), a.values().data_ptr());
    let floats = RaggedTensor::new(
        Tensor::from_vec(vec![1.0f32], vec![1]).unwrap(),
        i32_tensor(vec![0, 1]),
    )
    .unwrap();
    assert!(matches!(
        RaggedTensor::concat(&[a, floats]),
        Err(Error::MixedRaggedPieces { index: 1, .. })
    ));
}

#[test]
fn truncate_keeps_the_start_or_the_end_of_each_long_row() {
    let ragged = RaggedTensor::new(
        i32_tensor(vec![1, 2, 3, 4, 5, 6, 7]),
        Tensor::from_vec(vec![0i64, 4, 4, 5, 7], vec![5]).unwrap(),
    )
    .unwrap();
    let right = ragged.truncate(2, Side::Right).unwrap();
    assert_eq!(
        rows_i32(&right),
        vec![vec![1, 2], vec![], vec![5], vec![6, 7]]
    );
    // The offsets keep their width.
    assert_eq!(right.offsets().dtype(), DType::Int64);
    let left = ragged.truncate(2, Side::Left).unwrap();
    assert_eq!(
        rows_i32(&left),
        vec![vec![3, 4], vec![], vec![5], vec![6, 7]]
    );
    assert_eq!(
        rows_i32(&ragged.truncate(0, Side::Right).unwrap()),
        vec![Vec::<i32>::new(); 4]
    );
    // No row longer than the limit: the same values, not a copy.
    let same = ragged.truncate(4, Side::Right).unwrap();
    assert_eq!(same.values().data_ptr(), ragged.values().data_ptr());
    // Elements of several values each (an inner shape) are cut whole.
    let pairs =
        RaggedTensor::from_rows(&[Tensor::from_vec(vec![1u8, 2, 3, 4, 5, 6], vec![3, 2]).unwrap()])
            .unwrap()
            .truncate(1, Side::Left)
            .unwrap();
    assert_eq!(pairs.values().as_slice::<u8>().unwrap(), &[5, 6]);
    assert_eq!(pairs.values().shape(), &[1, 2]);
}

#[test]
fn from_rows_checks_the_rows() {
    let rows = [
        Tensor::from_vec(vec![1u16, 2, 3, 4], vec![2, 2]).unwrap(),
        Tensor::from_vec(vec![5u16, 6], vec![1, 2]).unwrap(),
    ];
    let ragged = RaggedTensor::from_rows(&rows).unwrap();
    assert_eq!(ragged.values().shape(), &[3, 2]);
    assert_eq!(ragged.offsets().as_slice::<i32>().unwrap(), &[0, 2, 3]);
    let mismatched = [
        rows[0].clone(),
        Tensor::from_vec(vec![5u16, 6, 7], vec![1, 3]).unwrap(),
    ];
    assert!(matches!(
        RaggedTensor::from_rows(&mismatched),
        Err(Error::MixedRaggedPieces { index: 1, .. })
    ));
    assert!(matches!(
        RaggedTensor::from_rows(&[]),
        Err(Error::NoPieces { .. })
    ));
}

proptest! {
    /// Any offsets either build a tensor whose rows tile the values, or are refused; never a panic.
    #[test]
    fn any_offsets_are_accepted_exactly_when_valid(
        offsets in prop::collection::vec(-3i64..12, 0..8),
        values in 0usize..10,
    ) {
        let valid = !offsets.is_empty()
            && offsets[0] == 0
            && offsets.windows(2).all(|pair| pair[0] <= pair[1])
            && *offsets.last().unwrap() == values as i64;
        let len = offsets.len();
        let result = RaggedTensor::new(
            i32_tensor((0..values as i32).collect()),
            Tensor::from_vec(offsets, vec![len]).unwrap(),
        );
        prop_assert_eq!(result.is_ok(), valid);
        if let Ok(ragged) = result {
            let rows = rows_i32(&ragged).concat();
            prop_assert_eq!(rows, (0..values as i32).collect::<Vec<_>>());
        }
    }
}
