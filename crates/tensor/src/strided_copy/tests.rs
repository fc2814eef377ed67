//! The strided copy against a naive element-by-element reference: every element size, edges
//! that do not fill a tile, negative strides, offsets, 3-d views, and each kernel (AVX2, SSE2
//! and portable) called directly so that the fallbacks are tested on an AVX2 machine too.

use super::copy_strided_elements;
use super::gather::{gather_every_other, gather_every_other_portable};
use super::transpose::{ArrayTile, Tile, transpose_plane};
use crate::DType;

/// Sizes that fill no tile, exactly one, one and a bit, and several.
const EDGES: [usize; 16] = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 69];

/// One dtype per element size (and both eight-byte alignments).
const DTYPES: [DType; 7] = [
    DType::Bool,
    DType::Int8,
    DType::Float16,
    DType::Float32,
    DType::Float64,
    DType::Complex64,
    DType::Complex128,
];

/// Bytes that differ from their neighbours, of which Booleans keep only the lowest bit.
fn pattern(bytes: usize, dtype: DType) -> Vec<u8> {
    (0..bytes)
        .map(|i| {
            let value = (i * 7 + i / 251) as u8;
            if dtype == DType::Bool {
                value & 1
            } else {
                value
            }
        })
        .collect()
}

/// The row-major bytes of the view, one element at a time.
fn naive(bytes: &[u8], size: usize, shape: &[usize], strides: &[isize], offset: usize) -> Vec<u8> {
    let count: usize = shape.iter().product();
    let mut out = Vec::with_capacity(count * size);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let element: isize = offset as isize
            + index
                .iter()
                .zip(strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        let start = element as usize * size;
        out.extend_from_slice(&bytes[start..start + size]);
        for dim in (0..shape.len()).rev() {
            index[dim] += 1;
            if index[dim] < shape[dim] {
                break;
            }
            index[dim] = 0;
        }
    }
    out
}

/// Checks the kernel behind `to_contiguous` on the view against [`naive`], through the entry
/// that `Tensor::to_contiguous` calls.
fn check_view(dtype: DType, elements: usize, shape: &[usize], strides: &[isize], offset: usize) {
    let size = dtype.size();
    // `u128` words keep the bytes aligned for every dtype.
    let bytes = pattern(elements * size, dtype);
    let mut words = vec![0u128; bytes.len().div_ceil(16)];
    // SAFETY: `words` has at least `bytes.len()` bytes, and `u128` has no invalid bit patterns.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr().cast::<u8>(), bytes.len())
    };
    let count: usize = shape.iter().product();
    let mut out = vec![0u128; (count * size).div_ceil(16)];
    // SAFETY: the views below address only elements inside `elements`, from `offset`, each
    // aligned for the dtype (the words are 16-byte aligned); `out` has room for `count` elements.
    unsafe {
        copy_strided_elements(
            words.as_ptr().cast::<u8>().add(offset * size),
            size,
            dtype.alignment(),
            shape,
            strides,
            out.as_mut_ptr().cast::<u8>(),
        )
    };
    let expected = naive(&bytes, size, shape, strides, offset);
    // SAFETY: `out` holds at least `count * size` bytes, all written.
    let out = unsafe { std::slice::from_raw_parts(out.as_ptr().cast::<u8>(), count * size) };
    assert_eq!(
        out, expected,
        "{dtype} shape {shape:?} strides {strides:?} offset {offset}"
    );
}

#[test]
fn transposed_planes_match_the_naive_copy_for_every_size_and_edge() {
    for dtype in DTYPES {
        for rows in EDGES {
            for cols in EDGES {
                // A row-major `cols x rows` matrix seen transposed: strides [1, rows].
                check_view(dtype, rows * cols, &[rows, cols], &[1, rows as isize], 0);
            }
        }
    }
}

#[test]
fn transposed_planes_with_gaps_offsets_and_negative_strides_match_the_naive_copy() {
    for dtype in DTYPES {
        for (rows, cols) in [(9, 33), (33, 9), (64, 65), (17, 8), (8, 17), (69, 31)] {
            // The columns of a wider matrix, from an offset: strides [1, rows + 3].
            let pitch = rows + 3;
            check_view(
                dtype,
                pitch * cols + 2,
                &[rows, cols],
                &[1, pitch as isize],
                2,
            );
            // Columns in reverse order: the first column is the last in memory.
            check_view(
                dtype,
                rows * cols,
                &[rows, cols],
                &[1, -(rows as isize)],
                (cols - 1) * rows,
            );
            // Rows in reverse order go through the general plane.
            check_view(
                dtype,
                rows * cols,
                &[rows, cols],
                &[-1, rows as isize],
                rows - 1,
            );
        }
    }
}

#[test]
fn three_d_views_with_the_last_two_dims_transposed_match_the_naive_copy() {
    for dtype in DTYPES {
        for (depth, rows, cols) in [(3, 9, 17), (2, 64, 65), (4, 7, 8), (3, 33, 31)] {
            // A row-major `depth x cols x rows` array with its last two dimensions swapped.
            let plane = rows * cols;
            check_view(
                dtype,
                depth * plane,
                &[depth, rows, cols],
                &[plane as isize, 1, rows as isize],
                0,
            );
            // The same with the planes in reverse order, from an offset.
            check_view(
                dtype,
                depth * plane + 5,
                &[depth, rows, cols],
                &[-(plane as isize), 1, rows as isize],
                5 + (depth - 1) * plane,
            );
        }
    }
}

#[test]
fn runs_of_stride_two_match_the_naive_copy_for_every_size() {
    for dtype in DTYPES {
        for len in 1..70usize {
            for offset in [0, 1] {
                check_view(dtype, 2 * len + 1, &[len], &[2], offset);
                check_view(
                    dtype,
                    3 * (2 * len + 1),
                    &[3, len],
                    &[2 * len as isize + 1, 2],
                    offset,
                );
            }
        }
    }
}

/// Transposes a `rows x cols` plane with the tile `K` directly and compares it with [`naive`].
fn check_tile<K: Tile>() {
    let size = size_of::<K::Element>();
    for rows in EDGES {
        for cols in EDGES {
            for pitch in [rows as isize, rows as isize + 5, -(rows as isize)] {
                let elements = pitch.unsigned_abs() * cols;
                let offset = if pitch < 0 {
                    elements - pitch.unsigned_abs()
                } else {
                    0
                };
                let bytes = pattern(elements * size, DType::UInt8);
                let source: Vec<K::Element> = bytes
                    .chunks_exact(size)
                    // SAFETY: each chunk has `size_of::<K::Element>()` bytes, and the elements
                    // are plain integers or arrays of them.
                    .map(|chunk| unsafe { chunk.as_ptr().cast::<K::Element>().read_unaligned() })
                    .collect();
                let mut out: Vec<K::Element> = Vec::with_capacity(rows * cols);
                // SAFETY: the plane `[rows, cols]` with strides `[1, pitch]` from element
                // `offset` lies inside `source`; `out` has room for `rows * cols` elements; the
                // tests call an AVX2 tile only when the CPU has AVX2.
                unsafe {
                    transpose_plane::<K>(
                        source.as_ptr().add(offset),
                        rows,
                        cols,
                        pitch,
                        out.as_mut_ptr(),
                    );
                    out.set_len(rows * cols);
                }
                // SAFETY: `out` holds `rows * cols` initialised elements of `size` bytes.
                let written = unsafe {
                    std::slice::from_raw_parts(out.as_ptr().cast::<u8>(), rows * cols * size)
                };
                let expected = naive(&bytes, size, &[rows, cols], &[1, pitch], offset);
                assert_eq!(
                    written,
                    expected,
                    "{} rows {rows} cols {cols} pitch {pitch}",
                    std::any::type_name::<K>()
                );
            }
        }
    }
}

#[test]
fn portable_tiles_transpose_every_size() {
    check_tile::<ArrayTile<u8>>();
    check_tile::<ArrayTile<u16>>();
    check_tile::<ArrayTile<u32>>();
    check_tile::<ArrayTile<u64>>();
    check_tile::<ArrayTile<[u32; 2]>>();
    check_tile::<ArrayTile<[u64; 2]>>();
}

#[cfg(target_arch = "x86_64")]
#[test]
fn sse2_tiles_transpose_four_and_eight_byte_elements() {
    check_tile::<super::x86::Sse2FourByFour>();
    check_tile::<super::x86::Sse2TwoByTwo>();
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_tiles_transpose_four_and_eight_byte_elements_where_the_cpu_has_avx2() {
    if super::x86::has_avx2() {
        check_tile::<super::x86::Avx2EightByEight>();
        check_tile::<super::x86::Avx2FourByFour>();
    }
}

/// Runs `kernel` over `len` outputs of `size` bytes (4 or 8) and copies the outputs it left with
/// the portable loop.
///
/// # Safety
///
/// As for [`gather_every_other`], with `dst` aligned to four; `kernel` is safe to call with them.
unsafe fn gather_then_finish(
    kernel: impl Fn(*const u8, usize, *mut u8) -> usize,
    src: *const u8,
    len: usize,
    dst: *mut u8,
    size: usize,
) {
    let done = kernel(src, len, dst);
    assert!(done < len, "{done} of {len}");
    let rest = len - done;
    // SAFETY: outputs `done..len` and their source elements are inside the caller's ranges.
    unsafe {
        match size {
            4 => gather_every_other_portable(
                src.cast::<u32>().add(2 * done),
                rest,
                dst.cast::<u32>().add(done),
            ),
            _ => gather_every_other_portable(
                src.cast::<[u32; 2]>().add(2 * done),
                rest,
                dst.cast::<[u32; 2]>().add(done),
            ),
        }
    }
}

/// Output shifts from a 32-byte boundary that keep four-byte alignment.
const UNALIGNED: [usize; 8] = [0, 4, 8, 12, 16, 20, 24, 28];

/// Runs a gather of `len` outputs of `size`-byte elements with `kernel` (which returns how many
/// it wrote) and finishes with the portable loop, against every other source element; the output
/// starts each of `shifts` bytes past a 32-byte boundary.
fn check_gather(
    size: usize,
    kernel: unsafe fn(*const u8, usize, *mut u8) -> usize,
    shifts: &[usize],
) {
    for len in 1..80usize {
        for &shift in shifts {
            let bytes = pattern((2 * len - 1) * size, DType::UInt8);
            // `u128` words keep the source aligned for every element size.
            let mut words = vec![0u128; bytes.len().div_ceil(16)];
            let mut out = vec![0u128; (len * size + 64).div_ceil(16)];
            let base = out.as_mut_ptr().cast::<u8>();
            // SAFETY: `base` is inside `out`; the shift keeps 32 + `len * size` bytes after it.
            let dst = unsafe { base.add(base.align_offset(32) + shift) };
            // SAFETY: `words` has room for `bytes`; `u128` has no invalid bit patterns.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    words.as_mut_ptr().cast::<u8>(),
                    bytes.len(),
                )
            };
            let src = words.as_ptr().cast::<u8>();
            // SAFETY: `2 * len - 1` elements are readable from `src` and `len` writable at
            // `dst`, aligned to four; the caller passes an AVX2 kernel only when the CPU has
            // AVX2; the rest starts where the kernel stopped, inside both ranges.
            unsafe { gather_then_finish(|s, l, d| kernel(s, l, d), src, len, dst, size) };
            let expected = naive(&bytes, size, &[len], &[2], 0);
            // SAFETY: `dst` has `len * size` initialised bytes.
            let written = unsafe { std::slice::from_raw_parts(dst, len * size) };
            assert_eq!(written, expected, "size {size} len {len} shift {shift}");
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn sse2_gathers_keep_the_even_elements() {
    check_gather(4, super::x86::gather_even_four_sse2, &UNALIGNED);
    check_gather(8, super::x86::gather_even_eight_sse2, &UNALIGNED);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_gathers_keep_the_even_elements_where_the_cpu_has_avx2() {
    if super::x86::has_avx2() {
        check_gather(4, super::x86::gather_even_four_avx2::<false>, &UNALIGNED);
        check_gather(8, super::x86::gather_even_eight_avx2::<false>, &UNALIGNED);
        check_gather(4, super::x86::gather_even_four_avx2::<true>, &[0]);
        check_gather(8, super::x86::gather_even_eight_avx2::<true>, &[0]);
    }
}

#[test]
fn the_portable_gather_keeps_the_even_elements() {
    check_gather(4, |_, _, _| 0, &UNALIGNED);
    check_gather(8, |_, _, _| 0, &UNALIGNED);
    for len in 1..40usize {
        let source: Vec<[u64; 2]> = (0..2 * len as u64 - 1).map(|v| [v, !v]).collect();
        let mut out = vec![[0u64; 2]; len];
        // SAFETY: `2 * len - 1` elements are readable and `len` writable.
        unsafe { gather_every_other(source.as_ptr(), len, out.as_mut_ptr()) };
        let expected: Vec<[u64; 2]> = source.iter().copied().step_by(2).collect();
        assert_eq!(out, expected);
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn large_gathers_stream_from_any_output_alignment() {
    // Outputs just over the streaming threshold, for both sizes, from every shift: the streaming
    // kernels first copy the outputs before a 32-byte boundary one by one, or do not stream.
    for size in [4usize, 8] {
        let len = super::x86::NON_TEMPORAL_THRESHOLD / size + 5;
        check_large_gather(size, len);
    }
}

/// [`check_gather`] for one large `len` through the dispatching [`super::x86::gather_even`].
#[cfg(target_arch = "x86_64")]
fn check_large_gather(size: usize, len: usize) {
    let source: Vec<u32> = (0..((2 * len - 1) * size / 4) as u32).collect();
    let mut out = vec![0u128; (len * size + 64).div_ceil(16)];
    for shift in UNALIGNED {
        let base = out.as_mut_ptr().cast::<u8>();
        // SAFETY: `base` is inside `out`, which keeps `len * size` bytes after the shifted start.
        let dst = unsafe { base.add(base.align_offset(32) + shift) };
        let src = source.as_ptr().cast::<u8>();
        // SAFETY: `2 * len - 1` elements are readable and `len` writable, aligned to four; the
        // rest starts where the kernel stopped.
        let written = unsafe {
            gather_then_finish(
                |src, len, dst| super::x86::gather_even(src, len, dst, size),
                src,
                len,
                dst,
                size,
            );
            std::slice::from_raw_parts(dst.cast::<u32>(), len * size / 4)
        };
        let words = size / 4;
        let expected = source.chunks(words).step_by(2).flatten();
        assert!(written.iter().eq(expected), "size {size} shift {shift}");
    }
}
