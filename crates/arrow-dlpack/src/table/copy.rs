//! The copy kernel of [`table_to_tensor`](crate::table_to_tensor) and
//! [`write_rows`](crate::table::write_rows()): checked numeric columns written, with their element
//! type converted, into a 2-D destination at memory speed, in one pass.
//!
//! The conversion from each column's element type to the destination's is chosen once per
//! column (a function monomorphised for the pair), never per element.
//!
//! - Column-major output is one sequential pass per column (a copy when the types agree, a
//!   conversion otherwise). Into an output of `alloc::STREAM_THRESHOLD` bytes and more, too large
//!   for the cache, the pass uses non-temporal stores, which skip reading each destination line:
//!   `alloc::copy_to_uninit` for a column of the destination's type, and for float32, int32 and
//!   int64 columns of a float64 output the streaming kernel of `copy/fused.rs` (AVX2: widened in
//!   the load, 32-byte streamed stores). Other conversions store plainly: converting through a
//!   small staging piece that is then streamed was no faster.
//! - Row-major output is written block of rows by block of rows ([`BLOCK_BYTES`] of output, a
//!   multiple of 4 rows). Columns of the destination's type are read where they are; columns of
//!   another type are converted into their run of a column-major staging block that stays in
//!   cache (a vectorised loop), except those a fused kernel converts as it loads them.
//! - Float64 output on x86_64 with AVX2 (PyArrow's promotion of mixed int32, float32 and
//!   float64 columns, the common case) goes through the fused kernel of `copy/fused.rs`:
//!   4 rows of every column at a time, float64 columns loaded as they are and float32, int32
//!   and int64 columns widened in the load (`vcvtps2pd`, `vcvtdq2pd`, exact, the bits of
//!   `as f64`; int64 one value at a time, rounded as `as f64` rounds), 4 x 4 transposes in
//!   registers, and whole output lines stored, so that each column is read once and each output
//!   line written once, with no staging pass for those columns (other column types are staged
//!   and then read by the same kernel). Tiles of 4 rows run across all the columns of the block,
//!   rather than each group of 4 columns down the whole block, which was slower; the block size
//!   hardly matters here, since these columns are never staged.
//! - Every other destination type, and float64 without AVX2, interleaves the runs into the
//!   output block by a loop unrolled for up to [`MAX_GROUP`] columns, a whole row at a time;
//!   groups of a multiple of 4 columns of 4-byte values (float32, int32, uint32) go 4 rows by 4
//!   columns at a time through a transpose in SSE registers. Storing converted values straight
//!   into the output block at their stride, without staging, and loading tiles of 8 rows per
//!   column into arrays before writing them were both slower than this loop.
//!
//! Either way each column is read once and each output block written once to memory, so that
//! the conversion and the transposition cost one pass over memory (strided stores straight into
//! a large output would miss the cache once per element).
//! The measurements behind these choices are in docs/benchmarks.md ("Why the copy kernels are
//! shaped as they are").

use std::mem::MaybeUninit;
use std::ops::Range;

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, cast::AsArray};
use arrow_buffer::{ArrowNativeType, NullBuffer};
use arrow_dlpack_tensor::alloc::{PooledVec, STREAM_MIN_RUN, STREAM_THRESHOLD, copy_to_uninit};
use arrow_dlpack_tensor::{DType, Tensor, layout};
use half::f16;

use super::convert::ConvertTo;
use crate::Result;

use fused::{Fused, Run, Streamed};

mod fused;
mod interleave;

/// The bytes of one output block of row-major filling: small enough to stay in the L1/L2 cache
/// while every column is stored into it, large enough that each column is read in runs long
/// enough for the prefetcher.
const BLOCK_BYTES: usize = 64 * 1024;

/// The fewest rows in a block, so that a very wide table still moves a few values per call.
const MIN_BLOCK_ROWS: usize = 8;

/// The most columns interleaved by one unrolled loop; wider blocks go in groups.
const MAX_GROUP: usize = 16;

/// A checked column, ready to be copied: its values, their dtype (one of the numeric Arrow
/// dtypes), and its nulls (for a struct array, merged with the struct's own).
pub(super) struct CopyColumn<'a> {
    pub(super) array: &'a dyn Array,
    pub(super) dtype: DType,
    pub(super) nulls: Option<NullBuffer>,
}

/// Where [`write_columns`] writes: a `[num_rows, num_columns]` matrix of one element type, laid
/// out row- or column-major, of which rows `row_offset..` receive the copied rows.
pub(super) struct Target<'a, D> {
    pub(super) slots: &'a mut [MaybeUninit<D>],
    pub(super) num_rows: usize,
    pub(super) row_offset: usize,
    pub(super) row_major: bool,
}

/// Calls `$call!(N, A)` with the native type `N` and the Arrow type `A` of the numeric dtype
/// `$dtype`: the one list of the table dtypes in this file.
macro_rules! with_element {
    ($dtype:expr, $call:ident) => {
        match $dtype {
            DType::Int8 => $call!(i8, Int8Type),
            DType::Int16 => $call!(i16, Int16Type),
            DType::Int32 => $call!(i32, Int32Type),
            DType::Int64 => $call!(i64, Int64Type),
            DType::UInt8 => $call!(u8, UInt8Type),
            DType::UInt16 => $call!(u16, UInt16Type),
            DType::UInt32 => $call!(u32, UInt32Type),
            DType::UInt64 => $call!(u64, UInt64Type),
            DType::Float16 => $call!(f16, Float16Type),
            DType::Float32 => $call!(f32, Float32Type),
            DType::Float64 => $call!(f64, Float64Type),
            other => unreachable!("only numeric Arrow dtypes are table dtypes, not {other}"),
        }
    };
}

/// Copies the rows of `pieces` (each the checked columns of one table, all as many, and their
/// common length), one piece after another, into a fresh writable tensor of shape
/// `[total rows, number of columns]` and element type `dtype`, row- or column-major.
///
/// Nulls must reach this function only when `dtype` is a float type: they are written as NaN.
pub(super) fn copy_columns(
    pieces: &[(Vec<CopyColumn<'_>>, usize)],
    dtype: DType,
    row_major: bool,
) -> Result<Tensor> {
    if dtype == DType::Bool {
        // Only boolean columns give a bool tensor: each value unpacked into a byte, 0 or 1.
        return fill::<u8>(pieces, row_major, DType::Bool);
    }
    macro_rules! fill {
        ($d:ty, $arrow:ty) => {
            fill::<$d>(pieces, row_major, <$d as Element>::DTYPE)
        };
    }
    with_element!(dtype, fill)
}

/// [`write_columns`] into a destination of `dtype` (a numeric Arrow dtype, or bool when every
/// column is boolean) given as bytes.
///
/// # Panics
///
/// As [`write_columns`], and when `bytes` is not aligned for `dtype` or is not a whole number of
/// its elements.
pub(super) fn write_columns_as(
    columns: &[CopyColumn<'_>],
    rows: Range<usize>,
    bytes: &mut [MaybeUninit<u8>],
    dtype: DType,
    num_rows: usize,
    row_offset: usize,
    row_major: bool,
) {
    macro_rules! write_as {
        ($d:ty, $arrow:ty) => {
            write_columns::<$d>(
                columns,
                rows,
                Target {
                    slots: typed_slots::<$d>(bytes),
                    num_rows,
                    row_offset,
                    row_major,
                },
            )
        };
    }
    if dtype == DType::Bool {
        assert!(
            columns.iter().all(|column| column.dtype == DType::Bool),
            "only boolean columns are written into a bool destination"
        );
        return write_as!(u8, UInt8Type);
    }
    with_element!(dtype, write_as)
}

/// `bytes` as slots of `D`.
///
/// # Panics
///
/// When `bytes` is not aligned for `D` or is not a whole number of `D`s.
fn typed_slots<D: Element>(bytes: &mut [MaybeUninit<u8>]) -> &mut [MaybeUninit<D>] {
    assert!(
        bytes.as_ptr().cast::<D>().is_aligned() && bytes.len().is_multiple_of(size_of::<D>()),
        "the destination must be aligned to {} bytes and hold whole elements of {}",
        align_of::<D>(),
        D::DTYPE
    );
    // SAFETY: the pointer is aligned for `D` (checked above) and the `len / size_of::<D>()`
    // slots span exactly the bytes of `bytes`, which this borrow holds exclusively for the same
    // lifetime; `MaybeUninit<D>` has no validity invariant, so any bytes, initialised or not, are
    // a valid slot.
    unsafe {
        std::slice::from_raw_parts_mut(
            bytes.as_mut_ptr().cast::<MaybeUninit<D>>(),
            bytes.len() / size_of::<D>(),
        )
    }
}

/// Copies every piece into a fresh tensor of element type `D`, tagged `dtype` (`D::DTYPE`, or
/// bool for bytes that hold 0 or 1).
fn fill<D: Element>(
    pieces: &[(Vec<CopyColumn<'_>>, usize)],
    row_major: bool,
    dtype: DType,
) -> Result<Tensor> {
    let num_columns = pieces.first().map_or(0, |(columns, _)| columns.len());
    let num_rows = pieces
        .iter()
        .try_fold(0usize, |total, (_, rows)| total.checked_add(*rows))
        .ok_or(arrow_dlpack_tensor::Error::Overflow {
            what: "the row count",
        })?;
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
    // Advised for huge pages when large, and never zeroed: every slot is written below.
    let mut values = PooledVec::<D>::try_with_capacity(count)?;
    let slots = &mut values.spare_capacity_mut()[..count];
    let mut row_offset = 0;
    for (columns, rows) in pieces {
        write_columns(
            columns,
            0..*rows,
            Target {
                slots: &mut *slots,
                num_rows,
                row_offset,
                row_major,
            },
        );
        row_offset += rows;
    }
    // SAFETY: `values` has capacity `count = num_rows * num_columns`. The pieces' rows add up to
    // `num_rows`, and `write_columns` initialised rows `row_offset..row_offset + rows` of every
    // one of the `num_columns` columns of the target for each piece in turn (see its contract;
    // it panics unless each piece has `num_columns` columns), which are all `count` slots. `D` is
    // a plain number type, so any bits written are a valid value.
    unsafe { values.set_len(count) };

    let strides = if row_major {
        layout::row_major_strides(&shape)?
    } else {
        layout::column_major_strides(&shape)?
    };
    let tensor = Tensor::try_new(values.into_buffer(), dtype, shape, strides, 0)?;
    Ok(tensor.with_read_only(false))
}

/// Writes rows `rows` of `columns` (every column at least `rows.end` long) into rows
/// `target.row_offset..target.row_offset + rows.len()` of `target`, converting each value to
/// `D`; null slots become NaN (nulls must reach this function only when `D` is a float type).
///
/// Contract: every slot of those target rows, in every one of the `columns.len()` columns, is
/// initialised on return.
///
/// # Panics
///
/// When the target does not have `num_rows * columns.len()` slots, or the rows do not fit in it.
pub(super) fn write_columns<D: Element>(
    columns: &[CopyColumn<'_>],
    rows: Range<usize>,
    target: Target<'_, D>,
) {
    let num_columns = columns.len();
    let Target {
        slots,
        num_rows,
        row_offset,
        row_major,
    } = target;
    let len = rows.len();
    assert_eq!(
        Some(slots.len()),
        num_rows.checked_mul(num_columns),
        "the target holds num_rows * num_columns slots"
    );
    assert!(
        row_offset
            .checked_add(len)
            .is_some_and(|end| end <= num_rows),
        "rows {row_offset}..{row_offset}+{len} lie outside a target of {num_rows} rows"
    );
    if len == 0 || num_columns == 0 {
        return;
    }

    if row_major && num_columns > 1 {
        let rows_out = &mut slots[row_offset * num_columns..(row_offset + len) * num_columns];
        // A multiple of 4 rows, so that only the last block has rows after the last tile.
        let block_rows = (BLOCK_BYTES / (num_columns * size_of::<D>())).max(MIN_BLOCK_ROWS) / 4 * 4;
        let kernel = D::fused();
        // Columns of type `D`, and the float32, int32 and int64 columns when a fused kernel converts
        // them as it loads them, are read where they are; the others are converted into their run
        // of a column-major staging block that stays in cache.
        let writers: Vec<Option<Writer<D>>> = columns
            .iter()
            .map(|column| {
                let direct = column.dtype == D::DTYPE
                    || (kernel.is_some() && read_by_fused_kernels(column.dtype));
                (!direct).then(|| D::writer(column.dtype))
            })
            .collect();
        let staged = writers.iter().flatten().count();
        let mut stage = vec![MaybeUninit::<D>::uninit(); block_rows.min(len) * staged];
        for (block, out) in rows_out.chunks_mut(block_rows * num_columns).enumerate() {
            let start = rows.start + block * block_rows;
            let block_len = out.len() / num_columns;
            let block = start..start + block_len;
            let mut stage_runs = stage[..block_len * staged].chunks_exact_mut(block_len);
            let mut runs: Vec<Run<'_, D>> = Vec::with_capacity(num_columns);
            for (column, writer) in columns.iter().zip(&writers) {
                runs.push(match writer {
                    Some(writer) => {
                        let run = stage_runs
                            .next()
                            .expect("one staging run per converted column");
                        writer(column.array, block.clone(), run);
                        // SAFETY: a writer initialises every slot of the run it is given (it
                        // asserts that the run has one slot per value and writes each).
                        Run::Same(unsafe { assume_init(run) })
                    }
                    None => direct_run(column, block.clone()),
                });
            }
            match kernel {
                Some(kernel) => kernel(&runs, out),
                None => {
                    let runs: Vec<&[D]> = runs
                        .iter()
                        .map(|run| match run {
                            Run::Same(values) => *values,
                            _ => unreachable!("without a fused kernel, every run is of type D"),
                        })
                        .collect();
                    interleave::transpose(&runs, out);
                }
            }
        }
    } else {
        // Column-major, or a single column: each column is one contiguous run, streamed past the
        // cache when the output is large (see the module doc).
        let output_bytes = size_of_val(slots);
        let large = output_bytes >= STREAM_THRESHOLD;
        let streamed = D::streamed();
        for (index, column) in columns.iter().enumerate() {
            let start = index * num_rows + row_offset;
            let run = &mut slots[start..start + len];
            if column.dtype == D::DTYPE {
                let values = &column.array.as_primitive::<D::Arrow>().values()[rows.clone()];
                copy_to_uninit(values, run, output_bytes);
            } else if let Some(stream) = streamed.filter(|_| {
                large && size_of_val(run) >= STREAM_MIN_RUN && read_by_fused_kernels(column.dtype)
            }) {
                stream(direct_run(column, rows.clone()), run);
            } else {
                D::writer(column.dtype)(column.array, rows.clone(), run);
            }
        }
    }

    for (index, column) in columns.iter().enumerate() {
        let Some(nulls) = column.nulls.as_ref().filter(|nulls| nulls.null_count() > 0) else {
            continue;
        };
        // The column may hold nulls only outside these rows (a run of a shuffled batch), which
        // an integer target takes.
        let nulls = nulls.slice(rows.start, len);
        if nulls.null_count() == 0 {
            continue;
        }
        let nan = D::NAN.expect("nulls reach the copy only when the target is a float type");
        for row in null_rows(&nulls) {
            let position = if row_major {
                (row_offset + row) * num_columns + index
            } else {
                index * num_rows + row_offset + row
            };
            slots[position].write(nan);
        }
    }
}

/// Whether the fused and streaming kernels of float64 output read columns of `dtype` where they
/// are, widening as they load (float64 columns are read as they are).
fn read_by_fused_kernels(dtype: DType) -> bool {
    matches!(dtype, DType::Float32 | DType::Int32 | DType::Int64)
}

/// The values `rows` of `column`, read where they are: of type `D`, or float32, int32 or int64 (for a
/// fused kernel).
fn direct_run<'a, D: Element>(column: &CopyColumn<'a>, rows: Range<usize>) -> Run<'a, D> {
    match column.dtype {
        dtype if dtype == D::DTYPE => {
            Run::Same(&column.array.as_primitive::<D::Arrow>().values()[rows])
        }
        DType::Float32 => Run::Float32(&column.array.as_primitive::<Float32Type>().values()[rows]),
        DType::Int32 => Run::Int32(&column.array.as_primitive::<Int32Type>().values()[rows]),
        DType::Int64 => Run::Int64(&column.array.as_primitive::<Int64Type>().values()[rows]),
        other => unreachable!("a column of {other} is staged"),
    }
}

/// The values of `slots`, every one of which is initialised.
///
/// # Safety
///
/// Every slot of `slots` must be initialised.
unsafe fn assume_init<D: Copy>(slots: &[MaybeUninit<D>]) -> &[D] {
    // SAFETY: `MaybeUninit<D>` has the size, alignment and ABI of `D`, and the caller guarantees
    // that every slot holds an initialised value; the slice is only read, for the same borrow.
    unsafe { std::slice::from_raw_parts(slots.as_ptr().cast(), slots.len()) }
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

/// Converts the values `rows` of one column into a run of as many contiguous slots; the column's
/// type and the element type are fixed by the monomorphisation chosen for the column.
type Writer<D> = fn(&dyn Array, Range<usize>, &mut [MaybeUninit<D>]);

fn write<T, D>(array: &dyn Array, rows: Range<usize>, run: &mut [MaybeUninit<D>])
where
    T: ArrowPrimitiveType,
    T::Native: ConvertTo<D>,
{
    let values = &array.as_primitive::<T>().values()[rows];
    // `write_columns` relies on every slot of the run being written.
    assert_eq!(values.len(), run.len(), "a run has one slot per value");
    for (slot, &value) in run.iter_mut().zip(values) {
        slot.write(value.convert());
    }
}

/// Writes the booleans `rows` of `array` (a boolean array) as 0 and 1 of `D`.
fn write_bool<D: Element>(array: &dyn Array, rows: Range<usize>, run: &mut [MaybeUninit<D>]) {
    let values = array.as_boolean().values().slice(rows.start, rows.len());
    // `write_columns` relies on every slot of the run being written.
    assert_eq!(values.len(), run.len(), "a run has one slot per value");
    let (zero, one) = (D::usize_as(0), D::usize_as(1));
    for (slot, value) in run.iter_mut().zip(values.iter()) {
        slot.write(if value { one } else { zero });
    }
}

/// A tensor element type: the numeric Arrow native types.
pub(super) trait Element: ArrowNativeType {
    /// The Arrow type whose values are this element.
    type Arrow: ArrowPrimitiveType<Native = Self>;
    /// The dtype of tensors of this element.
    const DTYPE: DType;
    /// NaN, for the float types.
    const NAN: Option<Self>;
    /// The contiguous writer that converts a column of dtype `source` (a numeric Arrow dtype, or
    /// bool) into this element type.
    fn writer(source: DType) -> Writer<Self>;
    /// The fused kernel of row-major output of this element type, when this CPU has one: it
    /// reads runs of this type, float32, int32 and int64.
    fn fused() -> Option<Fused<Self>> {
        None
    }
    /// The streaming kernel of column-major output of this element type, when this CPU has one:
    /// it reads float32, int32 and int64 runs.
    fn streamed() -> Option<Streamed<Self>> {
        None
    }
}

macro_rules! element {
    ($native:ty, $arrow:ty, $dtype:ident, $nan:expr $(, $fused:path, $streamed:path)?) => {
        impl Element for $native {
            type Arrow = $arrow;
            const DTYPE: DType = DType::$dtype;
            const NAN: Option<Self> = $nan;
            fn writer(source: DType) -> Writer<Self> {
                if source == DType::Bool {
                    return write_bool::<Self>;
                }
                macro_rules! from {
                    ($source:ty, $t:ty) => {
                        write::<$t, Self>
                    };
                }
                with_element!(source, from)
            }
            $(fn fused() -> Option<Fused<Self>> {
                $fused()
            }
            fn streamed() -> Option<Streamed<Self>> {
                $streamed()
            })?
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
element!(
    f64,
    Float64Type,
    Float64,
    Some(f64::NAN),
    fused::float64,
    fused::float64_streamed
);

#[cfg(test)]
mod tests;
