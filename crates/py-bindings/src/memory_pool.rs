//! The Python face of the tensor crate's warm-page pool (`arrow_dlpack_tensor::alloc`): the pool
//! that large copy outputs come from and return to, as PyArrow's `default_memory_pool()` is for
//! its buffers.

use std::time::Duration;

use arrow_dlpack_tensor::alloc;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `memory_pool_stats()`: the pool's counters as a dict.
#[pyfunction]
pub(crate) fn memory_pool_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let stats = alloc::stats();
    let dict = PyDict::new(py);
    dict.set_item("cached_bytes", stats.cached_bytes)?;
    dict.set_item("cached_blocks", stats.cached_blocks)?;
    dict.set_item("in_use_bytes", stats.in_use_bytes)?;
    dict.set_item("limit", stats.limit)?;
    dict.set_item("decay_ms", stats.decay.as_millis())?;
    dict.set_item("hits", stats.hits)?;
    dict.set_item("misses", stats.misses)?;
    dict.set_item("returns", stats.returns)?;
    dict.set_item("released", stats.released)?;
    Ok(dict)
}

/// `set_memory_pool_limit(nbytes)`: the bound on cached bytes; 0 turns the pool off.
#[pyfunction]
pub(crate) fn set_memory_pool_limit(nbytes: usize) {
    alloc::set_limit(nbytes);
}

/// `set_memory_pool_decay_ms(ms)`: how long a freed block stays cached unused.
#[pyfunction]
pub(crate) fn set_memory_pool_decay_ms(ms: u64) {
    alloc::set_decay(Duration::from_millis(ms));
}

/// `release_unused_memory()`: gives every cached block back to the system; the bytes released.
#[pyfunction]
pub(crate) fn release_unused_memory() -> usize {
    alloc::release_unused()
}
