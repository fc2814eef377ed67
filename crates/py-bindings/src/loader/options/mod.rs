//! How the options of the loader's [`BatchSpec`] cross from Python: each keyword is looked up in
//! [`BatchSpec::OPTIONS`] and its value converted by the option's [`OptionType`], one conversion
//! per type, each naming the option in its errors; `_Batches.OPTIONS` lists the options for the
//! Python side (their defaults, annotations and summaries), which holds its signatures to them.

use arrow_dlpack::ARROW_DTYPES;
use arrow_dlpack_loader::{
    BatchSpec, ColumnGroup, DType, ImageColumn, LoaderState, NullToNan, OptionDecl, OptionScope,
    OptionType, OptionValue, PadValue, Sequence, SequenceMode, SequenceTokenizer, Side,
    check_state_format,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyMapping, PyString};

use crate::errors;
use crate::type_names::type_name;

mod sequences;

/// The spec that the keyword arguments `options` give, every option absent from them at its
/// default. A keyword that names no option (or, with `scope`, no option of that scope) is a
/// `TypeError` naming `function`, as Python's own for an unexpected keyword; a value that the
/// option cannot take is an error naming the option.
pub(super) fn spec_from_options(
    function: &str,
    options: Option<&Bound<'_, PyDict>>,
    scope: Option<OptionScope>,
) -> PyResult<BatchSpec> {
    let mut spec = BatchSpec::default();
    for (keyword, value) in options.into_iter().flat_map(|options| options.iter()) {
        let keyword: String = keyword.extract()?;
        let option = OptionDecl::find(&keyword)
            .filter(|option| scope.is_none_or(|scope| option.scope == scope))
            .ok_or_else(|| {
                errors::type_error(format!(
                    "{function}() got an unexpected keyword argument '{keyword}'"
                ))
            })?;
        let value = from_python(option, &value)?;
        spec.set_option(option.name, value)
            .map_err(errors::loader_error)?;
    }
    Ok(spec)
}

/// The value of `option` from Python, converted by the option's type.
fn from_python(option: &OptionDecl, value: &Bound<'_, PyAny>) -> PyResult<OptionValue> {
    let name = option.name;
    Ok(match option.option_type {
        OptionType::Bool => OptionValue::Bool(flag(name, value)?),
        OptionType::NullToNan => OptionValue::NullToNan(null_to_nan(name, value)?),
        OptionType::Usize => OptionValue::Usize(count(name, value)?),
        OptionType::Count => OptionValue::Usize(positive(name, value)?),
        OptionType::OptionalUsize => {
            OptionValue::OptionalUsize(optional(value, |value| count(name, value))?)
        }
        OptionType::U64 => OptionValue::U64(non_negative(name, value)?),
        OptionType::Seed => OptionValue::U64(seed(name, value)?),
        OptionType::Columns => OptionValue::Columns(optional(value, |value| names(name, value))?),
        OptionType::Names => {
            OptionValue::Names(optional(value, |value| names(name, value))?.unwrap_or_default())
        }
        OptionType::Groups => OptionValue::Groups(groups(name, value)?),
        OptionType::Sequences => OptionValue::Sequences(sequences::sequences(name, value)?),
        OptionType::State => OptionValue::State(
            optional(value, |value| state_from_mapping(name, value))?.map(Box::new),
        ),
        OptionType::Images => {
            OptionValue::Images(optional(value, |value| images(name, value))?.unwrap_or_default())
        }
        OptionType::OptionalText => {
            OptionValue::OptionalText(optional(value, |value| text_or_path(name, value))?)
        }
        other => {
            return Err(errors::type_error(format!(
                "{name} is an option of type {other:?}, which this build cannot take from Python"
            )));
        }
    })
}

/// `None` for Python's `None`, else `convert(value)`.
fn optional<'py, T>(
    value: &Bound<'py, PyAny>,
    convert: impl FnOnce(&Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Option<T>> {
    if value.is_none() {
        return Ok(None);
    }
    convert(value).map(Some)
}

/// The default of `option` as the Python signatures spell it: an empty collection, or no
/// state, is `None`.
fn python_default<'py>(py: Python<'py>, option: &OptionDecl) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    match option.default_value() {
        OptionValue::Bool(value) => value.into_bound_py_any(py),
        OptionValue::NullToNan(NullToNan::Off) => false.into_bound_py_any(py),
        OptionValue::NullToNan(NullToNan::Auto) => true.into_bound_py_any(py),
        OptionValue::Usize(value) => value.into_bound_py_any(py),
        OptionValue::OptionalUsize(value) => value.into_bound_py_any(py),
        OptionValue::U64(value) => value.into_bound_py_any(py),
        OptionValue::Columns(Some(names)) => names.into_bound_py_any(py),
        OptionValue::Names(names) if !names.is_empty() => names.into_bound_py_any(py),
        OptionValue::Columns(None) | OptionValue::Names(_) | OptionValue::State(None) => {
            Ok(py.None().into_bound(py))
        }
        OptionValue::Groups(groups) if groups.is_empty() => Ok(py.None().into_bound(py)),
        OptionValue::Sequences(sequences) if sequences.is_empty() => Ok(py.None().into_bound(py)),
        OptionValue::Images(images) if images.is_empty() => Ok(py.None().into_bound(py)),
        OptionValue::OptionalText(None) => Ok(py.None().into_bound(py)),
        other => Err(errors::value_error(format!(
            "the default of {} is {other:?}, which has no Python spelling here",
            option.name
        ))),
    }
}

/// The annotation of an option of type `option_type` in the Python signatures and stubs.
fn python_annotation(option_type: OptionType) -> &'static str {
    match option_type {
        OptionType::Bool => "bool",
        OptionType::NullToNan => "Union[bool, Sequence[str]]",
        OptionType::Usize | OptionType::Count | OptionType::U64 | OptionType::Seed => "int",
        OptionType::OptionalUsize => "Optional[int]",
        OptionType::Columns | OptionType::Names => "Optional[Sequence[str]]",
        OptionType::Groups => "Optional[Mapping[str, Union[Sequence[str], Mapping[str, Any]]]]",
        OptionType::Sequences => "Optional[Mapping[str, Union[str, Mapping[str, Any]]]]",
        OptionType::State => "Optional[Mapping[str, Any]]",
        OptionType::Images => "Optional[Mapping[str, Mapping[str, Any]]]",
        OptionType::OptionalText => "Optional[str]",
        _ => "Any",
    }
}

/// `_Batches.OPTIONS`: every option of [`BatchSpec`], in declaration order, as a dict from its
/// name to a dict of its `default` (as the Python signatures spell it), `annotation`, `scope`
/// (`"batch"`: what a batch holds, which `ad.ray.collate_fn` takes too; `"stream"`) and
/// `summary`.
pub(super) fn options_table(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let table = PyDict::new(py);
    for option in BatchSpec::OPTIONS {
        let entry = PyDict::new(py);
        entry.set_item("default", python_default(py, option)?)?;
        entry.set_item("annotation", python_annotation(option.option_type))?;
        let scope = match option.scope {
            OptionScope::Batch => "batch",
            OptionScope::Stream => "stream",
        };
        entry.set_item("scope", scope)?;
        entry.set_item("summary", option.summary)?;
        table.set_item(option.name, entry)?;
    }
    Ok(table)
}

/// A flag: a `bool` (numpy's included).
fn flag(name: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    value
        .extract()
        .map_err(|_| errors::type_error(format!("{name} is {}; expected bool", type_name(value))))
}

/// Where nulls become NaN: a flag (`True` wherever nulls may be), or a list of column and group
/// names.
fn null_to_nan(name: &str, value: &Bound<'_, PyAny>) -> PyResult<NullToNan> {
    if value.is_instance_of::<PyBool>() {
        return Ok(NullToNan::from(flag(name, value)?));
    }
    if value.is_instance_of::<PyString>() || value.try_iter().is_err() {
        return Err(errors::type_error(format!(
            "{name} is {}; expected bool or a list of str",
            type_name(value)
        )));
    }
    names(name, value).map(NullToNan::Columns)
}

/// An integer: a Python `int`, or anything with `__index__` (a numpy integer), but not a bool.
fn integer<'py>(name: &str, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyInt>> {
    let refused = || errors::type_error(format!("{name} is {}; expected int", type_name(value)));
    if value.is_instance_of::<PyBool>() {
        return Err(refused());
    }
    if let Ok(int) = value.cast::<PyInt>() {
        return Ok(int.clone());
    }
    if !value.hasattr(pyo3::intern!(value.py(), "__index__"))? {
        return Err(refused());
    }
    let index = value
        .py()
        .import(pyo3::intern!(value.py(), "operator"))?
        .getattr(pyo3::intern!(value.py(), "index"))?;
    match index.call1((value,)) {
        Ok(int) => int.cast_into::<PyInt>().map_err(|_| refused()),
        Err(error) if error.is_instance_of::<pyo3::exceptions::PyTypeError>(value.py()) => {
            Err(refused())
        }
        Err(error) => Err(error),
    }
}

/// A non-negative integer: a negative one is a `ValueError` naming the option.
fn non_negative_int<'py>(name: &str, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyInt>> {
    let int = integer(name, value)?;
    if int.lt(0)? {
        return Err(errors::value_error(format!(
            "{name} is {int}; expected a non-negative int"
        )));
    }
    Ok(int)
}

/// A count or a size; one beyond `usize` is a `ValueError` naming the option, never pyo3's
/// bare `OverflowError`.
fn count(name: &str, value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let int = non_negative_int(name, value)?;
    int.extract()
        .map_err(|_| errors::value_error(format!("{name} is {int}; expected at most 2**64 - 1")))
}

/// A count of at least 1: 0 or a negative one is a `ValueError` naming the option.
fn positive(name: &str, value: &Bound<'_, PyAny>) -> PyResult<usize> {
    let int = integer(name, value)?;
    if int.lt(1)? {
        return Err(errors::value_error(format!(
            "{name} is {int}; expected at least 1"
        )));
    }
    count(name, value)
}

/// A non-negative 64-bit integer.
fn non_negative(name: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let int = non_negative_int(name, value)?;
    int.extract()
        .map_err(|_| errors::value_error(format!("{name} is {int}; expected at most 2**64 - 1")))
}

/// A seed: any integer, as `hash()` gives negative ones, taken modulo 2^64, so that -1 is
/// 2^64 - 1.
fn seed(name: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    integer(name, value)?.bitand(u64::MAX)?.extract()
}

/// A `str`, naming `at` in the error.
fn string(at: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    let text = value
        .cast::<PyString>()
        .map_err(|_| errors::type_error(format!("{at} is {}; expected str", type_name(value))))?;
    Ok(text.to_str()?.to_owned())
}

/// Column names: a list, tuple or other iterable of `str` (a pandas `Index`); a lone `str` (or
/// `bytes`) is refused rather than read as its characters, and a mapping (whose iteration gives
/// its keys) is refused too.
fn names(at: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let refused = || {
        errors::type_error(format!(
            "{at} is {}; expected a list of str",
            type_name(value)
        ))
    };
    if value.is_instance_of::<PyString>()
        || value.is_instance_of::<PyBytes>()
        || value.cast::<PyMapping>().is_ok()
    {
        return Err(refused());
    }
    let Ok(items) = value.try_iter() else {
        return Err(refused());
    };
    let mut names = Vec::new();
    for (index, item) in items.enumerate() {
        names.push(string(&format!("{at}[{index}]"), &item?)?);
    }
    Ok(names)
}

/// A mapping (a `dict`, or any `collections.abc.Mapping`), or a `TypeError` saying `expected`.
fn mapping<'a, 'py>(
    at: &str,
    value: &'a Bound<'py, PyAny>,
    expected: &str,
) -> PyResult<&'a Bound<'py, PyMapping>> {
    value.cast::<PyMapping>().map_err(|_| {
        errors::type_error(format!("{at} is {}; expected {expected}", type_name(value)))
    })
}

/// Image columns: a mapping from column name to its spec, a mapping of the keys of
/// `ad.decode_images` (read by the one conversion of image specs, `images::image_spec`); an error
/// in a spec names its column.
fn images(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<ImageColumn>> {
    let expected = "a dict from column name to an image spec dict";
    let columns = mapping(name, value, expected)?;
    let mut out = Vec::new();
    for item in columns.items()?.try_iter()? {
        let (column, spec): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
        let column = string(&format!("a key of {name}"), &column)?;
        let at = format!("{name}[{column:?}]");
        let keys = PyDict::new(value.py());
        for (key, item) in mapping(&at, &spec, "a dict of image spec keys")?
            .items()?
            .extract::<Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)>>()?
        {
            keys.set_item(key, item)?;
        }
        let spec = crate::images::image_spec(&keys).map_err(|error| {
            let py = value.py();
            let message = format!("{at}: {}", error.value(py));
            if error.is_instance_of::<pyo3::exceptions::PyTypeError>(py) {
                errors::type_error(message)
            } else if error.is_instance_of::<pyo3::exceptions::PyValueError>(py) {
                errors::value_error(message)
            } else {
                error
            }
        })?;
        out.push(ImageColumn::new(column, spec));
    }
    Ok(out)
}

/// A text option that may name a directory: a `str`, or an `os.PathLike` (a `pathlib.Path`).
fn text_or_path(name: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(text) = value.cast::<PyString>() {
        // A path of bytes that are not UTF-8 reaches Python as surrogate escapes, which the
        // loader's text options cannot hold.
        return text.to_str().map(str::to_owned).map_err(|_| {
            errors::value_error(format!(
                "{name} is not valid UTF-8 (a path of other bytes); expected a path of UTF-8 \
                 characters"
            ))
        });
    }
    let fspath = value
        .py()
        .import(pyo3::intern!(value.py(), "os"))?
        .getattr(pyo3::intern!(value.py(), "fspath"))?;
    match fspath.call1((value,)) {
        Ok(path) => string(name, &path),
        Err(_) => Err(errors::type_error(format!(
            "{name} is {}; expected str or os.PathLike",
            type_name(value)
        ))),
    }
}

/// Groups: a mapping from group name to its columns, or to a dict of its `columns` and its
/// `dtype`; `None` for none.
fn groups(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<ColumnGroup>> {
    if value.is_none() {
        return Ok(Vec::new());
    }
    let groups = mapping(
        name,
        value,
        "a dict from group name to its columns (or to a dict with keys 'columns' and 'dtype')",
    )?;
    let mut out = Vec::new();
    for item in groups.items()?.iter() {
        let (key, spec): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let group = string(&format!("a key of {name}"), &key)?;
        let at = format!("{name}[{group:?}]");
        let Ok(spec) = spec.cast::<PyMapping>() else {
            out.push(ColumnGroup::new(group, names(&at, &spec)?));
            continue;
        };
        let (mut columns, mut dtype) = (None, None);
        for item in spec.items()?.iter() {
            let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            let key = string(&format!("a key of {at}"), &key)?;
            let here = format!("{at}[{key:?}]");
            match key.as_str() {
                "columns" => columns = Some(names(&here, &value)?),
                "dtype" => dtype = optional(&value, |value| group_dtype(&here, value))?,
                _ => {
                    return Err(errors::type_error(format!(
                        "{at} has the key {key:?}; expected the keys 'columns' and 'dtype'"
                    )));
                }
            }
        }
        let columns = columns.ok_or_else(|| {
            errors::type_error(format!(
                "{at} has no key 'columns'; expected its columns there"
            ))
        })?;
        let group = ColumnGroup::new(group, columns);
        out.push(match dtype {
            Some(dtype) => group.dtype(dtype),
            None => group,
        });
    }
    Ok(out)
}

/// A group's dtype: its name (`"float32"`, `"bool"`), or a numpy or torch dtype (`np.float32`,
/// `np.dtype("float32")`, `torch.float32`, `torch.bool`), read by its name.
fn group_dtype(at: &str, value: &Bound<'_, PyAny>) -> PyResult<DType> {
    let text = if let Ok(text) = value.cast::<PyString>() {
        text.to_str()?.to_owned()
    } else if value.is_instance_of::<pyo3::types::PyType>() {
        // A numpy scalar type (`np.float32`).
        value.getattr("__name__")?.extract::<String>()?
    } else if type_name(value).starts_with("numpy") || type_name(value) == "torch.dtype" {
        value.str()?.to_str()?.to_owned()
    } else {
        return Err(errors::type_error(format!(
            "{at} is {}; expected a dtype name such as 'float32', or a numpy or torch dtype",
            type_name(value)
        )));
    };
    let name = text.strip_prefix("torch.").unwrap_or(&text);
    // The numeric dtypes, and bool, which a group of boolean columns alone may have.
    let dtypes = || ARROW_DTYPES.into_iter().chain([DType::Bool]);
    dtypes().find(|dtype| dtype.name() == name).ok_or_else(|| {
        let names: Vec<&str> = dtypes().map(|dtype| dtype.name()).collect();
        errors::value_error(format!(
            "{at} is {text:?}; expected one of {}",
            names.join(", ")
        ))
    })
}

/// A saved position: a mapping (the dict from `state_dict()`), read by [`state_from_python`].
fn state_from_mapping(name: &str, value: &Bound<'_, PyAny>) -> PyResult<LoaderState> {
    let mapping = mapping(name, value, "a dict from state_dict(), or None")?;
    let dict = if let Ok(dict) = mapping.cast::<PyDict>() {
        dict.clone()
    } else {
        let dict = PyDict::new(value.py());
        dict.update(mapping)?;
        dict
    };
    state_from_python(name, dict.as_any())
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
        let planned_by_rows = value
            .get("work")
            .and_then(|work| work.get("unit_rows"))
            .is_some_and(|rows| !rows.is_null());
        check_state_format(version, planned_by_rows)
            .map_err(|reason| errors::value_error(format!("{field} {reason}")))?;
    }
    // The state's own reading goes through its version first, and loses the path to a bad
    // value on the way: its fields are read here first, path tracked, to name where it is.
    serde_path_to_error::deserialize::<_, StateFields>(&value)
        .map_err(|error| errors::value_error(errors::state_message(field, &value, &error)))?;
    serde_json::from_value(value).map_err(not_a_state)
}

/// The fields of a [`LoaderState`] of this build's format, read only to find where a forged
/// state goes wrong; what this list does not know (an unknown key, a field added to the state)
/// is left to the state's own reading, after it.
#[derive(serde::Deserialize)]
struct StateFields {
    #[serde(rename = "version")]
    _version: u32,
    #[serde(rename = "settings")]
    _settings: arrow_dlpack_loader::Settings,
    #[serde(rename = "epoch")]
    _epoch: u64,
    // `shard` and `position` may be None (a merged state, a state before the first batch) but
    // not missing: a state with either key deleted would resume from the start of the epoch.
    #[serde(rename = "shard", deserialize_with = "present")]
    _shard: Option<[u64; 2]>,
    #[serde(rename = "ranks", default)]
    _ranks: Option<u64>,
    #[serde(rename = "work")]
    _work: arrow_dlpack_loader::Work,
    #[serde(rename = "position", deserialize_with = "present")]
    _position: Option<arrow_dlpack_loader::Position>,
    #[serde(rename = "concat", default)]
    _concat: Option<arrow_dlpack_loader::ConcatPosition>,
}

/// A value that may be None but not missing: a field read with `deserialize_with` is required,
/// where serde reads a missing `Option` as `None`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(deserializer)
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
