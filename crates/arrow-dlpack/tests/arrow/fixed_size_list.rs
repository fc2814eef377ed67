//! Nested fixed-size lists to tensors and back: shapes, values, offsets, nulls at every level.

use std::sync::Arc;

use arrow_array::types::Float64Type;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float64Array, Int32Array, cast::AsArray};
use arrow_buffer::{Buffer, NullBuffer};
use arrow_dlpack::{
    ArrayToTensorOptions, Error, NullLocation, TensorToArrayOptions, array_to_tensor,
    tensor_to_fixed_size_list,
};
use arrow_dlpack_tensor::{DType, ExportOptions, Tensor};
use arrow_schema::{DataType, Field};
use proptest::prelude::*;

/// Wraps `values` into a fixed-size list of `size`, with optional validity.
fn list(values: ArrayRef, size: i32, nulls: Option<NullBuffer>) -> FixedSizeListArray {
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
    FixedSizeListArray::new(field, size, values, nulls)
}

/// Row-major nested lists of shape `[n, shape...]` over `0..product` as f64.
fn nested(shape: &[usize]) -> FixedSizeListArray {
    let count: usize = shape.iter().product();
    let mut array: ArrayRef =
        Arc::new(Float64Array::from_iter_values((0..count).map(|v| v as f64)));
    for dim in (1..shape.len()).rev() {
        // `try_new_with_length`, because arrow-rs cannot infer the length of size-0 lists.
        let len = shape[..dim].iter().product();
        let field = Arc::new(Field::new_list_field(array.data_type().clone(), true));
        array = Arc::new(
            FixedSizeListArray::try_new_with_length(field, shape[dim] as i32, array, None, len)
                .unwrap(),
        );
    }
    array.as_fixed_size_list().clone()
}

#[test]
fn two_levels_give_a_rank_3_row_major_view() {
    let array = nested(&[3, 2, 4]);
    let tensor = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[3, 2, 4]);
    assert_eq!(tensor.strides(), &[8, 4, 1]);
    assert_eq!(tensor.dtype(), DType::Float64);
    let leaf = array
        .values()
        .as_fixed_size_list()
        .values()
        .as_primitive::<Float64Type>();
    assert_eq!(tensor.data_ptr(), leaf.values().as_ptr().cast::<u8>());
}

#[test]
fn pyarrow_guide_example_has_shape_3_2() {
    // pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float64(), 2)).to_tensor()
    let values = Float64Array::from(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let array = list(Arc::new(values), 2, None);
    let tensor = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[3, 2]);
    assert_eq!(tensor.byte_strides(), vec![16, 8]);
}

#[test]
fn slices_of_every_level_are_applied() {
    let array = nested(&[6, 3, 2]);
    // Rows 2..5 of the outer array.
    let slice = array.slice(2, 3);
    let tensor = array_to_tensor(&slice, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[3, 3, 2]);
    let expected: Vec<f64> = (12..30).map(|v| v as f64).collect();
    assert_eq!(
        tensor.row_major_buffer().unwrap().typed_data::<f64>(),
        expected.as_slice()
    );

    // A list over sliced values: the inner slice offset is applied too.
    let values = Int32Array::from_iter_values(0..20).slice(3, 12);
    let array = list(Arc::new(values), 4, None).slice(1, 2);
    let tensor = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[2, 4]);
    assert_eq!(
        tensor.row_major_buffer().unwrap().typed_data::<i32>(),
        &[7, 8, 9, 10, 11, 12, 13, 14]
    );
}

#[test]
fn nulls_are_found_at_every_level() {
    // Depth 0: a null list.
    let values = Int32Array::from_iter_values(0..6);
    let top = list(
        Arc::new(values),
        2,
        Some(NullBuffer::from(vec![true, false, true])),
    );
    assert!(matches!(
        array_to_tensor(&top, ArrayToTensorOptions::default()),
        Err(Error::Nulls {
            null_count: 1,
            location: NullLocation::Array { depth: 0 }
        })
    ));

    // Depth 1: a null inner list inside valid outer lists.
    let leaf = Int32Array::from_iter_values(0..8);
    let inner = list(
        Arc::new(leaf),
        2,
        Some(NullBuffer::from(vec![true, true, false, true])),
    );
    let outer = list(Arc::new(inner), 2, None);
    assert!(matches!(
        array_to_tensor(&outer, ArrayToTensorOptions::default()),
        Err(Error::Nulls {
            null_count: 1,
            location: NullLocation::Array { depth: 1 }
        })
    ));

    // Depth 2: a null leaf value (PyArrow bug 5 ignores these).
    let leaf = Int32Array::from(vec![
        Some(0),
        Some(1),
        Some(2),
        None,
        Some(4),
        Some(5),
        Some(6),
        None,
    ]);
    let outer = list(Arc::new(list(Arc::new(leaf), 2, None)), 2, None);
    let error = array_to_tensor(&outer, ArrayToTensorOptions::default()).unwrap_err();
    assert!(matches!(
        &error,
        Error::Nulls {
            null_count: 2,
            location: NullLocation::Array { depth: 2 }
        }
    ));
    assert_eq!(
        array_to_tensor(
            &outer,
            ArrayToTensorOptions {
                allow_nulls: true,
                ..Default::default()
            }
        )
        .unwrap()
        .shape(),
        &[2, 2, 2]
    );

    // A slice that leaves the null leaf values out is accepted.
    let first_row_no_nulls =
        Int32Array::from(vec![Some(0), Some(1), Some(2), Some(3), None, Some(5)]);
    let array = list(Arc::new(first_row_no_nulls), 2, None);
    assert!(array_to_tensor(&array, ArrayToTensorOptions::default()).is_err());
    assert_eq!(
        array_to_tensor(&array.slice(0, 2), ArrayToTensorOptions::default())
            .unwrap()
            .shape(),
        &[2, 2]
    );
}

#[test]
fn non_numeric_leaves_are_refused_by_name() {
    let leaf = arrow_array::StringArray::from(vec!["a", "b"]);
    let array = list(Arc::new(leaf), 2, None);
    let error = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap_err();
    assert!(matches!(
        error,
        Error::UnsupportedType {
            data_type: DataType::Utf8,
            ..
        }
    ));
}

#[test]
fn zero_size_lists_keep_the_outer_length() {
    let empty = Int32Array::from(Vec::<i32>::new());
    let field = Arc::new(Field::new_list_field(DataType::Int32, true));
    let array =
        FixedSizeListArray::try_new_with_length(field, 0, Arc::new(empty), None, 4).unwrap();
    let tensor = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[4, 0]);

    let back = tensor_to_fixed_size_list(&tensor, TensorToArrayOptions::default()).unwrap();
    assert_eq!(back.len(), 4);
    assert_eq!(back.value_length(), 0);
}

#[test]
fn tensor_to_nested_lists_and_back_shares_memory() {
    for shape in [
        vec![2, 3],
        vec![4, 1, 5],
        vec![2, 3, 2, 2],
        vec![0, 3, 2],
        vec![3, 0, 2],
    ] {
        let count: usize = shape.iter().product();
        let buffer = Buffer::from_vec((0..count as i32).collect::<Vec<_>>());
        let tensor = Tensor::try_new_row_major(buffer, DType::Int32, shape.clone()).unwrap();
        let array = tensor_to_fixed_size_list(&tensor, TensorToArrayOptions::default()).unwrap();
        assert_eq!(array.len(), shape[0]);
        // Every level is a non-nullable fixed-size list of the right size.
        let mut data_type = array.data_type().clone();
        for &extent in &shape[1..] {
            let DataType::FixedSizeList(field, size) = data_type else {
                panic!("{data_type}")
            };
            assert_eq!(size as usize, extent);
            assert!(!field.is_nullable());
            data_type = field.data_type().clone();
        }
        assert_eq!(data_type, DataType::Int32);

        let again = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
        assert_eq!(again.shape(), shape.as_slice());
        if count > 0 {
            assert_eq!(again.data_ptr(), tensor.data_ptr());
        }
        assert_eq!(
            again.row_major_buffer().unwrap().as_slice(),
            tensor.row_major_buffer().unwrap().as_slice()
        );
    }
}

#[test]
fn nested_lists_round_trip_through_dlpack() {
    let array = nested(&[3, 2, 2]).slice(1, 2);
    let tensor = array_to_tensor(&array, ArrayToTensorOptions::default()).unwrap();
    let managed = tensor
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    let imported = Tensor::from_managed(managed).unwrap();
    assert_eq!(imported.shape(), &[2, 2, 2]);
    let back = tensor_to_fixed_size_list(&imported, TensorToArrayOptions::default()).unwrap();
    let again = array_to_tensor(&back, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(again.data_ptr(), tensor.data_ptr());
    let expected: Vec<f64> = (4..12).map(|v| v as f64).collect();
    assert_eq!(
        again.row_major_buffer().unwrap().typed_data::<f64>(),
        expected.as_slice()
    );
}

#[test]
fn tensor_to_lists_refuses_what_is_not_row_major_or_too_small() {
    let buffer = Buffer::from_vec((0..6i32).collect::<Vec<_>>());
    let matrix = Tensor::try_new_row_major(buffer.clone(), DType::Int32, vec![2, 3]).unwrap();
    let transposed = matrix.permuted(&[1, 0]).unwrap();
    assert!(matches!(
        tensor_to_fixed_size_list(&transposed, TensorToArrayOptions::default()),
        Err(Error::NotRowMajor { shape, strides }) if shape == [3, 2] && strides == [1, 3]
    ));
    let vector = Tensor::try_new_row_major(buffer.clone(), DType::Int32, vec![6]).unwrap();
    assert!(matches!(
        tensor_to_fixed_size_list(&vector, TensorToArrayOptions::default()),
        Err(Error::TooFewDimensions { ndim: 1, min: 2 })
    ));
    // With a copy allowed, the transpose is copied into row-major order.
    let copied =
        tensor_to_fixed_size_list(&transposed, TensorToArrayOptions { allow_copy: true }).unwrap();
    let values = copied
        .values()
        .as_primitive::<arrow_array::types::Int32Type>();
    assert_eq!(values.values().to_vec(), [0, 3, 1, 4, 2, 5]);
    let scalar = Tensor::try_new_row_major(buffer, DType::Int32, vec![]).unwrap();
    assert!(matches!(
        tensor_to_fixed_size_list(&scalar, TensorToArrayOptions::default()),
        Err(Error::ZeroDimensional)
    ));
}

proptest! {
    /// Any nested shape, any slice of the outer array: the tensor holds exactly the elements a
    /// plain index computation says it should.
    #[test]
    fn sliced_nested_lists_match_an_index_computation(
        shape in prop::collection::vec(0usize..4, 1..4),
        rows in 1usize..6,
        start in 0usize..6,
        take in 0usize..6,
    ) {
        let mut full_shape = vec![rows];
        full_shape.extend(&shape);
        let array = nested(&full_shape);
        let start = start.min(rows);
        let take = take.min(rows - start);
        let slice = array.slice(start, take);
        let tensor = array_to_tensor(&slice, ArrayToTensorOptions::default()).unwrap();
        let mut expected_shape = vec![take];
        expected_shape.extend(&shape);
        prop_assert_eq!(tensor.shape(), expected_shape.as_slice());
        let cell: usize = shape.iter().product();
        let expected: Vec<f64> = (start * cell..(start + take) * cell).map(|v| v as f64).collect();
        let values = tensor.row_major_buffer().unwrap();
        prop_assert_eq!(values.typed_data::<f64>(), expected.as_slice());
    }
}
