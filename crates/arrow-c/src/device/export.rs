//! Export through the C Device Data Interface: CPU device arrays and streams of arrow-rs arrays
//! (`device_id` `-1`, a NULL sync event), and a row-major tensor on its own device with its sync
//! event; the device stream's callbacks.

use std::ffi::{c_char, c_int, c_void};
use std::panic::RefUnwindSafe;

use arrow_array::ArrayRef;
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_dlpack::{FixedShapeTensorType, arrow_type_of};
use arrow_dlpack_tensor::{Device, Tensor};
use arrow_schema::{Field, FieldRef};

use super::{ArrowDeviceArray, ArrowDeviceArrayStream};
use crate::error::{ArrowCError, Result};
use crate::export::export_stream;

/// `EINVAL`, as the C stream interface reports a call it cannot serve.
const EINVAL: c_int = 22;

/// An `ArrowDeviceArray` of CPU data sharing `array`'s buffers (`device_id` `-1`, no event).
pub fn cpu_device_array(array: &dyn arrow_array::Array) -> ArrowDeviceArray {
    let array = FFI_ArrowArray::new(&array.to_data());
    ArrowDeviceArray::new(array, Device::CPU, std::ptr::null_mut())
}

/// An `ArrowDeviceArrayStream` of CPU chunks, described by `field`: the C stream of
/// [`crate::export_stream`], which its private data owns until the stream is released, with each
/// chunk wrapped as a CPU device array.
pub fn cpu_device_stream(field: &FieldRef, chunks: &[ArrayRef]) -> ArrowDeviceArrayStream {
    let inner = Box::new(export_stream(field, chunks));
    ArrowDeviceArrayStream {
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
/// `stream` must be NULL or a live stream made by [`cpu_device_stream`], called by one consumer
/// at a time.
unsafe fn inner_stream<'a>(
    stream: *mut ArrowDeviceArrayStream,
) -> Option<&'a mut FFI_ArrowArrayStream> {
    // SAFETY: the caller's guarantees; a live stream's private data is the boxed inner stream.
    unsafe {
        let stream = stream.as_ref()?;
        stream.private_data.cast::<FFI_ArrowArrayStream>().as_mut()
    }
}

pub(super) unsafe extern "C" fn device_stream_get_schema(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut FFI_ArrowSchema,
) -> c_int {
    // SAFETY: the consumer calls the callbacks of a live stream with the stream itself.
    let Some(inner) = (unsafe { inner_stream(stream) }) else {
        return EINVAL;
    };
    let Some(get_schema) = inner.get_schema() else {
        return EINVAL;
    };
    // SAFETY: our inner stream is live; `out` is the consumer's struct to fill.
    unsafe { get_schema(inner, out) }
}

pub(super) unsafe extern "C" fn device_stream_get_next(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowDeviceArray,
) -> c_int {
    // SAFETY: as in `device_stream_get_schema`.
    let Some(inner) = (unsafe { inner_stream(stream) }) else {
        return EINVAL;
    };
    let Some(get_next) = inner.get_next() else {
        return EINVAL;
    };
    if out.is_null() {
        return EINVAL;
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
        out.write(ArrowDeviceArray::new(
            array,
            Device::CPU,
            std::ptr::null_mut(),
        ))
    };
    0
}

unsafe extern "C" fn device_stream_get_last_error(
    stream: *mut ArrowDeviceArrayStream,
) -> *const c_char {
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

unsafe extern "C" fn device_stream_release(stream: *mut ArrowDeviceArrayStream) {
    // SAFETY: the consumer (or `Drop`) passes the live stream, or NULL.
    let Some(stream) = (unsafe { stream.as_mut() }) else {
        return;
    };
    if stream.release.is_none() {
        return;
    }
    // SAFETY: a live stream's private data is the `Box` made by `cpu_device_stream`; it is freed
    // once, here, and the stream marked released.
    drop(unsafe { Box::from_raw(stream.private_data.cast::<FFI_ArrowArrayStream>()) });
    stream.private_data = std::ptr::null_mut();
    stream.release = None;
}

/// A row-major tensor on its own device as an Arrow device array and the field that describes
/// it: a primitive array for 1-D, an `arrow.fixed_shape_tensor` array otherwise. The array shares
/// the tensor's memory, which is never read, and carries `sync_event` (NULL: ready), a pointer
/// to the device runtime's event handle that `keep`, when given, owns: it is kept alive, and
/// dropped, with the exported array.
///
/// A tensor that is not row-major, or has no dimensions, is refused with
/// [`ArrowCError::DeviceNotRowMajor`]: sharing it would need a copy.
pub fn export_tensor<K>(
    tensor: &Tensor,
    sync_event: *mut c_void,
    keep: Option<K>,
) -> Result<(Field, ArrowDeviceArray)>
where
    K: Send + Sync + 'static,
{
    check_exportable(tensor)?;
    let device = tensor.device();
    let value_type = arrow_type_of(tensor.dtype()).map_err(ArrowCError::Arrow)?;
    let size = tensor.dtype().size();
    // On a device whose pointers are opaque handles (OpenCL, Vulkan, Metal, WebGPU) the buffer is
    // the handle as it came and the first element is the array's `offset`; elsewhere the buffer
    // starts at the first element.
    let (values, offset) = if device.has_opaque_handles() {
        (tensor.buffer().clone(), tensor.offset())
    } else {
        let start = tensor.offset() * size;
        let values = tensor
            .buffer()
            .slice_with_length(start, tensor.len() * size);
        (values, 0)
    };
    let values = match keep {
        None => values,
        Some(keep) => keep_with(values, keep),
    };
    let leaf = ArrayData::builder(value_type.clone())
        .len(tensor.len())
        .offset(offset)
        .add_buffer(values)
        .build()?;
    let (field, data) = if tensor.ndim() == 1 {
        (Field::new("", value_type, false), leaf)
    } else {
        let names = tensor.dim_names().map(|names| names[1..].to_vec());
        let tensor_type =
            FixedShapeTensorType::try_new(value_type, tensor.shape()[1..].to_vec(), None, names)
                .map_err(ArrowCError::Arrow)?;
        let storage = ArrayData::builder(tensor_type.storage_type(true))
            .len(tensor.shape()[0])
            .add_child_data(leaf)
            .build()?;
        (tensor_type.to_field("", false), storage)
    };
    let array = ArrowDeviceArray::new(FFI_ArrowArray::new(&data), device, sync_event);
    Ok((field, array))
}

/// Refuses, with [`ArrowCError::DeviceNotRowMajor`], a tensor that [`export_tensor`] cannot share: one
/// that is not row-major, or has no dimensions (sharing it would need a copy).
pub fn check_exportable(tensor: &Tensor) -> Result {
    let device = tensor.device();
    if tensor.ndim() == 0 || !tensor.is_row_major() {
        return Err(ArrowCError::DeviceNotRowMajor {
            shape: tensor.shape().to_vec(),
            strides: tensor.strides().to_vec(),
            device,
        });
    }
    Ok(())
}

/// The owner of an exported values buffer that also owns what the export must keep alive (the
/// sync event recorded for it), so that it lives exactly as long as the exported array.
struct Keeper<K> {
    _values: Buffer,
    _keep: K,
}

// What is kept is only dropped, once, with the keeper; nothing can observe a keeper left
// half-updated by a panic.
impl<K> RefUnwindSafe for Keeper<K> {}

/// `values` as a buffer over the same memory whose owner also keeps `keep`.
fn keep_with<K: Send + Sync + 'static>(values: Buffer, keep: K) -> Buffer {
    let Some(pointer) = std::ptr::NonNull::new(values.as_ptr().cast_mut()) else {
        return values;
    };
    let len = values.len();
    let keeper = std::sync::Arc::new(Keeper {
        _values: values,
        _keep: keep,
    });
    // SAFETY: `pointer` and `len` describe the memory of `values`, which the keeper holds (and so
    // keeps valid) for as long as the new buffer lives; the memory is never read on the host.
    unsafe { Buffer::from_custom_allocation(pointer, len, keeper) }
}
