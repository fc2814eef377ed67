//! The Arrow C Device Data Interface through the PyCapsule protocol: `__arrow_c_device_array__`
//! (capsules `arrow_schema` and `arrow_device_array`) and `__arrow_c_device_stream__` (capsule
//! `arrow_device_array_stream`), both ways.
//!
//! Import:
//! - the device protocol is asked when a producer has no CPU protocol, or when its
//!   `__dlpack_device__` says the data is not on the CPU; otherwise the CPU protocol, the default
//!   request, is asked (`arrow_ffi`);
//! - each `ArrowDeviceArray` is checked as an `ArrowArray` is (`arrow_ffi_checks`), plus its
//!   device type (one that Arrow and `dlpack.h` name) and device id (`-1` or `0` for the CPU,
//!   `0..2^31` for a device);
//! - CPU arrays become ordinary Arrow arrays;
//! - non-CPU arrays are never read: a fixed-width numeric column, a fixed-size list of one, or an
//!   `arrow.fixed_shape_tensor` column becomes a device [`Tensor`] (through a
//!   `DLManagedTensorVersioned` that owns the Arrow array and releases it once), which keeps the
//!   producer's sync event for `__dlpack__(stream=...)` (`device_sync`); anything else, nulls
//!   that would have to be counted in device memory (`null_count == -1` with a validity bitmap),
//!   and several device chunks (joining them is a device copy) are refused with `BufferError`.
//!
//! Export: our arrays give CPU device arrays and streams (`device_id` `-1` and a NULL sync event,
//! as PyArrow does); a row-major tensor gives a primitive array (1-D) or an
//! `arrow.fixed_shape_tensor` array (n-D) on its own device, with its sync event.

use std::ffi::{CStr, c_char, c_int, c_void};

use arrow_array::ArrayRef;
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_dlpack_tensor::{Device, Tensor};
use arrow_schema::Field;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrow_ffi::{self, Imported, Methods, Protocol};
use crate::arrow_ffi_checks::ArrowCError;
use crate::device_sync::SyncEvent;
use crate::errors::{self, Operation};
use crate::type_names::type_name;

mod device_tensor;
mod export;

use device_tensor::device_tensor;

pub(crate) use export::{check_kwargs, cpu_array_capsule, cpu_stream_capsule, tensor_capsules};

pub(crate) const ARROW_DEVICE_ARRAY: &CStr = c"arrow_device_array";
pub(crate) const ARROW_DEVICE_ARRAY_STREAM: &CStr = c"arrow_device_array_stream";

/// `struct ArrowDeviceArray` of the C Device Data Interface.
#[repr(C)]
pub(crate) struct FfiDeviceArray {
    array: FFI_ArrowArray,
    device_id: i64,
    device_type: i32,
    sync_event: *mut c_void,
    reserved: [i64; 3],
}

const _: () = {
    assert!(size_of::<FfiDeviceArray>() == 128);
    assert!(std::mem::offset_of!(FfiDeviceArray, device_id) == 80);
    assert!(std::mem::offset_of!(FfiDeviceArray, device_type) == 88);
    assert!(std::mem::offset_of!(FfiDeviceArray, sync_event) == 96);
};

// SAFETY: the struct owns its array (whose release callback any thread may call, as the C Data
// Interface requires) and an opaque event pointer that is only handed on.
unsafe impl Send for FfiDeviceArray {}

impl FfiDeviceArray {
    /// A released struct: what a moved-out capsule holds, and what a stream's end is.
    fn released() -> Self {
        FfiDeviceArray {
            array: FFI_ArrowArray::empty(),
            device_id: 0,
            device_type: 0,
            sync_event: std::ptr::null_mut(),
            reserved: [0; 3],
        }
    }

    /// `array` on `device`, ready when the event `sync_event` points to has fired (NULL: ready).
    /// The CPU is device `-1`, as in PyArrow.
    fn new(array: FFI_ArrowArray, device: Device, sync_event: *mut c_void) -> Self {
        FfiDeviceArray {
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
}

type GetSchema = unsafe extern "C" fn(*mut FfiDeviceStream, *mut FFI_ArrowSchema) -> c_int;
type GetNext = unsafe extern "C" fn(*mut FfiDeviceStream, *mut FfiDeviceArray) -> c_int;
type GetLastError = unsafe extern "C" fn(*mut FfiDeviceStream) -> *const c_char;
type Release = unsafe extern "C" fn(*mut FfiDeviceStream);

/// `struct ArrowDeviceArrayStream` of the C Device Data Interface.
#[repr(C)]
pub(crate) struct FfiDeviceStream {
    device_type: i32,
    get_schema: Option<GetSchema>,
    get_next: Option<GetNext>,
    get_last_error: Option<GetLastError>,
    release: Option<Release>,
    private_data: *mut c_void,
}

// SAFETY: as for `FfiDeviceArray`: the stream is owned, and its callbacks are called by one
// consumer at a time.
unsafe impl Send for FfiDeviceStream {}

impl FfiDeviceStream {
    fn released() -> Self {
        FfiDeviceStream {
            device_type: 0,
            get_schema: None,
            get_next: None,
            get_last_error: None,
            release: None,
            private_data: std::ptr::null_mut(),
        }
    }
}

impl Drop for FfiDeviceStream {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: a stream we own whose release is set is live; the callback marks it
            // released, so it runs once.
            unsafe { release(self) };
        }
    }
}

/// What a device import gives: ordinary Arrow chunks for CPU data, a device tensor otherwise.
pub(crate) enum DeviceImported {
    Host(Imported),
    Device(Tensor, SyncEvent),
}

/// Imports the object whose protocol methods `methods` gives through the device protocol when
/// that is the one to ask (see the module documentation); `None` when the CPU protocol is to be
/// asked instead.
pub(crate) fn import_with(methods: &Methods<'_, '_>) -> PyResult<Option<DeviceImported>> {
    errors::no_panic("importing Arrow C device data", || {
        import_unguarded(methods)
    })
}

fn import_unguarded(methods: &Methods<'_, '_>) -> PyResult<Option<DeviceImported>> {
    // A producer without device protocols (polars, nanoarrow, `pa.ChunkedArray`) costs two
    // absent attributes, and a CPU one with both (`pa.Array`) a `__dlpack_device__` call; the
    // types of both are usually answered from a table (`arrow_ffi::Methods`).
    if !methods.has(Protocol::ArrowCDeviceArray)? && !methods.has(Protocol::ArrowCDeviceStream)? {
        return Ok(None);
    }
    if !off_cpu(methods)? && has_cpu_protocol(methods)? {
        return Ok(None);
    }
    if let Some(capsule) = methods.call0(Protocol::ArrowCDeviceStream)? {
        return import_stream(&capsule).map(Some);
    }
    let Some(capsules) = methods.call0(Protocol::ArrowCDeviceArray)? else {
        return Ok(None);
    };
    let pair = capsules
        .cast::<PyTuple>()
        .ok()
        .filter(|pair| pair.len() == 2);
    let Some(pair) = pair else {
        return Err(errors::type_error(format!(
            "{}.__arrow_c_device_array__() returned {}; expected a (schema, device array) tuple \
             of two capsules",
            type_name(methods.object()),
            type_name(&capsules)
        )));
    };
    import_array(&pair.get_item(0)?, &pair.get_item(1)?).map(Some)
}

/// Whether the object has `__arrow_c_array__` or `__arrow_c_stream__`.
fn has_cpu_protocol(methods: &Methods<'_, '_>) -> PyResult<bool> {
    Ok(methods.has(Protocol::ArrowCArray)? || methods.has(Protocol::ArrowCStream)?)
}

/// Whether the producer says, through `__dlpack_device__`, that its data is not on the CPU; a
/// producer without it, or whose answer is not a pair of integers, is taken to be on the CPU.
fn off_cpu(methods: &Methods<'_, '_>) -> PyResult<bool> {
    if !methods.has(Protocol::DlpackDevice)? {
        return Ok(false);
    }
    Ok(methods
        .call0(Protocol::DlpackDevice)
        .and_then(|device| {
            device
                .map(|device| match crate::protocols::exact_int_pair(&device) {
                    Some(pair) => Ok(pair),
                    None => device.extract::<(i64, i64)>(),
                })
                .transpose()
        })
        .is_ok_and(|device| device.is_some_and(|(device_type, _)| device_type != 1)))
}

/// Imports any Arrow producer for an operation that reads the data, zero-copy: through the
/// device protocols where [`import_host`] takes them, else through the CPU protocols
/// ([`arrow_ffi::import_cpu_with`]).
pub(crate) fn import_readable(object: &Bound<'_, PyAny>) -> PyResult<Imported> {
    let methods = Methods::of(object);
    if let Some(imported) = import_host(&methods)? {
        return Ok(imported);
    }
    arrow_ffi::import_cpu_with(&methods)
}

/// Imports for an operation that reads the data: CPU device data as Arrow chunks, device memory
/// refused with `BufferError`; `None` when the CPU protocol is to be asked instead.
pub(crate) fn import_host(methods: &Methods<'_, '_>) -> PyResult<Option<Imported>> {
    let object = methods.object();
    match import_with(methods)? {
        None => Ok(None),
        Some(DeviceImported::Host(imported)) => Ok(Some(imported)),
        Some(DeviceImported::Device(tensor, _)) => Err(errors::buffer_error(format!(
            "{} holds Arrow data on {} device {}, and this operation reads the data, which \
             arrow_dlpack does only in host memory; ad.array() keeps it on the device as a Tensor",
            type_name(object),
            tensor.device().type_name(),
            tensor.device().device_id
        ))),
    }
}

/// The device a struct's `device_type` and `device_id` name, checked.
fn device_of(device_type: i32, device_id: i64, path: &str) -> Result<Device, ArrowCError> {
    let known = u32::try_from(device_type)
        .ok()
        .map(|device_type| Device {
            device_type,
            device_id: 0,
        })
        .filter(|device| device.type_name() != "unknown");
    if let Some(device) = known.filter(|device| device.device_type > 16) {
        return Err(ArrowCError::Malformed(format!(
            "{path}.device_type is {device_type} ({}), a DLPack device type that the Arrow C \
             Device Data Interface does not define (it stops at 16, Hexagon)",
            device.type_name()
        )));
    }
    let Some(device) = known else {
        return Err(ArrowCError::Malformed(format!(
            "{path}.device_type is {device_type}, which is no device type of the Arrow C Device \
             Data Interface (1 CPU, 2 CUDA, 3 CUDA host, 10 ROCm, ...)"
        )));
    };
    if device.is_cpu() {
        return match device_id {
            -1 | 0 => Ok(Device::CPU),
            _ => Err(ArrowCError::Malformed(format!(
                "{path}.device_id is {device_id}; expected -1 or 0 for the CPU"
            ))),
        };
    }
    match i32::try_from(device_id) {
        Ok(device_id) if device_id >= 0 => Ok(Device {
            device_id,
            ..device
        }),
        _ => Err(ArrowCError::Malformed(format!(
            "{path}.device_id is {device_id}; expected a device index from 0 to 2^31 - 1 for {}",
            device.type_name()
        ))),
    }
}

/// Imports an (`arrow_schema`, `arrow_device_array`) capsule pair; the device array is moved out
/// of its capsule, and released exactly once from then on.
pub(crate) fn import_array(
    schema: &Bound<'_, PyAny>,
    array: &Bound<'_, PyAny>,
) -> PyResult<DeviceImported> {
    let field = arrow_ffi::checked_field(schema)?;
    let pointer = arrow_ffi::capsule_pointer::<FfiDeviceArray>(array, ARROW_DEVICE_ARRAY)?;
    // SAFETY: an `arrow_device_array` capsule holds an `ArrowDeviceArray` (PyCapsule interface);
    // moving it out leaves a released struct behind, so the capsule's destructor does not release
    // it again, and the moved struct releases it once when dropped.
    let array = unsafe { std::ptr::replace(pointer.as_ptr(), FfiDeviceArray::released()) };
    if array.array.is_released() {
        return Err(errors::value_error(
            "malformed Arrow C data: ArrowDeviceArray.array.release is NULL: the \
             arrow_device_array capsule has already been consumed",
        ));
    }
    let chunk = import_chunk(array, &field, "ArrowDeviceArray")?;
    Ok(match chunk {
        Chunk::Host(chunk) => DeviceImported::Host(Imported {
            field,
            chunks: vec![chunk],
        }),
        Chunk::Device(array, device) => {
            let (tensor, event) = device_tensor(array, &field, device)?;
            DeviceImported::Device(tensor, event)
        }
    })
}

/// One checked chunk: imported when it is in host memory, kept (unread) otherwise.
enum Chunk {
    Host(ArrayRef),
    Device(FfiDeviceArray, Device),
}

fn import_chunk(array: FfiDeviceArray, field: &Field, path: &str) -> PyResult<Chunk> {
    let device =
        device_of(array.device_type, array.device_id, path).map_err(errors::arrow_c_error)?;
    if device.is_cpu() {
        let chunk = arrow_ffi::import_checked_array(
            array.array,
            field.data_type(),
            &format!("{path}.array"),
        )
        .map_err(errors::arrow_c_error)?;
        return Ok(Chunk::Host(chunk));
    }
    Ok(Chunk::Device(array, device))
}

/// Imports an `arrow_device_array_stream` capsule: CPU chunks as Arrow arrays, one device chunk
/// as a device tensor.
pub(crate) fn import_stream(capsule: &Bound<'_, PyAny>) -> PyResult<DeviceImported> {
    let pointer =
        arrow_ffi::capsule_pointer::<FfiDeviceStream>(capsule, ARROW_DEVICE_ARRAY_STREAM)?;
    // SAFETY: an `arrow_device_array_stream` capsule holds an `ArrowDeviceArrayStream`; moving it
    // out leaves a released struct behind, and the moved struct releases it once when dropped.
    let mut stream = unsafe { std::ptr::replace(pointer.as_ptr(), FfiDeviceStream::released()) };
    let malformed = |message: String| errors::arrow_c_error(ArrowCError::Malformed(message));
    if stream.release.is_none() {
        return Err(malformed(
            "ArrowDeviceArrayStream.release is NULL: the stream has already been released or \
             consumed"
                .into(),
        ));
    }
    let stream_device = device_of(stream.device_type, 0, "ArrowDeviceArrayStream")
        .map_err(errors::arrow_c_error)?;
    let (Some(get_schema), Some(get_next)) = (stream.get_schema, stream.get_next) else {
        return Err(malformed(
            "ArrowDeviceArrayStream.get_schema or get_next is NULL".into(),
        ));
    };
    let mut schema = FFI_ArrowSchema::empty();
    // SAFETY: the stream is live and ours; `schema` is a released struct for it to fill, which we
    // own (and drop, releasing it).
    let status = unsafe { get_schema(&mut stream, &mut schema) };
    if status != 0 {
        return Err(malformed(format!(
            "ArrowDeviceArrayStream.get_schema failed with error {status}{}",
            last_error(&mut stream)
        )));
    }
    // SAFETY: filled by the producer; `check_schema` reads `release` first.
    let field = unsafe { arrow_ffi::field_of_schema(&schema, "ArrowSchema") }
        .map_err(errors::arrow_c_error)?;
    let mut host = Vec::new();
    let mut device = Vec::new();
    for index in 0.. {
        let mut array = FfiDeviceArray::released();
        // SAFETY: the stream is live and ours; `array` is a released struct for it to fill.
        let status = unsafe { get_next(&mut stream, &mut array) };
        if status != 0 {
            return Err(malformed(format!(
                "ArrowDeviceArrayStream.get_next failed with error {status} at chunk \
                 {index}{}",
                last_error(&mut stream)
            )));
        }
        if array.array.is_released() {
            break;
        }
        let path = format!("ArrowDeviceArray (chunk {index})");
        if array.device_type != stream.device_type {
            return Err(malformed(format!(
                "{path}.device_type is {}, but the stream's device_type is {}",
                array.device_type, stream.device_type
            )));
        }
        match import_chunk(array, &field, &path)? {
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
        return Err(errors::buffer_error(format!(
            "the ArrowDeviceArrayStream holds {} chunks on {} devices: arrow_dlpack keeps device \
             data as one tensor, and joining chunks (or making an empty one) would need a device \
             copy; expected one chunk",
            device.len(),
            stream_device.type_name()
        )));
    }
    let (array, chunk_device) = device.remove(0);
    let (tensor, event) = device_tensor(array, &field, chunk_device)?;
    Ok(DeviceImported::Device(tensor, event))
}

/// `": message"` from the stream's `get_last_error`, or nothing.
fn last_error(stream: &mut FfiDeviceStream) -> String {
    let Some(get_last_error) = stream.get_last_error else {
        return String::new();
    };
    // SAFETY: the stream is live and ours; the message, if any, is a C string valid until the
    // next call on the stream, copied at once.
    let message = unsafe { get_last_error(stream) };
    if message.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL and NUL-terminated (above).
    format!(": {}", unsafe { CStr::from_ptr(message) }.to_string_lossy())
}

#[cfg(test)]
mod tests;
