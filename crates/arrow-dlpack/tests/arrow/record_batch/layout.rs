//! Blocks, slices, wide and empty batches, fresh memory, and the strides of both layouts.

use super::*;

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
fn outputs_past_the_stream_threshold_match_the_reference() {
    // A float64 output of more than `alloc::STREAM_THRESHOLD` bytes: in column-major order its
    // float64 column is streamed; sliced, every run starts off a cache line.
    let rows = 800_003;
    let specs = [
        Spec {
            dtype: DType::Int32,
            values: (0..rows).map(|i| Num::Int(i as i128 * 3 - 7)).collect(),
            validity: None,
        },
        Spec {
            dtype: DType::Float32,
            values: (0..rows)
                .map(|i| Num::Float(((i % 4096) as f32 * 0.25) as f64))
                .collect(),
            validity: Some((0..rows).map(|i| i % 4099 != 5).collect()),
        },
        Spec {
            dtype: DType::Float64,
            values: (0..rows).map(|i| Num::Float(i as f64 / 7.0)).collect(),
            validity: None,
        },
    ];
    assert!(rows * specs.len() * 8 >= arrow_dlpack_tensor::alloc::STREAM_THRESHOLD);
    let batch = batch_of(specs.iter().map(Spec::array).collect());
    for options in [ROW_MAJOR, COLUMN_MAJOR] {
        let options = with_nan(options);
        let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
        check_against_reference(&tensor, &specs, 0, rows, DType::Float64, options);
        let sliced = table_to_tensor(&Table::from(&batch.slice(1, rows - 2)), options).unwrap();
        check_against_reference(&sliced, &specs, 1, rows - 2, DType::Float64, options);
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
