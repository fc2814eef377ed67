//! The options of the table conversions, and the dtype a table's tensor gets from them: the
//! one asked for, checked, else the promotion of the columns' types.

use arrow_dlpack_tensor::DType;

use super::promotion::promoted_dtype;
#[cfg(doc)]
use super::{Table, table_to_tensor, table_to_tensors};
use crate::{Error, Result};

/// How [`table_to_tensor`] lays out and fills the tensor.
///
/// The default is PyArrow's `RecordBatch.to_tensor(null_to_nan=False, row_major=True)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableToTensorOptions {
    /// Lay the rows out one after another (C order, strides `[num_columns, 1]` in elements);
    /// otherwise the columns (Fortran order, strides `[1, num_rows]`). Default `true`.
    pub row_major: bool,
    /// Write nulls as NaN; the tensor's dtype is then always a float type (an integer result is
    /// promoted, see [`table_to_tensor`]). Otherwise nulls are refused. Default `false`.
    pub null_to_nan: bool,
    /// The tensor's dtype, each value converted as a Rust `as` cast does (floats to integers
    /// truncate, NaN becomes 0 and values past the range the type's limits; integers narrowed
    /// wrap), for example `float32` for features of float32 and int64 columns, which promote
    /// to float64; `None` (the default)
    /// for PyArrow's promotion of the columns' types. One of int8..int64, uint8..uint64,
    /// float16, float32 and float64, or bool for boolean columns alone ([`Error::TableDType`]
    /// otherwise), a float type with `null_to_nan`.
    pub dtype: Option<DType>,
}

impl Default for TableToTensorOptions {
    fn default() -> Self {
        TableToTensorOptions {
            row_major: true,
            null_to_nan: false,
            dtype: None,
        }
    }
}

impl TableToTensorOptions {
    /// These options with the tensor's dtype `dtype` (see [`TableToTensorOptions::dtype`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use arrow_array::{ArrayRef, Float32Array, Int64Array, RecordBatch};
    /// use arrow_dlpack::{DType, Error, Table, TableToTensorOptions, table_to_tensor};
    ///
    /// let batch = RecordBatch::try_from_iter([
    ///     ("f", Arc::new(Float32Array::from(vec![0.5, 1.5])) as ArrayRef),
    ///     ("n", Arc::new(Int64Array::from(vec![3, 4])) as ArrayRef),
    /// ])?;
    /// let table = Table::from(&batch);
    /// let promoted = table_to_tensor(&table, TableToTensorOptions::default())?;
    /// assert_eq!(promoted.dtype(), DType::Float64);
    /// let options = TableToTensorOptions::default().dtype(DType::Float32);
    /// let tensor = table_to_tensor(&table, options)?;
    /// assert_eq!(tensor.as_slice::<f32>()?, &[0.5, 3.0, 1.5, 4.0]);
    /// let options = TableToTensorOptions { null_to_nan: true, ..TableToTensorOptions::default() };
    /// let refused = table_to_tensor(&table, options.dtype(DType::Int64));
    /// assert!(matches!(refused, Err(Error::TableDType { dtype: DType::Int64, .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dtype(self, dtype: DType) -> Self {
        TableToTensorOptions {
            dtype: Some(dtype),
            ..self
        }
    }
}

/// The dtype of the tensor of columns of `dtypes` with `options`: the one asked for, checked,
/// else their promotion.
pub(super) fn tensor_dtype(dtypes: &[DType], options: TableToTensorOptions) -> Result<DType> {
    let Some(dtype) = options.dtype else {
        return Ok(promoted_dtype(dtypes, options.null_to_nan));
    };
    let float = matches!(dtype, DType::Float16 | DType::Float32 | DType::Float64);
    let integer = !float && crate::ARROW_DTYPES.contains(&dtype);
    // The dtype of boolean columns alone, which a caller may ask for again (without NaN, which
    // the checks below refuse for it).
    if dtype == DType::Bool && !options.null_to_nan {
        if dtypes.iter().all(|&column| column == DType::Bool) {
            return Ok(dtype);
        }
        return Err(Error::TableDType {
            dtype,
            reason: "a bool tensor holds 0 and 1 only, so only boolean columns may have it",
        });
    }
    if !float && !integer && dtype != DType::Bool {
        return Err(Error::TableDType {
            dtype,
            reason: "expected int8, int16, int32, int64, uint8, uint16, uint32, uint64, \
                     float16, float32 or float64 (or bool, for boolean columns alone)",
        });
    }
    if options.null_to_nan && !float {
        return Err(Error::TableDType {
            dtype,
            reason: "null_to_nan writes nulls as NaN, which only float16, float32 and float64 \
                     hold",
        });
    }
    Ok(dtype)
}

/// [`TableToTensorOptions`] under a second name, for code that converts a `RecordBatch` (through
/// the [`Table`] made from it); the two names are one type.
pub type RecordBatchToTensorOptions = TableToTensorOptions;

/// What [`table_to_tensors`] may do beyond sharing memory.
///
/// The default allows neither nulls nor copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ColumnTensorOptions {
    /// Accept nulls at any level, the table's null rows included; the null slots then hold
    /// unspecified values. Default `false`.
    pub allow_nulls: bool,
    /// Accept columns that need a copy: boolean columns (and fixed-size lists of booleans),
    /// unpacked into one byte per element. Without it they are refused with
    /// [`Error::UnsupportedColumnType`]. Default `false`.
    pub allow_copy: bool,
}
