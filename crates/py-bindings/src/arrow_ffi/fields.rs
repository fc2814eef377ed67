//! The fields of imported schemas, remembered by what the schemas say.
//!
//! Parsing an `ArrowSchema` into a [`Field`] (format string, name, a metadata `HashMap`) was an
//! eighth of `ad.array(pa_arr)` (perf), and a producer sends the same few schemas over and over.
//! `check_schema` encodes everything arrow-rs reads of a schema into a key as it checks it; a
//! field parsed once is shared (`Arc`) by every later import whose key is equal. Fixed-shape
//! tensor fields also keep their parsed extension type, whose JSON metadata would otherwise be
//! parsed on every import.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_dlpack::FixedShapeTensorType;
use arrow_schema::{Field, FieldRef};
use pyo3::prelude::*;

use crate::cache::Cache;
use arrow_dlpack_c::{self as checks, ArrowCError};

/// Keys longer than this (schemas of thousands of columns) are not remembered.
const MAX_KEY_BYTES: usize = 16 * 1024;

struct Remembered {
    field: FieldRef,
    /// The extension type of an `arrow.fixed_shape_tensor` field, parsed on first use.
    tensor_type: OnceLock<Option<FixedShapeTensorType>>,
}

/// The remembered fields, by the key `check_schema` wrote.
static FIELDS: Cache<Box<[u8]>, Arc<Remembered>, 32> = Cache::new();

thread_local! {
    /// The buffer each schema's key is written into, kept per thread so that a remembered field
    /// costs no allocation (and no lock).
    static KEY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// [`field_of`] for the readers of streams (`arrow_dlpack_c::FieldOfSchema`, a plain function),
/// which call it with the GIL held; attaching is then a counter's increment.
///
/// # Safety
///
/// As for `check_schema`: `schema` is NULL or readable as an `ArrowSchema`.
pub(crate) unsafe fn field_of_schema(
    schema: *const FFI_ArrowSchema,
    path: &str,
) -> Result<FieldRef, ArrowCError> {
    // SAFETY: as the caller guarantees.
    Python::attach(|py| unsafe { field_of(py, schema, path) })
}

/// The field of `schema`, checked first (`check_schema`): a remembered one when an equal schema
/// was imported before.
///
/// # Safety
///
/// As for `check_schema`: `schema` is NULL or readable as an `ArrowSchema`.
pub(crate) unsafe fn field_of(
    py: Python<'_>,
    schema: *const FFI_ArrowSchema,
    path: &str,
) -> Result<FieldRef, ArrowCError> {
    KEY.with_borrow_mut(|key| {
        key.clear();
        // SAFETY: as the caller guarantees.
        unsafe { checks::check_schema(schema, path, key) }?;
        if let Some(entry) = FIELDS.get(py, key.as_slice()) {
            return Ok(entry.field.clone());
        }
        // SAFETY: checked above: live, with valid strings, metadata and child pointers.
        let field = Field::try_from(unsafe { &*schema }).map_err(|source| {
            ArrowCError::UnsupportedFormat {
                field: format!("{path}.format"),
                source,
            }
        })?;
        let field = Arc::new(field);
        if key.len() <= MAX_KEY_BYTES {
            let entry = Arc::new(Remembered {
                field: field.clone(),
                tensor_type: OnceLock::new(),
            });
            return Ok(FIELDS
                .insert(py, key.as_slice().into(), entry)
                .field
                .clone());
        }
        // The buffer of a very wide schema is not kept.
        *key = Vec::new();
        Ok(field)
    })
}

/// The `arrow.fixed_shape_tensor` type of `field`: parsed once for a remembered field, each time
/// for others.
pub(crate) fn tensor_type(
    py: Python<'_>,
    field: &FieldRef,
) -> arrow_dlpack::Result<FixedShapeTensorType> {
    // The entry is found by the `Arc` itself: the list holds its own reference to each field, so
    // a remembered field's address is never another field's while it is remembered.
    let entry = FIELDS.find(py, |_, entry| Arc::ptr_eq(&entry.field, field));
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
