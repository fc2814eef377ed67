//! Whether a tensor is a view of an Arrow array's memory: the zero-copy check for arrays.

use arrow_array::Array;
use arrow_data::ArrayData;
use arrow_dlpack_tensor::Tensor;

/// Whether `tensor` addresses bytes of any of `array`'s buffers: its values, its validity
/// bitmap, or the buffers of its children (the values of a fixed-size list, the storage of a
/// fixed-shape tensor column), whatever the array's offset.
///
/// [`array_to_tensor`](crate::array_to_tensor) shares the array's memory, so its tensor answers
/// `true`; a copy ([`Tensor::to_contiguous`], a boolean unpacked to bytes) answers `false`.
/// [`Tensor::shares_memory_with_buffer`] checks one buffer, and [`Tensor::shares_memory`] two
/// tensors.
///
/// ```
/// use arrow_array::Float32Array;
/// use arrow_dlpack::{ArrayToTensorOptions, array_to_tensor, shares_memory};
///
/// let array = Float32Array::from(vec![1.0, 2.0, 3.0]);
/// let tensor = array_to_tensor(&array, ArrayToTensorOptions::default())?;
/// assert!(shares_memory(&tensor, &array));
/// assert!(!shares_memory(&tensor.to_contiguous()?, &array));
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn shares_memory(tensor: &Tensor, array: &dyn Array) -> bool {
    data_shares_memory(tensor, &array.to_data())
}

fn data_shares_memory(tensor: &Tensor, data: &ArrayData) -> bool {
    data.buffers()
        .iter()
        .chain(data.nulls().map(|nulls| nulls.buffer()))
        .any(|buffer| tensor.shares_memory_with_buffer(buffer))
        || data
            .child_data()
            .iter()
            .any(|child| data_shares_memory(tensor, child))
}
