//! The producer side of the Python DLPack protocol: `__dlpack__` arguments and capsules.
//!
//! This is the most frequent call of the package, so it is kept lean: the arguments are read
//! without building Rust tuples, the tensor crate builds each managed tensor in one allocation
//! (header, buffer reference, shape and strides), and the capsule is made here, whose destructor
//! releases an unconsumed tensor exactly once.
//! dlpark's `export_dlpack` is not used: it refuses `copy=True` and refuses legacy capsules for
//! read-only data (legacy capsules have no flags), which would lock JAX out of Arrow data.

use std::borrow::Cow;
use std::ffi::CStr;

use arrow_dlpack_tensor::{Device, ExportOptions, Tensor};
use dlpack_sys::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_MAJOR_VERSION, DLTENSOR, DLTENSOR_VERSIONED,
};
use dlpark::python::ExportAbi;
use dlpark::{Managed, ManagedTensorBase};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

use crate::device_sync::SyncEvent;
use crate::{copies, errors};

/// An object of this package that DLPack exports.
///
/// `__dlpack__` and the DLPack C exchange API both ask it for the tensor of one export, so the
/// two paths cannot drift apart.
pub(crate) trait DlpackSource {
    /// The tensor of one export (borrowed when it is the object's own), and whether it is a copy
    /// made for that export alone (unpacked booleans, concatenated chunks); copies are made only
    /// when `allow_copy`.
    fn dlpack_tensor(&self, allow_copy: bool) -> PyResult<(Cow<'_, Tensor>, bool)>;

    /// The tensor that [`DlpackSource::dlpack_tensor`] would borrow, when it is at hand without
    /// work: the export's fast path, a reference in a register. Through the `Result` of
    /// `dlpack_tensor` the borrowed tensor was moved through the stack in pieces of another
    /// width than they were written, a stall that was a visible share of `Array.__dlpack__`.
    fn shared_tensor(&self) -> Option<&Tensor> {
        None
    }

    /// Where the data lives: the CPU for everything made from Arrow arrays.
    fn device(&self) -> Device {
        Device::CPU
    }

    /// The producer's sync event, which a consumer's stream waits on (`device_sync`).
    fn sync_event(&self) -> SyncEvent {
        SyncEvent::NONE
    }
}

/// `source.__dlpack__(stream=..., max_version=..., dl_device=..., copy=...)`, for the classes
/// whose method pyo3 generates (`FixedShapeTensorArray`; `Array` and `Tensor` have the raw method
/// of `dlpack_method`, which reads its arguments itself and calls [`export`]).
pub(crate) fn dlpack(
    py: Python<'_>,
    source: &impl DlpackSource,
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<&Bound<'_, PyAny>>,
    dl_device: Option<(u32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let max_version = max_version_argument(max_version)?;
    errors::no_panic("exporting a DLPack tensor", || {
        export(py, source, stream, max_version, dl_device, copy)
    })
}

/// The capsule of one `__dlpack__` call whose arguments are read: `max_version` is the pair
/// [`max_version_argument`] gave. Call it under `errors::no_panic`.
pub(crate) fn export(
    py: Python<'_>,
    source: &impl DlpackSource,
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(u32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let request = DlpackRequest::parse(
        stream,
        max_version,
        dl_device,
        copy,
        source.device(),
        source.sync_event(),
    )?;
    if let Some(tensor) = source.shared_tensor() {
        return request.export(py, tensor, false);
    }
    let (tensor, made_for_export) = source.dlpack_tensor(request.allows_copy())?;
    request.export(py, &tensor, made_for_export)
}

/// The `max_version` argument of `__dlpack__`: `None`, or a tuple of two non-negative integers.
///
/// Read with the C API instead of pyo3's tuple extraction, whose generic layers are a visible
/// share of the whole `__dlpack__` call, and answered by address for the few tuples callers pass again and
/// again (`max_versions`); anything but a pair of `u32` gets pyo3's own error (`TypeError`,
/// `ValueError` for a wrong length, `OverflowError` for a negative or huge number).
pub(crate) fn max_version_argument(
    max_version: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<(u32, u32)>> {
    let Some(max_version) = max_version.filter(|value| !value.is_none()) else {
        return Ok(None);
    };
    if let Some(pair) = max_versions::known(max_version) {
        return Ok(Some(pair));
    }
    if let Some(pair) = u32_pair(max_version) {
        max_versions::remember(max_version, pair);
        return Ok(Some(pair));
    }
    // Not a pair of `u32`: pyo3's extraction gives the error it always gave.
    max_version.extract::<(u32, u32)>().map(Some)
}

/// The `max_version` tuples seen, by address: numpy passes one tuple it made once, torch and most
/// callers a constant of their code, so a few cover nearly every call, and reading one costs a
/// handful of pointer compares instead of seven C API calls.
///
/// Each remembered tuple is held by its entry, so its address stays its own while it is
/// remembered; a tuple and the ints in it are immutable (`PyTuple_SetItem` refuses a tuple
/// referenced twice), so the pair read once stays right. Only exact tuples are remembered; a
/// replaced entry releases its tuple.
mod max_versions {
    use pyo3::prelude::*;

    use crate::cache::{Cache, HeldObject};

    static SEEN: Cache<HeldObject, (u32, u32), 8> = Cache::new();

    /// The pair of a remembered tuple at `value`'s address.
    pub(super) fn known(value: &Bound<'_, PyAny>) -> Option<(u32, u32)> {
        SEEN.find(value.py(), |seen, _| seen.is(value))
    }

    /// Remembers that the exact tuple `value` reads as `pair`.
    pub(super) fn remember(value: &Bound<'_, PyAny>, pair: (u32, u32)) {
        // SAFETY: `value` is a live object; only its type is read.
        if unsafe { pyo3::ffi::PyTuple_CheckExact(value.as_ptr()) } == 0 {
            return;
        }
        SEEN.insert(value.py(), HeldObject::new(value), pair);
    }
}

/// `(major, minor)` when `value` is a tuple of two Python ints that fit `u32`, else `None` (with
/// no Python error left set).
fn u32_pair(value: &Bound<'_, PyAny>) -> Option<(u32, u32)> {
    let item = |index| {
        // SAFETY: `value` is a live tuple (checked below before this is called) and `index` is
        // below its length; `PyTuple_GetItem` returns a borrowed reference that the tuple keeps
        // alive, read at once; `PyLong_AsLong` is only called on an exact or derived int.
        unsafe {
            let item = pyo3::ffi::PyTuple_GetItem(value.as_ptr(), index);
            if item.is_null() || pyo3::ffi::PyLong_Check(item) == 0 {
                pyo3::ffi::PyErr_Clear();
                return None;
            }
            let number = pyo3::ffi::PyLong_AsLong(item);
            if number == -1 && !pyo3::ffi::PyErr_Occurred().is_null() {
                pyo3::ffi::PyErr_Clear();
                return None;
            }
            u32::try_from(number).ok()
        }
    };
    // SAFETY: `value` is a live object; the checks read its type only.
    let is_pair = unsafe {
        pyo3::ffi::PyTuple_Check(value.as_ptr()) != 0
            && pyo3::ffi::PyTuple_Size(value.as_ptr()) == 2
    };
    if !is_pair {
        return None;
    }
    Some((item(0)?, item(1)?))
}

/// The checked arguments of one `__dlpack__` call.
pub(crate) struct DlpackRequest {
    abi: ExportAbi,
    copy: Option<bool>,
}

impl DlpackRequest {
    /// Checks the arguments of `__dlpack__(*, stream, max_version, dl_device, copy)` for data on
    /// `device`.
    ///
    /// - `stream` follows the array API's table (`device_sync`): `None` for CPU data; for device
    ///   data with a producer sync event, the consumer's stream is made to wait on it here,
    ///   before the capsule is made (`BufferError` for streams the table refuses).
    /// - `dl_device` must be `None` or the data's own device (`BufferError`: anything else would
    ///   be a device move).
    /// - `max_version` `None` or below `(1, 0)` selects a legacy `dltensor` capsule, anything else
    ///   a `dltensor_versioned` capsule stamped with DLPack 1.3.
    pub(crate) fn parse(
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
        device: Device,
        sync_event: SyncEvent,
    ) -> PyResult<Self> {
        crate::device_sync::order_consumer_stream(stream, device, sync_event)?;
        if let Some((device_type, device_id)) = dl_device
            && (device_type, device_id) != (device.device_type, device.device_id)
        {
            return Err(errors::buffer_error(format!(
                "dl_device=({device_type}, {device_id}) is not supported: the data is on DLPack \
                 device ({}, {}), and arrow_dlpack makes no device moves; expected dl_device=None \
                 or ({}, {})",
                device.device_type, device.device_id, device.device_type, device.device_id
            )));
        }
        // What dlpark's `ExportRequest::parse` would add is checked above (a `dl_device` with a
        // negative id is not the data's device), so only the ABI is left to choose.
        let abi = if max_version.is_some_and(|(major, _)| major >= DLPACK_MAJOR_VERSION) {
            ExportAbi::Versioned
        } else {
            ExportAbi::Legacy
        };
        Ok(DlpackRequest { abi, copy })
    }

    /// Whether the array layer may copy to produce a tensor (booleans, several chunks).
    pub(crate) fn allows_copy(&self) -> bool {
        self.copy != Some(false)
    }

    /// Exports `tensor` as the capsule this request asks for.
    ///
    /// Versioned capsules flag read-only data `READ_ONLY` and copies `IS_COPIED`; legacy capsules
    /// carry no flags and are produced all the same. `copy=True` copies exactly the logical
    /// elements, compacted, for both kinds.
    ///
    /// `made_for_export` says that `tensor`'s memory was made for this export alone (unpacked
    /// booleans, concatenated chunks): it is then flagged `IS_COPIED` and not copied again.
    fn export(
        &self,
        py: Python<'_>,
        tensor: &Tensor,
        made_for_export: bool,
    ) -> PyResult<Py<PyAny>> {
        let options = ExportOptions::copy(self.copy).made_for_export(made_for_export);
        // Only `copy=True` copies here; a large copy runs without the GIL.
        let copied = if self.copy == Some(true) {
            copies::tensor_bytes(tensor)
        } else {
            0
        };
        match self.abi {
            ExportAbi::Versioned => {
                let managed = copies::without_gil_if_large(py, copied, || {
                    tensor.to_dlpack_versioned(options)
                })
                .map_err(errors::tensor_error)?;
                capsule(py, managed)
            }
            ExportAbi::Legacy => {
                let managed =
                    copies::without_gil_if_large(py, copied, || tensor.to_dlpack_legacy(options))
                        .map_err(errors::tensor_error)?;
                capsule(py, managed)
            }
        }
    }
}

/// A managed-tensor ABI and the name of its unconsumed capsule.
trait CapsuleAbi: ManagedTensorBase {
    const NAME: &'static CStr;
}

impl CapsuleAbi for DLManagedTensorVersioned {
    const NAME: &'static CStr = DLTENSOR_VERSIONED;
}

impl CapsuleAbi for DLManagedTensor {
    const NAME: &'static CStr = DLTENSOR;
}

/// The capsule that hands `managed` to a consumer: a consumer that takes the tensor renames the
/// capsule and runs the deleter itself, otherwise the capsule's destructor runs it, once.
///
/// dlpark's conversion does the same but first re-validates the whole tensor, which the tensor
/// crate built from a checked [`Tensor`] a moment before: work done twice on the hottest call.
fn capsule<M: CapsuleAbi>(py: Python<'_>, managed: Managed<M>) -> PyResult<Py<PyAny>> {
    let raw = managed.into_raw();
    // SAFETY: `raw` is a live managed tensor that this capsule now owns; the name is a static
    // C string, as `PyCapsule_New` requires, and the destructor matches `M`.
    let capsule = unsafe {
        pyo3::ffi::PyCapsule_New(raw.cast(), M::NAME.as_ptr(), Some(capsule_destructor::<M>))
    };
    if capsule.is_null() {
        // SAFETY: no capsule took `raw`, so it is still ours to delete, once.
        drop(unsafe { Managed::from_raw(raw) });
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `PyCapsule_New` returned a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// Runs the deleter of a managed tensor whose capsule was never consumed.
///
/// # Safety
///
/// `capsule` is a capsule made by [`capsule`] for `M`, being destroyed.
unsafe extern "C" fn capsule_destructor<M: CapsuleAbi>(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: `capsule` is a live capsule (the caller's guarantee), so its name can be read
    // without setting an error; a capsule still named `M::NAME` holds the managed tensor we put
    // there, which no consumer took (taking it renames the capsule), so it is deleted here, once.
    // A consumed capsule (`M::USED_NAME`), or one renamed to anything else by a consumer, is
    // left alone: the consumer owns the tensor.
    unsafe {
        let name = pyo3::ffi::PyCapsule_GetName(capsule);
        if name.is_null() || (name != M::NAME.as_ptr() && !same_name(name, M::NAME)) {
            return;
        }
        let managed = pyo3::ffi::PyCapsule_GetPointer(capsule, name).cast::<M>();
        if !managed.is_null() {
            M::drop_raw(managed);
        }
    }
}

/// Whether the C string at `name` reads `expected`, compared up to the first difference (a
/// consumed capsule's `used_...` name differs at its first byte, without measuring its length).
///
/// # Safety
///
/// `name` points to a NUL-terminated string.
unsafe fn same_name(name: *const std::ffi::c_char, expected: &CStr) -> bool {
    // SAFETY: `expected` ends with its NUL and has no NUL before it, so the comparison stops at
    // `name`'s NUL at the latest (where `expected` has another byte, or its own NUL): every byte
    // read is part of `name`'s string (the caller's guarantee).
    expected
        .to_bytes_with_nul()
        .iter()
        .enumerate()
        .all(|(index, &byte)| unsafe { *name.add(index) } as u8 == byte)
}

/// `__dlpack_device__` of every object made from Arrow arrays: the CPU, device 0.
///
/// One tuple made once and handed out again (tuples are immutable): torch calls
/// `__dlpack_device__` before every `__dlpack__`, and building the tuple was a fifth of the call.
pub(crate) fn cpu_device(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    static CPU: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();
    let cpu = CPU.get_or_try_init(py, || {
        PyResult::Ok(
            (Device::CPU.device_type, Device::CPU.device_id)
                .into_pyobject(py)?
                .unbind(),
        )
    })?;
    Ok(cpu.bind(py).clone())
}

/// `__dlpack_device__` of data on `device`: the shared CPU tuple, or a new `(type, id)`.
pub(crate) fn dlpack_device(py: Python<'_>, device: Device) -> PyResult<Bound<'_, PyTuple>> {
    if device == Device::CPU {
        return cpu_device(py);
    }
    (device.device_type, device.device_id).into_pyobject(py)
}
