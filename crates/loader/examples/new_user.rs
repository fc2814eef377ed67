//! What a new Rust user does with `arrow-dlpack` and `arrow-dlpack-loader`: a record batch to
//! tensors, a table to one 2-D tensor, DLPack out and back in (through the raw pointer a C
//! library would take), a fixed-shape tensor column written to Parquet and loaded back shuffled,
//! and a few deliberate mistakes with the errors they give.
//!
//! It depends on the two crates and on what builds their input (arrow-rs, parquet, tempfile).
//! Lookups go through the fallible APIs, errors travel with `?` into the loader's `Result`, and
//! the one `unsafe` block is the raw DLPack hand-off. Every step asserts its result, so running it
//! is a test:
//!
//! ```text
//! cargo run -p arrow-dlpack-loader --example new_user
//! ```
//!
//! `cargo test -p arrow-dlpack-loader` runs it too, as the test at the end.

use std::error::Error as _;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch};
use arrow_dlpack::{
    ArrayToTensorOptions, ColumnTensorOptions, DType, ExportOptions, FixedShapeTensorArray, Table,
    TableToTensorOptions, Tensor, TensorToArrayOptions, array_to_tensor, shares_memory,
    table_to_tensor, table_to_tensors,
};
use arrow_dlpack_loader::{BatchSpec, Error, Result, Source, batches};
use arrow_schema::{Field, Schema};

fn main() -> std::result::Result<(), Failure> {
    let batch = record_batch()?;
    record_batch_to_tensors(&batch)?;
    table_to_one_tensor(&batch)?;
    dlpack_out_and_in()?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("images.parquet");
    write_parquet(&path, &image_batch()?)?;
    load_shuffled(&path)?;
    mistakes(&batch, &path)?;
    println!("new_user: every step passed");
    Ok(())
}

/// What `main` can fail with: the loader's errors (which every arrow-dlpack error converts
/// into), and those of writing the Parquet file and making its directory.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Loader(#[from] Error),
    #[error("cannot write the parquet file")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("cannot make the temporary directory")]
    Io(#[from] std::io::Error),
}

/// Four rows: an id, two float features.
fn record_batch() -> Result<RecordBatch> {
    Ok(RecordBatch::try_from_iter([
        (
            "id",
            Arc::new(Int64Array::from(vec![0, 1, 2, 3])) as ArrayRef,
        ),
        (
            "x0",
            Arc::new(Float32Array::from(vec![0.0, 0.5, 1.0, 1.5])) as ArrayRef,
        ),
        (
            "x1",
            Arc::new(Float32Array::from(vec![2.0, 2.5, 3.0, 3.5])) as ArrayRef,
        ),
    ])?)
}

/// One zero-copy tensor per column, and one column on its own.
fn record_batch_to_tensors(batch: &RecordBatch) -> Result<()> {
    for (name, tensor) in table_to_tensors(&Table::from(batch), ColumnTensorOptions::default())? {
        assert_eq!(tensor.shape(), &[4], "{name}");
        let column = batch.column(batch.schema().index_of(&name)?);
        assert!(shares_memory(&tensor, column.as_ref()), "{name} is a view");
    }
    let x0 = batch.column(batch.schema().index_of("x0")?);
    let tensor = array_to_tensor(x0.as_ref(), ArrayToTensorOptions::default())?;
    assert_eq!(tensor.as_slice::<f32>()?, &[0.0, 0.5, 1.0, 1.5]);
    println!("record batch: {} columns as tensors", batch.num_columns());
    Ok(())
}

/// The features as one `(rows, 2)` tensor, row-major: a copy with PyArrow's type promotion.
fn table_to_one_tensor(batch: &RecordBatch) -> Result<()> {
    let features = batch.project(&[1, 2])?;
    let tensor = table_to_tensor(&Table::from(&features), TableToTensorOptions::default())?;
    assert_eq!(tensor.shape(), &[4, 2]);
    assert_eq!(tensor.dtype(), DType::Float32);
    assert_eq!(tensor.get::<f32>(&[3, 1])?, 3.5);
    println!("table: one tensor of shape {:?}", tensor.shape());
    Ok(())
}

/// A tensor exported as a `DLManagedTensorVersioned` pointer, as a C consumer receives it, and
/// imported back: the same memory both ways.
fn dlpack_out_and_in() -> Result<()> {
    let tensor = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], vec![2, 3])?;
    let raw = tensor
        .to_dlpack_versioned(ExportOptions::default())?
        .into_raw();
    // ... a C library reads `raw` and hands ownership back ...
    // SAFETY: `raw` comes from `into_raw` just above: this code owns it, its deleter may run on
    // any thread, and its shape, strides and data stay valid until the deleter runs.
    let imported = unsafe { Tensor::from_raw_versioned(raw) }?;
    assert!(imported.shares_memory(&tensor));
    assert_eq!(imported.get::<i32>(&[1, 2])?, 6);
    println!("dlpack: out and back in, {:?}", imported.shape());
    Ok(())
}

/// Eight 2x2 "images" as an `arrow.fixed_shape_tensor` column beside an id.
fn image_batch() -> Result<RecordBatch> {
    let images = Tensor::from_vec((0..32).map(|v| v as f32).collect(), vec![8, 2, 2])?;
    let column = FixedShapeTensorArray::from_tensor(&images, TensorToArrayOptions::default())?;
    let (field, array) = column.into_field_and_array("image");
    let ids: ArrayRef = Arc::new(Int64Array::from((0..8).collect::<Vec<i64>>()));
    let schema = Schema::new(vec![
        Field::new("id", ids.data_type().clone(), false),
        field,
    ]);
    Ok(RecordBatch::try_new(Arc::new(schema), vec![ids, array])?)
}

/// `batch` written to a Parquet file of row groups of 2 rows.
fn write_parquet(path: &Path, batch: &RecordBatch) -> std::result::Result<(), Failure> {
    let properties = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(2))
        .build();
    let file = std::fs::File::create(path)?;
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(())
}

/// The Parquet file loaded back in shuffled batches of 3: every id once, and each image still
/// the image of its id.
fn load_shuffled(path: &Path) -> Result<()> {
    let spec = BatchSpec::new(3).columns(["id", "image"]).shuffle(42);
    let mut seen = Vec::new();
    for batch in batches(Source::from_paths([path])?, spec)? {
        let batch = batch?;
        let ids = batch.tensor("id")?;
        let images = &batch["image"];
        assert_eq!(images.shape()[1..], [2, 2]);
        for (row, id) in ids.iter::<i64>()?.enumerate() {
            assert_eq!(images.get::<f32>(&[row, 1, 0])?, (id * 4 + 2) as f32);
            seen.push(id);
        }
    }
    assert_ne!(seen, (0..8).collect::<Vec<_>>(), "the order is shuffled");
    seen.sort_unstable();
    assert_eq!(seen, (0..8).collect::<Vec<_>>());
    println!("loader: 8 rows back from parquet, shuffled");
    Ok(())
}

/// Mistakes a user makes, and what each says: every error prints its own level, and its causes
/// follow through `source()`.
fn mistakes(batch: &RecordBatch, path: &Path) -> Result<()> {
    let wrong_column = batches(
        Source::from_paths([path])?,
        BatchSpec::new(3).columns(["idd"]),
    );
    let error = wrong_column
        .err()
        .ok_or_else(|| invalid("a missing column was accepted"))?;
    assert!(matches!(error, Error::MissingColumn { .. }));
    report("a column that is not there", &error);

    let error = batches(Source::from_paths([path])?, BatchSpec::new(0))
        .err()
        .ok_or_else(|| invalid("a batch size of 0 was accepted"))?;
    report("a batch size of 0", &error);

    let error = Source::from_paths(["data.csv"])
        .err()
        .ok_or_else(|| invalid("csv accepted"))?;
    report("a file that is not Arrow or Parquet", &error);

    let missing = path.with_file_name("missing.parquet");
    // Paths are looked up (directories listed, globs matched) when the source is made.
    let error = Source::from_paths([&missing])
        .err()
        .ok_or_else(|| invalid("a missing file was accepted"))?;
    assert!(error.source().is_some(), "the OS error is the cause");
    report("a file that is not there", &error);

    let mut loader = batches(
        Source::from_paths([path])?,
        BatchSpec::new(3).columns(["id"]),
    )?;
    let first = loader.next().ok_or_else(|| invalid("no batch"))??;
    let error = first
        .tensor("ids")
        .err()
        .ok_or_else(|| invalid("a typo found a tensor"))?;
    report("a tensor name with a typo", &error);

    let ids = first.tensor("id")?;
    let error = ids
        .as_slice::<i32>()
        .err()
        .ok_or_else(|| invalid("i64 read as i32"))?;
    report("int64 values read as i32", &Error::from(error));

    let with_nulls = Float32Array::from(vec![Some(1.0), None]);
    let error = array_to_tensor(&with_nulls, ArrayToTensorOptions::default())
        .err()
        .ok_or_else(|| invalid("nulls were accepted"))?;
    report("an array with nulls", &Error::from(error));

    let id = batch.column(batch.schema().index_of("id")?);
    let columns = [id.clone()];
    let error = Table::try_from_columns(&["id", "x0"], &columns)
        .err()
        .ok_or_else(|| invalid("two names for one column were accepted"))?;
    report("two names for one column", &Error::from(error));
    Ok(())
}

/// Prints `error` and its causes, one per line, as a chain printer (`anyhow`'s `{:#}`) does.
fn report(mistake: &str, error: &Error) {
    println!("{mistake}:\n  {error}");
    let mut cause = error.source();
    while let Some(inner) = cause {
        println!("  caused by: {inner}");
        cause = inner.source();
    }
}

/// An error for a mistake that was not refused: the example's own assertion, as a loader error.
fn invalid(what: &str) -> Error {
    Error::InvalidSpec {
        reason: format!("expected an error: {what}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_step_passes() {
        super::main().unwrap();
    }
}
