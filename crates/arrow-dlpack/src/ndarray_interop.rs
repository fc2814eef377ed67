//! The `ndarray` feature: [`FixedShapeTensorArray`] to and from ndarray arrays whose first axis
//! is the rows of the column.
//!
//! Viewing a tensor as an ndarray, and turning an owned array into a tensor, live in the tensor
//! layer (`Tensor::view`, `Tensor::from_ndarray`); this file adds the Arrow column on top.

use arrow_dlpack_tensor::{NativeDType, Tensor};
use ndarray::{Array, ArrayD, Dimension};

use crate::{ArrayToTensorOptions, Error, FixedShapeTensorArray, Result, TensorToArrayOptions};

impl FixedShapeTensorArray {
    /// An ndarray array of rank >= 1 as a fixed-shape tensor column: the first axis is the rows,
    /// the other axes the shape of each cell.
    ///
    /// The column shares the array's allocation when the array is densely packed with the first
    /// axis outermost (a standard-layout array, or one whose cell axes are permuted: the
    /// permutation is recorded in the type); otherwise the elements are copied in row-major
    /// order. A 0-d array is refused with [`Error::ZeroDimensional`], and an element type without
    /// an Arrow type (`bf16`) with [`Error::UnsupportedDType`].
    ///
    /// ```
    /// use arrow_dlpack::FixedShapeTensorArray;
    /// use arrow_dlpack::ndarray::Array3;
    ///
    /// // Four 2x3 images.
    /// let images = Array3::from_shape_fn((4, 2, 3), |(n, i, j)| (n * 100 + i * 10 + j) as f32);
    /// let column = FixedShapeTensorArray::from_ndarray(images)?;
    /// assert_eq!(column.len(), 4);
    /// assert_eq!(column.extension_type().shape(), &[2, 3]);
    ///
    /// let back = column.to_ndarray::<f32>()?;
    /// assert_eq!(back[[3, 1, 2]], 312.0);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn from_ndarray<T: NativeDType, D: Dimension>(array: Array<T, D>) -> Result<Self> {
        let tensor = Tensor::from_ndarray(array)?;
        match FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions { allow_copy: true })
        {
            // The rows are not the outermost axis in memory (a Fortran-order array): lay the
            // elements out again, row-major.
            Err(Error::NotFirstMajor { .. }) => {
                let copy = Tensor::from_ndarray_view(tensor.view::<T>()?)?;
                FixedShapeTensorArray::from_tensor(&copy, TensorToArrayOptions::default())
            }
            other => other,
        }
    }

    /// The column as an owned ndarray array of shape `(len, *logical_shape)`, copied.
    ///
    /// Fails when `T` is not the value type's Rust type, or when the column holds nulls (of whole
    /// tensors or of values). For a zero-copy view, take the tensor first:
    /// `column.to_tensor(ArrayToTensorOptions::default())?.view::<T>()?` borrows the column's memory.
    ///
    /// ```
    /// use arrow_dlpack::FixedShapeTensorArray;
    /// use arrow_dlpack::ndarray::Array3;
    ///
    /// let images = Array3::<f32>::from_shape_fn((4, 2, 3), |(n, i, j)| (n * 6 + i * 3 + j) as f32);
    /// let column = FixedShapeTensorArray::from_ndarray(images.clone())?;
    /// let back = column.to_ndarray::<f32>()?;
    /// assert_eq!(back.shape(), &[4, 2, 3]);
    /// assert_eq!(back, images.into_dyn());
    /// assert!(column.to_ndarray::<f64>().is_err()); // the value type is float32
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_ndarray<T: NativeDType>(&self) -> Result<ArrayD<T>> {
        let tensor = self.to_tensor(ArrayToTensorOptions::default())?;
        Ok(tensor.view::<T>()?.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Array2, Array3, ShapeBuilder, array, s};

    use super::*;

    #[test]
    fn standard_layout_arrays_are_shared() {
        let images =
            Array3::<i16>::from_shape_fn((3, 2, 2), |(n, i, j)| (n * 4 + i * 2 + j) as i16);
        let owned = images.clone();
        let address = owned.as_ptr();
        let column = FixedShapeTensorArray::from_ndarray(owned).unwrap();
        assert_eq!(
            column.storage().values().to_data().buffers()[0].as_ptr(),
            address.cast::<u8>()
        );
        assert_eq!(column.to_ndarray::<i16>().unwrap(), images.into_dyn());
    }

    #[test]
    fn permuted_cells_keep_a_permutation_and_fortran_order_is_copied() {
        // Cells transposed in place: the first axis is still outermost.
        let mut cells =
            Array3::<u32>::from_shape_fn((2, 3, 4), |(n, i, j)| (n * 12 + i * 4 + j) as u32);
        cells.swap_axes(1, 2);
        let column = FixedShapeTensorArray::from_ndarray(cells.clone()).unwrap();
        assert_eq!(column.extension_type().permutation(), Some(&[1, 0][..]));
        assert_eq!(
            column.to_ndarray::<u32>().unwrap(),
            cells.clone().into_dyn()
        );

        let fortran = Array2::<f64>::from_shape_fn((3, 2).f(), |(i, j)| (i * 2 + j) as f64);
        let column = FixedShapeTensorArray::from_ndarray(fortran.clone()).unwrap();
        assert_eq!(column.to_ndarray::<f64>().unwrap(), fortran.into_dyn());

        let reversed = array![[1i8, 2], [3, 4], [5, 6]].slice_move(s![..;-1, ..]);
        let column = FixedShapeTensorArray::from_ndarray(reversed.clone()).unwrap();
        assert_eq!(column.to_ndarray::<i8>().unwrap(), reversed.into_dyn());
    }

    #[test]
    fn refusals() {
        assert!(matches!(
            FixedShapeTensorArray::from_ndarray(ndarray::arr0(1.0f32)),
            Err(Error::ZeroDimensional)
        ));
        let column = FixedShapeTensorArray::from_ndarray(array![[1.0f32, 2.0]]).unwrap();
        assert!(column.to_ndarray::<f64>().is_err());
    }
}
