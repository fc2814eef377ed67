//! The Arrow PyCapsule interface over arrow-rs's C data and C stream interfaces.
//!
//! arrow-pyarrow and pyo3-arrow cannot be used (they pin other pyo3 and arrow versions), and this
//! is all the package needs of them:
//!
//! - import: `__arrow_c_array__()` gives an `arrow_schema` and an `arrow_array` capsule,
//!   `__arrow_c_stream__()` an `arrow_array_stream` capsule; the structs are moved out of the
//!   capsules (leaving them released, as the protocol asks) and imported zero-copy;
//! - export: the schema comes from the [`Field`], so that extension metadata travels with it
//!   (`arrow_array::ffi::to_ffi` would drop it), and the capsules own the structs until a consumer
//!   moves them out.

use std::ffi::CStr;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi_and_data_type};
use arrow_array::ffi_stream::{ArrayStreamReader, FFI_ArrowArrayStream};
use arrow_array::{Array, ArrayRef, make_array};
use arrow_schema::{Field, FieldRef};
use pyo3::exceptions::PyAttributeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::dlpack_import::type_name;
use crate::errors;

const ARROW_SCHEMA: &CStr = c"arrow_schema";
const ARROW_ARRAY: &CStr = c"arrow_array";
const ARROW_ARRAY_STREAM: &CStr = c"arrow_array_stream";

/// An Arrow column taken from a Python producer: its field (name, type, nullability, metadata)
/// and its chunks, each sharing the producer's memory.
pub(crate) struct Imported {
    pub(crate) field: FieldRef,
    pub(crate) chunks: Vec<ArrayRef>,
}

/// Imports any object with `__arrow_c_array__` or `__arrow_c_stream__`, zero-copy.
///
/// `__arrow_c_array__` is preferred: it gives one array; a stream gives one chunk per array.
pub(crate) fn import(object: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let py = object.py();
    if let Some(method) = optional_method(object, intern!(py, "__arrow_c_array__"))? {
        let capsules = method.call0()?;
        let capsules = capsules.cast::<PyTuple>().map_err(|_| {
            errors::type_error(format!(
                "{}.__arrow_c_array__() returned {}; expected a (schema, array) tuple of capsules",
                type_name(object),
                type_name(&capsules)
            ))
        })?;
        let (schema, array) = match capsules.len() {
            2 => (capsules.get_item(0)?, capsules.get_item(1)?),
            found => {
                return Err(errors::type_error(format!(
                    "{}.__arrow_c_array__() returned a tuple of {found} items; expected 2",
                    type_name(object)
                )));
            }
        };
        return import_array(&schema, &array);
    }
    if let Some(method) = optional_method(object, intern!(py, "__arrow_c_stream__"))? {
        let capsule = method.call0()?;
        return import_stream(&capsule);
    }
    Err(errors::type_error(format!(
        "{} does not support the Arrow PyCapsule interface: it has neither __arrow_c_array__ nor \
         __arrow_c_stream__",
        type_name(object)
    )))
}

fn optional_method<'py>(
    object: &Bound<'py, PyAny>,
    name: &Bound<'py, pyo3::types::PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match object.getattr(name) {
        Ok(method) => Ok(Some(method)),
        Err(error) if error.is_instance_of::<PyAttributeError>(object.py()) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The capsule `object`, checked to be named `name`.
fn capsule_named<'a, 'py>(
    object: &'a Bound<'py, PyAny>,
    name: &'static CStr,
) -> PyResult<&'a Bound<'py, PyCapsule>> {
    let capsule = object.cast::<PyCapsule>().map_err(|_| {
        errors::type_error(format!(
            "expected a PyCapsule named {:?}, found {}",
            name,
            type_name(object)
        ))
    })?;
    if !capsule.is_valid_checked(Some(name)) {
        return Err(errors::type_error(format!(
            "expected a PyCapsule named {name:?}, found a capsule with another name"
        )));
    }
    Ok(capsule)
}

/// Imports an (`arrow_schema`, `arrow_array`) capsule pair.
fn import_array(schema: &Bound<'_, PyAny>, array: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let schema = capsule_named(schema, ARROW_SCHEMA)?;
    let array = capsule_named(array, ARROW_ARRAY)?;
    let schema = schema
        .pointer_checked(Some(ARROW_SCHEMA))?
        .cast::<FFI_ArrowSchema>();
    // SAFETY: an `arrow_schema` capsule holds a valid `ArrowSchema` (Arrow PyCapsule interface)
    // that the capsule keeps alive while we read it; we only borrow it.
    let field = Field::try_from(unsafe { schema.as_ref() }).map_err(errors::arrow_rs_error)?;
    let array = array
        .pointer_checked(Some(ARROW_ARRAY))?
        .cast::<FFI_ArrowArray>();
    // SAFETY: an `arrow_array` capsule holds a valid `ArrowArray`; `from_raw` moves it out and
    // marks the capsule's copy released, so the capsule's destructor will not release it again.
    let array = unsafe { FFI_ArrowArray::from_raw(array.as_ptr()) };
    if array.is_released() {
        return Err(errors::value_error(
            "the arrow_array capsule has already been consumed",
        ));
    }
    // SAFETY: the array was produced for this schema by the same producer, as the interface
    // requires; arrow-rs validates the buffers it imports.
    let data = unsafe { from_ffi_and_data_type(array, field.data_type().clone()) }
        .map_err(errors::arrow_rs_error)?;
    Ok(Imported {
        field: field.into(),
        chunks: vec![make_array(data)],
    })
}

/// Imports an `arrow_array_stream` capsule: every chunk, in order.
fn import_stream(capsule: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let capsule = capsule_named(capsule, ARROW_ARRAY_STREAM)?;
    let stream = capsule
        .pointer_checked(Some(ARROW_ARRAY_STREAM))?
        .cast::<FFI_ArrowArrayStream>();
    // SAFETY: an `arrow_array_stream` capsule holds a valid `ArrowArrayStream`; `from_raw` moves
    // it out and marks the capsule's copy released.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(stream.as_ptr()) };
    let reader = ArrayStreamReader::try_new(stream).map_err(errors::arrow_rs_error)?;
    let field = arrow_array::ArrayReader::field(&reader).clone();
    let chunks = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(errors::arrow_rs_error)?;
    Ok(Imported { field, chunks })
}

/// An `arrow_schema` capsule describing `field`, extension metadata included.
pub(crate) fn schema_capsule<'py>(
    py: Python<'py>,
    field: &Field,
) -> PyResult<Bound<'py, PyCapsule>> {
    let schema = FFI_ArrowSchema::try_from(field).map_err(errors::arrow_rs_error)?;
    PyCapsule::new_with_value(py, schema, ARROW_SCHEMA)
}

/// An `arrow_array` capsule that shares `array`'s buffers.
pub(crate) fn array_capsule<'py>(
    py: Python<'py>,
    array: &dyn Array,
) -> PyResult<Bound<'py, PyCapsule>> {
    let array = FFI_ArrowArray::new(&array.to_data());
    PyCapsule::new_with_value(py, array, ARROW_ARRAY)
}
