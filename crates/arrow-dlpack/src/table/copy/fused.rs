//! The fused kernel of row-major float64 output: a block of columns of float64, float32, int32
//! and int64 values transposed into a row-major block of float64, the float32, int32 and int64
//! values widened as they are loaded, so that each column is read once and each output line written
//! once, with no staging pass.
//!
//! On x86_64 with AVX2 (detected at run time; `std` caches the answer), 4 rows of every column at
//! a time, so that 4 whole output lines are finished before the next 4 begin; and within them 4
//! columns at a time: four loads that widen 4 values each into a 256-bit
//! register (`vcvtps2pd`, `vcvtdq2pd`, four scalar conversions of int64, or a plain load), a 4 x 4 transpose in registers (`vunpcklpd`/`vunpckhpd`, then
//! `vperm2f128`), and four stores of 4 values into 4 rows. The 1 to 3 columns after the last
//! group of 4 go 4 rows at a time through 128-bit stores, and the rows after the last whole tile
//! through a scalar loop. Elsewhere there is no kernel ([`float64`] returns `None`) and the
//! caller stages and transposes.
//!
//! The widenings are exact and equal Rust's `as f64` (the conversion of `ConvertTo`) for every
//! value (int64 values are rounded to nearest, one at a time, as `as` rounds them): every int32
//! and every float32 is a float64, and a float32 NaN keeps its sign and
//! payload, a signalling one being quieted, as by the scalar `cvtss2sd` that `as` compiles to
//! (the tests compare the bits).

use std::mem::MaybeUninit;

/// One column's values in a block: of the destination's element type `D` (read where they are,
/// or staged by the caller), or float32, int32 or int64 values that the kernel converts as it loads
/// them.
#[derive(Clone, Copy)]
#[cfg_attr(
    not(target_arch = "x86_64"),
    allow(
        dead_code,
        reason = "only the x86_64 kernels read float32, int32 and int64 runs"
    )
)]
pub(in crate::table) enum Run<'a, D> {
    Same(&'a [D]),
    Float32(&'a [f32]),
    Int32(&'a [i32]),
    Int64(&'a [i64]),
}

#[cfg(target_arch = "x86_64")]
impl<D> Run<'_, D> {
    fn len(&self) -> usize {
        match self {
            Run::Same(values) => values.len(),
            Run::Float32(values) => values.len(),
            Run::Int32(values) => values.len(),
            Run::Int64(values) => values.len(),
        }
    }
}

/// A fused kernel: copies one run per column (`runs`, all of the same length) into the
/// row-major block `out` (as many rows, one slot per run), initialising every slot of it.
///
/// # Panics
///
/// When the runs differ in length or `out` does not have `rows * runs.len()` slots.
pub(in crate::table) type Fused<D> = fn(&[Run<'_, D>], &mut [MaybeUninit<D>]);

/// A streaming kernel: writes one run (float32, int32 or int64 values, widened) into one column of a
/// column-major output too large for the cache, with non-temporal stores, initialising every
/// slot of `out` and fencing the stores before it returns.
///
/// # Panics
///
/// When `out` does not have one slot per value of the run.
pub(in crate::table) type Streamed<D> = fn(Run<'_, D>, &mut [MaybeUninit<D>]);

/// The streaming kernel of float64 output, when this CPU has one.
pub(super) fn float64_streamed() -> Option<Streamed<f64>> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return Some(avx2::stream_column);
    }
    None
}

/// The fused kernel of float64 output, when this CPU has one.
pub(super) fn float64() -> Option<Fused<f64>> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return Some(avx2::transpose);
    }
    None
}

/// The value of `run` at `row`, as a float64 (with `as`, the conversion of `ConvertTo`).
#[cfg(target_arch = "x86_64")]
fn value(run: &Run<'_, f64>, row: usize) -> f64 {
    match run {
        Run::Same(values) => values[row],
        Run::Float32(values) => f64::from(values[row]),
        Run::Int32(values) => f64::from(values[row]),
        Run::Int64(values) => values[row] as f64,
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m128d, __m256d, _mm_loadu_ps, _mm_loadu_si128, _mm_sfence, _mm_store_sd, _mm_storeh_pd,
        _mm_storeu_pd, _mm256_castpd256_pd128, _mm256_cvtepi32_pd, _mm256_cvtps_pd,
        _mm256_extractf128_pd, _mm256_loadu_pd, _mm256_permute2f128_pd, _mm256_setr_pd,
        _mm256_storeu_pd, _mm256_stream_pd, _mm256_unpackhi_pd, _mm256_unpacklo_pd,
    };
    use std::mem::MaybeUninit;

    use super::{Run, value};

    /// The kind of a column's values and where they start: what the tile loop reads.
    #[derive(Clone, Copy)]
    enum Source {
        Float64(*const f64),
        Float32(*const f32),
        Int32(*const i32),
        Int64(*const i64),
    }

    impl Source {
        fn of(run: &Run<'_, f64>) -> Source {
            match run {
                Run::Same(values) => Source::Float64(values.as_ptr()),
                Run::Float32(values) => Source::Float32(values.as_ptr()),
                Run::Int32(values) => Source::Int32(values.as_ptr()),
                Run::Int64(values) => Source::Int64(values.as_ptr()),
            }
        }

        /// Values `row..row + 4`, widened to float64.
        ///
        /// # Safety
        ///
        /// The CPU has AVX2, and the column has at least `row + 4` values.
        #[target_feature(enable = "avx2")]
        #[inline]
        unsafe fn load4(self, row: usize) -> __m256d {
            // SAFETY: values `row..row + 4` lie inside the column (the caller's contract), which
            // is 32 bytes of float64 or int64 or 16 bytes of float32 or int32 from element
            // `row`; the vector loads read unaligned memory, the int64 values are read one by
            // one (AVX2 has no int64 conversion; `as` rounds each to nearest, as `ConvertTo`
            // does), and AVX2 is enabled (the caller's contract).
            unsafe {
                match self {
                    Source::Float64(values) => _mm256_loadu_pd(values.add(row)),
                    Source::Float32(values) => _mm256_cvtps_pd(_mm_loadu_ps(values.add(row))),
                    Source::Int32(values) => {
                        _mm256_cvtepi32_pd(_mm_loadu_si128(values.add(row).cast()))
                    }
                    Source::Int64(values) => {
                        let at = |k: usize| *values.add(row + k) as f64;
                        _mm256_setr_pd(at(0), at(1), at(2), at(3))
                    }
                }
            }
        }
    }

    /// The [`Streamed`](super::Streamed) kernel with AVX2.
    pub(super) fn stream_column(run: Run<'_, f64>, out: &mut [MaybeUninit<f64>]) {
        // `write_columns` relies on every slot being written.
        assert_eq!(run.len(), out.len(), "a run has one slot per value");
        // `std` caches the detection: a load and a test.
        assert!(std::arch::is_x86_feature_detected!("avx2"));
        // SAFETY: the CPU has AVX2 and the run has one value per slot (both checked above).
        unsafe { stream_widened(run, out) };
    }

    /// Writes the values of `run`, widened, into `out`: one by one up to the first 32-byte
    /// boundary of `out` and after the last whole group of 4, and 4 at a time between them
    /// through aligned non-temporal 32-byte stores; then a store fence.
    ///
    /// # Safety
    ///
    /// The CPU has AVX2, and `run` has `out.len()` values.
    #[target_feature(enable = "avx2")]
    unsafe fn stream_widened(run: Run<'_, f64>, out: &mut [MaybeUninit<f64>]) {
        let len = out.len();
        // A pointer aligned for f64 reaches a 32-byte boundary within 3 elements.
        let head = out.as_ptr().align_offset(32).min(len);
        for (row, slot) in out[..head].iter_mut().enumerate() {
            slot.write(value(&run, row));
        }
        let source = Source::of(&run);
        let streamed = head + (len - head) / 4 * 4;
        let dst = out.as_mut_ptr().cast::<f64>();
        let mut row = head;
        while row < streamed {
            // SAFETY: `row + 4 <= streamed <= len` values of the run exist and `out` has slots
            // `row..row + 4`, 32-byte aligned because `dst + head` is and `row - head` is a
            // multiple of 4; AVX2 is enabled (the caller's contract).
            unsafe { _mm256_stream_pd(dst.add(row), source.load4(row)) };
            row += 4;
        }
        for (row, slot) in out.iter_mut().enumerate().skip(streamed) {
            slot.write(value(&run, row));
        }
        // A fence, ordering the streamed stores before every later store.
        _mm_sfence();
    }

    /// The [`Fused`](super::Fused) kernel with AVX2.
    pub(super) fn transpose(runs: &[Run<'_, f64>], out: &mut [MaybeUninit<f64>]) {
        let rows = runs.first().map_or(0, Run::len);
        // The tile loop relies on these lengths, and `write_columns` on every slot being written.
        assert!(runs.iter().all(|run| run.len() == rows) && out.len() == rows * runs.len());
        // `std` caches the detection: a load and a test.
        assert!(std::arch::is_x86_feature_detected!("avx2"));
        // SAFETY: the CPU has AVX2 (checked above), every run has `rows` values and `out` has
        // `rows * runs.len()` slots (checked above).
        unsafe { transpose_tiles(runs, out) };
        let num_columns = runs.len();
        let tiled = rows / 4 * 4;
        for (row, out_row) in
            (tiled..rows).zip(out[tiled * num_columns..].chunks_exact_mut(num_columns))
        {
            for (slot, run) in out_row.iter_mut().zip(runs) {
                slot.write(value(run, row));
            }
        }
    }

    /// Writes the first `rows / 4 * 4` rows of `runs` into the row-major block `out`, 4 rows at
    /// a time: groups of 4 columns through 4 x 4 transposes, then the last 1 to 3 columns.
    ///
    /// # Safety
    ///
    /// The CPU has AVX2, every run has `rows` values, and `out` has `rows * runs.len()` slots.
    #[target_feature(enable = "avx2")]
    unsafe fn transpose_tiles(runs: &[Run<'_, f64>], out: &mut [MaybeUninit<f64>]) {
        let num_columns = runs.len();
        let rows = runs.first().map_or(0, Run::len);
        let sources: Vec<Source> = runs.iter().map(Source::of).collect();
        let grouped = num_columns / 4 * 4;
        let out = out.as_mut_ptr().cast::<f64>();
        for row in (0..rows / 4 * 4).step_by(4) {
            // Slot `column` of line `row + r` (`r < 4`, `column < num_columns`).
            // SAFETY: `row + 4 <= rows`, so the slot lies inside `out`'s `rows * num_columns`.
            let slot =
                |r: usize, column: usize| unsafe { out.add((row + r) * num_columns + column) };
            for column in (0..grouped).step_by(4) {
                // SAFETY: `row + 4 <= rows`, so every column has values `row..row + 4`; the
                // stores write 4 slots from column `column + 4 <= num_columns` of 4 lines of
                // `out`, which this function borrows exclusively; loads and stores take
                // unaligned addresses, and the CPU has AVX2 (the caller's contract).
                unsafe {
                    let group = &sources[column..column + 4];
                    let (a, b) = (group[0].load4(row), group[1].load4(row));
                    let (c, d) = (group[2].load4(row), group[3].load4(row));
                    // [a0 b0 a2 b2], [a1 b1 a3 b3], [c0 d0 c2 d2], [c1 d1 c3 d3]
                    let (ab_even, ab_odd) = (_mm256_unpacklo_pd(a, b), _mm256_unpackhi_pd(a, b));
                    let (cd_even, cd_odd) = (_mm256_unpacklo_pd(c, d), _mm256_unpackhi_pd(c, d));
                    let lines = [
                        _mm256_permute2f128_pd::<0x20>(ab_even, cd_even),
                        _mm256_permute2f128_pd::<0x20>(ab_odd, cd_odd),
                        _mm256_permute2f128_pd::<0x31>(ab_even, cd_even),
                        _mm256_permute2f128_pd::<0x31>(ab_odd, cd_odd),
                    ];
                    for (r, values) in lines.into_iter().enumerate() {
                        _mm256_storeu_pd(slot(r, column), values);
                    }
                }
            }
            let mut column = grouped;
            if num_columns - column >= 2 {
                // SAFETY: as above, for 2 columns (`column + 2 <= num_columns`).
                unsafe {
                    let (a, b) = (sources[column].load4(row), sources[column + 1].load4(row));
                    // Lines 0 and 2 are the even lanes, lines 1 and 3 the odd ones.
                    let even = halves(_mm256_unpacklo_pd(a, b));
                    let odd = halves(_mm256_unpackhi_pd(a, b));
                    _mm_storeu_pd(slot(0, column), even.0);
                    _mm_storeu_pd(slot(1, column), odd.0);
                    _mm_storeu_pd(slot(2, column), even.1);
                    _mm_storeu_pd(slot(3, column), odd.1);
                }
                column += 2;
            }
            if column < num_columns {
                // SAFETY: as above, for the last column.
                unsafe {
                    let (low, high) = halves(sources[column].load4(row));
                    _mm_store_sd(slot(0, column), low);
                    _mm_storeh_pd(slot(1, column), low);
                    _mm_store_sd(slot(2, column), high);
                    _mm_storeh_pd(slot(3, column), high);
                }
            }
        }
    }

    /// The low and high 128-bit halves of `values`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn halves(values: __m256d) -> (__m128d, __m128d) {
        (
            _mm256_castpd256_pd128(values),
            _mm256_extractf128_pd::<1>(values),
        )
    }
}
