//! The fields of imported schemas, remembered by what the schemas say.
//!
//! Parsing an `ArrowSchema` into a [`Field`] (format string, name, a metadata `HashMap`) was an
//! eighth of `ad.array(pa_arr)` (perf), and a producer sends the same few schemas over and over.
//! `check_schema` encodes everything arrow-rs reads of a schema into a key as it checks it; a
//! field parsed once is shared (`Arc`) by every later import whose key is equal. Fixed-shape
//! tensor fields also keep their parsed extension type, whose JSON metadata would otherwise be
//! parsed on every import.

use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_dlpack::FixedShapeTensorType;
use arrow_schema::{Field, FieldRef};

use crate::arrow_ffi_checks::{self as checks, ArrowCError};

/// At most this many fields are remembered; a new one replaces the oldest.
const MAX_FIELDS: usize = 32;

/// Keys longer than this (schemas of thousands of columns) are not remembered.
const MAX_KEY_BYTES: usize = 16 * 1024;

struct Remembered {
    key: Box<[u8]>,
    field: FieldRef,
    /// The extension type of an `arrow.fixed_shape_tensor` field, parsed on first use.
    tensor_type: OnceLock<Option<FixedShapeTensorType>>,
}

struct Fields {
    entries: Vec<Arc<Remembered>>,
    /// The entry the next new field replaces once the list is full.
    oldest: usize,
    /// The buffer the key of each schema is written into.
    key: Vec<u8>,
}

static FIELDS: Mutex<Fields> = Mutex::new(Fields {
    entries: Vec::new(),
    oldest: 0,
    key: Vec::new(),
});

fn fields() -> std::sync::MutexGuard<'static, Fields> {
    FIELDS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The field of `schema`, checked first (`check_schema`): a remembered one when an equal schema
/// was imported before.
///
/// # Safety
///
/// As for `check_schema`: `schema` is NULL or readable as an `ArrowSchema`.
pub(crate) unsafe fn field_of_schema(
    schema: *const FFI_ArrowSchema,
    path: &str,
) -> Result<FieldRef, ArrowCError> {
    // One lock for the whole lookup (nothing here calls Python), whose buffer the key is written
    // into, so that a remembered field costs no allocation.
    let mut fields = fields();
    let Fields {
        entries,
        oldest,
        key,
    } = &mut *fields;
    key.clear();
    // SAFETY: as the caller guarantees.
    unsafe { checks::check_schema(schema, path, key) }?;
    if let Some(entry) = entries.iter().find(|entry| *entry.key == **key) {
        return Ok(entry.field.clone());
    }
    // SAFETY: checked above: live, with valid strings, metadata and child pointers.
    let field = Field::try_from(unsafe { &*schema })
        .map_err(|error| ArrowCError::Unsupported(format!("{path}.format: {error}")))?;
    let field = Arc::new(field);
    if key.len() <= MAX_KEY_BYTES {
        let entry = Arc::new(Remembered {
            key: key.as_slice().into(),
            field: field.clone(),
            tensor_type: OnceLock::new(),
        });
        if entries.len() < MAX_FIELDS {
            entries.push(entry);
        } else {
            entries[*oldest] = entry;
            *oldest = (*oldest + 1) % MAX_FIELDS;
        }
    } else {
        // The buffer of a very wide schema is not kept.
        *key = Vec::new();
    }
    Ok(field)
}

/// The `arrow.fixed_shape_tensor` type of `field`: parsed once for a remembered field, each time
/// for others.
pub(crate) fn tensor_type(field: &FieldRef) -> arrow_dlpack::Result<FixedShapeTensorType> {
    // The entry is found by the `Arc` itself: the list holds its own reference to each field, so
    // a remembered field's address is never another field's.
    let entry = fields()
        .entries
        .iter()
        .find(|entry| Arc::ptr_eq(&entry.field, field))
        .cloned();
    let parsed = entry.map(|entry| {
        entry
            .tensor_type
            .get_or_init(|| FixedShapeTensorType::try_from_field(field).ok())
            .clone()
    });
    match parsed {
        Some(Some(tensor_type)) => Ok(tensor_type),
        // Not remembered, or not a valid type (parsed again for its error).
        _ => FixedShapeTensorType::try_from_field(field),
    }
}
