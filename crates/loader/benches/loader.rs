//! The loader on the workload of docs/benchmarks.md's loader section: 2,000,000 rows of 16
//! float32 features, an int64 label and an `arrow.fixed_shape_tensor` float32[8] embedding, one
//! pass in batches of 1,024 and 8,192 rows, from a memory-mapped Arrow IPC file and from a Parquet
//! file, in order and shuffled (the default window), so that the two read side by side.
//!
//! The files are written once into a temporary directory (about 200 MB each). Each batch gives
//! `features` (B, 16) float32 (a copy: a column group), `label` (B,) and `embedding` (B, 8).
//! A last pair of benchmarks feeds an adversarial source, 131,072 record batches of one row and
//! two columns, in order and shuffled: its cost must follow its rows, not its record batches
//! times the window.
//! Beside the shuffled passes, `gather_reference/B` is the floor of a shuffled batch: the same
//! rows (in windows of the default 65,536, shuffled) gathered by a plain loop from the record
//! batches in memory into fresh row-major buffers, one batch at a time on one thread, the bytes
//! every shuffled batch must copy.
//! Run with `cargo bench -p arrow-dlpack-loader`; `LOADER_BENCH_ROWS` shrinks the workload.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, RecordBatchIterator,
};
use arrow_dlpack_loader::{BatchSpec, ColumnGroup, Source, batches};
use arrow_schema::{DataType, Field, Schema};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// Rows written per record batch (IPC) and per row group (Parquet).
const CHUNK: usize = 131_072;

fn rows() -> usize {
    std::env::var("LOADER_BENCH_ROWS")
        .ok()
        .and_then(|rows| rows.parse().ok())
        .unwrap_or(2_000_000)
}

fn feature_names() -> Vec<String> {
    (0..16).map(|i| format!("f{i}")).collect()
}

/// The record batch of rows `start..start + len`.
fn chunk(schema: &Arc<Schema>, start: usize, len: usize) -> RecordBatch {
    let mut columns: Vec<ArrayRef> = (0..16)
        .map(|f| {
            Arc::new(Float32Array::from_iter_values(
                (start..start + len).map(|row| (row * 16 + f) as f32),
            )) as ArrayRef
        })
        .collect();
    columns.push(Arc::new(Int64Array::from_iter_values(
        (start..start + len).map(|row| (row % 10) as i64),
    )));
    let values = Float32Array::from_iter_values((start * 8..(start + len) * 8).map(|v| v as f32));
    let item = Arc::new(Field::new_list_field(DataType::Float32, true));
    columns.push(Arc::new(FixedSizeListArray::new(
        item,
        8,
        Arc::new(values),
        None,
    )));
    RecordBatch::try_new(schema.clone(), columns).unwrap()
}

fn schema() -> Arc<Schema> {
    let mut fields: Vec<Field> = feature_names()
        .into_iter()
        .map(|name| Field::new(name, DataType::Float32, false))
        .collect();
    fields.push(Field::new("label", DataType::Int64, false));
    let item = Arc::new(Field::new_list_field(DataType::Float32, true));
    fields.push(
        Field::new("embedding", DataType::FixedSizeList(item, 8), false).with_metadata(
            [
                ("ARROW:extension:name", "arrow.fixed_shape_tensor"),
                ("ARROW:extension:metadata", r#"{"shape":[8]}"#),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::HashMap<_, _>>(),
        ),
    );
    Arc::new(Schema::new(fields))
}

/// Writes the workload as an IPC file and a Parquet file in `dir`.
fn write_files(dir: &Path, rows: usize) -> (PathBuf, PathBuf) {
    let schema = schema();
    let ipc = dir.join("workload.arrow");
    let parquet = dir.join("workload.parquet");
    let mut ipc_writer =
        arrow_ipc::writer::FileWriter::try_new(File::create(&ipc).unwrap(), &schema).unwrap();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(CHUNK))
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut parquet_writer = ArrowWriter::try_new(
        File::create(&parquet).unwrap(),
        schema.clone(),
        Some(properties),
    )
    .unwrap();
    for start in (0..rows).step_by(CHUNK) {
        let batch = chunk(&schema, start, CHUNK.min(rows - start));
        ipc_writer.write(&batch).unwrap();
        parquet_writer.write(&batch).unwrap();
    }
    ipc_writer.finish().unwrap();
    parquet_writer.close().unwrap();
    (ipc, parquet)
}

/// One pass: every batch made, its tensors touched.
fn pass(source: Source, batch_size: usize, shuffle: bool) -> usize {
    let spec = BatchSpec {
        batch_size,
        columns: Some(vec!["label".into(), "embedding".into()]),
        groups: vec![ColumnGroup::new("features", feature_names())],
        shuffle,
        seed: 1,
        ..BatchSpec::default()
    };
    let mut rows = 0;
    for batch in batches(source, spec).unwrap() {
        let batch = batch.unwrap();
        rows += batch.get("features").unwrap().shape()[0];
    }
    rows
}

/// The adversarial source: `count` record batches of one row each, two columns.
fn one_row_batches(count: usize) -> Vec<RecordBatch> {
    (0..count)
        .map(|row| {
            RecordBatch::try_from_iter([
                (
                    "x",
                    Arc::new(Float32Array::from(vec![row as f32])) as ArrayRef,
                ),
                (
                    "label",
                    Arc::new(Int64Array::from(vec![row as i64])) as ArrayRef,
                ),
            ])
            .unwrap()
        })
        .collect()
}

/// One pass over the one-row record batches.
fn one_row_pass(pieces: Vec<RecordBatch>, shuffle: bool) -> usize {
    let schema = pieces[0].schema();
    let reader = RecordBatchIterator::new(pieces.into_iter().map(Ok), schema);
    let spec = BatchSpec {
        batch_size: 1024,
        shuffle,
        seed: 1,
        ..BatchSpec::default()
    };
    let mut rows = 0;
    for batch in batches(Source::reader(reader), spec).unwrap() {
        rows += batch.unwrap().num_rows();
    }
    rows
}

/// The rows of the window `start..end`, shuffled (Fisher-Yates with a xorshift generator).
fn shuffled_window(start: usize, end: usize, state: &mut u64) -> Vec<usize> {
    let mut rows: Vec<usize> = (start..end).collect();
    for i in (1..rows.len()).rev() {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        rows.swap(i, (*state % (i as u64 + 1)) as usize);
    }
    rows
}

/// The floor of a shuffled pass: every batch's rows gathered from `columns` (the 16 features,
/// the label and the embedding's values, each one contiguous column) into fresh buffers.
fn gather_pass(
    features: &[Vec<f32>],
    label: &[i64],
    embedding: &[f32],
    batch_size: usize,
) -> usize {
    const WINDOW: usize = 65_536;
    let rows = label.len();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut given = 0;
    for start in (0..rows).step_by(WINDOW) {
        let order = shuffled_window(start, (start + WINDOW).min(rows), &mut state);
        for picks in order.chunks(batch_size) {
            let mut x = Vec::with_capacity(picks.len() * 16);
            let mut y = Vec::with_capacity(picks.len());
            let mut e = Vec::with_capacity(picks.len() * 8);
            for &row in picks {
                x.extend(features.iter().map(|column| column[row]));
                y.push(label[row]);
                e.extend_from_slice(&embedding[row * 8..row * 8 + 8]);
            }
            given += std::hint::black_box((x, y, e)).1.len();
        }
    }
    given
}

/// The workload's columns read into memory, each one contiguous.
fn columns_in_memory(ipc: &Path) -> (Vec<Vec<f32>>, Vec<i64>, Vec<f32>) {
    let reader = arrow_ipc::reader::FileReader::try_new(File::open(ipc).unwrap(), None).unwrap();
    let (mut features, mut label, mut embedding) = (vec![Vec::new(); 16], Vec::new(), Vec::new());
    for batch in reader {
        let batch = batch.unwrap();
        for (f, column) in features.iter_mut().enumerate() {
            let values = batch
                .column(f)
                .as_any()
                .downcast_ref::<Float32Array>()
                .unwrap();
            column.extend_from_slice(values.values());
        }
        let labels = batch
            .column(16)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        label.extend_from_slice(labels.values());
        let list = batch
            .column(17)
            .as_any()
            .downcast_ref::<FixedSizeListArray>()
            .unwrap();
        let values = list
            .values()
            .as_any()
            .downcast_ref::<Float32Array>()
            .unwrap();
        embedding.extend_from_slice(values.values());
    }
    (features, label, embedding)
}

fn bench(c: &mut Criterion) {
    let rows = rows();
    let dir = tempfile::tempdir().unwrap();
    let (ipc, parquet) = write_files(dir.path(), rows);
    let mut group = c.benchmark_group("loader");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(rows as u64));
    let (features, label, embedding) = columns_in_memory(&ipc);
    for batch_size in [1024, 8192] {
        group.bench_function(format!("gather_reference/{batch_size}"), |b| {
            b.iter(|| assert_eq!(gather_pass(&features, &label, &embedding, batch_size), rows));
        });
        for (order, shuffle) in [("", false), ("_shuffled", true)] {
            group.bench_function(format!("ipc_mmap{order}/{batch_size}"), |b| {
                b.iter(|| {
                    let source = Source::IpcFiles(vec![ipc.clone()]);
                    assert_eq!(pass(source, batch_size, shuffle), rows)
                });
            });
            group.bench_function(format!("parquet{order}/{batch_size}"), |b| {
                b.iter(|| {
                    let source = Source::ParquetFiles(vec![parquet.clone()]);
                    assert_eq!(pass(source, batch_size, shuffle), rows)
                });
            });
        }
    }
    group.finish();
    let count = 131_072;
    let pieces = one_row_batches(count);
    let mut group = c.benchmark_group("loader_one_row_batches");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(count as u64));
    for (name, shuffle) in [("in_order", false), ("shuffled", true)] {
        group.bench_function(name, |b| {
            b.iter(|| assert_eq!(one_row_pass(pieces.clone(), shuffle), count));
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
