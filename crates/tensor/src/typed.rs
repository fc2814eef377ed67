//! Typed values: building a [`Tensor`] from a `Vec<T>` and reading its elements as `T`.
//!
//! Every read checks that `T` reads the tensor's dtype ([`NativeDType::reads`]) and that the
//! memory is on the CPU, then relies on the checks of [`Tensor::try_new`] for bounds and alignment.

use std::iter::FusedIterator;
use std::marker::PhantomData;

use arrow_buffer::{ArrowNativeType, ScalarBuffer};

use crate::{Error, NativeDType, Result, Tensor, layout};

impl Tensor {
    /// Builds a row-major tensor of `shape` that owns `values`, without copying them.
    ///
    /// The dtype is `T`'s ([`NativeDType::DTYPE`]); `values` must hold exactly the element count
    /// of `shape` (1 for a 0-d tensor). Like every tensor over an Arrow buffer, the result is
    /// read-only for DLPack consumers.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::{DType, Tensor};
    ///
    /// let tensor = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], vec![2, 3])?;
    /// assert_eq!(tensor.dtype(), DType::Float32);
    /// assert_eq!(tensor.strides(), &[3, 1]);
    /// assert_eq!(tensor.get::<f32>(&[1, 0])?, 4.0);
    ///
    /// // Too few values for the shape.
    /// assert!(Tensor::from_vec(vec![1i32, 2, 3], vec![2, 2]).is_err());
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn from_vec<T: NativeDType>(values: Vec<T>, shape: Vec<usize>) -> Result<Tensor> {
        check_element_count(&shape, values.len())?;
        Tensor::try_new_row_major(T::into_buffer(values), T::DTYPE, shape)
    }

    /// Builds a row-major tensor of `shape` over Arrow's typed `values`, without copying them.
    ///
    /// The typed counterpart of [`Tensor::try_new_row_major`]: the dtype comes from `T`, so it
    /// cannot disagree with the values, and `values` must hold exactly the element count of
    /// `shape`. A sliced `ScalarBuffer` is honoured (the tensor starts at its first element).
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::ScalarBuffer;
    /// use arrow_dlpack::{DType, Tensor};
    ///
    /// let values = ScalarBuffer::from(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// let tensor = Tensor::from_scalar_buffer(values.slice(2, 4), vec![2, 2])?;
    /// assert_eq!(tensor.dtype(), DType::Float64);
    /// assert_eq!(tensor.as_slice::<f64>()?, &[3.0, 4.0, 5.0, 6.0]);
    ///
    /// // The element count must match the shape.
    /// assert!(Tensor::from_scalar_buffer(values, vec![4]).is_err());
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn from_scalar_buffer<T>(values: ScalarBuffer<T>, shape: Vec<usize>) -> Result<Tensor>
    where
        T: NativeDType + ArrowNativeType,
    {
        check_element_count(&shape, values.len())?;
        Tensor::try_new_row_major(values.into_inner(), T::DTYPE, shape)
    }

    /// The elements of a row-major tensor, in order, without copying.
    ///
    /// Fails when `T` does not read the dtype, when the memory is not on the CPU, or when the
    /// layout is not row-major ([`Tensor::is_row_major`]; use [`Tensor::iter`], [`Tensor::get`]
    /// or [`Tensor::to_contiguous`] for other layouts). An empty tensor gives an empty slice.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let tensor = Tensor::from_vec(vec![1u16, 2, 3, 4], vec![2, 2])?;
    /// assert_eq!(tensor.as_slice::<u16>()?, &[1, 2, 3, 4]);
    ///
    /// // The transpose is column-major, so it has no row-major slice.
    /// assert!(tensor.permuted(&[1, 0])?.as_slice::<u16>().is_err());
    /// // Nor is u16 data an i16 slice.
    /// assert!(tensor.as_slice::<i16>().is_err());
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn as_slice<T: NativeDType>(&self) -> Result<&[T]> {
        self.check_typed::<T>()?;
        if !self.is_row_major() {
            return Err(Error::NotRowMajor {
                shape: self.shape().to_vec(),
                strides: self.strides().to_vec(),
            });
        }
        if self.is_empty() {
            return Ok(&[]);
        }
        let data = self.data_ptr().cast::<T>();
        // SAFETY: the memory is on the CPU (checked above) and `T` has the dtype's size and an
        // alignment no larger than the dtype's, with every bit pattern valid (`NativeDType`).
        // `Tensor::try_new` checked that the first element is aligned for the dtype and that every
        // addressed element lies inside the buffer; a non-empty row-major view addresses exactly
        // the `len()` consecutive elements from `data`. The buffer is immutable and outlives the
        // borrow of `self`.
        Ok(unsafe { std::slice::from_raw_parts(data, self.len()) })
    }

    /// The element at `index` (one entry per dimension), for any strides.
    ///
    /// Fails, never panics, when `T` does not read the dtype, when the memory is not on the CPU,
    /// when `index` does not have one entry per dimension, or when an entry is out of bounds.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let matrix = Tensor::from_vec((0..6i64).collect(), vec![2, 3])?;
    /// let transposed = matrix.permuted(&[1, 0])?;
    /// assert_eq!(transposed.get::<i64>(&[2, 1])?, 5);
    /// assert!(transposed.get::<i64>(&[3, 0]).is_err());
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn get<T: NativeDType>(&self, index: &[usize]) -> Result<T> {
        self.check_typed::<T>()?;
        if index.len() != self.ndim() {
            return Err(Error::IndexLength {
                expected: self.ndim(),
                found: index.len(),
            });
        }
        for (dim, (&i, &extent)) in index.iter().zip(self.shape()).enumerate() {
            if i >= extent {
                return Err(Error::IndexOutOfBounds {
                    dim,
                    index: i,
                    extent,
                });
            }
        }
        // Every entry is in bounds, so the tensor is not empty, `i * stride` lies within the span
        // that construction checked to fit inside the buffer, and so does every partial sum (the
        // offset of an element with the remaining entries at 0): no overflow. (An empty tensor's
        // strides are unchecked, which is why the bounds are checked first.)
        let offset: isize = index
            .iter()
            .zip(self.strides())
            .map(|(&i, &stride)| i as isize * stride)
            .sum();
        // SAFETY: every index entry is below its extent, so the tensor is not empty and `offset`
        // addresses one of its elements, which `Tensor::try_new` checked to lie inside the buffer,
        // aligned for the dtype and so for `T` (`NativeDType`: same size, no larger alignment, no
        // invalid bit patterns). The memory is on the CPU (checked above).
        Ok(unsafe { self.data_ptr().cast::<T>().offset(offset).read() })
    }

    /// An iterator over the elements in logical row-major order (the last index fastest), for any
    /// strides, including zero and negative ones.
    ///
    /// Fails when `T` does not read the dtype or when the memory is not on the CPU.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let matrix = Tensor::from_vec((0..6i32).collect(), vec![2, 3])?;
    /// let transposed = matrix.permuted(&[1, 0])?;
    /// let values: Vec<i32> = transposed.iter::<i32>()?.collect();
    /// assert_eq!(values, [0, 3, 1, 4, 2, 5]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn iter<T: NativeDType>(&self) -> Result<Iter<'_, T>> {
        self.check_typed::<T>()?;
        Ok(Iter {
            tensor: self,
            index: vec![0; self.ndim()],
            offset: 0,
            remaining: self.len(),
            _type: PhantomData,
        })
    }

    /// Every element as a value of `T`, in logical row-major order, for any strides: a copy.
    ///
    /// Fails as [`Tensor::iter`] does, and with [`Error::OutOfMemory`] when the `Vec` cannot be
    /// allocated.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
    /// use arrow_dlpack::Tensor;
    ///
    /// let matrix = Tensor::from_vec((0..6u16).collect(), vec![2, 3])?;
    /// assert_eq!(matrix.permuted(&[1, 0])?.to_vec::<u16>()?, [0, 3, 1, 4, 2, 5]);
    /// assert!(matrix.to_vec::<f32>().is_err()); // the element type is checked
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_vec<T: NativeDType>(&self) -> Result<Vec<T>> {
        let values = self.iter::<T>()?;
        let mut out = Vec::new();
        out.try_reserve_exact(values.len())
            .map_err(|_| Error::OutOfMemory {
                bytes: values.len().saturating_mul(size_of::<T>()),
            })?;
        out.extend(values);
        Ok(out)
    }

    /// Checks that `T` reads the dtype and that the memory can be dereferenced here.
    pub(crate) fn check_typed<T: NativeDType>(&self) -> Result<()> {
        if !T::reads(self.dtype()) {
            return Err(Error::DTypeMismatch {
                expected: self.dtype(),
                found: T::DTYPE,
                rust_type: T::RUST_NAME,
            });
        }
        self.require_cpu("read the elements")
    }
}

/// The elements of a [`Tensor`] as values of `T`, in logical row-major order; see
/// [`Tensor::iter`].
#[derive(Debug, Clone)]
pub struct Iter<'a, T> {
    tensor: &'a Tensor,
    /// The index of the next element.
    index: Vec<usize>,
    /// The element offset of `index` from the logical first element.
    offset: isize,
    /// How many elements are left, `index`'s included.
    remaining: usize,
    _type: PhantomData<fn() -> T>,
}

impl<T: NativeDType> Iterator for Iter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.remaining == 0 {
            return None;
        }
        // SAFETY: `remaining > 0`, so `index` is an index of the tensor (each entry below its
        // extent) and `offset` its element offset, which `Tensor::try_new` checked to lie inside
        // the buffer and be aligned for the dtype, and so for `T`; `Tensor::iter` checked that `T`
        // reads the dtype (same size, no larger alignment, no invalid bit patterns) and that the
        // memory is on the CPU.
        let value = unsafe {
            self.tensor
                .data_ptr()
                .cast::<T>()
                .offset(self.offset)
                .read()
        };
        self.remaining -= 1;
        if self.remaining > 0 {
            // Advance the odometer, last dimension fastest. It cannot run off the front: elements
            // remain, so some dimension still has room.
            let shape = self.tensor.shape();
            let strides = self.tensor.strides();
            for dim in (0..shape.len()).rev() {
                if self.index[dim] + 1 < shape[dim] {
                    self.index[dim] += 1;
                    self.offset += strides[dim];
                    break;
                }
                // Back to 0 in this dimension. Only steps between elements of the view are taken,
                // never one past an extent: an extent-1 dimension may have any stride.
                self.offset -= strides[dim] * self.index[dim] as isize;
                self.index[dim] = 0;
            }
        }
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T: NativeDType> ExactSizeIterator for Iter<'_, T> {}

impl<T: NativeDType> FusedIterator for Iter<'_, T> {}

/// Fails unless `found` values fill `shape` exactly.
fn check_element_count(shape: &[usize], found: usize) -> Result<()> {
    let expected = layout::element_count(shape)?;
    if found != expected {
        return Err(Error::ElementCount {
            shape: shape.to_vec(),
            expected,
            found,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_buffer::Buffer;
    use half::{bf16, f16};

    use super::*;
    use crate::DType;

    #[test]
    fn from_vec_checks_the_element_count_and_sets_the_dtype() {
        let tensor = Tensor::from_vec(vec![f16::ONE, f16::ZERO], vec![2]).unwrap();
        assert_eq!(tensor.dtype(), DType::Float16);
        let scalar = Tensor::from_vec(vec![bf16::PI], vec![]).unwrap();
        assert_eq!(scalar.dtype(), DType::BFloat16);
        assert_eq!(scalar.get::<bf16>(&[]), Ok(bf16::PI));
        assert_eq!(
            Tensor::from_vec(vec![1u8; 5], vec![2, 3]).unwrap_err(),
            Error::ElementCount {
                shape: vec![2, 3],
                expected: 6,
                found: 5
            }
        );
        let empty = Tensor::from_vec(Vec::<f64>::new(), vec![3, 0]).unwrap();
        assert_eq!(empty.as_slice::<f64>().unwrap(), &[] as &[f64]);
        assert_eq!(empty.iter::<f64>().unwrap().count(), 0);
        assert!(matches!(
            empty.get::<f64>(&[0, 0]),
            Err(Error::IndexOutOfBounds { dim: 1, .. })
        ));
    }

    #[test]
    fn reads_follow_negative_and_zero_strides() {
        // [[0, 1, 2], [3, 4, 5]] reversed in both dimensions, then a broadcast dimension.
        let buffer = Buffer::from_vec((0..6i16).collect::<Vec<_>>());
        let reversed =
            Tensor::try_new(buffer.clone(), DType::Int16, vec![2, 3], vec![-3, -1], 5).unwrap();
        assert_eq!(
            reversed.iter::<i16>().unwrap().collect::<Vec<_>>(),
            [5, 4, 3, 2, 1, 0]
        );
        assert_eq!(reversed.get::<i16>(&[0, 2]), Ok(3));
        assert!(reversed.as_slice::<i16>().is_err());
        let broadcast = Tensor::try_new(buffer, DType::Int16, vec![2, 2], vec![0, 2], 1).unwrap();
        assert_eq!(
            broadcast.iter::<i16>().unwrap().collect::<Vec<_>>(),
            [1, 3, 1, 3]
        );
        assert_eq!(broadcast.iter::<i16>().unwrap().len(), 4);
    }

    #[test]
    fn arbitrary_strides_of_extent_one_and_empty_tensors_do_not_overflow() {
        let buffer = Buffer::from_vec(vec![10u64, 20]);
        let tensor = Tensor::try_new(
            buffer.clone(),
            DType::UInt64,
            vec![2, 1],
            vec![1, isize::MAX],
            0,
        )
        .unwrap();
        assert_eq!(tensor.iter::<u64>().unwrap().collect::<Vec<_>>(), [10, 20]);
        assert_eq!(tensor.get::<u64>(&[1, 0]), Ok(20));
        assert_eq!(tensor.as_slice::<u64>().unwrap(), &[10, 20]);
        let empty =
            Tensor::try_new(buffer, DType::UInt64, vec![3, 0], vec![isize::MAX, 1], 0).unwrap();
        assert!(matches!(
            empty.get::<u64>(&[2, 0]),
            Err(Error::IndexOutOfBounds { dim: 1, .. })
        ));
        assert_eq!(empty.iter::<u64>().unwrap().next(), None);
    }

    #[test]
    fn bool_tensors_read_as_bytes() {
        let bytes = Buffer::from_vec(vec![0u8, 1, 7]);
        let tensor = Tensor::try_new_row_major(bytes, DType::Bool, vec![3]).unwrap();
        assert_eq!(tensor.as_slice::<u8>().unwrap(), &[0, 1, 7]);
        assert!(matches!(
            tensor.get::<i8>(&[0]),
            Err(Error::DTypeMismatch {
                expected: DType::Bool,
                ..
            })
        ));
    }

    #[test]
    fn bad_indices_are_errors() {
        let tensor = Tensor::from_vec(vec![1u32, 2, 3, 4], vec![2, 2]).unwrap();
        assert_eq!(
            tensor.get::<u32>(&[1]),
            Err(Error::IndexLength {
                expected: 2,
                found: 1
            })
        );
        assert_eq!(
            tensor.get::<u32>(&[0, usize::MAX]),
            Err(Error::IndexOutOfBounds {
                dim: 1,
                index: usize::MAX,
                extent: 2
            })
        );
    }
}
