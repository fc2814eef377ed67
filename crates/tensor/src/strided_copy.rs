//! The strided copy kernel behind [`Tensor::to_contiguous`](crate::Tensor::to_contiguous):
//! blocks over the last one or two dimensions, reversed runs and tiled transposes.

use std::mem::MaybeUninit;

/// Copies the elements of a strided view into `dst` in row-major order.
///
/// The view is cut into blocks over its last one or two dimensions, visited by an odometer over
/// the remaining outer dimensions. The block is the last dimension alone (one run, a `memcpy`
/// when its stride is 1) unless the last two dimensions are transposed (the second-to-last has the
/// smaller stride): then the block is that 2-d plane, copied in cache-sized tiles.
///
/// # Safety
///
/// `src` must point at the logical first element of a view whose every element, addressed by
/// `shape` and `strides` (in units of `T`), is readable and aligned for `T`; `dst` must be
/// writable for the element count of `shape` and aligned for `T`.
pub(crate) unsafe fn copy_strided<T: Copy>(
    src: *const u8,
    shape: &[usize],
    strides: &[isize],
    dst: *mut u8,
) {
    let src = src.cast::<T>();
    let mut dst = dst.cast::<T>();
    let ndim = shape.len();
    let transposed = ndim >= 2
        && strides[ndim - 1].unsigned_abs() > 1
        && strides[ndim - 2].unsigned_abs() < strides[ndim - 1].unsigned_abs();
    let block_dims = if transposed { 2 } else { ndim.min(1) };
    let (outer_shape, block_shape) = shape.split_at(ndim - block_dims);
    let (outer_strides, block_strides) = strides.split_at(ndim - block_dims);
    let block_len: usize = block_shape.iter().product();
    let mut index = vec![0usize; outer_shape.len()];
    let mut base: isize = 0;
    loop {
        // SAFETY: `base` is the offset of an outer index inside the view; the block from it is
        // inside the view and `dst` has room for the rest of the elements, by the caller's
        // guarantee.
        unsafe {
            copy_block(src.offset(base), block_shape, block_strides, dst);
            dst = dst.add(block_len);
        }
        // Advance the odometer over the outer dimensions, last one fastest.
        let mut dim = outer_shape.len();
        loop {
            if dim == 0 {
                return;
            }
            dim -= 1;
            index[dim] += 1;
            base += outer_strides[dim];
            if index[dim] < outer_shape[dim] {
                break;
            }
            base -= outer_strides[dim] * outer_shape[dim] as isize;
            index[dim] = 0;
        }
    }
}

/// Copies every other element of the `2 * len - 1` from `src` into `dst`.
///
/// A constant stride lets the compiler load whole vectors and keep their even lanes, where the
/// general loop moves one element per iteration: criterion `copy/to_contiguous/gapped` (every
/// other int64 of 20 MB) takes 23% less time (see `docs/benchmarks.md`).
///
/// # Safety
///
/// `len > 0`; `2 * len - 1` elements from `src` are readable, and `dst` is writable for `len`
/// elements that nothing else refers to.
unsafe fn gather_every_other<T: Copy>(src: *const T, len: usize, dst: *mut T) {
    // SAFETY: the caller's guarantee.
    let (source, destination) = unsafe {
        (
            std::slice::from_raw_parts(src, 2 * len - 1),
            std::slice::from_raw_parts_mut(dst.cast::<MaybeUninit<T>>(), len),
        )
    };
    // `len - 1` whole pairs, then the last element alone.
    for (out, pair) in destination.iter_mut().zip(source.chunks_exact(2)) {
        out.write(pair[0]);
    }
    destination[len - 1].write(source[2 * (len - 1)]);
}

/// Copies a block of zero, one or two dimensions into `dst` in row-major order.
///
/// # Safety
///
/// As for [`copy_strided`], for the block alone.
unsafe fn copy_block<T: Copy>(src: *const T, shape: &[usize], strides: &[isize], dst: *mut T) {
    /// Tile edge: 32 x 32 elements of at most 16 bytes stay within a 16 KiB L1 working set.
    const TILE: usize = 32;
    match (shape, strides) {
        ([], []) => {
            // SAFETY: a 0-d block is one readable element and `dst` has room for one.
            unsafe { dst.write(src.read()) }
        }
        (&[len], &[1]) => {
            // SAFETY: a unit-stride run of `len` readable elements; `dst` has room for `len`; the
            // source is the caller's view and the destination a fresh buffer, so they are disjoint.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
        }
        (&[len], &[-1]) => {
            // SAFETY: a reversed run: the `len` elements end at `src` and start `len - 1` before
            // it, all readable; `dst` has room for `len` elements that nothing else refers to.
            let (source, destination) = unsafe {
                (
                    std::slice::from_raw_parts(src.sub(len - 1), len),
                    std::slice::from_raw_parts_mut(dst.cast::<MaybeUninit<T>>(), len),
                )
            };
            // Forward loads reversed in registers: the compiler vectorises a reversed zip.
            for (out, &value) in destination.iter_mut().zip(source.iter().rev()) {
                out.write(value);
            }
        }
        (&[rows, cols], &[1, col_stride]) if rows >= 8 && cols >= 8 => {
            // SAFETY: as for the general plane below, of which this is the case whose rows are
            // adjacent in the source (a transposed matrix).
            unsafe { transpose_plane(src, rows, cols, col_stride, dst) }
        }
        (&[len], &[2]) if len > 0 => {
            // SAFETY: a run of stride 2: its `len` elements lie in the `2 * len - 1` elements from
            // `src`, all inside the view; `dst` has room for `len` elements.
            unsafe { gather_every_other(src, len, dst) }
        }
        (&[len], &[stride]) => {
            for i in 0..len {
                // SAFETY: `i * stride` addresses element `i` of the run, inside the view; `i` is
                // below the block's element count.
                unsafe { dst.add(i).write(src.offset(i as isize * stride).read()) };
            }
        }
        (&[rows, cols], &[row_stride, col_stride]) => {
            for row_tile in (0..rows).step_by(TILE) {
                for col_tile in (0..cols).step_by(TILE) {
                    for row in row_tile..(row_tile + TILE).min(rows) {
                        let src_row = row as isize * row_stride;
                        for col in col_tile..(col_tile + TILE).min(cols) {
                            // SAFETY: `(row, col)` is an index of the plane, so the source offset
                            // is inside the view and the destination index below rows * cols.
                            unsafe {
                                dst.add(row * cols + col)
                                    .write(src.offset(src_row + col as isize * col_stride).read())
                            };
                        }
                    }
                }
            }
        }
        _ => unreachable!("blocks have at most two dimensions"),
    }
}

/// Copies a plane whose rows are adjacent in the source (row stride 1) into `dst` in row-major
/// order, through 8 x 8 tiles: each tile is read as eight unit-stride runs of eight (one per
/// output column) into a local array and written as eight unit-stride runs of eight (one per
/// output row), so that the compiler turns both halves into vector loads, shuffles and stores;
/// tiles are visited in blocks of 64 x 64 elements. The edges that do not fill a tile are copied element by element.
///
/// # Safety
///
/// As for [`copy_strided`], for the plane `[rows, cols]` with strides `[1, col_stride]`.
unsafe fn transpose_plane<T: Copy>(
    src: *const T,
    rows: usize,
    cols: usize,
    col_stride: isize,
    dst: *mut T,
) {
    const EDGE: usize = 8;
    /// Blocks of 64 x 64 tiles' worth of elements: the 64 source columns of a block stay within
    /// 64 pages and 16 KiB, so that neither the TLB nor L1 is thrashed by the column stride.
    const BLOCK: usize = 64;
    let element = |row: usize, col: usize| {
        // SAFETY: `(row, col)` is an index of the plane, so the offset is inside the view.
        unsafe { src.offset(row as isize + col as isize * col_stride).read() }
    };
    let (full_rows, full_cols) = (rows - rows % EDGE, cols - cols % EDGE);
    let tiles = (0..full_rows).step_by(BLOCK).flat_map(|row_block| {
        (0..full_cols).step_by(BLOCK).flat_map(move |col_block| {
            (row_block..(row_block + BLOCK).min(full_rows))
                .step_by(EDGE)
                .flat_map(move |row_tile| {
                    (col_block..(col_block + BLOCK).min(full_cols))
                        .step_by(EDGE)
                        .map(move |col_tile| (row_tile, col_tile))
                })
        })
    });
    for (row_tile, col_tile) in tiles {
        #[cfg(target_arch = "x86_64")]
        if size_of::<T>() == 4 {
            for (row, col) in [(0, 0), (0, 4), (4, 0), (4, 4)] {
                let (row, col) = (row_tile + row, col_tile + col);
                // SAFETY: `T` is four bytes, so the plane is one of `u32`-sized elements; the
                // 4 x 4 tile at `(row, col)` is inside the plane (the 8 x 8 tile is) and inside
                // the output.
                unsafe {
                    transpose_four_by_four(
                        src.offset(row as isize + col as isize * col_stride)
                            .cast::<u32>(),
                        col_stride,
                        dst.add(row * cols + col).cast::<u32>(),
                        cols,
                    )
                };
            }
            continue;
        }
        {
            let mut tile = [[element(row_tile, col_tile); EDGE]; EDGE];
            for (col, column) in tile.iter_mut().enumerate() {
                // SAFETY: the eight rows from `row_tile` of column `col_tile + col` are adjacent
                // in the source and inside the plane.
                let run = unsafe {
                    std::slice::from_raw_parts(
                        src.offset(row_tile as isize + (col_tile + col) as isize * col_stride),
                        EDGE,
                    )
                };
                column.copy_from_slice(run);
            }
            let lines: [[T; EDGE]; EDGE] =
                std::array::from_fn(|row| std::array::from_fn(|col| tile[col][row]));
            for (row, line) in lines.into_iter().enumerate() {
                // SAFETY: row `row_tile + row`, columns `col_tile..col_tile + 8` of the output
                // are inside its `rows * cols` elements.
                unsafe {
                    dst.add((row_tile + row) * cols + col_tile)
                        .cast::<[T; EDGE]>()
                        .write_unaligned(line)
                };
            }
        }
    }
    for row in 0..full_rows {
        {
            for col in full_cols..cols {
                // SAFETY: an index of the plane; the destination index is below rows * cols.
                unsafe { dst.add(row * cols + col).write(element(row, col)) };
            }
        }
    }
    for row in full_rows..rows {
        for col in 0..cols {
            // SAFETY: an index of the plane; the destination index is below rows * cols.
            unsafe { dst.add(row * cols + col).write(element(row, col)) };
        }
    }
}

/// Transposes one 4 x 4 tile of four-byte elements with SSE2 (part of the x86-64 baseline): four
/// unit-stride loads of source columns, eight unpacks, four unit-stride stores of output rows.
///
/// # Safety
///
/// `src` is the tile's first element; the four elements from `src + c * col_stride` are readable
/// for `c` in `0..4`; the four elements from `dst + r * cols` are writable for `r` in `0..4`.
#[cfg(target_arch = "x86_64")]
unsafe fn transpose_four_by_four(src: *const u32, col_stride: isize, dst: *mut u32, cols: usize) {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi32, _mm_unpackhi_epi64,
        _mm_unpacklo_epi32, _mm_unpacklo_epi64,
    };
    // SAFETY: the loads and stores are unaligned ones of 16 bytes inside the ranges the caller
    // guarantees; the unpacks only move lanes between registers.
    unsafe {
        let column = |c: isize| _mm_loadu_si128(src.offset(c * col_stride).cast::<__m128i>());
        let (a0, a1, a2, a3) = (column(0), column(1), column(2), column(3));
        let (low01, low23) = (_mm_unpacklo_epi32(a0, a1), _mm_unpacklo_epi32(a2, a3));
        let (high01, high23) = (_mm_unpackhi_epi32(a0, a1), _mm_unpackhi_epi32(a2, a3));
        let rows = [
            _mm_unpacklo_epi64(low01, low23),
            _mm_unpackhi_epi64(low01, low23),
            _mm_unpacklo_epi64(high01, high23),
            _mm_unpackhi_epi64(high01, high23),
        ];
        for (r, row) in rows.into_iter().enumerate() {
            _mm_storeu_si128(dst.add(r * cols).cast::<__m128i>(), row);
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow_buffer::Buffer;

    use crate::{DType, Tensor};

    #[test]
    fn every_other_element_is_gathered_for_every_size_and_width() {
        for len in 1..70usize {
            for offset in [0, 1] {
                let values: Vec<u64> = (0..(2 * len + 1) as u64).map(|v| v * 3 + 1).collect();
                let expected: Vec<u64> = values[offset..]
                    .iter()
                    .copied()
                    .step_by(2)
                    .take(len)
                    .collect();
                let tensor = Tensor::try_new(
                    Buffer::from_vec(values.clone()),
                    DType::UInt64,
                    vec![len],
                    vec![2],
                    offset,
                )
                .unwrap();
                assert_eq!(
                    tensor.to_contiguous().unwrap().as_slice::<u64>().unwrap(),
                    expected
                );
                let bytes: Vec<u8> = values.iter().map(|&v| v as u8).collect();
                let tensor = Tensor::try_new(
                    Buffer::from_vec(bytes),
                    DType::UInt8,
                    vec![len],
                    vec![2],
                    offset,
                )
                .unwrap();
                let narrow: Vec<u8> = expected.iter().map(|&v| v as u8).collect();
                assert_eq!(
                    tensor.to_contiguous().unwrap().as_slice::<u8>().unwrap(),
                    narrow
                );
            }
        }
    }
}
