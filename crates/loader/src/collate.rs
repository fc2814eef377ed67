//! [`collate`]: one batch of every row of some record batches, made on the calling thread, for
//! a caller that cuts batches itself (Ray Data's `collate_fn`, a sampler of its own).
//!
//! It is the loader's assembly without the loader's thread: the same outputs, views and copies
//! as a batch of [`batches`](crate::batches) over the same rows, for a fraction of the cost of
//! starting a loader per batch.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::assemble::writable;
use crate::assemble::{Piece, Run, assemble};
use crate::columns::{Columns, check_same_columns};
use crate::{BatchSpec, Result, TensorBatch};

/// The batch of every row of `batches` (record batches of `schema`), in order, made as
/// [`batches`](crate::batches) makes a batch of the same rows with the same `spec`.
///
/// `spec` says what the batch holds (`columns`, `groups`, `masks`, `sequences`, nulls,
/// `row_major`, `writable`); what cuts, orders and reads batches (`batch_size`, `drop_last`,
/// `shuffle`, `seed`, `buffer_size`, the shard, `prefetch`, `decode_threads`, `max_tokens`,
/// `bucket_by_length`) does not apply here.
/// The rows of one record batch are zero-copy views where the Arrow layer can share memory; rows
/// of several record batches are copied in one pass into one fresh allocation per tensor.
/// No rows give a batch of empty tensors of the right dtypes and cell shapes.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch};
/// use arrow_dlpack_loader::{BatchSpec, collate};
///
/// let batch = RecordBatch::try_from_iter([
///     ("x0", Arc::new(Float32Array::from(vec![0.0, 1.0, 2.0])) as ArrayRef),
///     ("x1", Arc::new(Float32Array::from(vec![3.0, 4.0, 5.0])) as ArrayRef),
///     ("label", Arc::new(Int64Array::from(vec![0, 1, 0])) as ArrayRef),
/// ])?;
/// let spec = BatchSpec::default().columns(["label"]).group("features", ["x0", "x1"]);
/// let tensors = collate(batch.schema(), [batch.slice(0, 2), batch.slice(2, 1)], &spec)?;
/// assert_eq!(tensors.num_rows(), 3);
/// assert_eq!(tensors.tensor("features")?.shape(), &[3, 2]);
/// # Ok::<(), arrow_dlpack_loader::Error>(())
/// ```
///
/// # Errors
///
/// What [`batches`](crate::batches) refuses for the same spec and rows: an invalid spec, a
/// missing column, a column without a tensor layout, a record batch whose columns differ from
/// `schema`'s, nulls that are not allowed.
pub fn collate(
    schema: SchemaRef,
    batches: impl IntoIterator<Item = RecordBatch>,
    spec: &BatchSpec,
) -> Result<TensorBatch> {
    spec.validate()?;
    let mut batches = batches.into_iter().peekable();
    // The columns are resolved against the first record batch, whose arrays exist already, or
    // against an empty one when there is none.
    let columns = match batches.peek() {
        Some(first) => {
            if !Arc::ptr_eq(first.schema_ref(), &schema) {
                check_same_columns(first.schema_ref(), &schema, || "record batch 0".to_string())?;
            }
            Columns::resolve(spec, first)?
        }
        None => Columns::resolve(spec, &RecordBatch::new_empty(schema.clone()))?,
    };
    let mut pieces = Vec::new();
    let mut runs = Vec::new();
    for (index, batch) in batches.enumerate() {
        columns.check_schema(&batch, || format!("record batch {index}"))?;
        if batch.num_rows() == 0 {
            continue;
        }
        runs.push(Run {
            piece: pieces.len(),
            start: 0,
            len: batch.num_rows(),
        });
        pieces.push(Piece::new(batch));
    }
    if runs.is_empty() {
        // No rows: the views of an empty record batch, which have the dtypes and cell shapes.
        runs.push(Run {
            piece: 0,
            start: 0,
            len: 0,
        });
        pieces.push(Piece::new(RecordBatch::new_empty(schema)));
    }
    let batch = assemble(spec, &columns, &mut pieces, &runs)?;
    writable::hand_out(batch, spec.writable)
}
