//! A column-major column group as a view: when the group's columns share one allocation at a
//! constant distance from each other (the columns of a record batch in a memory-mapped IPC file,
//! where each column's values follow the previous one's), the `(B, k)` tensor with strides
//! `(1, distance)` is already in memory, and no copy is needed.

use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef};
use arrow_dlpack::{ArrayToTensorOptions, array_to_tensor};
use arrow_dlpack_tensor::{DType, Tensor};

/// The read-only `(len, k)` view of `columns` (each `len` rows long) with strides
/// `(1, distance)`, when the columns are of one fixed-width numeric type, have no nulls, and lie
/// in one allocation at one distance of at least `len` elements from each other, in order;
/// `None` otherwise (the caller copies).
pub(crate) fn strided_group_view(columns: &[ArrayRef]) -> Option<Tensor> {
    let first = columns.first()?;
    let len = first.len();
    if len == 0 {
        return None;
    }
    let views = columns
        .iter()
        .map(|column| {
            if column.null_count() > 0 {
                return None;
            }
            let tensor = array_to_tensor(column.as_ref(), ArrayToTensorOptions::default()).ok()?;
            let flat = tensor.shape() == [len] && tensor.strides() == [1];
            (flat && tensor.dtype() != DType::Bool).then_some(tensor)
        })
        .collect::<Option<Vec<Tensor>>>()?;
    let dtype = views[0].dtype();
    let size = dtype.size();
    let allocation = views[0].buffer().data_ptr();
    let start = views[0].data_ptr() as usize;
    let distance = match views.get(1) {
        Some(second) => (second.data_ptr() as usize).checked_sub(start)?,
        None => len * size,
    };
    if distance < len * size || distance % size != 0 {
        return None;
    }
    let same_layout = views.iter().enumerate().all(|(index, view)| {
        view.dtype() == dtype
            && view.buffer().data_ptr() == allocation
            && index
                .checked_mul(distance)
                .and_then(|step| step.checked_add(start))
                == Some(view.data_ptr() as usize)
    });
    if !same_layout {
        return None;
    }
    let span = (views.len() - 1) * distance + len * size;
    let last = views[views.len() - 1].buffer().clone();
    let start = NonNull::new(views[0].data_ptr().cast_mut())?;
    // SAFETY: the span runs from the first column's first value to the last column's last value.
    // The last column's allocation starts at `allocation` (checked above) and holds that value
    // (an Arrow buffer lies inside its allocation's initialised bytes), so it covers every byte
    // from `allocation` up to the end of the span; the span starts at the first column's values,
    // which lie at or after `allocation` too, since its buffer starts there as well. `last`
    // holds a reference to that allocation, so the span stays valid as long as the new buffer
    // lives; the buffer is only read (the tensor below is read-only).
    let buffer =
        unsafe { arrow_buffer::Buffer::from_custom_allocation(start, span, Arc::new(last)) };
    let stride = isize::try_from(distance / size).ok()?;
    let shape = vec![len, views.len()];
    Tensor::try_new(buffer, dtype, shape, vec![1, stride], 0)
        .ok()
        .map(|tensor| tensor.with_read_only(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float32Array, Int32Array};
    use arrow_buffer::{Buffer, ScalarBuffer};

    /// `k` float32 columns of `len` rows, sliced out of one buffer at `distance` elements apart.
    fn columns_in_one_buffer(k: usize, len: usize, distance: usize) -> (Vec<ArrayRef>, Buffer) {
        let end = (k * distance).max((k - 1) * distance + len);
        let values: Vec<f32> = (0..end).map(|i| i as f32).collect();
        let buffer = Buffer::from_vec(values);
        let columns = (0..k)
            .map(|c| {
                let scalars = ScalarBuffer::<f32>::new(buffer.clone(), c * distance, len);
                Arc::new(Float32Array::new(scalars, None)) as ArrayRef
            })
            .collect();
        (columns, buffer)
    }

    #[test]
    fn evenly_spaced_columns_become_a_strided_view_of_their_memory() {
        let (columns, buffer) = columns_in_one_buffer(3, 4, 6);
        let tensor = strided_group_view(&columns).expect("a view");
        assert_eq!(tensor.shape(), &[4, 3]);
        assert_eq!(tensor.strides(), &[1, 6]);
        assert!(tensor.is_read_only());
        assert_eq!(tensor.data_ptr(), buffer.as_ptr());
        let got: Vec<f32> = (0..4)
            .flat_map(|row| (0..3).map(move |column| (row, column)))
            .map(|(row, column)| tensor.get::<f32>(&[row, column]).unwrap())
            .collect();
        let want: Vec<f32> = (0..4)
            .flat_map(|row| (0..3).map(move |column| (column * 6 + row) as f32))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn columns_that_touch_give_numpys_column_major_strides() {
        let (columns, _) = columns_in_one_buffer(2, 5, 5);
        let tensor = strided_group_view(&columns).expect("a view");
        assert_eq!(tensor.strides(), &[1, 5]);
    }

    #[test]
    fn anything_but_one_allocation_at_one_distance_is_left_to_the_copy() {
        // Uneven distances.
        let (columns, _) = columns_in_one_buffer(3, 2, 4);
        let uneven = vec![
            columns[0].clone(),
            columns[1].clone(),
            columns[1].slice(1, 1),
        ];
        assert!(strided_group_view(&uneven).is_none());
        let skipped = vec![columns[0].clone(), columns[2].clone(), columns[1].clone()];
        assert!(strided_group_view(&skipped).is_none(), "out of order");
        // Overlapping columns.
        let (overlapping, _) = columns_in_one_buffer(3, 4, 2);
        assert!(strided_group_view(&overlapping).is_none());
        // Separate allocations.
        let separate: Vec<ArrayRef> = (0..2)
            .map(|_| Arc::new(Float32Array::from(vec![1.0f32, 2.0])) as ArrayRef)
            .collect();
        assert!(strided_group_view(&separate).is_none());
        // Mixed types in one allocation.
        let buffer = Buffer::from_vec(vec![0i32; 8]);
        let mixed: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::new(
                ScalarBuffer::new(buffer.clone(), 0, 4),
                None,
            )),
            Arc::new(Float32Array::new(
                ScalarBuffer::new(buffer.clone(), 4, 4),
                None,
            )),
        ];
        assert!(strided_group_view(&mixed).is_none());
        // Nulls.
        let with_nulls: Vec<ArrayRef> = vec![
            Arc::new(Float32Array::new(
                ScalarBuffer::new(buffer.clone(), 0, 4),
                None,
            )),
            Arc::new(Float32Array::from(vec![Some(1.0f32), None, None, None])),
        ];
        assert!(strided_group_view(&with_nulls).is_none());
        assert!(strided_group_view(&[]).is_none());
    }
}
