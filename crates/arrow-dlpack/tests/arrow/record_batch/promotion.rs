//! PyArrow's promotion of every pair of column types, and nulls refused or written as NaN.

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
