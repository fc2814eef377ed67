//! x86-64 kernels of the strided copy: register transposes of four- and eight-byte tiles and
//! the even-lane gather, in AVX2 where the CPU has it (detected at run time) and in SSE2 (part
//! of the x86-64 baseline) otherwise.
//!
//! Every AVX2 function is `#[target_feature(enable = "avx2")]` and reached only through
//! [`has_avx2`]; the SSE2 ones need nothing beyond the baseline.

use std::arch::x86_64::{
    __m128i, __m256, __m256d, __m256i, _mm_loadu_ps, _mm_loadu_si128, _mm_sfence, _mm_shuffle_ps,
    _mm_storeu_ps, _mm_storeu_si128, _mm_unpackhi_epi32, _mm_unpackhi_epi64, _mm_unpacklo_epi32,
    _mm_unpacklo_epi64, _mm256_castps_si256, _mm256_loadu_pd, _mm256_loadu_ps, _mm256_loadu_si256,
    _mm256_permute2f128_pd, _mm256_permute2f128_ps, _mm256_permute4x64_epi64, _mm256_setzero_pd,
    _mm256_setzero_ps, _mm256_shuffle_ps, _mm256_storeu_pd, _mm256_storeu_ps, _mm256_storeu_si256,
    _mm256_stream_si256, _mm256_unpackhi_pd, _mm256_unpackhi_ps, _mm256_unpacklo_epi64,
    _mm256_unpacklo_pd, _mm256_unpacklo_ps,
};

use super::transpose::{Tile, transpose_plane};

/// Whether the CPU has AVX2: the standard library detects it once and caches the answer in a
/// static, so that this is one relaxed load per copied block.
pub(super) fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
}

/// Four-byte elements as the tiles see them.
type Four = u32;
/// Eight-byte elements as the tiles see them: a pair of `u32`, so that the scalar edges stay
/// aligned for complex64 (eight bytes aligned to four) as well as for the eight-byte scalars.
type Eight = [u32; 2];

/// Copies a transposed plane of four-byte elements (see [`transpose_plane`]) with 8 x 8 AVX2
/// tiles, or 4 x 4 SSE2 tiles without AVX2.
/// The wider AVX2 tiles, walked in strips (see `transpose.rs`), bring the transposed copy close to
/// `memcpy`'s speed (criterion `copy/to_contiguous/transposed`; docs/benchmarks.md).
///
/// # Safety
///
/// As for [`transpose_plane`], for elements of four bytes aligned to four.
pub(super) unsafe fn transpose_four(
    src: *const u8,
    rows: usize,
    cols: usize,
    col_stride: isize,
    dst: *mut u8,
) {
    let (src, dst) = (src.cast::<Four>(), dst.cast::<Four>());
    if has_avx2() {
        // SAFETY: the caller's guarantee; the CPU has AVX2.
        unsafe { transpose_four_avx2(src, rows, cols, col_stride, dst) }
    } else {
        // SAFETY: the caller's guarantee; SSE2 is part of the x86-64 baseline.
        unsafe { transpose_plane::<Sse2FourByFour>(src, rows, cols, col_stride, dst) }
    }
}

/// Copies a transposed plane of eight-byte elements with 4 x 4 AVX2 tiles, or 2 x 2 SSE2 tiles
/// without AVX2.
///
/// # Safety
///
/// As for [`transpose_plane`], for elements of eight bytes aligned to four.
pub(super) unsafe fn transpose_eight(
    src: *const u8,
    rows: usize,
    cols: usize,
    col_stride: isize,
    dst: *mut u8,
) {
    let (src, dst) = (src.cast::<Eight>(), dst.cast::<Eight>());
    if has_avx2() {
        // SAFETY: the caller's guarantee; the CPU has AVX2.
        unsafe { transpose_eight_avx2(src, rows, cols, col_stride, dst) }
    } else {
        // SAFETY: the caller's guarantee; SSE2 is part of the x86-64 baseline.
        unsafe { transpose_plane::<Sse2TwoByTwo>(src, rows, cols, col_stride, dst) }
    }
}

/// [`transpose_plane`] compiled for AVX2, so that its tiles inline.
///
/// # Safety
///
/// As for [`transpose_plane`]; the CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn transpose_four_avx2(
    src: *const Four,
    rows: usize,
    cols: usize,
    col_stride: isize,
    dst: *mut Four,
) {
    // SAFETY: the caller's guarantee.
    unsafe { transpose_plane::<Avx2EightByEight>(src, rows, cols, col_stride, dst) }
}

/// [`transpose_plane`] compiled for AVX2, so that its tiles inline.
///
/// # Safety
///
/// As for [`transpose_plane`]; the CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn transpose_eight_avx2(
    src: *const Eight,
    rows: usize,
    cols: usize,
    col_stride: isize,
    dst: *mut Eight,
) {
    // SAFETY: the caller's guarantee.
    unsafe { transpose_plane::<Avx2FourByFour>(src, rows, cols, col_stride, dst) }
}

/// 8 x 8 four-byte tile in AVX2: eight loads of source columns, eight unpacks, eight shuffles
/// within 128-bit lanes, eight lane permutes, eight stores of output rows.
pub(super) struct Avx2EightByEight;

impl Tile for Avx2EightByEight {
    type Element = Four;
    const EDGE: usize = 8;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn transpose(src: *const Four, col_stride: isize, dst: *mut Four, cols: usize) {
        // No closure here: a closure would not inherit the AVX2 feature, and its intrinsics would
        // not inline.
        let mut columns: [__m256; 8] = [_mm256_setzero_ps(); 8];
        for (c, column) in columns.iter_mut().enumerate() {
            // SAFETY: column `c < 8` of the tile is eight readable elements (the caller's
            // guarantee); the load is unaligned.
            *column = unsafe { _mm256_loadu_ps(src.offset(c as isize * col_stride).cast::<f32>()) };
        }
        let [a0, a1, a2, a3, a4, a5, a6, a7] = columns;
        // Pairs of columns interleaved: rows 0, 1, 4, 5 (low) and 2, 3, 6, 7 (high).
        let (t0, t1) = (_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
        let (t2, t3) = (_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
        let (t4, t5) = (_mm256_unpacklo_ps(a4, a5), _mm256_unpackhi_ps(a4, a5));
        let (t6, t7) = (_mm256_unpacklo_ps(a6, a7), _mm256_unpackhi_ps(a6, a7));
        // Four columns of one row per 128-bit lane: rows r and r + 4 of columns 0..4 or 4..8.
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        let rows = [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ];
        for (r, row) in rows.into_iter().enumerate() {
            // SAFETY: output row `r < 8` of the tile is eight writable elements; unaligned store.
            unsafe { _mm256_storeu_ps(dst.add(r * cols).cast::<f32>(), row) };
        }
    }
}

/// 4 x 4 four-byte tile in SSE2: four loads of source columns, eight unpacks, four stores.
pub(super) struct Sse2FourByFour;

impl Tile for Sse2FourByFour {
    type Element = Four;
    const EDGE: usize = 4;

    #[inline(always)]
    unsafe fn transpose(src: *const Four, col_stride: isize, dst: *mut Four, cols: usize) {
        let column = |c: isize| -> __m128i {
            // SAFETY: column `c < 4` of the tile is four readable elements; unaligned load.
            unsafe { _mm_loadu_si128(src.offset(c * col_stride).cast::<__m128i>()) }
        };
        let (a0, a1, a2, a3) = (column(0), column(1), column(2), column(3));
        // SAFETY: register-only SSE2 operations, which every x86-64 CPU has.
        let rows = unsafe {
            let (low01, low23) = (_mm_unpacklo_epi32(a0, a1), _mm_unpacklo_epi32(a2, a3));
            let (high01, high23) = (_mm_unpackhi_epi32(a0, a1), _mm_unpackhi_epi32(a2, a3));
            [
                _mm_unpacklo_epi64(low01, low23),
                _mm_unpackhi_epi64(low01, low23),
                _mm_unpacklo_epi64(high01, high23),
                _mm_unpackhi_epi64(high01, high23),
            ]
        };
        for (r, row) in rows.into_iter().enumerate() {
            // SAFETY: output row `r < 4` of the tile is four writable elements; unaligned store.
            unsafe { _mm_storeu_si128(dst.add(r * cols).cast::<__m128i>(), row) };
        }
    }
}

/// 4 x 4 eight-byte tile in AVX2: four loads of source columns, four unpacks, four permutes of
/// 128-bit lanes, four stores.
pub(super) struct Avx2FourByFour;

impl Tile for Avx2FourByFour {
    type Element = Eight;
    const EDGE: usize = 4;

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn transpose(src: *const Eight, col_stride: isize, dst: *mut Eight, cols: usize) {
        let mut columns: [__m256d; 4] = [_mm256_setzero_pd(); 4];
        for (c, column) in columns.iter_mut().enumerate() {
            // SAFETY: column `c < 4` of the tile is four readable elements; unaligned load.
            *column = unsafe { _mm256_loadu_pd(src.offset(c as isize * col_stride).cast::<f64>()) };
        }
        let [a0, a1, a2, a3] = columns;
        // Rows 0 and 2 (low) and rows 1 and 3 (high) of column pairs.
        let (t0, t1) = (_mm256_unpacklo_pd(a0, a1), _mm256_unpackhi_pd(a0, a1));
        let (t2, t3) = (_mm256_unpacklo_pd(a2, a3), _mm256_unpackhi_pd(a2, a3));
        let rows = [
            _mm256_permute2f128_pd::<0x20>(t0, t2),
            _mm256_permute2f128_pd::<0x20>(t1, t3),
            _mm256_permute2f128_pd::<0x31>(t0, t2),
            _mm256_permute2f128_pd::<0x31>(t1, t3),
        ];
        for (r, row) in rows.into_iter().enumerate() {
            // SAFETY: output row `r < 4` of the tile is four writable elements; unaligned store.
            unsafe { _mm256_storeu_pd(dst.add(r * cols).cast::<f64>(), row) };
        }
    }
}

/// 2 x 2 eight-byte tile in SSE2: two loads of source columns, two unpacks, two stores.
pub(super) struct Sse2TwoByTwo;

impl Tile for Sse2TwoByTwo {
    type Element = Eight;
    const EDGE: usize = 2;

    #[inline(always)]
    unsafe fn transpose(src: *const Eight, col_stride: isize, dst: *mut Eight, cols: usize) {
        // SAFETY: columns 0 and 1 of the tile are two readable elements each; unaligned loads.
        let (a0, a1) = unsafe {
            (
                _mm_loadu_si128(src.cast::<__m128i>()),
                _mm_loadu_si128(src.offset(col_stride).cast::<__m128i>()),
            )
        };
        // SAFETY: output rows 0 and 1 of the tile are two writable elements each; unaligned
        // stores.
        unsafe {
            _mm_storeu_si128(dst.cast::<__m128i>(), _mm_unpacklo_epi64(a0, a1));
            _mm_storeu_si128(dst.add(cols).cast::<__m128i>(), _mm_unpackhi_epi64(a0, a1));
        }
    }
}

/// Outputs of this many bytes and more are written with non-temporal stores by the AVX2
/// gathers, which then skip the read of each output line before it is written.
/// Half of [`crate::alloc::STREAM_THRESHOLD`], at which plain copies stream: a gather reads twice
/// the bytes it writes, so that at 8 MiB of output its source and output (24 MiB) already fill
/// three quarters of a 32 MiB L3, glibc's rule for streaming, and would leave the cache anyway.
/// Into small outputs, which stay in the cache, streaming is slower (docs/benchmarks.md).
pub(super) const NON_TEMPORAL_THRESHOLD: usize = crate::alloc::STREAM_THRESHOLD / 2;

/// Gathers the even elements of `src` into `dst` for the leading outputs of a run of stride 2,
/// returning how many it wrote; the caller copies the rest.
///
/// Four-byte elements: two vector loads of source, one shuffle keeping the even lanes (and a lane
/// permute in AVX2), one store. Eight-byte elements: the same with 64-bit lanes. Outputs of
/// [`NON_TEMPORAL_THRESHOLD`] bytes and more are streamed past the cache in AVX2.
///
/// # Safety
///
/// `2 * len - 1` elements of `size` bytes from `src` are readable; `dst` is writable for `len`
/// of them; `size` is 4 or 8.
pub(super) unsafe fn gather_even(src: *const u8, len: usize, dst: *mut u8, size: usize) -> usize {
    let stream = if len * size >= NON_TEMPORAL_THRESHOLD && has_avx2() {
        outputs_before_alignment(dst, size, len)
    } else {
        None
    };
    if let Some(skip) = stream {
        for i in 0..skip {
            // SAFETY: `i < skip < len`: source element `2 * i` is readable and output `i`
            // writable, `size` bytes each, in disjoint buffers.
            unsafe {
                std::ptr::copy_nonoverlapping(src.add(2 * i * size), dst.add(i * size), size)
            };
        }
        let (src, dst, rest) = (
            src.wrapping_add(2 * skip * size),
            dst.wrapping_add(skip * size),
            len - skip,
        );
        let done = match size {
            // SAFETY: the caller's guarantee for the outputs from `skip`, whose first is 32-byte
            // aligned; the CPU has AVX2.
            4 => unsafe { gather_even_four_avx2::<true>(src, rest, dst) },
            // SAFETY: as above.
            _ => unsafe { gather_even_eight_avx2::<true>(src, rest, dst) },
        };
        return skip + done;
    }
    match (size, has_avx2()) {
        // SAFETY: the caller's guarantee; the CPU has AVX2.
        (4, true) => unsafe { gather_even_four_avx2::<false>(src, len, dst) },
        // SAFETY: the caller's guarantee; the CPU has AVX2.
        (8, true) => unsafe { gather_even_eight_avx2::<false>(src, len, dst) },
        // SAFETY: the caller's guarantee; SSE2 is baseline.
        (4, false) => unsafe { gather_even_four_sse2(src, len, dst) },
        // SAFETY: the caller's guarantee; SSE2 is baseline.
        _ => unsafe { gather_even_eight_sse2(src, len, dst) },
    }
}

/// How many outputs of `size` bytes a streaming gather copies one by one before its stores are
/// 32-byte aligned, as non-temporal stores must be; `None` when they never are (eight-byte
/// elements aligned to four) or not before the last output, and the gather then stores as usual.
fn outputs_before_alignment(dst: *mut u8, size: usize, len: usize) -> Option<usize> {
    let bytes = dst.align_offset(32);
    (bytes.is_multiple_of(size) && bytes / size < len.saturating_sub(1)).then_some(bytes / size)
}

/// Stores one 32-byte vector of outputs: a non-temporal store that bypasses the cache when
/// `STREAM` (and `dst` is then 32-byte aligned), an ordinary unaligned one otherwise.
///
/// # Safety
///
/// `dst` is writable for 32 bytes, and 32-byte aligned when `STREAM`; the CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store<const STREAM: bool>(dst: *mut __m256i, value: __m256i) {
    if STREAM {
        // SAFETY: the caller's guarantee, alignment included.
        unsafe { _mm256_stream_si256(dst, value) }
    } else {
        // SAFETY: the caller's guarantee; unaligned store.
        unsafe { _mm256_storeu_si256(dst, value) }
    }
}

/// The four-byte gather in AVX2, 16 outputs per step (one 64-byte output line), streamed past
/// the cache when `STREAM`.
///
/// # Safety
///
/// As for [`gather_even`] with four-byte elements; the CPU has AVX2; `dst` is 32-byte aligned
/// when `STREAM`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gather_even_four_avx2<const STREAM: bool>(
    src: *const u8,
    len: usize,
    dst: *mut u8,
) -> usize {
    const STEP: usize = 16;
    let (src, dst) = (src.cast::<f32>(), dst.cast::<f32>());
    let mut done = 0;
    // A step reads source elements `2 * done .. 2 * done + 2 * STEP`; the last readable one is
    // `2 * len - 2`, so a step needs `done + STEP < len`.
    while done + STEP < len {
        // SAFETY: the four loads read the `2 * STEP` elements from `2 * done`, all readable by
        // the loop condition; the two stores write outputs `done .. done + STEP < len`, 32-byte
        // aligned when streaming (`dst` is then aligned and `done` moves by 64 bytes).
        unsafe {
            let at = src.add(2 * done);
            let (a, b) = (_mm256_loadu_ps(at), _mm256_loadu_ps(at.add(8)));
            let (c, d) = (_mm256_loadu_ps(at.add(16)), _mm256_loadu_ps(at.add(24)));
            // Even lanes of each 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6; then the middle 64-bit
            // lanes swapped into order.
            let ab = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(a, b));
            let cd = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(c, d));
            let ab = _mm256_permute4x64_epi64::<0xD8>(ab);
            let cd = _mm256_permute4x64_epi64::<0xD8>(cd);
            store::<STREAM>(dst.add(done).cast::<__m256i>(), ab);
            store::<STREAM>(dst.add(done + 8).cast::<__m256i>(), cd);
        }
        done += STEP;
    }
    if STREAM {
        // Non-temporal stores are weakly ordered: fence them before the output is handed over.
        _mm_sfence();
    }
    done
}

/// The eight-byte gather in AVX2, 8 outputs per step (one 64-byte output line), streamed past
/// the cache when `STREAM`.
///
/// # Safety
///
/// As for [`gather_even`] with eight-byte elements; the CPU has AVX2; `dst` is 32-byte aligned
/// when `STREAM`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn gather_even_eight_avx2<const STREAM: bool>(
    src: *const u8,
    len: usize,
    dst: *mut u8,
) -> usize {
    const STEP: usize = 8;
    let (src, dst) = (src.cast::<Eight>(), dst.cast::<Eight>());
    let mut done = 0;
    // As in the four-byte gather: a step needs `done + STEP < len`.
    while done + STEP < len {
        // SAFETY: the loads read the `2 * STEP` elements from `2 * done`, all readable by the
        // loop condition; the stores write outputs `done .. done + STEP < len`, 32-byte aligned
        // when streaming.
        unsafe {
            let at = src.add(2 * done);
            let a = _mm256_loadu_si256(at.cast::<__m256i>());
            let b = _mm256_loadu_si256(at.add(4).cast::<__m256i>());
            let c = _mm256_loadu_si256(at.add(8).cast::<__m256i>());
            let d = _mm256_loadu_si256(at.add(12).cast::<__m256i>());
            // x0 x2 x1 x3 from the even lanes of two vectors, then the middle lanes swapped.
            let ab = _mm256_permute4x64_epi64::<0xD8>(_mm256_unpacklo_epi64(a, b));
            let cd = _mm256_permute4x64_epi64::<0xD8>(_mm256_unpacklo_epi64(c, d));
            store::<STREAM>(dst.add(done).cast::<__m256i>(), ab);
            store::<STREAM>(dst.add(done + 4).cast::<__m256i>(), cd);
        }
        done += STEP;
    }
    if STREAM {
        // Non-temporal stores are weakly ordered: fence them before the output is handed over.
        _mm_sfence();
    }
    done
}

/// The four-byte gather in SSE2, 8 outputs per step.
///
/// # Safety
///
/// As for [`gather_even`] with four-byte elements.
pub(super) unsafe fn gather_even_four_sse2(src: *const u8, len: usize, dst: *mut u8) -> usize {
    const STEP: usize = 8;
    let (src, dst) = (src.cast::<f32>(), dst.cast::<f32>());
    let mut done = 0;
    while done + STEP < len {
        // SAFETY: the loads read the `2 * STEP` elements from `2 * done`, readable because
        // `done + STEP < len`; the stores write outputs `done .. done + STEP < len`.
        unsafe {
            let at = src.add(2 * done);
            let (a, b) = (_mm_loadu_ps(at), _mm_loadu_ps(at.add(4)));
            let (c, d) = (_mm_loadu_ps(at.add(8)), _mm_loadu_ps(at.add(12)));
            _mm_storeu_ps(dst.add(done), _mm_shuffle_ps::<0x88>(a, b));
            _mm_storeu_ps(dst.add(done + 4), _mm_shuffle_ps::<0x88>(c, d));
        }
        done += STEP;
    }
    done
}

/// The eight-byte gather in SSE2, 4 outputs per step.
///
/// # Safety
///
/// As for [`gather_even`] with eight-byte elements.
pub(super) unsafe fn gather_even_eight_sse2(src: *const u8, len: usize, dst: *mut u8) -> usize {
    const STEP: usize = 4;
    let (src, dst) = (src.cast::<Eight>(), dst.cast::<Eight>());
    let mut done = 0;
    while done + STEP < len {
        // SAFETY: the loads read the `2 * STEP` elements from `2 * done`, readable because
        // `done + STEP < len`; the stores write outputs `done .. done + STEP < len`.
        unsafe {
            let at = src.add(2 * done);
            let load = |i: usize| _mm_loadu_si128(at.add(i).cast::<__m128i>());
            let (a, b, c, d) = (load(0), load(2), load(4), load(6));
            _mm_storeu_si128(dst.add(done).cast::<__m128i>(), _mm_unpacklo_epi64(a, b));
            _mm_storeu_si128(
                dst.add(done + 2).cast::<__m128i>(),
                _mm_unpacklo_epi64(c, d),
            );
        }
        done += STEP;
    }
    done
}
