//! `VariableShapeTensorArray::to_ragged`: a column whose rows differ only in their first
//! dimension, as one [`RaggedTensor`] (values `(N, *inner)` and offsets `(B + 1,)`).

use arrow_dlpack_tensor::{DType, Tensor, layout};

use super::VariableShapeTensorArray;
use crate::{ArrayToTensorOptions, Error, NullLocation, RaggedTensor, Result};

impl VariableShapeTensorArray {
    /// The rows as one [`RaggedTensor`], when they differ only in their first (logical)
    /// dimension: values of shape `(N, *inner)`, `N` the sum of the rows' first extents, and
    /// offsets `(B + 1,)` (int32 when `N` fits, int64 otherwise).
    ///
    /// Without a permutation (or with the identity) the values are a zero-copy view of the
    /// column's data: the rows are already stored one after another. With another permutation
    /// the rows are not, and they are copied when
    /// [`allow_copy`](ArrayToTensorOptions::allow_copy) is set ([`Error::CopyRequired`]
    /// otherwise).
    /// Null rows are refused with [`Error::Nulls`]; nulls among the elements too, unless
    /// [`allow_nulls`](ArrayToTensorOptions::allow_nulls) is set.
    /// Rows that differ beyond their first dimension are [`Error::MixedRaggedPieces`]; 0-d rows
    /// are [`Error::ZeroDimensional`].
    ///
    /// ```
    /// use arrow_dlpack::{ArrayToTensorOptions, Tensor, VariableShapeTensorArray};
    ///
    /// // Two sequences of 3-d points.
    /// let a = Tensor::from_vec((0..6u8).map(f32::from).collect(), vec![2, 3])?;
    /// let b = Tensor::from_vec((0..12u8).map(f32::from).collect(), vec![4, 3])?;
    /// let column = VariableShapeTensorArray::from_tensors(&[a, b], Default::default())?;
    /// let ragged = column.to_ragged(ArrayToTensorOptions::default())?;
    /// assert_eq!(ragged.values().shape(), &[6, 3]);
    /// assert_eq!(ragged.offsets().as_slice::<i32>()?, &[0, 2, 6]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_ragged(&self, options: ArrayToTensorOptions) -> Result<RaggedTensor> {
        if self.ndim() == 0 {
            return Err(Error::ZeroDimensional);
        }
        if self.null_count() > 0 {
            return Err(Error::Nulls {
                null_count: self.null_count(),
                location: NullLocation::Array { depth: 0 },
            });
        }
        let rows = (0..self.len())
            .map(|index| self.row_with(index, options))
            .collect::<Result<Vec<_>>>()?;
        let permuted = self
            .extension_type()
            .permutation()
            .is_some_and(|permutation| permutation.iter().enumerate().any(|(i, &p)| i != p));
        if permuted {
            if !options.allow_copy {
                return Err(Error::CopyRequired {
                    reason: "a ragged tensor of rows stored in a permuted order".to_string(),
                    options: "ArrayToTensorOptions",
                });
            }
            return RaggedTensor::from_rows(&rows);
        }
        let (values, data) = self.values_and_data();
        let values = values.expect("row_with checked that the value type has a dtype");
        let inner: Vec<usize> = match rows.first() {
            Some(first) => first.shape()[1..].to_vec(),
            // No rows: the inner extents the type promises, 0 where it promises none.
            None => (1..self.ndim())
                .map(|dim| {
                    self.extension_type()
                        .uniform_shape()
                        .and_then(|uniform| uniform[dim])
                        .map_or(0, |extent| extent as usize)
                })
                .collect(),
        };
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        offsets.push(0usize);
        for (index, row) in rows.iter().enumerate() {
            if row.shape()[1..] != inner[..] {
                return Err(Error::MixedRaggedPieces {
                    index,
                    expected_dtype: values.dtype(),
                    expected_shape: inner,
                    found_dtype: row.dtype(),
                    found_shape: row.shape()[1..].to_vec(),
                });
            }
            offsets.push(offsets[index] + row.shape()[0]);
        }
        let total = offsets[rows.len()];
        let mut shape = vec![total];
        shape.extend_from_slice(&inner);
        let strides = layout::row_major_strides(&shape)?;
        let start = data.value_offsets()[0] as usize;
        let values = Tensor::try_new(
            values.buffer().clone(),
            values.dtype(),
            shape,
            strides,
            values.offset() + start,
        )?;
        let offsets = match i32::try_from(total) {
            Ok(_) => Tensor::from_vec(
                offsets.iter().map(|&o| o as i32).collect(),
                vec![offsets.len()],
            )?,
            Err(_) => Tensor::from_vec(
                offsets.iter().map(|&o| o as i64).collect(),
                vec![offsets.len()],
            )?,
        };
        debug_assert_eq!(
            offsets.dtype() == DType::Int32,
            i32::try_from(total).is_ok()
        );
        RaggedTensor::new(values, offsets)
    }
}
