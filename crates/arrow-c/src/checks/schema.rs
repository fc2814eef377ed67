//! Checks of an `ArrowSchema`, read through a mirror of its C layout.

use std::ffi::{CStr, c_char, c_void};

use arrow_array::ffi::FFI_ArrowSchema;

use super::{MAX_DEPTH, Result, children, malformed};

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

const _: () = {
    assert!(size_of::<RawSchema>() == size_of::<FFI_ArrowSchema>());
    assert!(align_of::<RawSchema>() == align_of::<FFI_ArrowSchema>());
    // The field the C Data Interface fixes; a different struct in arrow-rs would move it.
    assert!(std::mem::offset_of!(RawSchema, release) == 56);
};

/// Checks an `ArrowSchema` and everything it points to, before arrow-rs parses it, and appends
/// to `key` an encoding of everything arrow-rs reads of it (each struct's flags, format, name,
/// metadata, children and dictionary), so that two schemas with equal keys describe the same
/// field (a binding may remember parsed fields by it).
///
/// # Safety
///
/// `schema` must be NULL or point to memory readable as an `ArrowSchema` (a capsule's pointer, or
/// a struct a stream's `get_schema` filled). Pointers inside it are followed only after the
/// fields that vouch for them have been checked (`release` first: a released schema is read no
/// further), but the memory they point to must be what they claim, as the interface requires.
pub unsafe fn check_schema(
    schema: *const FFI_ArrowSchema,
    path: &str,
    key: &mut Vec<u8>,
) -> Result {
    // SAFETY: the caller guarantees `schema` is NULL or readable as an `ArrowSchema`, whose layout
    // `RawSchema` mirrors (asserted above).
    let Some(raw) = (unsafe { schema.cast::<RawSchema>().as_ref() }) else {
        return Err(malformed(path, "is NULL"));
    };
    // SAFETY: as the caller guarantees for the whole tree.
    unsafe { check_raw_schema(raw, path, 0, key) }
}

/// # Safety
///
/// As for [`check_schema`].
unsafe fn check_raw_schema(raw: &RawSchema, path: &str, depth: usize, key: &mut Vec<u8>) -> Result {
    if depth > MAX_DEPTH {
        return Err(malformed(
            path,
            format!("is nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    if raw.release.is_none() {
        return Err(malformed(
            format!("{path}.release"),
            "is NULL: the schema has already been released or moved",
        ));
    }
    if raw.format.is_null() {
        return Err(malformed(format!("{path}.format"), "is NULL"));
    }
    // SAFETY: a live schema's `format` is a NUL-terminated string (C Data Interface).
    let format = unsafe { CStr::from_ptr(raw.format) };
    let format = format
        .to_str()
        .map_err(|_| malformed(format!("{path}.format"), "is not valid UTF-8"))?;
    // The key: each part self-delimiting (C strings end with their NUL, which they cannot
    // contain; absent parts and metadata are marked), so that equal keys mean equal schemas.
    key.extend_from_slice(&raw.flags.to_le_bytes());
    key.extend_from_slice(format.as_bytes());
    key.push(0);
    if raw.name.is_null() {
        key.push(0);
    } else {
        // SAFETY: a non-NULL `name` is a NUL-terminated string (C Data Interface).
        let name = unsafe { CStr::from_ptr(raw.name) };
        name.to_str()
            .map_err(|_| malformed(format!("{path}.name"), "is not valid UTF-8"))?;
        key.push(1);
        key.extend_from_slice(name.to_bytes_with_nul());
    }
    if raw.metadata.is_null() {
        key.push(0);
    } else {
        // SAFETY: a non-NULL `metadata` is the interface's encoded key-value list.
        let length = unsafe { check_metadata(raw.metadata.cast(), path) }?;
        key.push(1);
        // SAFETY: `check_metadata` read these `length` bytes: the count and every entry.
        key.extend_from_slice(unsafe { std::slice::from_raw_parts(raw.metadata.cast(), length) });
    }
    if raw.n_children < 0 {
        return Err(malformed(
            format!("{path}.n_children"),
            format!("is {}; expected 0 or more", raw.n_children),
        ));
    }
    if let Some(expected) = schema_children(format, path)?
        && raw.n_children != expected
    {
        return Err(malformed(
            format!("{path}.n_children"),
            format!(
                "is {}; expected {expected} for format {format:?}",
                raw.n_children
            ),
        ));
    }
    key.extend_from_slice(&raw.n_children.to_le_bytes());
    // SAFETY: `n_children` is not negative, and the caller vouches for the pointers.
    for (index, child) in unsafe { children(raw.children, raw.n_children, path) }?
        .iter()
        .enumerate()
    {
        // SAFETY: a non-NULL child pointer of a live schema points to a live schema.
        let child = unsafe { &*child.cast::<RawSchema>() };
        let child_path = format!("{path}.children[{index}]");
        // SAFETY: as the caller guarantees for the whole tree.
        unsafe { check_raw_schema(child, &child_path, depth + 1, key) }?;
    }
    // SAFETY: a non-NULL `dictionary` of a live schema points to a live schema.
    match unsafe { raw.dictionary.as_ref() } {
        None => key.push(0),
        Some(dictionary) => {
            key.push(1);
            let dictionary_path = format!("{path}.dictionary");
            // SAFETY: as the caller guarantees for the whole tree.
            unsafe { check_raw_schema(dictionary, &dictionary_path, depth + 1, key) }?;
        }
    }
    Ok(())
}

/// Checks a schema's encoded metadata: an `int32` count of entries, then for each a key and a
/// value, each an `int32` byte length and that many bytes of UTF-8. Returns its length in bytes.
///
/// # Safety
///
/// `metadata` must point to metadata encoded as the interface prescribes, as long as its lengths
/// say (which is all a consumer can know of it).
unsafe fn check_metadata(metadata: *const u8, path: &str) -> Result<usize> {
    let mut position = 0usize;
    let read_length = |position: &mut usize, what: &str| {
        // SAFETY: the caller guarantees the encoding; each length sits where the previous fields
        // end, and `read_unaligned` spares an alignment precondition.
        let length = unsafe { metadata.add(*position).cast::<i32>().read_unaligned() };
        *position += 4;
        usize::try_from(length).map_err(|_| {
            malformed(
                format!("{path}.metadata"),
                format!("gives {what} the length {length}; expected 0 or more"),
            )
        })
    };
    let entries = read_length(&mut position, "the number of entries")?;
    for entry in 0..entries {
        for part in ["key", "value"] {
            let length = read_length(&mut position, &format!("{part} {entry}"))?;
            // SAFETY: as above: `length` bytes follow the length, by the caller's guarantee.
            let bytes = unsafe { std::slice::from_raw_parts(metadata.add(position), length) };
            std::str::from_utf8(bytes).map_err(|_| {
                malformed(
                    format!("{path}.metadata"),
                    format!("{part} {entry} is not valid UTF-8"),
                )
            })?;
            position += length;
        }
    }
    Ok(position)
}

/// The number of children a format requires, where it fixes one (`None`: any number, as for
/// structs); refuses negative sizes in parameterised formats.
pub(super) fn schema_children(format: &str, path: &str) -> Result<Option<i64>> {
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
        Ok(size) if size < 0 => Err(malformed(
            format!("{path}.format"),
            format!("{format:?} has a negative size {size}"),
        )),
        // An unparsable size is arrow-rs's to report (it does, without panicking).
        _ => Ok(()),
    }
}
