//! `VariableShapeTensorArray::to_padded`: every row copied into one tensor padded to the
//! largest extent of each dimension, with the rows' shapes beside it.

use arrow_dlpack_tensor::Tensor;
use arrow_dlpack_tensor::alloc::PooledVec;

use super::VariableShapeTensorArray;
use crate::{ArrayToTensorOptions, Error, NullLocation, PadValue, Result};

/// What [`VariableShapeTensorArray::to_padded`] fills and accepts.
///
/// ```
/// use arrow_dlpack::VariableShapePadOptions;
///
/// use arrow_dlpack::PadValue;
///
/// let options = VariableShapePadOptions { pad_value: PadValue::Int(-1), ..Default::default() };
/// assert!(!options.allow_nulls);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct VariableShapePadOptions {
    /// The value of the padding elements, checked against the column's dtype
    /// ([`Error::PadValue`] when the dtype cannot hold it).
    pub pad_value: PadValue,
    /// Accept null rows (all padding, shape zeros) and nulls among the elements (unspecified
    /// values); without it they are refused with [`Error::Nulls`].
    pub allow_nulls: bool,
}

impl VariableShapeTensorArray {
    /// Copies every row into one new row-major tensor of shape `(len, max_0, max_1, ...)`, the
    /// largest logical extent of each dimension over the rows, the rest filled with
    /// [`pad_value`](VariableShapePadOptions::pad_value); and gives the rows' logical shapes as a
    /// new int32 tensor of shape `(len, ndim)`.
    ///
    /// The padded tensor carries the dimension names (logical order, `""` first), and both
    /// tensors are writable copies.
    ///
    /// ```
    /// use arrow_dlpack::{Tensor, VariableShapePadOptions, VariableShapeTensorArray};
    ///
    /// let a = Tensor::from_vec(vec![1i64, 2, 3], vec![1, 3])?;
    /// let b = Tensor::from_vec(vec![4i64, 5], vec![2, 1])?;
    /// let array = VariableShapeTensorArray::from_tensors(&[a, b], Default::default())?;
    /// let (padded, shapes) = array.to_padded(VariableShapePadOptions::default())?;
    /// assert_eq!(padded.shape(), &[2, 2, 3]);
    /// assert_eq!(padded.as_slice::<i64>()?, &[1, 2, 3, 0, 0, 0, 4, 0, 0, 5, 0, 0]);
    /// assert_eq!(shapes.as_slice::<i32>()?, &[1, 3, 2, 1]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_padded(&self, options: VariableShapePadOptions) -> Result<(Tensor, Tensor)> {
        let ndim = self.ndim();
        let (values, _) = self.values_and_data();
        let Some(values) = values else {
            return Err(Error::UnsupportedType {
                data_type: self.extension_type().value_type().clone(),
                reason: "a variable-shape tensor's elements must be numbers",
            });
        };
        let dtype = values.dtype();
        let pattern = options.pad_value.to_element_bytes(dtype)?;
        if !options.allow_nulls && self.null_count() > 0 {
            return Err(Error::Nulls {
                null_count: self.null_count(),
                location: NullLocation::Array { depth: 0 },
            });
        }
        let row_options = ArrayToTensorOptions {
            allow_nulls: options.allow_nulls,
            allow_copy: false,
        };
        let rows = (0..self.len())
            .map(|index| {
                if self.is_null(index) {
                    Ok(None)
                } else {
                    self.row_with(index, row_options).map(Some)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let mut max = vec![0usize; ndim];
        let mut shapes = Vec::with_capacity(rows.len() * ndim);
        for row in &rows {
            match row {
                Some(row) => {
                    for (max, &extent) in max.iter_mut().zip(row.shape()) {
                        *max = (*max).max(extent);
                    }
                    // Stored extents are int32, so these fit.
                    shapes.extend(row.shape().iter().map(|&extent| extent as i32));
                }
                None => shapes.extend(std::iter::repeat_n(0i32, ndim)),
            }
        }
        let mut shape = vec![rows.len()];
        shape.extend_from_slice(&max);
        let count = arrow_dlpack_tensor::layout::element_count(&shape)?;
        let bytes = count
            .checked_mul(dtype.size())
            .ok_or(arrow_dlpack_tensor::Error::OutOfMemory { bytes: usize::MAX })?;
        let mut out = PooledVec::<u8>::try_with_capacity(bytes)?;
        // An empty output has nothing to write, and walking a row of extents like
        // `[2^31 - 1, 2^31 - 1, 0]` one index at a time would never end.
        let rows_to_write = if count == 0 { &[][..] } else { &rows[..] };
        for row in rows_to_write {
            match row {
                None => fill(&mut out, &pattern, max.iter().product()),
                Some(row) => {
                    let contiguous;
                    let row = if row.is_row_major() {
                        row
                    } else {
                        contiguous = row.to_contiguous()?;
                        &contiguous
                    };
                    let elements = row
                        .row_major_buffer()
                        .expect("a row-major row has a buffer");
                    write_padded(&mut out, elements.as_slice(), row.shape(), &max, &pattern);
                }
            }
        }
        let names = self.extension_type().dim_names().map(|names| {
            std::iter::once(String::new())
                .chain(self.extension_type().logical_order(names))
                .collect()
        });
        let padded = Tensor::try_new_row_major(out.into_buffer(), dtype, shape)?
            .with_dim_names(names)?
            .with_read_only(false);
        let shapes = Tensor::from_vec(shapes, vec![rows.len(), ndim])?.with_read_only(false);
        Ok((padded, shapes))
    }
}

/// Appends the row-major `elements` of shape `shape` into the padded block of shape `padded`.
fn write_padded(
    out: &mut PooledVec<u8>,
    elements: &[u8],
    shape: &[usize],
    padded: &[usize],
    pattern: &[u8],
) {
    match shape {
        [] => out.extend_from_slice(&elements[..pattern.len()]),
        [extent] => {
            out.extend_from_slice(&elements[..extent * pattern.len()]);
            fill(out, pattern, padded[0] - extent);
        }
        [extent, inner @ ..] => {
            let inner_bytes = inner.iter().product::<usize>() * pattern.len();
            for index in 0..*extent {
                let start = index * inner_bytes;
                write_padded(
                    out,
                    &elements[start..start + inner_bytes],
                    inner,
                    &padded[1..],
                    pattern,
                );
            }
            let padded_inner: usize = padded[1..].iter().product();
            fill(out, pattern, (padded[0] - extent) * padded_inner);
        }
    }
}

/// Appends `count` copies of the element `pattern`.
fn fill(out: &mut PooledVec<u8>, pattern: &[u8], count: usize) {
    let bytes = count * pattern.len();
    if pattern.iter().all(|&byte| byte == pattern[0]) {
        out.resize(out.len() + bytes, pattern[0]);
    } else {
        out.extend(pattern.iter().copied().cycle().take(bytes));
    }
}
