//! Record batches and struct arrays to tensors: the 2-D copy checked element by element against an
//! independent reference for every pair of column types, PyArrow's promotion table, nulls refused
//! or NaN, slices, both layouts, empty batches, and the zero-copy per-column tensors.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, Float16Array, Float32Array, Float64Array,
    Int8Array, Int16Array, Int32Array, Int64Array, RecordBatch, RecordBatchOptions, StringArray,
    StructArray, UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow_buffer::NullBuffer;
use arrow_dlpack::{
    ColumnTensorOptions, Error, NullLocation, Table, TableToTensorOptions, columns_to_tensor,
    table_to_tensor, table_to_tensors,
};
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::{DataType, Field, Schema};
use half::f16;
use proptest::prelude::*;

mod columns;
mod layout;
mod promotion;
mod properties;

/// The column dtypes, in the order of the promotion table below.
const DTYPES: [DType; 11] = arrow_dlpack::ARROW_DTYPES;

/// PyArrow's result type for two columns (row: first column, column: second), written out by hand
/// from Arrow C++'s `MaybeMergeNumericTypes` (`cpp/src/arrow/type.cc`) with integer-to-float,
/// integer-sign and numeric-width promotion. PyArrow refuses the pairs with one float16 and
/// another type; they follow the same rule here.
const PROMOTION: [[&str; 11]; 11] = [
    //  i8      i16     i32     i64     u8      u16     u32     u64     f16     f32     f64
    [
        "i8", "i16", "i32", "i64", "i16", "i32", "i64", "i64", "f16", "f32", "f64",
    ], // i8
    [
        "i16", "i16", "i32", "i64", "i16", "i32", "i64", "i64", "f32", "f32", "f64",
    ], // i16
    [
        "i32", "i32", "i32", "i64", "i32", "i32", "i64", "i64", "f64", "f64", "f64",
    ], // i32
    [
        "i64", "i64", "i64", "i64", "i64", "i64", "i64", "i64", "f64", "f64", "f64",
    ], // i64
    [
        "i16", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32", "f64",
    ], // u8
    [
        "i32", "i32", "i32", "i64", "u16", "u16", "u32", "u64", "f32", "f32", "f64",
    ], // u16
    [
        "i64", "i64", "i64", "i64", "u32", "u32", "u32", "u64", "f64", "f64", "f64",
    ], // u32
    [
        "i64", "i64", "i64", "i64", "u64", "u64", "u64", "u64", "f64", "f64", "f64",
    ], // u64
    [
        "f16", "f32", "f64", "f64", "f16", "f32", "f64", "f64", "f16", "f32", "f64",
    ], // f16
    [
        "f32", "f32", "f64", "f64", "f32", "f32", "f64", "f64", "f32", "f32", "f64",
    ], // f32
    [
        "f64", "f64", "f64", "f64", "f64", "f64", "f64", "f64", "f64", "f64", "f64",
    ], // f64
];

fn short_name(name: &str) -> DType {
    match name {
        "i8" => DType::Int8,
        "i16" => DType::Int16,
        "i32" => DType::Int32,
        "i64" => DType::Int64,
        "u8" => DType::UInt8,
        "u16" => DType::UInt16,
        "u32" => DType::UInt32,
        "u64" => DType::UInt64,
        "f16" => DType::Float16,
        "f32" => DType::Float32,
        "f64" => DType::Float64,
        other => panic!("no dtype {other}"),
    }
}

/// A number of any column type, held exactly: integers as `i128`, floats as `f64`.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn int(self) -> i128 {
        match self {
            Num::Int(value) => value,
            Num::Float(value) => panic!("{value} is not an integer"),
        }
    }

    fn float(self) -> f64 {
        match self {
            Num::Float(value) => value,
            Num::Int(value) => panic!("{value} is not a float"),
        }
    }

    /// Equal values; floats by bits (so -0.0 differs from 0.0), NaN equal to NaN.
    fn same(self, other: Num) -> bool {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a == b,
            (Num::Float(a), Num::Float(b)) => {
                (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
            }
            _ => false,
        }
    }
}

fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::Float16 | DType::Float32 | DType::Float64)
}

fn is_signed(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64
    )
}

/// The smallest and largest values of an integer dtype.
fn int_range(dtype: DType) -> (i128, i128) {
    let bits = dtype.size() as u32 * 8;
    if is_signed(dtype) {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// Eight values of `dtype`, extremes included.
fn samples(dtype: DType) -> Vec<Num> {
    match dtype {
        DType::Float16 => [-65504.0, -1.5, -0.0, 0.0, 0.25, 1000.0, 65504.0, f64::NAN]
            .map(Num::Float)
            .to_vec(),
        DType::Float32 => [
            f32::MIN as f64,
            -1.5,
            -0.0,
            f32::MIN_POSITIVE as f64,
            0.1f32 as f64,
            16777216.0,
            f32::INFINITY as f64,
            f64::NAN,
        ]
        .map(Num::Float)
        .to_vec(),
        DType::Float64 => [
            f64::MIN,
            -1.5,
            -0.0,
            0.1,
            1e300,
            f64::MAX,
            f64::NEG_INFINITY,
            f64::NAN,
        ]
        .map(Num::Float)
        .to_vec(),
        _ => {
            let (min, max) = int_range(dtype);
            let middle = (min + max) / 2;
            [
                min,
                min + 1,
                middle - 1,
                middle,
                middle + 1,
                42,
                max - 1,
                max,
            ]
            .map(Num::Int)
            .to_vec()
        }
    }
}

/// An array of `dtype` holding `values`, with the given validity.
fn array_of(dtype: DType, values: &[Num], validity: Option<&[bool]>) -> ArrayRef {
    let nulls = validity.map(|validity| NullBuffer::from(validity.to_vec()));
    macro_rules! int {
        ($array:ty, $native:ty) => {
            Arc::new(<$array>::new(
                values.iter().map(|v| v.int() as $native).collect(),
                nulls,
            ))
        };
    }
    match dtype {
        DType::Int8 => int!(Int8Array, i8),
        DType::Int16 => int!(Int16Array, i16),
        DType::Int32 => int!(Int32Array, i32),
        DType::Int64 => int!(Int64Array, i64),
        DType::UInt8 => int!(UInt8Array, u8),
        DType::UInt16 => int!(UInt16Array, u16),
        DType::UInt32 => int!(UInt32Array, u32),
        DType::UInt64 => int!(UInt64Array, u64),
        DType::Float16 => Arc::new(Float16Array::new(
            values.iter().map(|v| f16::from_f64(v.float())).collect(),
            nulls,
        )),
        DType::Float32 => Arc::new(Float32Array::new(
            values.iter().map(|v| v.float() as f32).collect(),
            nulls,
        )),
        DType::Float64 => Arc::new(Float64Array::new(
            values.iter().map(|v| v.float()).collect(),
            nulls,
        )),
        other => panic!("no column type for {other}"),
    }
}

/// What `value` (of a column) must become in a tensor of `target`: integers wrap into the
/// target's width (only `uint64` into `int64` ever needs it), integers become the nearest float,
/// floats widen exactly.
fn expected(value: Num, target: DType) -> Num {
    match (value, is_float(target)) {
        (Num::Int(value), false) => {
            let bits = target.size() as u32 * 8;
            let modulus = 1i128 << bits;
            let mut wrapped = value.rem_euclid(modulus);
            if is_signed(target) && wrapped >= modulus / 2 {
                wrapped -= modulus;
            }
            Num::Int(wrapped)
        }
        (Num::Int(value), true) => Num::Float(match target {
            DType::Float16 => f16::from_f64(value as f64).to_f64(),
            DType::Float32 => value as f32 as f64,
            _ => value as f64,
        }),
        (Num::Float(value), true) => Num::Float(match target {
            DType::Float16 => f16::from_f64(value).to_f64(),
            DType::Float32 => value as f32 as f64,
            _ => value,
        }),
        (Num::Float(value), false) => panic!("promotion never turns float {value} into {target}"),
    }
}

/// The element `[row, column]` of a 2-D tensor, read through its strides.
fn element(tensor: &Tensor, row: usize, column: usize) -> Num {
    let index = tensor.offset() as isize
        + row as isize * tensor.strides()[0]
        + column as isize * tensor.strides()[1];
    let size = tensor.dtype().size();
    let bytes = &tensor.buffer().as_slice()[index as usize * size..][..size];
    macro_rules! read {
        ($native:ty) => {
            <$native>::from_le_bytes(bytes.try_into().unwrap())
        };
    }
    match tensor.dtype() {
        DType::Int8 => Num::Int(read!(i8).into()),
        DType::Int16 => Num::Int(read!(i16).into()),
        DType::Int32 => Num::Int(read!(i32).into()),
        DType::Int64 => Num::Int(read!(i64).into()),
        DType::UInt8 => Num::Int(read!(u8).into()),
        DType::UInt16 => Num::Int(read!(u16).into()),
        DType::UInt32 => Num::Int(read!(u32).into()),
        DType::UInt64 => Num::Int(read!(u64).into()),
        DType::Float16 => Num::Float(f16::from_bits(read!(u16)).to_f64()),
        DType::Float32 => Num::Float(read!(f32).into()),
        DType::Float64 => Num::Float(read!(f64)),
        other => panic!("unexpected tensor dtype {other}"),
    }
}

/// A column given by its dtype, values and validity, for the reference check.
#[derive(Debug, Clone)]
struct Spec {
    dtype: DType,
    values: Vec<Num>,
    validity: Option<Vec<bool>>,
}

impl Spec {
    fn array(&self) -> ArrayRef {
        array_of(self.dtype, &self.values, self.validity.as_deref())
    }

    fn is_valid(&self, row: usize) -> bool {
        self.validity.as_ref().is_none_or(|validity| validity[row])
    }
}

fn batch_of(arrays: Vec<ArrayRef>) -> RecordBatch {
    let columns = arrays
        .into_iter()
        .enumerate()
        .map(|(index, array)| (format!("c{index}"), array));
    RecordBatch::try_from_iter(columns).unwrap()
}

/// Checks a tensor made from the rows `offset..offset + len` of `specs` against the reference:
/// shape, strides, dtype, writability and every element.
fn check_against_reference(
    tensor: &Tensor,
    specs: &[Spec],
    offset: usize,
    len: usize,
    dtype: DType,
    options: TableToTensorOptions,
) {
    let columns = specs.len();
    assert_eq!(tensor.dtype(), dtype);
    assert_eq!(tensor.shape(), &[len, columns]);
    let strides: [isize; 2] = if options.row_major {
        [columns as isize, 1]
    } else {
        [1, len.max(1) as isize]
    };
    assert_eq!(tensor.strides(), strides);
    assert!(!tensor.is_read_only());
    for row in 0..len {
        for (column, spec) in specs.iter().enumerate() {
            let want = if spec.is_valid(offset + row) {
                expected(spec.values[offset + row], dtype)
            } else {
                Num::Float(f64::NAN)
            };
            let found = element(tensor, row, column);
            assert!(
                found.same(want),
                "[{row}, {column}] of a {dtype} tensor from {}: found {found:?}, expected {want:?}",
                spec.dtype
            );
        }
    }
}

const ROW_MAJOR: TableToTensorOptions = TableToTensorOptions {
    row_major: true,
    null_to_nan: false,
    dtype: None,
};
const COLUMN_MAJOR: TableToTensorOptions = TableToTensorOptions {
    row_major: false,
    null_to_nan: false,
    dtype: None,
};

const NO_NULLS: ColumnTensorOptions = ColumnTensorOptions {
    allow_nulls: false,
    allow_copy: false,
};
const WITH_NULLS: ColumnTensorOptions = ColumnTensorOptions {
    allow_nulls: true,
    allow_copy: false,
};

/// The 2-D tensor of named columns.
fn named_columns_to_tensor(
    names: &[&str],
    columns: &[ArrayRef],
    options: TableToTensorOptions,
) -> Result<Tensor, Error> {
    table_to_tensor(&Table::try_from_columns(names, columns)?, options)
}

/// One tensor per named column.
fn named_columns_to_tensors(
    names: &[&str],
    columns: &[ArrayRef],
    options: ColumnTensorOptions,
) -> Result<Vec<(String, Tensor)>, Error> {
    table_to_tensors(&Table::try_from_columns(names, columns)?, options)
}

fn with_nan(options: TableToTensorOptions) -> TableToTensorOptions {
    TableToTensorOptions {
        null_to_nan: true,
        ..options
    }
}

/// The dtype `null_to_nan` gives for a result of `dtype`: integers become floats.
fn nan_capable(dtype: DType) -> DType {
    match dtype {
        DType::Int8 | DType::Int16 | DType::UInt8 | DType::UInt16 => DType::Float32,
        DType::Int32 | DType::Int64 | DType::UInt32 | DType::UInt64 => DType::Float64,
        float => float,
    }
}

/// PyArrow's left fold of the pairwise table, and its null_to_nan rule.
fn reference_dtype(dtypes: &[DType], null_to_nan: bool) -> DType {
    let index = |dtype: DType| DTYPES.iter().position(|&d| d == dtype).unwrap();
    let merged = dtypes[1..].iter().fold(dtypes[0], |promoted, &other| {
        short_name(PROMOTION[index(promoted)][index(other)])
    });
    if null_to_nan {
        nan_capable(merged)
    } else {
        merged
    }
}

#[test]
fn error_messages() {
    let batch = RecordBatch::try_from_iter([
        (
            "price",
            Arc::new(Float64Array::from(vec![Some(1.0), None])) as ArrayRef,
        ),
        ("flag", Arc::new(BooleanArray::from(vec![true, false]))),
        ("name", Arc::new(StringArray::from(vec!["a", "b"]))),
    ])
    .unwrap();
    let pair: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![1])),
    ];
    let errors = [
        table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap_err(),
        table_to_tensor(&Table::from(&batch.project(&[0]).unwrap()), ROW_MAJOR).unwrap_err(),
        named_columns_to_tensor(&[], &[], ROW_MAJOR).unwrap_err(),
        named_columns_to_tensor(&["a", "b"], &pair, ROW_MAJOR).unwrap_err(),
        named_columns_to_tensor(&["a"], &pair, ROW_MAJOR).unwrap_err(),
        table_to_tensors(&Table::from(&batch), NO_NULLS).unwrap_err(),
        table_to_tensors(&Table::from(&batch), WITH_NULLS).unwrap_err(),
    ];
    let listing: String = errors.iter().map(|error| format!("{error}\n")).collect();
    insta::assert_snapshot!(listing);
}
