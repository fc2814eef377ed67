//! Every error message of ragged tensors, from real calls, in one snapshot.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, ListArray, ListViewArray};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_dlpack::{
    DType, ListToRaggedOptions, PadOptions, PadValue, RaggedTensor, Side, Tensor, list_to_ragged,
    pack_pieces,
};
use arrow_schema::{DataType, Field};

use super::i32_tensor;

#[test]
fn ragged_error_messages() {
    let sample = RaggedTensor::new(i32_tensor(vec![1, 2, 3]), i32_tensor(vec![0, 1, 3])).unwrap();
    let field = Arc::new(Field::new_list_field(DataType::Int32, true));
    let with_null_row = ListArray::new(
        field.clone(),
        OffsetBuffer::new(ScalarBuffer::from(vec![0, 1, 3, 3])),
        Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef,
        Some(NullBuffer::from(vec![true, false, false])),
    );
    let overlapping = ListViewArray::new(
        field,
        ScalarBuffer::from(vec![0, 0]),
        ScalarBuffer::from(vec![2, 2]),
        Arc::new(Int32Array::from(vec![1, 2])),
        None,
    );
    let errors = [
        RaggedTensor::new(i32_tensor(vec![1, 2]), i32_tensor(vec![0, 2, 1, 2])).unwrap_err(),
        RaggedTensor::new(i32_tensor(vec![1, 2]), i32_tensor(vec![0, 3])).unwrap_err(),
        RaggedTensor::new(i32_tensor(vec![1, 2]), i32_tensor(vec![])).unwrap_err(),
        RaggedTensor::new(
            i32_tensor(vec![1, 2]),
            Tensor::from_vec(vec![0.0f32, 2.0], vec![2]).unwrap(),
        )
        .unwrap_err(),
        list_to_ragged(&with_null_row, ListToRaggedOptions::default()).unwrap_err(),
        list_to_ragged(
            &with_null_row,
            ListToRaggedOptions {
                allow_nulls: true,
                allow_copy: false,
            },
        )
        .unwrap_err(),
        list_to_ragged(&overlapping, ListToRaggedOptions::default()).unwrap_err(),
        list_to_ragged(&Int32Array::from(vec![1]), ListToRaggedOptions::default()).unwrap_err(),
        sample.row(5).unwrap_err(),
        sample.slice(1, 4).unwrap_err(),
        RaggedTensor::concat(&[
            sample.clone(),
            RaggedTensor::new(
                Tensor::from_vec(vec![1i32, 2], vec![1, 2]).unwrap(),
                i32_tensor(vec![0, 1]),
            )
            .unwrap(),
        ])
        .unwrap_err(),
        PadValue::Int(-100)
            .to_element_bytes(DType::UInt8)
            .unwrap_err(),
        PadValue::Float(0.5)
            .to_element_bytes(DType::Int32)
            .unwrap_err(),
        PadValue::Float(1e6)
            .to_element_bytes(DType::Float16)
            .unwrap_err(),
        PadValue::Int(2).to_element_bytes(DType::Bool).unwrap_err(),
        PadValue::Int(1)
            .to_element_bytes(DType::Complex64)
            .unwrap_err(),
        sample
            .to_padded(&PadOptions {
                pad_to_multiple_of: Some(0),
                ..Default::default()
            })
            .unwrap_err(),
        RaggedTensor::from_padded(
            &Tensor::from_vec(vec![1i32, 2], vec![1, 2]).unwrap(),
            &Tensor::from_vec(vec![3i64], vec![1]).unwrap(),
            Side::Right,
        )
        .unwrap_err(),
        pack_pieces(&[]).unwrap_err(),
    ];
    let listing: String = errors.iter().map(|error| format!("{error}\n")).collect();
    insta::assert_snapshot!(listing);
}
