//! The options of the spec, declared once: the table agrees with `Default`, options are set and
//! read by name, sequences are built with `arrow_dlpack`'s pad values and sides, modes and sides
//! parse their names; `columns` tells "every column" from "no column"; `outline` checks a
//! source without reading data; `len` counts the batches left.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_dlpack_loader::{
    BatchSpec, ColumnGroup, Error, LoaderState, OptionDecl, OptionScope, OptionType, OptionValue,
    PadValue, Sequence, SequenceMode, Side, Source, batches, outline,
};

use crate::data::{chain, collect, reader, spec, table, write_parquet};

#[test]
fn every_option_is_declared_with_the_default_of_default() {
    let default = BatchSpec::default();
    let names: Vec<&str> = BatchSpec::OPTIONS
        .iter()
        .map(|option| option.name)
        .collect();
    assert_eq!(
        names,
        [
            "batch_size",
            "drop_last",
            "columns",
            "groups",
            "masks",
            "allow_nulls",
            "null_to_nan",
            "row_major",
            "shuffle",
            "seed",
            "buffer_size",
            "shard_index",
            "num_shards",
            "num_ranks",
            "prefetch",
            "decode_threads",
            "cache_dir",
            "cache_size",
            "writable",
            "sequences",
            "images",
            "image_root",
            "max_tokens",
            "bucket_by_length",
            "epoch",
            "state",
        ]
    );
    for option in BatchSpec::OPTIONS {
        let value = default.option(option.name).expect("a declared option");
        assert_eq!(value, option.default_value(), "{}", option.name);
        assert!(option.option_type.holds(&value), "{option:?}");
        assert!(
            option.summary.ends_with('.') && !option.summary.starts_with(' '),
            "{option:?}"
        );
    }
    assert_eq!(
        BatchSpec::OPTIONS[0].default_value(),
        OptionValue::Usize(1024)
    );
    assert_eq!(
        OptionDecl::find("columns").map(|option| option.default_value()),
        Some(OptionValue::Columns(None))
    );
    assert_eq!(
        OptionDecl::find("seed").unwrap().option_type,
        OptionType::Seed
    );
    assert_eq!(
        OptionDecl::find("epoch").unwrap().option_type,
        OptionType::U64
    );
    assert!(OptionDecl::find("batchsize").is_none());
    assert_eq!(
        OptionDecl::find("images").unwrap().option_type,
        OptionType::Images
    );
    assert_eq!(
        OptionDecl::find("image_root").map(|option| option.default_value()),
        Some(OptionValue::OptionalText(None))
    );
}

#[test]
fn the_batch_scope_is_what_collate_reads() {
    let batch: Vec<&str> = BatchSpec::OPTIONS
        .iter()
        .filter(|option| option.scope == OptionScope::Batch)
        .map(|option| option.name)
        .collect();
    assert_eq!(
        batch,
        [
            "columns",
            "groups",
            "masks",
            "allow_nulls",
            "null_to_nan",
            "row_major",
            "writable",
            "sequences",
            "images",
            "image_root"
        ]
    );
}

#[test]
fn an_option_is_set_and_read_by_name() {
    let mut spec = BatchSpec::default();
    spec.set_option("batch_size", OptionValue::Usize(7))
        .unwrap();
    spec.set_option("seed", OptionValue::U64(u64::MAX)).unwrap();
    spec.set_option("columns", OptionValue::Columns(Some(vec![])))
        .unwrap();
    spec.set_option(
        "groups",
        OptionValue::Groups(vec![ColumnGroup::new("xy", ["x", "y"])]),
    )
    .unwrap();
    spec.set_option(
        "sequences",
        OptionValue::Sequences(vec![Sequence::pack("tokens")]),
    )
    .unwrap();
    spec.set_option("max_tokens", OptionValue::OptionalUsize(Some(64)))
        .unwrap();
    assert_eq!(
        spec,
        BatchSpec {
            seed: u64::MAX,
            columns: Some(vec![]),
            max_tokens: Some(64),
            ..BatchSpec::new(7)
                .group("xy", ["x", "y"])
                .sequence(Sequence::pack("tokens"))
        }
    );
    assert_eq!(spec.option("seed"), Some(OptionValue::U64(u64::MAX)));
    assert_eq!(spec.option("nope"), None);
    let state: LoaderState = batches(reader(table(&[3])), BatchSpec::new(2))
        .unwrap()
        .state();
    spec.set_option("state", OptionValue::State(Some(Box::new(state.clone()))))
        .unwrap();
    assert_eq!(spec.state, Some(state));
}

#[test]
fn set_option_refuses_an_unknown_name_and_a_value_of_another_type() {
    let mut spec = BatchSpec::default();
    let unknown = spec
        .set_option("batchsize", OptionValue::Usize(2))
        .unwrap_err();
    assert!(matches!(unknown, Error::InvalidSpec { .. }));
    assert!(
        unknown
            .to_string()
            .starts_with("invalid batch spec: \"batchsize\" is not an option of BatchSpec; expected one of [\"batch_size\", "),
        "{unknown}"
    );
    let wrong = spec
        .set_option("shuffle", OptionValue::Usize(1))
        .unwrap_err();
    assert_eq!(
        wrong.to_string(),
        "invalid batch spec: option shuffle takes a value of OptionType::Bool; found \
         OptionValue::Usize"
    );
    assert_eq!(spec, BatchSpec::default());
}

#[test]
fn a_sequence_takes_arrow_dlpacks_pad_value_and_has_a_builder() {
    let literal = Sequence {
        pad_value: arrow_dlpack::PadValue::Int(-1),
        max_length: Some(512),
        padding_side: arrow_dlpack::Side::Left,
        ..Sequence::new("ids", SequenceMode::Pad)
    };
    let built = Sequence::pad("ids")
        .max_length(512)
        .pad_value(PadValue::Int(-1))
        .padding_side(Side::Left);
    assert_eq!(built, literal);
    assert_eq!(
        Sequence::pad("x")
            .pad_to_multiple_of(8)
            .truncation_side(Side::Left),
        Sequence {
            pad_to_multiple_of: Some(8),
            truncation_side: Side::Left,
            ..Sequence::pad("x")
        }
    );
    assert_eq!(Sequence::jagged("x").mode, SequenceMode::Jagged);
    // A NaN pad value equals itself, so that a spec does.
    let nan = Sequence::pad("x").pad_value(PadValue::Float(f64::NAN));
    assert_eq!(nan, nan.clone());
    assert_ne!(nan, Sequence::pad("x").pad_value(PadValue::Float(0.0)));
}

#[test]
fn sequence_modes_and_sides_parse_their_names() {
    for &mode in SequenceMode::ALL {
        assert_eq!(mode.as_str().parse::<SequenceMode>().unwrap(), mode);
        assert_eq!(mode.to_string(), mode.as_str());
    }
    assert_eq!(
        SequenceMode::names(),
        "\"pad\", \"pack\", \"jagged\" or \"concat\""
    );
    let error = "Pad".parse::<SequenceMode>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid batch spec: unknown sequence mode \"Pad\"; expected \"pad\", \"pack\", \
         \"jagged\" or \"concat\""
    );
    for side in [Side::Left, Side::Right] {
        assert_eq!(side.as_str().parse::<Side>().unwrap(), side);
        assert_eq!(side.to_string(), side.as_str());
    }
    assert_eq!(
        "middle".parse::<Side>().unwrap_err().to_string(),
        "invalid padding: unknown side \"middle\"; expected \"left\" or \"right\""
    );
}

/// `id` int64, `tokens` list<int32> and `name` a string column: three rows.
fn with_strings() -> RecordBatch {
    let tokens = ListArray::from_iter_primitive::<Int32Type, _, _>([
        Some(vec![Some(1), Some(2)]),
        Some(vec![Some(3)]),
        Some(vec![]),
    ]);
    RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![0, 1, 2])) as ArrayRef),
        ("tokens", Arc::new(tokens) as ArrayRef),
        (
            "name",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
        ),
    ])
    .unwrap()
}

/// The sorted names of the tensors of the first batch of `spec` over `batch`, masks as
/// `"<column>_mask"`.
fn names(batch: RecordBatch, spec: BatchSpec) -> Vec<String> {
    let first = collect(reader(vec![batch]), spec).remove(0);
    let masks = first.masks().iter().map(|(name, _)| format!("{name}_mask"));
    let mut names: Vec<String> = first.names().map(str::to_string).chain(masks).collect();
    names.sort();
    names
}

#[test]
fn columns_none_loads_every_column_not_in_a_group() {
    let spec = BatchSpec::new(2).group("xs", ["x", "small"]);
    let mut loaded = names(table(&[4]).remove(0), spec);
    loaded.retain(|name| name != "emb");
    assert_eq!(loaded, ["flag", "id", "xs"]);
}

#[test]
fn an_empty_columns_list_loads_only_what_groups_masks_and_sequences_name() {
    let spec = BatchSpec::new(2)
        .columns(Vec::<String>::new())
        .sequence(Sequence::pad("tokens"))
        .masks(["id"]);
    assert_eq!(
        names(with_strings(), spec),
        ["id_mask", "tokens", "tokens_lengths"]
    );
    let only_groups = BatchSpec::new(2)
        .columns(Vec::<String>::new())
        .group("g", ["id"]);
    assert_eq!(names(with_strings(), only_groups), ["g"]);
}

#[test]
fn a_string_column_loaded_as_one_of_every_column_names_the_option_that_selects_columns() {
    let only_sequences = BatchSpec::new(2).sequence(Sequence::pad("tokens"));
    let error = batches(reader(vec![with_strings()]), only_sequences)
        .err()
        .expect("the string column is refused");
    assert!(matches!(
        error,
        Error::UnsupportedColumn {
            every_column: true,
            ..
        }
    ));
    assert_eq!(
        chain(&error),
        "cannot load column \"name\" of type Utf8; expected a numeric or boolean column, a \
         fixed-size list of numbers, or an arrow.fixed_shape_tensor column; it is loaded because \
         BatchSpec::columns is None, which loads every column not in a group: name the columns \
         to load with BatchSpec::columns"
    );
    // Named, the same column is refused without the hint.
    let named = batches(reader(vec![with_strings()]), spec(2, &["name"]))
        .err()
        .expect("the string column is refused");
    assert!(!named.to_string().contains("BatchSpec::columns"), "{named}");
}

#[test]
fn outline_checks_a_parquet_file_without_decoding_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("t.parquet"), &table(&[10]), 4);
    // The data pages are overwritten with garbage; the footer stays intact.
    let mut bytes = std::fs::read(&path).unwrap();
    let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap());
    let data_end = bytes.len() - 8 - footer as usize;
    bytes[4..data_end].fill(0xAB);
    std::fs::write(&path, &bytes).unwrap();
    let source = || Source::from_paths([&path]).unwrap();
    let found = outline(source(), &spec(4, &["id"])).unwrap();
    assert_eq!((found.num_rows, found.num_batches), (Some(10), Some(3)));
    let dropped = outline(source(), &spec(4, &["id"]).drop_last(true)).unwrap();
    assert_eq!(dropped.num_batches, Some(2));
    let missing = outline(source(), &spec(4, &["idd"])).unwrap_err();
    assert!(matches!(missing, Error::MissingColumn { .. }), "{missing}");
    let invalid = outline(source(), &spec(0, &["id"])).unwrap_err();
    assert_eq!(
        invalid.to_string(),
        "invalid batch spec: batch_size is 0; expected at least 1"
    );
    // Loading the same file does decode, and fails.
    let decoded: Result<Vec<_>, _> = batches(source(), spec(4, &["id"])).unwrap().collect();
    assert!(decoded.is_err());
}

#[test]
fn len_counts_the_batches_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_parquet(&dir.path().join("t.parquet"), &table(&[10]), 4);
    let mut loader = batches(Source::from_paths([&path]).unwrap(), spec(4, &["id"])).unwrap();
    assert_eq!((loader.len(), loader.num_batches()), (Some(3), Some(3)));
    loader.next().unwrap().unwrap();
    assert_eq!(loader.len(), Some(2));
    assert_eq!(loader.size_hint(), (0, Some(2)));
    loader.next().unwrap().unwrap();
    loader.next().unwrap().unwrap();
    assert_eq!(loader.len(), Some(0));
    assert!(loader.is_empty());
    assert!(loader.next().is_none());
    assert_eq!((loader.len(), loader.num_batches()), (Some(0), Some(3)));
    // A reader does not say its rows.
    let stream = batches(reader(table(&[10])), spec(4, &["id"])).unwrap();
    assert_eq!((stream.len(), stream.num_batches()), (None, None));
}

#[test]
fn batches_for_counts_by_rows_unless_batches_are_cut_by_tokens() {
    assert_eq!(BatchSpec::new(4).batches_for(0), Some(0));
    assert_eq!(BatchSpec::new(4).batches_for(8), Some(2));
    assert_eq!(BatchSpec::new(4).batches_for(9), Some(3));
    assert_eq!(
        BatchSpec::new(4)
            .sequence(Sequence::pad("t"))
            .max_tokens(16)
            .batches_for(9),
        None
    );
}
