//! Checked import of the C Data Interface (`ArrowSchema`, `ArrowArray`) and the C Stream
//! Interface (`ArrowArrayStream`).
//!
//! Every struct is checked field by field against its format's layout ([`crate::checks`])
//! before arrow-rs reads it, imported zero-copy and validated. The fixed-width layouts that
//! DLPack exchanges are built straight from the checked struct (`direct`); the others go through
//! arrow-rs. An array or stream handed to this module is owned by it from then on: it is
//! released exactly once, when the last imported buffer dies or on any error before the import
//! returns.

use std::ffi::CStr;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi_and_data_type};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{ArrayRef, make_array};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, FieldRef};

use crate::checks;
use crate::error::{ArrowCError, Result, invalid_values, malformed};

mod direct;

/// An Arrow column taken from a producer: its field (name, type, nullability, metadata) and its
/// chunks, each sharing the producer's memory.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The column's field, extension metadata included.
    pub field: FieldRef,
    /// The chunks, in the producer's order.
    pub chunks: Vec<ArrayRef>,
}

/// How a schema becomes a field: [`field_of_schema`], or a binding's own (one that remembers the
/// fields of schemas it has seen, by the key [`checks::check_schema`] writes).
///
/// # Safety
///
/// An implementation may assume what [`field_of_schema`] assumes, and must check the schema as
/// [`field_of_schema`] does before it reads anything more of it.
pub type FieldOfSchema = unsafe fn(*const FFI_ArrowSchema, &str) -> Result<FieldRef>;

/// The field an `ArrowSchema` describes, checked first ([`checks::check_schema`]); the schema
/// is only read, and stays its owner's to release.
///
/// # Safety
///
/// `schema` is NULL or readable as an `ArrowSchema` (see [`checks::check_schema`]).
pub unsafe fn field_of_schema(schema: *const FFI_ArrowSchema, path: &str) -> Result<FieldRef> {
    // SAFETY: as the caller guarantees.
    unsafe { checks::check_schema(schema, path, &mut Vec::new()) }?;
    // SAFETY: checked above: live, with valid strings, metadata and child pointers.
    let field =
        Field::try_from(unsafe { &*schema }).map_err(|source| ArrowCError::UnsupportedFormat {
            field: format!("{path}.format"),
            source,
        })?;
    Ok(FieldRef::new(field))
}

/// Imports an array we own as `ArrayData`, after checking it against `data_type`; the array is
/// released (dropped) before an error is returned. `path` names the struct in messages.
pub fn import_array_data(
    array: FFI_ArrowArray,
    data_type: &DataType,
    path: &str,
) -> Result<ArrayData> {
    // SAFETY: `array` is a live struct we own; `check_array` follows its pointers only after the
    // fields that vouch for them are checked.
    unsafe { checks::check_array(&array, data_type, path) }?;
    import_general(array, data_type, path)
}

/// [`import_array_data`] as an array: fixed-width numbers and fixed-size lists of them are built
/// straight from the struct, the others through arrow-rs.
pub fn import_array(array: FFI_ArrowArray, data_type: &DataType, path: &str) -> Result<ArrayRef> {
    // SAFETY: as in `import_array_data`.
    unsafe { checks::check_array(&array, data_type, path) }?;
    match direct::import(array, data_type, path)? {
        direct::Direct::Imported(array) => Ok(array),
        direct::Direct::General(array) => import_general(array, data_type, path).map(make_array),
    }
}

/// arrow-rs's import of an array that `check_array` has accepted for `data_type`, validated.
fn import_general(array: FFI_ArrowArray, data_type: &DataType, path: &str) -> Result<ArrayData> {
    // SAFETY: the struct was checked against `data_type` (by the caller): buffer and child
    // counts, non-NULL pointers where the layout needs memory, lengths and offsets whose byte
    // sizes do not overflow. arrow-rs builds the `ArrayData` without validating it, so it is
    // validated next, before anything reads it.
    let data = unsafe { from_ffi_and_data_type(array, data_type.clone()) }
        .map_err(|error| invalid_values(path, error))?;
    checks::validate_imported(&data, path)?;
    Ok(data)
}

/// Reads a whole `ArrowArrayStream` we own: every chunk, in order, each checked against the
/// stream's schema.
pub fn import_stream(stream: FFI_ArrowArrayStream) -> Result<Imported> {
    let mut stream = CheckedStream::new(stream)?;
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next_array()? {
        chunks.push(chunk);
    }
    Ok(Imported {
        field: stream.field,
        chunks,
    })
}

/// An `ArrowArrayStream` we own, whose schema has been checked and whose every chunk is checked
/// against it before arrow-rs reads it.
///
/// Dropping it releases the stream exactly once, wherever the reading stopped.
pub struct CheckedStream {
    stream: FFI_ArrowArrayStream,
    field: FieldRef,
    /// The index of the chunk the next call asks for.
    next: usize,
    /// Set once the stream has ended or failed: it is not asked again.
    finished: bool,
}

impl CheckedStream {
    /// Takes ownership of `stream` and reads its schema with [`field_of_schema`].
    pub fn new(stream: FFI_ArrowArrayStream) -> Result<Self> {
        Self::with_fields(stream, field_of_schema)
    }

    /// Takes ownership of `stream` and reads its schema with `fields`.
    pub fn with_fields(mut stream: FFI_ArrowArrayStream, fields: FieldOfSchema) -> Result<Self> {
        if stream.release().is_none() {
            return Err(malformed(
                "ArrowArrayStream.release",
                "is NULL: the stream has already been released or \
                 consumed",
            ));
        }
        let field = stream_schema(&mut stream, fields)?;
        Ok(CheckedStream {
            stream,
            field,
            next: 0,
            finished: false,
        })
    }

    /// The stream's field: its name, type, nullability and metadata.
    pub fn field(&self) -> &FieldRef {
        &self.field
    }

    /// The next chunk, checked against the stream's type, or `None` once the stream has ended
    /// (or failed: a stream that reported an error is not asked again).
    pub fn next_chunk(&mut self) -> Result<Option<ArrayData>> {
        self.next_with(import_array_data)
    }

    /// [`Self::next_chunk`] as an array, built as [`import_array`] builds it.
    pub fn next_array(&mut self) -> Result<Option<ArrayRef>> {
        self.next_with(import_array)
    }

    fn next_with<T>(&mut self, import: Import<T>) -> Result<Option<T>> {
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
fn stream_schema(stream: &mut FFI_ArrowArrayStream, fields: FieldOfSchema) -> Result<FieldRef> {
    let Some(get_schema) = stream.get_schema() else {
        return Err(malformed("ArrowArrayStream.get_schema", "is NULL"));
    };
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: the stream is live (its release is set) and we own it; `schema` is a released
    // struct for the callback to fill, and we own what it fills.
    let status = unsafe { get_schema(stream, &mut schema) };
    if status != 0 {
        return Err(ArrowCError::ProducerFailed {
            call: "ArrowArrayStream.get_schema",
            chunk: None,
            status,
            message: last_error(stream),
        });
    }
    // SAFETY: `schema` was filled by the producer's `get_schema`; the checks read `release`
    // first and follow no pointer of a released schema.
    unsafe { fields(&schema, "ArrowSchema") }
}

/// [`import_array_data`] or [`import_array`].
type Import<T> = fn(FFI_ArrowArray, &DataType, &str) -> Result<T>;

/// Calls a stream's `get_next`: the next chunk, checked against `data_type` and imported by
/// `import`, or `None` at the end.
fn stream_next<T>(
    stream: &mut FFI_ArrowArrayStream,
    data_type: &DataType,
    index: usize,
    import: Import<T>,
) -> Result<Option<T>> {
    let Some(get_next) = stream.get_next() else {
        return Err(malformed("ArrowArrayStream.get_next", "is NULL"));
    };
    let mut array = FFI_ArrowArray::empty();
    // SAFETY: the stream is live and ours; `array` is a released struct for the callback to fill,
    // and we own (and drop, releasing it) what it fills.
    let status = unsafe { get_next(stream, &mut array) };
    if status != 0 {
        return Err(ArrowCError::ProducerFailed {
            call: "ArrowArrayStream.get_next",
            chunk: Some(index),
            status,
            message: last_error(stream),
        });
    }
    if array.is_released() {
        return Ok(None);
    }
    import(array, data_type, &format!("ArrowArray (chunk {index})")).map(Some)
}

/// The message of the stream's `get_last_error`, when it has one.
fn last_error(stream: &mut FFI_ArrowArrayStream) -> Option<String> {
    let get_last_error = stream.get_last_error()?;
    // SAFETY: the stream is live and ours; the callback returns NULL or a NUL-terminated string
    // valid until the next call on the stream, which is copied at once.
    let message = unsafe { get_last_error(stream) };
    // SAFETY: NULL or a NUL-terminated string alive until the next call on the stream (above).
    unsafe { copied_message(message) }
}

/// A copy of a stream's `get_last_error` message: `None` for NULL, else its text (invalid UTF-8
/// replaced).
///
/// # Safety
///
/// `message` is NULL or points to a NUL-terminated string that stays alive during the call.
pub(crate) unsafe fn copied_message(message: *const std::ffi::c_char) -> Option<String> {
    if message.is_null() {
        return None;
    }
    // SAFETY: non-NULL, NUL-terminated and alive (the caller's contract).
    let message = unsafe { CStr::from_ptr(message) };
    Some(message.to_string_lossy().into_owned())
}
