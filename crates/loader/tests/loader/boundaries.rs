//! Exact batch sizes whatever the record-batch boundaries, views inside one record batch and
//! one copy across several, over every kind of source.

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_dlpack_loader::{BatchSpec, Source};

use crate::data::{
    collect, ids, reader, sizes, spec, table, write_ipc, write_parquet, write_stream,
};

const ODD_SIZES: &[usize] = &[7, 3, 11, 1, 13];

#[test]
fn batches_are_exact_across_record_batches_of_odd_sizes() {
    let batches = collect(reader(table(ODD_SIZES)), spec(8, &["id"]));
    assert_eq!(sizes(&batches), [8, 8, 8, 8, 3]);
    assert_eq!(ids(&batches), (0..35).collect::<Vec<_>>());
}

#[test]
fn drop_last_drops_the_short_remainder() {
    let spec = BatchSpec {
        drop_last: true,
        ..spec(8, &["id"])
    };
    let batches = collect(reader(table(ODD_SIZES)), spec);
    assert_eq!(sizes(&batches), [8, 8, 8, 8]);
    assert_eq!(ids(&batches), (0..32).collect::<Vec<_>>());
}

#[test]
fn batch_larger_than_the_source_gives_one_short_batch() {
    let batches = collect(reader(table(ODD_SIZES)), spec(100, &["id"]));
    assert_eq!(sizes(&batches), [35]);
}

#[test]
fn every_file_source_gives_the_same_rows_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(ODD_SIZES);
    let sources = [
        Source::IpcFiles(vec![write_ipc(&dir.path().join("t.arrow"), &data)]),
        Source::IpcStreams(vec![write_stream(&dir.path().join("t.arrows"), &data)]),
        Source::ParquetFiles(vec![write_parquet(&dir.path().join("t.parquet"), &data, 6)]),
    ];
    for source in sources {
        let batches = collect(source, spec(8, &["id", "x"]));
        assert_eq!(sizes(&batches), [8, 8, 8, 8, 3]);
        assert_eq!(ids(&batches), (0..35).collect::<Vec<_>>());
    }
}

#[test]
fn row_counts_are_known_for_ipc_and_parquet_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(ODD_SIZES);
    let ipc = write_ipc(&dir.path().join("t.arrow"), &data);
    let loader =
        arrow_dlpack_loader::batches(Source::IpcFiles(vec![ipc]), spec(8, &["id"])).unwrap();
    assert_eq!((loader.num_rows(), loader.len()), (Some(35), Some(5)));
    assert_eq!(loader.size_hint(), (0, Some(5)));
    let parquet = write_parquet(&dir.path().join("t.parquet"), &data, 6);
    let spec = BatchSpec {
        drop_last: true,
        ..spec(8, &["id"])
    };
    let loader = arrow_dlpack_loader::batches(Source::ParquetFiles(vec![parquet]), spec).unwrap();
    assert_eq!((loader.num_rows(), loader.len()), (Some(35), Some(4)));
    assert_eq!(loader.count(), 4);
    let loader =
        arrow_dlpack_loader::batches(reader(table(ODD_SIZES)), BatchSpec::default()).unwrap();
    assert_eq!((loader.num_rows(), loader.len()), (None, None));
}

#[test]
fn a_batch_inside_one_record_batch_is_a_view_of_its_memory() {
    let data = table(&[20, 20]);
    let column = data[0].column(0).as_primitive::<Int64Type>().clone();
    let base = column.values().as_ptr();
    let batches = collect(reader(data), spec(5, &["id", "emb"]));
    for (i, batch) in batches[..4].iter().enumerate() {
        let tensor = batch.get("id").unwrap();
        // SAFETY: `i * 5` is within the 20 values of the column, which `column` keeps alive.
        let expected = unsafe { base.add(i * 5) };
        assert_eq!(tensor.data_ptr(), expected.cast::<u8>(), "batch {i}");
        assert!(tensor.is_read_only());
    }
}

#[test]
fn a_batch_across_record_batches_is_one_fresh_writable_copy() {
    let data = table(&[3, 3]);
    let first = data[0]
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .as_ptr() as usize;
    let second = data[1]
        .column(0)
        .as_primitive::<Int64Type>()
        .values()
        .as_ptr() as usize;
    let batches = collect(reader(data), spec(4, &["id", "emb"]));
    let tensor = batches[0].get("id").unwrap();
    let ptr = tensor.data_ptr() as usize;
    assert!(ptr.abs_diff(first) >= 24 && ptr.abs_diff(second) >= 24);
    assert!(!tensor.is_read_only());
    assert!(tensor.is_row_major());
    assert_eq!(crate::data::values::<i64>(tensor), [0, 1, 2, 3]);
    let emb = batches[0].get("emb").unwrap();
    assert_eq!(emb.shape(), &[4, 2, 3]);
    assert_eq!(
        crate::data::values::<f32>(emb)[6..12],
        [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    );
}

#[test]
fn ipc_file_batches_are_views_of_the_memory_map() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_ipc(&dir.path().join("t.arrow"), &table(&[40]));
    let batches = collect(Source::IpcFiles(vec![path]), spec(8, &["id", "x"]));
    assert_eq!(batches.len(), 5);
    // Consecutive views of one record batch lie 8 rows of 8 bytes apart in one mapped buffer.
    let pointers: Vec<usize> = batches
        .iter()
        .map(|b| b.get("id").unwrap().data_ptr() as usize)
        .collect();
    for pair in pointers.windows(2) {
        assert_eq!(pair[1] - pair[0], 64);
    }
    for batch in &batches {
        let id = batch.get("id").unwrap();
        assert!(id.is_read_only());
        assert_eq!(
            id.buffer().len(),
            batches[0].get("id").unwrap().buffer().len()
        );
    }
    assert_eq!(ids(&batches), (0..40).collect::<Vec<_>>());
}
