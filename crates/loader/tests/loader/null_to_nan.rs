//! `null_to_nan`: a column that holds no nulls keeps its dtype, and a column's dtype is the same
//! in every batch, decided when the loader is planned from what each kind of source tells of its
//! nulls (Parquet statistics, IPC record-batch headers, record batches in memory; a reader's
//! schema).

use std::sync::Arc;

use arrow_array::RecordBatchIterator;
use arrow_array::{ArrayRef, Float32Array, Int32Array, Int64Array, RecordBatch};
use arrow_dlpack_loader::{BatchSpec, Error, NullToNan, Source, batches};
use arrow_dlpack_tensor::DType;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::data::{collect, values, write_ipc, write_parquet, write_stream};

/// `label` (int64, no nulls), `count` (int32, one null: the last row), `x` (float32, a null
/// every tenth row), in record batches of 100 rows; `label_nullable` says whether the schema
/// lets `label` hold nulls.
fn parts(rows: i64, label_nullable: bool) -> Vec<RecordBatch> {
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("label", DataType::Int64, label_nullable),
        Field::new("count", DataType::Int32, true),
        Field::new("x", DataType::Float32, true),
    ]));
    (0..rows)
        .step_by(100)
        .map(|start| {
            let ids: Vec<i64> = (start..(start + 100).min(rows)).collect();
            let label: ArrayRef = Arc::new(Int64Array::from(ids.clone()));
            let count: ArrayRef = Arc::new(Int32Array::from_iter(
                ids.iter().map(|&i| (i != rows - 1).then_some(i as i32)),
            ));
            let x: ArrayRef = Arc::new(Float32Array::from_iter(
                ids.iter().map(|&i| (i % 10 != 3).then_some(i as f32)),
            ));
            RecordBatch::try_new(schema.clone(), vec![label, count, x]).unwrap()
        })
        .collect()
}

fn nan_spec(null_to_nan: impl Into<NullToNan>) -> BatchSpec {
    BatchSpec::new(64)
        .columns(["label", "count", "x"])
        .null_to_nan(null_to_nan)
}

/// The dtypes of `label`, `count` and `x` in every batch of `source` (one set per batch), with
/// their values checked.
fn dtypes(source: Source, spec: BatchSpec, rows: i64) -> Vec<[DType; 3]> {
    let got = collect(source, spec);
    let mut labels = Vec::new();
    let mut out = Vec::new();
    for batch in &got {
        let [label, count, x] = ["label", "count", "x"].map(|name| batch.get(name).unwrap());
        out.push([label.dtype(), count.dtype(), x.dtype()]);
        let label: Vec<i64> = match label.dtype() {
            DType::Int64 => values::<i64>(label),
            _ => values::<f64>(label).into_iter().map(|v| v as i64).collect(),
        };
        for (k, &row) in label.iter().enumerate() {
            let x = values::<f32>(x)[k];
            assert_eq!(x.is_nan(), row % 10 == 3, "x of row {row}");
            if count.dtype() == DType::Float64 {
                let count = values::<f64>(count)[k];
                assert_eq!(count.is_nan(), row == rows - 1, "count of row {row}");
            }
        }
        labels.extend(label);
    }
    assert_eq!(labels, (0..rows).collect::<Vec<_>>());
    out
}

#[test]
fn null_to_nan_changes_no_column_without_nulls_in_files_and_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 1000;
    let table = parts(rows, true);
    let sources: Vec<(&str, Source)> = vec![
        (
            "parquet",
            Source::ParquetFiles(vec![write_parquet(
                &dir.path().join("t.parquet"),
                &table,
                100,
            )]),
        ),
        (
            "ipc file",
            Source::IpcFiles(vec![write_ipc(&dir.path().join("t.arrow"), &table)]),
        ),
        (
            "ipc stream",
            Source::IpcStreams(vec![write_stream(&dir.path().join("t.arrows"), &table)]),
        ),
        (
            "record batches",
            Source::record_batches(table[0].schema(), table.clone()),
        ),
    ];
    // `count`'s only null is in the last batch: it is float64 from the first batch on.
    let expected = [DType::Int64, DType::Float64, DType::Float32];
    for (kind, source) in sources {
        let got = dtypes(source, nan_spec(true), rows);
        assert!(
            got.iter().all(|dtypes| *dtypes == expected),
            "{kind}: {got:?}"
        );
    }
}

#[test]
fn null_to_nan_over_a_reader_follows_the_schemas_nullability() {
    let rows = 300;
    let reader = |label_nullable| {
        let table = parts(rows, label_nullable);
        let schema = table[0].schema();
        Source::reader(RecordBatchIterator::new(table.into_iter().map(Ok), schema))
    };
    // A reader says nothing of its nulls before it is read: a nullable integer column is
    // promoted in every batch, one that cannot hold nulls is not.
    let nullable = dtypes(reader(true), nan_spec(true), rows);
    assert!(
        nullable
            .iter()
            .all(|d| *d == [DType::Float64, DType::Float64, DType::Float32])
    );
    let required = dtypes(reader(false), nan_spec(true), rows);
    assert!(
        required
            .iter()
            .all(|d| *d == [DType::Int64, DType::Float64, DType::Float32])
    );
}

#[test]
fn null_to_nan_names_the_columns_it_promotes() {
    let rows = 300;
    let table = parts(rows, true);
    let source = || Source::record_batches(table[0].schema(), table.clone());
    // Named: promoted whether or not it holds nulls; `x` not named keeps its nulls refused.
    let spec = BatchSpec::new(64)
        .columns(["label", "count"])
        .null_to_nan(NullToNan::columns(["label", "count"]));
    let got = collect(source(), spec);
    assert!(
        got.iter()
            .all(|batch| batch.get("label").unwrap().dtype() == DType::Float64)
    );
    let spec = BatchSpec::new(64)
        .columns(["count"])
        .null_to_nan(NullToNan::columns(["x"]));
    let error = batches(source(), spec).err().expect("a refusal");
    assert!(matches!(error, Error::InvalidSpec { .. }), "{error:?}");
    assert!(error.to_string().contains("\"x\""), "{error}");
    // The record batches say `x` holds nulls, which no batch of it would take: refused when
    // the loader is made, not at the batch of the first null.
    let spec = BatchSpec::new(64)
        .columns(["count", "x"])
        .null_to_nan(NullToNan::columns(["count"]));
    let error = batches(source(), spec).err().expect("a refusal");
    assert!(error.to_string().contains("\"x\""), "{error}");
}
