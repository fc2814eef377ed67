//! The consumer side of the Python DLPack protocol: any producer (or capsule) becomes a [`Tensor`].
//!
//! dlpark's `from_dlpack` does not retry producers that reject `max_version` (JAX is legacy-only)
//! and maps capsule errors to exception types of its own choosing, so the negotiation lives here:
//!
//! 1. `device` may be `None` (keep the producer's), `"cpu"` or a `(device_type, device_id)` pair,
//!    which the data must already be on; Arrow arrays accept the CPU only, a `Tensor` any device
//!    `dlpack.h` names (its memory is kept, never read);
//! 2. a producer that publishes the DLPack C exchange API (PyTorch) is asked through it when
//!    `copy` is None (it has no `copy` argument), instead of steps 4 and 5;
//! 3. a producer whose `__dlpack_device__` is not a device the import accepts (or not the one
//!    requested) is refused before it is asked to export;
//! 4. `__dlpack__(max_version=(1, 3), copy=...)` is called (`copy=True` for device data only),
//!    with `stream=` the device's default stream for CUDA and ROCm data (1 and 0, the array API's
//!    choice for a consumer without streams of its own), so that the producer orders its work
//!    before that stream; when the producer raises `TypeError` (a legacy producer) it is called
//!    again with `stream=` alone, then without keywords, and the tensor then records that when
//!    its producer's work is done is unknown (`device_sync::SyncEvent`);
//! 5. the capsule is consumed exactly once and its tensor handed to [`Tensor::from_raw_versioned`]
//!    or [`Tensor::from_raw_legacy`], which own it from then on;
//! 6. `copy=True` is honoured here, with a row-major copy, for CPU data (the producer is not asked
//!    to copy it: our copy goes into the warm-page pool) and when a producer did not copy (legacy
//!    capsules cannot say) or copied into another layout.

use arrow_dlpack_tensor::{Device, ImportOptions, Tensor};
use dlpack_sys::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_EXCHANGE_API, DLPACK_EXCHANGE_API_ATTRIBUTE,
    DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLTENSOR, DLTENSOR_VERSIONED, DlpackFlags,
    USED_DLTENSOR, USED_DLTENSOR_VERSIONED,
};
use dlpark::python::consumer::exchange::ExchangeApi;
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyCapsule, PyCapsuleMethods, PyTuple};

use crate::arrow_ffi::{Methods, Protocol};
use crate::device_sync::{self, SyncEvent};
use crate::py_tensor::PyTensor;
use crate::type_names::type_name;
use crate::{copies, errors, protocols};

/// Imports any DLPack producer, or an unconsumed DLPack capsule, as a [`Tensor`] in host memory
/// (`devices` is [`Devices::Cpu`]), or on any device ([`Devices::Any`], which drops what the
/// consumers of device data must wait for: use [`import_device_tensor`] for device data).
///
/// `copy` follows the Python array API: `Some(true)` returns memory that no one else references
/// (row-major, as `Tensor.from_dlpack` documents),
/// `Some(false)` refuses a producer that copied, `None` takes what the producer gives.
pub(crate) fn import_tensor(
    object: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
    devices: Devices,
) -> PyResult<Tensor> {
    errors::no_panic("importing a DLPack tensor", || {
        import_tensor_unguarded(object, device, copy, devices)
    })
    .map(|(tensor, _)| tensor)
}

/// Imports any DLPack producer or capsule, on any device, with what its consumers must wait for
/// before they touch its memory (see the module documentation, step 4).
pub(crate) fn import_device_tensor(
    object: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<(Tensor, SyncEvent)> {
    errors::no_panic("importing a DLPack tensor", || {
        import_tensor_unguarded(object, device, copy, Devices::Any)
    })
}

/// The devices an import accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Devices {
    /// Host memory only: what becomes an Arrow array, or is read.
    Cpu,
    /// Any device `dlpack.h` names: a `Tensor` keeps device memory without touching it.
    Any,
}

fn import_tensor_unguarded(
    object: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
    devices: Devices,
) -> PyResult<(Tensor, SyncEvent)> {
    let requested = requested_device(device, devices)?;
    let options = ImportOptions {
        any_device: devices == Devices::Any,
    };
    // A bare capsule says nothing of the stream it was made for.
    let mut stream_passed = false;
    let mut ours_event = None;
    let (tensor, copied) = if let Ok(capsule) = object.cast::<PyCapsule>() {
        consume_capsule(capsule, options)?
    } else if let Some((ours, event)) = our_device_tensor(object, devices, copy) {
        // One of our device tensors keeps what its consumers wait for: asked through
        // `__dlpack__(stream=1)`, it would have to order a stream it was never given.
        ours_event = Some(event);
        (ours, false)
    } else {
        // The protocol attributes, from a per-type table where the type fixes them.
        let methods = Methods::of(object);
        let through_exchange = match exchange_api(&methods, copy)? {
            // The exchange API's "no sync" import leaves the ordering on a device stream to the
            // consumer, which has no stream of its own: device tensors take `__dlpack__`, whose
            // producer orders its work before handing the capsule out.
            Some(api) => match import_through_exchange_api(object, &api) {
                Err(error)
                    if devices == Devices::Any
                        && error.is_instance_of::<pyo3::exceptions::PyBufferError>(object.py()) =>
                {
                    None
                }
                imported => Some(imported?),
            },
            None => None,
        };
        match through_exchange {
            Some(imported) => imported,
            None => {
                let (capsule, passed) = request_capsule(&methods, copy, devices, requested)?;
                stream_passed = passed;
                let Ok(capsule) = capsule.cast::<PyCapsule>() else {
                    return Err(errors::type_error(format!(
                        "{}.__dlpack__() returned {}; expected a PyCapsule",
                        type_name(object),
                        type_name(&capsule)
                    )));
                };
                consume_capsule(capsule, options)?
            }
        }
    };
    if let Some(requested) = requested
        && tensor.device() != requested
    {
        return Err(errors::buffer_error(format!(
            "the data is on DLPack device ({}, {}) and device=({}, {}) was requested: that would \
             need a device move, which arrow_dlpack does not make",
            tensor.device().device_type,
            tensor.device().device_id,
            requested.device_type,
            requested.device_id
        )));
    }
    let sync_event = ours_event
        .unwrap_or_else(|| device_sync::after_dlpack_import(tensor.device(), stream_passed));
    let tensor = match copy {
        // `copy=True` promises memory no one else references, laid out row-major; a producer's
        // copy may keep its source's layout (numpy copies a Fortran-ordered view as such).
        Some(true) if !copied || !tensor.is_row_major() => {
            copies::without_gil_if_large(object.py(), copies::tensor_bytes(&tensor), || {
                tensor.to_contiguous()
            })
            .map_err(errors::tensor_error)?
        }
        Some(false) if copied => {
            return Err(errors::buffer_error(format!(
                "{} copied its data although copy=False was requested",
                type_name(object)
            )));
        }
        _ => tensor,
    };
    Ok((tensor, sync_event))
}

/// The tensor of one of our `Tensor`s on a device, shared, and what its consumers wait for, when
/// a device import asks for it without a copy; `None` for anything else, which takes the
/// protocol.
fn our_device_tensor(
    object: &Bound<'_, PyAny>,
    devices: Devices,
    copy: Option<bool>,
) -> Option<(Tensor, SyncEvent)> {
    let ours = object.cast::<PyTensor>().ok()?.get();
    let tensor = ours.tensor();
    (devices == Devices::Any && copy != Some(true) && !tensor.device().is_cpu())
        .then(|| (tensor.clone(), ours.sync_event))
}

/// The producer's DLPack C exchange API, used when `copy` is None (the API has no `copy`).
fn exchange_api(methods: &Methods<'_, '_>, copy: Option<bool>) -> PyResult<Option<ExchangeApi>> {
    if copy.is_some() || methods.known_absent(Protocol::DlpackExchangeApi) {
        return Ok(None);
    }
    let object = methods.object();
    let api = match ExchangeApi::from_object(object.as_borrowed()) {
        Ok(api) => api,
        // The table is an optional accelerator: an attribute that is not a `dlpack_exchange_api`
        // capsule (None, say) is no table, and the producer's `__dlpack__` is asked instead.
        Err(_) if !has_exchange_capsule(object) => None,
        Err(error) => return Err(error),
    };
    if api.is_none() {
        protocols::remember_absent(object, DLPACK_EXCHANGE_API_ATTRIBUTE);
    }
    Ok(api)
}

/// Whether `object`'s type holds a capsule named `dlpack_exchange_api` under the exchange
/// attribute (where the protocol puts it: on the type).
fn has_exchange_capsule(object: &Bound<'_, PyAny>) -> bool {
    object
        .get_type()
        .getattr(DLPACK_EXCHANGE_API_ATTRIBUTE)
        .ok()
        .is_some_and(|attribute| {
            attribute
                .cast::<PyCapsule>()
                .is_ok_and(|capsule| capsule.is_valid_checked(Some(DLPACK_EXCHANGE_API)))
        })
}

/// Imports through a producer's DLPack C exchange API (PyTorch, this package), which skips the
/// Python `__dlpack__` call and the capsule.
fn import_through_exchange_api(
    object: &Bound<'_, PyAny>,
    api: &ExchangeApi,
) -> PyResult<(Tensor, bool)> {
    // The producer's `__dlpack_device__` is not asked here (for PyTorch it costs half of the
    // exchange): the tensor crate refuses a tensor that is not on the CPU, deleter run and all.
    crate::counters::count_import();
    // The CPU has no streams, so the producer's work stream needs no ordering.
    let (managed, _stream) = api
        .import_managed_no_sync(object.as_borrowed())?
        .into_parts();
    let copied = managed.flags().contains(DlpackFlags::IS_COPIED);
    let tensor = Tensor::from_managed(managed).map_err(errors::tensor_error)?;
    Ok((tensor, copied))
}

/// The `device` argument of `from_dlpack`: `None` keeps the producer's device, `"cpu"` or a
/// `(device_type, device_id)` pair asks for that device, which the data must already be on.
fn requested_device(
    device: Option<&Bound<'_, PyAny>>,
    devices: Devices,
) -> PyResult<Option<Device>> {
    let Some(device) = device.filter(|device| !device.is_none()) else {
        return Ok(None);
    };
    let requested = if let Ok(name) = device.extract::<String>() {
        name.eq_ignore_ascii_case("cpu").then_some(Device::CPU)
    } else {
        device
            .extract::<(u32, i32)>()
            .ok()
            .map(|(device_type, device_id)| Device {
                device_type,
                device_id,
            })
    };
    match (requested, devices) {
        (Some(requested), Devices::Any) => Ok(Some(requested)),
        (Some(requested), Devices::Cpu) if requested == Device::CPU => Ok(Some(requested)),
        _ => {
            let expected = match devices {
                Devices::Cpu => "None, \"cpu\" or (1, 0): Arrow arrays hold CPU data only",
                Devices::Any => "None, \"cpu\" or a (device_type, device_id) pair",
            };
            Err(errors::buffer_error(format!(
                "unsupported device {}; expected {expected}",
                device
                    .repr()
                    .map_or_else(|_| "?".into(), |repr| repr.to_string())
            )))
        }
    }
}

/// Asks a producer for a capsule: versioned first, then legacy when it rejects the keywords; and
/// whether the producer took the `stream` of [`device_sync::import_stream`] (always `false` for
/// data on the CPU or a device without streams).
fn request_capsule<'py>(
    methods: &Methods<'_, 'py>,
    copy: Option<bool>,
    devices: Devices,
    requested: Option<Device>,
) -> PyResult<(Bound<'py, PyAny>, bool)> {
    let object = methods.object();
    let py = object.py();
    if !methods.has(Protocol::Dlpack)? {
        return Err(errors::type_error(format!(
            "{} does not support the DLPack protocol: it has no __dlpack__ method",
            type_name(object)
        )));
    }
    let device = check_producer_device(methods, devices, requested)?;
    // A copy of CPU data is made here, after the import (`to_contiguous`: into the warm-page pool,
    // without the GIL when large, row-major): asked for a copy, the producer would write it into
    // fresh memory of its own, whose pages fault on first write. Device data is copied by its
    // producer, as no host code may read it.
    let copy = match copy {
        Some(true) if device.is_some_and(|device| device.is_cpu()) => None,
        copy => copy,
    };
    let stream = device.and_then(device_sync::import_stream);
    let missing = || errors::type_error("__dlpack__ disappeared during the import");
    match call_dlpack(methods, copy, stream) {
        // `has` said the method exists, and a table or this import's lookup keeps it.
        Ok(capsule) => return Ok((capsule.ok_or_else(missing)?, stream.is_some())),
        // A producer that predates DLPack 1.0 (JAX) rejects the keywords with a TypeError; a
        // producer whose TypeError is real (nulls, say) raises it again on the plain call.
        Err(error) if error.is_instance_of::<PyTypeError>(py) => {}
        Err(error) => return Err(error),
    }
    if let Some(stream) = stream {
        // A producer of the array API before DLPack 1.0 takes `stream` alone.
        let stream = stream.into_pyobject(py)?;
        match methods.call_keywords(
            Protocol::Dlpack,
            &PyTuple::new(py, [intern!(py, "stream")])?,
            &[stream.as_any()],
        ) {
            Ok(capsule) => return Ok((capsule.ok_or_else(missing)?, true)),
            Err(error) if error.is_instance_of::<PyTypeError>(py) => {}
            Err(error) => return Err(error),
        }
    }
    // The plain call: the producer orders its work before nothing known.
    Ok((methods.call0(Protocol::Dlpack)?.ok_or_else(missing)?, false))
}

/// `__dlpack__(stream=..., max_version=(1, 3), copy=...)`, `stream` and `copy` when given: the
/// keyword names and the version are made once, and passed by vectorcall
/// (`Methods::call_keywords`).
fn call_dlpack<'py>(
    methods: &Methods<'_, 'py>,
    copy: Option<bool>,
    stream: Option<i64>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    struct Keywords {
        version: Py<PyTuple>,
        max_version: Py<PyTuple>,
        max_version_copy: Py<PyTuple>,
        stream_max_version: Py<PyTuple>,
        stream_max_version_copy: Py<PyTuple>,
    }
    static KEYWORDS: PyOnceLock<Keywords> = PyOnceLock::new();
    let py = methods.object().py();
    let keywords = KEYWORDS.get_or_try_init(py, || -> PyResult<_> {
        // Interned, as CPython's and numpy's keyword parsers compare names by address first.
        let (stream, max_version, copy) = (
            intern!(py, "stream"),
            intern!(py, "max_version"),
            intern!(py, "copy"),
        );
        Ok(Keywords {
            version: PyTuple::new(py, [DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION])?.unbind(),
            max_version: PyTuple::new(py, [max_version])?.unbind(),
            max_version_copy: PyTuple::new(py, [max_version, copy])?.unbind(),
            stream_max_version: PyTuple::new(py, [stream, max_version])?.unbind(),
            stream_max_version_copy: PyTuple::new(py, [stream, max_version, copy])?.unbind(),
        })
    })?;
    let version = keywords.version.bind(py).as_any();
    let copy = copy.map(|copy| PyBool::new(py, copy).to_owned());
    let stream = stream.map(|stream| stream.into_pyobject(py)).transpose()?;
    match (stream, copy) {
        (None, None) => {
            methods.call_keywords(Protocol::Dlpack, keywords.max_version.bind(py), &[version])
        }
        (None, Some(copy)) => methods.call_keywords(
            Protocol::Dlpack,
            keywords.max_version_copy.bind(py),
            &[version, copy.as_any()],
        ),
        (Some(stream), None) => methods.call_keywords(
            Protocol::Dlpack,
            keywords.stream_max_version.bind(py),
            &[stream.as_any(), version],
        ),
        (Some(stream), Some(copy)) => methods.call_keywords(
            Protocol::Dlpack,
            keywords.stream_max_version_copy.bind(py),
            &[stream.as_any(), version, copy.as_any()],
        ),
    }
}

/// Refuses, before it exports anything, a producer whose data is on a device the import does not
/// accept (another device than the CPU for an Arrow array) or than the one requested; otherwise
/// the producer's device, when it says (a legacy producer may have no `__dlpack_device__`).
fn check_producer_device(
    methods: &Methods<'_, '_>,
    devices: Devices,
    requested: Option<Device>,
) -> PyResult<Option<Device>> {
    let object = methods.object();
    // Legacy producers may lack it; the imported tensor's device is checked anyway.
    let Some(answer) = methods.call0(Protocol::DlpackDevice)? else {
        return Ok(None);
    };
    let exact = crate::protocols::exact_int_pair(&answer).and_then(|(device_type, device_id)| {
        Some((
            u32::try_from(device_type).ok()?,
            i32::try_from(device_id).ok()?,
        ))
    });
    let extracted = match exact {
        Some(pair) => Ok(pair),
        None => answer.extract::<(u32, i32)>(),
    };
    let (device_type, device_id) = extracted.map_err(|_| {
        errors::type_error(format!(
            "{}.__dlpack_device__() returned {}; expected a (device_type, device_id) tuple of \
             two integers",
            type_name(object),
            answer
                .repr()
                .map_or_else(|_| type_name(&answer), |repr| repr.to_string())
        ))
    })?;
    let found = Device {
        device_type,
        device_id,
    };
    if devices == Devices::Cpu && !found.is_cpu() {
        return Err(errors::buffer_error(format!(
            "{} holds data on DLPack device ({device_type}, {device_id}); expected the CPU \
             (1, 0): Arrow arrays hold CPU data only",
            type_name(object)
        )));
    }
    if let Some(requested) = requested
        && requested != found
    {
        return Err(errors::buffer_error(format!(
            "{} holds data on DLPack device ({device_type}, {device_id}) and device=({}, {}) was \
             requested: that would need a device move, which arrow_dlpack does not make",
            type_name(object),
            requested.device_type,
            requested.device_id
        )));
    }
    Ok(Some(found))
}

/// Consumes a DLPack capsule: renames it so that no one consumes it again, and hands its managed
/// tensor to the tensor crate, which runs the deleter exactly once (on error, before returning).
///
/// Returns the tensor and whether the producer flagged it `IS_COPIED`.
fn consume_capsule(
    capsule: &Bound<'_, PyCapsule>,
    options: ImportOptions,
) -> PyResult<(Tensor, bool)> {
    if capsule.is_valid_checked(Some(DLTENSOR_VERSIONED)) {
        let pointer = take_pointer(capsule, DLTENSOR_VERSIONED, USED_DLTENSOR_VERSIONED)?;
        let managed = pointer.cast::<DLManagedTensorVersioned>();
        // SAFETY: a capsule named `dltensor_versioned` holds an owned `DLManagedTensorVersioned`
        // (DLPack Python specification); the rename above transferred its ownership to us, and
        // `flags` is only read when the major version says the layout is the one we know.
        let copied = unsafe {
            (*managed).version.major == DLPACK_MAJOR_VERSION
                && (*managed).flags.contains(DlpackFlags::IS_COPIED)
        };
        // SAFETY: as above: we own the tensor, and its producer keeps shape, strides and data
        // valid until its deleter runs, which the tensor crate does exactly once.
        let tensor = unsafe { Tensor::from_raw_versioned_with(managed, options) };
        return Ok((tensor.map_err(errors::tensor_error)?, copied));
    }
    if capsule.is_valid_checked(Some(DLTENSOR)) {
        let pointer = take_pointer(capsule, DLTENSOR, USED_DLTENSOR)?;
        // SAFETY: a capsule named `dltensor` holds an owned legacy `DLManagedTensor`; the rename
        // transferred its ownership to us, and the tensor crate runs its deleter exactly once.
        let tensor =
            unsafe { Tensor::from_raw_legacy_with(pointer.cast::<DLManagedTensor>(), options) };
        return Ok((tensor.map_err(errors::tensor_error)?, false));
    }
    if capsule.is_valid_checked(Some(USED_DLTENSOR_VERSIONED))
        || capsule.is_valid_checked(Some(USED_DLTENSOR))
    {
        return Err(errors::value_error(
            "the DLPack capsule has already been consumed; a capsule can be imported only once",
        ));
    }
    let name = capsule
        .name()
        .ok()
        .flatten()
        // SAFETY: the name pointer of a live capsule is a valid C string while the capsule lives,
        // and it is copied at once.
        .map(|name| unsafe { name.as_cstr() }.to_string_lossy().into_owned());
    let found = match name {
        Some(name) => format!("named \"{name}\""),
        None => "unnamed".to_string(),
    };
    Err(errors::type_error(format!(
        "the capsule is {found}; expected a DLPack capsule named \"dltensor_versioned\" or \
         \"dltensor\""
    )))
}

/// Reads the pointer of a capsule named `name` and renames the capsule `used`.
fn take_pointer(
    capsule: &Bound<'_, PyCapsule>,
    name: &'static std::ffi::CStr,
    used: &'static std::ffi::CStr,
) -> PyResult<*mut std::ffi::c_void> {
    let pointer = capsule.pointer_checked(Some(name))?;
    // SAFETY: `capsule` is a live capsule object and `used` is a static C string, as
    // `PyCapsule_SetName` requires; the capsule keeps the name pointer, which lives forever.
    let status = unsafe { pyo3::ffi::PyCapsule_SetName(capsule.as_ptr(), used.as_ptr()) };
    if status != 0 {
        return Err(PyErr::fetch(capsule.py()));
    }
    Ok(pointer.as_ptr())
}
