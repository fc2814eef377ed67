//! numpy results for PyArrow's `to_numpy` conveniences, built through numpy's own
//! `np.from_dlpack`, so that read-only data stays read-only and views stay views.
//!
//! numpy is imported only when one of these methods runs: the wheel has no runtime dependency on
//! it. This file sees the classes only through their Python methods (`__dlpack__`, `to_tensor`,
//! `validity`, `to_pylist`), so imports between files run one way.

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule};

use crate::errors;

/// The numpy module, or an `ImportError` that says which method needed it.
fn numpy<'py>(py: Python<'py>, method: &str) -> PyResult<Bound<'py, PyModule>> {
    py.import("numpy").map_err(|error| {
        PyImportError::new_err(format!(
            "{method} needs numpy, which is not installed ({error})"
        ))
    })
}

/// `np.from_dlpack(producer)`: a view where the producer shares its memory, read-only where the
/// producer flags it so.
///
/// `read_only` marks the result read-only also where numpy cannot tell: an empty tensor exports
/// no data pointer, so numpy makes a fresh writable array of it, where PyArrow gives a read-only
/// one.
pub(crate) fn from_dlpack<'py>(
    producer: &Bound<'py, PyAny>,
    read_only: bool,
    method: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let result = numpy(producer.py(), method)?.call_method1("from_dlpack", (producer,))?;
    if read_only {
        result.getattr("flags")?.setattr("writeable", false)?;
    }
    Ok(result)
}

/// What an array is, for `to_numpy`.
pub(crate) struct ArrayFacts<'a> {
    /// The storage type (an extension array's storage type).
    pub(crate) data_type: &'a DataType,
    pub(crate) len: usize,
    pub(crate) null_count: usize,
    /// Whether one array needs its chunks concatenated (a copy).
    pub(crate) needs_concat: bool,
    /// The chunks, for the nulls inside a fixed-size list's elements.
    pub(crate) chunks: &'a [ArrayRef],
}

/// `Array.to_numpy(zero_copy_only=True, writable=False)` with PyArrow's semantics.
///
/// - A numeric array without nulls in one chunk is a read-only view.
/// - `zero_copy_only=True` refuses, with `ArrowDLPackValueError` (PyArrow's `ArrowInvalid` is a
///   `ValueError` too), what needs a copy: nulls, booleans, several chunks, other types; and
///   `writable=True`.
/// - `zero_copy_only=False` copies where needed: nulls give NaN (integers become `float64`,
///   floats keep their type); booleans give `bool` (`object` with None for nulls); fixed-size
///   lists give an `object` array of one numpy array per element (None for nulls); other types an
///   `object` array of Python values.
/// - `writable=True` copies a read-only result.
pub(crate) fn array_to_numpy<'py>(
    array: &Bound<'py, PyAny>,
    facts: ArrayFacts<'_>,
    zero_copy_only: bool,
    writable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = array.py();
    let method = "Array.to_numpy()";
    if zero_copy_only && writable {
        return Err(errors::value_error(
            "cannot return a writable array if asking for zero-copy: pass zero_copy_only=False",
        ));
    }
    let numeric = is_numeric(facts.data_type);
    if zero_copy_only && let Some(refusal) = zero_copy_refusal(array, &facts)? {
        return Err(errors::value_error(format!(
            "{refusal}; pass zero_copy_only=False to copy"
        )));
    }
    let np = numpy(py, method)?;
    let result =
        if facts.null_count == 0 && (numeric || matches!(facts.data_type, DataType::Boolean)) {
            // A view of one chunk (read-only, as Arrow data is); several chunks and booleans come
            // as a fresh copy.
            let view = numeric && !facts.needs_concat;
            from_dlpack(array, view, method)?
        } else if numeric {
            let values = values_with_nulls(array, &np)?;
            let validity = np.call_method1("from_dlpack", (array.call_method0("validity")?,))?;
            let dtype = values.getattr("dtype")?;
            let float_kind = dtype.getattr("kind")?.extract::<String>()? == "f";
            let target = if float_kind {
                dtype
            } else {
                np.getattr("float64")?
            };
            let out = values.call_method1("astype", (target,))?;
            let nulls = np.call_method1("logical_not", (validity,))?;
            out.set_item(nulls, np.getattr("nan")?)?;
            out
        } else if matches!(facts.data_type, DataType::FixedSizeList(..)) {
            let mut rows = values_with_nulls(array, &np)?.call_method0("copy")?;
            if let Some(inner) = inner_nulls(facts.chunks) {
                // A null inside an element becomes NaN, as PyArrow's: every row then float
                // (integers as float64), since NaN is the only null a numpy number has.
                rows = float_rows(&np, &rows)?;
                let shape = rows.getattr("shape")?;
                let mask = np
                    .call_method1("array", (inner,))?
                    .call_method1("reshape", (shape,))?;
                rows.set_item(mask, np.getattr("nan")?)?;
            }
            let valid: Vec<bool> = np
                .call_method1("from_dlpack", (array.call_method0("validity")?,))?
                .call_method0("tolist")?
                .extract()?;
            let out = object_array(&np, facts.len)?;
            for (index, valid) in valid.into_iter().enumerate() {
                if valid {
                    out.set_item(index, rows.get_item(index)?)?;
                }
            }
            out
        } else {
            let out = object_array(&np, facts.len)?;
            for (index, value) in array.call_method0("to_pylist")?.try_iter()?.enumerate() {
                out.set_item(index, value?)?;
            }
            out
        };
    if writable
        && !result
            .getattr("flags")?
            .getattr("writeable")?
            .extract::<bool>()?
    {
        return result.call_method0("copy");
    }
    Ok(result)
}

/// Why `to_numpy()` of an array cannot be a view of its memory, or None when it can.
fn zero_copy_refusal(array: &Bound<'_, PyAny>, facts: &ArrayFacts<'_>) -> PyResult<Option<String>> {
    Ok(if matches!(facts.data_type, DataType::Boolean) {
        Some("zero-copy conversions are not possible with boolean types".to_string())
    } else if !is_numeric(facts.data_type) {
        Some(format!(
            "zero-copy conversions are possible only for integer and floating-point arrays, \
             found {}",
            array.getattr("type")?
        ))
    } else if facts.null_count > 0 {
        Some(format!(
            "zero-copy conversions are not possible with nulls, found {} nulls",
            facts.null_count
        ))
    } else if facts.needs_concat {
        Some("zero-copy conversions are not possible with several chunks".to_string())
    } else {
        None
    })
}

/// The values (null slots unspecified) as numpy, through `to_tensor(allow_nulls=True)`.
fn values_with_nulls<'py>(
    array: &Bound<'py, PyAny>,
    np: &Bound<'py, PyModule>,
) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(array.py());
    kwargs.set_item("allow_nulls", true)?;
    let tensor = array.call_method("to_tensor", (), Some(&kwargs))?;
    np.call_method1("from_dlpack", (tensor,))
}

/// `values` as a float array: its own dtype when it is one, else `float64`.
fn float_rows<'py>(
    np: &Bound<'py, PyModule>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let dtype = values.getattr("dtype")?;
    let target = if dtype.getattr("kind")?.extract::<String>()? == "f" {
        dtype
    } else {
        np.getattr("float64")?
    };
    values.call_method1("astype", (target,))
}

/// Whether each value of the (nested) fixed-size list chunks is null below the row level: the
/// value itself, or an inner list that holds it; `None` when none is. Rows that are null
/// themselves are not marked (they become None).
fn inner_nulls(chunks: &[ArrayRef]) -> Option<Vec<bool>> {
    fn inner_null_count(array: &dyn Array) -> usize {
        match array.as_fixed_size_list_opt() {
            Some(list) => list.values().null_count() + inner_null_count(list.values().as_ref()),
            None => 0,
        }
    }
    fn mark(array: &dyn Array, null: bool, out: &mut Vec<bool>) {
        match array.as_fixed_size_list_opt() {
            Some(list) => {
                for i in 0..list.len() {
                    mark(list.value(i).as_ref(), null || list.is_null(i), out);
                }
            }
            None => out.extend((0..array.len()).map(|i| null || array.is_null(i))),
        }
    }
    if chunks
        .iter()
        .all(|chunk| inner_null_count(chunk.as_ref()) == 0)
    {
        return None;
    }
    let mut out = Vec::new();
    for chunk in chunks {
        if let Some(list) = chunk.as_fixed_size_list_opt() {
            for row in 0..list.len() {
                mark(list.value(row).as_ref(), false, &mut out);
            }
        }
    }
    Some(out)
}

/// `np.empty(len, dtype=object)`: every slot None.
fn object_array<'py>(np: &Bound<'py, PyModule>, len: usize) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(np.py());
    kwargs.set_item("dtype", "object")?;
    np.call_method("empty", (len,), Some(&kwargs))
}

/// The Arrow types that numpy views as they are: integers and floats.
fn is_numeric(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
    )
}

/// What numpy's `__array__(dtype=None, copy=None)` protocol asks, as numpy 2 defines it.
#[derive(Clone, Copy)]
pub(crate) struct ArrayRequest<'a, 'py> {
    /// The dtype numpy wants, or None for the data's own.
    pub(crate) dtype: Option<&'a Bound<'py, PyAny>>,
    /// `True`: always a copy; `False`: never a copy (ValueError when one is needed, as numpy
    /// asks); `None`: a copy only when needed.
    pub(crate) copy: Option<bool>,
}

/// The ValueError of `copy=False` when a copy is needed: numpy's own wording, with the reason.
fn copy_refused(what: &str, reason: impl std::fmt::Display) -> PyErr {
    errors::value_error(format!(
        "unable to avoid a copy while creating a numpy array of {what} as requested \
         (copy=False): {reason}; pass copy=None (np.asarray) to allow a copy when needed"
    ))
}

/// `result` cast to the requested dtype, copied when `copy=True` asked for a copy and `result`
/// is a view (`fresh` is false); numpy refuses a cast with `copy=False` itself.
fn finish<'py>(
    result: Bound<'py, PyAny>,
    request: ArrayRequest<'_, 'py>,
    fresh: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let np = numpy(result.py(), "__array__")?;
    let kwargs = PyDict::new(result.py());
    if let Some(dtype) = request.dtype {
        kwargs.set_item("dtype", dtype)?;
    }
    let copy = match request.copy {
        Some(true) if fresh => None,
        other => other,
    };
    kwargs.set_item("copy", copy)?;
    np.call_method("array", (result,), Some(&kwargs))
}

/// `Array.__array__`, as PyArrow's: `to_numpy(zero_copy_only=False)` (nulls as NaN, integers
/// with nulls widened to `float64`, booleans as `bool`, other types as `object` arrays), a view
/// where `to_numpy()` is one; `copy=False` refuses what needs a copy with the reason.
pub(crate) fn array_dunder<'py>(
    array: &Bound<'py, PyAny>,
    facts: ArrayFacts<'_>,
    request: ArrayRequest<'_, 'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let refusal = zero_copy_refusal(array, &facts)?;
    let view = refusal.is_none();
    if request.copy == Some(false)
        && let Some(reason) = refusal
    {
        return Err(copy_refused("an Array", reason));
    }
    let result = array_to_numpy(array, facts, false, false)?;
    finish(result, request, !view)
}

/// `__array__` of a DLPack producer that is one tensor (`Tensor`, `FixedShapeTensorArray`):
/// `np.from_dlpack`, a view (read-only where the data is), copied only for `copy=True` or a
/// dtype of another kind.
pub(crate) fn tensor_dunder<'py>(
    producer: &Bound<'py, PyAny>,
    read_only: bool,
    request: ArrayRequest<'_, 'py>,
    what: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let result = from_dlpack(producer, read_only, what)?;
    finish(result, request, false)
}

/// `__array__` of rows that are not one tensor (a list column, a variable-shape tensor column):
/// a one-dimensional `object` array holding each row as its own numpy array (None for a null
/// row), as PyArrow gives for list arrays; `copy=False` is refused, since no single numpy array
/// shares the column's memory.
pub(crate) fn rows_dunder<'py>(
    py: Python<'py>,
    rows: Vec<Option<Bound<'py, PyAny>>>,
    request: ArrayRequest<'_, 'py>,
    what: &str,
) -> PyResult<Bound<'py, PyAny>> {
    if request.copy == Some(false) {
        return Err(copy_refused(
            what,
            "its rows differ in length, so numpy can hold them only as an object array of rows",
        ));
    }
    let np = numpy(py, "__array__")?;
    let out = object_array(&np, rows.len())?;
    for (index, row) in rows.into_iter().enumerate() {
        if let Some(row) = row {
            out.set_item(index, row)?;
        }
    }
    finish(out, request, true)
}
