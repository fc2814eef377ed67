//! The counters of the DLPack C exchange API: how many tensors went out through our exchange
//! tables and came in through one, read by tests through `_exchange_calls()` to prove which path
//! an exchange took.
//!
//! A leaf: `exchange` counts its exports and imports here, and `dlpack_import` its imports
//! through a producer's table.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// How many managed tensors our tables have handed to consumers.
static EXPORTED: AtomicU64 = AtomicU64::new(0);
/// How many tensors came in through an exchange table: a producer's, used by our `from_dlpack`,
/// or ours, called by a C consumer handing back a result.
static IMPORTED: AtomicU64 = AtomicU64::new(0);

/// Counts one import through an exchange table (ours, or a producer's used by `dlpack_import`).
pub(crate) fn count_import() {
    IMPORTED.fetch_add(1, Ordering::Relaxed);
}

/// Counts one export through one of our tables, successful or not.
pub(crate) fn count_export() {
    EXPORTED.fetch_add(1, Ordering::Relaxed);
}

/// `{"exported": n, "imported": m}`: how many tensors went out through this package's DLPack C
/// exchange tables, and came in through a table (a producer's, used by `from_dlpack`, or ours,
/// called by a C consumer), since the module was loaded.
///
/// Private, for tests: it is how they prove which path an exchange took.
#[pyfunction(name = "_exchange_calls")]
pub(crate) fn exchange_calls(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let calls = PyDict::new(py);
    calls.set_item("exported", EXPORTED.load(Ordering::Relaxed))?;
    calls.set_item("imported", IMPORTED.load(Ordering::Relaxed))?;
    Ok(calls)
}
