//! Arrow values for people and for Python: the body of `Array.__repr__`, laid out as PyArrow's
//! pretty printer lays it out, and `Array.to_pylist()`.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors;
use crate::type_names::data_type_name;

/// How many values PyArrow prints at each end of a long array before eliding the middle
/// (`PrettyPrintOptions::window`).
const WINDOW: usize = 10;

/// The same for an array whose values are lists (`PrettyPrintOptions::container_window`).
const CONTAINER_WINDOW: usize = 2;

/// The window of an array of `data_type`: lists of any kind are containers.
fn window_of(data_type: &DataType) -> usize {
    match data_type {
        DataType::FixedSizeList(_, _) | DataType::List(_) | DataType::LargeList(_) => {
            CONTAINER_WINDOW
        }
        _ => WINDOW,
    }
}

/// The body of an array's repr: `[`, one value per line, `]`, nested lists indented by two, with
/// the middle of arrays longer than `2 * window + 1` elided as `...` (the window is [`WINDOW`],
/// or [`CONTAINER_WINDOW`] for arrays of lists), as Arrow C++'s pretty printer does.
pub(crate) fn format_chunks(chunks: &[ArrayRef]) -> String {
    // The chunks as one sequence; only the shown positions (about 2 * window) are located, by a
    // walk over the chunks, so a repr costs memory and time independent of the length.
    let len = chunks.iter().map(|chunk| chunk.len()).sum();
    let locate = |mut position: usize| {
        for chunk in chunks {
            if position < chunk.len() {
                return (chunk, position);
            }
            position -= chunk.len();
        }
        unreachable!("format_sequence asks only for positions below the total length")
    };
    let window = chunks
        .first()
        .map_or(WINDOW, |chunk| window_of(chunk.data_type()));
    let mut out = String::new();
    format_sequence(
        &mut out,
        len,
        window,
        |out, position, indent| {
            let (chunk, index) = locate(position);
            format_value(out, chunk.as_ref(), index, indent);
        },
        0,
    );
    out
}

/// The body of a repr whose items are not Arrow values (the rows of a variable-shape tensor
/// column): `[`, `item(out, position)` per line, `]`, elided as an array of lists is.
pub(crate) fn format_items(len: usize, item: impl Fn(&mut String, usize)) -> String {
    let mut out = String::new();
    format_sequence(
        &mut out,
        len,
        CONTAINER_WINDOW,
        |out, position, _| item(out, position),
        0,
    );
    out
}

/// Writes `[ ... ]` for `len` items, each written by `item` at `indent + 2`, eliding all but
/// `window` items at each end when there are more than `2 * window + 1`.
fn format_sequence(
    out: &mut String,
    len: usize,
    window: usize,
    item: impl Fn(&mut String, usize, usize),
    indent: usize,
) {
    if len == 0 {
        out.push_str("[]");
        return;
    }
    let pad = " ".repeat(indent + 2);
    let elide = len > 2 * window + 1;
    // The first and last `window` positions when eliding, else all of them; never a walk over
    // the elided middle.
    let (head, tail) = if elide {
        (0..window, len - window..len)
    } else {
        (0..len, len..len)
    };
    let shown = head.chain(tail);
    out.push_str("[\n");
    for position in shown {
        if elide && position == len - window {
            out.push_str(",\n");
            out.push_str(&pad);
            out.push_str("...\n");
        } else if position > 0 {
            out.push_str(",\n");
        }
        out.push_str(&pad);
        item(out, position, indent + 2);
    }
    out.push('\n');
    out.push_str(&" ".repeat(indent));
    out.push(']');
}

/// Writes value `index` of `array`; nested lists open at `indent`.
fn format_value(out: &mut String, array: &dyn Array, index: usize, indent: usize) {
    if array.is_null(index) || array.data_type() == &DataType::Null {
        out.push_str("null");
        return;
    }
    macro_rules! primitive {
        ($type:ty) => {
            out.push_str(&array.as_primitive::<$type>().value(index).to_string())
        };
    }
    match array.data_type() {
        DataType::Boolean => {
            out.push_str(if array.as_boolean().value(index) {
                "true"
            } else {
                "false"
            });
        }
        DataType::Int8 => primitive!(Int8Type),
        DataType::Int16 => primitive!(Int16Type),
        DataType::Int32 => primitive!(Int32Type),
        DataType::Int64 => primitive!(Int64Type),
        DataType::UInt8 => primitive!(UInt8Type),
        DataType::UInt16 => primitive!(UInt16Type),
        DataType::UInt32 => primitive!(UInt32Type),
        DataType::UInt64 => primitive!(UInt64Type),
        DataType::Float16 => {
            // Arrow C++ widens half floats to double before printing them.
            let value = array.as_primitive::<Float16Type>().value(index).to_f64();
            out.push_str(&format_float(value, &format!("{value:e}")));
        }
        DataType::Float32 => {
            let value = array.as_primitive::<Float32Type>().value(index);
            out.push_str(&format_float(f64::from(value), &format!("{value:e}")));
        }
        DataType::Float64 => {
            let value = array.as_primitive::<Float64Type>().value(index);
            out.push_str(&format_float(value, &format!("{value:e}")));
        }
        DataType::Utf8 => push_quoted(out, array.as_string::<i32>().value(index)),
        DataType::LargeUtf8 => push_quoted(out, array.as_string::<i64>().value(index)),
        DataType::Utf8View => push_quoted(out, array.as_string_view().value(index)),
        DataType::FixedSizeList(_, _) => {
            let values = array.as_fixed_size_list().value(index);
            format_nested(out, values.as_ref(), indent);
        }
        DataType::List(_) => {
            format_nested(out, array.as_list::<i32>().value(index).as_ref(), indent)
        }
        DataType::LargeList(_) => {
            format_nested(out, array.as_list::<i64>().value(index).as_ref(), indent)
        }
        other => {
            out.push('<');
            out.push_str(&data_type_name(other));
            out.push('>');
        }
    }
}

fn format_nested(out: &mut String, values: &dyn Array, indent: usize) {
    format_sequence(
        out,
        values.len(),
        window_of(values.data_type()),
        |out, position, indent| format_value(out, values, position, indent),
        indent,
    );
}

fn push_quoted(out: &mut String, value: &str) {
    out.push('"');
    out.push_str(value);
    out.push('"');
}

/// Formats a float as Arrow C++ does (double-conversion's shortest form): plain digits when the
/// decimal exponent is in `-6..10`, else `<mantissa>e<sign><exponent>`; no trailing `.0`.
///
/// `scientific` is Rust's shortest round-trip `{:e}` form of the value at its own width, so that
/// a `float` prints `0.1`, not `0.10000000149011612`.
fn format_float(value: f64, scientific: &str) -> String {
    if value.is_nan() {
        return "nan".into();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.into();
    }
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("Rust's {:e} always writes an exponent");
    let exponent: i32 = exponent.parse().expect("the exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    if value == 0.0 {
        return format!("{sign}0");
    }
    if (-6..10).contains(&exponent) {
        let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
        // The decimal point goes after `exponent + 1` digits.
        let point = exponent + 1;
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}", "0".repeat(point as usize - digits.len()))
        } else {
            let (whole, fraction) = digits.split_at(point as usize);
            format!("{whole}.{fraction}")
        };
        format!("{sign}{body}")
    } else {
        let exponent_sign = if exponent < 0 { "-" } else { "+" };
        format!("{sign}{mantissa}e{exponent_sign}{}", exponent.abs())
    }
}

/// The Python value of every element of `chunks`, in order; nulls are `None`.
pub(crate) fn to_pylist<'py>(py: Python<'py>, chunks: &[ArrayRef]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for chunk in chunks {
        for index in 0..chunk.len() {
            list.append(value_to_python(py, chunk.as_ref(), index)?)?;
        }
    }
    Ok(list)
}

fn values_to_python<'py>(py: Python<'py>, array: &dyn Array) -> PyResult<Bound<'py, PyAny>> {
    let list = PyList::empty(py);
    for index in 0..array.len() {
        list.append(value_to_python(py, array, index)?)?;
    }
    Ok(list.into_any())
}

fn value_to_python<'py>(
    py: Python<'py>,
    array: &dyn Array,
    index: usize,
) -> PyResult<Bound<'py, PyAny>> {
    // A null-typed array has no validity bitmap: every slot is null without being marked so.
    if array.is_null(index) || array.data_type() == &DataType::Null {
        return Ok(py.None().into_bound(py));
    }
    macro_rules! primitive {
        ($type:ty) => {
            Ok(array
                .as_primitive::<$type>()
                .value(index)
                .into_pyobject(py)?
                .into_any())
        };
    }
    match array.data_type() {
        DataType::Boolean => Ok(
            pyo3::types::PyBool::new(py, array.as_boolean().value(index))
                .to_owned()
                .into_any(),
        ),
        DataType::Int8 => primitive!(Int8Type),
        DataType::Int16 => primitive!(Int16Type),
        DataType::Int32 => primitive!(Int32Type),
        DataType::Int64 => primitive!(Int64Type),
        DataType::UInt8 => primitive!(UInt8Type),
        DataType::UInt16 => primitive!(UInt16Type),
        DataType::UInt32 => primitive!(UInt32Type),
        DataType::UInt64 => primitive!(UInt64Type),
        DataType::Float16 => Ok(array
            .as_primitive::<Float16Type>()
            .value(index)
            .to_f64()
            .into_pyobject(py)?
            .into_any()),
        DataType::Float32 => primitive!(Float32Type),
        DataType::Float64 => primitive!(Float64Type),
        DataType::Utf8 => Ok(array
            .as_string::<i32>()
            .value(index)
            .into_pyobject(py)?
            .into_any()),
        DataType::LargeUtf8 => Ok(array
            .as_string::<i64>()
            .value(index)
            .into_pyobject(py)?
            .into_any()),
        DataType::Utf8View => Ok(array
            .as_string_view()
            .value(index)
            .into_pyobject(py)?
            .into_any()),
        DataType::Binary => Ok(PyBytes::new(py, array.as_binary::<i32>().value(index)).into_any()),
        DataType::LargeBinary => {
            Ok(PyBytes::new(py, array.as_binary::<i64>().value(index)).into_any())
        }
        DataType::FixedSizeBinary(_) => {
            Ok(PyBytes::new(py, array.as_fixed_size_binary().value(index)).into_any())
        }
        DataType::FixedSizeList(_, _) => {
            values_to_python(py, array.as_fixed_size_list().value(index).as_ref())
        }
        DataType::List(_) => values_to_python(py, array.as_list::<i32>().value(index).as_ref()),
        DataType::LargeList(_) => {
            values_to_python(py, array.as_list::<i64>().value(index).as_ref())
        }
        DataType::Struct(fields) => {
            let columns = array.as_struct();
            let dict = PyDict::new(py);
            for (field, column) in fields.iter().zip(columns.columns()) {
                dict.set_item(field.name(), value_to_python(py, column.as_ref(), index)?)?;
            }
            Ok(dict.into_any())
        }
        other => Err(errors::type_error(format!(
            "to_pylist does not support Arrow type {}; expected a numeric, boolean, string, \
             binary, list or struct type",
            data_type_name(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(value: f64) -> String {
        format_float(value, &format!("{value:e}"))
    }

    #[test]
    fn floats_print_as_arrow_cpp_prints_them() {
        assert_eq!(float(1.0), "1");
        assert_eq!(float(2.5), "2.5");
        assert_eq!(float(1e20), "1e+20");
        assert_eq!(float(1e-7), "1e-7");
        assert_eq!(float(123456789.0), "123456789");
        assert_eq!(float(1234567890.0), "1234567890");
        assert_eq!(float(1e10), "1e+10");
        assert_eq!(float(1.5e-6), "0.0000015");
        assert_eq!(float(0.000123), "0.000123");
        assert_eq!(float(-0.0), "-0");
        assert_eq!(float(-3.25), "-3.25");
        assert_eq!(float(f64::NAN), "nan");
        assert_eq!(float(f64::NEG_INFINITY), "-inf");
        let single = 0.1f32;
        assert_eq!(
            format_float(f64::from(single), &format!("{single:e}")),
            "0.1"
        );
    }
}
