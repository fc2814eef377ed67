//! Tables and record batches to tensors: `Tensor.from_arrow` (all numeric columns copied into one
//! 2-D tensor, PyArrow's `RecordBatch.to_tensor`) and `column_tensors` (one zero-copy tensor per
//! column).
//!
//! Both take anything whose Arrow type is a struct: a pyarrow Table or RecordBatch, a polars
//! DataFrame, a struct array, or any other `__arrow_c_stream__` / `__arrow_c_array__` producer.
//! A stream of several record batches is first concatenated into one struct array (one copy of
//! the input columns), then converted in one pass; `column_tensors` refuses that copy, and the
//! unpacking of boolean columns, with `copy=False`.

use std::collections::HashSet;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_dlpack::{
    EXTENSION_NAME, FixedShapeTensorArray, RecordBatchToTensorOptions, ToTensorOptions,
    columns_to_tensors, struct_array_to_tensor, to_tensor_with,
};
use arrow_dlpack_tensor::Tensor;
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::array::{Column, PyArray};
use crate::arrow_ffi;
use crate::errors::{self, Operation};
use crate::tensor::PyTensor;
use crate::type_names::field_type_name;

/// The struct array behind `object`: its chunks concatenated when there are several and
/// `allow_copy` (else [`arrow_dlpack::Error::CopyRequired`], a `BufferError`).
fn import_struct(object: &Bound<'_, PyAny>, allow_copy: bool) -> PyResult<StructArray> {
    let column = match object.cast::<PyArray>() {
        Ok(ours) => ours.get().column().clone(),
        Err(_) => {
            let imported = arrow_ffi::import(object)?;
            Column::new(imported.field, imported.chunks)
        }
    };
    if !matches!(column.field().data_type(), DataType::Struct(_)) {
        return Err(errors::type_error(format!(
            "expected a table, a record batch or a struct array (Arrow type struct), found Arrow \
             type {}",
            field_type_name(column.field())
        )));
    }
    let combined = column
        .combined(allow_copy)
        .map_err(|error| errors::arrow_error(error, Operation::Import))?;
    Ok(combined.as_struct().clone())
}

/// `Tensor.from_arrow`: every column of `object` copied into one 2-D tensor.
pub(crate) fn table_to_tensor(
    object: &Bound<'_, PyAny>,
    row_major: bool,
    null_to_nan: bool,
) -> PyResult<PyTensor> {
    // The conversion copies anyway; concatenating several batches first is one more copy.
    let table = import_struct(object, true)?;
    let options = RecordBatchToTensorOptions {
        row_major,
        null_to_nan,
    };
    let tensor = struct_array_to_tensor(&table, options)
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
    let null_count = table.null_count();
    if null_count > 0 && !allow_nulls {
        let error = arrow_dlpack::Error::Nulls {
            null_count,
            location: "the struct array (null rows)".to_string(),
        };
        return Err(errors::arrow_error(error, Operation::ToTensor));
    }
    let mut seen = HashSet::new();
    let tensors = PyDict::new(py);
    for (field, column) in table.fields().iter().zip(table.columns()) {
        if !seen.insert(field.name().as_str()) {
            return Err(errors::value_error(format!(
                "duplicate column name {:?}; expected unique names, as they become the keys of \
                 a dict",
                field.name()
            )));
        }
        let tensor = if field.extension_type_name() == Some(EXTENSION_NAME) {
            FixedShapeTensorArray::try_from_field_and_array(field, column.clone())
                .and_then(|array| array.to_tensor(allow_nulls))
        } else if is_boolean(field.data_type()) && copy != Some(false) {
            boolean_column_tensor(field.name(), column, allow_nulls)
        } else {
            column_tensor(field.name(), column, allow_nulls)
        }
        .map_err(|error| errors::arrow_error(error, Operation::ToTensor))?;
        let tensor = if copy == Some(true) {
            tensor.to_contiguous().map_err(errors::tensor_error)?
        } else {
            tensor
        };
        tensors.set_item(field.name(), PyTensor::new(tensor))?;
    }
    Ok(tensors)
}

/// One column's tensor, through arrow-dlpack's per-column conversion (whose errors name the
/// column).
fn column_tensor(name: &str, column: &ArrayRef, allow_nulls: bool) -> arrow_dlpack::Result<Tensor> {
    let mut tensors = columns_to_tensors(&[name], std::slice::from_ref(column), allow_nulls)?;
    let (_, tensor) = tensors
        .pop()
        .expect("columns_to_tensors gives one tensor per column");
    Ok(tensor)
}

/// Whether `data_type` is boolean, or fixed-size lists of booleans.
fn is_boolean(mut data_type: &DataType) -> bool {
    while let DataType::FixedSizeList(item, _) = data_type {
        data_type = item.data_type();
    }
    data_type == &DataType::Boolean
}

/// A boolean column unpacked into a `bool` tensor (a copy, as `Array.__dlpack__` makes one),
/// with nulls reported in the column's name.
fn boolean_column_tensor(
    name: &str,
    column: &ArrayRef,
    allow_nulls: bool,
) -> arrow_dlpack::Result<Tensor> {
    let options = ToTensorOptions {
        allow_nulls,
        allow_copy: true,
    };
    to_tensor_with(column.as_ref(), options).map_err(|error| match error {
        arrow_dlpack::Error::Nulls {
            null_count,
            location,
        } => arrow_dlpack::Error::Nulls {
            null_count,
            location: if location == "the array" {
                format!("column {name:?}")
            } else {
                format!("{location} of column {name:?}")
            },
        },
        other => other,
    })
}
