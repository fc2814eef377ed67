//! `shares_memory`: a tensor made from an array views the array's buffers (its values, or a
//! fixed-size list's child values); a copy or another array's tensor does not.

use std::sync::Arc;

use arrow_array::{Array, BooleanArray, FixedSizeListArray, Float32Array, Int64Array};
use arrow_dlpack::{ArrayToTensorOptions, array_to_tensor, shares_memory};
use arrow_schema::Field;

#[test]
fn a_tensor_of_an_array_shares_its_memory_and_a_copy_does_not() {
    let array = Float32Array::from(vec![1.0, 2.0, 3.0, 4.0]);
    let tensor = array_to_tensor(&array.slice(1, 2), ArrayToTensorOptions::default()).unwrap();
    assert!(shares_memory(&tensor, &array));
    assert!(tensor.shares_memory_with_buffer(array.values().inner()));
    assert!(!shares_memory(&tensor.to_contiguous().unwrap(), &array));
    let other = Int64Array::from(vec![1, 2]);
    assert!(!shares_memory(&tensor, &other));
}

#[test]
fn a_fixed_size_list_shares_its_child_values() {
    let values = Float32Array::from((0..6).map(|v| v as f32).collect::<Vec<_>>());
    let field = Arc::new(Field::new_list_field(values.data_type().clone(), false));
    let list = FixedSizeListArray::new(field, 3, Arc::new(values.clone()), None);
    let tensor = array_to_tensor(&list, ArrayToTensorOptions::default()).unwrap();
    assert_eq!(tensor.shape(), &[2, 3]);
    assert!(shares_memory(&tensor, &list));
    assert!(shares_memory(&tensor, &values));
}

#[test]
fn unpacked_booleans_are_a_copy() {
    let flags = BooleanArray::from(vec![true, false, true]);
    let options = ArrayToTensorOptions {
        allow_copy: true,
        ..Default::default()
    };
    let tensor = array_to_tensor(&flags, options).unwrap();
    assert!(!shares_memory(&tensor, &flags));
}
