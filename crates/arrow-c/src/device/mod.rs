//! The C Device Data Interface: `ArrowDeviceArray` and `ArrowDeviceArrayStream`, their checked
//! import, and their export.
//!
//! Import:
//! - each `ArrowDeviceArray` is checked as an `ArrowArray` is ([`crate::checks`]), plus its
//!   device type (one that Arrow and `dlpack.h` name, 1 to 16) and device id (`-1` or `0` for the
//!   CPU, `0..2^31` for a device);
//! - CPU arrays become ordinary Arrow arrays ([`DeviceImported::Host`]);
//! - non-CPU arrays are never read: a fixed-width numeric column, a fixed-size list of one, or an
//!   `arrow.fixed_shape_tensor` column becomes a device [`Tensor`] (through a
//!   `DLManagedTensorVersioned` that owns the Arrow array and releases it once), which keeps its
//!   device type and id, and whose [`DeviceTensor`] keeps the producer's sync event; anything
//!   else, nulls that would have to be counted in device memory (`null_count == -1` with a
//!   validity bitmap), and several device chunks (joining them is a device copy) are refused
//!   with [`ArrowCError::DeviceChunks`].
//!
//! Export (`export`): CPU device arrays and streams of arrow-rs arrays (`device_id` `-1` and a
//! NULL sync event, as PyArrow does); a row-major tensor as a primitive array (1-D) or an
//! `arrow.fixed_shape_tensor` array (n-D) on its own device, with a sync event.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::NonNull;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_dlpack_tensor::{Device, Tensor};
use arrow_schema::{DataType, FieldRef};

use crate::error::{ArrowCError, Result, malformed};
use crate::import::{FieldOfSchema, Imported, copied_message, import_array};

mod export;
mod tensor;

pub use export::{check_exportable, cpu_device_array, cpu_device_stream, export_tensor};
pub use tensor::device_tensor;

/// The highest device type of the C Device Data Interface (16, Hexagon): `dlpack.h` goes on
/// (17 and 18), Arrow does not.
pub const MAX_DEVICE_TYPE: i32 = 16;

/// `struct ArrowDeviceArray` of the C Device Data Interface: an `ArrowArray` whose buffers live
/// on the device `device_type`/`device_id`, ready once the event `sync_event` points to (NULL:
/// ready) has completed.
///
/// Dropping it releases the array (once: a released array is left released).
#[repr(C)]
#[derive(Debug)]
pub struct ArrowDeviceArray {
    array: FFI_ArrowArray,
    device_id: i64,
    device_type: i32,
    sync_event: *mut c_void,
    reserved: [i64; 3],
}

const _: () = {
    assert!(size_of::<ArrowDeviceArray>() == 128);
    assert!(align_of::<ArrowDeviceArray>() == 8);
    assert!(std::mem::offset_of!(ArrowDeviceArray, array) == 0);
    assert!(std::mem::offset_of!(ArrowDeviceArray, device_id) == 80);
    assert!(std::mem::offset_of!(ArrowDeviceArray, device_type) == 88);
    assert!(std::mem::offset_of!(ArrowDeviceArray, sync_event) == 96);
    assert!(std::mem::offset_of!(ArrowDeviceArray, reserved) == 104);
};

// SAFETY: the struct owns its array (whose release callback any thread may call, as the C Data
// Interface requires) and an opaque event pointer that is only handed on.
unsafe impl Send for ArrowDeviceArray {}

impl ArrowDeviceArray {
    /// A released struct: what a moved-out struct leaves behind, and what a stream's end is.
    pub fn released() -> Self {
        ArrowDeviceArray {
            array: FFI_ArrowArray::empty(),
            device_id: 0,
            device_type: 0,
            sync_event: std::ptr::null_mut(),
            reserved: [0; 3],
        }
    }

    /// `array` on `device`, ready when the event `sync_event` points to has completed (NULL:
    /// ready). The CPU is device `-1`, as in PyArrow.
    pub fn new(array: FFI_ArrowArray, device: Device, sync_event: *mut c_void) -> Self {
        ArrowDeviceArray {
            array,
            device_id: if device.is_cpu() {
                -1
            } else {
                i64::from(device.device_id)
            },
            device_type: device.device_type as i32,
            sync_event,
            reserved: [0; 3],
        }
    }

    /// Takes the struct at `pointer`, leaving a released one behind, as a consumer takes an
    /// array out of a capsule.
    ///
    /// # Safety
    ///
    /// `pointer` is valid for reads and writes of an `ArrowDeviceArray` (live or released),
    /// which from then on is released by the returned value only.
    pub unsafe fn from_raw(pointer: *mut ArrowDeviceArray) -> Self {
        // SAFETY: as the caller guarantees; the released struct left behind releases nothing.
        unsafe { std::ptr::replace(pointer, ArrowDeviceArray::released()) }
    }

    /// The array.
    pub fn array(&self) -> &FFI_ArrowArray {
        &self.array
    }

    /// Whether the array has been released (its `release` callback is NULL).
    pub fn is_released(&self) -> bool {
        self.array.is_released()
    }

    /// The `device_type` field, as the producer wrote it.
    pub fn device_type(&self) -> i32 {
        self.device_type
    }

    /// The `device_id` field, as the producer wrote it.
    pub fn device_id(&self) -> i64 {
        self.device_id
    }

    /// The `sync_event` field: NULL, or a pointer to the device runtime's event handle
    /// (`cudaEvent_t*`, `hipEvent_t*`), valid while the array is not released.
    pub fn sync_event(&self) -> *mut c_void {
        self.sync_event
    }
}

type GetSchema = unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut FFI_ArrowSchema) -> c_int;
type GetNext = unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowDeviceArray) -> c_int;
type GetLastError = unsafe extern "C" fn(*mut ArrowDeviceArrayStream) -> *const c_char;
type Release = unsafe extern "C" fn(*mut ArrowDeviceArrayStream);

/// `struct ArrowDeviceArrayStream` of the C Device Data Interface.
///
/// Dropping it releases the stream (once: a released stream is left released).
#[repr(C)]
#[derive(Debug)]
pub struct ArrowDeviceArrayStream {
    device_type: i32,
    get_schema: Option<GetSchema>,
    get_next: Option<GetNext>,
    get_last_error: Option<GetLastError>,
    release: Option<Release>,
    private_data: *mut c_void,
}

const _: () = {
    assert!(size_of::<ArrowDeviceArrayStream>() == 48);
    assert!(std::mem::offset_of!(ArrowDeviceArrayStream, get_schema) == 8);
    assert!(std::mem::offset_of!(ArrowDeviceArrayStream, release) == 32);
    assert!(std::mem::offset_of!(ArrowDeviceArrayStream, private_data) == 40);
};

// SAFETY: as for `ArrowDeviceArray`: the stream is owned, and its callbacks are called by one
// consumer at a time.
unsafe impl Send for ArrowDeviceArrayStream {}

impl ArrowDeviceArrayStream {
    /// A released stream.
    pub fn released() -> Self {
        ArrowDeviceArrayStream {
            device_type: 0,
            get_schema: None,
            get_next: None,
            get_last_error: None,
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }

    /// Takes the stream at `pointer`, leaving a released one behind.
    ///
    /// # Safety
    ///
    /// `pointer` is valid for reads and writes of an `ArrowDeviceArrayStream` (live or
    /// released), which from then on is released by the returned value only.
    pub unsafe fn from_raw(pointer: *mut ArrowDeviceArrayStream) -> Self {
        // SAFETY: as the caller guarantees; the released struct left behind releases nothing.
        unsafe { std::ptr::replace(pointer, ArrowDeviceArrayStream::released()) }
    }

    /// The `device_type` field, as the producer wrote it.
    pub fn device_type(&self) -> i32 {
        self.device_type
    }

    /// Whether the stream has been released (its `release` callback is NULL).
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}

impl Drop for ArrowDeviceArrayStream {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: a stream we own whose release is set is live; the callback marks it
            // released, so it runs once.
            unsafe { release(self) };
        }
    }
}

/// A device chunk as a tensor on its device, never read, and the producer's sync event: NULL
/// when the data is ready, else a pointer to the event handle, valid as long as the tensor (which
/// owns the Arrow array) lives.
#[derive(Debug)]
pub struct DeviceTensor {
    /// The tensor: its device type and id are the array's.
    pub tensor: Tensor,
    /// The array's `sync_event`: what consumers must wait for before they touch the memory.
    pub sync_event: Option<NonNull<c_void>>,
}

/// What a device import gives: ordinary Arrow chunks for CPU data, a device tensor otherwise.
#[derive(Debug)]
pub enum DeviceImported {
    /// Data in host memory, as Arrow chunks.
    Host(Imported),
    /// Data in device memory, as a tensor that keeps the array alive.
    Device(DeviceTensor),
}

/// The device a struct's `device_type` and `device_id` name, checked; `path` names the struct
/// in messages.
pub fn device_of(device_type: i32, device_id: i64, path: &str) -> Result<Device> {
    let known = u32::try_from(device_type)
        .ok()
        .map(|device_type| Device {
            device_type,
            device_id: 0,
        })
        .filter(|device| device.type_name() != "unknown");
    if let Some(device) = known.filter(|device| device.device_type > MAX_DEVICE_TYPE as u32) {
        return Err(malformed(
            format!("{path}.device_type"),
            format!(
                "is {device_type} ({}), a DLPack device type that the Arrow C \
             Device Data Interface does not define (it stops at 16, Hexagon)",
                device.type_name()
            ),
        ));
    }
    let Some(device) = known else {
        return Err(malformed(
            format!("{path}.device_type"),
            format!(
                "is {device_type}, which is no device type of the Arrow C Device \
             Data Interface (1 CPU, 2 CUDA, 3 CUDA host, 10 ROCm, ...)"
            ),
        ));
    };
    if device.is_cpu() {
        return match device_id {
            -1 | 0 => Ok(Device::CPU),
            _ => Err(malformed(
                format!("{path}.device_id"),
                format!("is {device_id}; expected -1 or 0 for the CPU"),
            )),
        };
    }
    match i32::try_from(device_id) {
        Ok(device_id) if device_id >= 0 => Ok(Device {
            device_id,
            ..device
        }),
        _ => Err(malformed(
            format!("{path}.device_id"),
            format!(
                "is {device_id}; expected a device index from 0 to 2^31 - 1 for {}",
                device.type_name()
            ),
        )),
    }
}

/// Imports an `ArrowDeviceArray` we own, described by `field` (read from its `ArrowSchema`):
/// CPU data as an Arrow chunk, device data as a [`DeviceTensor`], never read. The array is
/// released exactly once from then on.
pub fn import_device_array(field: FieldRef, array: ArrowDeviceArray) -> Result<DeviceImported> {
    if array.is_released() {
        return Err(malformed(
            "ArrowDeviceArray.array.release",
            "is NULL: the array has already been released or \
             moved",
        ));
    }
    Ok(
        match import_chunk(array, field.data_type(), "ArrowDeviceArray")? {
            Chunk::Host(chunk) => DeviceImported::Host(Imported {
                field,
                chunks: vec![chunk],
            }),
            Chunk::Device(array, device) => {
                DeviceImported::Device(device_tensor(array, &field, device)?)
            }
        },
    )
}

/// One checked chunk: imported when it is in host memory, kept (unread) otherwise.
enum Chunk {
    Host(arrow_array::ArrayRef),
    Device(ArrowDeviceArray, Device),
}

fn import_chunk(array: ArrowDeviceArray, data_type: &DataType, path: &str) -> Result<Chunk> {
    let device = device_of(array.device_type, array.device_id, path)?;
    if device.is_cpu() {
        let chunk = import_array(array.array, data_type, &format!("{path}.array"))?;
        return Ok(Chunk::Host(chunk));
    }
    Ok(Chunk::Device(array, device))
}

/// Reads a whole `ArrowDeviceArrayStream` we own, its schema read with `fields`
/// ([`crate::field_of_schema`] or a binding's own): CPU chunks as Arrow arrays, one device
/// chunk as a [`DeviceTensor`]. The stream is released once, when this returns.
pub fn import_device_stream(
    mut stream: ArrowDeviceArrayStream,
    fields: FieldOfSchema,
) -> Result<DeviceImported> {
    if stream.release.is_none() {
        return Err(malformed(
            "ArrowDeviceArrayStream.release",
            "is NULL: the stream has already been released or \
             consumed",
        ));
    }
    let stream_device = device_of(stream.device_type, 0, "ArrowDeviceArrayStream")?;
    let (Some(get_schema), Some(get_next)) = (stream.get_schema, stream.get_next) else {
        return Err(malformed(
            "ArrowDeviceArrayStream.get_schema",
            "or get_next is NULL",
        ));
    };
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: the stream is live and ours; `schema` is a released struct for it to fill, which we
    // own (and drop, releasing it).
    let status = unsafe { get_schema(&mut stream, &mut schema) };
    if status != 0 {
        return Err(ArrowCError::ProducerFailed {
            call: "ArrowDeviceArrayStream.get_schema",
            chunk: None,
            status,
            message: last_error(&mut stream),
        });
    }
    // SAFETY: filled by the producer; the checks read `release` first.
    let field = unsafe { fields(&schema, "ArrowSchema") }?;
    let mut host = Vec::new();
    let mut device = Vec::new();
    for index in 0.. {
        let mut array = ArrowDeviceArray::released();
        // SAFETY: the stream is live and ours; `array` is a released struct for it to fill.
        let status = unsafe { get_next(&mut stream, &mut array) };
        if status != 0 {
            return Err(ArrowCError::ProducerFailed {
                call: "ArrowDeviceArrayStream.get_next",
                chunk: Some(index),
                status,
                message: last_error(&mut stream),
            });
        }
        if array.is_released() {
            break;
        }
        let path = format!("ArrowDeviceArray (chunk {index})");
        if array.device_type != stream.device_type {
            return Err(malformed(
                format!("{path}.device_type"),
                format!(
                    "is {}, but the stream's device_type is {}",
                    array.device_type, stream.device_type
                ),
            ));
        }
        match import_chunk(array, field.data_type(), &path)? {
            Chunk::Host(chunk) => host.push(chunk),
            Chunk::Device(array, chunk_device) => device.push((array, chunk_device)),
        }
    }
    if stream_device.is_cpu() {
        return Ok(DeviceImported::Host(Imported {
            field,
            chunks: host,
        }));
    }
    if device.len() != 1 {
        return Err(ArrowCError::DeviceChunks {
            chunks: device.len(),
            device: stream_device,
        });
    }
    let (array, chunk_device) = device.remove(0);
    Ok(DeviceImported::Device(device_tensor(
        array,
        &field,
        chunk_device,
    )?))
}

/// The message of the stream's `get_last_error`, when it has one.
fn last_error(stream: &mut ArrowDeviceArrayStream) -> Option<String> {
    let get_last_error = stream.get_last_error?;
    // SAFETY: the stream is live and ours; the message, if any, is a C string valid until the
    // next call on the stream, copied at once.
    let message = unsafe { get_last_error(stream) };
    // SAFETY: NULL or a NUL-terminated string alive until the next call on the stream (above).
    unsafe { copied_message(message) }
}

#[cfg(test)]
mod tests;
