//! Export through the Arrow C Device Data Interface: CPU device arrays and streams of our arrays
//! (`device_id` `-1`, a NULL sync event), and a row-major tensor on its own device with its sync
//! event; the device stream's callbacks.

use std::ffi::{c_char, c_int, c_void};

use arrow_array::ArrayRef;
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_dlpack::{FixedShapeTensorType, arrow_type_of};
use arrow_dlpack_tensor::{Device, Tensor};
use arrow_schema::{Field, FieldRef};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

use super::*;
use crate::arrow_ffi;
use crate::device_sync::{ExportedEvent, SyncEvent};
use crate::errors;

/// Refuses keyword arguments other than `None`, as the PyCapsule interface asks of producers.
pub(crate) fn check_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let Some(kwargs) = kwargs else {
        return Ok(());
    };
    for (key, value) in kwargs.iter() {
        if !value.is_none() {
            return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
                "the keyword {key} is not supported by arrow_dlpack's Arrow C device export; \
                 only None is accepted for it"
            )));
        }
    }
    Ok(())
}

/// An `arrow_device_array` capsule of CPU data sharing `array`'s buffers.
pub(crate) fn cpu_array_capsule<'py>(
    py: Python<'py>,
    array: &dyn arrow_array::Array,
) -> PyResult<Bound<'py, PyCapsule>> {
    let array = FFI_ArrowArray::new(&array.to_data());
    let device_array = FfiDeviceArray::new(array, Device::CPU, std::ptr::null_mut());
    PyCapsule::new_with_value(py, device_array, ARROW_DEVICE_ARRAY)
}

/// An `arrow_device_array_stream` capsule of CPU chunks: our C stream of the chunks, with each
/// chunk wrapped as a CPU device array.
pub(crate) fn cpu_stream_capsule<'py>(
    py: Python<'py>,
    field: &FieldRef,
    chunks: &[ArrayRef],
) -> PyResult<Bound<'py, PyCapsule>> {
    // Fail now, in Python, rather than in the consumer's `get_schema`.
    FFI_ArrowSchema::try_from(field.as_ref()).map_err(errors::arrow_rs_error)?;
    let stream = cpu_device_stream(field, chunks);
    PyCapsule::new_with_value(py, stream, ARROW_DEVICE_ARRAY_STREAM)
}

/// An `ArrowDeviceArrayStream` of CPU chunks over our C stream of them, which its private data
/// owns until the stream is released.
pub(super) fn cpu_device_stream(field: &FieldRef, chunks: &[ArrayRef]) -> FfiDeviceStream {
    let inner = Box::new(arrow_ffi::export_stream(field, chunks));
    FfiDeviceStream {
        device_type: Device::CPU.device_type as i32,
        get_schema: Some(device_stream_get_schema),
        get_next: Some(device_stream_get_next),
        get_last_error: Some(device_stream_get_last_error),
        release: Some(device_stream_release),
        private_data: Box::into_raw(inner).cast::<c_void>(),
    }
}

/// The C stream behind one of our device streams.
///
/// # Safety
///
/// `stream` must be NULL or a live stream made by [`cpu_stream_capsule`], called by one consumer
/// at a time.
unsafe fn inner_stream<'a>(stream: *mut FfiDeviceStream) -> Option<&'a mut FFI_ArrowArrayStream> {
    // SAFETY: the caller's guarantees; a live stream's private data is the boxed inner stream.
    unsafe {
        let stream = stream.as_ref()?;
        stream.private_data.cast::<FFI_ArrowArrayStream>().as_mut()
    }
}

pub(super) unsafe extern "C" fn device_stream_get_schema(
    stream: *mut FfiDeviceStream,
    out: *mut FFI_ArrowSchema,
) -> c_int {
    // SAFETY: the consumer calls the callbacks of a live stream with the stream itself.
    let Some(inner) = (unsafe { inner_stream(stream) }) else {
        return 22;
    };
    let Some(get_schema) = inner.get_schema() else {
        return 22;
    };
    // SAFETY: our inner stream is live; `out` is the consumer's struct to fill.
    unsafe { get_schema(inner, out) }
}

pub(super) unsafe extern "C" fn device_stream_get_next(
    stream: *mut FfiDeviceStream,
    out: *mut FfiDeviceArray,
) -> c_int {
    // SAFETY: as in `device_stream_get_schema`.
    let Some(inner) = (unsafe { inner_stream(stream) }) else {
        return 22;
    };
    let Some(get_next) = inner.get_next() else {
        return 22;
    };
    if out.is_null() {
        return 22;
    }
    let mut array = FFI_ArrowArray::empty();
    // SAFETY: our inner stream is live; `array` is ours to be filled.
    let status = unsafe { get_next(inner, &mut array) };
    if status != 0 {
        return status;
    }
    // SAFETY: `out` is the consumer's struct to fill; `write` does not drop its old value. The
    // end of the stream is a released array, wrapped as such.
    unsafe {
        out.write(FfiDeviceArray::new(
            array,
            Device::CPU,
            std::ptr::null_mut(),
        ))
    };
    0
}

unsafe extern "C" fn device_stream_get_last_error(stream: *mut FfiDeviceStream) -> *const c_char {
    // SAFETY: as in `device_stream_get_schema`.
    let Some(inner) = (unsafe { inner_stream(stream) }) else {
        return std::ptr::null();
    };
    match inner.get_last_error() {
        // SAFETY: our inner stream is live.
        Some(get_last_error) => unsafe { get_last_error(inner) },
        None => std::ptr::null(),
    }
}

unsafe extern "C" fn device_stream_release(stream: *mut FfiDeviceStream) {
    // SAFETY: the consumer (or `Drop`) passes the live stream, or NULL.
    let Some(stream) = (unsafe { stream.as_mut() }) else {
        return;
    };
    if stream.release.is_none() {
        return;
    }
    // SAFETY: a live stream's private data is the `Box` made by `cpu_stream_capsule`; it is freed
    // once, here, and the stream marked released.
    drop(unsafe { Box::from_raw(stream.private_data.cast::<FFI_ArrowArrayStream>()) });
    stream.private_data = std::ptr::null_mut();
    stream.release = None;
}

/// The (`arrow_schema`, `arrow_device_array`) capsules of a row-major tensor on its own device:
/// a primitive array for 1-D, an `arrow.fixed_shape_tensor` array otherwise; the array shares the
/// tensor's memory, which is never read, and carries the tensor's sync event.
pub(crate) fn tensor_capsules<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    sync_event: SyncEvent,
) -> PyResult<Bound<'py, PyTuple>> {
    let device = tensor.device();
    if tensor.ndim() == 0 || !tensor.is_row_major() {
        return Err(errors::buffer_error(format!(
            "an Arrow array shares a tensor's memory only when the tensor is row-major with at \
             least one dimension (shape {:?}, strides {:?}); a copy would be needed, which \
             arrow_dlpack does not make of data on {} device {}",
            tensor.shape(),
            tensor.strides(),
            device.type_name(),
            device.device_id
        )));
    }
    let value_type = arrow_type_of(tensor.dtype())
        .map_err(|error| errors::arrow_error(error, Operation::Export))?;
    let size = tensor.dtype().size();
    let start = tensor.offset() * size;
    let values = tensor
        .buffer()
        .slice_with_length(start, tensor.len() * size);
    let (sync_event, exported_event) = crate::device_sync::export_event(device, sync_event)?;
    let values = match exported_event {
        None => values,
        Some(event) => keep_event_with(values, event),
    };
    let leaf = ArrayData::builder(value_type.clone())
        .len(tensor.len())
        .add_buffer(values)
        .build()
        .map_err(errors::arrow_rs_error)?;
    let (field, data) = if tensor.ndim() == 1 {
        (Field::new("", value_type, false), leaf)
    } else {
        let names = tensor.dim_names().map(|names| names[1..].to_vec());
        let tensor_type =
            FixedShapeTensorType::try_new(value_type, tensor.shape()[1..].to_vec(), None, names)
                .map_err(|error| errors::arrow_error(error, Operation::Export))?;
        let storage = ArrayData::builder(tensor_type.storage_type(true))
            .len(tensor.shape()[0])
            .add_child_data(leaf)
            .build()
            .map_err(errors::arrow_rs_error)?;
        (tensor_type.to_field("", false), storage)
    };
    let schema = arrow_ffi::schema_capsule(py, &field)?;
    let device_array = FfiDeviceArray::new(FFI_ArrowArray::new(&data), device, sync_event);
    let array = PyCapsule::new_with_value(py, device_array, ARROW_DEVICE_ARRAY)?;
    PyTuple::new(py, [schema, array])
}

/// The owner of an exported values buffer that also owns the sync event recorded for the export,
/// so that the event lives exactly as long as the exported array.
struct EventKeeper {
    _values: Buffer,
    _event: ExportedEvent,
}

// The event is only destroyed, once, when the keeper is dropped; nothing can observe a keeper
// left half-updated by a panic.
impl std::panic::RefUnwindSafe for EventKeeper {}

/// `values` as a buffer over the same memory whose owner also keeps `event`.
fn keep_event_with(values: Buffer, event: ExportedEvent) -> Buffer {
    let Some(pointer) = std::ptr::NonNull::new(values.as_ptr().cast_mut()) else {
        return values;
    };
    let len = values.len();
    let keeper = std::sync::Arc::new(EventKeeper {
        _values: values,
        _event: event,
    });
    // SAFETY: `pointer` and `len` describe the memory of `values`, which the keeper holds (and so
    // keeps valid) for as long as the new buffer lives; the memory is never read on the host.
    unsafe { Buffer::from_custom_allocation(pointer, len, keeper) }
}
