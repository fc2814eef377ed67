//! The buffers of each data type in C Data Interface order, and the bytes each must hold.

use arrow_schema::{DataType, UnionMode};

use super::Result;
use crate::error::unsupported;

/// How many buffers a layout has.
#[derive(Debug, Clone, Copy)]
pub(super) enum BufferCount {
    Exactly(i64),
    AtLeast(i64),
}

impl std::fmt::Display for BufferCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BufferCount::Exactly(count) => write!(f, "{count}"),
            BufferCount::AtLeast(count) => write!(f, "at least {count}"),
        }
    }
}

/// The size of one buffer, in terms of the slots (`offset + length`) it covers.
#[derive(Debug, Clone, Copy)]
pub(super) enum BufferSize {
    /// The validity bitmap: one bit per slot, optional when there are no nulls.
    Validity,
    /// Bit-packed values: one bit per slot.
    Bits,
    /// `width` bytes per slot, plus `extra` slots (offsets buffers hold `slots + 1` entries).
    PerSlot { width: usize, extra: usize },
    /// A size the interface does not say (data behind offsets, variadic buffers).
    Unknown,
}

impl BufferSize {
    pub(super) fn bytes(self, slots: usize) -> Option<usize> {
        let bytes = match self {
            BufferSize::Validity | BufferSize::Bits => slots.div_ceil(8),
            BufferSize::PerSlot { width, extra } => slots.checked_add(extra)?.checked_mul(width)?,
            BufferSize::Unknown => 0,
        };
        // Consumers index buffers in bits as well as bytes (arrow-rs computes `length × bit
        // width` for fixed-width values), so the size in bits must not wrap either: a length
        // of 2^58 + 1 slots of 64 bits passes the byte bound but wraps to 64 bits.
        let bits = bytes.checked_mul(8)?;
        (bits <= isize::MAX as usize).then_some(bytes)
    }

    pub(super) fn is_validity(self) -> bool {
        matches!(self, BufferSize::Validity)
    }
}

/// The buffers of one data type, in C Data Interface order.
pub(super) struct BufferLayout {
    pub(super) count: BufferCount,
    pub(super) has_validity: bool,
    sizes: Sizes,
}

/// The sizes of a layout's buffers (at most three), without a heap allocation: the checks run
/// on every import.
#[derive(Clone, Copy)]
struct Sizes {
    all: [BufferSize; 3],
    len: usize,
}

fn list<const N: usize>(items: [BufferSize; N]) -> Sizes {
    let mut all = [BufferSize::Unknown; 3];
    all[..N].copy_from_slice(&items);
    Sizes { all, len: N }
}

impl BufferLayout {
    pub(super) fn of(data_type: &DataType, path: &str) -> Result<BufferLayout> {
        use BufferSize::{Bits, PerSlot, Unknown, Validity};
        let fixed = |width: usize| PerSlot { width, extra: 0 };
        let offsets = |width: usize| PerSlot { width, extra: 1 };
        let (count, has_validity, sizes) = match data_type {
            DataType::Null => (BufferCount::Exactly(0), false, list([])),
            DataType::Boolean => (BufferCount::Exactly(2), true, list([Validity, Bits])),
            DataType::FixedSizeBinary(width) => (
                BufferCount::Exactly(2),
                true,
                list([Validity, fixed(usize::try_from(*width).unwrap_or(0))]),
            ),
            DataType::Utf8 | DataType::Binary => (
                BufferCount::Exactly(3),
                true,
                list([Validity, offsets(4), Unknown]),
            ),
            DataType::LargeUtf8 | DataType::LargeBinary => (
                BufferCount::Exactly(3),
                true,
                list([Validity, offsets(8), Unknown]),
            ),
            DataType::Utf8View | DataType::BinaryView => {
                (BufferCount::AtLeast(3), true, list([Validity, fixed(16)]))
            }
            DataType::List(_) | DataType::Map(..) => {
                (BufferCount::Exactly(2), true, list([Validity, offsets(4)]))
            }
            DataType::LargeList(_) => (BufferCount::Exactly(2), true, list([Validity, offsets(8)])),
            DataType::ListView(_) => (
                BufferCount::Exactly(3),
                true,
                list([Validity, fixed(4), fixed(4)]),
            ),
            DataType::LargeListView(_) => (
                BufferCount::Exactly(3),
                true,
                list([Validity, fixed(8), fixed(8)]),
            ),
            DataType::FixedSizeList(..) | DataType::Struct(_) => {
                (BufferCount::Exactly(1), true, list([Validity]))
            }
            DataType::Union(_, UnionMode::Sparse) => {
                (BufferCount::Exactly(1), false, list([fixed(1)]))
            }
            DataType::Union(_, UnionMode::Dense) => {
                (BufferCount::Exactly(2), false, list([fixed(1), fixed(4)]))
            }
            DataType::Dictionary(key, _) => match key.primitive_width() {
                Some(width) if key.is_dictionary_key_type() => (
                    BufferCount::Exactly(2),
                    true,
                    list([Validity, fixed(width)]),
                ),
                _ => {
                    return Err(unsupported(
                        path,
                        format!("dictionary key type {key} is not an integer type"),
                    ));
                }
            },
            DataType::RunEndEncoded(..) => (BufferCount::Exactly(0), false, list([])),
            other => match other.primitive_width() {
                Some(width) => (
                    BufferCount::Exactly(2),
                    true,
                    list([Validity, fixed(width)]),
                ),
                None => {
                    return Err(unsupported(
                        path,
                        format!("arrays of type {other} cannot be imported"),
                    ));
                }
            },
        };
        Ok(BufferLayout {
            count,
            has_validity,
            sizes,
        })
    }

    /// The size of each buffer the layout fixes, in order (view types have more, of sizes the
    /// layout does not fix).
    pub(super) fn sizes(&self) -> &[BufferSize] {
        &self.sizes.all[..self.sizes.len]
    }
}
