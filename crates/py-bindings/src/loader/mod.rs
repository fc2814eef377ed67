//! `arrow_dlpack._Batches`: the loader layer (`arrow-dlpack-loader`) as a Python iterator of
//! batches, each a dict of `Tensor`s.
//!
//! The Python function `arrow_dlpack.batches` (in `python/arrow_dlpack/_batches.py`) is the
//! public face: it works out the shard of a DataLoader worker or a distributed rank and shows
//! progress, and hands everything else to this class.
//!
//! Sources are what [`source_of`] takes: paths of Arrow IPC or Parquet files, URLs of such
//! objects in object storage (with `storage_options`), or any object with `__arrow_c_stream__`.
//! `__next__` waits for the next batch with the GIL released: decoding, re-batching and copies
//! never hold it.
//!
//! The options are the fields of [`BatchSpec`], declared there once: `_Batches` takes each as a
//! keyword named after its field, and `_Batches.OPTIONS` lists them with their defaults, against
//! which the Python tests hold `ad.batches`, `BatchDataset` and the stub.

use std::sync::{Mutex, TryLockError};

use arrow_dlpack_loader::{BatchSpec, Batches, LoaderState, TensorBatch, collate};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

mod options;

use crate::arrow_ffi::CheckedStream;
use crate::errors;
use crate::py_tensor::PyTensor;
use crate::sources::{StreamBatches, source_of};
use crate::type_names::type_name;
use options::OptionValue;

/// The keywords of `_Batches`, one per field of [`BatchSpec`], each named once.
macro_rules! batch_spec_options {
    ($($field:ident),* $(,)?) => {
        /// The spec that `options` give, a field absent from them at its default; a keyword that
        /// names no field is a `TypeError`, and a value the field cannot hold an error naming
        /// the field (see [`OptionValue`]).
        fn spec_from_options(options: Option<&Bound<'_, PyDict>>) -> PyResult<BatchSpec> {
            let mut spec = BatchSpec::default();
            for (keyword, value) in options.into_iter().flat_map(|options| options.iter()) {
                let keyword: String = keyword.extract()?;
                match keyword.as_str() {
                    $(stringify!($field) => {
                        spec.$field = OptionValue::from_python(stringify!($field), &value)?;
                    })*
                    _ => {
                        return Err(PyTypeError::new_err(format!(
                            "_Batches() got an unexpected keyword argument '{keyword}'"
                        )));
                    }
                }
            }
            Ok(spec)
        }

        /// Every field of [`BatchSpec`] and its default, in the order of declaration.
        fn option_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
            // The pattern names every field, without `..`: a field added to `BatchSpec` and not
            // to this list fails to compile.
            let BatchSpec { $($field),* } = BatchSpec::default();
            let defaults = PyDict::new(py);
            $(defaults.set_item(stringify!($field), $field.to_python(py)?)?;)*
            Ok(defaults)
        }
    };
}

batch_spec_options!(
    batch_size,
    drop_last,
    columns,
    groups,
    masks,
    allow_nulls,
    null_to_nan,
    row_major,
    shuffle,
    seed,
    buffer_size,
    shard_index,
    num_shards,
    prefetch,
    decode_threads,
    writable,
    sequences,
    max_tokens,
    bucket_by_length,
    epoch,
    state,
);

/// `batch` as Python sees it: a dict from tensor name to `Tensor`, masks as `"<name>_mask"`.
fn batch_dict(py: Python<'_>, batch: TensorBatch) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    let (tensors, masks) = batch.into_parts();
    for (name, tensor) in tensors {
        out.set_item(name, PyTensor::new(tensor))?;
    }
    for (name, mask) in masks {
        out.set_item(format!("{name}_mask"), PyTensor::new(mask))?;
    }
    Ok(out)
}

/// `_collate(table, **options)`: one batch of every row of an Arrow stream (a table), made on
/// the calling thread ([`collate`]), with the GIL released when the batch is large; the options
/// are `_Batches`'s, of which those that cut and read batches do not apply.
#[pyfunction]
#[pyo3(name = "_collate", signature = (table, **options))]
pub(crate) fn collate_table<'py>(
    py: Python<'py>,
    table: &Bound<'py, PyAny>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = spec_from_options(options)?;
    let Some(method) = crate::protocols::optional_attribute(table, "__arrow_c_stream__")? else {
        return Err(errors::type_error(format!(
            "{} has no __arrow_c_stream__; expected a table (a pyarrow Table, a polars \
             DataFrame, ...)",
            type_name(table)
        )));
    };
    let capsule = method.call0()?;
    let stream = errors::no_panic("reading an Arrow stream", || {
        StreamBatches::new(CheckedStream::from_capsule(&capsule)?)
    })?;
    let batch = errors::no_panic("collating a batch", || {
        let schema = stream.schema.clone();
        let batches = stream
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| errors::loader_error(error.into()))?;
        let values: usize = batches
            .iter()
            .map(|batch| batch.num_rows() * batch.num_columns())
            .sum();
        let make = || collate(schema, batches, &spec);
        // A small batch is made holding the GIL: in a pipeline of Python threads (Ray's) a
        // thread that lets the GIL go waits up to a switch interval to take it back, far longer
        // than the copy of a small batch.
        let batch = if values < DETACH_MIN_VALUES {
            make()
        } else {
            py.detach(make)
        };
        batch.map_err(errors::loader_error)
    })?;
    batch_dict(py, batch)
}

/// Batches of at least this many values (rows times columns) are made by [`collate_table`]
/// with the GIL released.
const DETACH_MIN_VALUES: usize = 1 << 20;

/// Batches of exactly `batch_size` rows from an Arrow source, made on background threads; each
/// is a dict from column (or group) name to `Tensor`.
#[pyclass(name = "_Batches", module = "arrow_dlpack")]
pub(crate) struct PyBatches {
    /// `None` once the iteration ended or `close()` ran: the threads are joined then.
    /// The lock is only ever tried, never waited for with the GIL held.
    batches: Mutex<Option<Batches>>,
    /// The rows of this shard, where the source's metadata tells.
    num_rows: Option<u64>,
    /// The number of batches, where the row count is known.
    len: Option<usize>,
    /// The rows of the batches handed out so far.
    rows_yielded: std::sync::atomic::AtomicU64,
    /// The state when the iteration ended or `close()` ran, for `state_dict()` afterwards.
    final_state: Mutex<Option<LoaderState>>,
    /// The process that made the loader: its threads live there only, so a child of `fork()`
    /// must neither wait for them nor join them.
    pid: u32,
}

impl PyBatches {
    /// Keeps the state of `batches`, about to be dropped, for `state_dict()`.
    fn keep_state(&self, batches: Option<&Batches>) {
        if let Some(batches) = batches {
            let mut kept = self
                .final_state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            *kept = Some(batches.state());
        }
    }

    /// Refuses a call from a child of `fork()`: the loader's threads were not copied into it,
    /// so a batch would never come.
    fn check_process(&self) -> PyResult<()> {
        let here = std::process::id();
        if here == self.pid {
            return Ok(());
        }
        Err(errors::value_error(format!(
            "this loader was made in process {} and is used in process {here}, a fork of it: \
             its threads did not survive the fork; make a new loader in this process",
            self.pid
        )))
    }
}

#[pymethods]
impl PyBatches {
    /// `source` read as the keywords say, one per field of [`BatchSpec`], each at its default
    /// when absent.
    #[new]
    #[pyo3(signature = (source, *, storage_options=None, **options))]
    fn new(
        py: Python<'_>,
        source: &Bound<'_, PyAny>,
        storage_options: Option<&Bound<'_, PyDict>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let spec = spec_from_options(options)?;
        let source = errors::no_panic("reading an Arrow source", || {
            source_of(source, storage_options)
        })?;
        // Opening files reads their metadata (footers a hostile file may have forged): I/O, done
        // without the GIL, and under `no_panic` like every read of foreign data.
        let batches = errors::no_panic("opening the loader's source", || {
            py.detach(|| Batches::new(source, spec))
                .map_err(errors::loader_error)
        })?;
        Ok(PyBatches {
            num_rows: batches.num_rows(),
            len: batches.len(),
            rows_yielded: std::sync::atomic::AtomicU64::new(0),
            final_state: Mutex::new(Some(batches.state())),
            batches: Mutex::new(Some(batches)),
            pid: std::process::id(),
        })
    }

    /// Every option (a field of [`BatchSpec`]) and its default, in the order of declaration.
    #[classattr]
    #[pyo3(name = "OPTIONS")]
    fn options(py: Python<'_>) -> PyResult<Py<PyDict>> {
        Ok(option_defaults(py)?.unbind())
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        // Before the lock: a thread of the parent may have held it at the fork, for ever here.
        self.check_process()?;
        let mut guard = match self.batches.try_lock() {
            Ok(guard) => guard,
            // Another thread is inside `__next__` (without the GIL): waiting for it here, with
            // the GIL, could deadlock, so refuse as a running generator does.
            Err(TryLockError::WouldBlock) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "the batch iterator is already running in another thread",
                ));
            }
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        let Some(batches) = guard.as_mut() else {
            return Ok(None);
        };
        let next = py.detach(|| batches.next());
        let batch = match next {
            Some(Ok(batch)) => batch,
            Some(Err(error)) => {
                let ended = guard.take();
                self.keep_state(ended.as_ref());
                drop(guard);
                py.detach(move || drop(ended));
                return Err(errors::loader_error(error));
            }
            None => {
                let ended = guard.take();
                self.keep_state(ended.as_ref());
                drop(guard);
                py.detach(move || drop(ended));
                return Ok(None);
            }
        };
        drop(guard);
        self.rows_yielded.fetch_add(
            batch.num_rows() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        batch_dict(py, batch).map(Some)
    }

    /// The number of batches, where the source's metadata gives the row count (IPC and Parquet
    /// files); a `TypeError` otherwise, as `len()` of any iterator without a length.
    fn __len__(&self) -> PyResult<usize> {
        self.check_process()?;
        self.len.ok_or_else(|| {
            pyo3::exceptions::PyTypeError::new_err(
                "the number of batches of a stream is not known in advance",
            )
        })
    }

    /// The rows this iterator yields in all (after sharding, before `drop_last`), or None when
    /// the source does not say.
    #[getter]
    fn num_rows(&self) -> Option<u64> {
        self.num_rows
    }

    /// The rows of the batches handed out so far (a batch's tensors do not all have a row per
    /// row: packed sequences have a value per token).
    #[getter]
    fn rows_yielded(&self) -> u64 {
        self.rows_yielded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Where the stream stands after the batches handed out so far, as a dict of ints, strings
    /// and lists (JSON- and `torch.save`-able): `ad.batches(..., state=...)` with the same
    /// source and arguments continues from there.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.check_process()?;
        let state = match self.batches.try_lock() {
            Ok(guard) => guard.as_ref().map(Batches::state),
            Err(TryLockError::WouldBlock) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "the batch iterator is running in another thread; ask for its state there",
                ));
            }
            Err(TryLockError::Poisoned(poisoned)) => {
                poisoned.into_inner().as_ref().map(Batches::state)
            }
        };
        let state = match state {
            Some(state) => state,
            None => self
                .final_state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone()
                .expect("kept when the loader was made"),
        };
        options::state_to_python(py, &state)
    }

    /// Stops the background threads and releases the source now, rather than when the iterator
    /// is garbage collected; iterating afterwards yields nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check_process()?;
        let batches = match self.batches.try_lock() {
            Ok(mut guard) => guard.take(),
            Err(TryLockError::WouldBlock) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "the batch iterator is running in another thread; close it from there",
                ));
            }
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner().take(),
        };
        self.keep_state(batches.as_ref());
        // Joining the threads may wait for a decode in flight: without the GIL, so that a
        // producer that needs it (a Python generator behind a stream) can finish.
        py.detach(move || drop(batches));
        Ok(())
    }
}

impl Drop for PyBatches {
    fn drop(&mut self) {
        let batches = self
            .batches
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if std::process::id() != self.pid {
            // In a child of `fork()` the threads behind `batches` do not exist: joining them
            // would wait for ever or fail, so their handles, channel and buffers are forgotten
            // (the memory is the parent's copy, released when this process exits).
            std::mem::forget(batches);
            return;
        }
        if let Some(batches) = batches {
            // Collected without `close()`: the threads are joined without the GIL all the same,
            // so that a stream producer that needs it can finish its call.
            Python::attach(|py| py.detach(move || drop(batches)));
        }
    }
}

/// `ad.merge_states`' work: the states of every shard of a run (dicts from `state_dict()`)
/// joined into one that any shard layout resumes from (see
/// [`arrow_dlpack_loader::merge_states`]).
#[pyfunction]
#[pyo3(name = "_merge_states")]
pub(crate) fn merge_states<'py>(
    py: Python<'py>,
    states: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut parsed = Vec::with_capacity(states.len());
    for (index, state) in states.iter().enumerate() {
        if !state.is_instance_of::<PyDict>() {
            return Err(errors::type_error(format!(
                "states[{index}] is {}; expected a dict from state_dict()",
                type_name(&state)
            )));
        }
        parsed.push(options::state_from_python(
            &format!("states[{index}]"),
            &state,
        )?);
    }
    let merged = errors::no_panic("merging loader states", || {
        arrow_dlpack_loader::merge_states(&parsed).map_err(errors::loader_error)
    })?;
    options::state_to_python(py, &merged)
}
