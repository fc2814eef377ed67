//! [`write_rows`]: rows of a [`Table`] written into a caller's 2-D buffer at a row offset, with
//! the promotion and the copy kernel of [`table_to_tensor`](crate::table_to_tensor).

use std::mem::MaybeUninit;
use std::ops::Range;

use arrow_dlpack_tensor::{DType, NativeDType};

use super::copy::write_columns_as;
use super::{Table, copy_columns_of, refuse_nulls};
use crate::{Error, Result};

/// A caller's 2-D buffer that [`write_rows`] fills: `num_rows` rows of one value per column of
/// the table, of element type `dtype`, laid out row-major (C order, strides
/// `[num_columns, 1]` in elements) or column-major (Fortran order, strides `[1, num_rows]`).
///
/// Build one from typed slots with [`RowsDestination::new`], or from bytes and a dtype chosen at
/// run time with [`RowsDestination::from_bytes`].
#[derive(Debug)]
pub struct RowsDestination<'a> {
    bytes: &'a mut [MaybeUninit<u8>],
    dtype: DType,
    num_rows: usize,
    row_major: bool,
}

impl<'a> RowsDestination<'a> {
    /// The destination of `slots.len() / num_rows` columns held by `slots` (its tail
    /// after `num_rows * num_columns` elements, if any, is never written).
    pub fn new<T: NativeDType>(
        slots: &'a mut [MaybeUninit<T>],
        num_rows: usize,
        row_major: bool,
    ) -> Self {
        let len = size_of_val(slots);
        // SAFETY: the bytes of `slots` are `len` bytes at its start, borrowed exclusively for
        // `'a` like `slots`; `MaybeUninit<u8>` has no validity invariant and alignment 1, and
        // `T` is a plain number type (`NativeDType` is sealed), so any bytes written through this
        // view leave every slot a valid `MaybeUninit<T>`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(slots.as_mut_ptr().cast(), len) };
        RowsDestination {
            bytes,
            dtype: T::DTYPE,
            num_rows,
            row_major,
        }
    }

    /// The destination held by `bytes`, of elements of `dtype`. `bytes` must be aligned for
    /// `dtype` ([`write_rows`] panics otherwise).
    pub fn from_bytes(
        bytes: &'a mut [MaybeUninit<u8>],
        dtype: DType,
        num_rows: usize,
        row_major: bool,
    ) -> Self {
        RowsDestination {
            bytes,
            dtype,
            num_rows,
            row_major,
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of rows.
    pub fn num_rows(&self) -> usize {
        self.num_rows
    }
}

/// What [`write_rows`] does with nulls.
///
/// The default refuses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteRowsOptions {
    /// Write null slots as NaN; the destination must then have a float dtype for rows with
    /// nulls. Otherwise nulls are refused with [`Error::ColumnNulls`]. Default `false`.
    pub null_to_nan: bool,
}

/// Writes rows `rows` of `table` into rows `row_offset..row_offset + rows.len()` of
/// `destination`, one column of the destination per column of the table, converting every value
/// to the destination's dtype, in one pass.
///
/// This is [`table_to_tensor`](crate::table_to_tensor)'s kernel, given a buffer instead of allocating one: calling it
/// for consecutive tables (the chunks of a stream, or the record batches a batch of a data
/// loader spans) at consecutive offsets stacks them into one tensor without concatenating them
/// first. With the dtype of [`table_dtype`](crate::table_dtype), the values are those [`table_to_tensor`](crate::table_to_tensor) gives.
///
/// The columns are checked as [`table_to_tensor`](crate::table_to_tensor) checks them (numeric, one length, at least
/// one). Values convert as Rust's `as` does (C++'s `static_cast`), into any numeric dtype.
/// Nulls within `rows` (a struct array's null rows included) are refused with
/// [`Error::ColumnNulls`], unless `null_to_nan` and the dtype is a float type: they are then
/// written as NaN. Nothing is written when an error is returned.
///
/// The written rows are initialised on return, and no other slot is touched, so that a caller
/// who writes every row of its buffer this way may then treat it as initialised.
///
/// # Errors
///
/// [`Error::UnsupportedDType`] when the destination's dtype is not int8..int64, uint8..uint64 or
/// float16/32/64, or bool for a table of boolean columns only; the column errors above.
///
/// # Panics
///
/// When `rows` lies outside the table, the written rows outside the destination's `num_rows`,
/// or the destination has fewer than `num_rows * num_columns` elements or is not aligned for its
/// dtype: these are the caller's sizes, as for slice indexing.
///
/// ```
/// use std::mem::MaybeUninit;
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, Float32Array, Int32Array, RecordBatch};
/// use arrow_dlpack::{RowsDestination, Table, WriteRowsOptions, write_rows};
///
/// let first = RecordBatch::try_from_iter([
///     ("a", Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef),
///     ("b", Arc::new(Float32Array::from(vec![0.5, 1.5, 2.5])) as ArrayRef),
/// ])?;
/// let second = first.slice(0, 1);
/// // Rows 1..3 of the first batch, then the second batch: 3 rows of 2 columns, row-major.
/// let mut slots = vec![MaybeUninit::<f64>::uninit(); 3 * 2];
/// let mut out = RowsDestination::new(&mut slots, 3, true);
/// let options = WriteRowsOptions::default();
/// write_rows(&Table::from(&first), 1..3, &mut out, 0, options)?;
/// write_rows(&Table::from(&second), 0..1, &mut out, 2, options)?;
/// // SAFETY: write_rows initialised rows 0..2 and 2..3, every slot.
/// let values: Vec<f64> = slots.iter().map(|slot| unsafe { slot.assume_init() }).collect();
/// assert_eq!(values, [2.0, 1.5, 3.0, 2.5, 1.0, 0.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_rows(
    table: &Table<'_>,
    rows: Range<usize>,
    destination: &mut RowsDestination<'_>,
    row_offset: usize,
    options: WriteRowsOptions,
) -> Result<()> {
    let dtype = destination.dtype;
    let (columns, num_rows) = copy_columns_of(table)?;
    // A bool destination holds 0 and 1 only: it takes boolean columns alone.
    let all_bool = columns.iter().all(|column| column.dtype == DType::Bool);
    if !(crate::ARROW_DTYPES.contains(&dtype) || (dtype == DType::Bool && all_bool)) {
        return Err(Error::UnsupportedDType { dtype });
    }
    assert!(
        rows.start <= rows.end && rows.end <= num_rows,
        "rows {rows:?} lie outside a table of {num_rows} rows"
    );
    let is_float = matches!(dtype, DType::Float16 | DType::Float32 | DType::Float64);
    if !options.null_to_nan || !is_float {
        refuse_nulls(table, &columns, rows.clone())?;
    }
    let num_columns = columns.len();
    let elements = destination
        .num_rows
        .checked_mul(num_columns)
        .expect("the destination's size overflows usize");
    let bytes = elements * dtype.size();
    assert!(
        destination.bytes.len() >= bytes,
        "the destination holds {} bytes; expected at least {bytes} for {} rows of {num_columns} \
         columns of {dtype}",
        destination.bytes.len(),
        destination.num_rows
    );
    write_columns_as(
        &columns,
        rows,
        &mut destination.bytes[..bytes],
        dtype,
        destination.num_rows,
        row_offset,
        destination.row_major,
    );
    Ok(())
}
