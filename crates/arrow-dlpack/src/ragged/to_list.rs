//! Ragged tensors back to Arrow: a `list` (int32 offsets) or `large_list` (int64 offsets) array
//! whose buffers are the tensor's, with fixed-size lists for the element dimensions.

use std::sync::Arc;

use arrow_array::{ArrayRef, GenericListArray, OffsetSizeTrait};
use arrow_buffer::{OffsetBuffer, ScalarBuffer};
use arrow_dlpack_tensor::DType;
use arrow_schema::Field;

use super::RaggedTensor;
use crate::{Result, TensorToArrayOptions, tensor_to_array, tensor_to_fixed_size_list};

impl RaggedTensor {
    /// The rows as an Arrow list array: `list` for int32 offsets, `large_list` for int64, with
    /// no nulls and a nullable `item` child field (as PyArrow's `pa.list_(t)` has).
    ///
    /// Values of shape `(N,)` become the primitive child, `(N, d1, ..., dk)` nested fixed-size
    /// lists; both share the values' memory when it is row-major (otherwise it is copied), and
    /// the offsets share theirs. Bool values are packed into Arrow's bits (a copy); bool values
    /// with element dimensions, and dtypes Arrow lacks (bfloat16, complex, float8), are
    /// [`Error::UnsupportedDType`](crate::Error::UnsupportedDType).
    ///
    /// ```
    /// use arrow_array::{Array, cast::AsArray, types::Int32Type};
    /// use arrow_dlpack::{RaggedTensor, Tensor};
    ///
    /// let ragged = RaggedTensor::new(
    ///     Tensor::from_vec(vec![1i32, 2, 3], vec![3])?,
    ///     Tensor::from_vec(vec![0i32, 1, 3], vec![3])?,
    /// )?;
    /// let array = ragged.to_list_array()?;
    /// let list = array.as_list::<i32>();
    /// assert_eq!(list.value_offsets(), &[0, 1, 3]);
    /// assert_eq!(list.value(1).as_primitive::<Int32Type>().values().as_ref(), &[2, 3]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_list_array(&self) -> Result<ArrayRef> {
        let values = &self.values;
        let child: ArrayRef = if values.ndim() == 1 {
            tensor_to_array(values, TensorToArrayOptions { allow_copy: true })?
        } else {
            // A values tensor that is not row-major (a view) is copied into one that is.
            Arc::new(tensor_to_fixed_size_list(
                values,
                TensorToArrayOptions { allow_copy: true },
            )?)
        };
        match self.offsets.dtype() {
            DType::Int32 => list_array::<i32>(self, child),
            _ => list_array::<i64>(self, child),
        }
    }
}

/// A list array with offsets of type `O` (the width of `ragged`'s offsets) over `child`.
fn list_array<O: OffsetSizeTrait>(ragged: &RaggedTensor, child: ArrayRef) -> Result<ArrayRef> {
    let buffer = ragged
        .offsets
        .row_major_buffer()
        .expect("offsets are made row-major at construction");
    // The offsets were checked at construction (non-empty, from 0, nondecreasing, ending at the
    // number of values), which is what `OffsetBuffer::new` asserts; `Tensor` checked alignment.
    let offsets = OffsetBuffer::new(ScalarBuffer::<O>::new(buffer, 0, ragged.len() + 1));
    let field = Arc::new(Field::new_list_field(child.data_type().clone(), true));
    Ok(Arc::new(GenericListArray::<O>::try_new(
        field, offsets, child, None,
    )?))
}
