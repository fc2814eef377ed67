//! The one error type of the loader.

use std::path::PathBuf;

use arrow_schema::{DataType, Fields, Metadata};

/// Everything that can go wrong while planning or producing batches.
///
/// Messages are lowercase, say what failed, and name what was expected and what was found.
/// A message describes its own level only: the cause of an error that wraps another (a file
/// that cannot be read, a column that cannot become a tensor) is its
/// [`source`](std::error::Error::source), so that a chain printer (`anyhow`'s `{:#}`, a loop over
/// `source()`) prints each text once.
/// The errors of the lower layers convert with `From`, so `?` works on an
/// [`arrow_dlpack::Error`], an [`arrow_dlpack::tensor::Error`] or an
/// [`ArrowError`](arrow_schema::ArrowError) in a function that returns this
/// crate's [`Result`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A [`BatchSpec`](crate::BatchSpec) that cannot be carried out.
    #[error("invalid batch spec: {reason}")]
    InvalidSpec {
        /// What is wrong, with what was expected and what was found.
        reason: String,
    },

    /// A saved [`LoaderState`](crate::LoaderState) that does not fit this loader (other
    /// arguments, another source, a newer format) or that is corrupt.
    #[error("cannot resume from the state: {reason}")]
    InvalidState {
        /// What differs or is wrong, with what was expected.
        reason: String,
    },

    /// A file that could not be opened, mapped or read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// An Arrow IPC file or stream that is not valid Arrow IPC.
    #[error("cannot read arrow ipc {}: {reason}", path.display())]
    Ipc {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A Parquet file that could not be read or decoded.
    #[error("cannot read parquet file {}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet reader's error.
        source: parquet::errors::ParquetError,
    },

    /// A Parquet row group whose data could not be decoded.
    #[error("cannot decode row group {row_group} of parquet file {}", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// The row group.
        row_group: usize,
        /// The decoder's error.
        source: arrow_schema::ArrowError,
    },

    /// A Parquet column chunk whose metadata or page headers declare more than its bytes hold,
    /// found before it is decoded.
    #[error(
        "parquet file {} is corrupt in row group {row_group}, column {column:?}: {reason}",
        path.display()
    )]
    CorruptParquet {
        /// The file.
        path: PathBuf,
        /// The row group.
        row_group: usize,
        /// The column's path in the Parquet schema.
        column: String,
        /// What the file declares, and what it can hold.
        reason: String,
    },

    /// A Parquet column chunk compressed with a codec this build leaves out: each codec is a
    /// feature of this crate (`snappy`, `lz4`, `zstd`, `brotli`, `gzip`), all on by default.
    #[error(
        "parquet file {} compresses column {column:?} of row group {row_group} with {codec}, \
         which this build cannot read; expected a codec compiled in (enable the `{feature}` \
         feature of arrow-dlpack-loader)",
        path.display()
    )]
    UnsupportedCodec {
        /// The file.
        path: PathBuf,
        /// The first row group that uses the codec.
        row_group: usize,
        /// The column's path in the Parquet schema.
        column: String,
        /// The codec, as Parquet names it.
        codec: String,
        /// The feature of this crate that reads it.
        feature: &'static str,
    },

    /// A unit of a file (a row group, a record batch) that decoded to a number of rows other
    /// than its metadata declares.
    #[error("{unit} of {} holds {found} rows; its metadata declares {expected}", path.display())]
    RowCount {
        /// The file.
        path: PathBuf,
        /// The row group or record batch, in words.
        unit: String,
        /// The rows decoded.
        found: u64,
        /// The rows declared.
        expected: u64,
    },

    /// A file that changed between the planning of the loader and the reading of its data.
    #[error(
        "{} changed after the loader read its metadata: {change}; expected the file as planned",
        path.display()
    )]
    FileChanged {
        /// The file.
        path: PathBuf,
        /// What changed.
        change: String,
    },

    /// A panic while decoding a unit of a file, caught on a loader thread.
    #[error("decoding {unit} of {} failed with an internal error: {message}", path.display())]
    DecodePanicked {
        /// The file.
        path: PathBuf,
        /// The row group or record batch, in words.
        unit: String,
        /// The panic's message.
        message: String,
    },

    /// A background thread could not be started.
    #[error("cannot start a loader thread")]
    Thread {
        /// The operating system's error.
        source: std::io::Error,
    },

    /// An error from arrow-rs (a record-batch reader, an IPC decoder, building an array).
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),

    /// Nulls that a file's metadata (Parquet statistics, IPC record-batch headers) declares in a
    /// column whose batches would refuse them ([`Error::Column`], in `source`), refused when the
    /// loader is made.
    #[error("the metadata of {} declares nulls that the batches would refuse", path.display())]
    DeclaredNulls {
        /// The first file that declares them.
        path: PathBuf,
        /// The refusal the batch holding them would have given.
        source: Box<Error>,
    },

    /// A batch that holds a null its column (or group) refuses, in a file the source's metadata
    /// did not say held one: where the first is.
    #[error("row {} of {} is null", thousands(*row), path.display())]
    NullInFile {
        /// The file holding the row.
        path: PathBuf,
        /// The row, counted in its file.
        row: u64,
        /// The refusal of the column or group.
        source: Box<Error>,
    },

    /// A column or group that could not become a tensor (its type, its nulls, its layout).
    #[error("cannot load {column:?}")]
    Column {
        /// The name of the output: the column, or the group.
        column: String,
        /// Why, in the words of the Arrow layer.
        source: arrow_dlpack::Error,
    },

    /// An error of the tensor layer (building the tensor of a copied batch).
    #[error(transparent)]
    Tensor(#[from] arrow_dlpack_tensor::Error),

    /// An error of the Arrow layer that is about no one column of the spec: what `?` makes of an
    /// [`arrow_dlpack::Error`] in a caller's code (the loader itself reports a column's error as
    /// [`Error::Column`], naming the column).
    #[error(transparent)]
    Convert(arrow_dlpack::Error),

    /// A column the spec names is not in the source's schema.
    #[error("column {column:?} not found; expected one of {available:?}")]
    MissingColumn {
        /// The name asked for.
        column: String,
        /// The columns of the schema.
        available: Vec<String>,
    },

    /// A tensor asked of a [`TensorBatch`](crate::TensorBatch) by a name it does not have.
    #[error("the batch has no tensor named {name:?}; expected one of {available:?}")]
    MissingTensor {
        /// The name asked for.
        name: String,
        /// The names of the batch's tensors.
        available: Vec<String>,
    },

    /// A column whose type the loader cannot turn into a tensor.
    #[error(
        "cannot load column {column:?} of type {data_type}{}; expected {expected}{}",
        extension_note(metadata),
        selected_by(*every_column)
    )]
    UnsupportedColumn {
        /// The column.
        column: String,
        /// Its type (an extension type's storage type).
        data_type: DataType,
        /// The column field's metadata, which holds an extension type's name and parameters.
        metadata: Metadata,
        /// Whether the spec names the column as a sequence ([`BatchSpec::sequence`](crate::BatchSpec::sequence)),
        /// so that a variable-length list is what was expected.
        as_sequence: bool,
        /// What the loader accepts for this kind of output.
        expected: &'static str,
        /// Whether the column is loaded because [`BatchSpec::columns`](crate::BatchSpec::columns)
        /// is `None` (every column not in a group), rather than named.
        every_column: bool,
    },

    /// A null row in a sequence column, when the spec does not allow nulls.
    #[error(
        "row {} {} is null in sequence column {column:?}; expected none, or set \
         BatchSpec::allow_nulls to read null rows as empty rows",
        thousands(*row),
        row_place(file.as_deref(), *item)
    )]
    NullSequenceRow {
        /// The sequence column.
        column: String,
        /// The file holding the row, for a source of files.
        file: Option<PathBuf>,
        /// The unit holding the row (a row group, a record batch), numbered in the order the
        /// shard reads its units (as [`Position`](crate::Position) counts them); `None` for
        /// record batches collated on their own.
        item: Option<u64>,
        /// The row, counted in its file (among its unit's rows without a file, among the record
        /// batch's without a unit).
        row: u64,
    },

    /// A file read as an Arrow IPC file that does not start as one (an IPC stream, or another
    /// format), or that starts as one but is too short to hold its footer.
    #[error(
        "cannot read arrow ipc {}: the file is {len} bytes and {}; expected an arrow ipc file \
         (an ipc stream is read as Source::IpcStreams)",
        path.display(),
        if *truncated {
            "too short for one (ARROW1, a footer and ARROW1 again)"
        } else {
            "does not start with ARROW1"
        }
    )]
    NotIpcFile {
        /// The file.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// Whether it starts with `ARROW1` but is too short to be a whole file.
        truncated: bool,
    },

    /// A record batch (or file) whose columns differ from those of the first one.
    #[error(
        "{what} has columns {}; expected {}, those of what was read before it",
        describe_fields(found),
        describe_fields(expected)
    )]
    SchemaMismatch {
        /// Which file or batch.
        what: String,
        /// Its columns: names, types and extension metadata.
        found: Fields,
        /// The columns of what was read before it (the first file, stream or record batch).
        expected: Fields,
    },

    /// A source given by path whose kind cannot be told from its extension, nor (for a local
    /// file read) from its first bytes.
    #[error(
        "cannot tell the format of {} from its extension{}; expected .arrow, .feather, .ipc, \
         .arrows, .parquet or .pq",
        path.display(),
        if *read { " or its first bytes (not PAR1, ARROW1 or an arrow ipc stream's)" } else { "" }
    )]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Whether its first bytes were read, and told nothing either.
        read: bool,
    },

    /// A background thread panicked; the panic's message is kept.
    #[error("a loader thread panicked: {message}")]
    Panicked {
        /// The panic's message, or a placeholder when it was not a string.
        message: String,
    },

    /// A source named in a way the loader cannot use: a URL that is not one of object storage,
    /// a storage option that is unknown or has a bad value, a store that cannot be made.
    #[error("cannot use {what}: {reason}")]
    InvalidSource {
        /// The URL or option, in words.
        what: String,
        /// What is wrong, with what was expected.
        reason: String,
    },

    /// A `tokenizer.json` that the `tokenizers` crate cannot read.
    #[error("cannot read the tokenizer of {what}")]
    Tokenizer {
        /// The file, or the JSON text, in words.
        what: String,
        /// The `tokenizers` crate's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A null text, refused without `TokenizeOptions::allow_nulls`.
    #[error(
        "the text at row {row} is null; expected a string (set TokenizeOptions::allow_nulls to \
         tokenize it as an empty text)"
    )]
    NullText {
        /// The row, counted from the start of the column or source.
        row: u64,
    },

    /// A text that the tokenizer could not encode.
    #[error("cannot tokenize the text at row {row}")]
    Tokenize {
        /// The row, counted from the start of the column or source.
        row: u64,
        /// The `tokenizers` crate's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A column whose values are not of the kind an operation reads (texts to tokenize).
    #[error("cannot read values of type {data_type}; expected {expected}")]
    UnsupportedValues {
        /// The column's type.
        data_type: DataType,
        /// What the operation reads.
        expected: &'static str,
    },

    /// A file that could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The writer's error (Arrow IPC, Parquet or the operating system's).
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A row of an image column ([`BatchSpec::images`](crate::BatchSpec::images)) that could not
    /// become an image, with errors raised; the reason is the source.
    #[error(
        "cannot decode image at row {} of column {column:?} {}",
        thousands(*row),
        row_place(file.as_deref(), *item)
    )]
    ImageRow {
        /// The image column.
        column: String,
        /// The row, counted among its file's rows where the source is files, else among its
        /// unit's (its record batch's without a unit).
        row: u64,
        /// The file that holds the row, for a source of files.
        file: Option<PathBuf>,
        /// The unit holding the row, numbered in the order the shard reads its units; `None`
        /// for record batches collated on their own.
        item: Option<u64>,
        /// Why: the Arrow layer's error about the image (malformed, too large, unreadable file).
        source: Box<arrow_dlpack::Error>,
    },

    /// A path of an image column, relative, where the source is no file to resolve it against
    /// and no [`BatchSpec::image_root`](crate::BatchSpec::image_root) is set.
    #[error(
        "cannot read image at row {} of column {column:?} {}: its path {path:?} is relative and \
         the source has no directory to resolve it against; expected BatchSpec::image_root",
        thousands(*row),
        row_place(None, *item)
    )]
    RelativeImagePath {
        /// The image column.
        column: String,
        /// The row, counted among its unit's rows.
        row: u64,
        /// The unit holding the row, as for [`Error::ImageRow`].
        item: Option<u64>,
        /// The path as the row holds it.
        path: String,
    },
}

/// `1,234,567`: a row number as messages print it.
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

/// Where a row is, after its number: `in train.parquet`, `of record batch 3 of the stream (...)`, `of the
/// record batch`.
fn row_place(file: Option<&std::path::Path>, item: Option<u64>) -> String {
    match (file, item) {
        (Some(file), _) => format!("in {}", file.display()),
        (None, Some(item)) => {
            format!("of record batch {item} of the stream (as this shard reads it)")
        }
        (None, None) => "of the record batch".to_string(),
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The Arrow layer's error, with its tensor and arrow-rs errors kept as the loader's own
/// [`Error::Tensor`] and [`Error::Arrow`], so that one cause is matched in one place.
impl From<arrow_dlpack::Error> for Error {
    fn from(error: arrow_dlpack::Error) -> Self {
        match error {
            arrow_dlpack::Error::Tensor(inner) => Error::Tensor(inner),
            arrow_dlpack::Error::Arrow(inner) => Error::Arrow(inner),
            other => Error::Convert(other),
        }
    }
}

impl Error {
    /// The error with its chain of causes, for printing on one line:
    /// `format!("{}", error.report())` gives `cannot read data/nope.parquet: No such file or
    /// directory (os error 2)`, every message from this one to the innermost cause joined by
    /// `: `, as anyhow's `{:#}` does (this error's own `Display` describes its level only).
    pub fn report(&self) -> arrow_dlpack::Report<'_> {
        arrow_dlpack::Report::new(self)
    }

    /// Wraps an I/O error with the path it is about.
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Wraps a Parquet error with the path it is about.
    pub(crate) fn parquet(path: &std::path::Path, source: parquet::errors::ParquetError) -> Self {
        Error::Parquet {
            path: path.to_path_buf(),
            source,
        }
    }

    /// An IPC error about `path`.
    pub(crate) fn ipc(path: &std::path::Path, reason: impl Into<String>) -> Self {
        Error::Ipc {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    /// Wraps an error of the Arrow layer with the output it is about.
    pub(crate) fn column(column: &str, source: impl Into<arrow_dlpack::Error>) -> Self {
        Error::Column {
            column: column.to_string(),
            source: source.into(),
        }
    }

    /// The error for a panic caught while decoding `unit` of `path`.
    pub(crate) fn decode_panic(
        path: &std::path::Path,
        unit: String,
        payload: Box<dyn std::any::Any + Send>,
    ) -> Self {
        Error::DecodePanicked {
            path: path.to_path_buf(),
            unit,
            message: panic_message(payload.as_ref()),
        }
    }

    /// The error for a caught panic payload.
    pub(crate) fn from_panic(payload: Box<dyn std::any::Any + Send>) -> Self {
        Error::Panicked {
            message: panic_message(payload.as_ref()),
        }
    }
}

/// What [`Error::UnsupportedColumn`] adds when the column was not named but loaded as one of
/// every column: the option that selects the columns.
fn selected_by(every_column: bool) -> &'static str {
    if every_column {
        "; it is loaded because BatchSpec::columns is None, which loads every column not in a \
         group: name the columns to load with BatchSpec::columns"
    } else {
        ""
    }
}

/// The key under which Arrow stores an extension type's name in a field's metadata.
pub(crate) const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";

/// The key under which Arrow stores an extension type's serialized parameters.
pub(crate) const EXTENSION_METADATA_KEY: &str = "ARROW:extension:metadata";

/// ` (extension NAME)` for a field whose metadata names an extension type, else nothing.
fn extension_note(metadata: &Metadata) -> String {
    metadata
        .get(EXTENSION_NAME_KEY)
        .map(|name| format!(" (extension {name})"))
        .unwrap_or_default()
}

/// `[name: type, ...]`, with an extension type's name and metadata after its storage type.
pub(crate) fn describe_fields(fields: &Fields) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|field| {
            let metadata = field.metadata();
            match metadata.get(EXTENSION_NAME_KEY) {
                Some(name) => format!(
                    "{}: {} ({name} {})",
                    field.name(),
                    field.data_type(),
                    metadata
                        .get(EXTENSION_METADATA_KEY)
                        .map_or("", String::as_str)
                ),
                None => format!("{}: {}", field.name(), field.data_type()),
            }
        })
        .collect();
    format!("[{}]", fields.join(", "))
}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests;
