//! Export through the Arrow C Device Data Interface as capsules: CPU device arrays and streams of
//! our arrays, and a row-major tensor on its own device with its sync event (the structs are
//! `arrow-dlpack-c`'s).

use arrow_array::ArrayRef;
use arrow_array::ffi::FFI_ArrowSchema;
use arrow_dlpack_c::ArrowCError;
use arrow_dlpack_tensor::Tensor;
use arrow_schema::FieldRef;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

use super::{ARROW_DEVICE_ARRAY, ARROW_DEVICE_ARRAY_STREAM};
use crate::arrow_ffi;
use crate::device_sync::SyncEvent;
use crate::errors::{self, Operation};

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
    let device_array = arrow_dlpack_c::cpu_device_array(array);
    PyCapsule::new_with_value(py, device_array, ARROW_DEVICE_ARRAY)
}

/// An `arrow_device_array_stream` capsule of CPU chunks, each chunk a CPU device array.
pub(crate) fn cpu_stream_capsule<'py>(
    py: Python<'py>,
    field: &FieldRef,
    chunks: &[ArrayRef],
) -> PyResult<Bound<'py, PyCapsule>> {
    // Fail now, in Python, rather than in the consumer's `get_schema`.
    FFI_ArrowSchema::try_from(field.as_ref()).map_err(errors::arrow_rs_error)?;
    let stream = arrow_dlpack_c::cpu_device_stream(field, chunks);
    PyCapsule::new_with_value(py, stream, ARROW_DEVICE_ARRAY_STREAM)
}

/// The (`arrow_schema`, `arrow_device_array`) capsules of a row-major tensor on its own device:
/// a primitive array for 1-D, an `arrow.fixed_shape_tensor` array otherwise; the array shares the
/// tensor's memory, which is never read, and carries the tensor's sync event (an event recorded
/// for the export lives as long as the exported array).
pub(crate) fn tensor_capsules<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    sync_event: SyncEvent,
) -> PyResult<Bound<'py, PyTuple>> {
    // Refused before an event is recorded for nothing.
    arrow_dlpack_c::check_exportable(tensor).map_err(export_error)?;
    let (sync_event, exported_event) =
        crate::device_sync::export_event(tensor.device(), sync_event)?;
    let (field, device_array) =
        arrow_dlpack_c::export_tensor(tensor, sync_event, exported_event).map_err(export_error)?;
    let schema = arrow_ffi::schema_capsule(py, &field)?;
    let array = PyCapsule::new_with_value(py, device_array, ARROW_DEVICE_ARRAY)?;
    PyTuple::new(py, [schema, array])
}

/// The Python exception of a refused tensor export: `arrow-dlpack`'s errors as exports map them.
fn export_error(error: ArrowCError) -> PyErr {
    match error {
        ArrowCError::Arrow(error) => errors::arrow_error(error, Operation::Export),
        error => errors::arrow_c_error(error),
    }
}
