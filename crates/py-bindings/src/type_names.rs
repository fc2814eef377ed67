//! Type names as PyArrow prints them (`str(pa_type)`), so that `ad.Array.type` reads the same as
//! `pa.Array.type` (`int64`, `float`, `fixed_size_list<item: int32>[2]`, ...) and `ad.Tensor.type`
//! the same as `pa.Tensor.type` (`float`, `double`, `halffloat`, ...).
//!
//! The Rust crates name dtypes as Rust and DLPack do (`float32`); these are the Python names.
//!
//! It also names Python objects for messages (`type_name`: `numpy.ndarray`, `int`): every name
//! helper of the crate is here, and this file imports no other of the crate.

use arrow_dlpack::{
    EXTENSION_NAME, FixedShapeTensorType, VARIABLE_SHAPE_TENSOR_NAME, VariableShapeTensorType,
};
use arrow_dlpack_tensor::DType;
use arrow_schema::{DataType, Field, IntervalUnit, TimeUnit, UnionMode};
use pyo3::intern;
use pyo3::prelude::*;

/// The PyArrow name of a tensor dtype (`pa.Tensor.type`): PyArrow's names for the types Arrow
/// has (`halffloat`, `float`, `double`), the Rust name (numpy's) for the others (`bfloat16`,
/// `complex64`, `bool`, the float8 types).
pub(crate) fn pyarrow_dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::Float16 => "halffloat",
        DType::Float32 => "float",
        DType::Float64 => "double",
        other => other.name(),
    }
}

/// The PyArrow name of `field`'s type, extension types and a dictionary's `ordered` flag (which
/// arrow-rs keeps on the field) included.
pub(crate) fn field_type_name(field: &Field) -> String {
    if let Some(name) = extension_type_name(field) {
        return name;
    }
    match field.data_type() {
        DataType::Dictionary(indices, values) => {
            dictionary_name(indices, values, field.dict_is_ordered() == Some(true))
        }
        other => data_type_name(other),
    }
}

fn dictionary_name(indices: &DataType, values: &DataType, ordered: bool) -> String {
    format!(
        "dictionary<values={}, indices={}, ordered={}>",
        data_type_name(values),
        data_type_name(indices),
        u8::from(ordered)
    )
}

/// The PyArrow name of a plain Arrow type.
pub(crate) fn data_type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Null => "null".into(),
        DataType::Boolean => "bool".into(),
        DataType::Int8 => "int8".into(),
        DataType::Int16 => "int16".into(),
        DataType::Int32 => "int32".into(),
        DataType::Int64 => "int64".into(),
        DataType::UInt8 => "uint8".into(),
        DataType::UInt16 => "uint16".into(),
        DataType::UInt32 => "uint32".into(),
        DataType::UInt64 => "uint64".into(),
        DataType::Float16 => "halffloat".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Timestamp(unit, None) => format!("timestamp[{}]", unit_name(*unit)),
        DataType::Timestamp(unit, Some(tz)) => {
            format!("timestamp[{}, tz={tz}]", unit_name(*unit))
        }
        DataType::Date32 => "date32[day]".into(),
        DataType::Date64 => "date64[ms]".into(),
        DataType::Time32(unit) => format!("time32[{}]", unit_name(*unit)),
        DataType::Time64(unit) => format!("time64[{}]", unit_name(*unit)),
        DataType::Duration(unit) => format!("duration[{}]", unit_name(*unit)),
        DataType::Interval(IntervalUnit::YearMonth) => "month_interval".into(),
        DataType::Interval(IntervalUnit::DayTime) => "day_time_interval".into(),
        DataType::Interval(IntervalUnit::MonthDayNano) => "month_day_nano_interval".into(),
        DataType::Binary => "binary".into(),
        DataType::FixedSizeBinary(size) => format!("fixed_size_binary[{size}]"),
        DataType::LargeBinary => "large_binary".into(),
        DataType::BinaryView => "binary_view".into(),
        DataType::Utf8 => "string".into(),
        DataType::LargeUtf8 => "large_string".into(),
        DataType::Utf8View => "string_view".into(),
        DataType::List(item) => format!("list<{}>", field_name(item)),
        DataType::ListView(item) => format!("list_view<{}>", field_name(item)),
        DataType::LargeList(item) => format!("large_list<{}>", field_name(item)),
        DataType::LargeListView(item) => format!("large_list_view<{}>", field_name(item)),
        DataType::FixedSizeList(item, size) => {
            format!("fixed_size_list<{}>[{size}]", field_name(item))
        }
        DataType::Struct(fields) => {
            let fields: Vec<String> = fields.iter().map(|field| field_name(field)).collect();
            format!("struct<{}>", fields.join(", "))
        }
        DataType::Union(fields, mode) => {
            let mode = match mode {
                UnionMode::Sparse => "sparse",
                UnionMode::Dense => "dense",
            };
            let fields: Vec<String> = fields
                .iter()
                .map(|(code, field)| format!("{}={code}", field_name(field)))
                .collect();
            format!("{mode}_union<{}>", fields.join(", "))
        }
        // A dictionary type without its field is unordered (the flag lives on the field).
        DataType::Dictionary(indices, values) => dictionary_name(indices, values, false),
        DataType::Decimal32(precision, scale) => format!("decimal32({precision}, {scale})"),
        DataType::Decimal64(precision, scale) => format!("decimal64({precision}, {scale})"),
        DataType::Decimal128(precision, scale) => format!("decimal128({precision}, {scale})"),
        DataType::Decimal256(precision, scale) => format!("decimal256({precision}, {scale})"),
        DataType::Map(entries, sorted) => map_name(entries, *sorted),
        DataType::RunEndEncoded(run_ends, values) => format!(
            "run_end_encoded<run_ends: {}, values: {}>",
            field_type_name(run_ends),
            field_type_name(values)
        ),
        // A type added to arrow-rs after this file was written: arrow-rs's own name.
        #[allow(unreachable_patterns)]
        other => other.to_string(),
    }
}

/// `map<key, value>` as PyArrow prints it: the key and value types (not their nullability), each
/// followed by its field name in `('...')` when it is not the standard one (`key`, `value`),
/// `keys_sorted`, then the entries' name when it is not `entries`.
fn map_name(entries: &Field, sorted: bool) -> String {
    let DataType::Struct(fields) = entries.data_type() else {
        return format!("map<{}>", field_type_name(entries));
    };
    let [key, value] = fields.iter().collect::<Vec<_>>()[..] else {
        return format!("map<{}>", field_type_name(entries));
    };
    let named = |field: &Field, standard: &str| {
        if field.name() == standard {
            String::new()
        } else {
            format!(" ('{}')", field.name())
        }
    };
    let sorted = if sorted { ", keys_sorted" } else { "" };
    format!(
        "map<{}{}, {}{}{sorted}{}>",
        field_type_name(key),
        named(key, "key"),
        field_type_name(value),
        named(value, "value"),
        named(entries, "entries")
    )
}

/// `name: type`, with ` not null` for a non-nullable field, as PyArrow prints child fields.
fn field_name(field: &Field) -> String {
    let not_null = if field.is_nullable() { "" } else { " not null" };
    format!("{}: {}{not_null}", field.name(), field_type_name(field))
}

fn unit_name(unit: TimeUnit) -> &'static str {
    match unit {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    }
}

/// The PyArrow name of an extension field's type, for the canonical extension types PyArrow
/// registers (`extension<arrow.uuid>`, `extension<arrow.bool8>`, `extension<arrow.json>`,
/// `extension<arrow.opaque[...]>`,
/// `extension<arrow.fixed_shape_tensor[value_type=int32, shape=[2,2], permutation=[0,1]]>` and
/// `extension<arrow.variable_shape_tensor[value_type=float, ndim=2]>`), each
/// only on the storage PyArrow accepts for it (PyArrow reads anything else as its storage type,
/// and so is it named here). Other extensions are named by their storage type: their names in
/// PyArrow depend on Python classes that the Arrow C data does not carry.
fn extension_type_name(field: &Field) -> Option<String> {
    let storage = field.data_type();
    match field.extension_type_name()? {
        EXTENSION_NAME => fixed_shape_tensor_name(field),
        VARIABLE_SHAPE_TENSOR_NAME => variable_shape_tensor_name(field),
        "arrow.uuid" => {
            matches!(storage, DataType::FixedSizeBinary(16)).then(|| "extension<arrow.uuid>".into())
        }
        "arrow.bool8" => matches!(storage, DataType::Int8).then(|| "extension<arrow.bool8>".into()),
        "arrow.json" => matches!(
            storage,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        )
        .then(|| "extension<arrow.json>".into()),
        "arrow.opaque" => opaque_name(field),
        _ => None,
    }
}

/// `extension<arrow.variable_shape_tensor[value_type=..., ndim=..., permutation=[...],
/// dim_names=[...], uniform_shape=[...]]>`, the optional parts only when present.
fn variable_shape_tensor_name(field: &Field) -> Option<String> {
    let tensor_type = VariableShapeTensorType::try_from_field(field).ok()?;
    let mut name = format!(
        "extension<{VARIABLE_SHAPE_TENSOR_NAME}[value_type={}, ndim={}",
        data_type_name(tensor_type.value_type()),
        tensor_type.ndim()
    );
    if let Some(permutation) = tensor_type.permutation() {
        let items: Vec<String> = permutation.iter().map(ToString::to_string).collect();
        name.push_str(&format!(", permutation=[{}]", items.join(",")));
    }
    if let Some(names) = tensor_type.dim_names() {
        name.push_str(&format!(", dim_names=[{}]", names.join(",")));
    }
    if let Some(uniform) = tensor_type.uniform_shape() {
        let items: Vec<String> = uniform
            .iter()
            .map(|extent| extent.map_or("null".to_string(), |extent| extent.to_string()))
            .collect();
        name.push_str(&format!(", uniform_shape=[{}]", items.join(",")));
    }
    name.push_str("]>");
    Some(name)
}

/// `extension<arrow.fixed_shape_tensor[value_type=..., shape=[...], ...]>`.
fn fixed_shape_tensor_name(field: &Field) -> Option<String> {
    let tensor_type = FixedShapeTensorType::try_from_field(field).ok()?;
    let list = |items: &[usize]| {
        let items: Vec<String> = items.iter().map(ToString::to_string).collect();
        format!("[{}]", items.join(","))
    };
    let mut name = format!(
        "extension<{EXTENSION_NAME}[value_type={}, shape={}",
        data_type_name(tensor_type.value_type()),
        list(tensor_type.shape())
    );
    if let Some(permutation) = tensor_type.permutation() {
        name.push_str(&format!(", permutation={}", list(permutation)));
    }
    if let Some(names) = tensor_type.dim_names() {
        name.push_str(&format!(", dim_names=[{}]", names.join(",")));
    }
    name.push_str("]>");
    Some(name)
}

/// `extension<arrow.opaque[storage_type=..., type_name=..., vendor_name=...]>`, from the JSON
/// metadata `{"type_name": ..., "vendor_name": ...}`.
fn opaque_name(field: &Field) -> Option<String> {
    let metadata = field.extension_type_metadata()?;
    let metadata: serde_json::Value = serde_json::from_str(metadata).ok()?;
    let text = |key: &str| metadata.get(key)?.as_str();
    Some(format!(
        "extension<arrow.opaque[storage_type={}, type_name={}, vendor_name={}]>",
        data_type_name(field.data_type()),
        text("type_name")?,
        text("vendor_name")?
    ))
}

/// The qualified type name of `object`, for messages.
pub(crate) fn type_name(object: &Bound<'_, PyAny>) -> String {
    let class = object.get_type();
    let module = class
        .getattr(intern!(object.py(), "__module__"))
        .and_then(|module| module.extract::<String>())
        .unwrap_or_default();
    let name = class
        .getattr(intern!(object.py(), "__qualname__"))
        .and_then(|name| name.extract::<String>())
        .unwrap_or_else(|_| "object".into());
    if module.is_empty() || module == "builtins" {
        name
    } else {
        format!("{module}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn names_match_pyarrow() {
        let item = Arc::new(Field::new("item", DataType::Int32, true));
        let strict = Arc::new(Field::new("item", DataType::Int32, false));
        let cases = [
            (DataType::Int64, "int64"),
            (DataType::Float16, "halffloat"),
            (DataType::Float32, "float"),
            (DataType::Float64, "double"),
            (
                DataType::FixedSizeList(item.clone(), 2),
                "fixed_size_list<item: int32>[2]",
            ),
            (
                DataType::FixedSizeList(strict, 2),
                "fixed_size_list<item: int32 not null>[2]",
            ),
            (DataType::List(item.clone()), "list<item: int32>"),
            (
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                "timestamp[us, tz=UTC]",
            ),
            (DataType::Decimal128(10, 2), "decimal128(10, 2)"),
            (
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                "dictionary<values=string, indices=int32, ordered=0>",
            ),
        ];
        for (data_type, expected) in cases {
            assert_eq!(data_type_name(&data_type), expected);
        }
    }
}
