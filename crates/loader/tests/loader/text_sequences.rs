//! Text columns loaded as sequences with a tokenizer ([`Sequence::tokenizer`]): the ids are
//! those of [`tokenize_column`], every layout applies, a column that is not text and a null
//! text are errors, and a saved state records the tokenizer, so that a resume with another one
//! is refused naming it.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_dlpack_loader::{
    BatchSpec, Error, Sequence, SequenceTokenizer, Source, TOKENIZED_TEXT_TYPES, TokenizeOptions,
    Tokenizer, batches, tokenize_column,
};

use crate::data::{chain, collect, reader, values, write_parquet};
use crate::text_tokenize::tokenizer_json;

const TEXTS: [&str; 7] = [
    "hello world",
    "",
    "the cat!",
    "cat   cat\n\tcat",
    "héllo 🐈",
    "the the the the",
    "world",
];

fn word_level() -> Tokenizer {
    Tokenizer::from_json(&tokenizer_json("null")).unwrap()
}

fn tokenizer() -> SequenceTokenizer {
    SequenceTokenizer::new(word_level())
}

/// The texts in record batches of `sizes` rows, with an `id` column.
fn texts(sizes: &[usize], texts: &[Option<&str>]) -> Source {
    reader(text_batches(sizes, texts))
}

/// The record batches of [`texts`].
fn text_batches(sizes: &[usize], texts: &[Option<&str>]) -> Vec<RecordBatch> {
    let mut batches = Vec::new();
    let mut start = 0;
    for &size in sizes {
        let id: ArrayRef = Arc::new(Int64Array::from_iter_values(
            start as i64..(start + size) as i64,
        ));
        let text: ArrayRef = Arc::new(StringArray::from(texts[start..start + size].to_vec()));
        batches.push(RecordBatch::try_from_iter([("id", id), ("text", text)]).unwrap());
        start += size;
    }
    batches
}

fn all_texts() -> Vec<Option<&'static str>> {
    TEXTS.iter().copied().map(Some).collect()
}

/// The ids [`tokenize_column`] gives for every text.
fn expected(add_special_tokens: bool) -> Vec<Vec<i32>> {
    let column = StringArray::from(TEXTS.to_vec());
    let options = TokenizeOptions {
        add_special_tokens,
        ..TokenizeOptions::default()
    };
    let ids = tokenize_column(&column, &word_level(), &options).unwrap();
    let list = ids.as_list::<i32>();
    (0..list.len())
        .map(|i| list.value(i).as_primitive::<Int32Type>().values().to_vec())
        .collect()
}

/// The rows of the packed `text` tensors of `batches`.
fn packed_rows(batches: &[arrow_dlpack_loader::TensorBatch]) -> Vec<Vec<i32>> {
    let mut rows = Vec::new();
    for batch in batches {
        let ids: Vec<i32> = values(&batch["text"]);
        let bounds: Vec<i32> = values(&batch["text_cu_seqlens"]);
        for pair in bounds.windows(2) {
            rows.push(ids[pair[0] as usize..pair[1] as usize].to_vec());
        }
    }
    rows
}

fn spec(sequence: Sequence) -> BatchSpec {
    BatchSpec::new(3).columns(["id"]).sequence(sequence)
}

#[test]
fn a_text_column_packs_to_the_ids_of_tokenize_column() {
    let batches = collect(
        texts(&[4, 3], &all_texts()),
        spec(Sequence::pack("text").tokenizer(tokenizer())),
    );
    assert_eq!(packed_rows(&batches), expected(true));
    let plain = tokenizer().add_special_tokens(false);
    let batches = collect(
        texts(&[2, 5], &all_texts()),
        spec(Sequence::pack("text").tokenizer(plain)),
    );
    assert_eq!(packed_rows(&batches), expected(false));
}

#[test]
fn a_text_column_pads_and_truncates_as_a_list_column() {
    let batches = collect(
        texts(&[7], &all_texts()),
        spec(Sequence::pad("text").max_length(3).tokenizer(tokenizer())),
    );
    let lengths: Vec<i64> = batches
        .iter()
        .flat_map(|b| values::<i64>(&b["text_lengths"]))
        .collect();
    let want: Vec<i64> = expected(true)
        .iter()
        .map(|row| row.len().min(3) as i64)
        .collect();
    assert_eq!(lengths, want);
    assert_eq!(batches[0]["text"].shape()[1], 3);
}

#[test]
fn a_column_that_is_not_text_is_refused_before_any_batch() {
    let id: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
    let text: ArrayRef = Arc::new(Int64Array::from(vec![3, 4]));
    let batch = RecordBatch::try_from_iter([("id", id), ("text", text)]).unwrap();
    let error = batches(
        reader(vec![batch]),
        spec(Sequence::pack("text").tokenizer(tokenizer())),
    )
    .err()
    .expect("an int column with a tokenizer is refused");
    match &error {
        Error::UnsupportedColumn {
            column, expected, ..
        } => {
            assert_eq!(column, "text");
            assert_eq!(*expected, TOKENIZED_TEXT_TYPES);
        }
        other => panic!("expected UnsupportedColumn, got {}", chain(other)),
    }
}

#[test]
fn a_null_text_is_an_error_naming_its_row_unless_nulls_are_allowed() {
    let mut with_null = all_texts();
    with_null[5] = None;
    let sequence = Sequence::pack("text").tokenizer(tokenizer());
    let results: Vec<_> = batches(texts(&[4, 3], &with_null), spec(sequence.clone()))
        .unwrap()
        .collect();
    let error = results.into_iter().find_map(Result::err).expect("an error");
    // Row 5 is row 1 of the second record batch, the reader's second unit.
    assert!(
        matches!(error, Error::NullText { row: 1 }),
        "{}",
        chain(&error)
    );
    // Allowed, a null text is an empty row, without the special tokens of an empty text.
    let allowed = collect(texts(&[4, 3], &with_null), spec(sequence).allow_nulls(true));
    let mut want = expected(true);
    want[5] = Vec::new();
    assert_eq!(packed_rows(&allowed), want);
}

#[test]
fn a_state_records_the_tokenizer_and_a_resume_with_another_is_refused() {
    let sequence = Sequence::pack("text").tokenizer(tokenizer());
    let mut loader = batches(texts(&[4, 3], &all_texts()), spec(sequence.clone())).unwrap();
    let first = loader.next().unwrap().unwrap();
    let state = loader.state();
    let saved = &state.settings.sequences["text"];
    assert_eq!(saved.tokenizer.as_deref(), Some(tokenizer().digest()));
    assert_eq!(saved.add_special_tokens, Some(true));
    let rest = collect(
        texts(&[4, 3], &all_texts()),
        spec(sequence.clone()).state(state.clone()),
    );
    let mut rows = packed_rows(&[first]);
    rows.extend(packed_rows(&rest));
    assert_eq!(rows, expected(true));
    // Another vocabulary is another tokenizer.
    let other_json = tokenizer_json("null").replace("\"cat\": 6", "\"dog\": 6");
    let other = SequenceTokenizer::new(Tokenizer::from_json(&other_json).unwrap());
    assert_ne!(other.digest(), tokenizer().digest());
    let refused = batches(
        texts(&[4, 3], &all_texts()),
        spec(Sequence::pack("text").tokenizer(other)).state(state),
    )
    .err()
    .expect("another tokenizer is refused");
    let message = chain(&refused);
    assert!(
        message.starts_with(
            "cannot resume from the state: sequences[\"text\"].tokenizer: saved \"xxh3-128:"
        ),
        "{message}"
    );
}

#[test]
fn the_digest_is_the_same_for_any_spelling_of_one_tokenizer() {
    let compact = Tokenizer::from_json(&tokenizer_json("null")).unwrap();
    let spaced = Tokenizer::from_json(&tokenizer_json("null").replace(": ", " :  ")).unwrap();
    assert_eq!(compact.digest(), spaced.digest());
    assert!(compact.digest().starts_with("xxh3-128:"));
}

#[test]
fn a_budget_and_buckets_over_ranks_plan_by_the_ids_lengths_of_a_text_column() {
    let dir = tempfile::tempdir().unwrap();
    // The texts three times over, in record batches of 7 rows: ids 0 to 20.
    let all: Vec<Option<&str>> = (0..3).flat_map(|_| all_texts()).collect();
    let data = text_batches(&[7, 7, 7], &all);
    let parquet = write_parquet(&dir.path().join("t.parquet"), &data, 7);
    type Make = Box<dyn Fn() -> Source>;
    let sources: [(&str, Make); 2] = [
        (
            "parquet",
            Box::new(move || Source::ParquetFiles(vec![parquet.clone()])),
        ),
        (
            "memory",
            Box::new(move || Source::record_batches(data[0].schema(), data.clone())),
        ),
    ];
    let ids = expected(true);
    for (name, make) in &sources {
        for budget in [false, true] {
            let mut spec = spec(Sequence::pack("text").tokenizer(tokenizer()));
            if budget {
                spec = spec.max_tokens(12);
            } else {
                spec = spec.bucket_by_length(true).shuffle(3);
            }
            let mut counts = Vec::new();
            let mut seen = Vec::new();
            for shard in 0..2 {
                let batches = collect(make(), spec.clone().shard(shard, 2));
                counts.push(batches.len());
                let rows = packed_rows(&batches);
                let row_ids: Vec<i64> = batches
                    .iter()
                    .flat_map(|b| values::<i64>(&b["id"]))
                    .collect();
                for (id, row) in row_ids.iter().zip(&rows) {
                    // Each row's ids are its text's, whichever shard read it.
                    assert_eq!(row, &ids[*id as usize % ids.len()], "{name} {id}");
                }
                seen.extend(row_ids);
            }
            assert_eq!(counts[0], counts[1], "{name}, budget {budget}: {counts:?}");
            seen.sort_unstable();
            assert_eq!(seen, (0..21).collect::<Vec<_>>(), "{name}, budget {budget}");
        }
    }
}
