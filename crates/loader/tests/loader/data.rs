//! Test data written to temporary files, and helpers that read batches back.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder};
use arrow_array::{
    ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, Int16Array, Int64Array, RecordBatch,
    RecordBatchIterator,
};
use arrow_dlpack_loader::{BatchSpec, Source, TensorBatch, batches};
use arrow_dlpack_tensor::Tensor;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

/// The schema of [`table`]: `id` (row number), `x` (float32, id + 0.5), `small` (int16, id %
/// 100), `flag` (id % 3 == 0), `emb` (fixed_shape_tensor float32 [2, 3], id * 10 + cell index).
pub(crate) fn schema() -> SchemaRef {
    let emb_field = Field::new(
        "emb",
        DataType::FixedSizeList(Arc::new(Field::new_list_field(DataType::Float32, true)), 6),
        false,
    )
    .with_metadata(
        [
            (
                "ARROW:extension:name".to_string(),
                "arrow.fixed_shape_tensor".to_string(),
            ),
            (
                "ARROW:extension:metadata".to_string(),
                r#"{"shape":[2,3]}"#.to_string(),
            ),
        ]
        .into_iter()
        .collect::<std::collections::HashMap<String, String>>(),
    );
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("x", DataType::Float32, false),
        Field::new("small", DataType::Int16, false),
        Field::new("flag", DataType::Boolean, false),
        emb_field,
    ]))
}

/// Record batches of the given sizes, numbering rows from 0 across them.
pub(crate) fn table(sizes: &[usize]) -> Vec<RecordBatch> {
    let mut start = 0i64;
    sizes
        .iter()
        .map(|&size| {
            let ids: Vec<i64> = (start..start + size as i64).collect();
            start += size as i64;
            batch_of(&ids)
        })
        .collect()
}

/// The record batch of rows `ids`.
pub(crate) fn batch_of(ids: &[i64]) -> RecordBatch {
    let x = Float32Array::from_iter_values(ids.iter().map(|&i| i as f32 + 0.5));
    let small = Int16Array::from_iter_values(ids.iter().map(|&i| (i % 100) as i16));
    let flag = BooleanArray::from_iter(ids.iter().map(|&i| Some(i % 3 == 0)));
    let mut emb = FixedSizeListBuilder::new(Float32Builder::new(), 6);
    for &i in ids {
        for cell in 0..6 {
            emb.values().append_value((i * 10 + cell) as f32);
        }
        emb.append(true);
    }
    let emb: FixedSizeListArray = emb.finish();
    let emb = FixedSizeListArray::new(
        Arc::new(Field::new_list_field(DataType::Float32, true)),
        6,
        emb.values().clone(),
        None,
    );
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
            Arc::new(x),
            Arc::new(small),
            Arc::new(flag),
            Arc::new(emb),
        ],
    )
    .unwrap()
}

/// Writes `batches` as an Arrow IPC file.
pub(crate) fn write_ipc(path: &Path, batches: &[RecordBatch]) -> PathBuf {
    let file = File::create(path).unwrap();
    let mut writer = arrow_ipc::writer::FileWriter::try_new(file, &batches[0].schema()).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
    path.to_path_buf()
}

/// Writes `batches` as an Arrow IPC stream.
pub(crate) fn write_stream(path: &Path, batches: &[RecordBatch]) -> PathBuf {
    let file = File::create(path).unwrap();
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(file, &batches[0].schema()).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
    }
    writer.finish().unwrap();
    path.to_path_buf()
}

/// Writes `batches` as a Parquet file with row groups of at most `row_group` rows.
pub(crate) fn write_parquet(path: &Path, batches: &[RecordBatch], row_group: usize) -> PathBuf {
    let file = File::create(path).unwrap();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group))
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut writer = ArrowWriter::try_new(file, batches[0].schema(), Some(properties)).unwrap();
    for batch in batches {
        writer.write(batch).unwrap();
    }
    writer.close().unwrap();
    path.to_path_buf()
}

/// A reader over `batches`.
pub(crate) fn reader(batches: Vec<RecordBatch>) -> Source {
    let schema = batches[0].schema();
    Source::reader(RecordBatchIterator::new(
        batches.into_iter().map(Ok),
        schema,
    ))
}

/// Every batch of `source`, panicking on an error.
pub(crate) fn collect(source: Source, spec: BatchSpec) -> Vec<TensorBatch> {
    batches(source, spec)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

/// The elements of `tensor` in row-major order, read through its strides.
pub(crate) fn values<T: arrow_buffer::ArrowNativeType>(tensor: &Tensor) -> Vec<T> {
    let all = tensor.buffer().typed_data::<T>();
    let mut out = Vec::with_capacity(tensor.len());
    let mut index = vec![0usize; tensor.ndim()];
    for _ in 0..tensor.len() {
        let position = index
            .iter()
            .zip(tensor.strides())
            .map(|(&i, &stride)| i as isize * stride)
            .sum::<isize>()
            + tensor.offset() as isize;
        out.push(all[position as usize]);
        for dim in (0..index.len()).rev() {
            index[dim] += 1;
            if index[dim] < tensor.shape()[dim] {
                break;
            }
            index[dim] = 0;
        }
    }
    out
}

/// The ids of every batch, concatenated.
pub(crate) fn ids(batches: &[TensorBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|batch| values::<i64>(batch.get("id").unwrap()))
        .collect()
}

/// The batch sizes.
pub(crate) fn sizes(batches: &[TensorBatch]) -> Vec<usize> {
    batches.iter().map(TensorBatch::num_rows).collect()
}

/// A spec for `batch_size` rows of `columns` (of every column when `columns` is empty).
pub(crate) fn spec(batch_size: usize, columns: &[&str]) -> BatchSpec {
    BatchSpec {
        batch_size,
        columns: (!columns.is_empty()).then(|| columns.iter().map(|c| c.to_string()).collect()),
        ..BatchSpec::default()
    }
}

/// The message of `error` and of each of its causes, joined by `: `, as a chain printer shows
/// them.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        cause = inner.source();
    }
    message
}
