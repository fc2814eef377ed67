//! The interleaving of row-major output without a fused kernel: runs of the destination's type,
//! one per column, copied into a row-major block by a loop unrolled for up to [`MAX_GROUP`]
//! columns, a whole row at a time, and groups of a multiple of 4 columns of 4-byte values 4 rows
//! by 4 columns at a time through transposes in SSE registers.

use std::mem::MaybeUninit;

use super::MAX_GROUP;

/// Copies one run per column (`runs`, all of the same length) into the row-major block `out`
/// (as many rows, one slot per column), initialising every slot of it.
pub(super) fn transpose<D: Copy>(runs: &[&[D]], out: &mut [MaybeUninit<D>]) {
    let num_columns = runs.len();
    let mut first = 0;
    while first < num_columns {
        let width = (num_columns - first).min(MAX_GROUP);
        let group = &runs[first..first + width];
        let transpose: GroupTranspose<D> = match width {
            1 => transpose_group::<D, 1>,
            2 => transpose_group::<D, 2>,
            3 => transpose_group::<D, 3>,
            4 => transpose_group::<D, 4>,
            5 => transpose_group::<D, 5>,
            6 => transpose_group::<D, 6>,
            7 => transpose_group::<D, 7>,
            8 => transpose_group::<D, 8>,
            9 => transpose_group::<D, 9>,
            10 => transpose_group::<D, 10>,
            11 => transpose_group::<D, 11>,
            12 => transpose_group::<D, 12>,
            13 => transpose_group::<D, 13>,
            14 => transpose_group::<D, 14>,
            15 => transpose_group::<D, 15>,
            16 => transpose_group::<D, 16>,
            _ => unreachable!("groups have 1 to {MAX_GROUP} columns"),
        };
        transpose(group, out, num_columns, first);
        first += width;
    }
}

/// A monomorphisation of [`transpose_group`]: runs, output block, columns, first column.
type GroupTranspose<D> = fn(&[&[D]], &mut [MaybeUninit<D>], usize, usize);

/// Copies `K` runs (`group`) into columns `first..first + K` of the row-major block `out` of
/// `num_columns` columns. With `K` known, each output row is a fixed-size array filled by an
/// unrolled loop.
fn transpose_group<D: Copy, const K: usize>(
    group: &[&[D]],
    out: &mut [MaybeUninit<D>],
    num_columns: usize,
    first: usize,
) {
    let runs: &[&[D]; K] = group.try_into().expect("a group has K runs");
    let rows = runs[0].len();
    // `write_columns` relies on every row of the block being written.
    assert!(runs.iter().all(|run| run.len() == rows) && out.len() == rows * num_columns);
    assert!(
        first + K <= num_columns,
        "a group of K columns lies inside the row"
    );
    let runs: [&[D]; K] = std::array::from_fn(|c| &runs[c][..rows]);
    // 4-byte elements in groups of 4 columns go through 4 x 4 register transposes; the rows
    // after the last whole tile, and every other group, through the loop below.
    let done = if size_of::<D>() == 4 && K.is_multiple_of(4) {
        transpose_tiles_4x4(&runs, out, num_columns, first)
    } else {
        0
    };
    for (row, out_row) in (done..rows).zip(out[done * num_columns..].chunks_exact_mut(num_columns))
    {
        let slots: &mut [MaybeUninit<D>; K] = (&mut out_row[first..first + K])
            .try_into()
            .expect("a group of K columns lies inside the row");
        for (slot, run) in slots.iter_mut().zip(runs) {
            slot.write(run[row]);
        }
    }
}

/// Copies the first `rows / 4 * 4` rows of the `K` runs (`K` a multiple of 4, 4-byte elements)
/// into columns `first..first + K` of the row-major block `out`, 4 rows by 4 columns at a time:
/// four loads of 4 values, a transpose in registers (shuffles, which move bits and never
/// compute, so every value, NaN payloads included, is copied exactly), four stores. Returns the
/// number of rows written.
#[cfg(target_arch = "x86_64")]
fn transpose_tiles_4x4<D: Copy, const K: usize>(
    runs: &[&[D]; K],
    out: &mut [MaybeUninit<D>],
    num_columns: usize,
    first: usize,
) -> usize {
    use std::arch::x86_64::{
        _mm_loadu_ps, _mm_movehl_ps, _mm_movelh_ps, _mm_storeu_ps, _mm_unpackhi_ps, _mm_unpacklo_ps,
    };
    assert!(size_of::<D>() == 4 && K.is_multiple_of(4));
    let rows = runs.first().map_or(0, |run| run.len());
    assert!(runs.iter().all(|run| run.len() == rows));
    assert!(first + K <= num_columns && out.len() == rows * num_columns);
    let tiled = rows / 4 * 4;
    let out = out.as_mut_ptr().cast::<f32>();
    for row in (0..tiled).step_by(4) {
        for column in (0..K).step_by(4) {
            let load = |c: usize| {
                // SAFETY: run `column + c < K` has `rows >= row + 4` elements of 4 bytes, so
                // the 16 bytes from element `row` lie inside it; `_mm_loadu_ps` reads unaligned
                // memory, and SSE is part of every x86_64 target.
                unsafe { _mm_loadu_ps(runs[column + c].as_ptr().add(row).cast::<f32>()) }
            };
            let (a, b, c, d) = (load(0), load(1), load(2), load(3));
            // SAFETY: shuffles of registers, SSE being part of every x86_64 target.
            let rows4 = unsafe {
                let (ab_low, cd_low) = (_mm_unpacklo_ps(a, b), _mm_unpacklo_ps(c, d));
                let (ab_high, cd_high) = (_mm_unpackhi_ps(a, b), _mm_unpackhi_ps(c, d));
                [
                    _mm_movelh_ps(ab_low, cd_low),
                    _mm_movehl_ps(cd_low, ab_low),
                    _mm_movelh_ps(ab_high, cd_high),
                    _mm_movehl_ps(cd_high, ab_high),
                ]
            };
            for (r, values) in rows4.into_iter().enumerate() {
                // SAFETY: slots `(row + r) * num_columns + first + column ..+ 4` lie inside `out`
                // (`row + r < rows`, `first + column + 4 <= first + K <= num_columns`, and `out`
                // has `rows * num_columns` slots of 4 bytes), which this function borrows
                // exclusively; `_mm_storeu_ps` writes unaligned memory.
                unsafe {
                    _mm_storeu_ps(out.add((row + r) * num_columns + first + column), values);
                }
            }
        }
    }
    tiled
}

/// Without x86_64's SSE, every row goes through the plain loop of [`transpose_group`].
#[cfg(not(target_arch = "x86_64"))]
fn transpose_tiles_4x4<D: Copy, const K: usize>(
    _runs: &[&[D]; K],
    _out: &mut [MaybeUninit<D>],
    _num_columns: usize,
    _first: usize,
) -> usize {
    0
}
