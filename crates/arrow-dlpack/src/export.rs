//! Arrow arrays to tensors: primitive arrays and (nested) fixed-size lists become views that share
//! the array's values buffer; booleans are unpacked when a copy is allowed.

use arrow_array::Array;
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_dlpack_tensor::{DType, Tensor, layout};
use arrow_schema::DataType;

use crate::{Error, Result, dtype_of};

/// What an Arrow-to-tensor conversion may do beyond sharing memory.
///
/// The default allows neither nulls nor copies, which is what [`to_tensor`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToTensorOptions {
    /// Accept nulls at any level; the null slots then hold unspecified values.
    pub allow_nulls: bool,
    /// Accept conversions that copy: unpacking bit-packed booleans into one byte per element.
    /// Without it such arrays are refused with [`Error::CopyRequired`].
    pub allow_copy: bool,
}

/// Views an Arrow array as a read-only [`Tensor`] that shares the array's values buffer.
///
/// - A primitive array (int8..int64, uint8..uint64, float16/32/64) of length `n` gives a 1-D
///   tensor of shape `[n]`; a slice starts at its first element.
/// - A fixed-size list array, nested to any depth, whose leaves are primitive gives shape
///   `[n, l1, l2, ...]`, row-major; the offsets of every level are applied.
///
/// Nulls at any level, the leaf values included, are refused with [`Error::Nulls`] unless
/// `allow_nulls` is true; only the nulls inside the exported range count, so a slice that
/// excludes the nulls is accepted.
/// Every other type is refused with [`Error::UnsupportedType`] naming it; booleans, which need an
/// unpacking copy, are exported by [`to_tensor_with`].
///
/// ```
/// use arrow_array::{Array, Int32Array};
/// use arrow_dlpack::to_tensor;
///
/// let array = Int32Array::from(vec![1, 2, 3, 4]).slice(1, 2);
/// let tensor = to_tensor(&array, false)?;
/// assert_eq!(tensor.shape(), &[2]);
/// assert_eq!(tensor.data_ptr(), array.values().as_ptr().cast());
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn to_tensor(array: &dyn Array, allow_nulls: bool) -> Result<Tensor> {
    to_tensor_with(
        array,
        ToTensorOptions {
            allow_nulls,
            allow_copy: false,
        },
    )
    .map_err(|error| match error {
        // Without the copying entry point in view, a boolean array is simply a type this
        // function cannot export; say so by name, as PyArrow does.
        Error::CopyRequired { .. } => Error::UnsupportedType {
            data_type: leaf_type(array.data_type()).clone(),
            reason: crate::data_type::unsupported_reason(&DataType::Boolean),
        },
        other => other,
    })
}

/// Like [`to_tensor`], with the choice to allow a copy.
///
/// With `allow_copy`, boolean arrays (and fixed-size lists of booleans) are unpacked into a
/// fresh, writable tensor of dtype [`DType::Bool`], one byte (0 or 1) per element; without it they
/// are refused with [`Error::CopyRequired`].
/// Every other supported array is shared, never copied, whatever the options.
///
/// ```
/// use arrow_array::BooleanArray;
/// use arrow_dlpack::{ToTensorOptions, to_tensor_with};
/// use arrow_dlpack_tensor::DType;
///
/// let array = BooleanArray::from(vec![true, false, true]);
/// let options = ToTensorOptions { allow_copy: true, ..Default::default() };
/// let tensor = to_tensor_with(&array, options)?;
/// assert_eq!(tensor.dtype(), DType::Bool);
/// assert_eq!(tensor.row_major_buffer().unwrap().as_slice(), &[1, 0, 1]);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn to_tensor_with(array: &dyn Array, options: ToTensorOptions) -> Result<Tensor> {
    data_to_tensor(&array.to_data(), options)
}

/// Walks `data` and its fixed-size list children down to the leaf values, applying the offset of
/// every level (arrow-rs arrays fold offsets into their children, but `ArrayData` in general
/// does not).
fn data_to_tensor(data: &ArrayData, options: ToTensorOptions) -> Result<Tensor> {
    // The type decides before the nulls: an array of strings with nulls is refused for its type.
    let leaf = leaf_type(data.data_type());
    if leaf == &DataType::Boolean {
        if !options.allow_copy {
            return Err(Error::CopyRequired {
                reason: "unpacking bit-packed booleans into one byte per element".to_string(),
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
fn leaf_type(mut data_type: &DataType) -> &DataType {
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
    let location = if depth == 0 {
        "the array".to_string()
    } else {
        format!("the child values at depth {depth}")
    };
    Err(Error::Nulls {
        null_count,
        location,
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
/// Bits before the first whole byte and after the last are unpacked one by one; every whole byte
/// in between becomes eight output bytes through one table lookup, which runs near `memcpy` speed
/// where a bit-by-bit loop runs at a tenth of it.
fn unpack_bits(bits: &Buffer, offset: usize, count: usize) -> Result<Buffer> {
    let bytes = bits.as_slice();
    let bit_at = |index: usize| (bytes[index / 8] >> (index % 8)) & 1;
    let mut out = filled_bytes(count, 0)?;
    let unpacked = out.as_mut_slice();
    let head = ((8 - offset % 8) % 8).min(count);
    for (i, byte) in unpacked[..head].iter_mut().enumerate() {
        *byte = bit_at(offset + i);
    }
    let first_byte = (offset + head) / 8;
    let whole = (count - head) / 8;
    let middle = &mut unpacked[head..head + whole * 8];
    for (chunk, &packed) in middle
        .chunks_exact_mut(8)
        .zip(&bytes[first_byte..first_byte + whole])
    {
        chunk.copy_from_slice(&SPREAD[usize::from(packed)].to_le_bytes());
    }
    let done = head + whole * 8;
    for (i, byte) in unpacked[done..].iter_mut().enumerate() {
        *byte = bit_at(offset + done + i);
    }
    Ok(Buffer::from_vec(out))
}

/// `len` bytes of `value`, allocated fallibly: a length the allocator refuses is
/// [`OutOfMemory`](arrow_dlpack_tensor::Error::OutOfMemory), not an abort.
fn filled_bytes(len: usize, value: u8) -> Result<Vec<u8>> {
    let mut bytes = arrow_dlpack_tensor::alloc::try_vec_with_capacity(len)?;
    bytes.resize(len, value);
    Ok(bytes)
}

/// An array's validity as a 1-D [`DType::Bool`] tensor of its length: 1 where the slot is valid,
/// 0 where it is null (all ones when the array has no nulls).
///
/// This is a copy (Arrow validity is bit-packed); the tensor is writable. Beside the values tensor
/// of [`to_tensor`] with `allow_nulls`, it lets a consumer keep track of which values are missing.
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
        None => Buffer::from_vec(filled_bytes(len, 1)?),
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
            for count in 0..(packed.len() * 8 - offset).min(200) {
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
        let tensor = data_to_tensor(&data, ToTensorOptions::default()).unwrap();
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
        let error = data_to_tensor(&data, ToTensorOptions::default()).unwrap_err();
        assert!(
            matches!(&error, Error::Nulls { null_count: 1, location } if location == "the child values at depth 2"),
            "{error}"
        );
        let options = ToTensorOptions {
            allow_nulls: true,
            ..Default::default()
        };
        assert_eq!(data_to_tensor(&data, options).unwrap().shape(), &[2, 2, 3]);
    }
}
