//! The Arrow PyCapsule interface over arrow-rs's C data and C stream interfaces.
//!
//! arrow-pyarrow and pyo3-arrow cannot be used (they pin other pyo3 and arrow versions), and this
//! is all the package needs of them:
//!
//! - import: `__arrow_c_array__()` gives an `arrow_schema` and an `arrow_array` capsule,
//!   `__arrow_c_stream__()` an `arrow_array_stream` capsule; the structs are moved out of the
//!   capsules (leaving them released, as the protocol asks), checked field by field against
//!   their format's layout (`arrow_ffi_checks`), imported zero-copy and validated;
//! - export: the schema comes from the [`Field`], so that extension metadata travels with it
//!   (`arrow_array::ffi::to_ffi` would drop it), and the capsules own the structs until a consumer
//!   moves them out;
//! - device producers: `arrow_device` (a layer above this file) asks the device protocols
//!   first, gives CPU data back as Arrow chunks and refuses device memory for the operations
//!   that read it;
//! - stream export: arrow-rs 60 exports only streams of record batches, so a column's chunks are
//!   handed out by a small `ArrowArrayStream` of our own ([`stream_capsule`]), whose private data
//!   owns the chunks until the consumer releases the stream.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr::NonNull;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi_and_data_type};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{Array, ArrayRef, make_array};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType, Field, FieldRef};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};

pub(crate) use fields::{field_of_schema, tensor_type};
pub(crate) use methods::{Methods, Protocol};

use crate::arrow_ffi_checks as checks;
use crate::errors;
use crate::type_names::type_name;

mod direct;
mod fields;
mod methods;

pub(crate) const ARROW_SCHEMA: &CStr = c"arrow_schema";
const ARROW_ARRAY: &CStr = c"arrow_array";
const ARROW_ARRAY_STREAM: &CStr = c"arrow_array_stream";

/// An Arrow column taken from a Python producer: its field (name, type, nullability, metadata)
/// and its chunks, each sharing the producer's memory.
pub(crate) struct Imported {
    pub(crate) field: FieldRef,
    pub(crate) chunks: Vec<ArrayRef>,
}

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
    let chunk = import_checked_array(array, field.data_type(), "ArrowArray")
        .map_err(errors::arrow_c_error)?;
    Ok(Imported {
        field,
        chunks: vec![chunk],
    })
}

/// The field of an `arrow_schema` capsule, checked; the schema stays in its capsule.
pub(crate) fn checked_field(schema: &Bound<'_, PyAny>) -> PyResult<FieldRef> {
    let schema = capsule_pointer::<FFI_ArrowSchema>(schema, ARROW_SCHEMA)?;
    // SAFETY: an `arrow_schema` capsule holds an `ArrowSchema` (Arrow PyCapsule interface), kept
    // alive by the capsule while we read it; `check_schema` reads `release` before anything else
    // and follows no pointer of a released schema.
    unsafe { fields::field_of_schema(schema.as_ptr(), "ArrowSchema") }
        .map_err(errors::arrow_c_error)
}

/// Imports an array we own, after checking it against `data_type`; the array is released
/// (dropped) before an error is returned.
pub(crate) fn import_checked(
    array: FFI_ArrowArray,
    data_type: &DataType,
    path: &str,
) -> Result<ArrayData, checks::ArrowCError> {
    // SAFETY: `array` is a live struct we own; `check_array` follows its pointers only after the
    // fields that vouch for them are checked.
    unsafe { checks::check_array(&array, data_type, path) }?;
    import_general(array, data_type, path)
}

/// [`import_checked`] as an array: the layouts of [`direct`] are built straight from the struct,
/// the others through arrow-rs.
pub(crate) fn import_checked_array(
    array: FFI_ArrowArray,
    data_type: &DataType,
    path: &str,
) -> Result<ArrayRef, checks::ArrowCError> {
    // SAFETY: as in `import_checked`.
    unsafe { checks::check_array(&array, data_type, path) }?;
    match direct::import(array, data_type, path)? {
        direct::Direct::Imported(array) => Ok(array),
        direct::Direct::General(array) => import_general(array, data_type, path).map(make_array),
    }
}

/// arrow-rs's import of an array that `check_array` has accepted for `data_type`, validated.
fn import_general(
    array: FFI_ArrowArray,
    data_type: &DataType,
    path: &str,
) -> Result<ArrayData, checks::ArrowCError> {
    // SAFETY: the struct was checked against `data_type` (by the caller): buffer and child
    // counts, non-NULL pointers where the layout needs memory, lengths and offsets whose byte
    // sizes do not overflow. arrow-rs builds the `ArrayData` without validating it, so it is
    // validated next, before anything reads it.
    let data = unsafe { from_ffi_and_data_type(array, data_type.clone()) }
        .map_err(|error| checks::ArrowCError::Malformed(format!("{path}: {error}")))?;
    checks::validate_imported(&data, path)?;
    Ok(data)
}

/// Imports an `arrow_array_stream` capsule: every chunk, in order, each checked against the
/// stream's schema.
fn import_stream(capsule: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let mut stream = CheckedStream::from_capsule(capsule)?;
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next_array().map_err(errors::arrow_c_error)? {
        chunks.push(chunk);
    }
    Ok(Imported {
        field: stream.field,
        chunks,
    })
}

/// An `ArrowArrayStream` moved out of its capsule, whose schema has been checked and whose every
/// chunk is checked against it before arrow-rs reads it.
///
/// We own the stream: dropping this releases it exactly once, wherever the reading stopped.
pub(crate) struct CheckedStream {
    stream: FFI_ArrowArrayStream,
    field: FieldRef,
    /// The index of the chunk `next_chunk` asks for.
    next: usize,
    /// Set once the stream has ended or failed: it is not asked again.
    finished: bool,
}

impl CheckedStream {
    /// Takes the stream out of an `arrow_array_stream` capsule and reads its schema.
    pub(crate) fn from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<Self> {
        let stream = capsule_pointer::<FFI_ArrowArrayStream>(capsule, ARROW_ARRAY_STREAM)?;
        // SAFETY: an `arrow_array_stream` capsule holds an `ArrowArrayStream`; `from_raw` moves
        // it out and leaves a released struct behind, and the moved struct releases it once when
        // dropped.
        let mut stream = unsafe { FFI_ArrowArrayStream::from_raw(stream.as_ptr()) };
        if stream.release().is_none() {
            return Err(errors::arrow_c_error(checks::ArrowCError::Malformed(
                "ArrowArrayStream.release is NULL: the stream has already been released or \
                 consumed"
                    .into(),
            )));
        }
        let field = stream_schema(&mut stream).map_err(errors::arrow_c_error)?;
        Ok(CheckedStream {
            stream,
            field,
            next: 0,
            finished: false,
        })
    }

    /// The stream's field: its name, type, nullability and metadata.
    pub(crate) fn field(&self) -> &Field {
        &self.field
    }

    /// The next chunk, checked against the stream's type, or `None` once the stream has ended
    /// (or failed: a stream that reported an error is not asked again).
    pub(crate) fn next_chunk(&mut self) -> Result<Option<ArrayData>, checks::ArrowCError> {
        self.next_with(import_checked)
    }

    /// [`Self::next_chunk`] as an array, built as [`import_checked_array`] builds it.
    fn next_array(&mut self) -> Result<Option<ArrayRef>, checks::ArrowCError> {
        self.next_with(import_checked_array)
    }

    fn next_with<T>(&mut self, import: Import<T>) -> Result<Option<T>, checks::ArrowCError> {
        if self.finished {
            return Ok(None);
        }
        let index = self.next;
        self.next += 1;
        let chunk = stream_next(&mut self.stream, self.field.data_type(), index, import);
        if !matches!(chunk, Ok(Some(_))) {
            self.finished = true;
        }
        chunk
    }
}

/// Calls a stream's `get_schema` and checks what it gives.
fn stream_schema(stream: &mut FFI_ArrowArrayStream) -> Result<FieldRef, checks::ArrowCError> {
    let Some(get_schema) = stream.get_schema() else {
        return Err(stream_error("ArrowArrayStream.get_schema is NULL".into()));
    };
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: the stream is live (its release is set) and we own it; `schema` is a released
    // struct for the callback to fill, and we own what it fills.
    let status = unsafe { get_schema(stream, &mut schema) };
    if status != 0 {
        return Err(stream_error(format!(
            "ArrowArrayStream.get_schema failed with error {status}{}",
            last_error(stream)
        )));
    }
    // SAFETY: `schema` was filled by the producer's `get_schema`; `check_schema` reads `release`
    // first and follows no pointer of a released schema.
    unsafe { fields::field_of_schema(&schema, "ArrowSchema") }
}

/// [`import_checked`] or [`import_checked_array`].
type Import<T> = fn(FFI_ArrowArray, &DataType, &str) -> Result<T, checks::ArrowCError>;

/// Calls a stream's `get_next`: the next chunk, checked against `data_type` and imported by
/// `import`, or `None` at the end.
fn stream_next<T>(
    stream: &mut FFI_ArrowArrayStream,
    data_type: &DataType,
    index: usize,
    import: Import<T>,
) -> Result<Option<T>, checks::ArrowCError> {
    let Some(get_next) = stream.get_next() else {
        return Err(stream_error("ArrowArrayStream.get_next is NULL".into()));
    };
    let mut array = FFI_ArrowArray::empty();
    // SAFETY: the stream is live and ours; `array` is a released struct for the callback to fill,
    // and we own (and drop, releasing it) what it fills.
    let status = unsafe { get_next(stream, &mut array) };
    if status != 0 {
        return Err(stream_error(format!(
            "ArrowArrayStream.get_next failed with error {status} at chunk {index}{}",
            last_error(stream)
        )));
    }
    if array.is_released() {
        return Ok(None);
    }
    import(array, data_type, &format!("ArrowArray (chunk {index})")).map(Some)
}

/// `": message"` from the stream's `get_last_error`, or nothing when it has none.
fn last_error(stream: &mut FFI_ArrowArrayStream) -> String {
    let Some(get_last_error) = stream.get_last_error() else {
        return String::new();
    };
    // SAFETY: the stream is live and ours; the callback returns NULL or a NUL-terminated string
    // valid until the next call on the stream, which is copied at once.
    let message = unsafe { get_last_error(stream) };
    if message.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL, NUL-terminated and alive until the next call on the stream (above).
    let message = unsafe { CStr::from_ptr(message) };
    format!(": {}", message.to_string_lossy())
}

fn stream_error(message: String) -> checks::ArrowCError {
    checks::ArrowCError::Malformed(message)
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

/// `EINVAL` and `EIO`: the C stream interface reports failures as `errno` values, and these two
/// have the same numbers on Linux, macOS and Windows.
const EINVAL: c_int = 22;
const EIO: c_int = 5;

/// The private data of a stream made by [`stream_capsule`]: the column's field and chunks, and
/// where the consumer has got to.
struct ExportedStream {
    field: FieldRef,
    chunks: Vec<ArrayRef>,
    /// The index of the chunk the next `get_next` hands out.
    next: usize,
    /// The message of the last failed call, kept for `get_last_error`.
    last_error: Option<CString>,
}

impl ExportedStream {
    /// Remembers `error` for `get_last_error` and returns the errno to report.
    fn fail(&mut self, errno: c_int, error: &ArrowError) -> c_int {
        // A message with an interior NUL is cut there rather than lost.
        let message = error.to_string();
        let message = message.split('\0').next().unwrap_or_default();
        self.last_error = CString::new(message).ok();
        errno
    }
}

/// An `arrow_array_stream` capsule that hands out `chunks` one by one, zero-copy, described by
/// `field` (extension metadata included).
///
/// The stream owns reference-counted handles to the chunks, so the column may die before the
/// consumer reads the stream; its release callback frees them exactly once.
pub(crate) fn stream_capsule<'py>(
    py: Python<'py>,
    field: &FieldRef,
    chunks: &[ArrayRef],
) -> PyResult<Bound<'py, PyCapsule>> {
    // Fail now, in Python, rather than in the consumer's `get_schema`.
    FFI_ArrowSchema::try_from(field.as_ref()).map_err(errors::arrow_rs_error)?;
    let stream = export_stream(field, chunks);
    // The capsule owns the struct until a consumer moves it out (leaving a released copy); if
    // no one does, dropping it releases the stream.
    PyCapsule::new_with_value(py, stream, ARROW_ARRAY_STREAM)
}

/// An `ArrowArrayStream` that hands out `chunks` one by one, zero-copy, described by `field`.
pub(crate) fn export_stream(field: &FieldRef, chunks: &[ArrayRef]) -> FFI_ArrowArrayStream {
    let state = Box::new(ExportedStream {
        field: field.clone(),
        chunks: chunks.to_vec(),
        next: 0,
        last_error: None,
    });
    // SAFETY: the callbacks implement the C stream interface for a stream whose private data is a
    // `Box<ExportedStream>` made by `Box::into_raw` here; `release_stream` frees it exactly once
    // and marks the stream released, and nothing else frees it.
    unsafe {
        FFI_ArrowArrayStream::new_unchecked(
            Some(stream_get_schema),
            Some(stream_get_next),
            Some(stream_get_last_error),
            Some(release_stream),
            Box::into_raw(state).cast::<c_void>(),
        )
    }
}

/// The [`ExportedStream`] behind `stream`.
///
/// # Safety
///
/// `stream` must be a live, unreleased stream made by [`stream_capsule`] (or moved out of one),
/// and no other reference to its private data may be alive: the C stream interface lets one
/// consumer call the callbacks of a stream, one at a time.
unsafe fn exported_stream<'a>(stream: *mut FFI_ArrowArrayStream) -> Option<&'a mut ExportedStream> {
    // SAFETY: the caller guarantees `stream` is valid for reads, or null (checked by `as_ref`).
    let stream = unsafe { stream.as_ref() }?;
    let state = stream.private_data().cast::<ExportedStream>();
    // SAFETY: the private data of our streams is a live `Box<ExportedStream>` until release,
    // and the caller guarantees that this is the only reference to it.
    unsafe { state.as_mut() }
}

/// `get_schema`: the column's field, as a schema of its own.
unsafe extern "C" fn stream_get_schema(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowSchema,
) -> c_int {
    // SAFETY: the consumer calls the callbacks of a live stream with the stream itself, one call
    // at a time (C stream interface).
    let Some(state) = (unsafe { exported_stream(stream) }) else {
        return EINVAL;
    };
    if out.is_null() {
        return EINVAL;
    }
    match FFI_ArrowSchema::try_from(state.field.as_ref()) {
        Ok(schema) => {
            // SAFETY: `out` is non-null and points to a struct the consumer owns and expects us
            // to fill; `write` does not drop its (uninitialised or released) old value.
            unsafe { out.write(schema) };
            0
        }
        Err(error) => state.fail(EIO, &error),
    }
}

/// `get_next`: the next chunk, sharing its buffers; a released array once all are handed out.
unsafe extern "C" fn stream_get_next(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowArray,
) -> c_int {
    // SAFETY: as in `stream_get_schema`.
    let Some(state) = (unsafe { exported_stream(stream) }) else {
        return EINVAL;
    };
    if out.is_null() {
        return EINVAL;
    }
    let array = match state.chunks.get(state.next) {
        Some(chunk) => {
            state.next += 1;
            FFI_ArrowArray::new(&chunk.to_data())
        }
        // The end of the stream is an array whose release callback is NULL.
        None => FFI_ArrowArray::empty(),
    };
    // SAFETY: as in `stream_get_schema`: `out` is the consumer's struct to fill.
    unsafe { out.write(array) };
    0
}

/// `get_last_error`: the message of the last failure, valid until the next call on the stream.
unsafe extern "C" fn stream_get_last_error(stream: *mut FFI_ArrowArrayStream) -> *const c_char {
    // SAFETY: as in `stream_get_schema`.
    match unsafe { exported_stream(stream) } {
        Some(ExportedStream {
            last_error: Some(message),
            ..
        }) => message.as_ptr(),
        _ => std::ptr::null(),
    }
}

/// `release`: frees the private data (and so the stream's handles on the chunks) and marks the
/// stream released, so that a second call does nothing.
unsafe extern "C" fn release_stream(stream: *mut FFI_ArrowArrayStream) {
    // SAFETY: the consumer (or the capsule's destructor, through `Drop`) passes the live stream,
    // valid for reads and writes, or null (checked by `as_mut`).
    let Some(stream) = (unsafe { stream.as_mut() }) else {
        return;
    };
    if stream.release().is_none() {
        return;
    }
    // SAFETY: the stream is not released, so its private data is the `Box<ExportedStream>` made
    // by `stream_capsule`; taking it back and marking the stream released (below) frees it
    // exactly once.
    let state = unsafe { Box::from_raw(stream.private_data().cast::<ExportedStream>()) };
    drop(state);
    // SAFETY: the old pointer was freed just above; NULL is what a released stream holds.
    unsafe { stream.set_private_data(std::ptr::null_mut()) };
    // SAFETY: a NULL release callback marks the stream released, so that neither the consumer
    // nor `Drop` calls this function on it again.
    unsafe { stream.set_release(None) };
}

#[cfg(test)]
mod tests;
