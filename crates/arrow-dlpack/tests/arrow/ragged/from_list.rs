//! `list_to_ragged` for every layout and element type.

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, LargeListBuilder, ListBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float16Type, Float64Type, Int8Type, Int32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, Int32Array, LargeListArray,
    LargeListViewArray, ListArray, ListViewArray, StringArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_dlpack::{
    DType, Error, FixedShapeTensorArray, ListToRaggedOptions, Tensor, TensorToArrayOptions,
    half::f16, list_to_ragged,
};
use arrow_schema::{DataType, Field};

use super::{int_list, ragged_of, rows_i32};

fn copy_allowed() -> ListToRaggedOptions {
    ListToRaggedOptions {
        allow_copy: true,
        ..Default::default()
    }
}

fn nulls_allowed() -> ListToRaggedOptions {
    ListToRaggedOptions {
        allow_nulls: true,
        ..Default::default()
    }
}

#[test]
fn list_of_int32_is_zero_copy_with_shared_offsets() {
    let list = int_list(vec![1, 2, 3, 4, 5, 6], vec![0, 2, 2, 6], None);
    let ragged = ragged_of(&list);
    assert_eq!(ragged.len(), 3);
    assert_eq!(ragged.values().shape(), &[6]);
    assert_eq!(ragged.offsets().dtype(), DType::Int32);
    assert_eq!(ragged.offsets().as_slice::<i32>().unwrap(), &[0, 2, 2, 6]);
    assert_eq!(
        rows_i32(&ragged),
        vec![vec![1, 2], vec![], vec![3, 4, 5, 6]]
    );
    let child = list.values().as_primitive::<Int32Type>();
    assert_eq!(ragged.values().data_ptr(), child.values().as_ptr().cast());
    assert_eq!(
        ragged.offsets().data_ptr(),
        list.value_offsets().as_ptr().cast()
    );
    assert!(ragged.values().is_read_only());
}

#[test]
fn sliced_list_views_only_the_referenced_values_and_rebases_offsets() {
    let list = int_list((0..10).collect(), vec![0, 3, 5, 5, 9, 10], None);
    let sliced = list.slice(1, 3); // rows [3, 4], [], [5, 6, 7, 8]
    let ragged = ragged_of(&sliced);
    assert_eq!(ragged.values().shape(), &[6]);
    assert_eq!(
        ragged.values().as_slice::<i32>().unwrap(),
        &[3, 4, 5, 6, 7, 8]
    );
    assert_eq!(ragged.offsets().as_slice::<i32>().unwrap(), &[0, 2, 2, 6]);
    let child = list.values().as_primitive::<Int32Type>();
    assert_eq!(
        ragged.values().data_ptr(),
        child.values()[3..].as_ptr().cast()
    );
}

#[test]
fn large_list_gives_int64_offsets() {
    let mut builder = LargeListBuilder::new(arrow_array::builder::Float64Builder::new());
    builder.append_value([Some(1.5), Some(2.5)]);
    builder.append_value([Some(3.5)]);
    let list: LargeListArray = builder.finish();
    let ragged = ragged_of(&list.slice(1, 1));
    assert_eq!(ragged.offsets().dtype(), DType::Int64);
    assert_eq!(ragged.offsets().as_slice::<i64>().unwrap(), &[0, 1]);
    assert_eq!(ragged.values().as_slice::<f64>().unwrap(), &[3.5]);
    let child = list.values().as_primitive::<Float64Type>();
    assert_eq!(
        ragged.values().data_ptr(),
        child.values()[2..].as_ptr().cast()
    );
}

fn view(offsets: Vec<i32>, sizes: Vec<i32>, nulls: Option<Vec<bool>>) -> ListViewArray {
    let field = Arc::new(Field::new_list_field(DataType::Int32, true));
    ListViewArray::new(
        field,
        ScalarBuffer::from(offsets),
        ScalarBuffer::from(sizes),
        Arc::new(Int32Array::from((0..10).collect::<Vec<_>>())),
        nulls.map(NullBuffer::from),
    )
}

#[test]
fn monotonic_list_view_is_zero_copy() {
    // Rows 2..4, an empty row with an arbitrary offset, 4..7.
    let array = view(vec![2, 0, 4], vec![2, 0, 3], None);
    let ragged = ragged_of(&array);
    assert_eq!(rows_i32(&ragged), vec![vec![2, 3], vec![], vec![4, 5, 6]]);
    assert_eq!(ragged.offsets().as_slice::<i32>().unwrap(), &[0, 2, 2, 5]);
    let child = array.values().as_primitive::<Int32Type>();
    assert_eq!(
        ragged.values().data_ptr(),
        child.values()[2..].as_ptr().cast()
    );
}

#[test]
fn out_of_order_list_view_is_copied_only_when_allowed() {
    let array = view(vec![5, 0, 5], vec![2, 3, 1], None);
    let error = list_to_ragged(&array, ListToRaggedOptions::default()).unwrap_err();
    assert!(matches!(error, Error::CopyRequired { .. }), "{error}");
    let ragged = list_to_ragged(&array, copy_allowed()).unwrap();
    assert_eq!(rows_i32(&ragged), vec![vec![5, 6], vec![0, 1, 2], vec![5]]);
    assert!(!ragged.values().is_read_only());
}

#[test]
fn large_list_view_with_gaps_is_copied() {
    let field = Arc::new(Field::new_list_field(DataType::Int32, true));
    let array = LargeListViewArray::new(
        field,
        ScalarBuffer::from(vec![0i64, 4]),
        ScalarBuffer::from(vec![2i64, 2]),
        Arc::new(Int32Array::from((0..10).collect::<Vec<_>>())),
        None,
    );
    let ragged = list_to_ragged(&array, copy_allowed()).unwrap();
    assert_eq!(ragged.offsets().dtype(), DType::Int64);
    assert_eq!(rows_i32(&ragged), vec![vec![0, 1], vec![4, 5]]);
}

#[test]
fn null_rows_are_refused_with_their_position() {
    let list = int_list(
        vec![1, 2, 3],
        vec![0, 1, 1, 3],
        Some(vec![true, false, true]),
    );
    let error = list_to_ragged(&list, ListToRaggedOptions::default()).unwrap_err();
    assert!(
        matches!(
            error,
            Error::NullRow {
                row: 1,
                null_count: 1
            }
        ),
        "{error}"
    );
    // Allowed, the empty null row stays empty and nothing is copied.
    let ragged = list_to_ragged(&list, nulls_allowed()).unwrap();
    assert_eq!(rows_i32(&ragged), vec![vec![1], vec![], vec![2, 3]]);
    assert_eq!(
        ragged.offsets().data_ptr(),
        list.value_offsets().as_ptr().cast()
    );
}

#[test]
fn null_row_with_elements_is_dropped_by_a_copy() {
    // Row 1 is null but its offsets cover the values 2 and 3.
    let list = int_list(
        vec![1, 2, 3, 4],
        vec![0, 1, 3, 4],
        Some(vec![true, false, true]),
    );
    let error = list_to_ragged(&list, nulls_allowed()).unwrap_err();
    assert!(matches!(error, Error::CopyRequired { .. }), "{error}");
    let options = ListToRaggedOptions {
        allow_nulls: true,
        allow_copy: true,
    };
    let ragged = list_to_ragged(&list, options).unwrap();
    assert_eq!(rows_i32(&ragged), vec![vec![1], vec![], vec![4]]);
    assert_eq!(ragged.values().as_slice::<i32>().unwrap(), &[1, 4]);
}

#[test]
fn null_rows_of_a_list_view_are_empty() {
    let array = view(vec![0, 7, 2], vec![2, 3, 1], Some(vec![true, false, true]));
    assert!(matches!(
        list_to_ragged(&array, ListToRaggedOptions::default()),
        Err(Error::NullRow { row: 1, .. })
    ));
    let ragged = list_to_ragged(&array, nulls_allowed()).unwrap();
    assert_eq!(rows_i32(&ragged), vec![vec![0, 1], vec![], vec![2]]);
}

#[test]
fn null_elements_are_refused_one_level_down() {
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1), None]),
        Some(vec![Some(3)]),
    ]);
    let error = list_to_ragged(&list, ListToRaggedOptions::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "nulls are not allowed: found 1 null in the child values at depth 1; expected none, or \
         set the `allow_nulls` option to accept them (null slots then hold unspecified values)"
    );
    // A slice without the null element is accepted.
    assert_eq!(rows_i32(&ragged_of(&list.slice(1, 1))), vec![vec![3]]);
    assert_eq!(list_to_ragged(&list, nulls_allowed()).unwrap().len(), 2);
}

#[test]
fn element_types_keep_their_dtype() {
    let ints = ListArray::from_iter_primitive::<Int8Type, _, _>(vec![Some(vec![Some(-1i8)])]);
    assert_eq!(ragged_of(&ints).values().dtype(), DType::Int8);
    let big = ListArray::from_iter_primitive::<UInt64Type, _, _>(vec![Some(vec![Some(u64::MAX)])]);
    assert_eq!(
        ragged_of(&big).values().as_slice::<u64>().unwrap(),
        &[u64::MAX]
    );
    let halves = ListArray::from_iter_primitive::<Float16Type, _, _>(vec![Some(vec![
        Some(f16::from_f32(0.5)),
        Some(f16::from_f32(-2.0)),
    ])]);
    let ragged = ragged_of(&halves);
    assert_eq!(ragged.values().dtype(), DType::Float16);
    assert_eq!(
        ragged.values().as_slice::<f16>().unwrap(),
        &[f16::from_f32(0.5), f16::from_f32(-2.0)]
    );
}

#[test]
fn booleans_are_unpacked_when_a_copy_is_allowed() {
    let mut builder = ListBuilder::new(BooleanBuilder::new());
    builder.append_value([Some(true), Some(false)]);
    builder.append_value([Some(true)]);
    let list = builder.finish();
    let error = list_to_ragged(&list, ListToRaggedOptions::default()).unwrap_err();
    assert!(
        matches!(
            &error,
            Error::CopyRequired {
                options: "ListToRaggedOptions",
                ..
            }
        ),
        "{error}"
    );
    let ragged = list_to_ragged(&list, copy_allowed()).unwrap();
    assert_eq!(ragged.values().dtype(), DType::Bool);
    assert_eq!(
        ragged.values().row_major_buffer().unwrap().as_slice(),
        &[1, 0, 1]
    );
}

#[test]
fn fixed_size_list_elements_give_inner_dimensions() {
    // Rows of 2-vectors: [[0, 1], [2, 3]], [], [[4, 5]].
    let item = Arc::new(Field::new_list_field(DataType::Float32, true));
    let vectors = FixedSizeListArray::new(
        item.clone(),
        2,
        Arc::new(Float32Array::from(
            (0..6).map(|v| v as f32).collect::<Vec<_>>(),
        )),
        None,
    );
    let field = Arc::new(Field::new_list_field(vectors.data_type().clone(), true));
    let list = ListArray::new(
        field,
        OffsetBuffer::new(ScalarBuffer::from(vec![0, 2, 2, 3])),
        Arc::new(vectors) as ArrayRef,
        None,
    );
    let ragged = ragged_of(&list.slice(1, 2));
    assert_eq!(ragged.values().shape(), &[1, 2]);
    assert_eq!(ragged.inner_shape(), &[2]);
    assert_eq!(
        ragged.row(1).unwrap().as_slice::<f32>().unwrap(),
        &[4.0, 5.0]
    );
    assert_eq!(ragged.offsets().as_slice::<i32>().unwrap(), &[0, 0, 1]);
}

#[test]
fn fixed_shape_tensor_elements_give_their_cell_shape() {
    let cells = Tensor::from_vec((0..12i16).collect(), vec![3, 2, 2]).unwrap();
    let (cell_field, storage) =
        FixedShapeTensorArray::from_tensor(&cells, TensorToArrayOptions::default())
            .unwrap()
            .into_field_and_array("item");
    let list = ListArray::new(
        Arc::new(cell_field),
        OffsetBuffer::new(ScalarBuffer::from(vec![0, 1, 3])),
        storage,
        None,
    );
    let ragged = ragged_of(&list);
    assert_eq!(ragged.values().shape(), &[3, 2, 2]);
    assert_eq!(ragged.row(1).unwrap().shape(), &[2, 2, 2]);
    assert_eq!(ragged.values().data_ptr(), cells.data_ptr());
}

#[test]
fn empty_arrays_and_empty_rows() {
    let empty = int_list(vec![], vec![0], None);
    let ragged = ragged_of(&empty);
    assert!(ragged.is_empty());
    assert_eq!(ragged.values().shape(), &[0]);
    assert_eq!(ragged.max_length(), 0);
    let all_empty = int_list(vec![1], vec![0, 0, 0], None);
    let ragged = ragged_of(&all_empty);
    assert_eq!(ragged.len(), 2);
    assert_eq!(ragged.total_length(), 0);
    let sliced_empty = int_list(vec![1, 2, 3], vec![0, 1, 3], None).slice(2, 0);
    assert_eq!(ragged_of(&sliced_empty).len(), 0);
}

#[test]
fn other_types_are_refused() {
    let error = list_to_ragged(&Int32Array::from(vec![1]), copy_allowed()).unwrap_err();
    assert!(matches!(error, Error::NotAList { .. }), "{error}");
    let strings = ListArray::new(
        Arc::new(Field::new_list_field(DataType::Utf8, true)),
        OffsetBuffer::new(ScalarBuffer::from(vec![0, 1])),
        Arc::new(StringArray::from(vec!["a"])) as ArrayRef,
        None,
    );
    let error = list_to_ragged(&strings, copy_allowed()).unwrap_err();
    assert!(matches!(error, Error::UnsupportedType { .. }), "{error}");
}

#[test]
fn round_trips_through_arrow_sharing_buffers() {
    let list = int_list(vec![1, 2, 3, 4, 5, 6], vec![0, 2, 2, 6], None);
    let ragged = ragged_of(&list);
    let back = ragged.to_list_array().unwrap();
    assert_eq!(back.data_type(), list.data_type());
    assert_eq!(back.as_list::<i32>(), &list);
    let back = back.as_list::<i32>();
    assert_eq!(
        back.values().as_primitive::<Int32Type>().values().as_ptr(),
        list.values().as_primitive::<Int32Type>().values().as_ptr()
    );
    assert_eq!(back.value_offsets().as_ptr(), list.value_offsets().as_ptr());
    // Inner dimensions come back as fixed-size lists; int64 offsets as a large list.
    let values = Tensor::from_vec((0..6i64).collect(), vec![3, 2]).unwrap();
    let offsets = Tensor::from_vec(vec![0i64, 1, 3], vec![3]).unwrap();
    let ragged = arrow_dlpack::RaggedTensor::new(values, offsets).unwrap();
    let back = ragged.to_list_array().unwrap();
    assert_eq!(
        back.data_type().to_string(),
        "LargeList(FixedSizeList(2 x non-null Int64))"
    );
    assert_eq!(ragged_of(back.as_ref()).values().shape(), &[3, 2]);
}

mod sweep {
    use std::sync::Arc;

    use arrow_array::{Array, ArrayRef, Int32Array, ListArray, ListViewArray};
    use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
    use arrow_dlpack::{ListToRaggedOptions, list_to_ragged};
    use arrow_schema::{DataType, Field};
    use proptest::prelude::*;

    use super::super::rows_i32;

    /// Rows of a list (or list view) array, as the reference reads them: null rows empty.
    fn expected_rows(array: &dyn Array) -> Vec<Vec<i32>> {
        (0..array.len())
            .map(|row| {
                if array.is_null(row) {
                    return vec![];
                }
                let value = match array.data_type() {
                    DataType::List(_) => array
                        .as_any()
                        .downcast_ref::<ListArray>()
                        .unwrap()
                        .value(row),
                    _ => array
                        .as_any()
                        .downcast_ref::<ListViewArray>()
                        .unwrap()
                        .value(row),
                };
                let ints = value.as_any().downcast_ref::<Int32Array>().unwrap();
                ints.values().to_vec()
            })
            .collect()
    }

    fn options() -> ListToRaggedOptions {
        ListToRaggedOptions {
            allow_nulls: true,
            allow_copy: true,
        }
    }

    proptest! {
        /// Sliced lists with null rows (some covering elements) read as the reference reads them.
        #[test]
        fn sliced_lists_with_null_rows_match_the_reference(
            lengths in prop::collection::vec(0usize..5, 0..12),
            nulls in prop::collection::vec(any::<bool>(), 12),
            start in 0usize..12,
            len in 0usize..12,
        ) {
            let mut offsets = vec![0i32];
            for length in &lengths {
                offsets.push(offsets.last().unwrap() + *length as i32);
            }
            let total = *offsets.last().unwrap();
            let rows = lengths.len();
            let list = ListArray::new(
                Arc::new(Field::new_list_field(DataType::Int32, true)),
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                Arc::new(Int32Array::from((0..total).collect::<Vec<_>>())) as ArrayRef,
                Some(NullBuffer::from(nulls[..rows].to_vec())),
            );
            let start = start.min(rows);
            let sliced = list.slice(start, len.min(rows - start));
            let ragged = list_to_ragged(&sliced, options()).unwrap();
            prop_assert_eq!(rows_i32(&ragged), expected_rows(&sliced));
        }

        /// List views with any offsets and sizes (inside the child) read as the reference does.
        #[test]
        fn list_views_match_the_reference(
            rows in prop::collection::vec((0i32..10, 0i32..4, any::<bool>()), 0..10),
        ) {
            let offsets: Vec<i32> = rows.iter().map(|row| row.0).collect();
            let sizes: Vec<i32> = rows.iter().map(|row| row.1.min(10 - row.0)).collect();
            let valid: Vec<bool> = rows.iter().map(|row| row.2).collect();
            let view = ListViewArray::new(
                Arc::new(Field::new_list_field(DataType::Int32, true)),
                ScalarBuffer::from(offsets),
                ScalarBuffer::from(sizes),
                Arc::new(Int32Array::from((0..10).collect::<Vec<_>>())),
                Some(NullBuffer::from(valid)),
            );
            let ragged = list_to_ragged(&view, options()).unwrap();
            prop_assert_eq!(rows_i32(&ragged), expected_rows(&view));
            let back = ragged.to_list_array().unwrap();
            let back = back.as_any().downcast_ref::<ListArray>().unwrap();
            prop_assert_eq!(back.len(), view.len());
        }
    }
}
