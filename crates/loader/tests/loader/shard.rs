//! Sharding: the shards of a source are disjoint and together hold every row exactly once.

use arrow_dlpack_loader::{BatchSpec, Source};

use crate::data::{collect, ids, reader, spec, table, write_ipc, write_parquet};

fn shard(index: usize, count: usize, shuffle: bool) -> BatchSpec {
    BatchSpec {
        shard_index: index,
        num_shards: count,
        shuffle,
        seed: 3,
        buffer_size: 16,
        ..spec(4, &["id"])
    }
}

/// Checks that the shards of `make` are disjoint and complete over rows `0..rows`.
fn check_shards(make: &dyn Fn() -> Source, rows: i64, count: usize, shuffle: bool) {
    let mut all = Vec::new();
    for index in 0..count {
        let part = ids(&collect(make(), shard(index, count, shuffle)));
        assert!(!part.is_empty(), "shard {index} of {count} is empty");
        all.extend(part);
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (0..rows).collect::<Vec<_>>(),
        "{count} shards, shuffle {shuffle}"
    );
}

#[test]
fn two_and_four_shards_are_disjoint_and_complete_over_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = table(&[9, 9, 9, 9, 9, 9, 9, 5]);
    let ipc_a = write_ipc(&dir.path().join("a.arrow"), &data[..4]);
    let ipc_b = write_ipc(&dir.path().join("b.arrow"), &data[4..]);
    let parquet_a = write_parquet(&dir.path().join("a.parquet"), &data[..4], 7);
    let parquet_b = write_parquet(&dir.path().join("b.parquet"), &data[4..], 7);
    let ipc = move || Source::IpcFiles(vec![ipc_a.clone(), ipc_b.clone()]);
    let parquet = move || Source::ParquetFiles(vec![parquet_a.clone(), parquet_b.clone()]);
    for count in [2, 4] {
        for shuffle in [false, true] {
            check_shards(&ipc, 68, count, shuffle);
            check_shards(&parquet, 68, count, shuffle);
        }
    }
}

#[test]
fn shards_of_a_reader_are_dealt_by_record_batch() {
    for count in [2, 4] {
        check_shards(&|| reader(table(&[5, 6, 7, 8, 9])), 35, count, false);
    }
}
