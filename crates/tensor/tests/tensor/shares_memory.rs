//! Whether tensors share memory: views of one buffer do, copies and disjoint slices do not.

use arrow_buffer::Buffer;
use arrow_dlpack_tensor::{DType, Tensor};

fn matrix() -> Tensor {
    Tensor::from_vec((0..12i32).collect(), vec![3, 4]).unwrap()
}

#[test]
fn views_of_one_buffer_share_memory_and_copies_do_not() {
    let matrix = matrix();
    assert!(matrix.shares_memory(&matrix));
    assert!(matrix.shares_memory(&matrix.permuted(&[1, 0]).unwrap()));
    let copy = matrix.permuted(&[1, 0]).unwrap().to_contiguous().unwrap();
    assert!(!copy.shares_memory(&matrix));
    assert!(!matrix.shares_memory(&copy));
}

#[test]
fn disjoint_ranges_of_one_buffer_do_not_share_memory() {
    let buffer = Buffer::from_vec((0..8i32).collect::<Vec<_>>());
    let first = Tensor::try_new(buffer.clone(), DType::Int32, vec![4], vec![1], 0).unwrap();
    let second = Tensor::try_new(buffer.clone(), DType::Int32, vec![4], vec![1], 4).unwrap();
    let middle = Tensor::try_new(buffer.clone(), DType::Int32, vec![2], vec![1], 3).unwrap();
    assert!(!first.shares_memory(&second));
    assert!(middle.shares_memory(&first) && middle.shares_memory(&second));
    assert_eq!(
        first.byte_range().unwrap().len() + second.byte_range().unwrap().len(),
        buffer.len()
    );
    assert!(first.shares_memory_with_buffer(&buffer));
    assert!(!first.shares_memory_with_buffer(&buffer.slice(16)));
    assert!(second.shares_memory_with_buffer(&buffer.slice(16)));
}

#[test]
fn negative_strides_cover_the_elements_below_the_first() {
    let buffer = Buffer::from_vec((0..4i64).collect::<Vec<_>>());
    let reversed = Tensor::try_new(buffer.clone(), DType::Int64, vec![4], vec![-1], 3).unwrap();
    let start = buffer.as_ptr().addr();
    assert_eq!(reversed.byte_range(), Some(start..start + 32));
    assert!(reversed.shares_memory_with_buffer(&buffer.slice_with_length(0, 8)));
}

#[test]
fn empty_tensors_share_nothing() {
    let buffer = Buffer::from_vec((0..4i32).collect::<Vec<_>>());
    let empty = Tensor::try_new(buffer.clone(), DType::Int32, vec![0], vec![1], 0).unwrap();
    assert_eq!(empty.byte_range(), None);
    assert!(!empty.shares_memory(&empty));
    assert!(!empty.shares_memory_with_buffer(&buffer));
}
