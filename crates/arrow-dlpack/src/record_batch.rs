//! Record batches and struct arrays to tensors: all numeric columns copied into one 2-D tensor
//! with PyArrow's type promotion, or one zero-copy tensor per column.
//!
//! The 2-D copy is written at memory speed: the conversion from each column's element type to the
//! tensor's is chosen once per column (a function monomorphised for the pair), never per element;
//! column-major output is one sequential pass per column; row-major output is filled block of rows
//! by block of rows: each column converts its rows into a column-major staging block that stays in
//! cache, and the block is transposed into the output, so that memory is read and written
//! sequentially (strided stores straight into the output miss the cache once per element).

use std::mem::MaybeUninit;
use std::ops::Range;

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, RecordBatch, StructArray, cast::AsArray};
use arrow_buffer::{ArrowNativeType, Buffer, NullBuffer};
use arrow_dlpack_tensor::{DType, Tensor, layout};
use arrow_schema::DataType;
use half::f16;

use crate::data_type::unsupported_reason;
use crate::{Error, Result, dtype_of, to_tensor};

/// The element types a column may have in [`record_batch_to_tensor`].
const NUMERIC_TYPES: &str =
    "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32 or float64";

/// The column types [`record_batch_columns_to_tensors`] accepts.
const TENSOR_TYPES: &str = "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, \
                            float32 or float64, or fixed-size lists of them";

/// How [`record_batch_to_tensor`] lays out and fills the tensor.
///
/// The default is PyArrow's `RecordBatch.to_tensor(null_to_nan=False, row_major=True)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordBatchToTensorOptions {
    /// Lay the rows out one after another (C order, strides `[num_columns, 1]` in elements);
    /// otherwise the columns (Fortran order, strides `[1, num_rows]`). Default `true`.
    pub row_major: bool,
    /// Write nulls as NaN; the tensor's dtype is then always a float type (an integer result is
    /// promoted, see [`record_batch_to_tensor`]). Otherwise nulls are refused. Default `false`.
    pub null_to_nan: bool,
}

impl Default for RecordBatchToTensorOptions {
    fn default() -> Self {
        RecordBatchToTensorOptions {
            row_major: true,
            null_to_nan: false,
        }
    }
}

/// Copies the numeric columns of a record batch into one writable 2-D tensor of shape
/// `[num_rows, num_columns]`, as PyArrow's `RecordBatch.to_tensor` does.
///
/// # Columns
///
/// Every column must be int8..int64, uint8..uint64 or float16/32/64; any other type is refused
/// with [`Error::UnsupportedColumnType`] naming the column.
/// A batch without columns is refused with [`Error::NoColumns`] (its dtype would be unknown;
/// PyArrow refuses it too). A batch without rows gives shape `[0, num_columns]`.
/// Slices are read from their offset: the tensor holds exactly the batch's rows.
///
/// # Nulls
///
/// Without `null_to_nan`, a column holding nulls is refused with [`Error::ColumnNulls`].
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
/// - two signed, two unsigned or two float types: the wider.
///
/// This differs from numpy's `result_type` for `uint64` with a signed integer (numpy gives
/// `float64`) and, because the fold goes left to right, depends on the column order in rare
/// mixes: `[uint16, int8, float32]` gives `float64` (`int32` first), `[uint16, float32, int8]`
/// gives `float32`.
///
/// Unlike PyArrow, which refuses any mix of `float16` with another type ("Casting from or to
/// halffloat is not supported"), such mixes are converted by the same merge rule
/// (`float16 + float32 = float32`, `int8 + float16 = float16`, `int16 + float16 = float32`);
/// a batch of `float16` columns alone gives `float16` in both, and NaN is a real half-precision
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
/// use arrow_dlpack::{RecordBatchToTensorOptions, record_batch_to_tensor};
/// use arrow_dlpack_tensor::DType;
///
/// let batch = RecordBatch::try_from_iter([
///     ("a", Arc::new(Int16Array::from(vec![1, 2, 3])) as ArrayRef),
///     ("b", Arc::new(Float32Array::from(vec![0.5, 1.5, 2.5])) as ArrayRef),
/// ])?;
/// let tensor = record_batch_to_tensor(&batch, RecordBatchToTensorOptions::default())?;
/// assert_eq!(tensor.dtype(), DType::Float32); // int16 + float32 = float32
/// assert_eq!(tensor.shape(), &[3, 2]);
/// assert_eq!(tensor.strides(), &[2, 1]);
/// let values = tensor.row_major_buffer().unwrap();
/// assert_eq!(values.typed_data::<f32>(), &[1.0, 0.5, 2.0, 1.5, 3.0, 2.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn record_batch_to_tensor(
    batch: &RecordBatch,
    options: RecordBatchToTensorOptions,
) -> Result<Tensor> {
    let columns: Vec<Column<'_>> = batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, array)| Column {
            name: field.name(),
            array: array.as_ref(),
            nulls: array.nulls().cloned(),
        })
        .collect();
    convert(&columns, options)
}

/// Like [`record_batch_to_tensor`], for the fields of a struct array (the form a record batch
/// takes through the Arrow C data interface).
///
/// A null struct row counts as a null in every column: refused without `null_to_nan`, a row of
/// NaN with it.
pub fn struct_array_to_tensor(
    array: &StructArray,
    options: RecordBatchToTensorOptions,
) -> Result<Tensor> {
    let columns: Vec<Column<'_>> = array
        .fields()
        .iter()
        .zip(array.columns())
        .map(|(field, child)| Column {
            name: field.name(),
            array: child.as_ref(),
            nulls: NullBuffer::union(array.nulls(), child.nulls()),
        })
        .collect();
    convert(&columns, options)
}

/// Like [`record_batch_to_tensor`], for columns given one by one with their names; the columns
/// must all have the same length ([`Error::ColumnLength`]) and there must be one name per column
/// ([`Error::ColumnNames`]).
pub fn columns_to_tensor<S: AsRef<str>>(
    names: &[S],
    columns: &[ArrayRef],
    options: RecordBatchToTensorOptions,
) -> Result<Tensor> {
    check_names(names, columns)?;
    let columns: Vec<Column<'_>> = names
        .iter()
        .zip(columns)
        .map(|(name, array)| Column {
            name: name.as_ref(),
            array: array.as_ref(),
            nulls: array.nulls().cloned(),
        })
        .collect();
    convert(&columns, options)
}

/// One zero-copy tensor per column of a record batch, named by the column, in column order.
///
/// Each column goes through [`to_tensor`]: primitive columns give 1-D tensors, fixed-size list
/// columns (embeddings, images) `[num_rows, l1, ...]`; every tensor shares its column's memory and
/// is read-only. Nulls are refused ([`Error::Nulls`], naming the column) unless `allow_nulls`,
/// and other types with [`Error::UnsupportedColumnType`].
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
/// use arrow_dlpack::record_batch_columns_to_tensors;
///
/// let ids = Int64Array::from(vec![7, 8]);
/// let batch = RecordBatch::try_from_iter([
///     ("id", Arc::new(ids.clone()) as ArrayRef),
///     ("score", Arc::new(Float64Array::from(vec![0.1, 0.2])) as ArrayRef),
/// ])?;
/// let tensors = record_batch_columns_to_tensors(&batch, false)?;
/// assert_eq!(tensors[0].0, "id");
/// assert_eq!(tensors[0].1.data_ptr(), ids.values().as_ptr().cast());
/// assert_eq!(tensors[1].1.shape(), &[2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn record_batch_columns_to_tensors(
    batch: &RecordBatch,
    allow_nulls: bool,
) -> Result<Vec<(String, Tensor)>> {
    let names: Vec<&str> = batch
        .schema_ref()
        .fields()
        .iter()
        .map(|field| field.name().as_str())
        .collect();
    columns_to_tensors(&names, batch.columns(), allow_nulls)
}

/// Like [`record_batch_columns_to_tensors`], for the fields of a struct array.
///
/// Null struct rows are refused ([`Error::Nulls`] in "the struct array") unless `allow_nulls`;
/// with it, the tensors hold whatever the fields hold in those rows.
pub fn struct_array_columns_to_tensors(
    array: &StructArray,
    allow_nulls: bool,
) -> Result<Vec<(String, Tensor)>> {
    let null_count = array.null_count();
    if !allow_nulls && null_count > 0 {
        return Err(Error::Nulls {
            null_count,
            location: "the struct array".to_string(),
        });
    }
    columns_to_tensors(&array.column_names(), array.columns(), allow_nulls)
}

/// Like [`record_batch_columns_to_tensors`], for columns given one by one with their names (one
/// name per column, [`Error::ColumnNames`]); the columns may have different lengths.
pub fn columns_to_tensors<S: AsRef<str>>(
    names: &[S],
    columns: &[ArrayRef],
    allow_nulls: bool,
) -> Result<Vec<(String, Tensor)>> {
    check_names(names, columns)?;
    names
        .iter()
        .zip(columns)
        .map(|(name, array)| {
            let name = name.as_ref();
            let tensor = to_tensor(array.as_ref(), allow_nulls)
                .map_err(|error| name_the_column(error, name))?;
            Ok((name.to_string(), tensor))
        })
        .collect()
}

fn check_names<S>(names: &[S], columns: &[ArrayRef]) -> Result<()> {
    if names.len() != columns.len() {
        return Err(Error::ColumnNames {
            names: names.len(),
            columns: columns.len(),
        });
    }
    Ok(())
}

/// Rewrites an error of [`to_tensor`] so that it names the column it is about.
fn name_the_column(error: Error, column: &str) -> Error {
    match error {
        Error::UnsupportedType { data_type, reason } => Error::UnsupportedColumnType {
            column: column.to_string(),
            data_type,
            reason,
            expected: TENSOR_TYPES,
        },
        Error::Nulls {
            null_count,
            location,
        } => {
            let location = if location == "the array" {
                format!("column {column:?}")
            } else {
                format!("{location} of column {column:?}")
            };
            Error::Nulls {
                null_count,
                location,
            }
        }
        other => other,
    }
}

/// A column to copy: its name, its values and its nulls (for a struct array, merged with the
/// struct's own).
struct Column<'a> {
    name: &'a str,
    array: &'a dyn Array,
    nulls: Option<NullBuffer>,
}

impl Column<'_> {
    fn null_count(&self) -> usize {
        self.nulls.as_ref().map_or(0, NullBuffer::null_count)
    }
}

/// Checks the columns, promotes their types, and copies them into a tensor.
fn convert(columns: &[Column<'_>], options: RecordBatchToTensorOptions) -> Result<Tensor> {
    let Some(first) = columns.first() else {
        return Err(Error::NoColumns);
    };
    let num_rows = first.array.len();
    let mut sources = Vec::with_capacity(columns.len());
    for column in columns {
        sources.push(column_dtype(column)?);
        if column.array.len() != num_rows {
            return Err(Error::ColumnLength {
                column: column.name.to_string(),
                found: column.array.len(),
                expected: num_rows,
            });
        }
    }
    if !options.null_to_nan
        && let Some(column) = columns.iter().find(|column| column.null_count() > 0)
    {
        return Err(Error::ColumnNulls {
            column: column.name.to_string(),
            null_count: column.null_count(),
        });
    }
    let dtype = promoted_dtype(&sources, options.null_to_nan);
    let plan = Plan {
        columns,
        sources: &sources,
        num_rows,
        row_major: options.row_major,
    };
    match dtype {
        DType::Int8 => plan.fill::<i8>(),
        DType::Int16 => plan.fill::<i16>(),
        DType::Int32 => plan.fill::<i32>(),
        DType::Int64 => plan.fill::<i64>(),
        DType::UInt8 => plan.fill::<u8>(),
        DType::UInt16 => plan.fill::<u16>(),
        DType::UInt32 => plan.fill::<u32>(),
        DType::UInt64 => plan.fill::<u64>(),
        DType::Float16 => plan.fill::<f16>(),
        DType::Float32 => plan.fill::<f32>(),
        DType::Float64 => plan.fill::<f64>(),
        other => unreachable!("promotion only gives numeric Arrow dtypes, not {other}"),
    }
}

/// The tensor dtype of a column, or the error naming it.
fn column_dtype(column: &Column<'_>) -> Result<DType> {
    let data_type = column.array.data_type();
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
        DataType::Boolean => {
            "booleans are not numbers (PyArrow's RecordBatch.to_tensor refuses them too); cast \
             them to an integer type first"
        }
        DataType::FixedSizeList(_, _) => {
            "a fixed-size list holds several values per row, which one 2-D tensor cannot; convert \
             the column alone (see record_batch_columns_to_tensors)"
        }
        other => unsupported_reason(other),
    }
}

/// The kind of a numeric dtype, for promotion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Signed,
    Unsigned,
    Float,
}

fn kind(dtype: DType) -> Kind {
    match dtype {
        DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => Kind::Signed,
        DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64 => Kind::Unsigned,
        DType::Float16 | DType::Float32 | DType::Float64 => Kind::Float,
        other => unreachable!("{other} is not a column dtype"),
    }
}

fn bits(dtype: DType) -> usize {
    dtype.size() * 8
}

/// The narrowest dtype of `kind` with at least `bits` bits (64 at most).
fn of_width(kind: Kind, bits: usize) -> DType {
    match (kind, bits) {
        (Kind::Signed, 0..=8) => DType::Int8,
        (Kind::Signed, 9..=16) => DType::Int16,
        (Kind::Signed, 17..=32) => DType::Int32,
        (Kind::Signed, _) => DType::Int64,
        (Kind::Unsigned, 0..=8) => DType::UInt8,
        (Kind::Unsigned, 9..=16) => DType::UInt16,
        (Kind::Unsigned, 17..=32) => DType::UInt32,
        (Kind::Unsigned, _) => DType::UInt64,
        (Kind::Float, 0..=16) => DType::Float16,
        (Kind::Float, 17..=32) => DType::Float32,
        (Kind::Float, _) => DType::Float64,
    }
}

/// Arrow's `MaybeMergeNumericTypes` with integer-to-float, integer-sign and numeric-width
/// promotion (see [`record_batch_to_tensor`]).
fn merge(promoted: DType, other: DType) -> DType {
    if promoted == other {
        return promoted;
    }
    match (kind(promoted), kind(other)) {
        (Kind::Unsigned, Kind::Signed) | (Kind::Signed, Kind::Unsigned) => {
            let (unsigned, signed) = if kind(promoted) == Kind::Unsigned {
                (promoted, other)
            } else {
                (other, promoted)
            };
            let mut width = bits(unsigned).max(bits(signed));
            // An unsigned integer at least as wide as the signed one needs one more bit.
            if bits(unsigned) >= bits(signed) {
                width += 1;
            }
            of_width(Kind::Signed, width)
        }
        (Kind::Float, Kind::Signed | Kind::Unsigned)
        | (Kind::Signed | Kind::Unsigned, Kind::Float) => {
            let (float, integer) = if kind(promoted) == Kind::Float {
                (promoted, other)
            } else {
                (other, promoted)
            };
            let integer_as_float = match bits(integer) {
                8 => DType::Float16,
                16 => DType::Float32,
                _ => DType::Float64,
            };
            of_width(Kind::Float, bits(float).max(bits(integer_as_float)))
        }
        (kind, _) => of_width(kind, bits(promoted).max(bits(other))),
    }
}

/// The tensor dtype for columns of dtypes `sources` (not empty): PyArrow's left fold of
/// [`merge`], then a merge with `float32` when `null_to_nan` leaves an integer type.
fn promoted_dtype(sources: &[DType], null_to_nan: bool) -> DType {
    let merged = sources[1..]
        .iter()
        .fold(sources[0], |promoted, &other| merge(promoted, other));
    if null_to_nan && kind(merged) != Kind::Float {
        merge(merged, DType::Float32)
    } else {
        merged
    }
}

/// The bytes of the staging block of row-major filling: small enough to stay in the L2 cache,
/// large enough that each column is read in runs long enough for the prefetcher.
const BLOCK_BYTES: usize = 64 * 1024;

/// The fewest rows in a block, so that a very wide batch still moves a few values per call.
const MIN_BLOCK_ROWS: usize = 8;

/// Checked columns, ready to be copied.
struct Plan<'a> {
    columns: &'a [Column<'a>],
    sources: &'a [DType],
    num_rows: usize,
    row_major: bool,
}

impl Plan<'_> {
    /// Copies every column into a fresh tensor of element type `D`.
    fn fill<D: Element>(&self) -> Result<Tensor> {
        let num_rows = self.num_rows;
        let num_columns = self.columns.len();
        let shape = vec![num_rows, num_columns];
        let count = layout::element_count(&shape)?;
        if count
            .checked_mul(size_of::<D>())
            .is_none_or(|bytes| bytes > isize::MAX as usize)
        {
            return Err(arrow_dlpack_tensor::Error::Overflow {
                what: "the byte size",
            }
            .into());
        }
        let writers: Vec<Writer<D>> = self
            .sources
            .iter()
            .map(|&source| D::writer(source))
            .collect();
        let mut values: Vec<D> = arrow_dlpack_tensor::alloc::try_vec_with_capacity(count)?;
        let slots = &mut values.spare_capacity_mut()[..count];

        if self.row_major && num_columns > 1 {
            // Row-major output is written block of rows by block of rows, each block transposed
            // from one run per column, so that memory is read and written sequentially (strided
            // stores straight into the output would miss the cache once per element).
            let block_rows = (BLOCK_BYTES / (num_columns * size_of::<D>())).max(MIN_BLOCK_ROWS);
            let same_type = self.sources.iter().all(|&source| source == D::DTYPE);
            if same_type {
                // Every column already holds `D`: the runs are the columns' own values.
                let sources: Vec<&[D]> = self
                    .columns
                    .iter()
                    .map(|column| column.array.as_primitive::<D::Arrow>().values().as_ref())
                    .collect();
                for start in (0..num_rows).step_by(block_rows) {
                    let end = num_rows.min(start + block_rows);
                    let runs: Vec<&[D]> =
                        sources.iter().map(|source| &source[start..end]).collect();
                    transpose(&runs, &mut slots[start * num_columns..end * num_columns]);
                }
            } else {
                // Each column converts the block's rows into its run of a column-major staging
                // block that stays in cache, with the conversion chosen once per column.
                let mut stage = vec![MaybeUninit::<D>::uninit(); block_rows * num_columns];
                for start in (0..num_rows).step_by(block_rows) {
                    let end = num_rows.min(start + block_rows);
                    let rows = end - start;
                    let stage = &mut stage[..rows * num_columns];
                    for ((column, writer), run) in self
                        .columns
                        .iter()
                        .zip(&writers)
                        .zip(stage.chunks_exact_mut(rows))
                    {
                        writer(column.array, start..end, run);
                    }
                    let runs: Vec<&[MaybeUninit<D>]> = stage.chunks_exact(rows).collect();
                    transpose(&runs, &mut slots[start * num_columns..end * num_columns]);
                }
            }
        } else if num_rows > 0 {
            // Column-major, or a single column: each column is one contiguous run.
            for ((column, writer), run) in self
                .columns
                .iter()
                .zip(&writers)
                .zip(slots.chunks_exact_mut(num_rows))
            {
                writer(column.array, 0..num_rows, run);
            }
        }

        for (index, column) in self.columns.iter().enumerate() {
            let Some(nulls) = column.nulls.as_ref().filter(|nulls| nulls.null_count() > 0) else {
                continue;
            };
            let nan = D::NAN
                .expect("nulls reach the copy only with null_to_nan, which promotes to a float");
            let position = |row: usize| {
                if self.row_major {
                    row * num_columns + index
                } else {
                    index * num_rows + row
                }
            };
            for row in null_rows(nulls) {
                slots[position(row)].write(nan);
            }
        }

        // SAFETY: `values` has capacity `count = num_rows * num_columns`, and every one of those
        // slots holds a value written above. A writer given rows `a..b` and a run of `b - a`
        // slots initialises the whole run: every column has `num_rows` values (checked in
        // `convert`), so its values `a..b` are as many as the slots. Column-major (or one
        // column): `chunks_exact_mut(num_rows)` gives each column its run of `num_rows` slots.
        // Row-major: the blocks `start..end` cover `0..num_rows`; in each block there is one run
        // of `end - start` values per column (the columns' own values, or staging runs that the
        // writers filled), and `transpose` copies them into every slot of the block's output
        // rows (its groups of columns cover `0..num_columns`, each for every row). With
        // `num_rows == 0`, `count` is 0. `D` is a plain number type, so any bits written are a
        // valid value.
        unsafe { values.set_len(count) };

        let strides = if self.row_major {
            layout::row_major_strides(&shape)?
        } else {
            layout::column_major_strides(&shape)?
        };
        let tensor = Tensor::try_new(Buffer::from_vec(values), D::DTYPE, shape, strides, 0)?;
        Ok(tensor.with_read_only(false))
    }
}

/// The rows that `nulls` marks null: the gaps between its runs of valid rows.
fn null_rows(nulls: &NullBuffer) -> impl Iterator<Item = usize> + '_ {
    let len = nulls.len();
    let mut valid_runs = nulls.inner().set_slices();
    let mut next = 0;
    std::iter::from_fn(move || {
        if next >= len {
            return None;
        }
        Some(match valid_runs.next() {
            Some((start, end)) => {
                let gap = next..start;
                next = end;
                gap
            }
            None => {
                let gap = next..len;
                next = len;
                gap
            }
        })
    })
    .flatten()
}

/// Converts the values `rows` of one column into a run of as many slots; the column's type and
/// the element type are fixed by the monomorphisation chosen for the column.
type Writer<D> = fn(&dyn Array, Range<usize>, &mut [MaybeUninit<D>]);

fn write<T, D>(array: &dyn Array, rows: Range<usize>, run: &mut [MaybeUninit<D>])
where
    T: ArrowPrimitiveType,
    T::Native: ConvertTo<D>,
{
    let values = &array.as_primitive::<T>().values()[rows];
    // The unsafe `set_len` in `Plan::fill` relies on every slot of the run being written.
    assert_eq!(values.len(), run.len(), "a run has one slot per value");
    for (slot, &value) in run.iter_mut().zip(values) {
        slot.write(value.convert());
    }
}

/// The most columns [`transpose_group`] moves at once; wider blocks go in groups.
const MAX_GROUP: usize = 16;

/// A value that fills a slot of the output: a value of `D` itself, or a staged slot.
trait Cell<D>: Copy {
    fn slot(self) -> MaybeUninit<D>;
}

impl<D: Copy> Cell<D> for MaybeUninit<D> {
    #[inline(always)]
    fn slot(self) -> MaybeUninit<D> {
        self
    }
}

/// Copies one run per column (`runs`, all of the same length) into the row-major block `out`
/// (as many rows, one slot per column).
fn transpose<D: Copy, C: Cell<D>>(runs: &[&[C]], out: &mut [MaybeUninit<D>]) {
    let num_columns = runs.len();
    let mut first = 0;
    while first < num_columns {
        let width = (num_columns - first).min(MAX_GROUP);
        let group = &runs[first..first + width];
        let transpose: GroupTranspose<D, C> = match width {
            1 => transpose_group::<D, C, 1>,
            2 => transpose_group::<D, C, 2>,
            3 => transpose_group::<D, C, 3>,
            4 => transpose_group::<D, C, 4>,
            5 => transpose_group::<D, C, 5>,
            6 => transpose_group::<D, C, 6>,
            7 => transpose_group::<D, C, 7>,
            8 => transpose_group::<D, C, 8>,
            9 => transpose_group::<D, C, 9>,
            10 => transpose_group::<D, C, 10>,
            11 => transpose_group::<D, C, 11>,
            12 => transpose_group::<D, C, 12>,
            13 => transpose_group::<D, C, 13>,
            14 => transpose_group::<D, C, 14>,
            15 => transpose_group::<D, C, 15>,
            16 => transpose_group::<D, C, 16>,
            _ => unreachable!("groups have 1 to {MAX_GROUP} columns"),
        };
        transpose(group, out, num_columns, first);
        first += width;
    }
}

/// A monomorphisation of [`transpose_group`]: runs, output block, columns, first column.
type GroupTranspose<D, C> = fn(&[&[C]], &mut [MaybeUninit<D>], usize, usize);

/// Copies `K` runs (`group`) into columns `first..first + K` of the row-major block `out` of
/// `num_columns` columns. With `K` known, each output row is a fixed-size array filled by an
/// unrolled loop.
fn transpose_group<D: Copy, C: Cell<D>, const K: usize>(
    group: &[&[C]],
    out: &mut [MaybeUninit<D>],
    num_columns: usize,
    first: usize,
) {
    let runs: &[&[C]; K] = group.try_into().expect("a group has K runs");
    let rows = runs[0].len();
    // The unsafe `set_len` in `Plan::fill` relies on every row of the block being written.
    assert!(runs.iter().all(|run| run.len() == rows) && out.len() == rows * num_columns);
    let runs: [&[C]; K] = std::array::from_fn(|c| &runs[c][..rows]);
    for (row, out_row) in (0..rows).zip(out.chunks_exact_mut(num_columns)) {
        let slots: &mut [MaybeUninit<D>; K] = (&mut out_row[first..first + K])
            .try_into()
            .expect("a group of K columns lies inside the row");
        for (slot, run) in slots.iter_mut().zip(runs) {
            *slot = run[row].slot();
        }
    }
}

/// A tensor element type: the numeric Arrow native types.
trait Element: ArrowNativeType + Cell<Self> {
    /// The Arrow type whose values are this element.
    type Arrow: ArrowPrimitiveType<Native = Self>;
    /// The dtype of tensors of this element.
    const DTYPE: DType;
    /// NaN, for the float types.
    const NAN: Option<Self>;
    /// The writer that converts a column of dtype `source` into this element type.
    fn writer(source: DType) -> Writer<Self>;
}

macro_rules! element {
    ($native:ty, $arrow:ty, $dtype:ident, $nan:expr) => {
        impl Cell<$native> for $native {
            #[inline(always)]
            fn slot(self) -> MaybeUninit<$native> {
                MaybeUninit::new(self)
            }
        }

        impl Element for $native {
            type Arrow = $arrow;
            const DTYPE: DType = DType::$dtype;
            const NAN: Option<Self> = $nan;
            fn writer(source: DType) -> Writer<Self> {
                match source {
                    DType::Int8 => write::<Int8Type, Self>,
                    DType::Int16 => write::<Int16Type, Self>,
                    DType::Int32 => write::<Int32Type, Self>,
                    DType::Int64 => write::<Int64Type, Self>,
                    DType::UInt8 => write::<UInt8Type, Self>,
                    DType::UInt16 => write::<UInt16Type, Self>,
                    DType::UInt32 => write::<UInt32Type, Self>,
                    DType::UInt64 => write::<UInt64Type, Self>,
                    DType::Float16 => write::<Float16Type, Self>,
                    DType::Float32 => write::<Float32Type, Self>,
                    DType::Float64 => write::<Float64Type, Self>,
                    other => unreachable!("{other} is not a column dtype"),
                }
            }
        }
    };
}

element!(i8, Int8Type, Int8, None);
element!(i16, Int16Type, Int16, None);
element!(i32, Int32Type, Int32, None);
element!(i64, Int64Type, Int64, None);
element!(u8, UInt8Type, UInt8, None);
element!(u16, UInt16Type, UInt16, None);
element!(u32, UInt32Type, UInt32, None);
element!(u64, UInt64Type, UInt64, None);
element!(f16, Float16Type, Float16, Some(f16::NAN));
element!(f32, Float32Type, Float32, Some(f32::NAN));
element!(f64, Float64Type, Float64, Some(f64::NAN));

/// A conversion between numeric types with the meaning of C++'s `static_cast` (Rust's `as`).
trait ConvertTo<D>: Copy {
    fn convert(self) -> D;
}

macro_rules! convert_with_as {
    ($target:ty: $($source:ty),+) => {
        $(impl ConvertTo<$target> for $source {
            #[inline(always)]
            fn convert(self) -> $target {
                self as $target
            }
        })+
    };
}

convert_with_as!(i8: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(i16: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(i32: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(i64: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u8: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u16: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u32: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(u64: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(f32: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);
convert_with_as!(f64: i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

// Half precision has no `as`: it goes through `f32` (exact for every value of `f16` and of the
// 8- and 16-bit integers) or `f64` (one rounding from the wider types). Promotion only ever
// converts `f16` into wider floats and 8-bit integers into `f16`; the other pairs exist so that
// every column can be written into every element type.
macro_rules! convert_half {
    (via $via:ty, $to_half:path: $($source:ty),+) => {
        $(impl ConvertTo<f16> for $source {
            #[inline(always)]
            fn convert(self) -> f16 {
                $to_half(self as $via)
            }
        }
        impl ConvertTo<$source> for f16 {
            #[inline(always)]
            fn convert(self) -> $source {
                self.to_f64() as $source
            }
        })+
    };
}

convert_half!(via f32, f16::from_f32: i8, i16, u8, u16, f32);
convert_half!(via f64, f16::from_f64: i32, i64, u32, u64, f64);

impl ConvertTo<f16> for f16 {
    #[inline(always)]
    fn convert(self) -> f16 {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [DType; 11] = crate::ARROW_DTYPES;

    #[test]
    fn merge_is_symmetric_for_every_pair() {
        for a in ALL {
            for b in ALL {
                assert_eq!(merge(a, b), merge(b, a), "{a} + {b}");
            }
        }
    }

    #[test]
    fn merge_follows_arrows_examples() {
        // The examples of Field::MergeOptions in Arrow C++ type.h, and of its tests.
        assert_eq!(merge(DType::Int8, DType::Float32), DType::Float32);
        assert_eq!(merge(DType::Int32, DType::Float32), DType::Float64);
        assert_eq!(merge(DType::Int32, DType::Float64), DType::Float64);
        assert_eq!(merge(DType::UInt8, DType::Int16), DType::Int16);
        assert_eq!(merge(DType::UInt16, DType::Int16), DType::Int32);
        assert_eq!(merge(DType::Int16, DType::Int32), DType::Int32);
    }

    #[test]
    fn null_rows_are_the_gaps_between_valid_runs() {
        let validity = [false, true, true, false, false, true, false];
        let nulls = NullBuffer::from(validity.to_vec());
        let rows: Vec<usize> = null_rows(&nulls).collect();
        assert_eq!(rows, [0, 3, 4, 6]);
        let sliced = nulls.slice(1, 5); // true, true, false, false, true
        assert_eq!(null_rows(&sliced).collect::<Vec<_>>(), [2, 3]);
        let all_valid = NullBuffer::new_valid(3);
        assert_eq!(null_rows(&all_valid).count(), 0);
        let all_null = NullBuffer::new_null(3);
        assert_eq!(null_rows(&all_null).collect::<Vec<_>>(), [0, 1, 2]);
    }
}
