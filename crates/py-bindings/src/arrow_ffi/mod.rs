//! The Arrow PyCapsule interface over arrow-rs's C data and C stream interfaces.
//!
//! arrow-pyarrow and pyo3-arrow cannot be used (they pin other pyo3 and arrow versions), and this
//! is all the package needs of them:
//!
//! - import: `__arrow_c_array__()` gives an `arrow_schema` and an `arrow_array` capsule,
//!   `__arrow_c_stream__()` an `arrow_array_stream` capsule; the structs are moved out of the
//!   capsules (leaving them released, as the protocol asks), then checked field by field
//!   against their format's layout, imported zero-copy and validated by `arrow-dlpack-c`;
//! - export: the schema comes from the [`Field`], so that extension metadata travels with it
//!   (`arrow_array::ffi::to_ffi` would drop it), and the capsules own the structs until a consumer
//!   moves them out;
//! - device producers: `arrow_device` (a layer above this file) asks the device protocols
//!   first, gives CPU data back as Arrow chunks and refuses device memory for the operations
//!   that read it;
//! - stream export: a column's chunks are handed out by `arrow-dlpack-c`'s `ArrowArrayStream`
//!   ([`stream_capsule`]), whose private data owns the chunks until the consumer releases it.

use std::ffi::CStr;
use std::ptr::NonNull;

use arrow_array::Array;
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_data::ArrayData;
use arrow_dlpack_c::ArrowCError;
pub(crate) use arrow_dlpack_c::Imported;
use arrow_schema::{Field, FieldRef};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

pub(crate) use fields::{field_of_schema, tensor_type};
pub(crate) use methods::{Methods, Protocol};

use crate::errors;
use crate::type_names::type_name;

mod fields;
mod methods;

pub(crate) const ARROW_SCHEMA: &CStr = c"arrow_schema";
const ARROW_ARRAY: &CStr = c"arrow_array";
const ARROW_ARRAY_STREAM: &CStr = c"arrow_array_stream";

/// Imports the object of `methods` through `__arrow_c_stream__` or `__arrow_c_array__`,
/// zero-copy: the CPU protocols only (`arrow_device::import_readable` asks the device protocols
/// first).
///
/// `__arrow_c_stream__` is preferred when an object has both: it keeps the producer's chunks
/// (nanoarrow, for one, refuses `__arrow_c_array__` for an array of several chunks), and gives
/// one chunk for one array.
pub(crate) fn import_cpu_with(methods: &Methods<'_, '_>) -> PyResult<Imported> {
    errors::no_panic("importing Arrow C data", || import_unguarded(methods))
}

fn import_unguarded(methods: &Methods<'_, '_>) -> PyResult<Imported> {
    let object = methods.object();
    if let Some(capsule) = methods.call0(Protocol::ArrowCStream)? {
        return import_stream(&capsule);
    }
    if let Some(capsules) = methods.call0(Protocol::ArrowCArray)? {
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
    Err(errors::type_error(format!(
        "{} does not support the Arrow PyCapsule interface: it has neither __arrow_c_array__ nor \
         __arrow_c_stream__",
        type_name(object)
    )))
}

/// The pointer of the capsule `object`, checked to be named `name`.
pub(crate) fn capsule_pointer<T>(
    object: &Bound<'_, PyAny>,
    name: &'static CStr,
) -> PyResult<NonNull<T>> {
    let capsule = object.cast::<PyCapsule>().map_err(|_| {
        errors::type_error(format!(
            "expected a PyCapsule named {:?}, found {}",
            name,
            type_name(object)
        ))
    })?;
    // One name comparison: `PyCapsule_GetPointer` checks the name (a capsule never holds NULL),
    // and a mismatch, which it reports as a ValueError, is reported as ours.
    // SAFETY: `capsule` is a live capsule and `name` a static C string.
    let pointer = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), name.as_ptr()) };
    NonNull::new(pointer.cast::<T>()).ok_or_else(|| {
        drop(PyErr::take(object.py()));
        errors::type_error(format!(
            "expected a PyCapsule named {name:?}, found a capsule with another name"
        ))
    })
}

/// Imports an (`arrow_schema`, `arrow_array`) capsule pair.
///
/// The schema is only borrowed (its capsule releases it); the array is moved out of its capsule,
/// so from then on we own it and dropping it, on success when the last Arrow reference dies or
/// on any error before we return, releases it exactly once.
fn import_array(schema: &Bound<'_, PyAny>, array: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let field = checked_field(schema)?;
    let array = capsule_pointer::<FFI_ArrowArray>(array, ARROW_ARRAY)?;
    // SAFETY: an `arrow_array` capsule holds an `ArrowArray`; `from_raw` moves it out and leaves
    // a released struct behind, so the capsule's destructor will not release it again, and the
    // moved struct releases it once when dropped.
    let array = unsafe { FFI_ArrowArray::from_raw(array.as_ptr()) };
    if array.is_released() {
        return Err(errors::value_error(
            "malformed Arrow C data: ArrowArray.release is NULL: the arrow_array capsule has \
             already been consumed",
        ));
    }
    let chunk = arrow_dlpack_c::import_array(array, field.data_type(), "ArrowArray")
        .map_err(errors::arrow_c_error)?;
    Ok(Imported {
        field,
        chunks: vec![chunk],
    })
}

/// The field of an `arrow_schema` capsule, checked; the schema stays in its capsule.
pub(crate) fn checked_field(capsule: &Bound<'_, PyAny>) -> PyResult<FieldRef> {
    let schema = capsule_pointer::<FFI_ArrowSchema>(capsule, ARROW_SCHEMA)?;
    // SAFETY: an `arrow_schema` capsule holds an `ArrowSchema` (Arrow PyCapsule interface), kept
    // alive by the capsule while we read it; `check_schema` reads `release` before anything else
    // and follows no pointer of a released schema.
    unsafe { fields::field_of(capsule.py(), schema.as_ptr(), "ArrowSchema") }
        .map_err(errors::arrow_c_error)
}

/// Imports an `arrow_array_stream` capsule: every chunk, in order, each checked against the
/// stream's schema.
fn import_stream(capsule: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let stream = take_stream(capsule)?;
    let mut stream = arrow_dlpack_c::CheckedStream::with_fields(stream, field_of_schema)
        .map_err(errors::arrow_c_error)?;
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next_array().map_err(errors::arrow_c_error)? {
        chunks.push(chunk);
    }
    Ok(Imported {
        field: stream.field().clone(),
        chunks,
    })
}

/// The `ArrowArrayStream` of an `arrow_array_stream` capsule, moved out of it.
fn take_stream(capsule: &Bound<'_, PyAny>) -> PyResult<FFI_ArrowArrayStream> {
    let stream = capsule_pointer::<FFI_ArrowArrayStream>(capsule, ARROW_ARRAY_STREAM)?;
    // SAFETY: an `arrow_array_stream` capsule holds an `ArrowArrayStream`; `from_raw` moves it
    // out and leaves a released struct behind, and the moved struct releases it once when
    // dropped.
    Ok(unsafe { FFI_ArrowArrayStream::from_raw(stream.as_ptr()) })
}

/// An `ArrowArrayStream` moved out of its capsule, whose schema has been checked and whose every
/// chunk is checked against it before arrow-rs reads it (`arrow_dlpack_c::CheckedStream`, with
/// the fields remembered here).
pub(crate) struct CheckedStream(arrow_dlpack_c::CheckedStream);

impl CheckedStream {
    /// Takes the stream out of an `arrow_array_stream` capsule and reads its schema.
    pub(crate) fn from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<Self> {
        let stream = take_stream(capsule)?;
        arrow_dlpack_c::CheckedStream::with_fields(stream, field_of_schema)
            .map(CheckedStream)
            .map_err(errors::arrow_c_error)
    }

    /// The stream's field: its name, type, nullability and metadata.
    pub(crate) fn field(&self) -> &Field {
        self.0.field()
    }

    /// The next chunk, checked against the stream's type, or `None` once the stream has ended.
    pub(crate) fn next_chunk(&mut self) -> Result<Option<ArrayData>, ArrowCError> {
        self.0.next_chunk()
    }
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

/// An `arrow_array_stream` capsule that hands out `chunks` one by one, zero-copy, described by
/// `field` (extension metadata included).
///
/// The stream owns reference-counted handles to the chunks, so the column may die before the
/// consumer reads the stream; its release callback frees them exactly once.
pub(crate) fn stream_capsule<'py>(
    py: Python<'py>,
    field: &FieldRef,
    chunks: &[arrow_array::ArrayRef],
) -> PyResult<Bound<'py, PyCapsule>> {
    // Fail now, in Python, rather than in the consumer's `get_schema`.
    FFI_ArrowSchema::try_from(field.as_ref()).map_err(errors::arrow_rs_error)?;
    let stream = arrow_dlpack_c::export_stream(field, chunks);
    // The capsule owns the struct until a consumer moves it out (leaving a released copy); if
    // no one does, dropping it releases the stream.
    PyCapsule::new_with_value(py, stream, ARROW_ARRAY_STREAM)
}
