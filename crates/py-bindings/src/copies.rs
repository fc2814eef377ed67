//! Large copies run without the GIL, so that other Python threads go on while they copy.
//!
//! A copy of a few megabytes takes milliseconds; holding the GIL through it would stall every
//! other thread of the process (a data loader's, a server's) for as long. Small copies keep the
//! GIL: releasing and taking it back costs more than they do.

use pyo3::Python;

/// Copies of this many bytes and more release the GIL.
pub(crate) const GIL_FREE_BYTES: usize = 1 << 20;

/// Runs `copy`, which moves about `bytes` bytes and touches no Python object, without the GIL
/// when `bytes` is at least [`GIL_FREE_BYTES`].
pub(crate) fn without_gil_if_large<T: Send>(
    py: Python<'_>,
    bytes: usize,
    copy: impl FnOnce() -> T + Send,
) -> T {
    if bytes >= GIL_FREE_BYTES {
        py.detach(copy)
    } else {
        copy()
    }
}

/// The bytes of a tensor's logical elements: what a copy of it moves.
pub(crate) fn tensor_bytes(tensor: &arrow_dlpack_tensor::Tensor) -> usize {
    tensor.len().saturating_mul(tensor.dtype().size())
}
