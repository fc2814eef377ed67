//! The loader's free functions: `_check_options` (the checks of `_Batches` without a loader,
//! behind `BatchDataset`), `_collate` (behind `ad.ray.collate_fn`) and `_merge_states` (behind
//! `ad.merge_states`).

use arrow_array::RecordBatchReader;
use arrow_dlpack_loader::{OptionScope, Source, collate, outline};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::options::{self, spec_from_options};
use super::source::{Input, StreamBatches, source_of, stated_schema, stream_rows};
use crate::arrow_ffi::CheckedStream;
use crate::errors;
use crate::py_tensor::PyTensor;
use crate::type_names::type_name;

/// `batch` as Python sees it: a dict from tensor name to `Tensor`, masks as `"<name>_mask"`.
pub(super) fn batch_dict(
    py: Python<'_>,
    batch: arrow_dlpack_loader::TensorBatch,
) -> PyResult<Bound<'_, PyDict>> {
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

/// `_check_options(source=None, *, storage_options=None, **options)`: what `_Batches(source,
/// ...)` checks before its first batch, without making a loader: every option (as `_Batches`
/// takes them), and for files and objects in object storage the spec against their schema
/// (their footers are read; no data is, and no loader thread starts). A stream is not read
/// (it could be read only once), but the schema it states is checked: `source` may then be
/// `None`.
///
/// Returns `{"num_rows": ..., "num_batches": ..., "rows_left_out": ...}`, the first two `None`
/// where unknown: from the files' metadata, or from the rows an in-memory stream says it holds.
#[pyfunction]
#[pyo3(name = "_check_options", signature = (source=None, *, storage_options=None, **options))]
pub(crate) fn check_options<'py>(
    py: Python<'py>,
    source: Option<&Bound<'py, PyAny>>,
    storage_options: Option<&Bound<'py, PyAny>>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = spec_from_options("_check_options", options, None)?;
    spec.validate().map_err(errors::loader_error)?;
    let (mut num_rows, mut num_batches, mut rows_left_out) = (None, None, 0);
    if let Some(source) = source.filter(|source| !source.is_none()) {
        // A reader (a stream that does not state its rows) is not read here, but the schema it
        // states is checked against the spec as the loader checks it: columns, types, names.
        // Everything else is outlined as the loader outlines it; a table's record batches
        // (taken without copying) tell each shard's rows and the nulls they declare, which are
        // refused here as the loader refuses them, and a state is checked against them.
        if let Some(None) = stream_rows(source)? {
            if let Some(schema) = stated_schema(source)? {
                let empty = Source::RecordBatches {
                    schema,
                    batches: Vec::new(),
                };
                errors::no_panic("checking the options against the source's schema", || {
                    outline(empty, &spec).map_err(errors::loader_error)
                })?;
            }
        } else {
            let Input { source, .. } = errors::no_panic("reading an Arrow source", || {
                source_of(source, storage_options)
            })?;
            let found = errors::no_panic("planning the loader's source", || {
                let spec = spec.clone();
                super::interrupt::plan_interruptibly(py, source, move |source| {
                    outline(source, &spec)
                })?
                .map_err(errors::loader_error)
            })?;
            (num_rows, num_batches) = (found.num_rows, found.num_batches);
            rows_left_out = found.rows_left_out;
        }
    }
    let out = PyDict::new(py);
    out.set_item("num_rows", num_rows)?;
    out.set_item("num_batches", num_batches)?;
    out.set_item("rows_left_out", rows_left_out)?;
    Ok(out)
}

/// `_collate(table, **options)`: one batch of every row of an Arrow stream (a table), made on
/// the calling thread ([`collate`]), with the GIL released when the batch is large; the options
/// are those of `_Batches` that say what a batch holds ([`OptionScope::Batch`]).
#[pyfunction]
#[pyo3(name = "_collate", signature = (table, **options))]
pub(crate) fn collate_table<'py>(
    py: Python<'py>,
    table: &Bound<'py, PyAny>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = spec_from_options("_collate", options, Some(OptionScope::Batch))?;
    let Some(method) = crate::protocols::optional_attribute(table, "__arrow_c_stream__")? else {
        return Err(errors::type_error(format!(
            "{} has no __arrow_c_stream__; expected a table (a pyarrow Table, a polars \
             DataFrame, ...)",
            type_name(table)
        )));
    };
    let capsule = method.call0()?;
    let stream = errors::no_panic("reading an Arrow stream", || {
        StreamBatches::new(vec![CheckedStream::from_capsule(&capsule)?], None)
    })?;
    let batch = errors::no_panic("collating a batch", || {
        let schema = stream.schema();
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
