//! `PyTensor`: the Rust struct of the Python class `arrow_dlpack.Tensor` (one tensor of the
//! tensor crate), built by every file that hands out a tensor.
//!
//! The class's Python methods are in `tensor.rs`; this file imports no other of the crate, so
//! that arrays, tables and the loader can make tensors without importing them.

use arrow_dlpack_tensor::Tensor;
use pyo3::prelude::*;

/// A strided n-dimensional tensor over Arrow memory, exchanged through DLPack without copying.
#[pyclass(name = "Tensor", module = "arrow_dlpack", frozen)]
pub(crate) struct PyTensor {
    // Read by the methods in `tensor.rs`; a frozen class, never changed once made.
    pub(crate) tensor: Tensor,
}

impl PyTensor {
    pub(crate) fn new(tensor: Tensor) -> Self {
        PyTensor { tensor }
    }

    pub(crate) fn tensor(&self) -> &Tensor {
        &self.tensor
    }
}
