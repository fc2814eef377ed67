//! Ragged tensors: list arrays of every layout to values and offsets, padding, packing, and
//! back to Arrow.

mod errors;
mod from_list;
mod pad_pack;
mod tensor_ops;

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int32Array, ListArray};
use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_dlpack::{ListToRaggedOptions, RaggedTensor, Tensor, list_to_ragged};
use arrow_schema::{DataType, Field};

/// A `list<int32>` over `values` with `offsets` and optional validity.
fn int_list(values: Vec<i32>, offsets: Vec<i32>, nulls: Option<Vec<bool>>) -> ListArray {
    let field = Arc::new(Field::new_list_field(DataType::Int32, true));
    ListArray::new(
        field,
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Arc::new(Int32Array::from(values)) as ArrayRef,
        nulls.map(NullBuffer::from),
    )
}

/// The rows of a ragged tensor of int32 scalars, read through `row`.
fn rows_i32(ragged: &RaggedTensor) -> Vec<Vec<i32>> {
    (0..ragged.len())
        .map(|row| ragged.row(row).unwrap().as_slice::<i32>().unwrap().to_vec())
        .collect()
}

fn ragged_of(array: &dyn Array) -> RaggedTensor {
    list_to_ragged(array, ListToRaggedOptions::default()).unwrap()
}

fn i32_tensor(values: Vec<i32>) -> Tensor {
    let len = values.len();
    Tensor::from_vec(values, vec![len]).unwrap()
}
