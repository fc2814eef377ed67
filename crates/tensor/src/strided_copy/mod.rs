//! The strided copy kernel behind [`Tensor::to_contiguous`](crate::Tensor::to_contiguous):
//! blocks over the last one or two dimensions, reversed runs, runs of stride 2 ([`gather`]) and
//! tiled transposes ([`transpose`], with register tiles in [`x86`] on x86-64).

mod gather;
mod transpose;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::mem::MaybeUninit;

use gather::gather_every_other;
use transpose::{ArrayTile, transpose_plane};

/// Copies the elements of a strided view of `size`-byte elements aligned to `alignment` (a
/// dtype's) into `dst` in row-major order, with the element type of that size and alignment.
///
/// # Safety
///
/// As [`copy_strided`], for a `T` of `size` bytes aligned to `alignment`: `src` points at the
/// logical first element of a view whose every element is readable and aligned, and `dst` is
/// writable for the element count of `shape` and aligned to 16 bytes.
pub(crate) unsafe fn copy_strided_elements(
    src: *const u8,
    size: usize,
    alignment: usize,
    shape: &[usize],
    strides: &[isize],
    dst: *mut u8,
) {
    // SAFETY: the caller's obligations, for the type `T` that the size and alignment select (a
    // type of that size whose alignment is at most the dtype's).
    unsafe {
        match (size, alignment) {
            (1, _) => copy_strided::<u8>(src, shape, strides, dst),
            (2, 2) => copy_strided::<u16>(src, shape, strides, dst),
            (4, 4) => copy_strided::<u32>(src, shape, strides, dst),
            (8, 8) => copy_strided::<u64>(src, shape, strides, dst),
            // complex64: two 4-byte floats, aligned to 4 only.
            (8, 4) => copy_strided::<[u32; 2]>(src, shape, strides, dst),
            (16, 8) => copy_strided::<[u64; 2]>(src, shape, strides, dst),
            (size, align) => unreachable!("no dtype has {size} bytes aligned to {align}"),
        }
    }
}

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
unsafe fn copy_strided<T: Copy>(src: *const u8, shape: &[usize], strides: &[isize], dst: *mut u8) {
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
        (&[rows, cols], &[1, col_stride]) => {
            // SAFETY: as for the general plane below, of which this is the case whose rows are
            // adjacent in the source (a transposed matrix).
            unsafe { transpose_adjacent_rows(src, rows, cols, col_stride, dst) }
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
/// order, with the register tiles of the element's size where there are some and the portable
/// tile otherwise (see [`transpose`]).
///
/// # Safety
///
/// As for [`copy_strided`], for the plane `[rows, cols]` with strides `[1, col_stride]`.
unsafe fn transpose_adjacent_rows<T: Copy>(
    src: *const T,
    rows: usize,
    cols: usize,
    col_stride: isize,
    dst: *mut T,
) {
    #[cfg(target_arch = "x86_64")]
    match size_of::<T>() {
        4 if align_of::<T>() >= 4 => {
            // SAFETY: the caller's guarantee; `T` has four bytes aligned to four.
            return unsafe { x86::transpose_four(src.cast(), rows, cols, col_stride, dst.cast()) };
        }
        8 if align_of::<T>() >= 4 => {
            // SAFETY: the caller's guarantee; `T` has eight bytes aligned to four or more.
            return unsafe { x86::transpose_eight(src.cast(), rows, cols, col_stride, dst.cast()) };
        }
        _ => {}
    }
    // SAFETY: the caller's guarantee; the portable tile needs no CPU feature.
    unsafe { transpose_plane::<ArrayTile<T>>(src, rows, cols, col_stride, dst) }
}

#[cfg(test)]
mod tests;
