//! The Python wording of the Rust crates' errors: messages built from the errors' structured
//! fields, with types named as PyArrow names them, the user's columns, and the remedy in
//! Python's spelling (`allow_nulls=True`, `null_to_nan=True`, `copy=False`), since the Rust
//! messages name Rust items.

use std::fmt::Display;

use arrow_dlpack_tensor::{DType, Error as TensorError};
use arrow_schema::DataType;

use super::{Operation, chain};
use crate::type_names::{data_type_name, pyarrow_dtype_name};

/// The message of a tensor error in Python's words: dtypes named as PyArrow names them
/// (`float`, `double`), where the Rust message says `float32`, `float64`.
pub(super) fn tensor_message(error: &TensorError) -> String {
    match error {
        TensorError::Misaligned {
            address,
            alignment,
            dtype,
        } => format!(
            "data address {address:#x} is not aligned for {}; expected a multiple of {alignment} \
             bytes",
            pyarrow_dtype_name(*dtype)
        ),
        other => other.to_string(),
    }
}

/// The message of an arrow-dlpack error in Python's words.
///
/// The Rust messages name Rust options (`allow_nulls` in `ArrayToTensorOptions`); where the
/// remedy is a Python argument (`allow_nulls=True`, `null_to_nan=True`, `copy=False`), the message
/// is built here from the error's fields, in the wording the Python API has always used.
/// Every other variant speaks of data, not of options, and keeps the Rust message.
pub(super) fn python_message(error: &arrow_dlpack::Error, operation: Operation) -> String {
    use arrow_dlpack::Error as E;
    match error {
        E::Nulls {
            null_count,
            location,
        } => nulls_message(*null_count, location, operation),
        E::TableNulls {
            null_count,
            location,
        } => nulls_message(*null_count, location, operation),
        E::ColumnNulls { column, null_count } => format!(
            "found {null_count} nulls in column {column:?}; expected none, or pass \
             null_to_nan=True to write them as NaN"
        ),
        E::NullRow { row, null_count } => format!(
            "row {row} of the list array is null ({null_count} null rows in all); expected none, \
             or pass allow_nulls=True (to lengths(), to_padded(), to_packed() or to_jagged()) to \
             read null rows as empty rows"
        ),
        E::CopyRequired { reason, .. } => {
            format!("{reason} requires a copy, which copy=False forbids")
        }
        // `Array.from_dlpack` takes the producer's memory as it is: the copy that makes it fit.
        E::NotRowMajor { .. } if operation == Operation::Import => {
            format!("{error}; pass copy=True to import a copy in that layout")
        }
        // PyArrow's name of the type, not arrow-rs's (`string`, not `Utf8`).
        E::UnsupportedImageColumn {
            data_type,
            expected,
        } => format!(
            "cannot read {} as encoded images; expected {expected}",
            data_type_name(data_type)
        ),
        E::UnsupportedType { data_type, reason } => {
            let hint = if is_list(data_type) {
                "; a column of variable-length lists is an arrow_dlpack.ListArray (ad.array), \
                 whose values, offsets, to_padded() and to_packed() are tensors"
            } else {
                ""
            };
            format!(
                "cannot export {}: {reason}; expected {PYARROW_NUMERIC_TYPES}, or fixed-size \
                 lists of them{hint}",
                data_type_name(data_type)
            )
        }
        E::UnsupportedColumnType {
            column,
            data_type,
            reason,
            ..
        } => {
            // A fixed-size list column is refused only where one 2-D tensor is made
            // (`Tensor.from_arrow`); `ad.column_tensors` takes it, which is the remedy.
            let (reason, expected) = if matches!(data_type, DataType::FixedSizeList(..)) {
                (
                    "a fixed-size list holds several values per row, which one 2-D tensor \
                     cannot; convert the column alone (ad.column_tensors gives one tensor per \
                     column)",
                    PYARROW_NUMERIC_TYPES.to_string(),
                )
            } else {
                (
                    *reason,
                    format!(
                        "{PYARROW_NUMERIC_TYPES} (or, for ad.column_tensors, fixed-size lists of \
                         them)"
                    ),
                )
            };
            format!(
                "cannot convert column {column:?} of type {}: {reason}; expected {expected}",
                data_type_name(data_type)
            )
        }
        E::MixedChunkTypes {
            index,
            expected,
            found,
        } => format!(
            "chunk {index} has type {}; expected {}, the type of chunk 0",
            data_type_name(found),
            data_type_name(expected)
        ),
        E::NotAList { data_type } => format!(
            "cannot read {} as a ragged tensor; expected a list, large_list, list_view or \
             large_list_view",
            data_type_name(data_type)
        ),
        E::UnsupportedDType { dtype } => {
            let why = match dtype {
                DType::Bool => {
                    "Arrow packs booleans into bits, so a one-byte bool tensor has no \
                                Arrow type that shares its memory"
                }
                DType::BFloat16 => "Arrow has no bfloat16 type",
                DType::Complex64 | DType::Complex128 => "Arrow has no complex type",
                _ => "Arrow has no type with this layout",
            };
            format!(
                "tensor type {} has no Arrow equivalent: {why}; expected \
                 {PYARROW_NUMERIC_TYPES}",
                pyarrow_dtype_name(*dtype)
            )
        }
        E::MixedRaggedPieces {
            index,
            expected_dtype,
            expected_shape,
            found_dtype,
            found_shape,
        } => format!(
            "piece {index} has values of type {} with element shape {}; expected type {} with \
             element shape {}, those of piece 0",
            pyarrow_dtype_name(*found_dtype),
            python_tuple(found_shape),
            pyarrow_dtype_name(*expected_dtype),
            python_tuple(expected_shape)
        ),
        E::PadValue {
            value,
            dtype,
            expected,
        } => format!(
            "pad value {value} does not fit type {}; expected {expected}",
            pyarrow_dtype_name(*dtype)
        ),
        E::GappedStrides { shape, strides } => format!(
            "tensor with shape {shape:?} and strides {strides:?} (in elements) is not dense (its \
             strides leave gaps, overlap, or are zero or negative); expected a dense first-major \
             layout, or a copy, which copy=False forbids"
        ),
        // The row and column, then the cause, which is the error's source; the causes that
        // name a remedy name the Python keyword.
        E::ImageRow { source, .. } => {
            let row_and_column = error.to_string();
            format!("{row_and_column}: {}", image_cause(source))
        }
        // The spec's keys are the Python keyword names.
        E::InvalidImageSpec { field, reason } => format!("invalid {field}: {reason}"),
        other => other.to_string(),
    }
}

/// The Arrow types whose arrays DLPack carries, as PyArrow names them.
const PYARROW_NUMERIC_TYPES: &str =
    "int8, int16, int32, int64, uint8, uint16, uint32, uint64, halffloat, float or double";

/// Whether `data_type` is a variable-length list of any kind.
pub(super) fn is_list(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
    )
}

/// `items` as Python writes a tuple: `()`, `(3,)`, `(2, 2)`.
fn python_tuple(items: &[usize]) -> String {
    match items {
        [one] => format!("({one},)"),
        many => {
            let items: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("({})", items.join(", "))
        }
    }
}

/// Nulls refused: by `__dlpack__`, which has no way to carry them, or by `to_tensor()` without
/// `allow_nulls=True`.
fn nulls_message(null_count: usize, location: impl Display, operation: Operation) -> String {
    // "nulls" even for one: Python code matches this wording (`found 1 nulls`).
    match operation {
        Operation::Export => format!(
            "found {null_count} nulls in {location}; expected none, since DLPack cannot carry \
             nulls (to_tensor(allow_nulls=True) gives the values, validity() the mask)"
        ),
        Operation::ToTensor | Operation::Import => format!(
            "found {null_count} nulls in {location}; expected none, or pass allow_nulls=True to \
             accept them (null slots then hold unspecified values)"
        ),
    }
}

/// Why one image could not be decoded, in Python's words: the causes that name a remedy name
/// the Python keyword (`on_error="skip"`, `max_pixels=`).
pub(crate) fn image_cause(source: &arrow_dlpack::Error) -> String {
    use arrow_dlpack::Error as E;
    match source {
        E::NullImage => "the row is null; expected encoded bytes or a path \
                         (on_error=\"skip\" drops such rows)"
            .to_string(),
        E::ImageSize {
            width,
            height,
            max_pixels,
        } => format!(
            "image of {width} x {height} pixels is refused; expected at least 1 and at most \
             {max_pixels} pixels (max_pixels=)"
        ),
        other => chain(other),
    }
}
