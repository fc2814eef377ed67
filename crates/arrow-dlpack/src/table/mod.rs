//! Tables to tensors: the columns of a [`Table`] (a record batch, a struct array, or named
//! arrays) copied into one 2-D tensor with PyArrow's type promotion ([`table_to_tensor`]), or
//! one zero-copy tensor per column ([`table_to_tensors`]); and rows of a table written into a
//! caller's 2-D buffer at a row offset ([`write_rows`]), to stack several tables (the chunks of a
//! stream, the record batches a training batch spans) into one tensor without a concatenation.
//!
//! The options and the dtype they give live in `options.rs`, the promotion rule in
//! `promotion.rs`, the copy kernel in `copy.rs`, [`write_rows`] and its destination in
//! `write_rows.rs`; this file checks the columns and says what each function accepts.

mod convert;
mod copy;
mod options;
mod promotion;
mod write_rows;

use std::ops::Range;

use arrow_array::{Array, ArrayRef, RecordBatch, StructArray, cast::AsArray};
use arrow_buffer::NullBuffer;
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::{DataType, Field};

use crate::data_type::unsupported_reason;
use crate::{
    ArrayToTensorOptions, EXTENSION_NAME, Error, FixedShapeTensorArray, NullLocation, Result,
    array_to_tensor, dtype_of,
};
use copy::{CopyColumn, copy_columns};
use options::tensor_dtype;
pub use options::{ColumnTensorOptions, RecordBatchToTensorOptions, TableToTensorOptions};
pub use write_rows::{RowsDestination, WriteRowsOptions, write_rows};

/// The element types a column may have in [`table_to_tensor`].
const NUMERIC_TYPES: &str =
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32 or float64";

/// The column types [`table_to_tensors`] accepts.
const TENSOR_TYPES: &str = "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, \
                            float32 or float64, or fixed-size lists of them";

/// Named columns to turn into tensors: the input of [`table_to_tensor`] and [`table_to_tensors`].
///
/// A `Table` borrows its columns; build one from a [`RecordBatch`] or a [`StructArray`] (with
/// `From`), or from names and arrays with [`Table::try_from_columns`].
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Int32Array, RecordBatch};
/// use arrow_dlpack::Table;
///
/// let columns: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![1, 2]))];
/// let batch = RecordBatch::try_from_iter([("a", columns[0].clone())])?;
/// assert_eq!(Table::from(&batch).num_columns(), 1);
/// assert_eq!(Table::try_from_columns(&["a"], &columns)?.num_columns(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Table<'a> {
    columns: Vec<Column<'a>>,
    /// The validity of the rows themselves: a struct array's own nulls.
    row_nulls: Option<&'a NullBuffer>,
}

/// One column of a [`Table`].
#[derive(Debug, Clone)]
struct Column<'a> {
    name: &'a str,
    array: &'a ArrayRef,
    /// The field, where the table has one: it carries extension types.
    field: Option<&'a Field>,
}

impl<'a> Table<'a> {
    /// The columns `arrays`, named by `names` (one name per column, else
    /// [`Error::ColumnNames`]).
    ///
    /// The columns may have different lengths: [`table_to_tensors`] accepts that, and
    /// [`table_to_tensor`] refuses it with [`Error::ColumnLength`].
    pub fn try_from_columns<S: AsRef<str>>(names: &'a [S], arrays: &'a [ArrayRef]) -> Result<Self> {
        if names.len() != arrays.len() {
            return Err(Error::ColumnNames {
                names: names.len(),
                columns: arrays.len(),
            });
        }
        let columns = names
            .iter()
            .zip(arrays)
            .map(|(name, array)| Column {
                name: name.as_ref(),
                array,
                field: None,
            })
            .collect();
        Ok(Table {
            columns,
            row_nulls: None,
        })
    }

    /// The number of columns.
    pub fn num_columns(&self) -> usize {
        self.columns.len()
    }

    /// The names of the columns, in order.
    pub fn column_names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.columns.iter().map(|column| column.name)
    }
}

impl<'a> From<&'a RecordBatch> for Table<'a> {
    fn from(batch: &'a RecordBatch) -> Self {
        let columns = batch
            .schema_ref()
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(field, array)| Column {
                name: field.name(),
                array,
                field: Some(field),
            })
            .collect();
        Table {
            columns,
            row_nulls: None,
        }
    }
}

/// The fields of a struct array (the form a record batch takes through the Arrow C data
/// interface); a null struct row counts as a null in every column.
impl<'a> From<&'a StructArray> for Table<'a> {
    fn from(array: &'a StructArray) -> Self {
        let columns = array
            .fields()
            .iter()
            .zip(array.columns())
            .map(|(field, child)| Column {
                name: field.name(),
                array: child,
                field: Some(field),
            })
            .collect();
        Table {
            columns,
            row_nulls: array.nulls(),
        }
    }
}

/// Copies the numeric columns of a table into one writable 2-D tensor of shape
/// `[num_rows, num_columns]`, as PyArrow's `RecordBatch.to_tensor` does.
///
/// # Columns
///
/// Every column must be bool, int8..int64, uint8..uint64 or float16/32/64; any other type is
/// refused with [`Error::UnsupportedColumnType`] naming the column. Booleans, which PyArrow
/// refuses, are the numbers 0 and 1 of the tensor's dtype, as in numpy; a table of boolean
/// columns only gives a `bool` tensor.
/// A table without columns is refused with [`Error::NoColumns`] (its dtype would be unknown;
/// PyArrow refuses it too), columns of different lengths with [`Error::ColumnLength`].
/// A table without rows gives shape `[0, num_columns]`.
/// Slices are read from their offset: the tensor holds exactly the table's rows.
///
/// # Nulls
///
/// Without `null_to_nan`, a column holding nulls is refused with [`Error::ColumnNulls`]; a null
/// row of a struct array counts as a null in every column.
/// With it, null slots become NaN, and an integer result type is promoted to a float type by
/// the same merge rule with `float32`: results of 8 and 16 bits become `float32`, of 32 and 64 bits
/// `float64`. This promotion happens whether or not there are nulls, as in PyArrow.
///
/// # Type promotion
///
/// The dtype is PyArrow's: the column types folded left to right with Arrow's `Field::MergeWith`
/// under `promote_integer_to_float`, `promote_integer_sign` and `promote_numeric_width`
/// (`RecordBatchToTensor` in Arrow C++ `cpp/src/arrow/tensor.cc`, `MaybeMergeNumericTypes` in
/// `cpp/src/arrow/type.cc`). Merging a type `a` with a type `b`:
///
/// - equal types: that type;
/// - an unsigned and a signed integer: the narrowest signed integer with
///   `max(bits(a), bits(b))` bits, plus one bit when the unsigned one is at least as wide:
///   `uint8 + int8 = int16`, `uint8 + int16 = int16`, `uint16 + int16 = int32`,
///   `uint32 + int8 = int64`, and `uint64 + int64 = int64` (there is no wider signed integer,
///   so values above `i64::MAX` wrap, as in PyArrow);
/// - an integer and a float: the integer counts as `float16` if it has 8 bits, `float32` if 16,
///   `float64` if 32 or 64, and the wider float wins: `int16 + float32 = float32`,
///   `int32 + float32 = float64`, `uint8 + float16 = float16`;
/// - two signed, two unsigned or two float types: the wider;
/// - bool and any type: that type (bool with bool: bool), as numpy's `result_type` gives.
///
/// This differs from numpy's `result_type` for `uint64` with a signed integer (numpy gives
/// `float64`) and, because the fold goes left to right, depends on the column order in rare
/// mixes: `[uint16, int8, float32]` gives `float64` (`int32` first), `[uint16, float32, int8]`
/// gives `float32`.
///
/// Unlike PyArrow, which refuses any mix of `float16` with another type ("Casting from or to
/// halffloat is not supported"), such mixes are converted by the same merge rule
/// (`float16 + float32 = float32`, `int8 + float16 = float16`, `int16 + float16 = float32`);
/// a table of `float16` columns alone gives `float16` in both, and NaN is a real half-precision
/// NaN here.
///
/// Values convert as C++'s `static_cast` does, which is Rust's `as`: integers widen exactly,
/// integers become the nearest float, `uint64` reinterprets as `int64`.
///
/// # Layout
///
/// Row-major (`row_major: true`) gives strides `[num_columns, 1]`, column-major
/// `[1, num_rows]` (in elements, numpy's strides for an empty dimension included).
/// The tensor is a fresh copy and writable.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float32Array, Int16Array, RecordBatch};
/// use arrow_dlpack::{DType, Table, TableToTensorOptions, table_to_tensor};
///
/// let batch = RecordBatch::try_from_iter([
///     ("a", Arc::new(Int16Array::from(vec![1, 2, 3])) as ArrayRef),
///     ("b", Arc::new(Float32Array::from(vec![0.5, 1.5, 2.5])) as ArrayRef),
/// ])?;
/// let tensor = table_to_tensor(&Table::from(&batch), TableToTensorOptions::default())?;
/// assert_eq!(tensor.dtype(), DType::Float32); // int16 + float32 = float32
/// assert_eq!(tensor.shape(), &[3, 2]);
/// assert_eq!(tensor.strides(), &[2, 1]);
/// assert_eq!(tensor.as_slice::<f32>()?, &[1.0, 0.5, 2.0, 1.5, 3.0, 2.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn table_to_tensor(table: &Table<'_>, options: TableToTensorOptions) -> Result<Tensor> {
    let (columns, num_rows) = copy_columns_of(table)?;
    if !options.null_to_nan {
        refuse_nulls(table, &columns, 0..num_rows)?;
    }
    let dtypes: Vec<DType> = columns.iter().map(|column| column.dtype).collect();
    let dtype = tensor_dtype(&dtypes, options)?;
    copy_columns(&[(columns, num_rows)], dtype, options.row_major)
}

/// Like [`table_to_tensor`] for the rows of several tables with the same columns, one table
/// after another: the chunks of a stream stacked into one tensor in one pass, without
/// concatenating them first.
///
/// The dtype is the promotion of every column of every table (for the chunks of one stream,
/// which share a schema, that of the first). A null count in [`Error::ColumnNulls`] counts the
/// column's nulls in every table. Without tables the result is refused with
/// [`Error::NoColumns`].
///
/// # Panics
///
/// When the tables do not all have the same number of columns.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch};
/// use arrow_dlpack::{DType, Table, TableToTensorOptions, tables_to_tensor};
///
/// let batch = RecordBatch::try_from_iter([
///     ("a", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
///     ("b", Arc::new(Float64Array::from(vec![0.5, 1.5, 2.5])) as ArrayRef),
/// ])?;
/// let (first, second) = (batch.slice(0, 1), batch.slice(1, 2));
/// let options = TableToTensorOptions::default();
/// let tensor = tables_to_tensor(&[Table::from(&first), Table::from(&second)], options)?;
/// assert_eq!((tensor.dtype(), tensor.shape()), (DType::Float64, &[3, 2][..]));
/// assert_eq!(tensor.as_slice::<f64>()?, &[1.0, 0.5, 2.0, 1.5, 3.0, 2.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tables_to_tensor(tables: &[Table<'_>], options: TableToTensorOptions) -> Result<Tensor> {
    let pieces = tables
        .iter()
        .map(copy_columns_of)
        .collect::<Result<Vec<_>>>()?;
    let Some((first, _)) = pieces.first() else {
        return Err(Error::NoColumns);
    };
    assert!(
        pieces
            .iter()
            .all(|(columns, _)| columns.len() == first.len()),
        "the tables have different numbers of columns"
    );
    if !options.null_to_nan {
        for (index, column) in tables[0].columns.iter().enumerate() {
            let null_count: usize = pieces
                .iter()
                .map(|(columns, _)| null_count(&columns[index].nulls))
                .sum();
            if null_count > 0 {
                return Err(Error::ColumnNulls {
                    column: column.name.to_string(),
                    null_count,
                });
            }
        }
    }
    let dtypes_of = |columns: &[CopyColumn<'_>]| -> Vec<DType> {
        columns.iter().map(|column| column.dtype).collect()
    };
    let first_dtypes = dtypes_of(first);
    // Tables of one schema give the dtype of one table, exactly as `table_to_tensor` would.
    let dtypes = if pieces
        .iter()
        .all(|(columns, _)| dtypes_of(columns) == first_dtypes)
    {
        first_dtypes
    } else {
        pieces
            .iter()
            .flat_map(|(columns, _)| dtypes_of(columns))
            .collect()
    };
    let dtype = tensor_dtype(&dtypes, options)?;
    copy_columns(&pieces, dtype, options.row_major)
}

fn null_count(nulls: &Option<NullBuffer>) -> usize {
    nulls.as_ref().map_or(0, NullBuffer::null_count)
}

/// The dtype [`table_to_tensor`] gives `table` with `options`, without copying anything: the
/// dtype to allocate for [`write_rows`] so that it writes what [`table_to_tensor`] would.
///
/// The columns are checked as [`table_to_tensor`] checks them, nulls apart.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Int32Array, UInt8Array};
/// use arrow_dlpack::{DType, Table, TableToTensorOptions, table_dtype};
///
/// let columns: Vec<ArrayRef> =
///     vec![Arc::new(Int32Array::from(vec![1])), Arc::new(UInt8Array::from(vec![2]))];
/// let table = Table::try_from_columns(&["a", "b"], &columns)?;
/// assert_eq!(table_dtype(&table, TableToTensorOptions::default())?, DType::Int32);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn table_dtype(table: &Table<'_>, options: TableToTensorOptions) -> Result<DType> {
    let (columns, _) = copy_columns_of(table)?;
    let dtypes: Vec<DType> = columns.iter().map(|column| column.dtype).collect();
    tensor_dtype(&dtypes, options)
}

/// The checked columns of `table`, ready to be copied, and their common length: numeric columns
/// ([`Error::UnsupportedColumnType`]) of one length ([`Error::ColumnLength`]), at least one
/// ([`Error::NoColumns`]).
fn copy_columns_of<'a>(table: &Table<'a>) -> Result<(Vec<CopyColumn<'a>>, usize)> {
    let Some(first) = table.columns.first() else {
        return Err(Error::NoColumns);
    };
    let num_rows = first.array.len();
    let mut columns = Vec::with_capacity(table.columns.len());
    for column in &table.columns {
        let dtype = column_dtype(column)?;
        if column.array.len() != num_rows {
            return Err(Error::ColumnLength {
                column: column.name.to_string(),
                found: column.array.len(),
                expected: num_rows,
            });
        }
        columns.push(CopyColumn {
            array: column.array.as_ref(),
            dtype,
            nulls: NullBuffer::union(table.row_nulls, column.array.nulls()),
        });
    }
    Ok((columns, num_rows))
}

/// [`Error::ColumnNulls`] for the first of `columns` (of `table`) that holds nulls in `rows`.
fn refuse_nulls(table: &Table<'_>, columns: &[CopyColumn<'_>], rows: Range<usize>) -> Result<()> {
    let nulls_in_rows = |copy: &CopyColumn<'_>| {
        copy.nulls.as_ref().map_or(0, |nulls| {
            if nulls.null_count() == 0 {
                0
            } else {
                nulls.slice(rows.start, rows.len()).null_count()
            }
        })
    };
    match table
        .columns
        .iter()
        .zip(columns)
        .map(|(column, copy)| (column, nulls_in_rows(copy)))
        .find(|&(_, null_count)| null_count > 0)
    {
        Some((column, null_count)) => Err(Error::ColumnNulls {
            column: column.name.to_string(),
            null_count,
        }),
        None => Ok(()),
    }
}

/// Like [`table_to_tensor`], for columns given one by one with their names; the columns must all
/// have the same length ([`Error::ColumnLength`]) and there must be one name per column
/// ([`Error::ColumnNames`]).
///
/// Kept for the loader's column groups; new code builds a [`Table`] with
/// [`Table::try_from_columns`].
pub fn columns_to_tensor<S: AsRef<str>>(
    names: &[S],
    columns: &[ArrayRef],
    options: TableToTensorOptions,
) -> Result<Tensor> {
    table_to_tensor(&Table::try_from_columns(names, columns)?, options)
}

/// The tensor dtype of a column (`bool` for booleans, which the copy unpacks), or the error
/// naming it.
fn column_dtype(column: &Column<'_>) -> Result<DType> {
    let data_type = column.array.data_type();
    if data_type == &DataType::Boolean {
        return Ok(DType::Bool);
    }
    dtype_of(data_type).map_err(|_| Error::UnsupportedColumnType {
        column: column.name.to_string(),
        data_type: data_type.clone(),
        reason: column_reason(data_type),
        expected: NUMERIC_TYPES,
    })
}

/// Why a column of `data_type` cannot be copied into a 2-D tensor.
fn column_reason(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::FixedSizeList(_, _) => {
            "a fixed-size list holds several values per row, which one 2-D tensor cannot; convert \
             the column alone (see table_to_tensors)"
        }
        other => unsupported_reason(other),
    }
}

/// One tensor per column of a table, named by the column, in column order.
///
/// Primitive columns give 1-D tensors, fixed-size list columns (embeddings, images)
/// `[num_rows, l1, ...]`, and `arrow.fixed_shape_tensor` columns (recognised by their field, so
/// in tables made from a record batch or a struct array) `[num_rows, *shape]` in their logical
/// order. Every tensor shares its column's memory and is read-only, except boolean columns,
/// which `allow_copy` unpacks into fresh `bool` tensors (without it they are refused).
///
/// Nulls are refused with [`Error::TableNulls`], whose [`NullLocation`] names the column and
/// the nesting level (or the table's null rows), unless `allow_nulls`; with it, the tensors hold
/// whatever the columns hold in null slots. Other types are refused with
/// [`Error::UnsupportedColumnType`]. Columns may have different lengths.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
/// use arrow_dlpack::{ColumnTensorOptions, Table, table_to_tensors};
///
/// let ids = Int64Array::from(vec![7, 8]);
/// let batch = RecordBatch::try_from_iter([
///     ("id", Arc::new(ids.clone()) as ArrayRef),
///     ("score", Arc::new(Float64Array::from(vec![0.1, 0.2])) as ArrayRef),
/// ])?;
/// let tensors = table_to_tensors(&Table::from(&batch), ColumnTensorOptions::default())?;
/// assert_eq!(tensors[0].0, "id");
/// assert_eq!(tensors[0].1.data_ptr(), ids.values().as_ptr().cast());
/// assert_eq!(tensors[1].1.shape(), &[2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn table_to_tensors(
    table: &Table<'_>,
    options: ColumnTensorOptions,
) -> Result<Vec<(String, Tensor)>> {
    let row_nulls = table.row_nulls.map_or(0, NullBuffer::null_count);
    if !options.allow_nulls && row_nulls > 0 {
        return Err(Error::TableNulls {
            null_count: row_nulls,
            location: NullLocation::Rows,
        });
    }
    table
        .columns
        .iter()
        .map(|column| Ok((column.name.to_string(), column_tensor(column, options)?)))
        .collect()
}

/// The tensor of one column, with errors that name it.
fn column_tensor(column: &Column<'_>, options: ColumnTensorOptions) -> Result<Tensor> {
    let extension = column
        .field
        .filter(|field| field.extension_type_name() == Some(EXTENSION_NAME));
    let array_options = ArrayToTensorOptions {
        allow_nulls: options.allow_nulls,
        allow_copy: options.allow_copy,
    };
    let result = match extension {
        Some(field) => FixedShapeTensorArray::try_from_field_and_array(field, column.array.clone())
            .and_then(|array| array.to_tensor(array_options)),
        None => array_to_tensor(column.array.as_ref(), array_options),
    };
    result.map_err(|error| match error {
        // A column of booleans without `allow_copy` is a column type this conversion cannot
        // share; name the column and its type rather than ask for a copy.
        Error::CopyRequired { .. } => Error::UnsupportedColumnType {
            column: column.name.to_string(),
            data_type: crate::to_tensor::leaf_type(column.array.data_type()).clone(),
            reason: unsupported_reason(&DataType::Boolean),
            expected: TENSOR_TYPES,
        },
        Error::UnsupportedType { data_type, reason } => Error::UnsupportedColumnType {
            column: column.name.to_string(),
            data_type,
            reason,
            expected: TENSOR_TYPES,
        },
        Error::Nulls { .. } => match first_nulls(column.array.as_ref()) {
            Some((depth, null_count)) => Error::TableNulls {
                null_count,
                location: NullLocation::Column {
                    column: column.name.to_string(),
                    depth,
                },
            },
            None => error,
        },
        other => other,
    })
}

/// The first nesting level of `array` that holds nulls, and how many: 0 for the array's own
/// slots, `n` for the child values `n` fixed-size lists down (arrow-rs slices a fixed-size
/// list's values with the list, so every level holds exactly the array's elements).
fn first_nulls(array: &dyn Array) -> Option<(usize, usize)> {
    let mut level = array;
    let mut depth = 0;
    loop {
        if level.null_count() > 0 {
            return Some((depth, level.null_count()));
        }
        level = level.as_fixed_size_list_opt()?.values().as_ref();
        depth += 1;
    }
}
