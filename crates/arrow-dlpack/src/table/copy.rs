//! The copy kernel of [`table_to_tensor`](crate::table_to_tensor): checked numeric columns
//! written into one fresh 2-D tensor at memory speed.
//!
//! The conversion from each column's element type to the tensor's is chosen once per column (a
//! function monomorphised for the pair), never per element; column-major output is one
//! sequential pass per column; row-major output is filled block of rows by block of rows: each
//! column converts its rows into a column-major staging block that stays in cache, and the block
//! is transposed into the output, so that memory is read and written sequentially (strided
//! stores straight into the output miss the cache once per element).

use std::mem::MaybeUninit;
use std::ops::Range;

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, cast::AsArray};
use arrow_buffer::{ArrowNativeType, Buffer, NullBuffer};
use arrow_dlpack_tensor::{DType, Tensor, layout};
use half::f16;

use crate::Result;

/// The bytes of the staging block of row-major filling: small enough to stay in the L2 cache,
/// large enough that each column is read in runs long enough for the prefetcher.
const BLOCK_BYTES: usize = 64 * 1024;

/// The fewest rows in a block, so that a very wide batch still moves a few values per call.
const MIN_BLOCK_ROWS: usize = 8;

/// A checked column, ready to be copied: its values, their dtype (one of the numeric Arrow
/// dtypes), and its nulls (for a struct array, merged with the struct's own).
pub(super) struct CopyColumn<'a> {
    pub(super) array: &'a dyn Array,
    pub(super) dtype: DType,
    pub(super) nulls: Option<NullBuffer>,
}

/// Copies `columns`, each `num_rows` long (checked by the caller), into a fresh writable tensor of
/// shape `[num_rows, columns.len()]` and element type `dtype`, row- or column-major.
///
/// Nulls must reach this function only when `dtype` is a float type: they are written as NaN.
pub(super) fn copy_columns(
    columns: &[CopyColumn<'_>],
    num_rows: usize,
    dtype: DType,
    row_major: bool,
) -> Result<Tensor> {
    let plan = Plan {
        columns,
        num_rows,
        row_major,
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

/// Checked columns, ready to be copied.
struct Plan<'a> {
    columns: &'a [CopyColumn<'a>],
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
            .columns
            .iter()
            .map(|column| D::writer(column.dtype))
            .collect();
        let mut values: Vec<D> = arrow_dlpack_tensor::alloc::try_vec_with_capacity(count)?;
        let slots = &mut values.spare_capacity_mut()[..count];

        if self.row_major && num_columns > 1 {
            // Row-major output is written block of rows by block of rows, each block transposed
            // from one run per column, so that memory is read and written sequentially (strided
            // stores straight into the output would miss the cache once per element).
            let block_rows = (BLOCK_BYTES / (num_columns * size_of::<D>())).max(MIN_BLOCK_ROWS);
            let same_type = self.columns.iter().all(|column| column.dtype == D::DTYPE);
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
        // slots initialises the whole run (`write` asserts it): every column has `num_rows`
        // values (checked by `table_to_tensor`), so its values `a..b` are as many as the slots. Column-major (or one
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
