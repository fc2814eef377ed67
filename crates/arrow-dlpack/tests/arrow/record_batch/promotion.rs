//! PyArrow's promotion of every pair of column types, and nulls refused or written as NaN.

use std::mem::MaybeUninit;

use arrow_dlpack::{RowsDestination, table_dtype, write_rows};

use super::*;

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
fn boolean_columns_are_zero_and_one_of_the_promoted_type_and_alone_a_bool_tensor() {
    // 11 rows sliced from 1, so that the bits start inside a byte and run past one.
    let flags: Vec<bool> = (0..12).map(|i| i % 3 != 1).collect();
    let flag: ArrayRef = Arc::new(BooleanArray::from(flags.clone()).slice(1, 11));
    let expected: Vec<f64> = flags[1..].iter().map(|&f| f64::from(u8::from(f))).collect();
    for (other, promoted) in [
        (
            Arc::new(Float32Array::from(vec![0.5; 11])) as ArrayRef,
            DType::Float32,
        ),
        (Arc::new(Int8Array::from(vec![-1; 11])), DType::Int8),
        (Arc::new(UInt64Array::from(vec![7; 11])), DType::UInt64),
        (
            Arc::new(Float16Array::from(vec![f16::ONE; 11])),
            DType::Float16,
        ),
    ] {
        let columns = [flag.clone(), other];
        for options in [ROW_MAJOR, COLUMN_MAJOR] {
            let tensor = columns_to_tensor(&["flag", "x"], &columns, options).unwrap();
            assert_eq!(tensor.dtype(), promoted);
            assert_eq!(first_column(&tensor), expected, "{promoted} {options:?}");
        }
    }
    // Boolean columns alone: a bool tensor of bytes 0 and 1, in both layouts.
    let columns = [flag.clone(), flag.clone()];
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let tensor = columns_to_tensor(&["a", "b"], &columns, options).unwrap();
        assert_eq!(
            (tensor.dtype(), tensor.shape()),
            (DType::Bool, &[11, 2][..])
        );
        let bytes = tensor.to_contiguous().unwrap().row_major_buffer().unwrap();
        let pairs: Vec<u8> = flags[1..].iter().flat_map(|&f| [u8::from(f); 2]).collect();
        assert_eq!(bytes.as_slice(), pairs.as_slice());
        let table = Table::try_from_columns(&["a", "b"], &columns).unwrap();
        assert_eq!(table_dtype(&table, options).unwrap(), DType::Bool);
    }
}

#[test]
fn boolean_nulls_are_refused_or_nan_and_a_bool_destination_takes_booleans_only() {
    let flag: ArrayRef = Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)]));
    let x: ArrayRef = Arc::new(Int16Array::from(vec![1, 2, 3]));
    let columns = [flag.clone(), x.clone()];
    let error = columns_to_tensor(&["flag", "x"], &columns, ROW_MAJOR).unwrap_err();
    assert!(
        matches!(&error, Error::ColumnNulls { column, null_count: 1 } if column == "flag"),
        "{error}"
    );
    let tensor = columns_to_tensor(&["flag", "x"], &columns, with_nan(ROW_MAJOR)).unwrap();
    assert_eq!(tensor.dtype(), DType::Float32);
    let values = tensor.as_slice::<f32>().unwrap();
    assert_eq!((values[0], values[4]), (1.0, 0.0));
    assert!(values[2].is_nan());
    // A bool tensor of 0 and 1 cannot hold another column's values.
    let mut slots = vec![MaybeUninit::<u8>::uninit(); 6];
    let mut destination = RowsDestination::from_bytes(&mut slots, DType::Bool, 3, true);
    let both = [
        Arc::new(BooleanArray::from(vec![true, false, true])) as ArrayRef,
        x,
    ];
    let table = Table::try_from_columns(&["flag", "x"], &both).unwrap();
    let refused = write_rows(&table, 0..3, &mut destination, 0, Default::default());
    assert!(matches!(
        refused,
        Err(Error::UnsupportedDType { dtype: DType::Bool })
    ));
    let table = Table::try_from_columns(&["flag"], &both[..1]).unwrap();
    let mut destination = RowsDestination::from_bytes(&mut slots[..3], DType::Bool, 3, true);
    write_rows(&table, 0..3, &mut destination, 0, Default::default()).unwrap();
    // SAFETY: write_rows initialised rows 0..3 of the destination, its three bytes.
    let written: Vec<u8> = slots[..3]
        .iter()
        .map(|slot| unsafe { slot.assume_init() })
        .collect();
    assert_eq!(written, [1, 0, 1]);
}

/// The first column of a 2-D tensor of a numeric dtype, as float64.
fn first_column(tensor: &Tensor) -> Vec<f64> {
    let buffer = tensor.to_contiguous().unwrap().row_major_buffer().unwrap();
    let width = tensor.shape()[1];
    let rows = 0..tensor.shape()[0];
    let at = |row: usize| row * width;
    match tensor.dtype() {
        DType::Float32 => rows
            .map(|r| f64::from(buffer.typed_data::<f32>()[at(r)]))
            .collect(),
        DType::Float16 => rows
            .map(|r| buffer.typed_data::<f16>()[at(r)].to_f64())
            .collect(),
        DType::Int8 => rows
            .map(|r| f64::from(buffer.typed_data::<i8>()[at(r)]))
            .collect(),
        DType::UInt64 => rows
            .map(|r| buffer.typed_data::<u64>()[at(r)] as f64)
            .collect(),
        other => panic!("no reader for {other}"),
    }
}

#[test]
fn rows_without_nulls_of_columns_with_nulls_elsewhere_go_into_any_dtype() {
    // Row 1 is null; rows 2..4 are not, and an integer or bool destination takes them.
    let n: ArrayRef = Arc::new(Int8Array::from(vec![Some(1), None, Some(3), Some(4)]));
    let flag: ArrayRef = Arc::new(BooleanArray::from(vec![
        Some(true),
        None,
        Some(false),
        Some(true),
    ]));
    for row_major in [true, false] {
        let table = Table::try_from_columns(&["n"], std::slice::from_ref(&n)).unwrap();
        let mut slots = vec![MaybeUninit::<i16>::uninit(); 2];
        let mut destination = RowsDestination::new(&mut slots, 2, row_major);
        let refused = write_rows(&table, 1..3, &mut destination, 0, Default::default());
        assert!(matches!(
            refused,
            Err(Error::ColumnNulls { null_count: 1, .. })
        ));
        write_rows(&table, 2..4, &mut destination, 0, Default::default()).unwrap();
        // SAFETY: write_rows initialised both rows of the one column.
        let written: Vec<i16> = slots
            .iter()
            .map(|slot| unsafe { slot.assume_init() })
            .collect();
        assert_eq!(written, [3, 4]);

        let table = Table::try_from_columns(&["flag"], std::slice::from_ref(&flag)).unwrap();
        let mut bytes = vec![MaybeUninit::<u8>::uninit(); 2];
        let mut destination = RowsDestination::from_bytes(&mut bytes, DType::Bool, 2, row_major);
        write_rows(&table, 2..4, &mut destination, 0, Default::default()).unwrap();
        // SAFETY: as above.
        let written: Vec<u8> = bytes
            .iter()
            .map(|slot| unsafe { slot.assume_init() })
            .collect();
        assert_eq!(written, [0, 1]);
    }
}
