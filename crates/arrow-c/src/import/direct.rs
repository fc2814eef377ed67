//! The import of the layouts that DLPack exchanges, built straight from the checked C struct.
//!
//! arrow-rs's `from_ffi_and_data_type` builds an `ArrayData` (a `Vec` of buffers and one of
//! children per level, each buffer with its own reference to the struct), which is then validated
//! and turned into a typed array: the largest share of `ad.array(pa_arr)` beyond PyArrow's own
//! work (docs/benchmarks.md has the profile). For fixed-width numbers without children, and fixed-size lists of them (nested, as
//! `arrow.fixed_shape_tensor` storage is), the typed array is built here from the struct that
//! `check_array` has checked: one owner holds the moved `ArrowArray` and
//! releases it once when its last buffer dies, and each buffer is a view of the producer's memory
//! that keeps the owner alive.
//!
//! Everything else, and any buffer that is not aligned for its type (arrow-rs copies those),
//! takes the general path.

use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::ffi::FFI_ArrowArray;
use arrow_array::types::{
    ArrowPrimitiveType, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{ArrayRef, FixedSizeListArray, PrimitiveArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use arrow_schema::DataType;

use crate::error::{ArrowCError, invalid_values, unsupported};

/// What [`import`] did with an array.
pub(super) enum Direct {
    /// Imported here.
    Imported(ArrayRef),
    /// Not a layout this path builds: handed back, untouched, for the general path.
    General(FFI_ArrowArray),
}

/// The window of a level that the array covers, in the level's own slots (its `offset` not yet
/// added): all of it for the top level, the slots its parent's window selects for a child.
#[derive(Clone, Copy)]
struct Window {
    start: usize,
    len: usize,
}

/// Imports `array`, which `check_array` has accepted for `data_type`, when its layout is one this
/// path builds; hands it back otherwise.
pub(super) fn import(
    array: FFI_ArrowArray,
    data_type: &DataType,
    path: &str,
) -> Result<Direct, ArrowCError> {
    if !fits(&array, data_type) {
        return Ok(Direct::General(array));
    }
    let window = Window {
        start: 0,
        len: array.len(),
    };
    // The one owner of the struct: every buffer below holds a reference, and the last one to die
    // drops it, which releases the struct exactly once (also when building fails below).
    let owner = Arc::new(array);
    build(&owner, &owner, data_type, window, path).map(Direct::Imported)
}

/// Whether every level of `array` is a layout this path builds, with aligned values.
fn fits(array: &FFI_ArrowArray, data_type: &DataType) -> bool {
    match data_type {
        DataType::FixedSizeList(field, _) => fits(array.child(0), field.data_type()),
        _ => match native_width(data_type) {
            // An empty values buffer may be NULL or dangling; only a real one must be aligned.
            Some(width) => {
                array.len() + array.offset() == 0 || array.buffer(1).addr().is_multiple_of(width)
            }
            None => false,
        },
    }
}

/// The byte width (and alignment) of the fixed-width numbers this path builds.
fn native_width(data_type: &DataType) -> Option<usize> {
    match data_type {
        DataType::Int8 | DataType::UInt8 => Some(1),
        DataType::Int16 | DataType::UInt16 | DataType::Float16 => Some(2),
        DataType::Int32 | DataType::UInt32 | DataType::Float32 => Some(4),
        DataType::Int64 | DataType::UInt64 | DataType::Float64 => Some(8),
        _ => None,
    }
}

/// The array of `level` (the top struct or one of its descendants) over `window`.
fn build(
    owner: &Arc<FFI_ArrowArray>,
    level: &FFI_ArrowArray,
    data_type: &DataType,
    window: Window,
    path: &str,
) -> Result<ArrayRef, ArrowCError> {
    let malformed = |error: arrow_schema::ArrowError| invalid_values(path, error);
    Ok(match data_type {
        DataType::FixedSizeList(field, size) => {
            // The child holds `size` values per slot of this level, offset included (the checks
            // bounded the child's length by it).
            let width = usize::try_from(*size).unwrap_or(0);
            let child = Window {
                start: (level.offset() + window.start) * width,
                len: window.len * width,
            };
            let values = build(owner, level.child(0), field.data_type(), child, path)?;
            let nulls = nulls(owner, level, window);
            Arc::new(
                FixedSizeListArray::try_new_with_length(
                    field.clone(),
                    *size,
                    values,
                    nulls,
                    window.len,
                )
                .map_err(malformed)?,
            )
        }
        DataType::Int8 => primitive::<Int8Type>(owner, level, window),
        DataType::Int16 => primitive::<Int16Type>(owner, level, window),
        DataType::Int32 => primitive::<Int32Type>(owner, level, window),
        DataType::Int64 => primitive::<Int64Type>(owner, level, window),
        DataType::UInt8 => primitive::<UInt8Type>(owner, level, window),
        DataType::UInt16 => primitive::<UInt16Type>(owner, level, window),
        DataType::UInt32 => primitive::<UInt32Type>(owner, level, window),
        DataType::UInt64 => primitive::<UInt64Type>(owner, level, window),
        DataType::Float16 => primitive::<Float16Type>(owner, level, window),
        DataType::Float32 => primitive::<Float32Type>(owner, level, window),
        DataType::Float64 => primitive::<Float64Type>(owner, level, window),
        other => {
            return Err(unsupported(
                path,
                format!("{other} is not a layout of the direct import"),
            ));
        }
    })
}

/// A view of `bytes` bytes of the producer's memory at `pointer`, which keeps `owner` alive; an
/// empty buffer for no bytes (the pointer may then be NULL or dangling).
fn shared(owner: &Arc<FFI_ArrowArray>, pointer: *const u8, bytes: usize) -> Buffer {
    match NonNull::new(pointer.cast_mut()) {
        // SAFETY: `check_array` accepted the struct: a buffer that its length and offset say
        // holds `bytes > 0` bytes is non-NULL, and the producer keeps that memory valid and
        // unchanged until the struct is released, which `owner` (held by the buffer) defers.
        Some(pointer) if bytes > 0 => unsafe {
            Buffer::from_custom_allocation(pointer, bytes, owner.clone())
        },
        _ => Buffer::from(Vec::<u8>::new()),
    }
}

/// The fixed-width numbers of `level` over `window`.
fn primitive<T: ArrowPrimitiveType>(
    owner: &Arc<FFI_ArrowArray>,
    level: &FFI_ArrowArray,
    window: Window,
) -> ArrayRef {
    let width = size_of::<T::Native>();
    let first = level.offset() + window.start;
    // `check_array` bounded `(offset + length) * width`, and a window lies inside its level.
    let values = shared(owner, level.buffer(1), (first + window.len) * width);
    let values = if window.len == 0 {
        ScalarBuffer::from(Vec::<T::Native>::new())
    } else {
        // `fits` checked the alignment, which `ScalarBuffer` asserts.
        ScalarBuffer::new(values, first, window.len)
    };
    Arc::new(PrimitiveArray::<T>::new(
        values,
        nulls(owner, level, window),
    ))
}

/// The validity of `level` over `window`: none without a bitmap or without nulls.
///
/// The producer's `null_count` is trusted for a whole level, as arrow-rs's import trusts it; the
/// nulls of a part of a level (a child under a sliced parent) are counted, as arrow-rs's slicing
/// counts them.
fn nulls(
    owner: &Arc<FFI_ArrowArray>,
    level: &FFI_ArrowArray,
    window: Window,
) -> Option<NullBuffer> {
    let declared = level.null_count_opt();
    let bitmap = level.buffer(0);
    if declared == Some(0) || bitmap.is_null() || window.len == 0 {
        return None;
    }
    let first = level.offset() + window.start;
    let bits = BooleanBuffer::new(
        shared(owner, bitmap, (first + window.len).div_ceil(8)),
        first,
        window.len,
    );
    let whole = window.start == 0 && window.len == level.len();
    let nulls = match declared {
        // SAFETY: `check_array` bounded the count by the length; a wrong count from the producer
        // misreports nulls, as it would through arrow-rs's import, and reads nothing out of
        // bounds (every read of the bitmap is bounded by its length).
        Some(count) if whole => unsafe { NullBuffer::new_unchecked(bits, count) },
        _ => NullBuffer::new(bits),
    };
    (nulls.null_count() > 0).then_some(nulls)
}
