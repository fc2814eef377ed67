//! `collate`: one batch of every row of some record batches, on the calling thread, equal to the
//! batch that `batches` makes of the same rows.

use arrow_dlpack_loader::{BatchSpec, Error, collate};
use arrow_dlpack_tensor::Tensor;

use crate::data::{collect, reader, schema, spec, table, values};

/// A group, a single column, a boolean column and a fixed-shape tensor column.
fn full_spec(batch_size: usize) -> BatchSpec {
    spec(batch_size, &["id", "flag", "emb"]).group("features", ["x", "small"])
}

/// Each tensor's name, shape, dtype and values (its bytes in row-major order).
fn described(tensors: &[(String, Tensor)]) -> Vec<(String, Vec<usize>, String, Vec<u8>)> {
    tensors
        .iter()
        .map(|(name, tensor)| {
            let dense = tensor.to_contiguous().unwrap();
            let size = dense.dtype().size();
            let from = dense.offset() * size;
            let bytes = dense.buffer().as_slice()[from..from + dense.len() * size].to_vec();
            let dtype = format!("{:?}", tensor.dtype());
            (name.clone(), tensor.shape().to_vec(), dtype, bytes)
        })
        .collect()
}

#[test]
fn collate_gives_the_batch_that_batches_gives_across_record_batches() {
    let pieces = table(&[3, 5, 2]);
    let made = collate(schema(), pieces.clone(), &full_spec(1)).unwrap();
    assert_eq!(made.num_rows(), 10);
    let expected = collect(reader(pieces), full_spec(10));
    assert_eq!(expected.len(), 1);
    assert_eq!(described(made.tensors()), described(expected[0].tensors()));
    assert_eq!(values::<i64>(&made["id"]), (0..10).collect::<Vec<_>>());
    // Across record batches the tensors are fresh copies, writable.
    assert!(!made["id"].is_read_only());
}

#[test]
fn collate_of_one_record_batch_views_its_memory() {
    let pieces = table(&[6]);
    let made = collate(schema(), pieces.clone(), &spec(1, &["id"])).unwrap();
    assert!(made["id"].is_read_only());
    let column = pieces[0].column(0).to_data();
    assert_eq!(made["id"].buffer().as_ptr(), column.buffers()[0].as_ptr());
    let writable = collate(schema(), pieces, &spec(1, &["id"]).writable(true)).unwrap();
    assert!(!writable["id"].is_read_only());
    assert_eq!(values::<i64>(&writable["id"]), (0..6).collect::<Vec<_>>());
}

#[test]
fn collate_of_no_rows_gives_empty_tensors_of_the_right_shapes() {
    let made = collate(schema(), table(&[0]), &full_spec(1)).unwrap();
    assert_eq!(made.num_rows(), 0);
    assert_eq!(made.tensor("features").unwrap().shape(), &[0, 2]);
    assert_eq!(made.tensor("emb").unwrap().shape(), &[0, 2, 3]);
    let none = collate(schema(), Vec::new(), &full_spec(1)).unwrap();
    assert_eq!(none.tensor("id").unwrap().shape(), &[0]);
}

#[test]
fn collate_refuses_a_missing_column_and_a_record_batch_of_another_schema() {
    let error = collate(schema(), table(&[2]), &spec(1, &["nope"])).unwrap_err();
    assert!(
        matches!(error, Error::MissingColumn { ref column, .. } if column == "nope"),
        "{error}"
    );
    let other = table(&[2])[0].project(&[0, 1]).unwrap();
    let error = collate(schema(), vec![other], &spec(1, &["id"])).unwrap_err();
    assert!(matches!(error, Error::SchemaMismatch { .. }), "{error}");
    let error = collate(schema(), table(&[2]), &spec(0, &["id"])).unwrap_err();
    assert!(matches!(error, Error::InvalidSpec { .. }), "{error}");
}
