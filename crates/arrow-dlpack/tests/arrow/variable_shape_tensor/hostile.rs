//! Storage that lies about its shapes is refused with an error naming the row, never read and
//! never a panic.

use arrow_buffer::NullBuffer;
use arrow_dlpack::{Error, VariableShapeTensorArray, VariableShapeTensorType};
use arrow_schema::DataType;

use super::{plain_type, storage};

fn refused(t: VariableShapeTensorType, storage: arrow_array::StructArray) -> String {
    match VariableShapeTensorArray::try_new(t, storage) {
        Err(error @ Error::InvalidVariableShapeTensor { .. }) => error.to_string(),
        other => panic!("expected InvalidVariableShapeTensor, found {other:?}"),
    }
}

#[test]
fn every_lie_is_refused_with_its_row() {
    let uniform =
        VariableShapeTensorType::try_new(DataType::Int64, 2, None, None, Some(vec![None, Some(2)]))
            .unwrap();
    let cases = [
        (
            "product of the shape above the data length",
            refused(
                plain_type(2),
                storage(&[vec![1, 2, 3]], &[vec![2, 2]], 2, None),
            ),
        ),
        (
            "product of the shape below the data length",
            refused(
                plain_type(1),
                storage(&[vec![1], vec![1, 2, 3]], &[vec![1], vec![2]], 1, None),
            ),
        ),
        (
            "negative extent",
            refused(plain_type(2), storage(&[vec![]], &[vec![-1, 0]], 2, None)),
        ),
        (
            "two negative extents whose product matches",
            refused(plain_type(2), storage(&[vec![1]], &[vec![-1, -1]], 2, None)),
        ),
        (
            "wrong rank in the storage",
            refused(plain_type(3), storage(&[vec![1]], &[vec![1, 1]], 2, None)),
        ),
        (
            "uniform shape disagrees",
            refused(uniform, storage(&[vec![1, 2, 3]], &[vec![1, 3]], 2, None)),
        ),
        (
            "extents whose product overflows",
            refused(
                plain_type(3),
                storage(&[vec![]], &[vec![i32::MAX, i32::MAX, i32::MAX]], 3, None),
            ),
        ),
        (
            "wrong value type",
            refused(
                VariableShapeTensorType::try_new(DataType::Int32, 1, None, None, None).unwrap(),
                storage(&[vec![1]], &[vec![1]], 1, None),
            ),
        ),
    ];
    let listing: String = cases
        .iter()
        .map(|(case, message)| format!("{case}:\n  {message}\n"))
        .collect();
    insta::assert_snapshot!(listing);
}

#[test]
fn lies_under_a_null_row_are_not_read() {
    // Row 1 is null: its shape says nothing true, and nothing reads it.
    let nulls = NullBuffer::from(vec![true, false]);
    let array = VariableShapeTensorArray::try_new(
        plain_type(2),
        storage(
            &[vec![1, 2], vec![]],
            &[vec![1, 2], vec![-5, 99]],
            2,
            Some(nulls),
        ),
    )
    .unwrap();
    assert_eq!(array.row(0).unwrap().shape(), &[1, 2]);
    assert!(matches!(array.row(1), Err(Error::NullTensor { index: 1 })));
}
