//! Tables and record batches to tensors: `Tensor.from_arrow` (all numeric columns copied into one
//! 2-D tensor, PyArrow's `RecordBatch.to_tensor`) and `column_tensors` (one zero-copy tensor per
//! column).
//!
//! Both take anything whose Arrow type is a struct: a pyarrow Table or RecordBatch, a polars
//! DataFrame, a struct array, or any other `__arrow_c_stream__` / `__arrow_c_array__` producer.
//! `Tensor.from_arrow` writes a stream of several record batches into its tensor one after
//! another, in one pass (`arrow_dlpack::tables_to_tensor`); `column_tensors` concatenates them
//! into one struct array first (one copy of the input columns), and refuses that copy, and the
//! unpacking of boolean columns, with `copy=False`.

use std::collections::HashSet;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_dlpack::{
    ColumnTensorOptions, Table, TableToTensorOptions, table_to_tensors, tables_to_tensor,
};
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::array::PyArray;
use crate::arrow_device;
use crate::column::Column;
use crate::copies;
use crate::errors::{self, Operation};
use crate::py_tensor::PyTensor;
use crate::type_names::field_type_name;

/// The struct column behind `object`, and its chunks when it is foreign and has several (our
/// own arrays are rarely chunked, and give none).
fn import_struct_column(object: &Bound<'_, PyAny>) -> PyResult<(Column, Vec<ArrayRef>)> {
    let (column, chunks) = match object.cast::<PyArray>() {
        Ok(ours) => (ours.get().column().clone(), Vec::new()),
        Err(_) => {
            let imported = arrow_device::import_readable(object)?;
            let chunks = imported.chunks.clone();
            (Column::new(imported.field, imported.chunks), chunks)
        }
    };
    if !matches!(column.field().data_type(), DataType::Struct(_)) {
        return Err(errors::type_error(format!(
            "expected a table, a record batch or a struct array (Arrow type struct), found Arrow \
             type {}",
            field_type_name(column.field())
        )));
    }
    Ok((column, chunks))
}

/// The struct array behind `object`: its chunks concatenated when there are several and
/// `allow_copy` (else [`arrow_dlpack::Error::CopyRequired`], a `BufferError`).
fn import_struct(object: &Bound<'_, PyAny>, allow_copy: bool) -> PyResult<StructArray> {
    let (column, _) = import_struct_column(object)?;
    let combined = column
        .combined(allow_copy)
        .map_err(|error| errors::arrow_error(error, Operation::Import))?;
    Ok(combined.as_struct().clone())
}

/// `Tensor.from_arrow`: every column of `object` copied into one 2-D tensor, the record batches
/// of a stream one after another.
pub(crate) fn table_to_tensor(
    object: &Bound<'_, PyAny>,
    row_major: bool,
    null_to_nan: bool,
) -> PyResult<PyTensor> {
    let (column, chunks) = import_struct_column(object)?;
    // The chunks of a stream are written one after another; a single array as it is.
    let chunks: Vec<StructArray> = if chunks.len() > 1 {
        chunks
            .iter()
            .map(|chunk| chunk.as_struct().clone())
            .collect()
    } else {
        let combined = column
            .combined(true)
            .map_err(|error| errors::arrow_error(error, Operation::Import))?;
        vec![combined.as_struct().clone()]
    };
    let options = TableToTensorOptions {
        row_major,
        null_to_nan,
        dtype: None,
    };
    // Every element is copied, at most 8 bytes each: a large table is copied without the GIL.
    let bytes = chunks
        .iter()
        .map(|chunk| chunk.len().saturating_mul(chunk.num_columns()))
        .fold(0usize, usize::saturating_add)
        .saturating_mul(8);
    let tensor = copies::without_gil_if_large(object.py(), bytes, || {
        let tables: Vec<Table<'_>> = chunks.iter().map(Table::from).collect();
        tables_to_tensor(&tables, options)
    })
    .map_err(|error| errors::arrow_error(error, Operation::Export))?;
    Ok(PyTensor::new(tensor))
}

/// One tensor per column of a table, record batch or struct array, zero-copy, keyed by column
/// name in column order.
///
/// Primitive columns give 1-D tensors, fixed-size list columns `(num_rows, l1, ...)`,
/// `arrow.fixed_shape_tensor` columns `(num_rows, *shape)` in their logical order.
/// `copy=None` concatenates a stream of several record batches and unpacks boolean columns (the
/// copies `Array.__dlpack__` makes too) and shares everything else; `copy=False` refuses those
/// copies (a BufferError, or a TypeError naming a boolean column); `copy=True` gives every
/// column as a fresh row-major copy.
/// Nulls are refused with a ValueError unless `allow_nulls=True`; a type with no tensor layout
/// (strings, timestamps, ...) with a TypeError naming the column; duplicate column names with a
/// ValueError.
#[pyfunction]
#[pyo3(signature = (obj, /, *, allow_nulls = false, copy = None))]
pub(crate) fn column_tensors<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
    allow_nulls: bool,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyDict>> {
    let table = import_struct(obj, copy != Some(false))?;
    let mut seen = HashSet::new();
    if let Some(name) = table
        .column_names()
        .into_iter()
        .find(|name| !seen.insert(*name))
    {
        return Err(errors::value_error(format!(
            "duplicate column name {name:?}; expected unique names, as they become the keys of a \
             dict"
        )));
    }
    let options = ColumnTensorOptions {
        allow_nulls,
        allow_copy: copy != Some(false),
    };
    let columns = table_to_tensors(&Table::from(&table), options)
        .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
    let tensors = PyDict::new(py);
    for (name, tensor) in columns {
        let tensor = if copy == Some(true) {
            tensor.to_contiguous().map_err(errors::tensor_error)?
        } else {
            tensor
        };
        tensors.set_item(name, PyTensor::new(tensor))?;
    }
    Ok(tensors)
}
