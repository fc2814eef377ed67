//! Tensors to Arrow arrays: a row-major tensor becomes a primitive or (nested) fixed-size list
//! array whose values buffer is the tensor's memory, zero-copy; bool tensors are packed when a
//! copy is allowed.

use std::sync::Arc;

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{ArrayRef, BooleanArray, FixedSizeListArray, PrimitiveArray, make_array};
use arrow_buffer::{BooleanBuffer, Buffer, ScalarBuffer};
use arrow_data::ArrayDataBuilder;
use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::{DataType, Field};

use crate::error::MAX_LIST_SIZE;
use crate::{Error, Result, arrow_type_of};

/// What [`tensor_to_array`] and [`FixedShapeTensorArray::from_tensor`] may do beyond sharing
/// memory.
///
/// The default allows no copy: the array always shares the tensor's memory.
///
/// [`FixedShapeTensorArray::from_tensor`]: crate::FixedShapeTensorArray::from_tensor
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TensorToArrayOptions {
    /// Accept conversions that copy: a layout the array cannot share (strides that are not
    /// row-major or dense) is copied into a fresh buffer, and a [`DType::Bool`] tensor is packed
    /// into Arrow's bits.
    /// Without it these are refused with [`Error::NotRowMajor`], [`Error::GappedStrides`] or
    /// [`Error::CopyRequired`]. Default `false`.
    pub allow_copy: bool,
}

/// Turns a 1-D tensor into an Arrow array of the matching type: a
/// [`PrimitiveArray`](arrow_array::PrimitiveArray) that shares the tensor's memory when the
/// tensor is row-major.
///
/// The array's values buffer is the tensor's memory: for a tensor imported from DLPack it owns the
/// producer's managed tensor, whose deleter runs when the last Arrow reference drops.
/// A 1-D tensor is row-major when its stride is 1, or when it has at most one element (then any
/// stride is accepted, as numpy exports empty arrays with stride 0).
///
/// With [`allow_copy`](TensorToArrayOptions::allow_copy), a 1-D tensor that is not contiguous (a
/// stride other than 1, zero or negative) is copied into a fresh buffer, and a [`DType::Bool`]
/// tensor becomes a [`BooleanArray`] by packing (any non-zero byte is true).
/// Without it they are refused with [`Error::NotRowMajor`] and [`Error::CopyRequired`].
///
/// Errors: also [`Error::NotOneDimensional`], [`Error::UnsupportedDType`] (bfloat16, complex and
/// float8 have no Arrow type with their layout), and a misaligned buffer (which [`Tensor`]
/// already refuses at construction) is reported, never a panic.
/// A tensor whose memory is not host memory (an import that allowed other devices) is refused
/// with [`DeviceMemory`](arrow_dlpack_tensor::Error::DeviceMemory): anyone holding an Arrow array
/// may read its values.
///
/// ```
/// use arrow_array::{Array, Float64Array};
/// use arrow_dlpack::{Tensor, TensorToArrayOptions, tensor_to_array};
///
/// let tensor = Tensor::from_vec(vec![0.5f64, 1.5], vec![2])?;
/// let array = tensor_to_array(&tensor, TensorToArrayOptions::default())?;
/// let array = array.as_any().downcast_ref::<Float64Array>().unwrap();
/// assert_eq!(array.values().as_ref(), &[0.5, 1.5]);
/// assert_eq!(array.values().as_ptr().cast(), tensor.data_ptr());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn tensor_to_array(tensor: &Tensor, options: TensorToArrayOptions) -> Result<ArrayRef> {
    let allow_copy = options.allow_copy;
    // An Arrow array's values are host memory that anyone holding it may read.
    tensor.require_cpu("make an Arrow array of it")?;
    if tensor.ndim() != 1 {
        return Err(Error::NotOneDimensional {
            shape: tensor.shape().to_vec(),
        });
    }
    if tensor.dtype() == DType::Bool {
        if !allow_copy {
            return Err(Error::CopyRequired {
                reason: "packing a bool tensor into bit-packed Arrow booleans".to_string(),
                options: "TensorToArrayOptions",
            });
        }
        return Ok(Arc::new(pack_bools(tensor)?));
    }
    let data_type = arrow_type_of(tensor.dtype())?;
    let values = row_major_values(tensor, allow_copy)?;
    primitive_array(data_type, values, tensor.len())
}

/// Turns a row-major tensor of 2 or more dimensions into a nested [`FixedSizeListArray`],
/// zero-copy: shape `[n, l1, ..., lk]` gives `n` lists of `l1` lists ... of `lk` values.
/// A tensor that is not row-major is copied into one that is when `options.allow_copy`, and
/// refused with [`Error::NotRowMajor`] otherwise (as [`tensor_to_array`] takes its options).
///
/// The values share the tensor's memory; every level is non-nullable and holds no nulls (the
/// child fields are named `item`, as arrow-rs and PyArrow name them).
/// Dimension names are dropped: a fixed-size list has nowhere to keep them (see
/// [`FixedShapeTensorArray`](crate::FixedShapeTensorArray), which does).
///
/// ```
/// use arrow_array::Array;
/// use arrow_dlpack::Buffer;
/// use arrow_dlpack::{DType, Tensor, TensorToArrayOptions, tensor_to_fixed_size_list};
///
/// let buffer = Buffer::from_vec((0..12i16).collect::<Vec<_>>());
/// let tensor = Tensor::try_new_row_major(buffer, DType::Int16, vec![3, 2, 2])?;
/// let array = tensor_to_fixed_size_list(&tensor, TensorToArrayOptions::default())?;
/// assert_eq!(array.len(), 3);
/// assert_eq!(array.value_length(), 2);
/// assert_eq!(array.data_type().to_string(), "FixedSizeList(2 x non-null FixedSizeList(2 x non-null Int16))");
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn tensor_to_fixed_size_list(
    tensor: &Tensor,
    options: TensorToArrayOptions,
) -> Result<FixedSizeListArray> {
    tensor.require_cpu("make an Arrow array of it")?;
    match tensor.ndim() {
        0 => return Err(Error::ZeroDimensional),
        1 => return Err(Error::TooFewDimensions { ndim: 1, min: 2 }),
        _ => {}
    }
    let data_type = arrow_type_of(tensor.dtype())?;
    let values = row_major_values(tensor, options.allow_copy)?;
    let leaf = primitive_array(data_type, values, tensor.len())?;
    nest(leaf, tensor.shape(), false)
}

/// Wraps `leaf` (holding the product of `shape` elements, row-major) into fixed-size lists, one
/// level per dimension after the first; the result has length `shape[0]`.
pub(crate) fn nest(
    leaf: ArrayRef,
    shape: &[usize],
    nullable_items: bool,
) -> Result<FixedSizeListArray> {
    debug_assert!(shape.len() >= 2);
    let mut values = leaf;
    for dim in (1..shape.len()).rev() {
        let size = list_size(shape[dim])?;
        // The number of lists at this level is the product of the outer extents.
        let len: usize = shape[..dim].iter().product();
        let field = Arc::new(Field::new_list_field(
            values.data_type().clone(),
            nullable_items,
        ));
        let list = FixedSizeListArray::try_new_with_length(field, size, values, None, len)?;
        if dim == 1 {
            return Ok(list);
        }
        values = Arc::new(list);
    }
    unreachable!("the loop returns at dim 1")
}

/// Converts an extent or element count into a fixed-size list size.
pub(crate) fn list_size(size: usize) -> Result<i32> {
    if size > MAX_LIST_SIZE {
        return Err(Error::ListSizeOverflow { size });
    }
    Ok(size as i32)
}

/// The exact bytes of the tensor's elements in row-major order: shared when the layout is
/// row-major, copied when it is not and `allow_copy` is true, refused otherwise.
pub(crate) fn row_major_values(tensor: &Tensor, allow_copy: bool) -> Result<Buffer> {
    if let Some(buffer) = tensor.row_major_buffer() {
        return Ok(buffer);
    }
    if !allow_copy {
        return Err(Error::NotRowMajor {
            shape: tensor.shape().to_vec(),
            strides: tensor.strides().to_vec(),
        });
    }
    Ok(tensor
        .to_contiguous()?
        .row_major_buffer()
        .expect("a contiguous copy is row-major"))
}

/// Builds a primitive array of `len` values of `data_type` over `values`, without copying.
pub(crate) fn primitive_array(data_type: DataType, values: Buffer, len: usize) -> Result<ArrayRef> {
    let width = data_type
        .primitive_width()
        .expect("arrow_type_of returns primitive types");
    // `Tensor` checks alignment when it is built, but arrow-rs panics on a misaligned buffer, so
    // this is checked again rather than trusted.
    let address = values.as_ptr() as usize;
    if !address.is_multiple_of(width) {
        return Err(arrow_dlpack_tensor::Error::Misaligned {
            address,
            alignment: width,
            dtype: crate::dtype_of(&data_type)?,
        }
        .into());
    }
    // The typed constructor wraps the buffer as it is; `ArrayData` would build, validate and
    // convert a generic description first (a fifth of `Array.from_dlpack(numpy)`, perf).
    // `ScalarBuffer::new` panics on a buffer too short, so the length is checked here.
    // Anything else goes through `ArrayData`, whose validation gives the error.
    let generic = |data_type: DataType, values: Buffer| -> Result<ArrayRef> {
        let data = ArrayDataBuilder::new(data_type)
            .len(len)
            .add_buffer(values)
            .build()?;
        Ok(make_array(data))
    };
    let needed = len.checked_mul(width);
    if needed.is_none_or(|needed| values.len() < needed) {
        return generic(data_type, values);
    }
    macro_rules! typed {
        ($arrow_type:ty) => {
            Arc::new(PrimitiveArray::<$arrow_type>::new(
                ScalarBuffer::new(values, 0, len),
                None,
            )) as ArrayRef
        };
    }
    Ok(match data_type {
        DataType::Int8 => typed!(Int8Type),
        DataType::Int16 => typed!(Int16Type),
        DataType::Int32 => typed!(Int32Type),
        DataType::Int64 => typed!(Int64Type),
        DataType::UInt8 => typed!(UInt8Type),
        DataType::UInt16 => typed!(UInt16Type),
        DataType::UInt32 => typed!(UInt32Type),
        DataType::UInt64 => typed!(UInt64Type),
        DataType::Float16 => typed!(Float16Type),
        DataType::Float32 => typed!(Float32Type),
        DataType::Float64 => typed!(Float64Type),
        other => return generic(other, values),
    })
}

/// Packs a 1-D bool tensor (any strides) into a [`BooleanArray`]; non-zero bytes are true.
///
/// Sixty-four bytes become one `u64` of bits ([`pack_sixty_four`]), without a branch, into memory
/// that is not zeroed first.
fn pack_bools(tensor: &Tensor) -> Result<BooleanArray> {
    let bytes = row_major_values(tensor, true)?;
    let bytes = bytes.as_slice();
    let len = bytes.len();
    let mut words = PooledVec::<u64>::try_with_capacity(len.div_ceil(64))?;
    let chunks = bytes.chunks_exact(64);
    let rest = chunks.remainder();
    words.extend(chunks.map(|chunk| pack_sixty_four(chunk).to_le()));
    if !rest.is_empty() {
        let mut padded = [0u8; 64];
        padded[..rest.len()].copy_from_slice(rest);
        words.push(pack_sixty_four(&padded).to_le());
    }
    let bits = BooleanBuffer::new(words.into_buffer(), 0, len);
    Ok(BooleanArray::new(bits, None))
}

/// The bits of 64 bytes (bit `i` set when byte `i` is non-zero).
///
/// On x86-64, SSE2 (always present there) compares sixteen bytes with zero and gathers their
/// high bits in two instructions; elsewhere eight bytes at a time ([`pack_eight`]).
fn pack_sixty_four(chunk: &[u8]) -> u64 {
    assert_eq!(chunk.len(), 64, "pack_sixty_four takes 64 bytes");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128,
        };
        chunk
            .chunks_exact(16)
            .enumerate()
            .fold(0, |word, (group, sixteen)| {
                // SAFETY: `sixteen` is 16 readable bytes; `_mm_loadu_si128` accepts any
                // alignment; SSE2 is part of the x86-64 baseline.
                let zero = unsafe {
                    let bytes = _mm_loadu_si128(sixteen.as_ptr().cast::<__m128i>());
                    _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_setzero_si128()))
                };
                // The mask has one bit per byte (set where the byte is zero) in its low 16 bits.
                word | u64::from(!(zero as u16)) << (16 * group)
            })
    }
    #[cfg(not(target_arch = "x86_64"))]
    chunk
        .chunks_exact(8)
        .enumerate()
        .fold(0, |word, (group, eight)| {
            let eight = u64::from_le_bytes(eight.try_into().expect("chunks of eight bytes"));
            word | pack_eight(eight) << (8 * group)
        })
}

/// The bits of eight bytes read as a little-endian `u64`: bit `i` set when byte `i` is non-zero.
///
/// Adding `0x7f` to the low seven bits of a byte carries into its high bit exactly when those
/// bits are not all zero; or-ing the byte itself covers its own high bit. The eight flags, at bits
/// `8i`, are then gathered into the top byte by one multiplication whose partial products never
/// overlap (bit `8i` times `2^(7(8-i))` lands on bit `56 + i`).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn pack_eight(bytes: u64) -> u64 {
    const LOW_SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let flags = (((bytes & LOW_SEVEN) + LOW_SEVEN) | bytes) & HIGH;
    (flags >> 7).wrapping_mul(GATHER) >> 56
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_eight_sees_every_byte_value_in_every_position() {
        for position in 0..8 {
            for value in 0..=255u8 {
                let mut bytes = [0u8; 8];
                bytes[position] = value;
                let expected = u64::from(value != 0) << position;
                assert_eq!(
                    pack_eight(u64::from_le_bytes(bytes)),
                    expected,
                    "{value} at {position}"
                );
            }
        }
        assert_eq!(pack_eight(u64::MAX), 0xff);
        assert_eq!(pack_eight(0x0180_0001_7f00_ff02), 0b1101_1011);
    }

    #[test]
    fn both_ways_of_packing_sixty_four_bytes_agree_with_the_reference() {
        for seed in 0..200u64 {
            let chunk: Vec<u8> = (0..64u64)
                .map(|i| {
                    let mixed = (seed * 64 + i).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 59;
                    [0u8, 0, 0, 1, 0x80, 0x7f, 0xff, 0x10][(mixed % 8) as usize]
                })
                .collect();
            let expected = chunk
                .iter()
                .enumerate()
                .fold(0u64, |word, (i, &byte)| word | u64::from(byte != 0) << i);
            assert_eq!(pack_sixty_four(&chunk), expected, "seed {seed}");
            let swar = chunk
                .chunks_exact(8)
                .enumerate()
                .fold(0u64, |word, (group, eight)| {
                    word | pack_eight(u64::from_le_bytes(eight.try_into().unwrap())) << (8 * group)
                });
            assert_eq!(swar, expected, "seed {seed}");
        }
    }

    #[test]
    fn pack_bools_matches_a_byte_by_byte_reference() {
        for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 1000] {
            // Non-zero bytes of every kind: 1, high bit only, low bits only, 0xff.
            let bytes: Vec<u8> = (0..len)
                .map(|i| [0u8, 1, 0x80, 0, 0x7f, 0xff, 0, 2][(i * 7 + i / 3) % 8])
                .collect();
            let expected: Vec<bool> = bytes.iter().map(|&byte| byte != 0).collect();
            let forwards =
                Tensor::try_new_row_major(Buffer::from_vec(bytes.clone()), DType::Bool, vec![len])
                    .unwrap();
            let packed = pack_bools(&forwards).unwrap();
            assert_eq!(
                packed.values().iter().collect::<Vec<_>>(),
                expected,
                "len {len}"
            );
            if len > 0 {
                // A reversed view is copied first, then packed.
                let reversed = Tensor::try_new(
                    Buffer::from_vec(bytes),
                    DType::Bool,
                    vec![len],
                    vec![-1],
                    len - 1,
                )
                .unwrap();
                let packed = pack_bools(&reversed).unwrap();
                let mut backwards = expected.clone();
                backwards.reverse();
                assert_eq!(
                    packed.values().iter().collect::<Vec<_>>(),
                    backwards,
                    "len {len}"
                );
            }
        }
    }
}
