//! The one error type of the loader.

use std::path::PathBuf;

use arrow_schema::DataType;

/// Everything that can go wrong while planning or producing batches.
///
/// Messages are lowercase, say what failed, and name what was expected and what was found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A [`BatchSpec`](crate::BatchSpec) that cannot be carried out.
    #[error("invalid batch spec: {reason}")]
    InvalidSpec {
        /// What is wrong, with what was expected and what was found.
        reason: String,
    },

    /// A file that could not be opened, mapped or read.
    #[error("cannot read {}: {source}", path.display())]
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
    #[error("cannot read parquet file {}: {source}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet reader's error.
        source: parquet::errors::ParquetError,
    },

    /// A Parquet row group whose data could not be decoded.
    #[error("cannot decode row group {row_group} of parquet file {}: {source}", path.display())]
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
    #[error("cannot start a loader thread: {source}")]
    Thread {
        /// The operating system's error.
        source: std::io::Error,
    },

    /// An error from arrow-rs (a record-batch reader, an IPC decoder, building an array).
    #[error(transparent)]
    Arrow(#[from] arrow_schema::ArrowError),

    /// A column or group that could not become a tensor (its type, its nulls, its layout).
    #[error("cannot load {column:?}: {source}")]
    Column {
        /// The name of the output: the column, or the group.
        column: String,
        /// Why, in the words of the Arrow layer.
        source: arrow_dlpack::Error,
    },

    /// An error of the tensor layer (building the tensor of a copied batch).
    #[error(transparent)]
    Tensor(#[from] arrow_dlpack_tensor::Error),

    /// A column the spec names is not in the source's schema.
    #[error("column {column:?} not found; expected one of {available:?}")]
    MissingColumn {
        /// The name asked for.
        column: String,
        /// The columns of the schema.
        available: Vec<String>,
    },

    /// A column whose type the loader cannot turn into a tensor.
    #[error("cannot load column {column:?} of type {data_type}; expected {expected}")]
    UnsupportedColumn {
        /// The column.
        column: String,
        /// Its type.
        data_type: DataType,
        /// What the loader accepts for this kind of output.
        expected: &'static str,
    },

    /// A record batch (or file) whose columns differ from those of the first one.
    #[error("{what} has columns {found}; expected {expected}, the columns of the first batch")]
    SchemaMismatch {
        /// Which file or batch.
        what: String,
        /// Its column names and types.
        found: String,
        /// The first batch's column names and types.
        expected: String,
    },

    /// A source given by path whose kind cannot be told from its extension.
    #[error(
        "cannot tell the format of {} from its extension; expected .arrow, .feather, .ipc, \
         .arrows or .parquet",
        path.display()
    )]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },

    /// A background thread panicked; the panic's message is kept.
    #[error("a loader thread panicked: {message}")]
    Panicked {
        /// The panic's message, or a placeholder when it was not a string.
        message: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
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

/// The message of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}
