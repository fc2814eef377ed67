//! Sequence columns: padded, packed and jagged batches of list columns, token budgets and length
//! buckets.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, Int32Array, Int64Array, LargeListArray, LargeListViewArray, ListArray, ListViewArray,
    RecordBatch,
};
use arrow_dlpack_loader::{
    BatchSpec, Error, PadValue, Sequence, SequenceMode, Side, Source, TensorBatch, batches,
};
use arrow_dlpack_tensor::DType;
use arrow_schema::{DataType, Field};

use crate::data::{collect, reader, values, write_ipc, write_parquet};

/// The tokens of row `id`: `id % 7` values (so some rows are empty), `id * 100 + position`.
fn tokens(id: i64) -> Vec<i32> {
    (0..id % 7).map(|p| (id * 100 + p) as i32).collect()
}

/// Record batches of `sizes` rows: `id` (int64) and `tokens` (list<int32>, or large_list).
fn table(sizes: &[usize], large: bool) -> Vec<RecordBatch> {
    let mut next = 0i64;
    sizes
        .iter()
        .map(|&size| {
            let ids: Vec<i64> = (next..next + size as i64).collect();
            next += size as i64;
            let rows = ids
                .iter()
                .map(|&id| Some(tokens(id).into_iter().map(Some).collect::<Vec<_>>()));
            let list: ArrayRef = if large {
                Arc::new(LargeListArray::from_iter_primitive::<Int32Type, _, _>(rows))
            } else {
                Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(rows))
            };
            RecordBatch::try_from_iter([
                ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
                ("tokens", list),
            ])
            .unwrap()
        })
        .collect()
}

fn sequences(mode: SequenceMode) -> BatchSpec {
    BatchSpec {
        batch_size: 4,
        sequences: vec![Sequence::new("tokens", mode)],
        ..BatchSpec::default()
    }
}

/// The rows of a batch, read back from its tensors in whatever mode the column is in.
fn rows_of(batch: &TensorBatch, mode: SequenceMode) -> Vec<Vec<i32>> {
    match mode {
        SequenceMode::Pad => {
            let padded = batch.get("tokens").unwrap();
            let lengths = values::<i64>(batch.get("tokens_lengths").unwrap());
            let width = padded.shape()[1];
            let all = values::<i32>(padded);
            lengths
                .iter()
                .enumerate()
                .map(|(row, &length)| all[row * width..row * width + length as usize].to_vec())
                .collect()
        }
        SequenceMode::Pack => {
            let all = values::<i32>(batch.get("tokens").unwrap());
            let cu = values::<i32>(batch.get("tokens_cu_seqlens").unwrap());
            cu.windows(2)
                .map(|w| all[w[0] as usize..w[1] as usize].to_vec())
                .collect()
        }
        SequenceMode::Jagged => {
            let all = values::<i32>(batch.get("tokens").unwrap());
            let offsets = batch.get("tokens_offsets").unwrap();
            let offsets: Vec<i64> = match offsets.dtype() {
                DType::Int32 => values::<i32>(offsets).into_iter().map(i64::from).collect(),
                _ => values::<i64>(offsets),
            };
            offsets
                .windows(2)
                .map(|w| all[w[0] as usize..w[1] as usize].to_vec())
                .collect()
        }
        other => panic!("rows_of reads no batch in mode {other}"),
    }
}

/// Every row of `batches` as `(id, tokens)`, checking that each batch's sequence rows match.
fn all_rows(batches: &[TensorBatch], mode: SequenceMode) -> Vec<(i64, Vec<i32>)> {
    let mut out = Vec::new();
    for batch in batches {
        let ids = values::<i64>(batch.get("id").unwrap());
        let rows = rows_of(batch, mode);
        assert_eq!(ids.len(), rows.len());
        out.extend(ids.into_iter().zip(rows));
    }
    out
}

const MODES: [SequenceMode; 3] = [SequenceMode::Pad, SequenceMode::Pack, SequenceMode::Jagged];

#[test]
fn every_mode_gives_the_rows_in_order_across_record_batches() {
    let dir = tempfile::tempdir().unwrap();
    for large in [false, true] {
        let data = table(&[5, 3, 6], large);
        let ipc = write_ipc(&dir.path().join("s.arrow"), &data);
        let parquet = write_parquet(&dir.path().join("s.parquet"), &data, 5);
        for mode in MODES {
            let sources = [
                reader(data.clone()),
                Source::IpcFiles(vec![ipc.clone()]),
                Source::ParquetFiles(vec![parquet.clone()]),
            ];
            for source in sources {
                let got = collect(source, sequences(mode));
                assert_eq!(
                    got.iter().map(TensorBatch::num_rows).collect::<Vec<_>>(),
                    [4, 4, 4, 2]
                );
                let expected: Vec<(i64, Vec<i32>)> = (0..14).map(|id| (id, tokens(id))).collect();
                assert_eq!(all_rows(&got, mode), expected, "{mode} large={large}");
            }
        }
    }
}

#[test]
fn padded_batches_have_lengths_and_the_pad_value_and_pack_has_positions() {
    let data = table(&[8], false);
    let mut spec = sequences(SequenceMode::Pad);
    spec.sequences[0].pad_value = PadValue::Int(-100);
    let got = collect(reader(data.clone()), spec);
    // Rows 0..4 have 0..3 tokens: padded to 3 with -100 on the right.
    assert_eq!(got[0].get("tokens").unwrap().shape(), &[4, 3]);
    assert_eq!(
        values::<i32>(got[0].get("tokens").unwrap()),
        [
            -100, -100, -100, 100, -100, -100, 200, 201, -100, 300, 301, 302
        ]
    );
    assert_eq!(
        values::<i64>(got[0].get("tokens_lengths").unwrap()),
        [0, 1, 2, 3]
    );
    let packed = collect(reader(data), sequences(SequenceMode::Pack));
    let second = &packed[1];
    // Rows 4..8 have 4, 5, 6 and 0 tokens.
    assert_eq!(
        values::<i32>(second.get("tokens_cu_seqlens").unwrap()),
        [0, 4, 9, 15, 15]
    );
    assert_eq!(
        values::<i64>(second.get("tokens_position_ids").unwrap()),
        [0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5]
    );
    let max = second.get("tokens_max_seqlen").unwrap();
    assert_eq!(max.shape(), &[] as &[usize]);
    assert_eq!(values::<i64>(max), [6]);
}

#[test]
fn truncation_and_left_padding_follow_the_options() {
    let data = table(&[7], false);
    let mut spec = sequences(SequenceMode::Pad);
    spec.batch_size = 7;
    spec.sequences[0].max_length = Some(2);
    spec.sequences[0].pad_to_multiple_of = Some(4);
    spec.sequences[0].padding_side = Side::Left;
    spec.sequences[0].truncation_side = Side::Left;
    let got = collect(reader(data), spec);
    let padded = got[0].get("tokens").unwrap();
    assert_eq!(padded.shape(), &[7, 4]);
    let all = values::<i32>(padded);
    // Row 5 (500..505) keeps its last two values, padded on the left.
    assert_eq!(&all[20..24], &[0, 0, 503, 504]);
    assert_eq!(
        values::<i64>(got[0].get("tokens_lengths").unwrap()),
        [0, 1, 2, 2, 2, 2, 2]
    );
}

#[test]
fn values_inside_one_record_batch_are_views_of_the_list() {
    let data = table(&[10], false);
    let list = data[0]
        .column(1)
        .as_any()
        .downcast_ref::<ListArray>()
        .unwrap();
    let child = list.values().to_data().buffers()[0].as_ptr() as usize;
    for mode in [SequenceMode::Pack, SequenceMode::Jagged] {
        let got = collect(reader(data.clone()), sequences(mode));
        // The second batch (rows 4..8) starts at the first value of row 4: 0+1+2+3 values in.
        let values = got[1].get("tokens").unwrap();
        assert_eq!(values.data_ptr() as usize, child + 6 * 4, "{mode}");
        assert!(values.is_read_only());
    }
}

#[test]
fn shuffled_batches_hold_every_row_once() {
    for mode in MODES {
        let spec = BatchSpec {
            shuffle: true,
            seed: 3,
            buffer_size: 6,
            ..sequences(mode)
        };
        let got = collect(reader(table(&[5, 5, 5, 2], false)), spec);
        let mut rows = all_rows(&got, mode);
        assert_ne!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            (0..17).collect::<Vec<_>>()
        );
        rows.sort();
        assert_eq!(rows, (0..17).map(|id| (id, tokens(id))).collect::<Vec<_>>());
    }
}

/// The tokens a batch's largest sequence tensor holds.
fn tokens_in(batch: &TensorBatch, mode: SequenceMode) -> usize {
    let tensor = batch.get("tokens").unwrap();
    match mode {
        SequenceMode::Pad => tensor.shape()[0] * tensor.shape()[1],
        _ => tensor.shape()[0],
    }
}

#[test]
fn a_token_budget_is_never_exceeded_and_no_row_is_lost() {
    for mode in MODES {
        for shuffle in [false, true] {
            let spec = BatchSpec {
                batch_size: 100,
                max_tokens: Some(12),
                shuffle,
                seed: 9,
                buffer_size: 16,
                ..sequences(mode)
            };
            let got = collect(reader(table(&[10, 10, 10, 3], false)), spec);
            for batch in &got {
                assert!(tokens_in(batch, mode) <= 12, "{mode} shuffle={shuffle}");
            }
            // Budgets are filled: every batch but the last of a window would overflow with one
            // more row, so there are fewer batches than rows.
            assert!(got.len() < 20);
            let mut rows = all_rows(&got, mode);
            rows.sort();
            assert_eq!(rows, (0..33).map(|id| (id, tokens(id))).collect::<Vec<_>>());
        }
    }
}

#[test]
fn in_order_token_batches_are_cut_greedily() {
    // Rows 0..7 have 0..6 tokens: with 6 tokens packed, the batches are [0..=3] (6 tokens),
    // [4] (4; 4 + 5 > 6), [5], [6].
    let spec = BatchSpec {
        max_tokens: Some(6),
        batch_size: 100,
        ..sequences(SequenceMode::Pack)
    };
    let got = collect(reader(table(&[7], false)), spec);
    let ids: Vec<Vec<i64>> = got
        .iter()
        .map(|b| values::<i64>(b.get("id").unwrap()))
        .collect();
    assert_eq!(ids, [vec![0, 1, 2, 3], vec![4], vec![5], vec![6]]);
    // Padded, a batch costs rows times the longest: [0, 1, 2] (3 * 2), [3] ... .
    let spec = BatchSpec {
        max_tokens: Some(6),
        batch_size: 100,
        ..sequences(SequenceMode::Pad)
    };
    let got = collect(reader(table(&[7], false)), spec);
    let ids: Vec<Vec<i64>> = got
        .iter()
        .map(|b| values::<i64>(b.get("id").unwrap()))
        .collect();
    assert_eq!(ids, [vec![0, 1, 2], vec![3], vec![4], vec![5], vec![6]]);
}

#[test]
fn a_row_longer_than_the_budget_is_an_error_unless_truncation_makes_it_fit() {
    let spec = BatchSpec {
        max_tokens: Some(5),
        ..sequences(SequenceMode::Pack)
    };
    let results: Vec<_> = batches(reader(table(&[7], false)), spec).unwrap().collect();
    let error = results.last().unwrap().as_ref().unwrap_err().to_string();
    assert!(
        error.contains("needs 6 tokens alone, more than max_tokens (5)"),
        "{error}"
    );
    let mut spec = BatchSpec {
        max_tokens: Some(5),
        ..sequences(SequenceMode::Pad)
    };
    spec.sequences[0].max_length = Some(5);
    let got = collect(reader(table(&[7], false)), spec);
    assert_eq!(got.iter().map(TensorBatch::num_rows).sum::<usize>(), 7);
}

#[test]
fn length_buckets_are_reproducible_exhaustive_and_pad_less() {
    let data = table(&[50, 50, 50, 50], false);
    let padded_tokens = |got: &[TensorBatch]| -> usize {
        got.iter()
            .map(|b| {
                let lengths: i64 = values::<i64>(b.get("tokens_lengths").unwrap()).iter().sum();
                tokens_in(b, SequenceMode::Pad) - lengths as usize
            })
            .sum()
    };
    let spec = |bucket: bool| BatchSpec {
        shuffle: true,
        seed: 11,
        buffer_size: 100,
        bucket_by_length: bucket,
        ..sequences(SequenceMode::Pad)
    };
    let bucketed = collect(reader(data.clone()), spec(true));
    let again = collect(reader(data.clone()), spec(true));
    let ids = |got: &[TensorBatch]| -> Vec<i64> {
        got.iter()
            .flat_map(|b| values::<i64>(b.get("id").unwrap()))
            .collect()
    };
    assert_eq!(ids(&bucketed), ids(&again));
    let mut sorted = ids(&bucketed);
    sorted.sort_unstable();
    assert_eq!(sorted, (0..200).collect::<Vec<_>>());
    let plain = collect(reader(data), spec(false));
    assert!(padded_tokens(&bucketed) * 4 <= padded_tokens(&plain));
}

#[test]
fn a_list_column_not_named_in_sequences_is_refused_with_a_hint() {
    // The spec is checked against the source's schema when the loader is made.
    let error = batches(reader(table(&[3], false)), BatchSpec::default())
        .err()
        .unwrap();
    assert!(matches!(
        error,
        Error::UnsupportedColumn {
            as_sequence: false,
            ..
        }
    ));
    // The hint names the Rust items that load a list (Python's `sequences=` is the bindings').
    assert!(
        error
            .to_string()
            .contains("name it with BatchSpec::sequence and a SequenceMode (Pad, Pack or Jagged)"),
        "{error}"
    );
}

#[test]
fn names_a_sequence_adds_are_refused_when_taken() {
    let mut data = table(&[3], false);
    data[0] = RecordBatch::try_from_iter([
        ("tokens_lengths", data[0].column(0).clone()),
        ("tokens", data[0].column(1).clone()),
    ])
    .unwrap();
    let error = batches(reader(data), sequences(SequenceMode::Pad))
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("\"tokens_lengths\" is claimed twice"),
        "{error}"
    );
}

#[test]
fn a_spec_with_padding_options_outside_pad_mode_is_refused() {
    let mut spec = sequences(SequenceMode::Pack);
    spec.sequences[0].pad_to_multiple_of = Some(3);
    let error = batches(reader(table(&[3], false)), spec)
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("apply to mode \"pad\" only"), "{error}");
    let spec = BatchSpec {
        max_tokens: Some(10),
        ..BatchSpec::default()
    };
    let error = batches(reader(table(&[3], false)), spec)
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("sequences is empty"), "{error}");
}

#[test]
fn null_rows_are_refused_unless_allowed_then_empty() {
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
        Some(vec![Some(1), Some(2)]),
        None,
        Some(vec![Some(3)]),
    ]);
    let data = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![0, 1, 2])) as ArrayRef),
        ("tokens", Arc::new(list) as ArrayRef),
    ])
    .unwrap();
    let result: Vec<_> = batches(reader(vec![data.clone()]), sequences(SequenceMode::Pad))
        .unwrap()
        .collect();
    assert!(result[0].is_err());
    let spec = BatchSpec {
        allow_nulls: true,
        ..sequences(SequenceMode::Pad)
    };
    let got = collect(reader(vec![data]), spec);
    assert_eq!(
        rows_of(&got[0], SequenceMode::Pad),
        [vec![1, 2], vec![], vec![3]]
    );
}

#[test]
fn a_null_row_is_reported_by_its_row_in_its_unit_with_the_loaders_option() {
    // 60 rows, row 50 null, in one Parquet row group that decodes into record batches of 16
    // rows: the kernel saw row 2 of a run, the row is 50 of the row group.
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..60).map(|row| (row != 50).then(|| vec![Some(row)])),
    );
    let data = RecordBatch::try_from_iter([("tokens", Arc::new(list) as ArrayRef)]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(
        &dir.path().join("t.parquet"),
        std::slice::from_ref(&data),
        60,
    );
    let spec = BatchSpec {
        batch_size: 8,
        ..sequences(SequenceMode::Pad)
    };
    // A file names the row by the file and its row there; a stream by its unit.
    let first_error = |source: Source, spec: BatchSpec| {
        batches(source, spec)
            .unwrap()
            .find_map(Result::err)
            .unwrap()
    };
    let in_file = first_error(Source::ParquetFiles(vec![path.clone()]), spec.clone());
    assert!(
        matches!(
            &in_file,
            Error::NullSequenceRow { column, file: Some(file), item: Some(0), row: 50 }
                if column == "tokens" && file == &path
        ),
        "{in_file:?}"
    );
    let message = in_file.to_string();
    assert!(
        message.starts_with(&format!("row 50 in {} is null", path.display())),
        "{message}"
    );
    let in_stream = first_error(reader(vec![data.clone()]), spec.clone());
    assert!(
        matches!(
            &in_stream,
            Error::NullSequenceRow { column, file: None, item: Some(0), row: 50 } if column == "tokens"
        ),
        "{in_stream:?}"
    );
    for error in [in_file, in_stream] {
        assert!(
            error.to_string().contains("BatchSpec::allow_nulls"),
            "{error}"
        );
    }
    // In a file of two row groups of 30 rows, shuffled: the second's row 20, the file's row 50.
    let path = write_parquet(&dir.path().join("two.parquet"), &[data], 30);
    let shuffled = spec.clone().shuffle(3);
    let error = first_error(Source::ParquetFiles(vec![path.clone()]), shuffled);
    assert!(
        matches!(&error, Error::NullSequenceRow { row: 50, file: Some(file), .. } if file == &path),
        "{error:?}"
    );
}

/// `table`'s record batches with the token column as a list view (`large`: large_list_view)
/// whose rows lie in the values in reverse order, so that no row follows the one before it.
fn list_view_table(sizes: &[usize], large: bool) -> Vec<RecordBatch> {
    table(sizes, false)
        .into_iter()
        .map(|batch| {
            let ids = values::<i64>(
                &arrow_dlpack::array_to_tensor(batch.column(0).as_ref(), Default::default())
                    .unwrap(),
            );
            // The rows' values, last row first.
            let mut flat: Vec<i32> = Vec::new();
            let mut offsets = vec![0usize; ids.len()];
            for (row, &id) in ids.iter().enumerate().rev() {
                offsets[row] = flat.len();
                flat.extend(tokens(id));
            }
            let sizes: Vec<usize> = ids.iter().map(|&id| tokens(id).len()).collect();
            let item = Arc::new(Field::new_list_field(DataType::Int32, true));
            let values: ArrayRef = Arc::new(Int32Array::from(flat));
            let list: ArrayRef = if large {
                let offsets = offsets.iter().map(|&o| o as i64).collect::<Vec<_>>();
                let sizes = sizes.iter().map(|&s| s as i64).collect::<Vec<_>>();
                Arc::new(
                    LargeListViewArray::try_new(item, offsets.into(), sizes.into(), values, None)
                        .unwrap(),
                )
            } else {
                let offsets = offsets.iter().map(|&o| o as i32).collect::<Vec<_>>();
                let sizes = sizes.iter().map(|&s| s as i32).collect::<Vec<_>>();
                Arc::new(
                    ListViewArray::try_new(item, offsets.into(), sizes.into(), values, None)
                        .unwrap(),
                )
            };
            RecordBatch::try_from_iter([("id", batch.column(0).clone()), ("tokens", list)]).unwrap()
        })
        .collect()
}

#[test]
fn list_views_are_sequences_in_every_mode_with_budgets_and_buckets() {
    for large in [false, true] {
        for mode in MODES {
            let got = collect(reader(list_view_table(&[5, 3, 6], large)), sequences(mode));
            let expected: Vec<(i64, Vec<i32>)> = (0..14).map(|id| (id, tokens(id))).collect();
            assert_eq!(all_rows(&got, mode), expected, "{mode} large={large}");
            let spec = BatchSpec {
                batch_size: 100,
                max_tokens: Some(12),
                bucket_by_length: true,
                shuffle: true,
                seed: 3,
                buffer_size: 8,
                ..sequences(mode)
            };
            let got = collect(reader(list_view_table(&[10, 10, 10, 3], large)), spec);
            assert!(
                got.iter().all(|batch| tokens_in(batch, mode) <= 12),
                "{mode}"
            );
            let mut rows = all_rows(&got, mode);
            rows.sort();
            assert_eq!(rows, (0..33).map(|id| (id, tokens(id))).collect::<Vec<_>>());
        }
    }
}
