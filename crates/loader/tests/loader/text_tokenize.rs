//! Tokenizing text columns ([`tokenize_column`]) and sources into files
//! ([`tokenize_to_file`]) with a small word-level tokenizer written here; the Python tests hold
//! the ids against the Python package `tokenizers` for real tokenizers.

use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, Int64Array, LargeStringArray, RecordBatch, RecordBatchIterator, StringArray,
    StringViewArray,
};
use arrow_dlpack_loader::{
    Error, Source, TokenizeOptions, TokenizeToFileOptions, Tokenizer, tokenize_column,
    tokenize_to_file,
};
use arrow_schema::{DataType, Field, Schema};

/// A word-level tokenizer: words and punctuation runs (`Whitespace`), unknown words `[UNK]`,
/// `[CLS] ... [SEP]` around a text with special tokens; `padding` is the file's padding entry.
pub(crate) fn tokenizer_json(padding: &str) -> String {
    format!(
        r#"{{
  "version": "1.0",
  "truncation": null,
  "padding": {padding},
  "added_tokens": [
    {{"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}},
    {{"id": 1, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}},
    {{"id": 2, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}}
  ],
  "normalizer": null,
  "pre_tokenizer": {{"type": "Whitespace"}},
  "post_processor": {{
    "type": "TemplateProcessing",
    "single": [{{"SpecialToken": {{"id": "[CLS]", "type_id": 0}}}}, {{"Sequence": {{"id": "A", "type_id": 0}}}}, {{"SpecialToken": {{"id": "[SEP]", "type_id": 0}}}}],
    "pair": [{{"Sequence": {{"id": "A", "type_id": 0}}}}, {{"Sequence": {{"id": "B", "type_id": 1}}}}],
    "special_tokens": {{
      "[CLS]": {{"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]}},
      "[SEP]": {{"id": "[SEP]", "ids": [2], "tokens": ["[SEP]"]}}
    }}
  }},
  "decoder": null,
  "model": {{"type": "WordLevel", "vocab": {{"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "the": 5, "cat": 6, "!": 7}}, "unk_token": "[UNK]"}}
}}"#
    )
}

fn tokenizer() -> Tokenizer {
    Tokenizer::from_json(&tokenizer_json("null")).unwrap()
}

/// The rows of a list column of int32 ids.
fn rows(ids: &ArrayRef) -> Vec<Vec<i32>> {
    let list = ids.as_list::<i32>();
    (0..list.len())
        .map(|i| list.value(i).as_primitive::<Int32Type>().values().to_vec())
        .collect()
}

fn texts() -> StringArray {
    StringArray::from(vec![
        "hello world",
        "",
        "the dog!",
        "cat   cat\n\tcat",
        "héllo 🐈",
    ])
}

#[test]
fn tokenizes_each_text_to_the_ids_of_its_words() {
    let tokenizer = tokenizer();
    assert_eq!(tokenizer.vocab_size(), 8);
    assert_eq!(tokenizer.id_type(), DataType::Int32);
    assert_eq!(tokenizer.token_to_id("cat"), Some(6));
    let plain = TokenizeOptions {
        add_special_tokens: false,
        ..TokenizeOptions::default()
    };
    let ids = tokenize_column(&texts(), &tokenizer, &plain).unwrap();
    assert_eq!(
        ids.data_type(),
        &DataType::List(Arc::new(Field::new_list_field(DataType::Int32, true)))
    );
    let expected: Vec<Vec<i32>> =
        vec![vec![3, 4], vec![], vec![5, 0, 7], vec![6, 6, 6], vec![0, 0]];
    assert_eq!(rows(&ids), expected);
    let special = tokenize_column(&texts(), &tokenizer, &TokenizeOptions::default()).unwrap();
    let with: Vec<Vec<i32>> = expected
        .iter()
        .map(|row| [&[1][..], row, &[2][..]].concat())
        .collect();
    assert_eq!(rows(&special), with);
}

#[test]
fn the_three_string_layouts_slices_and_thread_counts_give_the_same_ids() {
    let tokenizer = tokenizer();
    let words = ["hello", "world", "the", "cat", "dog", "!", " ", "\n"];
    let many: Vec<String> = (0..3000)
        .map(|i: usize| {
            (0..i % 37)
                .map(|j| words[(i * 7 + j * 3) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let one = TokenizeOptions {
        threads: 1,
        ..TokenizeOptions::default()
    };
    let expected =
        rows(&tokenize_column(&StringArray::from(refs.clone()), &tokenizer, &one).unwrap());
    let layouts: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(refs.clone())),
        Arc::new(LargeStringArray::from(refs.clone())),
        Arc::new(StringViewArray::from(refs.clone())),
    ];
    for layout in &layouts {
        for threads in [1, 2, 5] {
            let options = TokenizeOptions {
                threads,
                ..TokenizeOptions::default()
            };
            assert_eq!(
                rows(&tokenize_column(layout.as_ref(), &tokenizer, &options).unwrap()),
                expected
            );
        }
        let sliced = layout.slice(1000, 500);
        let got = rows(&tokenize_column(sliced.as_ref(), &tokenizer, &one).unwrap());
        assert_eq!(got, expected[1000..1500]);
    }
    let large = TokenizeOptions {
        large_offsets: true,
        ..TokenizeOptions::default()
    };
    let ids = tokenize_column(layouts[0].as_ref(), &tokenizer, &large).unwrap();
    let list = ids.as_list::<i64>();
    assert_eq!(list.len(), expected.len());
    assert_eq!(
        list.value(3).as_primitive::<Int32Type>().values().to_vec(),
        expected[3]
    );
}

#[test]
fn a_null_text_is_an_error_naming_its_row_unless_allowed() {
    let tokenizer = tokenizer();
    let column = StringArray::from(vec![Some("hello"), Some("world"), None, Some("cat")]);
    for threads in [1, 3] {
        let options = TokenizeOptions {
            threads,
            ..TokenizeOptions::default()
        };
        match tokenize_column(&column, &tokenizer, &options) {
            Err(Error::NullText { row: 2 }) => {}
            other => panic!("expected NullText at row 2, got {other:?}"),
        }
    }
    let allowed = TokenizeOptions {
        allow_nulls: true,
        add_special_tokens: false,
        ..TokenizeOptions::default()
    };
    let ids = tokenize_column(&column, &tokenizer, &allowed).unwrap();
    assert_eq!(ids.null_count(), 0);
    assert_eq!(rows(&ids), vec![vec![3], vec![4], vec![], vec![6]]);
}

#[test]
fn rejects_columns_that_hold_no_text() {
    match tokenize_column(
        &Int64Array::from(vec![1, 2]),
        &tokenizer(),
        &TokenizeOptions::default(),
    ) {
        Err(error @ Error::UnsupportedValues { .. }) => {
            assert_eq!(
                error.to_string(),
                "cannot read values of type Int64; expected utf8, large_utf8 or utf8_view text"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_tokenizer_that_does_not_parse_or_a_missing_file_is_an_error() {
    match Tokenizer::from_json("{\"model\": 3}") {
        Err(error @ Error::Tokenizer { .. }) => {
            assert_eq!(
                error.to_string(),
                "cannot read the tokenizer of the JSON text"
            );
            assert!(std::error::Error::source(&error).is_some());
        }
        other => panic!("{other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Tokenizer::from_file(dir.path().join("missing.json")),
        Err(Error::Io { .. })
    ));
    let bad = dir.path().join("tokenizer.json");
    std::fs::write(&bad, "not json").unwrap();
    match Tokenizer::from_file(&bad) {
        Err(Error::Tokenizer { what, .. }) => assert_eq!(what, bad.display().to_string()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_vocabulary_of_ids_far_beyond_its_size_is_refused_before_it_is_written_back() {
    // Three tokens, one numbered near the top of u32: the tokenizers crate encodes with it, but
    // writes the vocabulary back (for the digest) as a table of every id, which overflowed at
    // 2^32 - 1 (a panic) and allocated 16 GiB at 2^31 (an abort).
    for top in [u32::MAX, 1 << 31, 1 << 24] {
        let json = tokenizer_json("null").replace("\"!\": 7}", &format!("\"!\": {top}}}"));
        assert!(json.contains(&top.to_string()));
        match Tokenizer::from_json(&json) {
            Err(error @ Error::Tokenizer { .. }) => {
                let cause = std::error::Error::source(&error).unwrap().to_string();
                assert_eq!(
                    cause,
                    format!(
                        "its largest id is {top} for a vocabulary of 8 tokens; expected ids \
                         numbered from 0 without large gaps (at most 1048576)"
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    }
    // Ids below the bound are read as they are.
    let json = tokenizer_json("null").replace("\"!\": 7}", "\"!\": 1000000}");
    assert_eq!(Tokenizer::from_json(&json).unwrap().vocab_size(), 1_000_001);
}

#[test]
fn padding_in_the_file_is_not_applied() {
    let padded = r#"{"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "[UNK]"}"#;
    let tokenizer = Tokenizer::from_json(&tokenizer_json(padded)).unwrap();
    let ids = tokenize_column(
        &StringArray::from(vec!["hello world"]),
        &tokenizer,
        &TokenizeOptions::default(),
    )
    .unwrap();
    assert_eq!(rows(&ids), vec![vec![1, 3, 4, 2]]);
}

/// A source of two record batches: `id` and `text`.
fn batches(texts: &[Option<&str>]) -> (Arc<Schema>, Vec<RecordBatch>) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("text", DataType::Utf8, true),
    ]));
    let half = texts.len() / 2;
    let make = |range: std::ops::Range<usize>| {
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(
                    range.clone().map(|i| i as i64),
                )) as ArrayRef,
                Arc::new(StringArray::from(texts[range].to_vec())),
            ],
        )
        .unwrap()
    };
    (schema.clone(), vec![make(0..half), make(half..texts.len())])
}

fn reader(texts: &[Option<&str>]) -> Source {
    let (schema, batches) = batches(texts);
    Source::reader(RecordBatchIterator::new(
        batches.into_iter().map(Ok),
        schema,
    ))
}

/// Every record batch of the IPC file or Parquet file at `path`.
fn read_back(path: &Path) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    if path.extension().is_some_and(|e| e == "parquet") {
        parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 1024)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    } else if path.extension().is_some_and(|e| e == "arrows") {
        arrow_ipc::reader::StreamReader::try_new(file, None)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    } else {
        arrow_ipc::reader::FileReader::try_new(file, None)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

const TEXTS: [Option<&str>; 6] = [
    Some("hello world"),
    Some("the cat"),
    Some(""),
    Some("cat!"),
    Some("world hello world"),
    Some("dog"),
];

#[test]
fn writes_the_ids_beside_the_columns_in_every_format() {
    let tokenizer = tokenizer();
    let expected = rows(
        &tokenize_column(
            &StringArray::from(TEXTS.to_vec()),
            &tokenizer,
            &TokenizeOptions::default(),
        )
        .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    for name in ["out.arrow", "out.arrows", "out.parquet"] {
        let path = dir.path().join(name);
        let summary = tokenize_to_file(
            reader(&TEXTS),
            &tokenizer,
            &path,
            &TokenizeToFileOptions::default(),
        )
        .unwrap();
        assert_eq!(summary.rows, 6);
        assert_eq!(
            summary.tokens,
            expected.iter().map(Vec::len).sum::<usize>() as u64
        );
        let back = read_back(&path);
        let schema = back[0].schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "text", "input_ids"], "{name}");
        let ids: Vec<Vec<i32>> = back.iter().flat_map(|b| rows(b.column(2))).collect();
        assert_eq!(ids, expected, "{name}");
        let texts: Vec<String> = back
            .iter()
            .flat_map(|b| {
                b.column(1)
                    .as_string::<i32>()
                    .iter()
                    .map(|t| t.unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(texts, TEXTS.map(|t| t.unwrap().to_string()));
    }
    // The output reads back as a source: its Parquet file through the loader's own reader.
    let again = dir.path().join("again.arrow");
    let options = TokenizeToFileOptions {
        keep_columns: Some(vec!["id".to_string()]),
        output_column: "tokens".to_string(),
        ..TokenizeToFileOptions::default()
    };
    tokenize_to_file(
        Source::from_paths([dir.path().join("out.parquet")]).unwrap(),
        &tokenizer,
        &again,
        &options,
    )
    .unwrap();
    let back = read_back(&again);
    let names: Vec<String> = back[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["id", "tokens"]);
    assert_eq!(
        back.iter()
            .flat_map(|b| rows(b.column(1)))
            .collect::<Vec<_>>(),
        expected
    );
}

#[test]
fn a_failed_run_names_the_row_and_leaves_no_file() {
    let tokenizer = tokenizer();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.arrow");
    let mut texts = TEXTS;
    texts[4] = None;
    match tokenize_to_file(
        reader(&texts),
        &tokenizer,
        &path,
        &TokenizeToFileOptions::default(),
    ) {
        Err(Error::NullText { row: 4 }) => {}
        other => panic!("expected NullText at row 4 (second record batch), got {other:?}"),
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn rejects_unknown_formats_missing_columns_and_clashing_names() {
    let tokenizer = tokenizer();
    let dir = tempfile::tempdir().unwrap();
    let options = TokenizeToFileOptions::default();
    assert!(matches!(
        tokenize_to_file(
            reader(&TEXTS),
            &tokenizer,
            dir.path().join("out.csv"),
            &options
        ),
        Err(Error::UnknownFormat { .. })
    ));
    let missing = TokenizeToFileOptions {
        column: "body".to_string(),
        ..TokenizeToFileOptions::default()
    };
    assert!(matches!(
        tokenize_to_file(
            reader(&TEXTS),
            &tokenizer,
            dir.path().join("o.arrow"),
            &missing
        ),
        Err(Error::MissingColumn { .. })
    ));
    let clash = TokenizeToFileOptions {
        output_column: "id".to_string(),
        ..TokenizeToFileOptions::default()
    };
    match tokenize_to_file(
        reader(&TEXTS),
        &tokenizer,
        dir.path().join("o.arrow"),
        &clash,
    ) {
        Err(Error::InvalidSpec { reason }) => assert!(reason.contains("\"id\""), "{reason}"),
        other => panic!("{other:?}"),
    }
    let not_text = TokenizeToFileOptions {
        column: "id".to_string(),
        output_column: "ids".to_string(),
        ..TokenizeToFileOptions::default()
    };
    assert!(matches!(
        tokenize_to_file(reader(&TEXTS), &tokenizer, dir.path().join("o.arrow"), &not_text),
        Err(Error::UnsupportedColumn { ref column, .. }) if column == "id"
    ));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
