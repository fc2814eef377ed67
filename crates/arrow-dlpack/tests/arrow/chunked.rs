//! Chunked columns: zero-copy for one chunk, concatenation only when a copy is allowed.

use std::sync::Arc;

use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, Int64Array, cast::AsArray};
use arrow_dlpack::{ArrayToTensorOptions, ConcatOptions, Error, array_to_tensor, concat_chunks};
use arrow_schema::{DataType, Field};

fn int64(values: &[i64]) -> ArrayRef {
    Arc::new(Int64Array::from(values.to_vec()))
}

#[test]
fn one_chunk_is_returned_as_is() {
    let chunks = vec![int64(&[1, 2, 3])];
    for allow_copy in [false, true] {
        let array = concat_chunks(&chunks, ConcatOptions { allow_copy }).unwrap();
        assert!(Arc::ptr_eq(&array, &chunks[0]));
    }
}

#[test]
fn one_non_empty_chunk_among_empty_ones_is_zero_copy() {
    let chunks = vec![int64(&[]), int64(&[4, 5]), int64(&[])];
    let array = concat_chunks(&chunks, ConcatOptions::default()).unwrap();
    assert!(Arc::ptr_eq(&array, &chunks[1]));

    let all_empty = vec![int64(&[]), int64(&[])];
    assert!(Arc::ptr_eq(
        &concat_chunks(&all_empty, ConcatOptions::default()).unwrap(),
        &all_empty[0]
    ));
}

#[test]
fn several_chunks_need_a_copy() {
    let chunks = vec![int64(&[1, 2]), int64(&[]), int64(&[3]), int64(&[4, 5])];
    let error = concat_chunks(&chunks, ConcatOptions::default()).unwrap_err();
    assert!(
        matches!(&error, Error::CopyRequired { reason, options: "ConcatOptions" } if reason == "concatenating 3 chunks")
    );

    let array = concat_chunks(&chunks, ConcatOptions { allow_copy: true }).unwrap();
    assert_eq!(
        array.as_primitive::<Int64Type>().values().as_ref(),
        &[1, 2, 3, 4, 5]
    );
    let tensor = array_to_tensor(array.as_ref(), ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[5]);
}

#[test]
fn chunks_of_fixed_size_lists_concatenate_into_one_tensor() {
    let field = Arc::new(Field::new_list_field(DataType::Float32, true));
    let chunk = |start: i16| -> ArrayRef {
        let values = Float32Array::from_iter_values((start..start + 4).map(f32::from));
        Arc::new(FixedSizeListArray::new(
            field.clone(),
            2,
            Arc::new(values),
            None,
        ))
    };
    let array = concat_chunks(&[chunk(0), chunk(4)], ConcatOptions { allow_copy: true }).unwrap();
    let tensor = array_to_tensor(array.as_ref(), ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[4, 2]);
    let expected: Vec<f32> = (0..8i16).map(f32::from).collect();
    assert_eq!(
        tensor.row_major_buffer().unwrap().typed_data::<f32>(),
        expected.as_slice()
    );
}

#[test]
fn chunks_of_different_types_are_refused() {
    let chunks: Vec<ArrayRef> = vec![int64(&[1]), Arc::new(Float32Array::from(vec![1.0]))];
    for allow_copy in [false, true] {
        let error = concat_chunks(&chunks, ConcatOptions { allow_copy }).unwrap_err();
        assert!(matches!(
            &error,
            Error::MixedChunkTypes {
                index: 1,
                expected: DataType::Int64,
                found: DataType::Float32
            }
        ));
    }
}

#[test]
fn zero_chunks_are_refused() {
    assert!(matches!(
        concat_chunks(&[], ConcatOptions { allow_copy: true }),
        Err(Error::NoChunks)
    ));
}

#[test]
fn concatenated_chunks_keep_their_nulls() {
    let chunks: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![Some(1), None])),
        Arc::new(Int64Array::from(vec![Some(3)])),
    ];
    let array = concat_chunks(&chunks, ConcatOptions { allow_copy: true }).unwrap();
    assert_eq!(array.null_count(), 1);
    assert!(matches!(
        array_to_tensor(array.as_ref(), ArrayToTensorOptions::default()),
        Err(Error::Nulls { null_count: 1, .. })
    ));
}
