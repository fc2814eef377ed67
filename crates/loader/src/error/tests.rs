//! Every variant's message and chain, checked against the house convention.
use std::path::PathBuf;

use arrow_dlpack::tensor::test_support::assert_every_variant_chains;

use super::*;

/// The variants, in declaration order; the match is exhaustive, so a new variant does not
/// compile until it has an index here and a sample in [`samples`].
fn index(error: &Error) -> usize {
    match error {
        Error::InvalidSpec { .. } => 0,
        Error::InvalidState { .. } => 1,
        Error::Io { .. } => 2,
        Error::Ipc { .. } => 3,
        Error::Parquet { .. } => 4,
        Error::Decode { .. } => 5,
        Error::CorruptParquet { .. } => 6,
        Error::UnsupportedCodec { .. } => 7,
        Error::RowCount { .. } => 8,
        Error::FileChanged { .. } => 9,
        Error::DecodePanicked { .. } => 10,
        Error::Thread { .. } => 11,
        Error::Arrow(_) => 12,
        Error::Column { .. } => 13,
        Error::Tensor(_) => 14,
        Error::Convert(_) => 15,
        Error::MissingColumn { .. } => 16,
        Error::MissingTensor { .. } => 17,
        Error::UnsupportedColumn { .. } => 18,
        Error::SchemaMismatch { .. } => 19,
        Error::UnknownFormat { .. } => 20,
        Error::Panicked { .. } => 21,
        Error::InvalidSource { .. } => 22,
        Error::NullSequenceRow { .. } => 23,
        Error::NotIpcFile { .. } => 24,
        Error::Tokenizer { .. } => 25,
        Error::NullText { .. } => 26,
        Error::Tokenize { .. } => 27,
        Error::UnsupportedValues { .. } => 28,
        Error::Write { .. } => 29,
        Error::ImageRow { .. } => 30,
        Error::RelativeImagePath { .. } => 31,
        Error::DeclaredNulls { .. } => 32,
        Error::NullInFile { .. } => 33,
    }
}

const VARIANTS: usize = 34;

fn path() -> PathBuf {
    PathBuf::from("/data/t.parquet")
}

fn not_found() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")
}

/// One error of every variant.
fn samples() -> Vec<Error> {
    vec![
        Error::InvalidSpec {
            reason: "batch_size is 0; expected at least 1".to_string(),
        },
        Error::InvalidState {
            reason: "the state was saved with batch_size = 32; this loader has batch_size = 64"
                .to_string(),
        },
        Error::io(&path(), not_found()),
        Error::ipc(&path(), "the footer has no schema"),
        Error::parquet(
            &path(),
            parquet::errors::ParquetError::EOF("unexpected end of file".to_string()),
        ),
        Error::Decode {
            path: path(),
            row_group: 1,
            source: arrow_schema::ArrowError::ParquetError("bad page".to_string()),
        },
        Error::CorruptParquet {
            path: path(),
            row_group: 0,
            column: "x".to_string(),
            reason: "the chunk declares 90 bytes and the file holds 40".to_string(),
        },
        Error::UnsupportedCodec {
            path: path(),
            row_group: 0,
            column: "x".to_string(),
            codec: "ZSTD(ZstdLevel(1))".to_string(),
            feature: "zstd",
        },
        Error::RowCount {
            path: path(),
            unit: "row group 0".to_string(),
            found: 3,
            expected: 4,
        },
        Error::FileChanged {
            path: path(),
            change: "its length is 10 bytes, not 20".to_string(),
        },
        Error::DecodePanicked {
            path: path(),
            unit: "row group 2".to_string(),
            message: "index out of bounds".to_string(),
        },
        Error::Thread {
            source: std::io::Error::other("resource temporarily unavailable"),
        },
        Error::Arrow(arrow_schema::ArrowError::InvalidArgumentError(
            "offsets are not monotonic".to_string(),
        )),
        Error::column(
            "emb",
            arrow_dlpack::Error::Nulls {
                null_count: 2,
                location: arrow_dlpack::NullLocation::Array { depth: 1 },
            },
        ),
        Error::from(arrow_dlpack_tensor::Error::OutOfMemory { bytes: 1 << 40 }),
        Error::from(arrow_dlpack::Error::NoColumns),
        Error::MissingColumn {
            column: "idd".to_string(),
            available: vec!["id".to_string(), "x".to_string()],
        },
        Error::MissingTensor {
            name: "labels".to_string(),
            available: vec!["label".to_string()],
        },
        Error::UnsupportedColumn {
            column: "s".to_string(),
            data_type: DataType::Utf8,
            metadata: Metadata::default().with(EXTENSION_NAME_KEY, "arrow.json"),
            as_sequence: false,
            expected: "a numeric column",
            every_column: true,
        },
        Error::NullSequenceRow {
            column: "tokens".to_string(),
            file: None,
            item: Some(3),
            row: 50,
        },
        Error::NotIpcFile {
            path: PathBuf::from("data.arrow"),
            len: 528,
            truncated: false,
        },
        Error::SchemaMismatch {
            what: "file b.parquet".to_string(),
            found: Fields::from(vec![arrow_schema::Field::new("x", DataType::Int32, true)]),
            expected: Fields::from(vec![arrow_schema::Field::new("x", DataType::Int64, true)]),
        },
        Error::UnknownFormat {
            path: PathBuf::from("t.csv"),
            read: true,
        },
        Error::Panicked {
            message: "a panic without a message".to_string(),
        },
        Error::InvalidSource {
            what: "storage option \"retry_timeout\"".to_string(),
            reason: "it is \"soon\"; expected a duration such as \"30s\"".to_string(),
        },
        Error::Tokenizer {
            what: "/data/tokenizer.json".to_string(),
            source: "expected value at line 1 column 1".into(),
        },
        Error::NullText { row: 17 },
        Error::Tokenize {
            row: 3,
            source: "the normalizer failed".into(),
        },
        Error::UnsupportedValues {
            data_type: DataType::Int64,
            expected: "utf8, large_utf8 or utf8_view text",
        },
        Error::Write {
            path: path(),
            source: Box::new(std::io::Error::other("no space left on device")),
        },
        Error::ImageRow {
            column: "image".to_string(),
            row: 1234,
            file: Some(PathBuf::from("train.parquet")),
            item: Some(0),
            source: Box::new(arrow_dlpack::Error::Tensor(
                arrow_dlpack_tensor::Error::OutOfMemory { bytes: 1 << 40 },
            )),
        },
        Error::RelativeImagePath {
            column: "image".to_string(),
            row: 7,
            item: Some(2),
            path: "a/b.jpg".to_string(),
        },
        Error::DeclaredNulls {
            path: path(),
            source: Box::new(Error::column(
                "x",
                arrow_dlpack::Error::Nulls {
                    null_count: 63,
                    location: arrow_dlpack::NullLocation::Array { depth: 0 },
                },
            )),
        },
        Error::NullInFile {
            path: path(),
            row: 1_234,
            source: Box::new(Error::column(
                "x",
                arrow_dlpack::Error::Nulls {
                    null_count: 1,
                    location: arrow_dlpack::NullLocation::Array { depth: 0 },
                },
            )),
        },
    ]
}

#[test]
fn image_rows_are_named_with_their_file() {
    let error = &samples()[30];
    assert_eq!(
        error.to_string(),
        "cannot decode image at row 1,234 of column \"image\" in train.parquet"
    );
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1_000_000), "1,000,000");
}

#[test]
fn every_variant_prints_its_chain_without_repeating_a_cause() {
    assert_every_variant_chains(&samples(), index, VARIANTS);
}

#[test]
fn errors_of_the_lower_layers_convert_with_question_mark() {
    fn tensor_layer() -> Result<()> {
        arrow_dlpack_tensor::Tensor::from_vec(vec![1.0f32], vec![2])?;
        Ok(())
    }
    fn arrow_layer() -> Result<()> {
        let empty: [&str; 0] = [];
        arrow_dlpack::columns_to_tensor(&empty, &[], Default::default())?;
        Ok(())
    }
    fn arrow_rs() -> Result<()> {
        arrow_schema::Schema::empty().index_of("x")?;
        Ok(())
    }
    assert!(matches!(
        tensor_layer(),
        Err(Error::Tensor(
            arrow_dlpack_tensor::Error::ElementCount { .. }
        ))
    ));
    assert!(matches!(
        arrow_layer(),
        Err(Error::Convert(arrow_dlpack::Error::NoColumns))
    ));
    assert!(matches!(arrow_rs(), Err(Error::Arrow(_))));
    // The Arrow layer's own tensor and arrow-rs errors land in the loader's variants.
    let nested = Error::from(arrow_dlpack::Error::Tensor(
        arrow_dlpack_tensor::Error::NullManagedTensor,
    ));
    assert!(matches!(
        nested,
        Error::Tensor(arrow_dlpack_tensor::Error::NullManagedTensor)
    ));
}
