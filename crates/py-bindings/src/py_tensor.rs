//! `PyTensor`: the Rust struct of the Python class `arrow_dlpack.Tensor` (one tensor of the
//! tensor crate), built by every file that hands out a tensor.
//!
//! The class's Python methods are in `tensor.rs`; this file imports only `device_sync` (for the
//! sync event type), so that arrays, tables and the loader can make tensors without importing them.

use arrow_dlpack_tensor::Tensor;
use pyo3::prelude::*;

use crate::device_sync::SyncEvent;

/// A strided n-dimensional tensor over Arrow memory, exchanged through DLPack without copying.
#[pyclass(name = "Tensor", module = "arrow_dlpack", frozen)]
pub(crate) struct PyTensor {
    // Read by the methods in `tensor.rs`; a frozen class, never changed once made.
    pub(crate) tensor: Tensor,
    /// The producer's sync event of a tensor imported through the Arrow C Device Data Interface.
    pub(crate) sync_event: SyncEvent,
}

impl PyTensor {
    pub(crate) fn new(tensor: Tensor) -> Self {
        PyTensor::with_sync_event(tensor, SyncEvent::NONE)
    }

    /// A tensor whose consumers' streams must wait on `sync_event` (`device_sync`).
    pub(crate) fn with_sync_event(tensor: Tensor, sync_event: SyncEvent) -> Self {
        PyTensor { tensor, sync_event }
    }

    pub(crate) fn tensor(&self) -> &Tensor {
        &self.tensor
    }
}
