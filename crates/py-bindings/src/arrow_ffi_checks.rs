//! Checks of the Arrow C Data Interface structs that a producer hands us, run before arrow-rs
//! reads them.
//!
//! arrow-rs imports `ArrowSchema` and `ArrowArray` trusting them: it dereferences `format`,
//! `buffers` and `children` without looking, indexes buffers by the count its data type expects,
//! and builds the `ArrayData` with validation skipped. A malformed struct therefore panics inside
//! arrow-rs, or reads memory that is not there. This module walks each struct first, field by
//! field and recursively, against the layout its format prescribes
//! (<https://arrow.apache.org/docs/format/CDataInterface.html>), and refuses a mismatch with an
//! error that names the field by its path (`ArrowArray.children[1].n_buffers`).
//!
//! What cannot be checked here is the memory behind the pointers: the interface carries no buffer
//! sizes, so a buffer shorter than its length says is the producer's lie that no consumer can see.
//! What can be checked after arrow-rs has built the `ArrayData` (child lengths, offsets, UTF-8,
//! dictionary keys) is checked by [`validate_imported`].

use std::ffi::{CStr, c_char, c_void};

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_data::ArrayData;
use arrow_schema::{DataType, UnionMode};

/// Nesting deeper than this is refused: it protects the recursion (and arrow-rs's) from a schema
/// whose children point back at their parent.
const MAX_DEPTH: usize = 64;

/// The C layout of `struct ArrowSchema`; arrow-rs keeps its fields private, so they are read
/// through this mirror, whose layout is asserted to match below.
#[repr(C)]
struct RawSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *const *const RawSchema,
    dictionary: *const RawSchema,
    release: Option<unsafe extern "C" fn(*mut RawSchema)>,
    private_data: *mut c_void,
}

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
    assert!(size_of::<RawSchema>() == size_of::<FFI_ArrowSchema>());
    assert!(align_of::<RawSchema>() == align_of::<FFI_ArrowSchema>());
    assert!(size_of::<RawArray>() == size_of::<FFI_ArrowArray>());
    assert!(align_of::<RawArray>() == align_of::<FFI_ArrowArray>());
    // The fields the C Data Interface fixes; a different struct in arrow-rs would move them.
    assert!(std::mem::offset_of!(RawSchema, release) == 56);
    assert!(std::mem::offset_of!(RawArray, release) == 64);
};

/// Why an Arrow C struct was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ArrowCError {
    /// The struct breaks the C Data Interface: a `ValueError` in Python.
    Malformed(String),
    /// The struct is well formed but describes a type this package cannot import: a `TypeError`.
    Unsupported(String),
}

impl std::fmt::Display for ArrowCError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArrowCError::Malformed(message) => write!(f, "malformed Arrow C data: {message}"),
            ArrowCError::Unsupported(message) => write!(f, "unsupported Arrow C data: {message}"),
        }
    }
}

type Result<T = ()> = std::result::Result<T, ArrowCError>;

fn malformed(message: String) -> ArrowCError {
    ArrowCError::Malformed(message)
}

/// Checks an `ArrowSchema` and everything it points to, before arrow-rs parses it.
///
/// # Safety
///
/// `schema` must be NULL or point to memory readable as an `ArrowSchema` (a capsule's pointer, or
/// a struct a stream's `get_schema` filled). Pointers inside it are followed only after the
/// fields that vouch for them have been checked (`release` first: a released schema is read no
/// further), but the memory they point to must be what they claim, as the interface requires.
pub(crate) unsafe fn check_schema(schema: *const FFI_ArrowSchema, path: &str) -> Result {
    // SAFETY: the caller guarantees `schema` is NULL or readable as an `ArrowSchema`, whose layout
    // `RawSchema` mirrors (asserted above).
    let Some(raw) = (unsafe { schema.cast::<RawSchema>().as_ref() }) else {
        return Err(malformed(format!("{path} is NULL")));
    };
    // SAFETY: as the caller guarantees for the whole tree.
    unsafe { check_raw_schema(raw, path, 0) }
}

/// # Safety
///
/// As for [`check_schema`].
unsafe fn check_raw_schema(raw: &RawSchema, path: &str, depth: usize) -> Result {
    if depth > MAX_DEPTH {
        return Err(malformed(format!(
            "{path} is nested more than {MAX_DEPTH} levels deep"
        )));
    }
    if raw.release.is_none() {
        return Err(malformed(format!(
            "{path}.release is NULL: the schema has already been released or moved"
        )));
    }
    if raw.format.is_null() {
        return Err(malformed(format!("{path}.format is NULL")));
    }
    // SAFETY: a live schema's `format` is a NUL-terminated string (C Data Interface).
    let format = unsafe { CStr::from_ptr(raw.format) }
        .to_str()
        .map_err(|_| malformed(format!("{path}.format is not valid UTF-8")))?;
    if !raw.name.is_null() {
        // SAFETY: a non-NULL `name` is a NUL-terminated string (C Data Interface).
        unsafe { CStr::from_ptr(raw.name) }
            .to_str()
            .map_err(|_| malformed(format!("{path}.name is not valid UTF-8")))?;
    }
    if !raw.metadata.is_null() {
        // SAFETY: a non-NULL `metadata` is the interface's encoded key-value list.
        unsafe { check_metadata(raw.metadata.cast(), path) }?;
    }
    if raw.n_children < 0 {
        return Err(malformed(format!(
            "{path}.n_children is {}; expected 0 or more",
            raw.n_children
        )));
    }
    if let Some(expected) = schema_children(format, path)?
        && raw.n_children != expected
    {
        return Err(malformed(format!(
            "{path}.n_children is {}; expected {expected} for format {format:?}",
            raw.n_children
        )));
    }
    // SAFETY: `n_children` is not negative, and the caller vouches for the pointers.
    for (index, child) in unsafe { children(raw.children, raw.n_children, path) }?
        .iter()
        .enumerate()
    {
        // SAFETY: a non-NULL child pointer of a live schema points to a live schema.
        let child = unsafe { &*child.cast::<RawSchema>() };
        // SAFETY: as the caller guarantees for the whole tree.
        unsafe { check_raw_schema(child, &format!("{path}.children[{index}]"), depth + 1) }?;
    }
    // SAFETY: a non-NULL `dictionary` of a live schema points to a live schema.
    if let Some(dictionary) = unsafe { raw.dictionary.as_ref() } {
        // SAFETY: as the caller guarantees for the whole tree.
        unsafe { check_raw_schema(dictionary, &format!("{path}.dictionary"), depth + 1) }?;
    }
    Ok(())
}

/// Checks a schema's encoded metadata: an `int32` count of entries, then for each a key and a
/// value, each an `int32` byte length and that many bytes of UTF-8.
///
/// # Safety
///
/// `metadata` must point to metadata encoded as the interface prescribes, as long as its lengths
/// say (which is all a consumer can know of it).
unsafe fn check_metadata(metadata: *const u8, path: &str) -> Result {
    let mut position = 0usize;
    let read_length = |position: &mut usize, what: &str| {
        // SAFETY: the caller guarantees the encoding; each length sits where the previous fields
        // end, and `read_unaligned` spares an alignment precondition.
        let length = unsafe { metadata.add(*position).cast::<i32>().read_unaligned() };
        *position += 4;
        usize::try_from(length).map_err(|_| {
            malformed(format!(
                "{path}.metadata gives {what} the length {length}; expected 0 or more"
            ))
        })
    };
    let entries = read_length(&mut position, "the number of entries")?;
    for entry in 0..entries {
        for part in ["key", "value"] {
            let length = read_length(&mut position, &format!("{part} {entry}"))?;
            // SAFETY: as above: `length` bytes follow the length, by the caller's guarantee.
            let bytes = unsafe { std::slice::from_raw_parts(metadata.add(position), length) };
            std::str::from_utf8(bytes).map_err(|_| {
                malformed(format!("{path}.metadata {part} {entry} is not valid UTF-8"))
            })?;
            position += length;
        }
    }
    Ok(())
}

/// The number of children a format requires, where it fixes one (`None`: any number, as for
/// structs); refuses negative sizes in parameterised formats.
fn schema_children(format: &str, path: &str) -> Result<Option<i64>> {
    let count = match format {
        "+l" | "+L" | "+vl" | "+vL" | "+m" => 1,
        "+r" => 2,
        "+s" => return Ok(None),
        _ => {
            if let Some(size) = format.strip_prefix("+w:") {
                check_size_parameter(size, format, path)?;
                1
            } else if let Some(size) = format.strip_prefix("w:") {
                check_size_parameter(size, format, path)?;
                0
            } else if let Some(ids) = format
                .strip_prefix("+ud:")
                .or_else(|| format.strip_prefix("+us:"))
            {
                if ids.is_empty() {
                    0
                } else {
                    ids.split(',').count() as i64
                }
            } else {
                0
            }
        }
    };
    Ok(Some(count))
}

/// Refuses a negative size in `+w:N` or `w:N` (arrow-rs would multiply with it).
fn check_size_parameter(size: &str, format: &str, path: &str) -> Result {
    match size.parse::<i32>() {
        Ok(size) if size < 0 => Err(malformed(format!(
            "{path}.format {format:?} has a negative size {size}"
        ))),
        // An unparsable size is arrow-rs's to report (it does, without panicking).
        _ => Ok(()),
    }
}

/// The `n_children` child pointers at `children`, each checked to be non-NULL.
///
/// # Safety
///
/// `count` is not negative; a non-NULL `children` must be readable for `count` pointers.
unsafe fn children<'a, T>(
    children: *const *const T,
    count: i64,
    path: &str,
) -> Result<&'a [*const T]> {
    if count == 0 {
        return Ok(&[]);
    }
    if children.is_null() {
        return Err(malformed(format!(
            "{path}.children is NULL but n_children is {count}"
        )));
    }
    let count = usize::try_from(count).map_err(|_| {
        malformed(format!(
            "{path}.n_children is {count}, more than this platform can address"
        ))
    })?;
    // SAFETY: the caller guarantees `count` readable pointers at the non-NULL `children`.
    let pointers = unsafe { std::slice::from_raw_parts(children, count) };
    if let Some(index) = pointers.iter().position(|child| child.is_null()) {
        return Err(malformed(format!("{path}.children[{index}] is NULL")));
    }
    Ok(pointers)
}

/// Checks an `ArrowArray` and everything it points to against `data_type`, before arrow-rs
/// imports it.
///
/// # Safety
///
/// `array` must point to memory readable as an `ArrowArray`; pointers inside it are followed
/// only after the fields that vouch for them have been checked, as for [`check_schema`].
pub(crate) unsafe fn check_array(
    array: *const FFI_ArrowArray,
    data_type: &DataType,
    path: &str,
) -> Result {
    // SAFETY: the caller guarantees `array` is NULL or readable as an `ArrowArray`, whose layout
    // `RawArray` mirrors (asserted above).
    let Some(raw) = (unsafe { array.cast::<RawArray>().as_ref() }) else {
        return Err(malformed(format!("{path} is NULL")));
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
        return Err(malformed(format!(
            "{path} is nested more than {MAX_DEPTH} levels deep"
        )));
    }
    if raw.release.is_none() {
        return Err(malformed(format!(
            "{path}.release is NULL: the array has already been released or moved"
        )));
    }
    if raw.length < 0 {
        return Err(malformed(format!(
            "{path}.length is {}; expected 0 or more",
            raw.length
        )));
    }
    if raw.offset < 0 {
        return Err(malformed(format!(
            "{path}.offset is {}; expected 0 or more",
            raw.offset
        )));
    }
    if raw.null_count < -1 {
        return Err(malformed(format!(
            "{path}.null_count is {}; expected -1 (unknown) or 0 or more",
            raw.null_count
        )));
    }
    if raw.null_count > raw.length {
        return Err(malformed(format!(
            "{path}.null_count is {}, more than length {}",
            raw.null_count, raw.length
        )));
    }
    // The slots a buffer covers: the array's own and those its offset skips.
    let slots = raw
        .length
        .checked_add(raw.offset)
        .and_then(|slots| usize::try_from(slots).ok())
        .filter(|&slots| slots < isize::MAX as usize)
        .ok_or_else(|| {
            malformed(format!(
                "{path}.offset + {path}.length overflows ({} + {})",
                raw.offset, raw.length
            ))
        })?;

    let layout = BufferLayout::of(data_type, path)?;
    let n_buffers = raw.n_buffers;
    let count_ok = match layout.count {
        BufferCount::Exactly(count) => n_buffers == count,
        BufferCount::AtLeast(count) => n_buffers >= count,
    };
    if !count_ok {
        return Err(malformed(format!(
            "{path}.n_buffers is {n_buffers}; expected {} for {data_type}",
            layout.count
        )));
    }
    let buffers: &[*const c_void] = if n_buffers == 0 {
        &[]
    } else if raw.buffers.is_null() {
        return Err(malformed(format!(
            "{path}.buffers is NULL but n_buffers is {n_buffers}"
        )));
    } else {
        // SAFETY: `n_buffers` is positive (checked against the layout) and the non-NULL
        // `buffers` of a live array is readable for that many pointers.
        unsafe { std::slice::from_raw_parts(raw.buffers, n_buffers as usize) }
    };
    for (index, (&pointer, size)) in buffers.iter().zip(&layout.sizes).enumerate() {
        let bytes = size.bytes(slots).ok_or_else(|| {
            malformed(format!(
                "{path}.length {} at offset {} overflows the size of {path}.buffers[{index}] \
                 for {data_type}",
                raw.length, raw.offset
            ))
        })?;
        if pointer.is_null() && bytes > 0 && !(size.is_validity() && raw.null_count <= 0) {
            return Err(malformed(format!(
                "{path}.buffers[{index}] is NULL but {data_type} needs {bytes} bytes there"
            )));
        }
    }
    if layout.has_validity && raw.null_count > 0 && buffers.first().is_some_and(|b| b.is_null()) {
        return Err(malformed(format!(
            "{path}.buffers[0] (validity) is NULL but null_count is {}",
            raw.null_count
        )));
    }
    if let BufferCount::AtLeast(fixed) = layout.count
        && n_buffers > fixed
    {
        // Views: the last buffer holds the byte size of each variadic data buffer, and arrow-rs
        // reads it as `int64_t`s.
        let variadic = (n_buffers - fixed) as usize;
        let sizes = buffers[buffers.len() - 1];
        if sizes.is_null() {
            return Err(malformed(format!(
                "{path}.buffers[{}] (variadic buffer sizes) is NULL but {variadic} data buffers \
                 follow the views",
                buffers.len() - 1
            )));
        }
        let negative = (0..variadic).find_map(|i| {
            // SAFETY: the sizes buffer of a view array holds one `int64_t` per variadic buffer
            // (C Data Interface); `read_unaligned` spares an alignment precondition.
            let size = unsafe { sizes.cast::<i64>().add(i).read_unaligned() };
            (size < 0).then_some((i, size))
        });
        if let Some((i, size)) = negative {
            return Err(malformed(format!(
                "{path}.buffers[{}] gives variadic buffer {i} the size {size}",
                buffers.len() - 1
            )));
        }
    }

    let child_types = child_types(data_type);
    if raw.n_children != child_types.len() as i64 {
        return Err(malformed(format!(
            "{path}.n_children is {}; expected {} for {data_type}",
            raw.n_children,
            child_types.len()
        )));
    }
    // SAFETY: `n_children` equals a list's length, so it is not negative; the caller vouches
    // for the pointers.
    let children = unsafe { children(raw.children, raw.n_children, path) }?;
    for (index, (child, child_type)) in children.iter().zip(&child_types).enumerate() {
        let child_path = format!("{path}.children[{index}]");
        // SAFETY: a non-NULL child pointer of a live array points to a live array.
        let child = unsafe { &*child.cast::<RawArray>() };
        // SAFETY: as the caller guarantees for the whole tree.
        unsafe { check_raw_array(child, child_type, &child_path, depth + 1) }?;
        if let Some(needed) = needed_child_length(data_type, slots)
            && (child.length as u128) < needed
        {
            return Err(malformed(format!(
                "{child_path}.length is {}; {data_type} of {slots} slots needs at least {needed}",
                child.length
            )));
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
        (DataType::Dictionary(..), true) => Err(malformed(format!(
            "{path}.dictionary is NULL but the type is {data_type}"
        ))),
        (_, false) => Err(malformed(format!(
            "{path}.dictionary is set but {data_type} is not dictionary-encoded"
        ))),
        (_, true) => Ok(()),
    }
}

/// How many buffers a layout has.
#[derive(Debug, Clone, Copy)]
enum BufferCount {
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
enum BufferSize {
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
    fn bytes(self, slots: usize) -> Option<usize> {
        let bytes = match self {
            BufferSize::Validity | BufferSize::Bits => slots.div_ceil(8),
            BufferSize::PerSlot { width, extra } => slots.checked_add(extra)?.checked_mul(width)?,
            BufferSize::Unknown => 0,
        };
        (bytes <= isize::MAX as usize).then_some(bytes)
    }

    fn is_validity(self) -> bool {
        matches!(self, BufferSize::Validity)
    }
}

/// The buffers of one data type, in C Data Interface order.
struct BufferLayout {
    count: BufferCount,
    has_validity: bool,
    sizes: Vec<BufferSize>,
}

impl BufferLayout {
    fn of(data_type: &DataType, path: &str) -> Result<BufferLayout> {
        use BufferSize::{Bits, PerSlot, Unknown, Validity};
        let fixed = |width: usize| PerSlot { width, extra: 0 };
        let offsets = |width: usize| PerSlot { width, extra: 1 };
        let (count, has_validity, sizes) = match data_type {
            DataType::Null => (BufferCount::Exactly(0), false, vec![]),
            DataType::Boolean => (BufferCount::Exactly(2), true, vec![Validity, Bits]),
            DataType::FixedSizeBinary(width) => (
                BufferCount::Exactly(2),
                true,
                vec![Validity, fixed(usize::try_from(*width).unwrap_or(0))],
            ),
            DataType::Utf8 | DataType::Binary => (
                BufferCount::Exactly(3),
                true,
                vec![Validity, offsets(4), Unknown],
            ),
            DataType::LargeUtf8 | DataType::LargeBinary => (
                BufferCount::Exactly(3),
                true,
                vec![Validity, offsets(8), Unknown],
            ),
            DataType::Utf8View | DataType::BinaryView => {
                (BufferCount::AtLeast(3), true, vec![Validity, fixed(16)])
            }
            DataType::List(_) | DataType::Map(..) => {
                (BufferCount::Exactly(2), true, vec![Validity, offsets(4)])
            }
            DataType::LargeList(_) => (BufferCount::Exactly(2), true, vec![Validity, offsets(8)]),
            DataType::ListView(_) => (
                BufferCount::Exactly(3),
                true,
                vec![Validity, fixed(4), fixed(4)],
            ),
            DataType::LargeListView(_) => (
                BufferCount::Exactly(3),
                true,
                vec![Validity, fixed(8), fixed(8)],
            ),
            DataType::FixedSizeList(..) | DataType::Struct(_) => {
                (BufferCount::Exactly(1), true, vec![Validity])
            }
            DataType::Union(_, UnionMode::Sparse) => {
                (BufferCount::Exactly(1), false, vec![fixed(1)])
            }
            DataType::Union(_, UnionMode::Dense) => {
                (BufferCount::Exactly(2), false, vec![fixed(1), fixed(4)])
            }
            DataType::Dictionary(key, _) => match key.primitive_width() {
                Some(width) if key.is_dictionary_key_type() => {
                    (BufferCount::Exactly(2), true, vec![Validity, fixed(width)])
                }
                _ => {
                    return Err(ArrowCError::Unsupported(format!(
                        "{path}: dictionary key type {key} is not an integer type"
                    )));
                }
            },
            DataType::RunEndEncoded(..) => (BufferCount::Exactly(0), false, vec![]),
            other => match other.primitive_width() {
                Some(width) => (BufferCount::Exactly(2), true, vec![Validity, fixed(width)]),
                None => {
                    return Err(ArrowCError::Unsupported(format!(
                        "{path}: arrays of type {other} cannot be imported"
                    )));
                }
            },
        };
        Ok(BufferLayout {
            count,
            has_validity,
            sizes,
        })
    }
}

/// The data types of an array's children, in order.
fn child_types(data_type: &DataType) -> Vec<DataType> {
    match data_type {
        DataType::List(field)
        | DataType::LargeList(field)
        | DataType::ListView(field)
        | DataType::LargeListView(field)
        | DataType::FixedSizeList(field, _)
        | DataType::Map(field, _) => vec![field.data_type().clone()],
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type().clone()).collect(),
        DataType::Union(fields, _) => fields.iter().map(|(_, f)| f.data_type().clone()).collect(),
        DataType::RunEndEncoded(run_ends, values) => {
            vec![run_ends.data_type().clone(), values.data_type().clone()]
        }
        _ => Vec::new(),
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

/// Validates what arrow-rs built from checked structs, where its layout makes values matter:
/// offsets, UTF-8, views, dictionary keys, union type ids and run ends are checked in full, while
/// fixed-width data (the DLPack case) costs nothing per element.
pub(crate) fn validate_imported(data: &ArrayData, path: &str) -> Result {
    let failed = |error: arrow_schema::ArrowError| malformed(format!("{path}: {error}"));
    data.validate().map_err(failed)?;
    let values_matter = matches!(
        data.data_type(),
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::Utf8View
            | DataType::BinaryView
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
            | DataType::Map(..)
            | DataType::Union(..)
            | DataType::Dictionary(..)
            | DataType::RunEndEncoded(..)
    );
    if values_matter {
        data.validate_values().map_err(failed)?;
    }
    for (index, child) in data.child_data().iter().enumerate() {
        validate_imported(child, &format!("{path}.children[{index}]"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int32Array, StringArray};
    use arrow_schema::Field;

    use super::*;

    #[test]
    fn a_well_formed_export_of_arrow_rs_passes_every_check() {
        let array = StringArray::from(vec![Some("a"), None, Some("ccc")]);
        let schema = FFI_ArrowSchema::try_from(array.data_type()).unwrap();
        let ffi = FFI_ArrowArray::new(&array.to_data());
        // SAFETY: both structs are live exports of arrow-rs.
        unsafe { check_schema(&schema, "ArrowSchema") }.unwrap();
        // SAFETY: as above.
        unsafe { check_array(&ffi, array.data_type(), "ArrowArray") }.unwrap();
    }

    #[test]
    fn a_released_schema_is_refused_before_anything_else_is_read() {
        let mut schema = FFI_ArrowSchema::try_from(&DataType::Int32).unwrap();
        let release = schema.release();
        assert!(release.is_some());
        // SAFETY: `schema` is a live schema made above; releasing it is allowed once.
        unsafe { release.unwrap()(&mut schema) };
        // SAFETY: the struct is readable; released, so `check_schema` must read no further.
        let error = unsafe { check_schema(&schema, "ArrowSchema") }.unwrap_err();
        assert_eq!(
            error.to_string(),
            "malformed Arrow C data: ArrowSchema.release is NULL: the schema has already been \
             released or moved"
        );
    }

    #[test]
    fn wrong_buffer_and_child_counts_name_the_field() {
        let int32 = Int32Array::from(vec![1, 2, 3]);
        let ffi = FFI_ArrowArray::new(&int32.to_data());
        let struct_type = DataType::Struct(vec![Field::new("a", DataType::Int32, true)].into());
        // SAFETY: a live export of arrow-rs, checked against another type on purpose.
        let error = unsafe { check_array(&ffi, &struct_type, "ArrowArray") }.unwrap_err();
        assert_eq!(
            error.to_string(),
            "malformed Arrow C data: ArrowArray.n_buffers is 2; expected 1 for Struct(\"a\": \
             Int32)"
        );
        let list_type =
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Int32, true)), 2);
        let fsl = FFI_ArrowArray::new(
            &arrow_array::FixedSizeListArray::new(
                Arc::new(Field::new("item", DataType::Int32, true)),
                2,
                Arc::new(Int32Array::from(vec![1, 2, 3, 4])),
                None,
            )
            .to_data(),
        );
        // SAFETY: a live export of arrow-rs.
        unsafe { check_array(&fsl, &list_type, "ArrowArray") }.unwrap();
    }

    #[test]
    fn negative_fixed_size_list_sizes_are_refused() {
        assert_eq!(
            schema_children("+w:-1", "ArrowSchema").unwrap_err(),
            ArrowCError::Malformed(
                "ArrowSchema.format \"+w:-1\" has a negative size -1".to_string()
            )
        );
        assert_eq!(schema_children("+ud:0,1,5", "S").unwrap(), Some(3));
        assert_eq!(schema_children("+s", "S").unwrap(), None);
        assert_eq!(schema_children("i", "S").unwrap(), Some(0));
    }
}
