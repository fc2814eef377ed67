//! The one error type of this crate.

use arrow_dlpack_tensor::DType;
use arrow_schema::DataType;

/// The largest fixed-size list size Arrow can express (`i32::MAX`).
pub(crate) const MAX_LIST_SIZE: usize = i32::MAX as usize;

/// Everything that can go wrong converting between Arrow arrays and [`Tensor`]s.
///
/// Messages are lowercase, say what failed, and name what was expected and what was found.
/// Shapes and strides are reported in elements, as [`Tensor`] stores them.
///
/// [`Tensor`]: arrow_dlpack_tensor::Tensor
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error of the tensor layer: building, exporting or importing a [`Tensor`](arrow_dlpack_tensor::Tensor).
    #[error(transparent)]
    Tensor(#[from] arrow_dlpack_tensor::Error),

    /// An Arrow type that has no DLPack dtype with the same memory layout.
    #[error(
        "cannot export {data_type}: {reason}; expected int8, int16, int32, int64, uint8, uint16, \
         uint32, uint64, float16, float32 or float64, or fixed-size lists of them"
    )]
    UnsupportedType {
        /// The type that cannot be exported (for a fixed-size list, the leaf type).
        data_type: DataType,
        /// Why it cannot be exported.
        reason: &'static str,
    },

    /// The array holds nulls and the caller did not allow them.
    #[error(
        "nulls are not allowed: found {} in {location}; expected none, or set the `allow_nulls` \
         option to accept them (null slots then hold unspecified values)",
        nulls(*null_count)
    )]
    Nulls {
        /// How many nulls were found at `location`, counting only the exported range.
        null_count: usize,
        /// Where they were found: [`NullLocation::Array`], at the array's own slots (depth 0)
        /// or the child values `depth` fixed-size lists down.
        location: NullLocation,
    },

    /// A tensor that must be 1-dimensional is not.
    #[error(
        "tensor has shape {shape:?} ({}); expected 1 dimension",
        plural(shape.len(), "dimension", "dimensions")
    )]
    NotOneDimensional {
        /// The tensor's shape.
        shape: Vec<usize>,
    },

    /// A tensor with fewer dimensions than the conversion needs.
    #[error(
        "tensor has {}; expected at least {min}",
        plural(*ndim, "dimension", "dimensions")
    )]
    TooFewDimensions {
        /// The tensor's rank.
        ndim: usize,
        /// The smallest rank accepted.
        min: usize,
    },

    /// A tensor that must be row-major contiguous (C order) is not.
    #[error(
        "tensor with shape {shape:?} and strides {strides:?} (in elements) is not row-major \
         contiguous; expected strides {:?}",
        expected_row_major_strides(shape)
    )]
    NotRowMajor {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        strides: Vec<isize>,
    },

    /// A tensor whose outermost dimension does not have the largest stride, so that its rows are
    /// not the cells of a fixed-shape tensor array.
    #[error(
        "tensor with shape {shape:?} and strides {strides:?} (in elements) is not first-major; \
         expected the outermost dimension to have the largest stride"
    )]
    NotFirstMajor {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        strides: Vec<isize>,
    },

    /// A 0-dimensional tensor cannot become an array: it has no length dimension.
    #[error(
        "tensor is 0-dimensional; expected at least 1 dimension (the outermost becomes the \
         array length)"
    )]
    ZeroDimensional,

    /// A tensor whose elements are not densely packed (gaps, overlaps, zero or negative strides),
    /// refused because the caller did not allow a copy.
    #[error(
        "tensor with shape {shape:?} and strides {strides:?} (in elements) is not dense (its \
         strides leave gaps, overlap, or are zero or negative); expected a dense first-major \
         layout, or set `allow_copy` in TensorToArrayOptions to copy it"
    )]
    GappedStrides {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        strides: Vec<isize>,
    },

    /// The conversion needs a copy and the caller did not allow one.
    #[error("{reason} requires a copy, which is not allowed; set `allow_copy` in {options}")]
    CopyRequired {
        /// What needs the copy, for example `"concatenating 3 chunks"`.
        reason: String,
        /// The options struct whose `allow_copy` allows the copy, for example `"ConcatOptions"`.
        options: &'static str,
    },

    /// A tensor dtype that has no Arrow type with the same memory layout.
    #[error("{}", unsupported_dtype_message(*dtype))]
    UnsupportedDType {
        /// The tensor's dtype.
        dtype: DType,
    },

    /// Metadata or storage that does not describe a valid `arrow.fixed_shape_tensor`.
    #[error("invalid arrow.fixed_shape_tensor: {reason}")]
    InvalidExtension {
        /// What is wrong, with what was expected and what was found.
        reason: String,
    },

    /// Metadata or storage that does not describe a valid `arrow.variable_shape_tensor`, or
    /// tensors that cannot form one column.
    #[error("invalid arrow.variable_shape_tensor: {reason}")]
    InvalidVariableShapeTensor {
        /// What is wrong, with what was expected and what was found.
        reason: String,
    },

    /// A null row of a variable-shape tensor column, which has no tensor.
    #[error("row {index} is null; expected a valid row (a null row has no tensor)")]
    NullTensor {
        /// The index of the null row.
        index: usize,
    },

    /// A dtype asked of a table's tensor ([`TableToTensorOptions::dtype`](crate::TableToTensorOptions::dtype))
    /// that it cannot have.
    #[error("a table's tensor cannot have dtype {dtype}: {reason}")]
    TableDType {
        /// The dtype asked for.
        dtype: DType,
        /// Why not, and what it may be.
        reason: &'static str,
    },

    /// A dimension too large for an Arrow fixed-size list.
    #[error("fixed-size list size {size} is too large; expected at most {MAX_LIST_SIZE}")]
    ListSizeOverflow {
        /// The size asked for (an extent, or a product of extents).
        size: usize,
    },

    /// Chunks to concatenate do not share one data type.
    #[error("chunk {index} has type {found}; expected {expected}, the type of chunk 0")]
    MixedChunkTypes {
        /// The index of the first chunk whose type differs.
        index: usize,
        /// The type of chunk 0.
        expected: DataType,
        /// The type of chunk `index`.
        found: DataType,
    },

    /// No chunks were given, so the data type is unknown.
    #[error("no chunks given; expected at least one chunk (the data type comes from chunk 0)")]
    NoChunks,

    /// A record batch or struct array without columns: the tensor's dtype would be unknown.
    #[error(
        "no columns given; expected at least one numeric column (the tensor's dtype comes from \
         the columns)"
    )]
    NoColumns,

    /// A column of a record batch or struct array whose type cannot become tensor elements.
    #[error("cannot convert column {column:?} of type {data_type}: {reason}; expected {expected}")]
    UnsupportedColumnType {
        /// The column's name.
        column: String,
        /// The column's type.
        data_type: DataType,
        /// Why it cannot be converted.
        reason: &'static str,
        /// The types the conversion accepts.
        expected: &'static str,
    },

    /// Nulls in a column converted with `null_to_nan` off.
    #[error(
        "nulls are not allowed: found {} in column {column:?}; expected none, or set the \
         `null_to_nan` option to write them as NaN",
        nulls(*null_count)
    )]
    ColumnNulls {
        /// The column's name.
        column: String,
        /// How many nulls it holds (a null struct row counts in every column).
        null_count: usize,
    },

    /// Nulls in a table converted to one tensor per column, and the caller did not allow them.
    #[error(
        "nulls are not allowed: found {} in {location}; expected none, or set the `allow_nulls` \
         option to accept them (null slots then hold unspecified values)",
        nulls(*null_count)
    )]
    TableNulls {
        /// How many nulls were found at `location`.
        null_count: usize,
        /// Where they were found.
        location: NullLocation,
    },

    /// Columns that do not all have the same number of rows.
    #[error(
        "column {column:?} has {}; expected {expected}, the length of column 0",
        plural(*found, "row", "rows")
    )]
    ColumnLength {
        /// The name of the first column whose length differs.
        column: String,
        /// Its length.
        found: usize,
        /// The length of column 0.
        expected: usize,
    },

    /// Column names and columns that do not pair up.
    #[error(
        "found {} for {}; expected one name per column",
        plural(*names, "column name", "column names"),
        plural(*columns, "column", "columns")
    )]
    ColumnNames {
        /// How many names were given.
        names: usize,
        /// How many columns were given.
        columns: usize,
    },

    /// Offsets that do not delimit rows of a ragged tensor or list array: a dtype other than
    /// int32 or int64, a first offset other than 0, a decreasing pair, or a last offset other
    /// than the number of values.
    #[error("invalid list offsets: {reason}")]
    InvalidOffsets {
        /// What is wrong, with what was expected and what was found.
        reason: String,
    },

    /// A null row in a list array, and the caller did not allow nulls.
    #[error(
        "nulls are not allowed: row {row} of the list array is null ({}); expected none, or set \
         `allow_nulls` in ListToRaggedOptions to read null rows as empty rows",
        plural(*null_count, "null row in all", "null rows in all")
    )]
    NullRow {
        /// The position of the first null row.
        row: usize,
        /// How many rows are null.
        null_count: usize,
    },

    /// An Arrow type that is not a variable-length list.
    #[error(
        "cannot read {data_type} as a ragged tensor; expected a list, large list, list view or \
         large list view"
    )]
    NotAList {
        /// The type found.
        data_type: DataType,
    },

    /// A row index or range outside a ragged tensor.
    #[error("rows {start}..{end} are out of range; expected rows within 0..{rows}")]
    RowsOutOfRange {
        /// The first row asked for.
        start: usize,
        /// One past the last row asked for.
        end: usize,
        /// The number of rows.
        rows: usize,
    },

    /// Ragged tensors combined into one whose values differ in dtype or row shape.
    #[error(
        "piece {index} has values of dtype {found_dtype} with element shape {found_shape:?}; \
         expected dtype {expected_dtype} with element shape {expected_shape:?}, those of piece 0"
    )]
    MixedRaggedPieces {
        /// The index of the first piece that differs.
        index: usize,
        /// The dtype of piece 0.
        expected_dtype: DType,
        /// The element shape (the values' shape after the first dimension) of piece 0.
        expected_shape: Vec<usize>,
        /// The dtype of piece `index`.
        found_dtype: DType,
        /// The element shape of piece `index`.
        found_shape: Vec<usize>,
    },

    /// More values than offsets of the chosen width can count.
    #[error(
        "{what} need offsets up to {total}, which do not fit {dtype}; expected at most {}",
        offset_limit(*dtype)
    )]
    OffsetOverflow {
        /// What the offsets are for, for example `"cu_seqlens"`.
        what: &'static str,
        /// The largest offset needed.
        total: u128,
        /// The offsets' dtype.
        dtype: DType,
    },

    /// No ragged tensors (or rows) given, so the dtype is unknown.
    #[error(
        "no {what} given; expected at least one (the dtype and element shape come from the first)"
    )]
    NoPieces {
        /// What was expected: `"pieces"` or `"rows"`.
        what: &'static str,
    },

    /// A pad value that the values' dtype cannot represent.
    #[error("pad value {value} does not fit dtype {dtype}; expected {expected}")]
    PadValue {
        /// The pad value, as given.
        value: String,
        /// The values' dtype.
        dtype: DType,
        /// What the dtype accepts.
        expected: &'static str,
    },

    /// Padding or unpadding options or arguments that contradict each other.
    #[error("invalid padding: {reason}")]
    InvalidPadding {
        /// What is wrong, with what was expected and what was found.
        reason: String,
    },

    /// An error from arrow-rs while assembling an array.
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),

    /// An [`ImageSpec`](crate::images::ImageSpec) field out of range or at odds with another.
    #[cfg(feature = "images")]
    #[error("invalid image spec field `{field}`: {reason}")]
    InvalidImageSpec {
        /// The field, as the spec names it.
        field: &'static str,
        /// What was expected and what was found.
        reason: String,
    },

    /// A column whose type cannot hold encoded images.
    #[cfg(feature = "images")]
    #[error("cannot read {data_type} as encoded images; expected {expected}")]
    UnsupportedImageColumn {
        /// The column's type.
        data_type: DataType,
        /// The types accepted.
        expected: &'static str,
    },

    /// A row that could not become an image; the reason is the source.
    #[cfg(feature = "images")]
    #[error("cannot decode image at row {}{}", thousands(*row), of_column(column))]
    ImageRow {
        /// The row, as the caller numbers it.
        row: u64,
        /// The column's name; empty for an array of no name, which the message then leaves out.
        column: String,
        /// Why: one of the image variants below, or an allocation failure.
        source: Box<Error>,
    },

    /// A null row, or a struct row with neither bytes nor a path.
    #[cfg(feature = "images")]
    #[error("the row is null; expected encoded bytes or a path (`OnError::Skip` drops such rows)")]
    NullImage,

    /// Data that is none of the formats read.
    #[cfg(feature = "images")]
    #[error(
        "unknown image format (the data starts with {start:02x?}); expected JPEG, PNG, WebP, GIF \
         or BMP"
    )]
    UnknownImageFormat {
        /// The first bytes of the data (at most 8).
        start: Vec<u8>,
    },

    /// An image whose header claims no pixels, or more than the spec allows.
    #[cfg(feature = "images")]
    #[error(
        "image of {width} x {height} pixels is refused; expected at least 1 and at most \
         {max_pixels} pixels (`ImageSpec::max_pixels`)"
    )]
    ImageSize {
        /// The width in the header.
        width: u32,
        /// The height in the header.
        height: u32,
        /// The limit.
        max_pixels: u64,
    },

    /// The codec refused the data; the codec's error is the source.
    #[cfg(feature = "images")]
    #[error("malformed {format} data")]
    ImageCodec {
        /// The format the data announced.
        format: &'static str,
        /// The codec's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A codec panicked on the data (a bug of the codec, caught).
    #[cfg(feature = "images")]
    #[error("the image decoder panicked: {message}")]
    ImageCodecPanicked {
        /// The panic's message.
        message: String,
    },

    /// The file of a path row could not be read.
    #[cfg(feature = "images")]
    #[error("cannot read image file {path:?}")]
    ImageFile {
        /// The file, resolved against the image root.
        path: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// The resampler refused its input (a bug: the plans are checked to fit).
    #[cfg(feature = "images")]
    #[error("cannot resample image: {reason}")]
    ImageResize {
        /// The resampler's message.
        reason: String,
    },
}

/// Where [`Error::Nulls`] found nulls in an array, or [`Error::TableNulls`] in a table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NullLocation {
    /// An array, at a nesting level of fixed-size lists.
    Array {
        /// 0 for the array's own slots, `n` for the child values `n` fixed-size lists down.
        depth: usize,
    },
    /// The rows of the table itself: the validity of a struct array.
    Rows,
    /// A column, at a nesting level of fixed-size lists.
    Column {
        /// The column's name.
        column: String,
        /// 0 for the column's own slots, `n` for the child values `n` fixed-size lists down.
        depth: usize,
    },
}

impl std::fmt::Display for NullLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NullLocation::Array { depth: 0 } => write!(f, "the array"),
            NullLocation::Array { depth } => write!(f, "the child values at depth {depth}"),
            NullLocation::Rows => write!(f, "the struct array (null rows)"),
            NullLocation::Column { column, depth: 0 } => write!(f, "column {column:?}"),
            NullLocation::Column { column, depth } => {
                write!(f, "the child values at depth {depth} of column {column:?}")
            }
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error with its chain of causes, for printing on one line:
    /// `format!("{}", error.report())` gives every message from this one to the innermost cause,
    /// joined by `: `, as anyhow's `{:#}` does (this error's own `Display` describes its level
    /// only).
    pub fn report(&self) -> crate::Report<'_> {
        crate::Report::new(self)
    }

    /// Whether this is an allocation that failed (the process's memory, not the data): never a
    /// row that `on_error="skip"` may drop, since whether it fails depends on what else the
    /// process holds at that moment, not on the row.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(
            self,
            Error::Tensor(
                arrow_dlpack_tensor::Error::Allocation { .. }
                    | arrow_dlpack_tensor::Error::OutOfMemory { .. }
            )
        )
    }
}

/// `count` and the noun in the number it takes: `1 null`, `2 nulls`.
pub(crate) fn plural(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// ` of column "name"`, or nothing for a column of no name (an array given alone).
#[cfg(feature = "images")]
fn of_column(column: &str) -> String {
    if column.is_empty() {
        String::new()
    } else {
        format!(" of column {column:?}")
    }
}

/// `1,234,567`: a row number as people read it.
#[cfg(feature = "images")]
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `1 null`, `2 nulls`.
fn nulls(count: usize) -> String {
    plural(count, "null", "nulls")
}

/// The row-major strides of `shape`, for messages; empty when they overflow.
fn expected_row_major_strides(shape: &[usize]) -> Vec<isize> {
    arrow_dlpack_tensor::layout::row_major_strides(shape).unwrap_or_default()
}

/// The largest offset `dtype` can hold, for messages.
fn offset_limit(dtype: DType) -> String {
    match dtype {
        DType::Int32 => i32::MAX.to_string(),
        DType::Int64 => i64::MAX.to_string(),
        other => format!("the range of {other}"),
    }
}

fn unsupported_dtype_message(dtype: DType) -> String {
    let why = match dtype {
        DType::Bool => {
            "Arrow booleans are bit-packed, one bit per element, so a bool tensor of one byte per \
             element has no Arrow type that can share its memory"
        }
        DType::BFloat16 => "Arrow has no bfloat16 type",
        DType::Complex64 | DType::Complex128 => "Arrow has no complex type",
        _ => "Arrow has no type with this layout",
    };
    format!(
        "tensor dtype {dtype} has no Arrow equivalent: {why}; expected int8, int16, int32, \
         int64, uint8, uint16, uint32, uint64, float16, float32 or float64"
    )
}

#[cfg(test)]
mod tests;
