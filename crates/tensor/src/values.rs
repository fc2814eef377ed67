//! A tensor as a whole value: `==` compares what the tensors hold, whatever their layout, and
//! `{}` prints the elements nested by dimension, as numpy and PyTorch print arrays.

use std::fmt;

use crate::{DType, Tensor};

/// The text of the element at an index.
type ElementText<'a> = Box<dyn Fn(&[usize]) -> String + 'a>;

/// How many elements of a dimension `Display` shows before it elides the middle: the first and
/// the last three of a longer one, as numpy does.
const SHOWN: usize = 6;

/// Two tensors are equal when they have the same dtype, shape and device, and the same element
/// values in logical order: strides, offsets, the buffer they view, the read-only flag and the
/// dimension names do not matter. Elements are compared by their bytes, as arrow-rs compares the
/// values of primitive arrays, so a NaN equals a NaN of the same bits and `0.0` differs from
/// `-0.0`. Memory not on the CPU is never read: two such tensors are equal only as the same view
/// of the same memory.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
/// use arrow_dlpack::Tensor;
///
/// let matrix = Tensor::from_vec(vec![1i32, 2, 3, 4], vec![2, 2])?;
/// let transposed_twice = matrix.permuted(&[1, 0])?.to_contiguous()?.permuted(&[1, 0])?;
/// assert_eq!(transposed_twice, matrix); // other strides, same values
/// assert_ne!(matrix.permuted(&[1, 0])?, matrix);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        if self.dtype() != other.dtype()
            || self.shape() != other.shape()
            || self.device() != other.device()
        {
            return false;
        }
        if !self.device().is_cpu() {
            return self.data_ptr() == other.data_ptr() && self.strides() == other.strides();
        }
        let size = self.dtype().size();
        let (left, left_start) = element_bytes(self);
        let (right, right_start) = element_bytes(other);
        let mut right_offsets = ElementOffsets::new(other.shape(), other.strides());
        ElementOffsets::new(self.shape(), self.strides()).all(|left_offset| {
            let Some(right_offset) = right_offsets.next() else {
                return false;
            };
            let at =
                |start: usize, offset: isize| (start as isize + offset * size as isize) as usize;
            let left_at = at(left_start, left_offset);
            let right_at = at(right_start, right_offset);
            left[left_at..left_at + size] == right[right_at..right_at + size]
        })
    }
}

/// The bytes of `tensor`'s buffer and the byte position of its logical first element in them;
/// every element the view addresses lies inside, as construction checked.
fn element_bytes(tensor: &Tensor) -> (&[u8], usize) {
    let bytes = tensor.buffer().as_slice();
    let start = (tensor.data_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
    (bytes, start)
}

/// The element offsets, from the logical first element, of every element of a view in logical
/// row-major order.
struct ElementOffsets<'a> {
    shape: &'a [usize],
    strides: &'a [isize],
    index: Vec<usize>,
    offset: isize,
    remaining: usize,
}

impl<'a> ElementOffsets<'a> {
    fn new(shape: &'a [usize], strides: &'a [isize]) -> ElementOffsets<'a> {
        ElementOffsets {
            shape,
            strides,
            index: vec![0; shape.len()],
            offset: 0,
            remaining: shape.iter().product(),
        }
    }
}

impl Iterator for ElementOffsets<'_> {
    type Item = isize;

    fn next(&mut self) -> Option<isize> {
        if self.remaining == 0 {
            return None;
        }
        let offset = self.offset;
        self.remaining -= 1;
        if self.remaining > 0 {
            for dim in (0..self.shape.len()).rev() {
                if self.index[dim] + 1 < self.shape[dim] {
                    self.index[dim] += 1;
                    self.offset += self.strides[dim];
                    break;
                }
                self.offset -= self.strides[dim] * self.index[dim] as isize;
                self.index[dim] = 0;
            }
        }
        Some(offset)
    }
}

/// The elements nested by dimension, with the dtype: `[[1, 2, 3], [4, 5, 6]], dtype int32`.
/// A dimension of more than six elements shows its first and last three around `...`.
/// Complex and float8 elements are not printed, nor memory that is not on the CPU, which is
/// never read; the shape stands in their place.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; }
/// use arrow_dlpack::Tensor;
///
/// let matrix = Tensor::from_vec(vec![1.5f32, 2.0, 3.0, 4.0, 5.0, 6.0], vec![2, 3])?;
/// assert_eq!(matrix.to_string(), "[[1.5, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype float32");
/// let long = Tensor::from_vec((0..10i64).collect(), vec![10])?;
/// assert_eq!(long.to_string(), "[0, 1, 2, ..., 7, 8, 9], dtype int64");
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let element: Option<ElementText<'_>> = if self.device().is_cpu() {
            match self.dtype() {
                DType::Int8 => Some(self.formatter::<i8>()),
                DType::Int16 => Some(self.formatter::<i16>()),
                DType::Int32 => Some(self.formatter::<i32>()),
                DType::Int64 => Some(self.formatter::<i64>()),
                DType::UInt8 => Some(self.formatter::<u8>()),
                DType::UInt16 => Some(self.formatter::<u16>()),
                DType::UInt32 => Some(self.formatter::<u32>()),
                DType::UInt64 => Some(self.formatter::<u64>()),
                DType::Float16 => Some(self.formatter::<half::f16>()),
                DType::BFloat16 => Some(self.formatter::<half::bf16>()),
                DType::Float32 => Some(self.formatter::<f32>()),
                DType::Float64 => Some(self.formatter::<f64>()),
                DType::Bool => Some(Box::new(|index: &[usize]| {
                    self.get::<u8>(index)
                        .map_or_else(|_| "?".to_string(), |byte| (byte != 0).to_string())
                })),
                _ => None,
            }
        } else {
            None
        };
        match element {
            Some(element) => {
                let mut index = Vec::with_capacity(self.ndim());
                self.write_nested(f, &mut index, &element)?;
                write!(f, ", dtype {}", self.dtype())
            }
            None => write!(
                f,
                "<shape {:?}, not printed>, dtype {}, {} device {}",
                self.shape(),
                self.dtype(),
                self.device().type_name(),
                self.device().device_id
            ),
        }
    }
}

impl Tensor {
    /// The element at an index as text: floats with a decimal point, as `{:?}` prints them.
    fn formatter<T: crate::NativeDType + fmt::Debug>(&self) -> ElementText<'_> {
        Box::new(move |index: &[usize]| {
            self.get::<T>(index)
                .map_or_else(|_| "?".to_string(), |value| format!("{value:?}"))
        })
    }

    /// Writes the elements below `index` (a prefix of an index), nested by dimension.
    fn write_nested(
        &self,
        f: &mut fmt::Formatter<'_>,
        index: &mut Vec<usize>,
        element: &dyn Fn(&[usize]) -> String,
    ) -> fmt::Result {
        let dim = index.len();
        if dim == self.ndim() {
            return f.write_str(&element(index));
        }
        let extent = self.shape()[dim];
        f.write_str("[")?;
        for position in 0..extent {
            if extent > SHOWN && position == SHOWN / 2 {
                f.write_str(", ...")?;
            }
            if extent > SHOWN && position >= SHOWN / 2 && position < extent - SHOWN / 2 {
                continue;
            }
            if position > 0 {
                f.write_str(", ")?;
            }
            index.push(position);
            self.write_nested(f, index, element)?;
            index.pop();
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use arrow_buffer::Buffer;

    use crate::{DType, Device, Tensor};

    #[test]
    fn equal_tensors_hold_the_same_values_whatever_their_strides() {
        let a = Tensor::from_vec((0..6i16).collect(), vec![2, 3]).unwrap();
        let reversed = Tensor::from_vec((0..6i16).rev().collect(), vec![6]).unwrap();
        // A view of the reversed values with a negative stride reads 0, 1, ..., 5.
        let view = Tensor::try_new(
            reversed.buffer().clone(),
            DType::Int16,
            vec![2, 3],
            vec![-3, -1],
            5,
        )
        .unwrap();
        assert_eq!(view, a);
        assert_ne!(
            a,
            Tensor::from_vec((0..6i16).collect(), vec![3, 2]).unwrap()
        );
        assert_ne!(
            a,
            Tensor::from_vec((0..6u16).collect(), vec![2, 3]).unwrap()
        );
        let named = a
            .clone()
            .with_dim_names(Some(vec!["row".into(), "col".into()]))
            .unwrap();
        assert_eq!(named, a);
    }

    #[test]
    fn floats_compare_by_their_bytes() {
        let nan = Tensor::from_vec(vec![f64::NAN], vec![1]).unwrap();
        assert_eq!(nan, Tensor::from_vec(vec![f64::NAN], vec![1]).unwrap());
        assert_ne!(
            Tensor::from_vec(vec![0.0f32], vec![]).unwrap(),
            Tensor::from_vec(vec![-0.0f32], vec![]).unwrap()
        );
    }

    #[test]
    fn device_tensors_are_equal_only_as_the_same_view() {
        let cuda = Device {
            device_type: 2,
            device_id: 0,
        };
        let buffer = Buffer::from_vec(vec![0u8; 8]);
        let on = |strides: Vec<isize>| {
            Tensor::try_new(buffer.clone(), DType::UInt8, vec![2, 2], strides, 0)
                .unwrap()
                .on_device(cuda)
        };
        assert_eq!(on(vec![2, 1]), on(vec![2, 1]));
        assert_ne!(on(vec![2, 1]), on(vec![1, 2]));
        assert_eq!(
            on(vec![2, 1]).to_string(),
            "<shape [2, 2], not printed>, dtype uint8, CUDA device 0"
        );
    }

    #[test]
    fn display_nests_elides_and_names_the_dtype() {
        let scalar = Tensor::from_vec(vec![7u32], vec![]).unwrap();
        assert_eq!(scalar.to_string(), "7, dtype uint32");
        let empty = Tensor::from_vec(Vec::<f64>::new(), vec![2, 0]).unwrap();
        assert_eq!(empty.to_string(), "[[], []], dtype float64");
        let flags = Tensor::try_new_row_major(Buffer::from_vec(vec![0u8, 2]), DType::Bool, vec![2])
            .unwrap();
        assert_eq!(flags.to_string(), "[false, true], dtype bool");
        let big = Tensor::from_vec((0..64i8).collect(), vec![8, 8]).unwrap();
        assert_eq!(
            big.to_string(),
            "[[0, 1, 2, ..., 5, 6, 7], [8, 9, 10, ..., 13, 14, 15], [16, 17, 18, ..., 21, 22, 23], ..., \
             [40, 41, 42, ..., 45, 46, 47], [48, 49, 50, ..., 53, 54, 55], [56, 57, 58, ..., 61, 62, 63]], \
             dtype int8"
        );
    }
}
