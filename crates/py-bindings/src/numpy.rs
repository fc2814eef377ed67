//! numpy results for PyArrow's `to_numpy` conveniences, built through numpy's own
//! `np.from_dlpack`, so that read-only data stays read-only and views stay views.
//!
//! numpy is imported only when one of these methods runs: the wheel has no runtime dependency on
//! it. This file sees the classes only through their Python methods (`__dlpack__`, `to_tensor`,
//! `validity`, `to_pylist`), so imports between files run one way.

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
    if zero_copy_only {
        let refusal = if matches!(facts.data_type, DataType::Boolean) {
            Some("zero-copy conversions are not possible with boolean types".to_string())
        } else if !numeric {
            Some(format!(
                "zero-copy conversions are possible only for integer and floating-point \
                 arrays, found {}",
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
        };
        if let Some(refusal) = refusal {
            return Err(errors::value_error(format!(
                "{refusal}; pass zero_copy_only=False to copy"
            )));
        }
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
            let rows = values_with_nulls(array, &np)?.call_method0("copy")?;
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
