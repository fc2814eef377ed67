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
};
const COLUMN_MAJOR: TableToTensorOptions = TableToTensorOptions {
    row_major: false,
    null_to_nan: false,
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

#[test]
fn default_options_are_pyarrows() {
    assert_eq!(TableToTensorOptions::default(), ROW_MAJOR);
}

#[test]
fn every_pair_of_column_types_promotes_as_pyarrow_and_converts_every_value() {
    for (i, &first) in DTYPES.iter().enumerate() {
        for (j, &second) in DTYPES.iter().enumerate() {
            let promoted = short_name(PROMOTION[i][j]);
            let specs = [first, second].map(|dtype| Spec {
                dtype,
                values: samples(dtype),
                validity: None,
            });
            let batch = batch_of(specs.iter().map(Spec::array).collect());
            for options in [ROW_MAJOR, COLUMN_MAJOR] {
                let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
                check_against_reference(&tensor, &specs, 0, 8, promoted, options);

                let options = with_nan(options);
                let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
                check_against_reference(&tensor, &specs, 0, 8, nan_capable(promoted), options);
            }
        }
    }
}

#[test]
fn one_column_keeps_its_type() {
    for dtype in DTYPES {
        let specs = [Spec {
            dtype,
            values: samples(dtype),
            validity: None,
        }];
        let batch = batch_of(vec![specs[0].array()]);
        for options in [ROW_MAJOR, COLUMN_MAJOR] {
            let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
            check_against_reference(&tensor, &specs, 0, 8, dtype, options);
            let tensor = table_to_tensor(&Table::from(&batch), with_nan(options)).unwrap();
            check_against_reference(&tensor, &specs, 0, 8, nan_capable(dtype), options);
        }
    }
}

fn promoted_type_of(dtypes: &[DType]) -> DType {
    let arrays = dtypes
        .iter()
        .map(|&dtype| array_of(dtype, &samples(dtype)[..1], None))
        .collect();
    table_to_tensor(&Table::from(&batch_of(arrays)), ROW_MAJOR)
        .unwrap()
        .dtype()
}

#[test]
fn promotion_follows_arrows_tests_for_three_columns() {
    // Arrow C++ record_batch_test.cc, ToTensorSupportedTypesMixed.
    assert_eq!(
        promoted_type_of(&[DType::UInt16, DType::Int16, DType::Float32]),
        DType::Float64
    );
    assert_eq!(
        promoted_type_of(&[DType::UInt16, DType::Int16]),
        DType::Int32
    );
}

#[test]
fn promotion_folds_left_to_right_as_pyarrow_does() {
    // uint16 + int8 = int32, then int32 + float32 = float64; but uint16 + float32 = float32, then
    // float32 + int8 = float32. numpy's result_type would say float64 for both orders.
    assert_eq!(
        promoted_type_of(&[DType::UInt16, DType::Int8, DType::Float32]),
        DType::Float64
    );
    assert_eq!(
        promoted_type_of(&[DType::UInt16, DType::Float32, DType::Int8]),
        DType::Float32
    );
}

#[test]
fn uint64_with_a_signed_integer_wraps_into_int64_as_pyarrow() {
    let batch = batch_of(vec![
        Arc::new(UInt64Array::from(vec![u64::MAX, 1 << 63, 5])),
        Arc::new(Int8Array::from(vec![-1, 0, 1])),
    ]);
    let tensor = table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap();
    assert_eq!(tensor.dtype(), DType::Int64);
    let values = tensor.row_major_buffer().unwrap();
    assert_eq!(values.typed_data::<i64>(), &[-1, -1, i64::MIN, 0, 5, 1]);
}

#[test]
fn null_to_nan_promotes_integers_as_pyarrow() {
    // Arrow C++ record_batch_test.cc, ToTensorSupportedNullToNan: int32 + float32 = float64,
    // int32 alone = float64, int8 alone = float32.
    let int32 = Int32Array::from(vec![None, Some(2), Some(3)]);
    let float32 = Float32Array::from(vec![Some(10.0), None, Some(30.0)]);
    let int8 = Int8Array::from(vec![None, Some(2), Some(3)]);
    let nan = with_nan(ROW_MAJOR);
    for (arrays, dtype, last) in [
        (
            vec![Arc::new(int32.clone()) as ArrayRef, Arc::new(float32)],
            DType::Float64,
            30.0,
        ),
        (
            vec![Arc::new(int32.clone()) as ArrayRef, Arc::new(int32)],
            DType::Float64,
            3.0,
        ),
        (
            vec![Arc::new(int8.clone()) as ArrayRef, Arc::new(int8)],
            DType::Float32,
            3.0,
        ),
    ] {
        let tensor = table_to_tensor(&Table::from(&batch_of(arrays)), nan).unwrap();
        assert_eq!(tensor.dtype(), dtype);
        assert!(matches!(element(&tensor, 0, 0), Num::Float(value) if value.is_nan()));
        assert!(element(&tensor, 2, 1).same(Num::Float(last)));
    }
    // Without nulls, null_to_nan still gives a float, as in PyArrow.
    let batch = batch_of(vec![Arc::new(Int16Array::from(vec![1, 2]))]);
    assert_eq!(
        table_to_tensor(&Table::from(&batch), nan).unwrap().dtype(),
        DType::Float32
    );
}

#[test]
fn float16_nulls_become_a_real_half_precision_nan() {
    let batch = batch_of(vec![Arc::new(Float16Array::from(vec![
        Some(f16::ONE),
        None,
    ]))]);
    let tensor = table_to_tensor(&Table::from(&batch), with_nan(ROW_MAJOR)).unwrap();
    assert_eq!(tensor.dtype(), DType::Float16);
    let bits = tensor.row_major_buffer().unwrap();
    let bits = bits.typed_data::<u16>();
    assert_eq!(bits[0], f16::ONE.to_bits());
    assert!(f16::from_bits(bits[1]).is_nan());
}

#[test]
fn nulls_are_refused_naming_the_column() {
    let batch = batch_of(vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Float64Array::from(vec![Some(1.0), None, None])),
    ]);
    let error = table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap_err();
    assert!(
        matches!(&error, Error::ColumnNulls { column, null_count: 2 } if column == "c1"),
        "{error}"
    );
}

#[test]
fn nulls_become_nan_in_both_layouts() {
    let specs = [
        Spec {
            dtype: DType::Int64,
            values: samples(DType::Int64),
            validity: Some(vec![true, false, true, true, false, false, true, true]),
        },
        Spec {
            dtype: DType::Float32,
            values: samples(DType::Float32),
            validity: Some(vec![false, true, true, true, true, true, true, false]),
        },
        Spec {
            dtype: DType::UInt8,
            values: samples(DType::UInt8),
            validity: None,
        },
    ];
    let batch = batch_of(specs.iter().map(Spec::array).collect());
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let options = with_nan(options);
        let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
        check_against_reference(&tensor, &specs, 0, 8, DType::Float64, options);
    }
}

#[test]
fn a_slice_starts_at_its_offset_and_ignores_nulls_outside_it() {
    let specs = [
        Spec {
            dtype: DType::Int16,
            values: samples(DType::Int16),
            validity: Some(vec![false, true, true, true, true, true, true, false]),
        },
        Spec {
            dtype: DType::Float64,
            values: samples(DType::Float64),
            validity: None,
        },
    ];
    let batch = batch_of(specs.iter().map(Spec::array).collect());
    let slice = batch.slice(2, 5);
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let tensor = table_to_tensor(&Table::from(&slice), options).unwrap();
        check_against_reference(&tensor, &specs, 2, 5, DType::Float64, options);
    }
    // Nulls inside the slice count.
    let error = table_to_tensor(&Table::from(&batch.slice(0, 3)), ROW_MAJOR).unwrap_err();
    assert!(
        matches!(error, Error::ColumnNulls { null_count: 1, .. }),
        "{error}"
    );
}

#[test]
fn many_rows_span_several_blocks() {
    // Enough rows, and an odd count, that row-major filling goes through several blocks and a
    // partial last one.
    let rows = 20_011;
    let int32: Vec<Num> = (0..rows)
        .map(|i| Num::Int(i as i128 * 7 - 50_000))
        .collect();
    let float32: Vec<Num> = (0..rows)
        .map(|i| Num::Float(((i % 1000) as f32 * 0.5) as f64))
        .collect();
    let uint16: Vec<Num> = (0..rows)
        .map(|i| Num::Int((i * 13 % 65_536) as i128))
        .collect();
    let validity: Vec<bool> = (0..rows).map(|i| i % 17 != 3).collect();
    let specs = [
        Spec {
            dtype: DType::Int32,
            values: int32,
            validity: None,
        },
        Spec {
            dtype: DType::Float32,
            values: float32,
            validity: Some(validity),
        },
        Spec {
            dtype: DType::UInt16,
            values: uint16,
            validity: None,
        },
    ];
    let batch = batch_of(specs.iter().map(Spec::array).collect());
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let options = with_nan(options);
        let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
        check_against_reference(&tensor, &specs, 0, rows, DType::Float64, options);
        let sliced = table_to_tensor(&Table::from(&batch.slice(999, 10_001)), options).unwrap();
        check_against_reference(&sliced, &specs, 999, 10_001, DType::Float64, options);
    }
}

#[test]
fn wide_batches_of_mixed_types_match_the_reference() {
    // More columns than one transposition group holds (16), in several blocks of rows.
    let rows = 3_001;
    let specs: Vec<Spec> = (0..37)
        .map(|column| {
            let dtype = DTYPES[column % DTYPES.len()];
            let values = (0..rows)
                .map(|row| {
                    let value = (row * 37 + column) % 251;
                    if is_float(dtype) {
                        Num::Float(value as f64 / 4.0)
                    } else {
                        Num::Int(value as i128 % (int_range(dtype).1 + 1))
                    }
                })
                .collect();
            Spec {
                dtype,
                values,
                validity: None,
            }
        })
        .collect();
    let batch = batch_of(specs.iter().map(Spec::array).collect());
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
        check_against_reference(&tensor, &specs, 0, rows, DType::Float64, options);
    }
    // Every width from 2 to 20 columns, row-major, of mixed types and of one type (whose
    // columns are transposed without staging).
    let same: Vec<Spec> = specs
        .iter()
        .map(|spec| Spec {
            dtype: DType::Int64,
            values: spec
                .values
                .iter()
                .map(|&value| match value {
                    Num::Float(value) => Num::Int((value * 4.0) as i128),
                    int => int,
                })
                .collect(),
            validity: None,
        })
        .collect();
    for width in 2..=20 {
        for specs in [&specs[..width], &same[..width]] {
            let batch = batch_of(specs.iter().map(Spec::array).collect());
            let dtypes: Vec<DType> = specs.iter().map(|spec| spec.dtype).collect();
            let tensor = table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap();
            let dtype = reference_dtype(&dtypes, false);
            check_against_reference(&tensor, specs, 0, rows, dtype, ROW_MAJOR);
            let sliced = table_to_tensor(&Table::from(&batch.slice(7, 2_000)), ROW_MAJOR).unwrap();
            check_against_reference(&sliced, specs, 7, 2_000, dtype, ROW_MAJOR);
        }
    }
}

#[test]
fn the_copy_is_writable_and_owns_fresh_memory() {
    let values = Float64Array::from(vec![1.0, 2.0, 3.0]);
    let batch = batch_of(vec![Arc::new(values.clone())]);
    let tensor = table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap();
    assert!(!tensor.is_read_only());
    assert_ne!(tensor.data_ptr(), values.values().as_ptr().cast());
    assert_eq!(
        tensor.row_major_buffer().unwrap().typed_data::<f64>(),
        &[1.0, 2.0, 3.0]
    );
}

#[test]
fn a_batch_without_rows_gives_an_empty_tensor() {
    let batch = batch_of(vec![
        Arc::new(Int32Array::from(Vec::<i32>::new())),
        Arc::new(Float32Array::from(Vec::<f32>::new())),
    ]);
    let tensor = table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap();
    assert_eq!(tensor.dtype(), DType::Float64);
    assert_eq!(tensor.shape(), &[0, 2]);
    assert_eq!(tensor.strides(), &[2, 1]);
    assert!(tensor.is_empty() && tensor.is_row_major());
    let tensor = table_to_tensor(&Table::from(&batch), COLUMN_MAJOR).unwrap();
    assert_eq!(tensor.shape(), &[0, 2]);
    assert_eq!(tensor.strides(), &[1, 1]);
    // An empty slice of a batch with nulls has no nulls left.
    let with_nulls = batch_of(vec![Arc::new(Int32Array::from(vec![None, Some(1)]))]);
    let tensor = table_to_tensor(&Table::from(&with_nulls.slice(1, 0)), ROW_MAJOR).unwrap();
    assert_eq!(tensor.shape(), &[0, 1]);
}

#[test]
fn a_batch_without_columns_is_refused() {
    let batch = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(4)),
    )
    .unwrap();
    assert!(matches!(
        table_to_tensor(&Table::from(&batch), ROW_MAJOR),
        Err(Error::NoColumns)
    ));
    assert!(matches!(
        named_columns_to_tensor(&[], &[], ROW_MAJOR),
        Err(Error::NoColumns)
    ));
}

#[test]
fn layouts_have_the_strides_pyarrow_gives() {
    let batch = batch_of(vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![4, 5, 6])),
    ]);
    let row = table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap();
    assert_eq!(row.strides(), &[2, 1]);
    assert!(row.is_row_major() && !row.is_column_major());
    assert_eq!(
        row.row_major_buffer().unwrap().typed_data::<i32>(),
        &[1, 4, 2, 5, 3, 6]
    );
    let column = table_to_tensor(&Table::from(&batch), COLUMN_MAJOR).unwrap();
    assert_eq!(column.strides(), &[1, 3]);
    assert!(column.is_column_major() && !column.is_row_major());
    assert_eq!(column.buffer().typed_data::<i32>(), &[1, 2, 3, 4, 5, 6]);
    assert_eq!(
        column
            .to_contiguous()
            .unwrap()
            .row_major_buffer()
            .unwrap()
            .typed_data::<i32>(),
        &[1, 4, 2, 5, 3, 6]
    );
}

#[test]
fn unsupported_columns_are_refused_naming_column_and_type() {
    let batch = RecordBatch::try_from_iter([
        ("x", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
        ("flag", Arc::new(BooleanArray::from(vec![true, false]))),
    ])
    .unwrap();
    let error = table_to_tensor(&Table::from(&batch), ROW_MAJOR).unwrap_err();
    assert!(
        matches!(&error, Error::UnsupportedColumnType { column, data_type: DataType::Boolean, .. } if column == "flag"),
        "{error}"
    );
    // The type decides before the nulls, as for single arrays.
    let batch = RecordBatch::try_from_iter([
        (
            "x",
            Arc::new(Int32Array::from(vec![None, Some(2)])) as ArrayRef,
        ),
        ("name", Arc::new(StringArray::from(vec!["a", "b"]))),
    ])
    .unwrap();
    assert!(matches!(
        table_to_tensor(&Table::from(&batch), ROW_MAJOR),
        Err(Error::UnsupportedColumnType { .. })
    ));
}

fn struct_of(arrays: Vec<ArrayRef>, nulls: Option<NullBuffer>) -> StructArray {
    let fields: Vec<Field> = arrays
        .iter()
        .enumerate()
        .map(|(index, array)| Field::new(format!("f{index}"), array.data_type().clone(), true))
        .collect();
    StructArray::new(fields.into(), arrays, nulls)
}

#[test]
fn struct_arrays_convert_like_record_batches() {
    let specs = [
        Spec {
            dtype: DType::UInt32,
            values: samples(DType::UInt32),
            validity: None,
        },
        Spec {
            dtype: DType::Int8,
            values: samples(DType::Int8),
            validity: Some(vec![true, true, false, true, true, true, true, true]),
        },
    ];
    let array = struct_of(specs.iter().map(Spec::array).collect(), None);
    let sliced = array.slice(1, 6);
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let options = with_nan(options);
        let tensor = table_to_tensor(&Table::from(&array), options).unwrap();
        check_against_reference(&tensor, &specs, 0, 8, DType::Float64, options);
        let tensor = table_to_tensor(&Table::from(&sliced), options).unwrap();
        check_against_reference(&tensor, &specs, 1, 6, DType::Float64, options);
    }
    let error = table_to_tensor(&Table::from(&array), ROW_MAJOR).unwrap_err();
    assert!(matches!(&error, Error::ColumnNulls { column, null_count: 1 } if column == "f1"));
}

#[test]
fn a_null_struct_row_is_null_in_every_column() {
    let array = struct_of(
        vec![
            Arc::new(Int16Array::from(vec![1, 2, 3])),
            Arc::new(Float32Array::from(vec![Some(0.5), Some(1.5), None])),
        ],
        Some(NullBuffer::from(vec![true, false, true])),
    );
    let error = table_to_tensor(&Table::from(&array), ROW_MAJOR).unwrap_err();
    assert!(matches!(&error, Error::ColumnNulls { column, null_count: 1 } if column == "f0"));
    let tensor = table_to_tensor(&Table::from(&array), with_nan(ROW_MAJOR)).unwrap();
    assert_eq!(tensor.dtype(), DType::Float32);
    let values = tensor.row_major_buffer().unwrap();
    let values = values.typed_data::<f32>();
    assert_eq!(&values[..2], &[1.0, 0.5]);
    assert!(values[2].is_nan() && values[3].is_nan());
    assert_eq!(values[4], 3.0);
    assert!(values[5].is_nan());
}

#[test]
fn columns_must_pair_with_names_and_share_a_length() {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![1, 2, 3])),
        Arc::new(Int32Array::from(vec![1, 2])),
    ];
    assert!(matches!(
        named_columns_to_tensor(&["a"], &columns, ROW_MAJOR),
        Err(Error::ColumnNames {
            names: 1,
            columns: 2
        })
    ));
    let error = named_columns_to_tensor(&["a", "b"], &columns, ROW_MAJOR).unwrap_err();
    assert!(
        matches!(&error, Error::ColumnLength { column, found: 2, expected: 3 } if column == "b"),
        "{error}"
    );
    let tensor = named_columns_to_tensor(&["a", "b"], &columns[..1], ROW_MAJOR);
    assert!(matches!(tensor, Err(Error::ColumnNames { .. })));
    let tensor = named_columns_to_tensor(&["a"], &columns[..1], ROW_MAJOR).unwrap();
    assert_eq!(tensor.shape(), &[3, 1]);

    // One tensor per column: lengths may differ, names must still pair up.
    let tensors = named_columns_to_tensors(&["a", "b"], &columns, NO_NULLS).unwrap();
    assert_eq!(tensors[0].1.shape(), &[3]);
    assert_eq!(tensors[1].1.shape(), &[2]);
    assert!(matches!(
        named_columns_to_tensors(&["a"], &columns, NO_NULLS),
        Err(Error::ColumnNames { .. })
    ));
}

#[test]
fn columns_to_tensor_is_the_table_of_named_columns() {
    // The loader's entry point gives what `table_to_tensor` gives for the same columns.
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int16Array::from(vec![1, 2])),
        Arc::new(UInt8Array::from(vec![3, 4])),
    ];
    let tensor = columns_to_tensor(&["a", "b"], &columns, COLUMN_MAJOR).unwrap();
    assert_eq!(tensor.dtype(), DType::Int16);
    assert_eq!(tensor.strides(), &[1, 2]);
    assert_eq!(
        tensor.iter::<i16>().unwrap().collect::<Vec<_>>(),
        [1, 3, 2, 4]
    );
    assert!(matches!(
        columns_to_tensor(&["a"], &columns, COLUMN_MAJOR),
        Err(Error::ColumnNames { .. })
    ));
}

#[test]
fn columns_become_zero_copy_tensors_in_order() {
    let ids = Int64Array::from(vec![1, 2, 3, 4]);
    let embeddings = FixedSizeListArray::new(
        Arc::new(Field::new_list_field(DataType::Float32, false)),
        2,
        Arc::new(Float32Array::from_iter_values((0..8).map(|i| i as f32))),
        None,
    );
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(ids.clone()) as ArrayRef),
        ("embedding", Arc::new(embeddings.clone())),
    ])
    .unwrap();
    let tensors = table_to_tensors(&Table::from(&batch), NO_NULLS).unwrap();
    let names: Vec<&str> = tensors.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["id", "embedding"]);
    assert_eq!(tensors[0].1.shape(), &[4]);
    assert_eq!(tensors[0].1.data_ptr(), ids.values().as_ptr().cast());
    assert!(tensors[0].1.is_read_only());
    assert_eq!(tensors[1].1.shape(), &[4, 2]);
    assert_eq!(tensors[1].1.dtype(), DType::Float32);

    // A slice shares memory too, from its offset.
    let tensors = table_to_tensors(&Table::from(&batch.slice(1, 2)), NO_NULLS).unwrap();
    assert_eq!(tensors[0].1.data_ptr(), ids.values()[1..].as_ptr().cast());
    assert_eq!(tensors[1].1.shape(), &[2, 2]);
}

#[test]
fn column_tensors_refuse_nulls_and_types_naming_the_column() {
    let batch = RecordBatch::try_from_iter([
        ("ok", Arc::new(Int8Array::from(vec![1, 2])) as ArrayRef),
        ("holes", Arc::new(Int8Array::from(vec![None, Some(2)]))),
    ])
    .unwrap();
    let error = table_to_tensors(&Table::from(&batch), NO_NULLS).unwrap_err();
    assert!(
        matches!(&error, Error::TableNulls { null_count: 1, location: NullLocation::Column { column, depth: 0 } } if column == "holes"),
        "{error}"
    );
    assert_eq!(
        table_to_tensors(&Table::from(&batch), WITH_NULLS)
            .unwrap()
            .len(),
        2
    );

    let nested_nulls = FixedSizeListArray::new(
        Arc::new(Field::new_list_field(DataType::Int8, true)),
        1,
        Arc::new(Int8Array::from(vec![None, Some(2)])),
        None,
    );
    let error =
        named_columns_to_tensors(&["vectors"], &[Arc::new(nested_nulls)], NO_NULLS).unwrap_err();
    assert!(
        matches!(&error, Error::TableNulls { null_count: 1, location: NullLocation::Column { column, depth: 1 } } if column == "vectors"),
        "{error}"
    );

    let strings: ArrayRef = Arc::new(StringArray::from(vec!["a"]));
    let error = named_columns_to_tensors(&["text"], &[strings], NO_NULLS).unwrap_err();
    assert!(
        matches!(&error, Error::UnsupportedColumnType { column, data_type: DataType::Utf8, .. } if column == "text"),
        "{error}"
    );
}

#[test]
fn struct_columns_refuse_null_rows_unless_allowed() {
    let array = struct_of(
        vec![Arc::new(Int32Array::from(vec![1, 2]))],
        Some(NullBuffer::from(vec![true, false])),
    );
    let error = table_to_tensors(&Table::from(&array), NO_NULLS).unwrap_err();
    assert!(matches!(
        &error,
        Error::TableNulls {
            null_count: 1,
            location: NullLocation::Rows
        }
    ));
    let tensors = table_to_tensors(&Table::from(&array), WITH_NULLS).unwrap();
    assert_eq!(tensors[0].0, "f0");
    assert_eq!(tensors[0].1.shape(), &[2]);
}

#[test]
fn error_messages() {
    let batch = RecordBatch::try_from_iter([
        (
            "price",
            Arc::new(Float64Array::from(vec![Some(1.0), None])) as ArrayRef,
        ),
        ("flag", Arc::new(BooleanArray::from(vec![true, false]))),
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

/// One column of random type, values and validity, `rows` long.
fn column_strategy(rows: usize) -> impl Strategy<Value = Spec> {
    (
        0..DTYPES.len(),
        proptest::collection::vec(any::<u64>(), rows),
        proptest::option::of(proptest::collection::vec(any::<bool>(), rows)),
    )
        .prop_map(|(index, raw, validity)| {
            let dtype = DTYPES[index];
            let values = raw
                .into_iter()
                .map(|raw| {
                    if is_float(dtype) {
                        // Multiples of 1/8 below 256 in magnitude are exact in every float width.
                        Num::Float(((raw % 4096) as f64 - 2048.0) / 8.0)
                    } else {
                        let (min, max) = int_range(dtype);
                        Num::Int(min + (raw as i128).rem_euclid(max - min + 1))
                    }
                })
                .collect();
            Spec {
                dtype,
                values,
                validity,
            }
        })
}

fn batch_strategy() -> impl Strategy<Value = (Vec<Spec>, usize, usize)> {
    (1usize..40, 0usize..150).prop_flat_map(|(columns, rows)| {
        (
            proptest::collection::vec(column_strategy(rows), columns),
            0..=rows,
        )
            .prop_flat_map(move |(specs, offset)| {
                let specs = proptest::strategy::Just(specs);
                (specs, proptest::strategy::Just(offset), 0..=rows - offset)
            })
            .prop_map(|(specs, offset, len)| (specs, offset, len))
    })
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

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        // Shrunk failures are printed; no regression files are written into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_batches_match_the_reference((specs, offset, len) in batch_strategy(), row_major: bool) {
        let batch = batch_of(specs.iter().map(Spec::array).collect()).slice(offset, len);
        let dtypes: Vec<DType> = specs.iter().map(|spec| spec.dtype).collect();
        let options = with_nan(TableToTensorOptions { row_major, null_to_nan: false });
        let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
        check_against_reference(&tensor, &specs, offset, len, reference_dtype(&dtypes, true), options);

        let has_nulls = specs
            .iter()
            .any(|spec| (offset..offset + len).any(|row| !spec.is_valid(row)));
        let options = TableToTensorOptions { row_major, null_to_nan: false };
        match table_to_tensor(&Table::from(&batch), options) {
            Ok(tensor) => {
                prop_assert!(!has_nulls);
                check_against_reference(&tensor, &specs, offset, len, reference_dtype(&dtypes, false), options);
            }
            Err(error) => {
                prop_assert!(has_nulls, "{}", error);
                prop_assert!(matches!(error, Error::ColumnNulls { .. }), "{}", error);
            }
        }
    }
}

/// `write_rows` into a caller's buffer: what it writes, checked against the reference, and that
/// it touches nothing else.
mod write_rows {
    use std::mem::MaybeUninit;

    use arrow_buffer::Buffer;
    use arrow_dlpack::{
        RowsDestination, WriteRowsOptions, table_dtype, tables_to_tensor, write_rows,
    };

    use super::*;

    /// The byte every slot holds before `write_rows`: rows it must not touch keep it.
    const UNTOUCHED: u8 = 0xA5;

    /// A destination of `rows` rows of `columns` columns of `dtype`, every byte `UNTOUCHED`,
    /// held in `u64`s so that it is aligned for every dtype.
    fn backing(rows: usize, columns: usize, dtype: DType) -> Vec<u64> {
        vec![u64::from_ne_bytes([UNTOUCHED; 8]); (rows * columns * dtype.size()).div_ceil(8)]
    }

    fn bytes_of(values: &mut [u64]) -> &mut [MaybeUninit<u8>] {
        // SAFETY: the bytes of `values`, borrowed exclusively like `values`; `MaybeUninit<u8>`
        // has alignment 1 and no validity invariant, and any bytes written leave each `u64`
        // valid.
        unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), size_of_val(values)) }
    }

    /// The destination read back as a `[rows, columns]` tensor of `dtype` in its layout.
    fn as_tensor(
        values: Vec<u64>,
        dtype: DType,
        rows: usize,
        columns: usize,
        row_major: bool,
    ) -> Tensor {
        let bytes = rows * columns * dtype.size();
        let buffer = Buffer::from_vec(values).slice_with_length(0, bytes);
        let strides = if row_major {
            vec![columns as isize, 1]
        } else {
            vec![1, rows.max(1) as isize]
        };
        Tensor::try_new(buffer, dtype, vec![rows, columns], strides, 0).unwrap()
    }

    /// Writes rows `rows` of `specs` at `offset` into a destination with `before` rows before
    /// them and `after` after, of `dtype`, and checks every element: the written ones against
    /// the reference, the others untouched.
    #[allow(clippy::too_many_arguments)]
    fn check(
        specs: &[Spec],
        rows: std::ops::Range<usize>,
        before: usize,
        after: usize,
        dtype: DType,
        row_major: bool,
        null_to_nan: bool,
    ) {
        let columns = specs.len();
        let batch = batch_of(specs.iter().map(Spec::array).collect());
        let total = before + rows.len() + after;
        let mut values = backing(total, columns, dtype);
        let mut destination =
            RowsDestination::from_bytes(bytes_of(&mut values), dtype, total, row_major);
        let options = WriteRowsOptions { null_to_nan };
        write_rows(
            &Table::from(&batch),
            rows.clone(),
            &mut destination,
            before,
            options,
        )
        .unwrap();
        let tensor = as_tensor(values, dtype, total, columns, row_major);
        let untouched = as_tensor(backing(1, 1, dtype), dtype, 1, 1, true);
        for row in 0..total {
            for (column, spec) in specs.iter().enumerate() {
                let found = element(&tensor, row, column);
                let want = if row < before || row >= before + rows.len() {
                    element(&untouched, 0, 0)
                } else {
                    let source = rows.start + row - before;
                    if spec.is_valid(source) {
                        expected(spec.values[source], dtype)
                    } else {
                        Num::Float(f64::NAN)
                    }
                };
                assert!(
                    found.same(want),
                    "[{row}, {column}] of a {dtype} destination ({}) from {} rows {rows:?} at \
                     {before}: found {found:?}, expected {want:?}",
                    if row_major {
                        "row-major"
                    } else {
                        "column-major"
                    },
                    spec.dtype,
                );
            }
        }
    }

    /// A column of `dtype` of `rows` rows cycling through its samples.
    fn cycling(dtype: DType, rows: usize, shift: usize) -> Spec {
        let samples = samples(dtype);
        Spec {
            dtype,
            values: (0..rows)
                .map(|row| samples[(row + shift) % samples.len()])
                .collect(),
            validity: None,
        }
    }

    #[test]
    fn every_promotion_pair_at_odd_sizes_and_offsets_in_both_layouts() {
        for (a, first) in DTYPES.iter().enumerate() {
            for (b, second) in DTYPES.iter().enumerate() {
                let dtype = short_name(PROMOTION[a][b]);
                for rows in [0, 1, 63, 64, 65] {
                    let specs = [cycling(*first, rows + 3, 0), cycling(*second, rows + 3, 5)];
                    for row_major in [true, false] {
                        check(&specs, 2..2 + rows, 3, 2, dtype, row_major, false);
                        check(&specs, 0..rows, 0, 0, dtype, row_major, false);
                    }
                }
            }
        }
    }

    #[test]
    fn block_boundaries_groups_and_staging() {
        // Row-major blocks hold 64 KiB: 4,096 rows of 2 float64 columns, 512 of 16, 455 of 18.
        for (dtypes, dtype) in [
            (vec![DType::Float64; 2], DType::Float64),
            (vec![DType::Float64; 16], DType::Float64),
            (vec![DType::Float64; 18], DType::Float64),
            (
                vec![
                    DType::Int32,
                    DType::Float32,
                    DType::Float64,
                    DType::Float64,
                    DType::UInt8,
                ],
                DType::Float64,
            ),
        ] {
            let block = 64 * 1024 / (dtypes.len() * dtype.size());
            for rows in [block - 1, block, block + 1, 2 * block + 3] {
                let specs: Vec<Spec> = dtypes
                    .iter()
                    .enumerate()
                    .map(|(shift, &dtype)| cycling(dtype, rows + 10, shift))
                    .collect();
                for row_major in [true, false] {
                    check(&specs, 7..7 + rows, 1, 1, dtype, row_major, false);
                }
            }
        }
    }

    #[test]
    fn four_byte_groups_of_every_width_and_odd_row_counts() {
        // Groups of 4, 8, 12 and 16 columns of 4-byte values are transposed 4 x 4 in registers,
        // the rows after the last whole tile and other widths one by one.
        for dtype in [DType::Float32, DType::Int32, DType::UInt32] {
            for width in 1..=20 {
                for rows in [0, 1, 3, 4, 5, 7, 8, 9, 1_031] {
                    let specs: Vec<Spec> = (0..width)
                        .map(|shift| cycling(dtype, rows + 3, shift))
                        .collect();
                    check(&specs, 1..1 + rows, 2, 1, dtype, true, false);
                }
            }
        }
        // Staged columns between 4-byte groups, and a block boundary (64 KiB: 2,048 rows of
        // 8 float32 columns) with a partial tile after it.
        let dtypes = [
            DType::Float32,
            DType::Float32,
            DType::Float32,
            DType::Float32,
            DType::Int8,
            DType::Float32,
            DType::Float32,
            DType::Float32,
        ];
        for rows in [2_047, 2_048, 2_050, 4_099] {
            let specs: Vec<Spec> = dtypes
                .iter()
                .enumerate()
                .map(|(shift, &dtype)| cycling(dtype, rows + 1, shift))
                .collect();
            check(&specs, 1..1 + rows, 0, 3, DType::Float32, true, false);
        }
    }

    #[test]
    fn stacked_pieces_equal_table_to_tensor_of_the_whole() {
        let specs = [
            cycling(DType::Int32, 5_000, 0),
            cycling(DType::Float32, 5_000, 1),
            cycling(DType::UInt16, 5_000, 2),
        ];
        let batch = batch_of(specs.iter().map(Spec::array).collect());
        for options in [ROW_MAJOR, COLUMN_MAJOR] {
            let whole = table_to_tensor(&Table::from(&batch), options).unwrap();
            let dtype = table_dtype(&Table::from(&batch), options).unwrap();
            assert_eq!(dtype, whole.dtype());
            let mut values = backing(5_000, 3, dtype);
            let mut destination =
                RowsDestination::from_bytes(bytes_of(&mut values), dtype, 5_000, options.row_major);
            for (start, end) in [(0, 1), (1, 1_000), (1_000, 1_001), (1_001, 5_000)] {
                let piece = batch.slice(start, end - start);
                let table = Table::from(&piece);
                write_rows(
                    &table,
                    0..end - start,
                    &mut destination,
                    start,
                    Default::default(),
                )
                .unwrap();
            }
            let stacked = as_tensor(values, dtype, 5_000, 3, options.row_major);
            let pieces: Vec<RecordBatch> = [(0, 1), (1, 999), (1_000, 0), (1_000, 4_000)]
                .map(|(start, len)| batch.slice(start, len))
                .to_vec();
            let tables: Vec<Table<'_>> = pieces.iter().map(Table::from).collect();
            let by_tables = tables_to_tensor(&tables, options).unwrap();
            assert_eq!(by_tables.strides(), whole.strides());
            for row in 0..5_000 {
                for column in 0..3 {
                    let want = element(&whole, row, column);
                    assert!(element(&stacked, row, column).same(want));
                    assert!(element(&by_tables, row, column).same(want));
                }
            }
        }
    }

    #[test]
    fn nulls_in_the_rows_are_refused_or_nan_and_nulls_outside_them_ignored() {
        let mut spec = cycling(DType::Float32, 100, 0);
        spec.validity = Some((0..100).map(|row| row != 50).collect());
        let specs = [cycling(DType::Int16, 100, 3), spec];
        let batch = batch_of(specs.iter().map(Spec::array).collect());
        let mut values = backing(10, 2, DType::Float32);
        let mut destination =
            RowsDestination::from_bytes(bytes_of(&mut values), DType::Float32, 10, true);
        let error = write_rows(
            &Table::from(&batch),
            45..55,
            &mut destination,
            0,
            Default::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&error, Error::ColumnNulls { column, null_count: 1 } if column == "c1"),
            "{error}"
        );
        // Rows 0..10 hold no null: no error, and NaN where asked for.
        for row_major in [true, false] {
            check(&specs, 0..10, 0, 0, DType::Float32, row_major, false);
            check(&specs, 45..55, 2, 1, DType::Float32, row_major, true);
        }
        // An integer destination cannot hold NaN: the null is refused even with null_to_nan.
        let mut values = backing(10, 2, DType::Int64);
        let mut destination =
            RowsDestination::from_bytes(bytes_of(&mut values), DType::Int64, 10, true);
        let options = WriteRowsOptions { null_to_nan: true };
        assert!(matches!(
            write_rows(&Table::from(&batch), 45..55, &mut destination, 0, options),
            Err(Error::ColumnNulls { .. })
        ));
    }

    #[test]
    fn tables_to_tensor_counts_nulls_over_every_table_and_refuses_no_tables() {
        let mut spec = cycling(DType::Float32, 100, 0);
        spec.validity = Some((0..100).map(|row| row % 40 != 1).collect());
        let batch = batch_of(vec![cycling(DType::Int8, 100, 0).array(), spec.array()]);
        let (first, second) = (batch.slice(0, 50), batch.slice(50, 50));
        let tables = [Table::from(&first), Table::from(&second)];
        let error = tables_to_tensor(&tables, ROW_MAJOR).unwrap_err();
        assert!(
            matches!(&error, Error::ColumnNulls { column, null_count: 3 } if column == "c1"),
            "{error}"
        );
        let tensor = tables_to_tensor(&tables, with_nan(ROW_MAJOR)).unwrap();
        assert_eq!(
            (tensor.dtype(), tensor.shape()),
            (DType::Float32, &[100, 2][..])
        );
        assert!(element(&tensor, 41, 1).float().is_nan());
        assert!(matches!(
            tables_to_tensor(&[], ROW_MAJOR),
            Err(Error::NoColumns)
        ));
    }

    #[test]
    fn typed_destinations_and_refusals() {
        let specs = [cycling(DType::Int8, 4, 0), cycling(DType::UInt8, 4, 1)];
        let batch = batch_of(specs.iter().map(Spec::array).collect());
        let mut slots = vec![MaybeUninit::<i16>::uninit(); 8];
        let mut destination = RowsDestination::new(&mut slots, 4, false);
        assert_eq!(
            (destination.dtype(), destination.num_rows()),
            (DType::Int16, 4)
        );
        write_rows(
            &Table::from(&batch),
            0..4,
            &mut destination,
            0,
            Default::default(),
        )
        .unwrap();
        // SAFETY: write_rows initialised all 4 rows of both columns.
        let written: Vec<i16> = slots
            .iter()
            .map(|slot| unsafe { slot.assume_init() })
            .collect();
        let want: Vec<i16> = specs
            .iter()
            .flat_map(|spec| spec.values.iter().map(|value| value.int() as i16))
            .collect();
        assert_eq!(written, want);

        let mut values = backing(4, 2, DType::Bool);
        let mut destination =
            RowsDestination::from_bytes(bytes_of(&mut values), DType::Bool, 4, true);
        assert!(matches!(
            write_rows(
                &Table::from(&batch),
                0..4,
                &mut destination,
                0,
                Default::default()
            ),
            Err(Error::UnsupportedDType { dtype: DType::Bool })
        ));
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["a"; 4]));
        let table_batch = batch_of(vec![strings]);
        let mut slots = vec![MaybeUninit::<f32>::uninit(); 4];
        let mut destination = RowsDestination::new(&mut slots, 4, true);
        assert!(matches!(
            write_rows(
                &Table::from(&table_batch),
                0..4,
                &mut destination,
                0,
                Default::default()
            ),
            Err(Error::UnsupportedColumnType { .. })
        ));
    }

    #[test]
    #[should_panic(expected = "lie outside a target of 4 rows")]
    fn rows_beyond_the_destination_panic() {
        let batch = batch_of(vec![cycling(DType::Float64, 4, 0).array()]);
        let mut slots = vec![MaybeUninit::<f64>::uninit(); 4];
        let mut destination = RowsDestination::new(&mut slots, 4, true);
        let _ = write_rows(
            &Table::from(&batch),
            0..4,
            &mut destination,
            1,
            Default::default(),
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_tables_ranges_and_offsets_match_the_reference(
            dtypes in prop::collection::vec(0..11usize, 1..20),
            rows in 0..300usize,
            skip in 0..5usize,
            before in 0..4usize,
            after in 0..4usize,
            row_major: bool,
            target in 0..11usize,
        ) {
            let specs: Vec<Spec> = dtypes
                .iter()
                .enumerate()
                .map(|(shift, &dtype)| cycling(DTYPES[dtype], skip + rows, shift))
                .collect();
            // Floats convert into integers only where they fit; use a float destination for them.
            let dtype = if specs.iter().any(|spec| is_float(spec.dtype)) && !is_float(DTYPES[target]) {
                DType::Float64
            } else {
                DTYPES[target]
            };
            check(&specs, skip..skip + rows, before, after, dtype, row_major, false);
        }
    }
}
