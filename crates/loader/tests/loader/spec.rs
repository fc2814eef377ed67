//! Specs refused before any work: bounds of the numeric fields, output names claimed twice and
//! source columns that a name cannot tell apart, each error naming the field or the column.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch};
use arrow_dlpack_loader::{BatchSpec, MAX_DECODE_THREADS, MAX_PREFETCH, batches};
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

/// The error at the first batch of `batch` read with `spec`.
fn first_error(batch: RecordBatch, spec: BatchSpec) -> String {
    let result: Result<Vec<_>, _> = batches(reader(vec![batch]), spec).unwrap().collect();
    result.unwrap_err().to_string()
}

#[test]
fn a_mask_named_like_a_source_column_is_refused_when_every_column_is_loaded() {
    let spec = BatchSpec {
        masks: vec!["label".into()],
        ..BatchSpec::default()
    };
    let error = first_error(named(&["label", "label_mask"]), spec);
    assert!(
        error.contains("\"label_mask\" is claimed twice, by column \"label_mask\" (every column is loaded) and by the mask of \"label\" (masks)"),
        "{error}"
    );
}

#[test]
fn duplicate_source_columns_read_by_name_are_refused_naming_the_duplicate() {
    let error = first_error(named(&["a", "b", "a"]), spec(2, &["a"]));
    assert_eq!(
        error,
        "invalid batch spec: the source has 2 columns named \"a\"; a column read by name must \
         be unique, so rename the duplicates first"
    );
    let error = first_error(named(&["a", "a"]), BatchSpec::default());
    assert!(error.contains("2 columns named \"a\""), "{error}");
    // A duplicate that the spec does not read is no ambiguity.
    let batches = collect(reader(vec![named(&["a", "b", "a"])]), spec(2, &["b"]));
    assert_eq!(batches[0].get("b").unwrap().shape(), &[2]);
}
