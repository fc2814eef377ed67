//! Arrow arrays to tensors: primitive arrays and (nested) fixed-size lists become views that share
//! the array's values buffer; booleans are unpacked when a copy is allowed.

use arrow_array::Array;
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_dlpack_tensor::alloc::PooledVec;
use arrow_dlpack_tensor::{DType, Tensor, layout};
use arrow_schema::DataType;

use crate::{Error, NullLocation, Result, dtype_of};

/// What [`array_to_tensor`] may do beyond sharing memory.
///
/// The default allows neither nulls nor copies: the tensor is always a view of the array.
///
/// ```
/// use arrow_dlpack::ArrayToTensorOptions;
///
/// let options = ArrayToTensorOptions { allow_nulls: true, ..Default::default() };
/// assert!(!options.allow_copy);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArrayToTensorOptions {
    /// Accept nulls at any level; the null slots then hold unspecified values.
    /// Without it, nulls inside the exported range are refused with [`Error::Nulls`].
    /// Default `false`.
    pub allow_nulls: bool,
    /// Accept conversions that copy: unpacking bit-packed booleans into one byte per element.
    /// Without it such arrays are refused with [`Error::CopyRequired`]. Default `false`.
    pub allow_copy: bool,
}

/// Turns an Arrow array into a [`Tensor`]: a read-only view that shares the array's values
/// buffer, or, for booleans with `allow_copy`, an unpacked copy.
///
/// - A primitive array (int8..int64, uint8..uint64, float16/32/64) of length `n` gives a 1-D
///   tensor of shape `[n]`; a slice starts at its first element.
/// - A fixed-size list array, nested to any depth, whose leaves are primitive gives shape
///   `[n, l1, l2, ...]`, row-major; the offsets of every level are applied.
/// - A boolean array (or fixed-size lists of booleans) is unpacked into a fresh, writable tensor
///   of dtype [`DType::Bool`], one byte (0 or 1) per element, when
///   [`allow_copy`](ArrayToTensorOptions::allow_copy) is set; without it, it is refused with
///   [`Error::CopyRequired`].
///   Every other supported array is shared, never copied, whatever the options.
///
/// Nulls at any level, the leaf values included, are refused with [`Error::Nulls`] unless
/// [`allow_nulls`](ArrayToTensorOptions::allow_nulls) is set; only the nulls inside the exported
/// range count, so a slice that excludes the nulls is accepted.
/// Every other type is refused with [`Error::UnsupportedType`] naming it.
///
/// ```
/// use arrow_array::{Array, BooleanArray, Int32Array};
/// use arrow_dlpack::{ArrayToTensorOptions, DType, array_to_tensor};
///
/// let array = Int32Array::from(vec![1, 2, 3, 4]).slice(1, 2);
/// let tensor = array_to_tensor(&array, ArrayToTensorOptions::default())?;
/// assert_eq!(tensor.shape(), &[2]);
/// assert_eq!(tensor.data_ptr(), array.values().as_ptr().cast());
///
/// let booleans = BooleanArray::from(vec![true, false, true]);
/// let options = ArrayToTensorOptions { allow_copy: true, ..Default::default() };
/// let tensor = array_to_tensor(&booleans, options)?;
/// assert_eq!(tensor.dtype(), DType::Bool);
/// assert_eq!(tensor.row_major_buffer().unwrap().as_slice(), &[1, 0, 1]);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn array_to_tensor(array: &dyn Array, options: ArrayToTensorOptions) -> Result<Tensor> {
    data_to_tensor(&array.to_data(), options)
}

/// Walks `data` and its fixed-size list children down to the leaf values, applying the offset of
/// every level (arrow-rs arrays fold offsets into their children, but `ArrayData` in general
/// does not).
fn data_to_tensor(data: &ArrayData, options: ArrayToTensorOptions) -> Result<Tensor> {
    // The type decides before the nulls: an array of strings with nulls is refused for its type.
    let leaf = leaf_type(data.data_type());
    if leaf == &DataType::Boolean {
        if !options.allow_copy {
            return Err(Error::CopyRequired {
                reason: "unpacking bit-packed booleans into one byte per element".to_string(),
                options: "ArrayToTensorOptions",
            });
        }
    } else {
        dtype_of(leaf)?;
    }
    let mut shape = vec![data.len()];
    // `start` and `count` delimit the exported elements of the current level, in the level's
    // logical indices (its own offset not yet applied).
    let mut level: &ArrayData = data;
    let mut start = 0usize;
    let mut count = data.len();
    let mut depth = 0usize;
    loop {
        if !options.allow_nulls {
            check_no_nulls(level, start, count, depth)?;
        }
        match level.data_type() {
            DataType::FixedSizeList(_, size) => {
                // arrow-rs refuses negative sizes when it builds the array.
                let size = usize::try_from(*size).expect("fixed-size list sizes are >= 0");
                shape.push(size);
                let overflow = arrow_dlpack_tensor::Error::Overflow {
                    what: "the child offset of a fixed-size list",
                };
                start = (level.offset() + start)
                    .checked_mul(size)
                    .ok_or(overflow.clone())?;
                count = count.checked_mul(size).ok_or(overflow)?;
                level = &level.child_data()[0];
                depth += 1;
            }
            DataType::Boolean => {
                let buffer = unpack_bits(&level.buffers()[0], level.offset() + start, count)?;
                let tensor = Tensor::try_new_row_major(buffer, DType::Bool, shape)?;
                return Ok(tensor.with_read_only(false));
            }
            leaf => {
                let dtype = dtype_of(leaf)?;
                let strides = layout::row_major_strides(&shape)?;
                let buffer = level.buffers()[0].clone();
                let offset = level.offset() + start;
                return Ok(Tensor::try_new(buffer, dtype, shape, strides, offset)?);
            }
        }
    }
}

/// The innermost non-list type of `data_type`.
pub(crate) fn leaf_type(mut data_type: &DataType) -> &DataType {
    while let DataType::FixedSizeList(field, _) = data_type {
        data_type = field.data_type();
    }
    data_type
}

/// Refuses nulls among `count` elements of `level` from logical index `start`.
fn check_no_nulls(level: &ArrayData, start: usize, count: usize, depth: usize) -> Result<()> {
    let Some(nulls) = level.nulls() else {
        return Ok(());
    };
    if nulls.null_count() == 0 {
        return Ok(());
    }
    // `nulls` is indexed by the level's logical index; count only the exported range.
    let null_count = if start == 0 && count == nulls.len() {
        nulls.null_count()
    } else {
        nulls.slice(start, count).null_count()
    };
    if null_count == 0 {
        return Ok(());
    }
    Err(Error::Nulls {
        null_count,
        location: NullLocation::Array { depth },
    })
}

/// For each byte value, the eight bytes (0 or 1) its bits unpack to, least significant bit first,
/// as one little-endian `u64`.
static SPREAD: [u64; 256] = spread_table();

const fn spread_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut byte = 0;
    while byte < 256 {
        let mut bit = 0;
        while bit < 8 {
            table[byte] |= (((byte >> bit) & 1) as u64) << (8 * bit);
            bit += 1;
        }
        byte += 1;
    }
    table
}

/// Unpacks `count` bits from bit index `offset` of `bits` into one byte (0 or 1) per bit.
///
/// Every group of eight bits becomes eight output bytes: with AVX2 and bits that start a byte,
/// 64 bits at a time through two byte shuffles, a mask and a compare (64 output bytes per two
/// stores); otherwise, and for the groups left over, one table lookup per group, which runs near
/// `memcpy` speed where a bit-by-bit loop runs at a tenth of it. Bits after the last whole group
/// are unpacked one by one.
fn unpack_bits(bits: &Buffer, offset: usize, count: usize) -> Result<Buffer> {
    let bytes = bits.as_slice();
    let bit_at = |index: usize| (bytes[index / 8] >> (index % 8)) & 1;
    // Eight output bytes per group, written once each, into memory that is not zeroed first.
    let whole = count / 8;
    let mut out = PooledVec::<u64>::try_with_capacity(count.div_ceil(8))?;
    let (first, shift) = (offset / 8, offset % 8);
    #[cfg(target_arch = "x86_64")]
    if shift == 0 && whole >= 8 && std::arch::is_x86_feature_detected!("avx2") {
        let groups = &bytes[first..first + whole];
        // SAFETY: AVX2 was detected on this CPU just above.
        let written = unsafe { spread_avx2(groups, out.spare_capacity_mut()) };
        // SAFETY: `spread_avx2` wrote the first `written` values of the spare capacity, and
        // `written <= whole <= capacity`.
        unsafe { out.set_len(written) };
    }
    let start = out.len();
    if shift == 0 {
        out.extend(
            bytes[first + start..first + whole]
                .iter()
                .map(|&packed| SPREAD[usize::from(packed)].to_le()),
        );
    } else {
        // Group `g` is bits `offset + 8g ..= offset + 8g + 7`: the top of byte `first + g` and
        // the bottom of the next, which exists because the group's last bit is inside `bits`.
        out.extend(bytes[first + start..=first + whole].windows(2).map(|pair| {
            let packed = (pair[0] >> shift) | (pair[1] << (8 - shift));
            SPREAD[usize::from(packed)].to_le()
        }));
    }
    let done = whole * 8;
    if done < count {
        let tail = (done..count).fold(0u64, |word, index| {
            word | u64::from(bit_at(offset + index)) << (8 * (index - done))
        });
        out.push(tail.to_le());
    }
    Ok(out.into_buffer().slice_with_length(0, count))
}

/// Unpacks every whole group of eight bytes of `bytes` (each byte eight bits, least significant
/// first) into `out`, 64 output bytes per step, and returns how many `u64` values it wrote.
///
/// # Safety
///
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn spread_avx2(bytes: &[u8], out: &mut [std::mem::MaybeUninit<u64>]) -> usize {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_set1_epi8, _mm256_set1_epi64x,
        _mm256_setr_epi8, _mm256_shuffle_epi8, _mm256_storeu_si256,
    };
    let steps = bytes.len() / 8;
    assert!(out.len() >= 8 * steps, "the output holds every group");
    // Each 128-bit lane of the broadcast holds the eight input bytes; input byte `b` goes to
    // output bytes `8b .. 8b + 8`: bytes 0 to 3 through `low`, 4 to 7 through `high`.
    let low = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let high = _mm256_setr_epi8(
        4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7,
        7, 7,
    );
    // Output byte `i` keeps bit `i % 8` of its input byte, as 0 or 1.
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
    let one = _mm256_set1_epi8(1);
    let bits = |spread: __m256i| {
        _mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select),
            one,
        )
    };
    for (chunk, slots) in bytes
        .chunks_exact(8)
        .zip(out[..8 * steps].chunks_exact_mut(8))
    {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = _mm256_set1_epi64x(i64::from_le_bytes(word));
        // SAFETY: `slots` is 8 values (64 bytes) of `out`; the stores are unaligned, and
        // `MaybeUninit<u64>` slots may take any bytes.
        unsafe {
            _mm256_storeu_si256(
                slots.as_mut_ptr().cast(),
                bits(_mm256_shuffle_epi8(word, low)),
            );
            _mm256_storeu_si256(
                slots.as_mut_ptr().add(4).cast(),
                bits(_mm256_shuffle_epi8(word, high)),
            );
        }
    }
    8 * steps
}

/// `len` bytes of `value`, allocated fallibly: a length the allocator refuses is
/// [`OutOfMemory`](arrow_dlpack_tensor::Error::OutOfMemory), not an abort.
fn filled_bytes(len: usize, value: u8) -> Result<Buffer> {
    let mut bytes = PooledVec::try_with_capacity(len)?;
    bytes.resize(len, value);
    Ok(bytes.into_buffer())
}

/// An array's validity as a 1-D [`DType::Bool`] tensor of its length: 1 where the slot is valid,
/// 0 where it is null (all ones when the array has no nulls).
///
/// This is a copy (Arrow validity is bit-packed); the tensor is writable. Beside the values tensor
/// of [`array_to_tensor`] with `allow_nulls`, it lets a consumer keep track of which values are missing.
/// Only the array's own validity is given, not that of the child values of a fixed-size list.
///
/// ```
/// use arrow_array::Int32Array;
/// use arrow_dlpack::validity_to_tensor;
///
/// let array = Int32Array::from(vec![Some(1), None, Some(3)]);
/// let mask = validity_to_tensor(&array)?;
/// assert_eq!(mask.row_major_buffer().unwrap().as_slice(), &[1, 0, 1]);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
///
/// Fails only when the memory for the mask cannot be allocated.
pub fn validity_to_tensor(array: &dyn Array) -> Result<Tensor> {
    let len = array.len();
    let buffer = match array.logical_nulls() {
        Some(nulls) => {
            let bits = nulls.inner();
            unpack_bits(bits.inner(), bits.offset(), len)?
        }
        None => filled_bytes(len, 1)?,
    };
    Ok(Tensor::try_new_row_major(buffer, DType::Bool, vec![len])?.with_read_only(false))
}

#[cfg(test)]
mod tests {
    use arrow_array::{Array, Int32Array};
    use arrow_buffer::NullBuffer;
    use arrow_schema::Field;
    use std::sync::Arc;

    use super::*;

    /// Every offset and length around byte boundaries agrees with a bit-by-bit reference.
    #[test]
    fn unpack_bits_matches_a_bit_by_bit_reference() {
        let packed: Vec<u8> = (0..40u32).map(|i| (i * 73 + 11) as u8).collect();
        let bits = Buffer::from_vec(packed.clone());
        for offset in 0..20 {
            for count in 0..packed.len() * 8 - offset {
                let expected: Vec<u8> = (offset..offset + count)
                    .map(|bit| (packed[bit / 8] >> (bit % 8)) & 1)
                    .collect();
                assert_eq!(
                    unpack_bits(&bits, offset, count).unwrap().as_slice(),
                    &expected[..],
                    "offset {offset}, count {count}"
                );
            }
        }
    }

    /// `ArrayData` with an offset at every level: 2 lists of 2 lists of 3 values, taken from the
    /// middle of larger parents and children.
    fn nested_with_offsets(leaf_nulls: Option<NullBuffer>) -> ArrayData {
        // Leaf: 40 values 0..40, sliced from 5: logical leaf index i holds 5 + i.
        let leaf = Int32Array::new((0..40).collect(), leaf_nulls)
            .to_data()
            .slice(5, 30);
        let inner_type =
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Int32, true)), 3);
        // Inner lists: 10 lists over the 30 leaf values, sliced from 2 (offset 2).
        let inner = ArrayData::builder(inner_type.clone())
            .len(10)
            .add_child_data(leaf)
            .build()
            .unwrap()
            .slice(2, 8);
        let outer_type = DataType::FixedSizeList(Arc::new(Field::new("item", inner_type, true)), 2);
        // Outer lists: 4 lists over the 8 inner lists, sliced from 1 (offset 1).
        ArrayData::builder(outer_type)
            .len(4)
            .add_child_data(inner)
            .build()
            .unwrap()
            .slice(1, 2)
    }

    #[test]
    fn applies_the_offset_of_every_level() {
        let data = nested_with_offsets(None);
        assert_eq!(data.offset(), 1);
        assert_eq!(data.child_data()[0].offset(), 2);
        assert_eq!(data.child_data()[0].child_data()[0].offset(), 5);
        let tensor = data_to_tensor(&data, ArrayToTensorOptions::default()).unwrap();
        assert_eq!(tensor.shape(), &[2, 2, 3]);
        // Outer list 0 is outer slot 1, i.e. inner lists 2..4 of the sliced inner array, i.e.
        // inner slots 4..6, i.e. leaf values 12..18 of the sliced leaf, which hold 17..23.
        let values = tensor.row_major_buffer().unwrap();
        let expected: Vec<i32> = (17..29).collect();
        assert_eq!(values.typed_data::<i32>(), expected.as_slice());
    }

    #[test]
    fn counts_only_the_nulls_inside_the_exported_range() {
        // Leaf nulls at buffer positions 5 (logical leaf 0, outside the range) and 20 (logical
        // leaf 15, inside: exported leaf range is 12..24).
        let validity: Vec<bool> = (0..40).map(|i| i != 5 && i != 20).collect();
        let data = nested_with_offsets(Some(NullBuffer::from(validity)));
        let error = data_to_tensor(&data, ArrayToTensorOptions::default()).unwrap_err();
        assert!(
            matches!(
                &error,
                Error::Nulls {
                    null_count: 1,
                    location: NullLocation::Array { depth: 2 }
                }
            ),
            "{error}"
        );
        let options = ArrayToTensorOptions {
            allow_nulls: true,
            ..Default::default()
        };
        assert_eq!(data_to_tensor(&data, options).unwrap().shape(), &[2, 2, 3]);
    }
}
