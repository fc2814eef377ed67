//! Specs refused before any work: bounds of the numeric fields, output names claimed twice and
//! source columns that a name cannot tell apart, each error naming the field or the column.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_dlpack_loader::{
    BatchSpec, ColumnGroup, Error, MAX_DECODE_THREADS, MAX_PREFETCH, batches,
};
use arrow_schema::{DataType, Field, Schema};

use crate::data::{collect, ids, reader, spec, table};

/// The message of the error that `batches` returns for `spec` over a small table.
fn refusal(spec: BatchSpec) -> String {
    match batches(reader(table(&[3])), spec) {
        Ok(_) => panic!("the spec was accepted"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn numeric_fields_out_of_bounds_are_refused_naming_the_field() {
    let base = || spec(2, &["id"]);
    let cases = [
        (
            BatchSpec {
                prefetch: 0,
                ..base()
            },
            "prefetch is 0; expected at least 1",
        ),
        (
            BatchSpec {
                prefetch: MAX_PREFETCH + 1,
                ..base()
            },
            "prefetch is 1025; expected at most 1024",
        ),
        (
            BatchSpec {
                prefetch: usize::MAX,
                ..base()
            },
            "prefetch is 18446744073709551615; expected at most 1024",
        ),
        (
            BatchSpec {
                decode_threads: MAX_DECODE_THREADS + 1,
                ..base()
            },
            "decode_threads is 65; expected at most 64 (0 chooses the available parallelism)",
        ),
        (
            BatchSpec {
                buffer_size: 0,
                ..base()
            },
            "buffer_size is 0; expected at least 1",
        ),
        (
            BatchSpec {
                num_shards: 0,
                ..base()
            },
            "num_shards is 0; expected at least 1",
        ),
    ];
    for (spec, reason) in cases {
        assert_eq!(refusal(spec), format!("invalid batch spec: {reason}"));
    }
}

#[test]
fn the_bounds_themselves_are_accepted() {
    let spec = BatchSpec {
        prefetch: MAX_PREFETCH,
        decode_threads: MAX_DECODE_THREADS,
        buffer_size: 1,
        ..spec(2, &["id"])
    };
    assert_eq!(ids(&collect(reader(table(&[3, 2])), spec)), [0, 1, 2, 3, 4]);
}

#[test]
fn a_mask_that_takes_the_name_of_a_column_or_group_is_refused_naming_both() {
    let with_column = BatchSpec {
        masks: vec!["id".into()],
        ..spec(2, &["id", "id_mask"])
    };
    assert_eq!(
        refusal(with_column),
        "invalid batch spec: the output name \"id_mask\" is claimed twice, by column \
         \"id_mask\" and by the mask of \"id\" (masks); expected each column, group and mask \
         name once"
    );
    let twice = BatchSpec {
        masks: vec!["id".into(), "id".into()],
        ..spec(2, &["id"])
    };
    assert!(refusal(twice).contains("\"id_mask\" is claimed twice"));
}

/// One record batch whose columns are named `names`, each holding its position in every row.
fn named(names: &[&str]) -> RecordBatch {
    let fields: Vec<Field> = names
        .iter()
        .map(|name| Field::new(*name, DataType::Int64, false))
        .collect();
    let columns: Vec<ArrayRef> = (0..names.len() as i64)
        .map(|position| Arc::new(Int64Array::from(vec![position; 2])) as ArrayRef)
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

/// The error that planning `batch` with `spec` gives: the spec is checked against the source's
/// schema before any batch is read.
fn planning_error(batch: RecordBatch, spec: BatchSpec) -> String {
    match batches(reader(vec![batch]), spec) {
        Ok(_) => panic!("the spec was accepted"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn a_mask_named_like_a_source_column_is_refused_when_every_column_is_loaded() {
    let spec = BatchSpec {
        masks: vec!["label".into()],
        ..BatchSpec::default()
    };
    let error = planning_error(named(&["label", "label_mask"]), spec);
    assert!(
        error.contains("\"label_mask\" is claimed twice, by column \"label_mask\" (every column not in a group is loaded) and by the mask of \"label\" (masks)"),
        "{error}"
    );
}

#[test]
fn duplicate_source_columns_read_by_name_are_refused_naming_the_duplicate() {
    let error = planning_error(named(&["a", "b", "a"]), spec(2, &["a"]));
    assert_eq!(
        error,
        "invalid batch spec: the source has 2 columns named \"a\"; a column read by name must \
         be unique, so rename the duplicates first"
    );
    let error = planning_error(named(&["a", "a"]), BatchSpec::default());
    assert!(error.contains("2 columns named \"a\""), "{error}");
    // A duplicate that the spec does not read is no ambiguity.
    let batches = collect(reader(vec![named(&["a", "b", "a"])]), spec(2, &["b"]));
    assert_eq!(batches[0].get("b").unwrap().shape(), &[2]);
}

#[test]
fn the_builder_sets_what_a_struct_literal_sets() {
    let built = BatchSpec::new(64)
        .columns(["label"])
        .group("features", ["x0", "x1"])
        .masks(["label"])
        .drop_last(true)
        .allow_nulls(true)
        .null_to_nan(true)
        .row_major(false)
        .shuffle(7)
        .buffer_size(128)
        .shard(1, 3)
        .prefetch(4)
        .decode_threads(2)
        .writable(true);
    // Every field is named today; the update keeps the literal valid when the spec gains fields.
    #[allow(clippy::needless_update)]
    let literal = BatchSpec {
        batch_size: 64,
        drop_last: true,
        columns: Some(vec!["label".to_string()]),
        groups: vec![ColumnGroup::new("features", ["x0", "x1"])],
        masks: vec!["label".to_string()],
        allow_nulls: true,
        null_to_nan: true.into(),
        row_major: false,
        shuffle: true,
        seed: 7,
        buffer_size: 128,
        shard_index: 1,
        num_shards: 3,
        prefetch: 4,
        decode_threads: 2,
        writable: true,
        ..BatchSpec::default()
    };
    assert_eq!(built, literal);
    assert_eq!(
        BatchSpec::new(64),
        BatchSpec {
            batch_size: 64,
            ..BatchSpec::default()
        }
    );
}

#[test]
fn the_defaults_are_those_the_field_docs_state() {
    let spec = BatchSpec::default();
    assert_eq!(spec.batch_size, 1024);
    assert!(!spec.drop_last);
    assert!(spec.columns.is_none() && spec.groups.is_empty() && spec.masks.is_empty());
    assert!(!spec.allow_nulls && !spec.null_to_nan.is_on());
    assert!(spec.row_major);
    assert!(!spec.shuffle);
    assert_eq!(spec.seed, 0);
    assert_eq!(spec.buffer_size, 65_536);
    assert_eq!((spec.shard_index, spec.num_shards), (0, 1));
    assert_eq!(spec.prefetch, 2);
    assert_eq!(spec.decode_threads, 0);
    assert!(!spec.writable);
}

#[test]
fn a_batch_is_read_by_name_with_an_error_that_names_its_tensors() {
    let batch = collect(reader(vec![named(&["a", "b"])]), spec(2, &["a", "b"])).remove(0);
    assert_eq!(batch["b"].shape(), &[2]);
    assert_eq!(batch.tensor("a").unwrap().shape(), &[2]);
    let error = batch.tensor("c").unwrap_err();
    assert!(matches!(error, Error::MissingTensor { .. }));
    assert_eq!(
        error.to_string(),
        "the batch has no tensor named \"c\"; expected one of [\"a\", \"b\"]"
    );
}

#[test]
#[should_panic(expected = "the batch has no tensor named \"c\"; expected one of [\"a\"]")]
fn indexing_a_batch_by_a_missing_name_panics_naming_its_tensors() {
    let batch = collect(reader(vec![named(&["a"])]), spec(2, &["a"])).remove(0);
    let _ = &batch["c"];
}
