//! Checks of an `ArrowArray` against its data type, read through a mirror of its C layout.

use std::ffi::c_void;

use arrow_array::ffi::FFI_ArrowArray;
use arrow_schema::{DataType, FieldRef, UnionFields, UnionMode};

use super::layout::{BufferCount, BufferLayout};
use super::{MAX_DEPTH, Result, children, malformed};

/// The C layout of `struct ArrowArray`.
#[repr(C)]
struct RawArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *const *const c_void,
    children: *const *const RawArray,
    dictionary: *const RawArray,
    release: Option<unsafe extern "C" fn(*mut RawArray)>,
    private_data: *mut c_void,
}

const _: () = {
    assert!(size_of::<RawArray>() == size_of::<FFI_ArrowArray>());
    assert!(align_of::<RawArray>() == align_of::<FFI_ArrowArray>());
    // The field the C Data Interface fixes; a different struct in arrow-rs would move it.
    assert!(std::mem::offset_of!(RawArray, release) == 64);
};

/// Checks an `ArrowArray` and everything it points to against `data_type`, before arrow-rs
/// imports it.
///
/// # Safety
///
/// `array` must point to memory readable as an `ArrowArray`; pointers inside it are followed
/// only after the fields that vouch for them have been checked, as for
/// [`check_schema`](super::check_schema).
///
/// The only buffer memory read is the variadic-sizes buffer of view types (`Utf8View`,
/// `BinaryView`); every other read is of the structs and their `buffers` and `children` pointer
/// arrays, which the C Device Data Interface keeps in host memory. The device import therefore
/// checks device arrays here, for the layouts it accepts (no views).
pub unsafe fn check_array(
    array: *const FFI_ArrowArray,
    data_type: &DataType,
    path: &str,
) -> Result {
    // SAFETY: the caller guarantees `array` is NULL or readable as an `ArrowArray`, whose layout
    // `RawArray` mirrors (asserted above).
    let Some(raw) = (unsafe { array.cast::<RawArray>().as_ref() }) else {
        return Err(malformed(path, "is NULL"));
    };
    // SAFETY: as the caller guarantees for the whole tree.
    unsafe { check_raw_array(raw, data_type, path, 0) }
}

/// # Safety
///
/// As for [`check_array`].
unsafe fn check_raw_array(
    raw: &RawArray,
    data_type: &DataType,
    path: &str,
    depth: usize,
) -> Result {
    if depth > MAX_DEPTH {
        return Err(malformed(
            path,
            format!("is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    if raw.release.is_none() {
        return Err(malformed(
            format!("{path}.release"),
            "is NULL: the array has already been released or moved",
        ));
    }
    if raw.length < 0 {
        return Err(malformed(
            format!("{path}.length"),
            format!("is {}; expected 0 or more", raw.length),
        ));
    }
    if raw.offset < 0 {
        return Err(malformed(
            format!("{path}.offset"),
            format!("is {}; expected 0 or more", raw.offset),
        ));
    }
    if raw.null_count < -1 {
        return Err(malformed(
            format!("{path}.null_count"),
            format!("is {}; expected -1 (unknown) or 0 or more", raw.null_count),
        ));
    }
    if raw.null_count > raw.length {
        return Err(malformed(
            format!("{path}.null_count"),
            format!("is {}, more than length {}", raw.null_count, raw.length),
        ));
    }
    // The slots a buffer covers: the array's own and those its offset skips.
    let slots = raw
        .length
        .checked_add(raw.offset)
        .and_then(|slots| usize::try_from(slots).ok())
        .filter(|&slots| slots < isize::MAX as usize)
        .ok_or_else(|| {
            malformed(
                format!("{path}.offset + {path}.length"),
                format!("overflows ({} + {})", raw.offset, raw.length),
            )
        })?;

    let layout = BufferLayout::of(data_type, path)?;
    let n_buffers = raw.n_buffers;
    let count_ok = match layout.count {
        BufferCount::Exactly(count) => n_buffers == count,
        BufferCount::AtLeast(count) => n_buffers >= count,
    };
    if !count_ok {
        return Err(malformed(
            format!("{path}.n_buffers"),
            format!("is {n_buffers}; expected {} for {data_type}", layout.count),
        ));
    }
    let buffers: &[*const c_void] = if n_buffers == 0 {
        &[]
    } else if raw.buffers.is_null() {
        return Err(malformed(
            format!("{path}.buffers"),
            format!("is NULL but n_buffers is {n_buffers}"),
        ));
    } else {
        // SAFETY: `n_buffers` is positive (checked against the layout) and the non-NULL
        // `buffers` of a live array is readable for that many pointers.
        unsafe { std::slice::from_raw_parts(raw.buffers, n_buffers as usize) }
    };
    for (index, (&pointer, size)) in buffers.iter().zip(layout.sizes()).enumerate() {
        let bytes = size.bytes(slots).ok_or_else(|| {
            malformed(
                format!("{path}.length"),
                format!(
                    "{} at offset {} overflows the size of {path}.buffers[{index}] \
                 for {data_type}",
                    raw.length, raw.offset
                ),
            )
        })?;
        if pointer.is_null() && bytes > 0 && !(size.is_validity() && raw.null_count <= 0) {
            return Err(malformed(
                format!("{path}.buffers[{index}]"),
                format!("is NULL but {data_type} needs {bytes} bytes there"),
            ));
        }
    }
    if layout.has_validity && raw.null_count > 0 && buffers.first().is_some_and(|b| b.is_null()) {
        return Err(malformed(
            format!("{path}.buffers[0]"),
            format!("(validity) is NULL but null_count is {}", raw.null_count),
        ));
    }
    if let BufferCount::AtLeast(fixed) = layout.count
        && n_buffers > fixed
    {
        // Views: the last buffer holds the byte size of each variadic data buffer, and arrow-rs
        // reads it as `int64_t`s.
        let variadic = (n_buffers - fixed) as usize;
        let sizes = buffers[buffers.len() - 1];
        if sizes.is_null() {
            return Err(malformed(
                format!("{path}.buffers[{}]", buffers.len() - 1),
                format!(
                    "(variadic buffer sizes) is NULL but {variadic} data buffers follow the views"
                ),
            ));
        }
        let negative = (0..variadic).find_map(|i| {
            // SAFETY: the sizes buffer of a view array holds one `int64_t` per variadic buffer
            // (C Data Interface); `read_unaligned` spares an alignment precondition.
            let size = unsafe { sizes.cast::<i64>().add(i).read_unaligned() };
            (size < 0).then_some((i, size))
        });
        if let Some((i, size)) = negative {
            return Err(malformed(
                format!("{path}.buffers[{}]", buffers.len() - 1),
                format!("gives variadic buffer {i} the size {size}"),
            ));
        }
    }

    let child_types = ChildTypes::of(data_type);
    if raw.n_children != child_types.len() as i64 {
        return Err(malformed(
            format!("{path}.n_children"),
            format!(
                "is {}; expected {} for {data_type}",
                raw.n_children,
                child_types.len()
            ),
        ));
    }
    // SAFETY: `n_children` equals a list's length, so it is not negative; the caller vouches
    // for the pointers.
    let children = unsafe { children(raw.children, raw.n_children, path) }?;
    for (index, child) in children.iter().enumerate() {
        let child_type = child_types.get(index);
        let child_path = format!("{path}.children[{index}]");
        // SAFETY: a non-NULL child pointer of a live array points to a live array.
        let child = unsafe { &*child.cast::<RawArray>() };
        // SAFETY: as the caller guarantees for the whole tree.
        unsafe { check_raw_array(child, child_type, &child_path, depth + 1) }?;
        if let Some(needed) = needed_child_length(data_type, slots)
            && (child.length as u128) < needed
        {
            return Err(malformed(
                format!("{child_path}.length"),
                format!(
                    "is {}; {data_type} of {slots} slots needs at least {needed}",
                    child.length
                ),
            ));
        }
    }

    match (data_type, raw.dictionary.is_null()) {
        (DataType::Dictionary(_, value_type), false) => {
            // SAFETY: a non-NULL `dictionary` of a live array points to a live array.
            let dictionary = unsafe { &*raw.dictionary };
            // SAFETY: as the caller guarantees for the whole tree.
            unsafe {
                check_raw_array(
                    dictionary,
                    value_type,
                    &format!("{path}.dictionary"),
                    depth + 1,
                )
            }
        }
        (DataType::Dictionary(..), true) => Err(malformed(
            format!("{path}.dictionary"),
            format!("is NULL but the type is {data_type}"),
        )),
        (_, false) => Err(malformed(
            format!("{path}.dictionary"),
            format!("is set but {data_type} is not dictionary-encoded"),
        )),
        (_, true) => Ok(()),
    }
}

/// The data types of an array's children, in order, read from its type without copying them.
enum ChildTypes<'a> {
    Fields(&'a [FieldRef]),
    Union(&'a UnionFields),
    Pair(&'a DataType, &'a DataType),
}

impl<'a> ChildTypes<'a> {
    fn of(data_type: &'a DataType) -> Self {
        match data_type {
            DataType::List(field)
            | DataType::LargeList(field)
            | DataType::ListView(field)
            | DataType::LargeListView(field)
            | DataType::FixedSizeList(field, _)
            | DataType::Map(field, _) => ChildTypes::Fields(std::slice::from_ref(field)),
            DataType::Struct(fields) => ChildTypes::Fields(fields),
            DataType::Union(fields, _) => ChildTypes::Union(fields),
            DataType::RunEndEncoded(run_ends, values) => {
                ChildTypes::Pair(run_ends.data_type(), values.data_type())
            }
            _ => ChildTypes::Fields(&[]),
        }
    }

    fn len(&self) -> usize {
        match self {
            ChildTypes::Fields(fields) => fields.len(),
            ChildTypes::Union(fields) => fields.len(),
            ChildTypes::Pair(..) => 2,
        }
    }

    /// The type of child `index`, which is below [`Self::len`].
    fn get(&self, index: usize) -> &'a DataType {
        match *self {
            ChildTypes::Fields(fields) => fields[index].data_type(),
            ChildTypes::Union(fields) => fields
                .iter()
                .nth(index)
                .map_or(&DataType::Null, |(_, field)| field.data_type()),
            ChildTypes::Pair(first, second) => {
                if index == 0 {
                    first
                } else {
                    second
                }
            }
        }
    }
}

/// The length a child must at least have, where the parent's slots fix it: a fixed-size list's
/// child holds `size` values per slot, a struct's and a sparse union's children one per slot.
fn needed_child_length(data_type: &DataType, slots: usize) -> Option<u128> {
    match data_type {
        DataType::FixedSizeList(_, size) => Some(slots as u128 * (*size).max(0) as u128),
        DataType::Struct(_) | DataType::Union(_, UnionMode::Sparse) => Some(slots as u128),
        _ => None,
    }
}
