//! The one place where failures become Python exceptions, variant by variant.
//!
//! This file has the classes and the mappings of the tensor, Arrow and Arrow C layers;
//! `messages.rs` the messages in Python's words, built from the errors' fields; `loader.rs`
//! the loader's errors.
//!
//! Every exception this package raises is an instance of one of four classes, created when the
//! module is first imported:
//!
//! | class | bases | raised for |
//! |---|---|---|
//! | `ArrowDLPackError` | `Exception` | never directly: the common base |
//! | `ArrowDLPackTypeError` | `ArrowDLPackError`, `TypeError` | export of data with nulls or of a type DLPack cannot carry; an object with no DLPack or Arrow protocol; a table `Tensor.from_arrow` cannot convert (as PyArrow's `to_tensor`) |
//! | `ArrowDLPackValueError` | `ArrowDLPackError`, `ValueError` | import that cannot become the requested object; `to_tensor()` on data with nulls |
//! | `ArrowDLPackBufferError` | `ArrowDLPackError`, `BufferError` | a device other than the CPU; a `stream`; `copy=False` when a copy is needed |
//!
//! Each class subclasses the builtin it stands for, so code written against PyArrow and numpy's
//! retry logic (which catches `TypeError` from `__dlpack__`) keep working.
//! Allocation failures raise the builtin `MemoryError`.
//! No Rust panic reaches Python as pyo3's `PanicException`: the entry points that read foreign
//! data run under [`no_panic`], which makes any panic an `ArrowDLPackValueError`.

use std::fmt::Display;

use arrow_dlpack_tensor::Error as TensorError;
use pyo3::exceptions::{PyBufferError, PyException, PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

mod loader;
mod messages;
mod state;

pub(crate) use loader::loader_error;
use messages::{python_message, tensor_message};
pub(crate) use state::state_message;

/// The exception classes of the package, created once per interpreter.
struct Classes {
    base: Py<PyType>,
    type_error: Py<PyType>,
    value_error: Py<PyType>,
    buffer_error: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// The kind of exception a failure maps to; the class is one of [`Classes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Type,
    Value,
    Buffer,
}

/// What the failing call was doing, where one error variant maps to different exceptions.
///
/// Nulls are the one case: exporting data with nulls through `__dlpack__` is a `TypeError` (as in
/// PyArrow), while `to_tensor()` on data with nulls is a `ValueError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `__dlpack__` and the DLPack C exchange API.
    Export,
    /// `to_tensor()`.
    ToTensor,
    /// `from_dlpack`, `from_tensor`, `array()` and everything else.
    Import,
}

/// Creates `name(*bases)` with `__module__` set to `arrow_dlpack`.
fn new_class(
    py: Python<'_>,
    name: &str,
    doc: &str,
    bases: Bound<'_, PyTuple>,
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "arrow_dlpack")?;
    namespace.set_item("__doc__", doc)?;
    let class = py
        .get_type::<PyType>()
        .call1((name, bases, namespace))?
        .cast_into::<PyType>()?;
    Ok(class.unbind())
}

fn classes(py: Python<'_>) -> PyResult<&'static Classes> {
    CLASSES.get_or_try_init(py, || {
        let base = new_class(
            py,
            "ArrowDLPackError",
            "Base class of every exception raised by arrow_dlpack.",
            PyTuple::new(py, [py.get_type::<PyException>()])?,
        )?;
        let derived = |name: &str, doc: &str, builtin: Bound<'_, PyType>| {
            new_class(
                py,
                name,
                doc,
                PyTuple::new(py, [base.bind(py).clone(), builtin])?,
            )
        };
        Ok::<_, PyErr>(Classes {
            type_error: derived(
                "ArrowDLPackTypeError",
                "Data that DLPack cannot carry (nulls, an unsupported type), or an object with no \
                 DLPack or Arrow protocol.",
                py.get_type::<PyTypeError>(),
            )?,
            value_error: derived(
                "ArrowDLPackValueError",
                "A tensor or array that cannot become the requested object, or nulls refused by \
                 to_tensor().",
                py.get_type::<PyValueError>(),
            )?,
            buffer_error: derived(
                "ArrowDLPackBufferError",
                "A device other than the CPU, a stream, or copy=False when a copy is needed.",
                py.get_type::<PyBufferError>(),
            )?,
            base,
        })
    })
}

/// Adds the exception classes to the native module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let classes = classes(py)?;
    module.add("ArrowDLPackError", classes.base.bind(py))?;
    module.add("ArrowDLPackTypeError", classes.type_error.bind(py))?;
    module.add("ArrowDLPackValueError", classes.value_error.bind(py))?;
    module.add("ArrowDLPackBufferError", classes.buffer_error.bind(py))?;
    Ok(())
}

/// An exception of `kind` with `message`.
fn raise(kind: Kind, message: impl Display) -> PyErr {
    let message = message.to_string();
    Python::attach(|py| match classes(py) {
        Ok(classes) => {
            let class = match kind {
                Kind::Type => &classes.type_error,
                Kind::Value => &classes.value_error,
                Kind::Buffer => &classes.buffer_error,
            };
            PyErr::from_type(class.bind(py).clone(), message)
        }
        Err(error) => error,
    })
}

/// `ArrowDLPackTypeError(message)`.
pub(crate) fn type_error(message: impl Display) -> PyErr {
    raise(Kind::Type, message)
}

/// `ArrowDLPackValueError(message)`.
pub(crate) fn value_error(message: impl Display) -> PyErr {
    raise(Kind::Value, message)
}

/// `ArrowDLPackBufferError(message)`.
pub(crate) fn buffer_error(message: impl Display) -> PyErr {
    raise(Kind::Buffer, message)
}

/// Maps an error of the tensor crate, variant by variant.
///
/// These arise when a foreign DLPack tensor is validated on import, or when a tensor is built or
/// exported; none of them depends on the operation.
pub(crate) fn tensor_error(error: TensorError) -> PyErr {
    match tensor_kind(&error) {
        Some(kind) => raise(kind, tensor_message(&error)),
        None => PyMemoryError::new_err(error.to_string()),
    }
}

/// The exception kind of a tensor error; `None` for `MemoryError`.
fn tensor_kind(error: &TensorError) -> Option<Kind> {
    let kind = match error {
        // Memory that is not host memory: the device rule, as for `dl_device`; reading it would
        // need a device move.
        TensorError::UnsupportedDevice { .. } | TensorError::DeviceMemory { .. } => Kind::Buffer,
        // The producer's tensor cannot be represented (dtype, version, malformed metadata).
        TensorError::UnknownTypeCode { .. }
        | TensorError::UnsupportedBits { .. }
        | TensorError::UnsupportedLanes { .. }
        | TensorError::UnsupportedVersion { .. }
        | TensorError::NullManagedTensor
        | TensorError::InvalidNdim { .. }
        | TensorError::NullShape { .. }
        | TensorError::NegativeExtent { .. }
        | TensorError::StridesLength { .. }
        | TensorError::DimNamesLength { .. }
        | TensorError::Overflow { .. }
        | TensorError::NullData { .. }
        | TensorError::Misaligned { .. }
        | TensorError::BeforeBuffer { .. }
        | TensorError::PastBuffer { .. }
        | TensorError::InvalidPermutation { .. } => Kind::Value,
        TensorError::Allocation { .. } | TensorError::OutOfMemory { .. } => return None,
        // A variant added to the tensor crate after this file was written: a value problem
        // until it is mapped here on purpose.
        _ => Kind::Value,
    };
    Some(kind)
}

/// Maps an error of the arrow-dlpack crate, variant by variant; `operation` decides nulls.
pub(crate) fn arrow_error(error: arrow_dlpack::Error, operation: Operation) -> PyErr {
    use arrow_dlpack::Error as E;
    let kind = match &error {
        E::Tensor(inner) => match tensor_kind(inner) {
            Some(kind) => return raise(kind, tensor_message(inner)),
            None => return PyMemoryError::new_err(error.to_string()),
        },
        // An Arrow type DLPack cannot carry: PyArrow raises a TypeError here too.
        E::UnsupportedType { .. } => Kind::Type,
        // Nulls refused by `__dlpack__` are a TypeError (as in PyArrow); by `to_tensor()`, a
        // ValueError (as in PyArrow).
        E::Nulls { .. } | E::TableNulls { .. } => match operation {
            Operation::Export => Kind::Type,
            Operation::ToTensor | Operation::Import => Kind::Value,
        },
        // A table that `Tensor.from_arrow` cannot convert: PyArrow's `to_tensor` raises a
        // TypeError for each of these (nulls without null_to_nan, a non-numeric column, no
        // columns), so code written for it keeps working.
        E::ColumnNulls { .. } | E::UnsupportedColumnType { .. } | E::NoColumns => Kind::Type,
        // Columns that do not form a table.
        E::ColumnLength { .. } | E::ColumnNames { .. } => Kind::Value,
        // A tensor that cannot become the requested array.
        E::NotOneDimensional { .. }
        | E::TooFewDimensions { .. }
        | E::NotRowMajor { .. }
        | E::NotFirstMajor { .. }
        | E::ZeroDimensional
        | E::UnsupportedDType { .. }
        | E::InvalidExtension { .. }
        | E::InvalidVariableShapeTensor { .. }
        | E::ListSizeOverflow { .. }
        | E::MixedChunkTypes { .. }
        | E::NoChunks
        | E::Arrow(_) => Kind::Value,
        // A null row of a variable-shape tensor column: Python gives None instead of asking.
        E::NullTensor { .. } => Kind::Value,
        // A copy was needed and `copy=False` forbade it.
        E::GappedStrides { .. } | E::CopyRequired { .. } => Kind::Buffer,
        // Ragged tensors and list columns: malformed offsets or lengths, null rows not allowed,
        // pieces or rows that do not match, rows out of range, pad values or padding arguments
        // that contradict the data: all value problems, like the other imports and `to_tensor()`
        // on data with nulls.
        E::InvalidOffsets { .. }
        | E::NullRow { .. }
        | E::MixedRaggedPieces { .. }
        | E::RowsOutOfRange { .. }
        | E::OffsetOverflow { .. }
        | E::NoPieces { .. }
        | E::PadValue { .. }
        | E::InvalidPadding { .. } => Kind::Value,
        // A column that is not a list where a list is needed: its type is wrong.
        E::NotAList { .. } => Kind::Type,
        // Images: a column of another type is a TypeError; a spec value out of range and a row
        // that cannot become an image (null, malformed, too large, unreadable file) are
        // ValueErrors, except an allocation that failed, which is a MemoryError.
        E::UnsupportedImageColumn { .. } => Kind::Type,
        E::ImageRow { source, .. } => match source.as_ref() {
            E::Tensor(inner) if tensor_kind(inner).is_none() => {
                return PyMemoryError::new_err(chain(&error));
            }
            _ => Kind::Value,
        },
        E::InvalidImageSpec { .. }
        | E::NullImage
        | E::UnknownImageFormat { .. }
        | E::ImageSize { .. }
        | E::ImageCodec { .. }
        | E::ImageCodecPanicked { .. }
        | E::ImageFile { .. }
        | E::ImageResize { .. } => Kind::Value,
        // A variant added to arrow-dlpack after this file was written: a value problem until it
        // is mapped here on purpose.
        _ => Kind::Value,
    };
    raise(kind, python_message(&error, operation))
}

/// Runs `call`, which reads what a producer handed us; a Rust panic inside it (arrow-rs asserts
/// on input it did not expect) becomes `ArrowDLPackValueError` instead of pyo3's
/// `PanicException`, which derives from `BaseException` and escapes `except Exception`.
///
/// The imports check their input before arrow-rs reads it, so this is the net under those checks,
/// not a replacement for them.
pub(crate) fn no_panic<T>(doing: &str, call: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    no_panic_saying(
        |message| format!("malformed input while {doing}: {message}"),
        call,
    )
}

/// [`no_panic`], the `ValueError`'s message made by `saying` from the panic's.
pub(crate) fn no_panic_saying<T>(
    saying: impl FnOnce(&str) -> String,
    call: impl FnOnce() -> PyResult<T>,
) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|message| message.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            Err(raise(Kind::Value, saying(&message)))
        }
    }
}

/// `error` with `context: ` before its message, when it is one of this package's `ValueError`s
/// or `TypeError`s (made again, of the same class); any other exception as it is.
pub(crate) fn with_context(py: Python<'_>, error: PyErr, context: &str) -> PyErr {
    let Ok(classes) = classes(py) else {
        return error;
    };
    let message = error.value(py).to_string();
    if error.is_instance(py, classes.value_error.bind(py)) {
        raise(Kind::Value, format!("{context}: {message}"))
    } else if error.is_instance(py, classes.type_error.bind(py)) {
        raise(Kind::Type, format!("{context}: {message}"))
    } else {
        error
    }
}

/// Maps a refused Arrow C Data Interface struct (`arrow-dlpack-c`): a malformed one is a
/// `ValueError` (as every malformed import), a well-formed one of a type that cannot be imported
/// or a device chunk with nulls a `TypeError`, one that would need device memory read a
/// `BufferError`; tensor and `arrow-dlpack` errors as their own mappings say.
pub(crate) fn arrow_c_error(error: arrow_dlpack_c::ArrowCError) -> PyErr {
    use arrow_dlpack_c::ArrowCError as E;
    // The message is the whole chain: arrow-rs's finding is the cause of `InvalidValues`.
    match error {
        E::Malformed { .. }
        | E::InvalidValues { .. }
        | E::Export { .. }
        | E::ProducerFailed { .. } => raise(Kind::Value, chain(&error)),
        E::Unsupported { .. } | E::UnsupportedFormat { .. } | E::Nulls { .. } => {
            raise(Kind::Type, chain(&error))
        }
        E::DeviceColumnType { .. }
        | E::DeviceNullCount { .. }
        | E::DeviceNotRowMajor { .. }
        | E::DeviceChunks { .. } => raise(Kind::Buffer, chain(&error)),
        E::Tensor(error) => tensor_error(error),
        E::Arrow(error) => arrow_error(error, Operation::Import),
        // A variant added later: a ValueError, as for a malformed struct.
        _ => raise(Kind::Value, chain(&error)),
    }
}

/// The message of `error` followed by those of its causes, joined by `: `: a Rust error's
/// message describes its own level only, and a Python exception shows one message.
/// A cause whose text the message already ends with is left out: some arrow-rs and parquet
/// errors (`ExternalError`) print their source in their own message too. Each message is put in
/// Python's words ([`python_words`]).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let messages = arrow_dlpack::error_messages(error);
    arrow_dlpack::join_messages(messages.iter().map(|message| python_words(message)))
}

/// The names of error variants that arrow-rs and the parquet crate print before their messages
/// (`Parquet error: invalid footer`, `Io error: ...`), which say nothing to a Python user.
const RUST_PREFIXES: &[&str] = &[
    "Parquet error",
    "Parquet argument error",
    "Io error",
    "External",
    "External error",
    "EOF",
    "NYI",
    "Not yet implemented",
    "Invalid argument error",
    "Parser error",
    "Compute error",
    "Schema error",
    "Ipc error",
    "Cast error",
];

/// What a producer's message says before a Python traceback: PyArrow's reader over a Python
/// generator reports the exception it raised so, the exception itself on the traceback's last
/// line.
const PYTHON_TRACEBACK: &str = "Detail: Python exception: Traceback (most recent call last):";

/// `message` in Python's words: its first line only (arrow-rs's flatbuffer verifier follows its
/// message with a trace of where it was, a line per level), without the variant names of
/// [`RUST_PREFIXES`] where they begin it or one of its `: `-separated parts (a message of ours
/// may hold a library's message after its own words). A Python traceback that a producer's
/// message carries is given by its last line, the exception raised (`Boom: out of data`).
fn python_words(message: &str) -> String {
    let mut first = message
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string();
    if let Some(at) = first.find(PYTHON_TRACEBACK) {
        let raised = message
            .lines()
            .rev()
            .map(str::trim)
            .find(|line| !line.is_empty() && !line.ends_with(PYTHON_TRACEBACK))
            .unwrap_or_default();
        first.truncate(at);
        let head = first.trim_end().trim_end_matches('.');
        // The producer's status words (`Unknown error: boom`) repeat the exception's message:
        // the exception, with its class, takes their place after the producer's error code.
        first = match (raised, head.rfind("): ")) {
            ("", _) => head.to_string(),
            (raised, Some(code)) => format!("{}the Python exception {raised}", &head[..code + 3]),
            (raised, None) => format!("{head} (the Python exception {raised})"),
        };
    }
    let first = first.as_str();
    let parts: Vec<&str> = first.split(": ").collect();
    let last = parts.len().saturating_sub(1);
    parts
        .iter()
        .enumerate()
        .filter(|&(index, part)| index == last || !RUST_PREFIXES.contains(part))
        .map(|(_, part)| *part)
        .collect::<Vec<_>>()
        .join(": ")
}

/// Maps an error of arrow-rs (C data interface import and export, concatenation).
pub(crate) fn arrow_rs_error(error: arrow_schema::ArrowError) -> PyErr {
    raise(Kind::Value, error)
}
