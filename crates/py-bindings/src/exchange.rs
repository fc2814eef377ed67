//! The DLPack C exchange API (DLPack 1.3): a `__dlpack_c_exchange_api__` type attribute through
//! which C-level consumers (tvm-ffi, CuteDSL, ...) exchange tensors in tens of nanoseconds instead
//! of a Python `__dlpack__` call.
//! PyTorch 2.15 publishes such a table on `torch.Tensor`, but its `torch.from_dlpack` still calls
//! `__dlpack__` on the objects it is given (see `docs/compatibility.md`); our `from_dlpack` uses
//! a producer's table when it has one (`dlpack_import`).
//!
//! dlpark builds the process-lifetime function table and its capsule; this module says how each
//! class produces a managed tensor (exactly what `__dlpack__(max_version=(1, 3))` gives, without
//! the Python call) and how it takes one back from a C consumer (as its `from_dlpack` does with
//! `copy=None`).
//!
//! Both directions are counted (in `counters`), so that tests can tell which path an exchange
//! took: a Python `__dlpack__` call cannot be observed on a pyo3 class, a call through a table
//! can (`_exchange_calls()`).

use std::ffi::c_void;

use arrow_dlpack_tensor::{ExportOptions, Tensor};
use dlpack_sys::{DLDevice, DLDeviceType, DLManagedTensorVersioned};
use dlpark::Managed;
use dlpark::python::{DlpackExchangeProducer, install_exchange_api};
use pyo3::prelude::*;

use crate::array::PyArray;
use crate::counters::{count_export, count_import};
use crate::dlpack_export::DlpackSource;
use crate::errors;
use crate::fixed_shape_tensor::PyFixedShapeTensorArray;
use crate::py_tensor::PyTensor;

/// Publishes the exchange API on every class; call once the classes are registered.
pub(crate) fn install(py: Python<'_>) -> PyResult<()> {
    install_exchange_api::<PyArray>(py)?;
    install_exchange_api::<PyTensor>(py)?;
    install_exchange_api::<PyFixedShapeTensorArray>(py)?;
    Ok(())
}

/// What `__dlpack__(max_version=(1, 3))` gives for `source`, without the Python call; counted.
///
/// The table's export is "no sync": the consumer orders itself after the producer's work stream,
/// which this package cannot name for device data. A device tensor that its consumers must wait
/// for (a producer's sync event, or ordering on a stream) is therefore refused, never handed out
/// unordered; `__dlpack__(stream=...)` orders it.
fn export(source: &impl DlpackSource) -> PyResult<Managed<DLManagedTensorVersioned>> {
    count_export();
    let device = source.device();
    if !device.is_cpu() && !source.sync_event().is_ready() {
        return Err(errors::buffer_error(format!(
            "the data on {} device {} must be ordered after its producer's work, which the \
             DLPack C exchange API cannot do (it has no consumer stream); use \
             __dlpack__(stream=...)",
            device.type_name(),
            device.device_id
        )));
    }
    let (tensor, made_for_export) = source.dlpack_tensor(true)?;
    tensor
        .to_dlpack_versioned(ExportOptions::default().made_for_export(made_for_export))
        .map_err(errors::tensor_error)
}

/// A managed tensor handed to one of our tables, validated and owned by a [`Tensor`] (which runs
/// its deleter exactly once, also when validation fails).
fn import(tensor: Managed<DLManagedTensorVersioned>) -> PyResult<Tensor> {
    count_import();
    Tensor::from_managed(tensor).map_err(errors::tensor_error)
}

/// The CPU has no streams: the work stream is NULL, and other devices are refused.
fn cpu_work_stream(device: DLDevice) -> PyResult<*mut c_void> {
    if device.device_type != DLDeviceType::CPU {
        return Err(errors::buffer_error(format!(
            "no work stream for DLPack device type {}: arrow_dlpack holds CPU data only",
            device.device_type.0
        )));
    }
    Ok(std::ptr::null_mut())
}

/// Implements the exchange table of a class: exports go through [`DlpackSource`], the work
/// stream is the CPU's (none), and a tensor handed back by a C consumer becomes an object of the
/// class as its `from_dlpack` (with `copy=None`) would make it, through `$from_tensor`.
macro_rules! exchange_producer {
    ($class:ty, |$py:ident, $tensor:ident| $from_tensor:expr) => {
        // SAFETY: `HAS_DLTENSOR_VIEW` is false, so no borrowed view is handed out; the managed
        // tensors come from the tensor crate, which keeps the data alive until their deleter runs
        // and lets it run from any thread; the work stream of the CPU is NULL, which DLPack
        // defines as "no stream".
        unsafe impl DlpackExchangeProducer for $class {
            fn managed_tensor_no_sync(
                &self,
                _py: Python<'_>,
            ) -> PyResult<Managed<DLManagedTensorVersioned>> {
                export(self)
            }

            fn current_work_stream(_py: Python<'_>, device: DLDevice) -> PyResult<*mut c_void> {
                cpu_work_stream(device)
            }

            fn from_managed_tensor_no_sync(
                $py: Python<'_>,
                managed: Managed<DLManagedTensorVersioned>,
            ) -> PyResult<Py<Self>> {
                let $tensor = import(managed)?;
                $from_tensor
            }
        }
    };
}

exchange_producer!(PyArray, |py, tensor| Py::new(
    py,
    PyArray::from_tensor(py, &tensor, None)?
));
exchange_producer!(PyTensor, |py, tensor| Py::new(py, PyTensor::new(tensor)));
exchange_producer!(PyFixedShapeTensorArray, |py, tensor| {
    PyFixedShapeTensorArray::from_imported(py, &tensor, None)
});
