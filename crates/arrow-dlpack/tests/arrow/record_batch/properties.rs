//! Random batches of every type, checked against the reference.

use super::*;

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
        let options = with_nan(TableToTensorOptions { row_major, ..TableToTensorOptions::default() });
        let tensor = table_to_tensor(&Table::from(&batch), options).unwrap();
        check_against_reference(&tensor, &specs, offset, len, reference_dtype(&dtypes, true), options);

        let has_nulls = specs
            .iter()
            .any(|spec| (offset..offset + len).any(|row| !spec.is_valid(row)));
        let options = TableToTensorOptions { row_major, ..TableToTensorOptions::default() };
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
