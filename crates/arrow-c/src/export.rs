//! Export through the C Stream Interface: an `ArrowArrayStream` of a column's chunks, described
//! by its field (extension metadata included).
//!
//! arrow-rs 60 exports only streams of record batches, so a column's chunks are handed out by a
//! small `ArrowArrayStream` of our own ([`export_stream`]), whose private data owns the chunks
//! until the consumer releases the stream.

use std::ffi::{CString, c_char, c_int, c_void};

use arrow_array::ArrayRef;
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_schema::{ArrowError, FieldRef};

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

/// An `ArrowArrayStream` that hands out `chunks` one by one, zero-copy, described by `field`.
pub fn export_stream(field: &FieldRef, chunks: &[ArrayRef]) -> FFI_ArrowArrayStream {
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
/// `stream` must be a live, unreleased stream made by [`export_stream`] (or moved out of one),
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
    // by `export_stream`; taking it back and marking the stream released (below) frees it
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
