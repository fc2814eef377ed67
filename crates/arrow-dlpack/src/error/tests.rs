//! Every error variant: its message, and its chain of causes printed without repeats.

use super::*;
use crate::tensor::test_support::assert_every_variant_chains;

/// The variants, in declaration order; the match is exhaustive, so a new variant does not
/// compile until it has an index here and a sample in [`samples`].
fn index(error: &Error) -> usize {
    match error {
        Error::Tensor(_) => 0,
        Error::UnsupportedType { .. } => 1,
        Error::Nulls { .. } => 2,
        Error::NotOneDimensional { .. } => 3,
        Error::TooFewDimensions { .. } => 4,
        Error::NotRowMajor { .. } => 5,
        Error::NotFirstMajor { .. } => 6,
        Error::ZeroDimensional => 7,
        Error::GappedStrides { .. } => 8,
        Error::CopyRequired { .. } => 9,
        Error::UnsupportedDType { .. } => 10,
        Error::InvalidExtension { .. } => 11,
        Error::ListSizeOverflow { .. } => 12,
        Error::MixedChunkTypes { .. } => 13,
        Error::NoChunks => 14,
        Error::NoColumns => 15,
        Error::UnsupportedColumnType { .. } => 16,
        Error::ColumnNulls { .. } => 17,
        Error::TableNulls { .. } => 18,
        Error::ColumnLength { .. } => 19,
        Error::ColumnNames { .. } => 20,
        Error::InvalidOffsets { .. } => 21,
        Error::NullRow { .. } => 22,
        Error::NotAList { .. } => 23,
        Error::RowsOutOfRange { .. } => 24,
        Error::MixedRaggedPieces { .. } => 25,
        Error::OffsetOverflow { .. } => 26,
        Error::NoPieces { .. } => 27,
        Error::PadValue { .. } => 28,
        Error::InvalidPadding { .. } => 29,
        Error::Arrow(_) => 30,
        Error::InvalidVariableShapeTensor { .. } => 31,
        Error::NullTensor { .. } => 32,
        Error::TableDType { .. } => 33,
        #[cfg(feature = "images")]
        Error::InvalidImageSpec { .. } => 34,
        #[cfg(feature = "images")]
        Error::UnsupportedImageColumn { .. } => 35,
        #[cfg(feature = "images")]
        Error::ImageRow { .. } => 36,
        #[cfg(feature = "images")]
        Error::NullImage => 37,
        #[cfg(feature = "images")]
        Error::UnknownImageFormat { .. } => 38,
        #[cfg(feature = "images")]
        Error::ImageSize { .. } => 39,
        #[cfg(feature = "images")]
        Error::ImageCodec { .. } => 40,
        #[cfg(feature = "images")]
        Error::ImageCodecPanicked { .. } => 41,
        #[cfg(feature = "images")]
        Error::ImageFile { .. } => 42,
        #[cfg(feature = "images")]
        Error::ImageResize { .. } => 43,
    }
}

/// The variants of the `images` feature come last.
const VARIANTS: usize = if cfg!(feature = "images") { 44 } else { 34 };

/// One error of every variant of the `images` feature.
#[cfg(feature = "images")]
fn image_samples() -> Vec<Error> {
    let row = |source: Error| Error::ImageRow {
        row: 1234,
        column: "image".to_string(),
        source: Box::new(source),
    };
    // The errors of one image, each alone and as the cause of the row's error that carries it.
    let of_one_image: [fn() -> Error; 7] = [
        || Error::NullImage,
        || Error::UnknownImageFormat {
            start: b"GIF7".to_vec(),
        },
        || Error::ImageSize {
            width: 100_000,
            height: 100_000,
            max_pixels: 89_478_485,
        },
        || Error::ImageCodec {
            format: "PNG",
            source: "unexpected end of file".into(),
        },
        || Error::ImageCodecPanicked {
            message: "index out of bounds".to_string(),
        },
        || Error::ImageFile {
            path: "images/a.jpg".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        },
        || Error::ImageResize {
            reason: "source cropping option is invalid".to_string(),
        },
    ];
    let mut samples = vec![
        Error::InvalidImageSpec {
            field: "size",
            reason: "expected a height and a width of at least 1, found 0 x 4".to_string(),
        },
        Error::UnsupportedImageColumn {
            data_type: DataType::Int32,
            expected: "binary",
        },
    ];
    for make in of_one_image {
        samples.push(make());
        samples.push(row(make()));
    }
    samples
}

/// One error of every variant (two for those whose text depends on a location).
fn samples() -> Vec<Error> {
    vec![
        Error::Tensor(arrow_dlpack_tensor::Error::NullManagedTensor),
        Error::UnsupportedType {
            data_type: DataType::Utf8,
            reason: "variable-size values have no fixed element size",
        },
        Error::Nulls {
            null_count: 1,
            location: NullLocation::Array { depth: 1 },
        },
        Error::NotOneDimensional { shape: vec![2, 2] },
        Error::TooFewDimensions { ndim: 1, min: 2 },
        Error::NotRowMajor {
            shape: vec![2, 3],
            strides: vec![1, 2],
        },
        Error::NotFirstMajor {
            shape: vec![2, 3],
            strides: vec![1, 2],
        },
        Error::ZeroDimensional,
        Error::GappedStrides {
            shape: vec![2],
            strides: vec![2],
        },
        Error::CopyRequired {
            reason: "concatenating 3 chunks".to_string(),
            options: "ConcatOptions",
        },
        Error::UnsupportedDType {
            dtype: DType::Complex64,
        },
        Error::InvalidExtension {
            reason: "shape is missing".to_string(),
        },
        Error::ListSizeOverflow { size: 1 << 40 },
        Error::MixedChunkTypes {
            index: 1,
            expected: DataType::Int32,
            found: DataType::Int64,
        },
        Error::NoChunks,
        Error::NoColumns,
        Error::UnsupportedColumnType {
            column: "s".to_string(),
            data_type: DataType::Utf8,
            reason: "it is not numeric",
            expected: "numeric columns",
        },
        Error::ColumnNulls {
            column: "x".to_string(),
            null_count: 2,
        },
        Error::TableNulls {
            null_count: 1,
            location: NullLocation::Rows,
        },
        Error::TableNulls {
            null_count: 3,
            location: NullLocation::Column {
                column: "emb".to_string(),
                depth: 1,
            },
        },
        Error::ColumnLength {
            column: "y".to_string(),
            found: 1,
            expected: 2,
        },
        Error::ColumnNames {
            names: 1,
            columns: 2,
        },
        Error::InvalidOffsets {
            reason: "offsets[2] = 1 is less than offsets[1] = 2".to_string(),
        },
        Error::NullRow {
            row: 3,
            null_count: 2,
        },
        Error::NotAList {
            data_type: DataType::Int32,
        },
        Error::RowsOutOfRange {
            start: 2,
            end: 5,
            rows: 3,
        },
        Error::MixedRaggedPieces {
            index: 1,
            expected_dtype: DType::Int32,
            expected_shape: vec![],
            found_dtype: DType::Float32,
            found_shape: vec![2],
        },
        Error::OffsetOverflow {
            what: "cu_seqlens",
            total: 1 << 31,
            dtype: DType::Int32,
        },
        Error::NoPieces { what: "pieces" },
        Error::PadValue {
            value: "-100".to_string(),
            dtype: DType::UInt8,
            expected: "an integer from 0 to 255",
        },
        Error::InvalidPadding {
            reason: "pad_to_multiple_of is 0; expected at least 1".to_string(),
        },
        Error::Arrow(arrow_schema::ArrowError::InvalidArgumentError(
            "offsets are not monotonic".to_string(),
        )),
        Error::InvalidVariableShapeTensor {
            reason: "row 0 has shape [2, 2] but 3 elements; expected the product of the shape"
                .to_string(),
        },
        Error::NullTensor { index: 1 },
        Error::TableDType {
            dtype: DType::Int64,
            reason: "null_to_nan writes nulls as NaN, which only a float dtype holds",
        },
    ]
}

#[test]
fn every_variant_prints_its_chain_without_repeating_a_cause() {
    #[allow(unused_mut)]
    let mut samples = samples();
    #[cfg(feature = "images")]
    samples.extend(image_samples());
    assert_every_variant_chains(&samples, index, VARIANTS);
}

#[cfg(feature = "images")]
#[test]
fn an_image_row_names_its_column_unless_the_array_has_no_name() {
    let row = |column: &str| {
        Error::ImageRow {
            row: 1234,
            column: column.to_string(),
            source: Box::new(Error::NullImage),
        }
        .to_string()
    };
    assert_eq!(
        row("image"),
        r#"cannot decode image at row 1,234 of column "image""#
    );
    // An array given alone (`pa.array(...)`) has the empty name, which says nothing.
    assert_eq!(row(""), "cannot decode image at row 1,234");
}
