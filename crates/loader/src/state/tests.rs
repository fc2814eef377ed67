//! Unit tests of the state's row ranges, dealing and JSON.

use super::merge::{drop_rows, join_ranges, unit_row};
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
        config: BTreeMap::from([("batch_size".to_string(), "4".to_string())]),
        epoch: 2,
        shard: Some([1, 2]),
        work: Work::all(Some(3)),
        position: Some(Position::Window {
            rng: u64::MAX,
            carried: vec![[0, 1]],
            start: 1,
            sizes: vec![5],
            emitted: 1,
        }),
    };
    let text = serde_json::to_string(&state).unwrap();
    assert_eq!(serde_json::from_str::<LoaderState>(&text).unwrap(), state);
    let extra = text.replacen("\"epoch\"", "\"extra\":1,\"epoch\"", 1);
    assert!(serde_json::from_str::<LoaderState>(&extra).is_err());
    let negative = text.replacen("\"epoch\":2", "\"epoch\":-2", 1);
    assert!(serde_json::from_str::<LoaderState>(&negative).is_err());
}
