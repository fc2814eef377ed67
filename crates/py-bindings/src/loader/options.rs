//! How each field of the loader's [`BatchSpec`](arrow_dlpack_loader::BatchSpec) crosses between Python and Rust: one
//! [`OptionValue`] conversion per field type, each naming the field in its errors.

use arrow_dlpack_loader::{
    ColumnGroup, LoaderState, PadValue, STATE_VERSION, Sequence, SequenceMode, Side,
};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors;
use crate::type_names::type_name;

/// How the value of one field of [`BatchSpec`] crosses between Python and Rust.
///
/// Each conversion names the field in its error: a value of the wrong type is a `TypeError`, an
/// integer no field can hold (negative, or beyond 64 bits) a `ValueError`, never the bare
/// `OverflowError` of pyo3's conversion. What a value means (a batch size of 0, a prefetch depth
/// beyond its bound) is checked by [`BatchSpec`] itself.
pub(super) trait OptionValue: Sized {
    /// The value of the keyword argument `field`.
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self>;
    /// The field's value for `_Batches.OPTIONS`.
    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

/// `value` as a Python `int`, or a `TypeError` naming `field`.
fn python_int<'a, 'py>(
    field: &str,
    value: &'a Bound<'py, PyAny>,
) -> PyResult<&'a Bound<'py, PyInt>> {
    value
        .cast::<PyInt>()
        .map_err(|_| errors::type_error(format!("{field} is {}; expected int", type_name(value))))
}

impl OptionValue for bool {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        value.extract().map_err(|_| {
            errors::type_error(format!("{field} is {}; expected bool", type_name(value)))
        })
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.into_bound_py_any(py)
    }
}

impl OptionValue for usize {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let int = python_int(field, value)?;
        if int.lt(0)? {
            return Err(errors::value_error(format!(
                "{field} is {int}; expected a non-negative int"
            )));
        }
        int.extract().map_err(|_| {
            errors::value_error(format!("{field} is {int}; expected at most {}", usize::MAX))
        })
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.into_bound_py_any(py)
    }
}

/// The seed takes any Python int, as `hash()` gives negative ones: the value modulo 2^64, so
/// that -1 is 2^64 - 1.
impl OptionValue for u64 {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        python_int(field, value)?.bitand(u64::MAX)?.extract()
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.into_bound_py_any(py)
    }
}

/// Names: a list or tuple of `str`; a lone `str` is refused rather than read as its characters.
impl OptionValue for Vec<String> {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        if !(value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>()) {
            return Err(errors::type_error(format!(
                "{field} is {}; expected a list of str",
                type_name(value)
            )));
        }
        let mut names = Vec::new();
        for (index, item) in value.try_iter()?.enumerate() {
            let item = item?;
            let name = item.cast::<PyString>().map_err(|_| {
                errors::type_error(format!(
                    "{field}[{index}] is {}; expected str",
                    type_name(&item)
                ))
            })?;
            names.push(name.to_str()?.to_owned());
        }
        Ok(names)
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.clone().into_bound_py_any(py)
    }
}

/// Groups cross as a list of `(name, columns)` pairs.
impl OptionValue for Vec<ColumnGroup> {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let pair_error = |index: usize, item: &Bound<'_, PyAny>| {
            errors::type_error(format!(
                "{field}[{index}] is {}; expected a (name, columns) pair",
                type_name(item)
            ))
        };
        if !value.is_instance_of::<PyList>() {
            return Err(errors::type_error(format!(
                "{field} is {}; expected a list of (name, columns) pairs",
                type_name(value)
            )));
        }
        let mut groups = Vec::new();
        for (index, item) in value.try_iter()?.enumerate() {
            let item = item?;
            let pair = item
                .cast::<PyTuple>()
                .map_err(|_| pair_error(index, &item))?;
            if pair.len() != 2 {
                return Err(pair_error(index, &item));
            }
            let name: String =
                String::from_python(&format!("{field}[{index}][0]"), &pair.get_item(0)?)?;
            let columns =
                Vec::<String>::from_python(&format!("{field}[{name:?}]"), &pair.get_item(1)?)?;
            groups.push(ColumnGroup::new(name, columns));
        }
        Ok(groups)
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pairs: Vec<(String, Vec<String>)> = self
            .iter()
            .map(|group| (group.name.clone(), group.columns.clone()))
            .collect();
        pairs.into_bound_py_any(py)
    }
}

/// A group's name, for [`Vec<ColumnGroup>`]; no field of the spec is a lone string.
impl OptionValue for String {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let name = value.cast::<PyString>().map_err(|_| {
            errors::type_error(format!("{field} is {}; expected str", type_name(value)))
        })?;
        Ok(name.to_str()?.to_owned())
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.into_bound_py_any(py)
    }
}

/// An optional count: `None`, or an int as [`usize`] takes it.
impl OptionValue for Option<usize> {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        if value.is_none() {
            return Ok(None);
        }
        if value.cast::<PyInt>().is_err() {
            return Err(errors::type_error(format!(
                "{field} is {}; expected int or None",
                type_name(value)
            )));
        }
        usize::from_python(field, value).map(Some)
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.into_bound_py_any(py)
    }
}

/// The keys of a sequence given as a dict.
const SEQUENCE_KEYS: [&str; 6] = [
    "mode",
    "pad_value",
    "max_length",
    "pad_to_multiple_of",
    "padding_side",
    "truncation_side",
];

/// Sequences cross as a dict from column name to a mode (`"pad"`, `"pack"`, `"jagged"`) or to
/// a dict of [`SEQUENCE_KEYS`] (`mode` defaulting to `"pad"`).
impl OptionValue for Vec<Sequence> {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let dict = value.cast::<PyDict>().map_err(|_| {
            errors::type_error(format!(
                "{field} is {}; expected a dict from column name to a mode (\"pad\", \"pack\", \
                 \"jagged\") or to a dict of options",
                type_name(value)
            ))
        })?;
        let mut sequences = Vec::new();
        for (column, how) in dict.iter() {
            let column = String::from_python(&format!("a key of {field}"), &column)?;
            let at = format!("{field}[{column:?}]");
            let mut sequence = Sequence::new(column, SequenceMode::Pad);
            if let Ok(mode) = how.cast::<PyString>() {
                sequence.mode = sequence_mode(&at, mode.to_str()?)?;
                sequences.push(sequence);
                continue;
            }
            let options = how.cast::<PyDict>().map_err(|_| {
                errors::type_error(format!(
                    "{at} is {}; expected a mode (\"pad\", \"pack\", \"jagged\") or a dict with \
                     keys {SEQUENCE_KEYS:?}",
                    type_name(&how)
                ))
            })?;
            for (key, item) in options.iter() {
                let key = String::from_python(&format!("a key of {at}"), &key)?;
                let here = format!("{at}[{key:?}]");
                match key.as_str() {
                    "mode" => {
                        sequence.mode = sequence_mode(&here, &String::from_python(&here, &item)?)?
                    }
                    "pad_value" => sequence.pad_value = pad_value(&here, &item)?,
                    "max_length" => {
                        sequence.max_length = Option::<usize>::from_python(&here, &item)?
                    }
                    "pad_to_multiple_of" => {
                        sequence.pad_to_multiple_of = Option::<usize>::from_python(&here, &item)?
                    }
                    "padding_side" => sequence.padding_side = side(&here, &item)?,
                    "truncation_side" => sequence.truncation_side = side(&here, &item)?,
                    _ => {
                        return Err(errors::value_error(format!(
                            "{at} has key {key:?}; expected keys among {SEQUENCE_KEYS:?}"
                        )));
                    }
                }
            }
            sequences.push(sequence);
        }
        Ok(sequences)
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let out = PyDict::new(py);
        for sequence in self {
            let options = PyDict::new(py);
            options.set_item("mode", sequence.mode.as_str())?;
            match sequence.pad_value {
                PadValue::Int(value) => options.set_item("pad_value", value)?,
                PadValue::Float(value) => options.set_item("pad_value", value)?,
            }
            options.set_item("max_length", sequence.max_length)?;
            options.set_item("pad_to_multiple_of", sequence.pad_to_multiple_of)?;
            let side_name = |side: Side| match side {
                Side::Right => "right",
                Side::Left => "left",
            };
            options.set_item("padding_side", side_name(sequence.padding_side))?;
            options.set_item("truncation_side", side_name(sequence.truncation_side))?;
            out.set_item(&sequence.column, options)?;
        }
        Ok(out.into_any())
    }
}

/// A sequence's mode from its name.
fn sequence_mode(at: &str, name: &str) -> PyResult<SequenceMode> {
    match name {
        "pad" => Ok(SequenceMode::Pad),
        "pack" => Ok(SequenceMode::Pack),
        "jagged" => Ok(SequenceMode::Jagged),
        _ => Err(errors::value_error(format!(
            "{at} is {name:?}; expected \"pad\", \"pack\" or \"jagged\""
        ))),
    }
}

/// A side from its name.
fn side(at: &str, value: &Bound<'_, PyAny>) -> PyResult<Side> {
    match String::from_python(at, value)?.as_str() {
        "right" => Ok(Side::Right),
        "left" => Ok(Side::Left),
        other => Err(errors::value_error(format!(
            "{at} is {other:?}; expected \"right\" or \"left\""
        ))),
    }
}

/// A pad value: an int (any that fits in 64 bits) or a float; a bool is refused.
fn pad_value(at: &str, value: &Bound<'_, PyAny>) -> PyResult<PadValue> {
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(errors::type_error(format!(
            "{at} is bool; expected int or float"
        )));
    }
    if let Ok(int) = value.cast::<PyInt>() {
        return int.extract::<i64>().map(PadValue::Int).map_err(|_| {
            errors::value_error(format!("{at} is {int}; expected an int of at most 64 bits"))
        });
    }
    if let Ok(float) = value.cast::<PyFloat>() {
        return Ok(PadValue::Float(float.value()));
    }
    Err(errors::type_error(format!(
        "{at} is {}; expected int or float",
        type_name(value)
    )))
}

/// A saved position crosses as the dict `state_dict()` gives: plain ints, strings, lists and
/// dicts, read through JSON, so that anything else in it (a float, a bool for an int, a
/// negative or too large number, a missing or unknown key) is a `ValueError` naming the
/// problem, never a panic.
impl OptionValue for Option<LoaderState> {
    fn from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        if value.is_none() {
            return Ok(None);
        }
        if !value.is_instance_of::<PyDict>() {
            return Err(errors::type_error(format!(
                "{field} is {}; expected a dict from state_dict(), or None",
                type_name(value)
            )));
        }
        state_from_python(field, value).map(Some)
    }

    fn to_python<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            None => Ok(py.None().into_bound(py)),
            Some(state) => state_to_python(py, state),
        }
    }
}

/// A state from its dict, through JSON; every problem a `ValueError` naming `field`.
pub(super) fn state_from_python(field: &str, value: &Bound<'_, PyAny>) -> PyResult<LoaderState> {
    let py = value.py();
    let json = py
        .import("json")?
        .call_method1("dumps", (value,))
        .map_err(|error| {
            errors::value_error(format!(
                "{field} is not a loader state: {}",
                error.value(py)
            ))
        })?;
    let text: String = json.extract()?;
    let not_a_state = |error: serde_json::Error| {
        errors::value_error(format!("{field} is not a loader state: {error}"))
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(not_a_state)?;
    // The version first: another format has fields this build does not read.
    if let Some(version) = value.get("version").and_then(serde_json::Value::as_u64) {
        if version > u64::from(STATE_VERSION) {
            return Err(errors::value_error(format!(
                "{field} is of format version {version}, newer than this build reads \
                 ({STATE_VERSION}); resume with the version of arrow-dlpack that saved it"
            )));
        }
        if version < u64::from(STATE_VERSION) {
            return Err(errors::value_error(format!(
                "{field} was saved by an older version of arrow-dlpack (state format \
                 {version}; this version reads format {STATE_VERSION}): start the epoch again \
                 without it, or resume with the version that saved it"
            )));
        }
    }
    serde_json::from_value(value).map_err(not_a_state)
}

/// A state as the dict that `state_dict()` gives.
pub(super) fn state_to_python<'py>(
    py: Python<'py>,
    state: &LoaderState,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(state)
        .map_err(|error| errors::value_error(format!("cannot write the state: {error}")))?;
    py.import("json")?.call_method1("loads", (text,))
}
