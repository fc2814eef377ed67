//! The Arrow C Device Data Interface through the PyCapsule protocol: `__arrow_c_device_array__`
//! (capsules `arrow_schema` and `arrow_device_array`) and `__arrow_c_device_stream__` (capsule
//! `arrow_device_array_stream`), both ways.
//!
//! Import:
//! - the device protocol is asked when a producer has no CPU protocol, or when its
//!   `__dlpack_device__` says the data is not on the CPU; otherwise the CPU protocol, the default
//!   request, is asked (`arrow_ffi`);
//! - the structs are moved out of their capsules and handed to `arrow-dlpack-c`, which checks
//!   each `ArrowDeviceArray` as an `ArrowArray` is, plus its device type and id, imports CPU
//!   arrays as ordinary Arrow arrays, and makes device arrays into device tensors without reading
//!   them; what it refuses as needing device memory is a `BufferError`;
//! - a device tensor keeps the producer's sync event for `__dlpack__(stream=...)`
//!   (`device_sync`), which refuses an event it could never wait on.
//!
//! Export: our arrays give CPU device arrays and streams (`device_id` `-1` and a NULL sync event,
//! as PyArrow does); a row-major tensor gives a primitive array (1-D) or an
//! `arrow.fixed_shape_tensor` array (n-D) on its own device, with its sync event (`export`).

use std::ffi::CStr;
use std::ptr::NonNull;

use arrow_dlpack_c::{ArrowDeviceArray, ArrowDeviceArrayStream, DeviceTensor};
use arrow_dlpack_tensor::Tensor;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrow_ffi::{self, Imported, Methods, Protocol};
use crate::device_sync::SyncEvent;
use crate::errors;
use crate::type_names::type_name;

mod export;

pub(crate) use export::{check_kwargs, cpu_array_capsule, cpu_stream_capsule, tensor_capsules};

pub(crate) const ARROW_DEVICE_ARRAY: &CStr = c"arrow_device_array";
pub(crate) const ARROW_DEVICE_ARRAY_STREAM: &CStr = c"arrow_device_array_stream";

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

/// Imports an (`arrow_schema`, `arrow_device_array`) capsule pair; the device array is moved out
/// of its capsule, and released exactly once from then on.
pub(crate) fn import_array(
    schema: &Bound<'_, PyAny>,
    array: &Bound<'_, PyAny>,
) -> PyResult<DeviceImported> {
    let field = arrow_ffi::checked_field(schema)?;
    let pointer = arrow_ffi::capsule_pointer::<ArrowDeviceArray>(array, ARROW_DEVICE_ARRAY)?;
    // SAFETY: an `arrow_device_array` capsule holds an `ArrowDeviceArray` (PyCapsule interface);
    // moving it out leaves a released struct behind, so the capsule's destructor does not release
    // it again, and the moved struct releases it once when dropped.
    let array = unsafe { ArrowDeviceArray::from_raw(pointer.as_ptr()) };
    if array.is_released() {
        return Err(errors::value_error(
            "malformed Arrow C data: ArrowDeviceArray.array.release is NULL: the \
             arrow_device_array capsule has already been consumed",
        ));
    }
    let imported =
        arrow_dlpack_c::import_device_array(field, array).map_err(errors::arrow_c_error)?;
    with_event(imported)
}

/// A device import as this package keeps it: a device tensor with its sync event, which is
/// refused (the tensor dropped, releasing the array) when it could never be waited on.
fn with_event(imported: arrow_dlpack_c::DeviceImported) -> PyResult<DeviceImported> {
    Ok(match imported {
        arrow_dlpack_c::DeviceImported::Host(imported) => DeviceImported::Host(imported),
        arrow_dlpack_c::DeviceImported::Device(DeviceTensor { tensor, sync_event }) => {
            let event =
                SyncEvent::from_ptr(sync_event.map_or(std::ptr::null_mut(), NonNull::as_ptr));
            crate::device_sync::check_event_device(tensor.device(), event)?;
            DeviceImported::Device(tensor, event)
        }
    })
}

/// Imports an `arrow_device_array_stream` capsule: CPU chunks as Arrow arrays, one device chunk
/// as a device tensor.
pub(crate) fn import_stream(capsule: &Bound<'_, PyAny>) -> PyResult<DeviceImported> {
    let pointer =
        arrow_ffi::capsule_pointer::<ArrowDeviceArrayStream>(capsule, ARROW_DEVICE_ARRAY_STREAM)?;
    // SAFETY: an `arrow_device_array_stream` capsule holds an `ArrowDeviceArrayStream`; moving it
    // out leaves a released struct behind, and the moved struct releases it once when dropped.
    let stream = unsafe { ArrowDeviceArrayStream::from_raw(pointer.as_ptr()) };
    let imported = arrow_dlpack_c::import_device_stream(stream, arrow_ffi::field_of_schema)
        .map_err(errors::arrow_c_error)?;
    with_event(imported)
}
