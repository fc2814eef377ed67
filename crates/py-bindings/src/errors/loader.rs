//! The loader's errors (`ad.batches`, `ad.ray`) as Python exceptions, variant by variant: the
//! builtin file-system exceptions for files, this package's classes for the rest, with the
//! messages in Python's words where a Rust item or type name would show.

use arrow_schema::{DataType, Field};
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;

use super::messages::{image_cause, is_list, python_message, tensor_message};
use super::{Kind, Operation, arrow_error, chain, raise, tensor_kind};
use crate::type_names::{data_type_name, field_type_name};

/// `EINVAL`, "invalid argument".
const EINVAL: i32 = 22;

/// The arguments of an `OSError` as `open()` raises it for `source` about `path`: `errno`,
/// `strerror` (`message`, the operating system's reason in its words, without Rust's
/// "(os error 2)") and `filename`.
fn os_error_args(
    message: String,
    source: &std::io::Error,
    path: &std::path::Path,
) -> (Option<i32>, String, String) {
    let code = source.raw_os_error();
    let reason = match code {
        Some(code) => message.replace(&format!(" (os error {code})"), ""),
        None => message,
    };
    (code, reason, path.display().to_string())
}

/// Maps an error of the loader (`ad.batches`), variant by variant; the message is the loader's,
/// which names the file, row group or column.
pub(crate) fn loader_error(error: arrow_dlpack_loader::Error) -> PyErr {
    use arrow_dlpack::Error as A;
    use arrow_dlpack_loader::Error as E;
    use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError};
    // The loader's own errors never carry this variant (it is what `?` makes of an Arrow-layer
    // error in a caller's code); mapped as the Arrow layer's error, should one arrive.
    let error = match error {
        E::Convert(inner) => return arrow_error(inner, Operation::ToTensor),
        other => other,
    };
    let kind = match &error {
        // The file system: the builtin exceptions `open()` raises.
        E::Io { source, path } => {
            let os_error = |message: String| os_error_args(message, source, path);
            return match source.kind() {
                std::io::ErrorKind::NotFound if source.raw_os_error().is_some() => {
                    PyFileNotFoundError::new_err(os_error(chain(&error)))
                }
                std::io::ErrorKind::PermissionDenied if source.raw_os_error().is_some() => {
                    PyPermissionError::new_err(os_error(chain(&error)))
                }
                std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(chain(&error)),
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(chain(&error)),
                // A buffer for bytes read (an object's range) that could not be allocated.
                std::io::ErrorKind::OutOfMemory => PyMemoryError::new_err(chain(&error)),
                // Any other error of the operating system (a symbolic-link loop's ELOOP, EISDIR)
                // with its `errno` and `filename`, as `open()` raises it (OSError picks the
                // subclass of the errno).
                _ if source.raw_os_error().is_some() => PyOSError::new_err(os_error(chain(&error))),
                // A path the loader refuses itself (a FIFO, a socket or a device): EINVAL (22
                // on Linux, macOS and the BSDs), with the path as `filename`, so that the
                // attributes are set as for the others.
                std::io::ErrorKind::InvalidInput => {
                    PyOSError::new_err((EINVAL, chain(&error), path.display().to_string()))
                }
                _ => PyOSError::new_err(chain(&error)),
            };
        }
        E::Thread { .. } => return PyOSError::new_err(chain(&error)),
        // A column whose data cannot become the tensor asked for; the Arrow layer's reason in
        // Python's words (`allow_nulls=True`, not the Rust options struct).
        E::Column { column, source } => {
            if let A::Tensor(inner) = source
                && tensor_kind(inner).is_none()
            {
                return PyMemoryError::new_err(chain(&error));
            }
            let (kind, message) = column_message(column, source);
            return raise(kind, message);
        }
        // Nulls a file's metadata declares: the refusal the batch would have given, and where.
        E::DeclaredNulls { path, source } => {
            if let E::Column { column, source } = source.as_ref() {
                let (kind, message) = column_message(column, source);
                return raise(
                    kind,
                    format!(
                        "{message} (declared by the metadata of {}, refused before a row is read)",
                        path.display()
                    ),
                );
            }
            Kind::Value
        }
        // Nulls a batch refused where the metadata did not declare them: the refusal, and
        // where the first is.
        E::NullInFile { path, row, source } => {
            if let E::Column { column, source } = source.as_ref() {
                let (kind, message) = column_message(column, source);
                return raise(
                    kind,
                    format!("{message} (the first at row {row} of {})", path.display()),
                );
            }
            Kind::Value
        }
        E::Tensor(inner) => match tensor_kind(inner) {
            Some(kind) => return raise(kind, tensor_message(inner)),
            None => return PyMemoryError::new_err(chain(&error)),
        },
        // A column to tokenize (by `ad.tokenize`, or by a sequence with a tokenizer) that is not
        // text, in PyArrow's type names.
        E::UnsupportedColumn {
            column,
            data_type,
            metadata,
            expected,
            ..
        } if *expected == arrow_dlpack_loader::TEXT_TYPES
            || *expected == arrow_dlpack_loader::TOKENIZED_TEXT_TYPES =>
        {
            let field = Field::new(column.as_str(), data_type.clone(), true)
                .with_metadata(metadata.clone());
            let purpose = if *expected == arrow_dlpack_loader::TEXT_TYPES {
                ""
            } else {
                " for a sequence with a tokenizer"
            };
            return raise(
                Kind::Type,
                format!(
                    "cannot tokenize column {column:?} of type {}; expected a string, \
                     large_string or string_view column{purpose}",
                    field_type_name(&field)
                ),
            );
        }
        // A column named in `images=` that holds no encoded images, in PyArrow's type names.
        E::UnsupportedColumn {
            column,
            data_type,
            metadata,
            expected,
            ..
        } if *expected == arrow_dlpack_loader::IMAGE_TYPES => {
            let field = Field::new(column.as_str(), data_type.clone(), true)
                .with_metadata(metadata.clone());
            return raise(
                Kind::Type,
                format!(
                    "cannot decode column {column:?} of type {} as images (it is named in \
                     images=); expected a binary, large_binary or binary_view column of encoded \
                     images, or a struct with a bytes field of one of these and an optional \
                     path string field (Hugging Face's Image)",
                    field_type_name(&field)
                ),
            );
        }
        // A column of a type the loader cannot load, in PyArrow's names (extension types
        // included) and with the remedy in Python's words.
        E::UnsupportedColumn {
            column,
            data_type,
            metadata,
            as_sequence,
            every_column,
            ..
        } => {
            let field = Field::new(column.as_str(), data_type.clone(), true)
                .with_metadata(metadata.clone());
            let mut message = unsupported_column_message(column, &field, *as_sequence);
            // A column that was not named but loaded as one of every column: which keyword
            // selects the columns.
            if *every_column {
                message.push_str(
                    "; it is loaded because columns=None (the default) loads every column not \
                     in a group: pass columns=[...] to choose the columns (columns=[] for none)",
                );
            }
            return raise(Kind::Type, message);
        }
        // Text: a null text refused without `allow_nulls` (the keyword, not the Rust options
        // struct); values that are not text (or not tokens); a tokenizer.json that does not
        // parse, and a text the tokenizer fails on; an output file that cannot be written, as
        // `open()` fails.
        E::NullText { row } => {
            return raise(
                Kind::Value,
                format!(
                    "the text at row {row} is null; expected a string (pass allow_nulls=True to \
                     tokenize it as an empty text)"
                ),
            );
        }
        // Values that are not text, in PyArrow's type names.
        E::UnsupportedValues { data_type, .. } => {
            return raise(
                Kind::Type,
                format!(
                    "cannot read values of type {}; expected string, large_string or \
                     string_view text",
                    data_type_name(data_type)
                ),
            );
        }
        E::Tokenizer { .. } | E::Tokenize { .. } => Kind::Value,
        // An error of the operating system with its `errno` and `filename`, as `open()` raises
        // it (OSError picks the subclass of the errno: FileNotFoundError for a missing folder).
        E::Write { path, source } => {
            return match source.downcast_ref::<std::io::Error>() {
                Some(io) if io.raw_os_error().is_some() => {
                    PyOSError::new_err(os_error_args(chain(&error), io, path))
                }
                _ => PyOSError::new_err(chain(&error)),
            };
        }
        // A null row of a sequence column: where it is, and the loader's option.
        E::NullSequenceRow {
            column,
            file,
            item,
            row,
        } => {
            let place = match (file, item) {
                (Some(file), _) => format!("row {row} of {}", file.display()),
                (None, Some(item)) => format!(
                    "row {row} of record batch {item} of the stream (as this shard reads it)"
                ),
                (None, None) => format!("row {row} of the record batch"),
            };
            return raise(
                Kind::Value,
                format!(
                    "cannot load {column:?}: {place} is null; expected none, or pass \
                     allow_nulls=True to read null rows as empty rows"
                ),
            );
        }
        // A row of an image column that is not an image: where it is, and the cause in
        // Python's words (a failed allocation is a MemoryError).
        E::ImageRow { source, .. } => {
            let message = format!("{error}: {}", image_cause(source));
            if let A::Tensor(inner) = source.as_ref()
                && tensor_kind(inner).is_none()
            {
                return PyMemoryError::new_err(message);
            }
            return raise(Kind::Value, message);
        }
        E::RelativeImagePath {
            column,
            row,
            item,
            path,
        } => {
            let place = match item {
                Some(item) => format!("of unit {item} of the shard"),
                None => "of the record batch".to_string(),
            };
            return raise(
                Kind::Value,
                format!(
                    "cannot read image at row {row} of column {column:?} {place}: its path \
                     {path:?} is relative and the source has no directory to resolve it \
                     against; pass image_root= (a directory or an object-storage prefix)"
                ),
            );
        }
        // An IPC stream given where an IPC file was expected (by its extension).
        E::NotIpcFile {
            path,
            len,
            truncated,
        } => {
            // From Python a path's first bytes tell a file from a stream, so this is a file that
            // starts as an IPC file and is cut short (or was replaced meanwhile).
            let what = if *truncated {
                "starts with ARROW1 but is too short for an Arrow IPC file (ARROW1, a footer and \
                 ARROW1 again): a truncated file"
            } else {
                "does not start with ARROW1"
            };
            return raise(
                Kind::Value,
                format!(
                    "cannot read arrow ipc {}: the file is {len} bytes and {what}; expected an \
                     Arrow IPC file, or a stream (which starts with FF FF FF FF)",
                    path.display()
                ),
            );
        }
        // Files or record batches whose columns differ: in PyArrow's type names.
        E::SchemaMismatch {
            what,
            found,
            expected,
        } => {
            let columns = |fields: &arrow_schema::Fields| {
                let columns: Vec<String> = fields
                    .iter()
                    .map(|field| format!("{}: {}", field.name(), field_type_name(field)))
                    .collect();
                format!("[{}]", columns.join(", "))
            };
            return raise(
                Kind::Value,
                format!(
                    "{what} has columns {}; expected {}, those of what was read before it",
                    columns(found),
                    columns(expected)
                ),
            );
        }
        // A bad argument: the reason alone (the spec is the Rust name of the arguments).
        E::InvalidSpec { reason } => return raise(Kind::Value, reason.clone()),
        // A source whose parts disagree, as our own readers word it (without arrow-rs's
        // "Schema error:" prefix).
        E::Arrow(arrow_schema::ArrowError::SchemaError(message)) => {
            return raise(Kind::Value, message.clone());
        }
        // A malformed, truncated or corrupt file, a file changed after planning,
        // rows that differ from the metadata's count, a column that is not there, batches that
        // disagree, an unknown extension, a URL or storage option that cannot be used, a panic
        // caught on a loader thread.
        E::InvalidState { .. }
        | E::Ipc { .. }
        | E::Parquet { .. }
        | E::CorruptParquet { .. }
        | E::UnsupportedCodec { .. }
        | E::RowCount { .. }
        | E::FileChanged { .. }
        | E::DecodePanicked { .. }
        | E::Decode { .. }
        | E::Arrow(_)
        | E::MissingColumn { .. }
        | E::MissingTensor { .. }
        | E::UnknownFormat { .. }
        | E::InvalidSource { .. }
        | E::Panicked { .. } => Kind::Value,
        // A variant added to the loader after this file was written: a value problem until it
        // is mapped here on purpose.
        _ => Kind::Value,
    };
    raise(kind, chain(&error))
}

/// The class and message of [`Error::Column`](arrow_dlpack_loader::Error::Column): the Arrow
/// layer's reason in Python's words (`allow_nulls=True`, not the Rust options struct), and for
/// nulls the loader's keywords that take them, named for the column.
fn column_message(column: &str, source: &arrow_dlpack::Error) -> (Kind, String) {
    use arrow_dlpack::Error as A;
    use arrow_dlpack::NullLocation;
    let kind = match source {
        A::UnsupportedType { .. } | A::UnsupportedColumnType { .. } => Kind::Type,
        A::Tensor(inner) => tensor_kind(inner).unwrap_or(Kind::Value),
        // Nulls refused without `allow_nulls` (as `to_tensor()`), and the rest.
        _ => Kind::Value,
    };
    // Nulls inside a column's elements (a fixed-size list's or a sequence's values):
    // `allow_nulls` alone takes them; `null_to_nan` and `masks` are about rows.
    if let A::Nulls {
        null_count,
        location: NullLocation::Array { depth } | NullLocation::Column { depth, .. },
    }
    | A::TableNulls {
        null_count,
        location: NullLocation::Array { depth } | NullLocation::Column { depth, .. },
    } = source
        && *depth > 0
    {
        return (
            kind,
            format!(
                "cannot load {column:?}: found {null_count} nulls inside its elements (values \
                 {depth} list level(s) down); expected none: pass allow_nulls=True to accept \
                 them (the null values then hold unspecified values; masks=[...] and null_to_nan \
                 apply to whole rows, not to the values of an element)"
            ),
        );
    }
    // Nulls in a column: the loader's three keywords that take them, named for it.
    if let A::Nulls { null_count, .. } | A::TableNulls { null_count, .. } = source {
        return (
            kind,
            format!(
                "cannot load {column:?}: found {null_count} nulls in the column; expected none: \
                 pass null_to_nan=[{column:?}] for floats with NaN where the nulls are (a numeric \
                 column or a group, not a fixed-size list or tensor), or allow_nulls=True to \
                 accept them (null slots then hold unspecified values) with masks=[{column:?}] for \
                 a \"{column}_mask\" tensor that says where they are"
            ),
        );
    }
    let reason = python_message(source, Operation::ToTensor);
    (kind, format!("cannot load {column:?}: {reason}"))
}

/// The loader's refusal of a column's type, in Python's words: PyArrow's name of the type (an
/// extension type's included), and for a list the `sequences=` entry that loads it, with the
/// user's column name.
fn unsupported_column_message(column: &str, field: &Field, as_sequence: bool) -> String {
    let type_name = field_type_name(field);
    let single = "a numeric or boolean column, a fixed-size list of numbers, or an \
                  arrow.fixed_shape_tensor column";
    let expected = if as_sequence && is_text(field.data_type()) {
        format!(
            "a list, large_list, list_view or large_list_view of numbers, booleans, fixed-size \
             lists or fixed-shape tensors, for a sequence; a column of text is tokenized with a \
             tokenizer in its entry: sequences={{{column:?}: {{\"mode\": \"pad\", \
             \"tokenizer\": \"tokenizer.json\"}}}}"
        )
    } else if as_sequence {
        "a list, large_list, list_view or large_list_view of numbers, booleans, fixed-size lists \
         or fixed-shape tensors, for a sequence"
            .to_string()
    } else if is_list(field.data_type()) {
        format!(
            "{single}; a list of varying length loads as a sequence: pass \
             sequences={{{column:?}: \"pad\"}} (or \"pack\", \"jagged\")"
        )
    } else if field.extension_type_name() == Some(arrow_dlpack::VARIABLE_SHAPE_TENSOR_NAME) {
        format!(
            "{single}; an arrow.variable_shape_tensor column is read with \
             ad.array(column), a VariableShapeTensorArray (its rows, to_padded(), to_ragged())"
        )
    } else if is_binary(field) {
        format!(
            "{single}; a column of encoded images (JPEG, PNG, WebP, GIF, BMP) is decoded with \
             images={{{column:?}: {{\"size\": 224}}}}"
        )
    } else if is_text(field.data_type()) {
        format!(
            "{single}; a column of text becomes token ids with \
             sequences={{{column:?}: {{\"mode\": \"pad\", \"tokenizer\": \"tokenizer.json\"}}}}"
        )
    } else if matches!(field.data_type(), DataType::Dictionary(..)) {
        format!(
            "{single}; a dictionary column (pandas' category, polars' Categorical) loads as its \
             integer codes once they are its values: df[{column:?}].cat.codes in pandas, \
             pl.col({column:?}).to_physical() in polars, the DictionaryArray's indices in pyarrow"
        )
    } else {
        single.to_string()
    };
    format!("cannot load column {column:?} of type {type_name}; expected {expected}")
}

/// Whether `field` holds encoded bytes as `images=` reads them: a binary column, or a struct with
/// a binary `bytes` field (Hugging Face's `Image`).
fn is_binary(field: &Field) -> bool {
    let binary = |data_type: &DataType| {
        matches!(
            data_type,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView
        )
    };
    match field.data_type() {
        DataType::Struct(fields) => fields
            .iter()
            .any(|inner| inner.name() == "bytes" && binary(inner.data_type())),
        other => binary(other),
    }
}

/// Whether `data_type` is text, as a tokenizer in `sequences=` reads it.
fn is_text(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}
