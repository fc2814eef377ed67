//! Shuffling: the same seed gives the same order, another seed another, and every row comes
//! exactly once.

use arrow_dlpack_loader::{BatchSpec, Source};

use crate::data::{collect, ids, sizes, spec, table, write_ipc, write_parquet};

fn shuffled(seed: u64) -> BatchSpec {
    BatchSpec {
        shuffle: true,
        seed,
        buffer_size: 20,
        ..spec(8, &["id", "emb", "flag"])
    }
}

fn sources(dir: &std::path::Path) -> Vec<Box<dyn Fn() -> Source>> {
    let data = table(&[10, 10, 10, 10, 10, 10, 10, 7]);
    let ipc = write_ipc(&dir.join("t.arrow"), &data);
    let parquet = write_parquet(&dir.join("t.parquet"), &data, 9);
    vec![
        Box::new(move || Source::IpcFiles(vec![ipc.clone()])),
        Box::new(move || Source::ParquetFiles(vec![parquet.clone()])),
    ]
}

#[test]
fn the_same_seed_gives_the_same_order_and_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    for source in sources(dir.path()) {
        let first = collect(source(), shuffled(7));
        let again = collect(source(), shuffled(7));
        assert_eq!(ids(&first), ids(&again));
        assert_ne!(ids(&first), (0..77).collect::<Vec<_>>());
        assert_eq!(sizes(&first), [8, 8, 8, 8, 8, 8, 8, 8, 8, 5]);
        let mut all = ids(&first);
        all.sort_unstable();
        assert_eq!(all, (0..77).collect::<Vec<_>>());
        // The other columns follow their rows.
        for batch in &first {
            let rows = crate::data::values::<i64>(batch.get("id").unwrap());
            let emb = crate::data::values::<f32>(batch.get("emb").unwrap());
            let flags = crate::data::values::<u8>(batch.get("flag").unwrap());
            for (k, &row) in rows.iter().enumerate() {
                assert_eq!(emb[k * 6 + 5], (row * 10 + 5) as f32);
                assert_eq!(flags[k], u8::from(row % 3 == 0));
            }
        }
    }
}

#[test]
fn another_seed_gives_another_order() {
    let dir = tempfile::tempdir().unwrap();
    for source in sources(dir.path()) {
        assert_ne!(
            ids(&collect(source(), shuffled(1))),
            ids(&collect(source(), shuffled(2)))
        );
    }
}
