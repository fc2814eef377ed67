//! The `ndarray` feature: a [`Tensor`] viewed as an [`ndarray::ArrayViewD`], and ndarray arrays
//! turned into tensors.
//!
//! The view borrows the tensor's memory for any strides, negative and zero included; an owned
//! array becomes a tensor that owns the array's allocation, with the array's strides.

use ndarray::{Array, ArrayView, ArrayViewD, Dimension, IxDyn, ShapeBuilder};

use crate::{Error, NativeDType, Result, Tensor, layout};

impl Tensor {
    /// The tensor as an ndarray view of `T` with a fixed number of dimensions `D` (`Ix1`,
    /// `Ix2`, ...), borrowing its memory, for any strides: [`Tensor::view`] with the dimension
    /// count checked once, so that indexing is by `[i, j]` arrays and costs no dynamic shape.
    ///
    /// Fails as [`Tensor::view`] does, and with [`Error::NdimMismatch`] when the tensor has
    /// another number of dimensions.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use ndarray; }
    /// use arrow_dlpack::Tensor;
    /// use arrow_dlpack::ndarray::Ix2;
    ///
    /// let matrix = Tensor::from_vec((0..6u8).map(f32::from).collect(), vec![2, 3])?;
    /// let view = matrix.view_ix::<f32, Ix2>()?;
    /// assert_eq!(view.dim(), (2, 3));
    /// assert_eq!(view[[1, 2]], 5.0);
    /// assert!(matrix.view_ix::<f32, arrow_dlpack::ndarray::Ix3>().is_err());
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn view_ix<T: NativeDType, D: Dimension>(&self) -> Result<ArrayView<'_, T, D>> {
        if let Some(expected) = D::NDIM
            && expected != self.ndim()
        {
            return Err(Error::NdimMismatch {
                expected,
                found: self.ndim(),
            });
        }
        self.view::<T>()?
            .into_dimensionality::<D>()
            .map_err(|_| Error::NdimMismatch {
                expected: D::NDIM.unwrap_or(self.ndim()),
                found: self.ndim(),
            })
    }

    /// The tensor as an ndarray view of `T`, borrowing its memory, for any strides.
    ///
    /// The view has the tensor's shape and strides (negative strides included; an extent-1
    /// dimension may get a different, equivalent stride). Fails when `T` does not read the dtype
    /// or when the memory is not on the CPU.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; pub use ndarray; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let matrix = Tensor::from_vec((0..6i32).collect(), vec![2, 3])?;
    /// let view = matrix.view::<i32>()?;
    /// assert_eq!(view.shape(), &[2, 3]);
    /// assert_eq!(view[[1, 2]], 5);
    ///
    /// // Any strides: the transpose's view reads the same memory.
    /// let transposed = matrix.permuted(&[1, 0])?;
    /// assert_eq!(transposed.view::<i32>()?[[2, 1]], 5);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn view<T: NativeDType>(&self) -> Result<ArrayViewD<'_, T>> {
        self.check_typed::<T>()?;
        let shape = IxDyn(self.shape());
        let Some((low, high)) = layout::span(self.shape(), self.strides())? else {
            // An empty view reads nothing; its strides are arbitrary, so let ndarray pick its own.
            return ArrayView::from_shape(shape, &[]).map_err(|_| Error::Overflow {
                what: "the ndarray shape",
            });
        };
        // ndarray reads strides as `isize` values stored in `usize`. An extent-1 dimension may
        // have any stride; 0 is equivalent and keeps ndarray's own arithmetic small.
        let strides: Vec<usize> = self
            .shape()
            .iter()
            .zip(self.strides())
            .map(|(&extent, &stride)| if extent > 1 { stride as usize } else { 0 })
            .collect();
        // `low <= 0 <= high` and both fit the buffer, as construction checked.
        let len = (high - low + 1) as usize;
        // SAFETY: `check_typed` established that the memory is on the CPU and that `T` reads the
        // dtype (same size, alignment no larger than the dtype's, every bit pattern valid).
        // `Tensor::try_new` checked that every element the view addresses lies inside the buffer
        // and that the first element is aligned for the dtype; the elements at offsets `low`
        // (<= 0) to `high` from the first element are such addressed elements or lie between
        // them, so `len` consecutive `T`s from offset `low` are inside the buffer and aligned.
        // The buffer is immutable and lives as long as the borrow of `self`.
        let span = unsafe {
            std::slice::from_raw_parts(self.data_ptr().cast::<T>().offset(low as isize), len)
        };
        // ndarray checks the shape and strides against the span itself, negative strides included.
        ArrayView::from_shape(shape.strides(IxDyn(&strides)), span).map_err(|_| Error::Overflow {
            what: "the ndarray strides",
        })
    }

    /// An owned ndarray array as a tensor, without copying: the tensor owns the array's
    /// allocation and keeps its shape, strides and offset (a sliced, transposed or reversed array
    /// stays as it is).
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; pub use ndarray; }
    /// use arrow_dlpack::{DType, Tensor};
    /// use arrow_dlpack::ndarray::array;
    ///
    /// let tensor = Tensor::from_ndarray(array![[1.0f64, 2.0], [3.0, 4.0]])?;
    /// assert_eq!(tensor.dtype(), DType::Float64);
    /// assert_eq!(tensor.as_slice::<f64>()?, &[1.0, 2.0, 3.0, 4.0]);
    ///
    /// // A transposed array keeps its column-major strides.
    /// let transposed = Tensor::from_ndarray(array![[1i8, 2], [3, 4]].reversed_axes())?;
    /// assert!(transposed.is_column_major());
    /// assert_eq!(transposed.get::<i8>(&[0, 1])?, 3);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn from_ndarray<T: NativeDType, D: Dimension>(array: Array<T, D>) -> Result<Tensor> {
        let shape = array.shape().to_vec();
        if array.is_empty() {
            return Tensor::from_vec(Vec::<T>::new(), shape);
        }
        let strides = array.strides().to_vec();
        let (values, offset) = array.into_raw_vec_and_offset();
        // A non-empty array always has an offset; 0 is only a fallback, and `try_new` checks
        // every element against the buffer whatever the offset.
        Tensor::try_new(
            T::into_buffer(values),
            T::DTYPE,
            shape,
            strides,
            offset.unwrap_or(0),
        )
    }

    /// A row-major copy of an ndarray view (or of any array borrowed with `.view()`).
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; pub use ndarray; }
    /// use arrow_dlpack::Tensor;
    /// use arrow_dlpack::ndarray::{array, s};
    ///
    /// let array = array![[1u32, 2, 3], [4, 5, 6]];
    /// let tensor = Tensor::from_ndarray_view(array.slice(s![.., ..;2]))?;
    /// assert_eq!(tensor.as_slice::<u32>()?, &[1, 3, 4, 6]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn from_ndarray_view<T: NativeDType, D: Dimension>(
        view: ArrayView<'_, T, D>,
    ) -> Result<Tensor> {
        Tensor::from_vec(view.iter().copied().collect(), view.shape().to_vec())
    }
}

/// The same as [`Tensor::from_ndarray`]: zero-copy.
impl<T: NativeDType, D: Dimension> TryFrom<Array<T, D>> for Tensor {
    type Error = Error;

    fn try_from(array: Array<T, D>) -> Result<Tensor> {
        Tensor::from_ndarray(array)
    }
}

#[cfg(test)]
mod tests {
    use arrow_buffer::Buffer;
    use ndarray::{Array3, ArrayD, Axis, array, s};

    use super::*;
    use crate::DType;

    #[test]
    fn views_follow_negative_zero_and_extent_one_strides() {
        let buffer = Buffer::from_vec((0..6i64).collect::<Vec<_>>());
        let reversed =
            Tensor::try_new(buffer.clone(), DType::Int64, vec![2, 3], vec![-3, -1], 5).unwrap();
        let view = reversed.view::<i64>().unwrap();
        assert_eq!(view, array![[5, 4, 3], [2, 1, 0]].into_dyn());
        assert_eq!(view.strides(), &[-3, -1]);
        let broadcast = Tensor::try_new(
            buffer.clone(),
            DType::Int64,
            vec![2, 1, 2],
            vec![0, isize::MIN, 1],
            2,
        )
        .unwrap();
        assert_eq!(
            broadcast.view::<i64>().unwrap(),
            array![[[2, 3]], [[2, 3]]].into_dyn()
        );
        let empty = Tensor::try_new(buffer, DType::Int64, vec![2, 0], vec![-7, 9], 0).unwrap();
        assert_eq!(empty.view::<i64>().unwrap().shape(), &[2, 0]);
        assert!(matches!(
            empty.view::<f64>(),
            Err(Error::DTypeMismatch { .. })
        ));
    }

    #[test]
    fn owned_arrays_are_not_copied() {
        let mut array =
            Array3::<f32>::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as f32);
        array.slice_collapse(s![.., 1.., ..;-1]);
        array.swap_axes(0, 2);
        let expected = array.clone().into_dyn();
        let address = array.as_ptr();
        let tensor = Tensor::try_from(array).unwrap();
        assert_eq!(tensor.data_ptr(), address.cast::<u8>());
        assert_eq!(tensor.view::<f32>().unwrap(), expected);
    }

    #[test]
    fn empty_and_zero_dimensional_arrays() {
        let empty = ArrayD::<u16>::zeros(vec![3, 0, 2]);
        let tensor = Tensor::from_ndarray(empty).unwrap();
        assert_eq!(tensor.shape(), &[3, 0, 2]);
        assert!(tensor.is_empty());
        let scalar = Tensor::from_ndarray(ndarray::arr0(7u8)).unwrap();
        assert_eq!(scalar.get::<u8>(&[]), Ok(7));
        let view = Tensor::from_ndarray_view(array![[1i16, 2], [3, 4]].view().reversed_axes());
        assert_eq!(view.unwrap().as_slice::<i16>().unwrap(), &[1, 3, 2, 4]);
        let inverted = {
            let mut a = array![1u64, 2, 3];
            a.invert_axis(Axis(0));
            Tensor::from_ndarray(a).unwrap()
        };
        assert_eq!(
            inverted.iter::<u64>().unwrap().collect::<Vec<_>>(),
            [3, 2, 1]
        );
    }
}
