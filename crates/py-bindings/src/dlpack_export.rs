//! The producer side of the Python DLPack protocol: `__dlpack__` arguments and capsules.
//!
//! dlpark parses the arguments ([`ExportRequest`]) and turns managed tensors into capsules whose
//! destructor releases an unconsumed tensor exactly once.
//! Its `export_dlpack` refuses `copy=True` and refuses legacy capsules for read-only data (legacy
//! capsules have no flags), which would lock JAX out of Arrow data; so the tensor crate builds the
//! managed tensor here, with the flags and the copy each request asks for.

use std::borrow::Cow;

use arrow_dlpack_tensor::{Device, ExportOptions, Tensor};
use dlpark::python::{ExportAbi, ExportRequest};
use pyo3::IntoPyObject;
use pyo3::prelude::*;

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

    /// Where the data lives: the CPU for everything made from Arrow arrays.
    fn device(&self) -> Device {
        Device::CPU
    }

    /// The producer's sync event, which a consumer's stream waits on (`device_sync`).
    fn sync_event(&self) -> SyncEvent {
        SyncEvent::NONE
    }
}

/// `source.__dlpack__(stream=..., max_version=..., dl_device=..., copy=...)`, for every class.
pub(crate) fn dlpack(
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
    errors::no_panic("exporting a DLPack tensor", || {
        let (tensor, made_for_export) = source.dlpack_tensor(request.allows_copy())?;
        request.export(py, &tensor, made_for_export)
    })
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
        let request = ExportRequest::parse(None, max_version, dl_device, copy)?;
        Ok(DlpackRequest {
            abi: request.abi(),
            copy: request.copy(),
        })
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
        let capsule = match self.abi {
            ExportAbi::Versioned => {
                copies::without_gil_if_large(py, copied, || tensor.to_dlpack_versioned(options))
                    .map_err(errors::tensor_error)?
                    .into_pyobject(py)?
            }
            ExportAbi::Legacy => {
                copies::without_gil_if_large(py, copied, || tensor.to_dlpack_legacy(options))
                    .map_err(errors::tensor_error)?
                    .into_pyobject(py)?
            }
        };
        Ok(capsule.unbind())
    }
}

/// `__dlpack_device__` of every object made from Arrow arrays: the CPU, device 0.
pub(crate) fn cpu_device() -> (u32, i32) {
    (Device::CPU.device_type, Device::CPU.device_id)
}
