//! Unit tests of the state's row ranges, dealing and JSON.

use std::collections::BTreeMap;

use super::ranges::{drop_rows, item_len, join_ranges, unit_ranges, unit_row};
use super::*;

#[test]
fn ranges_drop_join_and_index_rows() {
    assert_eq!(drop_rows(&[[0, 4], [10, 12]], 5), vec![[11, 12]]);
    assert_eq!(drop_rows(&[[0, u64::MAX]], 3), vec![[3, u64::MAX]]);
    assert_eq!(
        join_ranges(vec![[5, 6], [0, 2], [2, 3], [6, 9]]),
        vec![[0, 3], [5, 9]]
    );
    let item = Item {
        unit: 4,
        rows: Some(vec![[2, 4], [10, 13]]),
    };
    assert_eq!(
        (0..6).map(|row| unit_row(&item, row)).collect::<Vec<_>>(),
        [Some(2), Some(3), Some(10), Some(11), Some(12), None]
    );
    assert_eq!(item_len(&item), Some(5));
    assert_eq!(
        unit_ranges(&item, &[0, 1, 3, 5, 9]),
        (vec![[2, 4], [11, 12]], 2)
    );
}

#[test]
fn work_is_dealt_round_robin_listed_items_first() {
    let work = Work {
        items: vec![
            Item {
                unit: 1,
                rows: Some(vec![[3, 5]]),
            },
            Item {
                unit: 2,
                rows: None,
            },
        ],
        rest_from: 4,
        units: Some(7),
        unit_rows: None,
    };
    let units = |shard| {
        (0..)
            .map_while(|k| work.item(k, shard, 2))
            .map(|item| item.unit)
            .collect::<Vec<_>>()
    };
    assert_eq!(units(0), [1, 4, 6]);
    assert_eq!(units(1), [2, 5]);
    assert_eq!(work.shard_len(0, 2), Some(3));
    assert_eq!(work.shard_len(1, 2), Some(2));
}

#[test]
fn a_state_round_trips_through_json_and_unknown_keys_are_refused() {
    let state = LoaderState {
        version: STATE_VERSION,
        settings: settings(),
        epoch: 2,
        shard: Some([1, 2]),
        ranks: Some(1),
        work: Work::all(Some(3)),
        position: Some(Position::Window {
            rng: u64::MAX,
            carried: vec![[0, 1]],
            start: 1,
            sizes: vec![5],
            emitted: 1,
        }),
        concat: None,
    };
    let text = serde_json::to_string(&state).unwrap();
    assert_eq!(serde_json::from_str::<LoaderState>(&text).unwrap(), state);
    let extra = text.replacen("\"epoch\"", "\"extra\":1,\"epoch\"", 1);
    assert!(serde_json::from_str::<LoaderState>(&extra).is_err());
    let negative = text.replacen("\"epoch\":2", "\"epoch\":-2", 1);
    assert!(serde_json::from_str::<LoaderState>(&negative).is_err());
}

/// Settings of a shuffled Parquet source of one file.
pub(super) fn settings() -> Settings {
    Settings {
        source: SourceIdentity {
            kind: SourceKind::ParquetFiles,
            files: vec![FileIdentity {
                name: "t.parquet".to_string(),
                size: 1000,
                modified_ns: Some(1_700_000_000_000_000_000),
                e_tag: None,
                last_modified_ms: None,
                digest: Some("xxh3-128:00".to_string()),
            }],
            schema: None,
        },
        batch_size: 4,
        drop_last: false,
        columns: Some(vec!["id".to_string()]),
        groups: BTreeMap::new(),
        masks: Vec::new(),
        sequences: BTreeMap::from([(
            "tok".to_string(),
            SequenceSettings {
                mode: "pad".to_string(),
                max_length: None,
                pad_to_multiple_of: None,
                tokenizer: None,
                add_special_tokens: None,
                bos_token_id: None,
                eos_token_id: None,
                split_documents: None,
            },
        )]),
        shuffle: true,
        seed: 1,
        buffer_size: 8,
        max_tokens: None,
        bucket_by_length: false,
        images: Default::default(),
    }
}

#[test]
fn a_setting_that_differs_is_named_with_both_values() {
    let saved = settings();
    let mut given = settings();
    assert_eq!(saved.difference(&given), None);
    given.seed = 0;
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        "seed: saved 1, given 0"
    );
    // A state resumed with the shuffle switched: the switch is named, not its seed.
    given.shuffle = !saved.shuffle;
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        format!("shuffle: saved {}, given {}", saved.shuffle, given.shuffle)
    );
    let mut given = settings();
    given.sequences.get_mut("tok").unwrap().mode = "pack".to_string();
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        r#"sequences["tok"].mode: saved "pad", given "pack""#
    );
    let mut given = settings();
    given.groups.insert("xs".to_string(), vec!["a".to_string()]);
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        r#"groups["xs"]: saved absent, given ["a"]"#
    );
    let mut given = settings();
    given.columns = None;
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        r#"columns: saved ["id"], given null"#
    );
}

#[test]
fn a_file_is_told_by_size_digest_and_time_not_by_name() {
    let saved = settings();
    let mut given = settings();
    given.source.files[0].name = "moved.parquet".to_string();
    assert_eq!(saved.difference(&given), None);
    given.source.files[0].size = 990;
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        "t.parquet (given moved.parquet): size saved 1000, given 990"
    );
    let mut given = settings();
    given.source.files[0].digest = Some("xxh3-128:01".to_string());
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        r#"t.parquet: digest saved "xxh3-128:00", given "xxh3-128:01""#
    );
    let mut given = settings();
    given.source.files[0].modified_ns = Some(1);
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        "t.parquet: modified_ns saved 1700000000000000000, given 1 (the file was modified \
         since the state was saved, or copied without its modification time: a copy made with \
         cp -p, rsync -t or touch -r keeps it)"
    );
    // An object without a modification time, of the same size and footer: the same data.
    let mut given = settings();
    given.source.files[0].modified_ns = None;
    given.source.files[0].e_tag = Some("\"abc\"".to_string());
    assert_eq!(saved.difference(&given), None);
    let mut given = settings();
    given.source.kind = SourceKind::IpcFiles;
    assert_eq!(
        saved.difference(&given).unwrap().to_string(),
        r#"source.kind: saved "parquet_files", given "ipc_files""#
    );
}

#[test]
fn states_of_other_formats_are_refused_saying_what_to_do() {
    let state = LoaderState {
        version: STATE_VERSION,
        settings: settings(),
        epoch: 0,
        shard: None,
        ranks: None,
        work: Work::all(Some(3)),
        position: None,
        concat: None,
    };
    let text = serde_json::to_string(&state).unwrap();
    let older = text.replacen("\"version\":4", "\"version\":1", 1).replacen(
        "\"settings\"",
        "\"config\"",
        1,
    );
    let error = serde_json::from_str::<LoaderState>(&older)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("the state is of format version 1, saved by an older version"),
        "{error}"
    );
    let newer = text.replacen("\"version\":4", "\"version\":5,\"checksum\":1", 1);
    let error = serde_json::from_str::<LoaderState>(&newer)
        .unwrap_err()
        .to_string();
    assert!(error.contains("newer than this build reads (4)"), "{error}");
    let missing = text.replacen("\"version\":4,", "", 1);
    assert!(serde_json::from_str::<LoaderState>(&missing).is_err());
    // Format 2 is read, except in an epoch planned by rows, which format 3 cuts otherwise.
    let two = text.replacen("\"version\":4", "\"version\":2", 1);
    let read: LoaderState = serde_json::from_str(&two).unwrap();
    assert_eq!((read.version, read.work), (2, state.work.clone()));
    let mut planned = state.clone();
    planned.work.unit_rows = Some(vec![10, 10, 10]);
    let two =
        serde_json::to_string(&planned)
            .unwrap()
            .replacen("\"version\":4", "\"version\":2", 1);
    let error = serde_json::from_str::<LoaderState>(&two)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("the state is of format version 2, saved by an older version")
            && error.contains("planned by rows"),
        "{error}"
    );
}

#[test]
fn a_state_of_format_3_reads_as_one_rank_per_shard() {
    let mut state = LoaderState {
        version: STATE_VERSION,
        settings: settings(),
        epoch: 0,
        shard: Some([1, 4]),
        ranks: Some(2),
        work: Work::all(Some(3)),
        position: None,
        concat: None,
    };
    assert_eq!(state.layout_ranks().unwrap(), Some(2));
    let text = serde_json::to_string(&state).unwrap();
    assert!(text.contains("\"ranks\":2"), "{text}");
    let three = text
        .replacen("\"version\":4", "\"version\":3", 1)
        .replacen(",\"ranks\":2", "", 1);
    let read: LoaderState = serde_json::from_str(&three).unwrap();
    assert_eq!((read.version, read.ranks), (3, None));
    // A format 3 state with ranks is forged: format 3 never wrote them.
    let forged = text.replacen("\"version\":4", "\"version\":3", 1);
    let error = serde_json::from_str::<LoaderState>(&forged)
        .unwrap_err()
        .to_string();
    assert!(error.contains("format 3 does not record"), "{error}");
    assert_eq!(read.layout_ranks().unwrap(), Some(4));
    // A later state of a shard without its ranks is refused: a merge would replay another plan.
    for forged in [
        text.replacen(",\"ranks\":2", "", 1),
        text.replacen("\"ranks\":2", "\"ranks\":null", 1),
    ] {
        let error = serde_json::from_str::<LoaderState>(&forged)
            .unwrap_err()
            .to_string();
        assert!(error.contains("lacks the key \"ranks\""), "{error}");
    }
    // Ranks that do not divide the shards are refused, by name.
    state.ranks = Some(3);
    let error = state.layout_ranks().unwrap_err().to_string();
    assert!(
        error.contains("the state's ranks is 3; expected a divisor of its 4 shards"),
        "{error}"
    );
}
