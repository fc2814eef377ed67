//! Copies into outputs too large for the cache, with non-temporal stores.
//!
//! A plain `memcpy` into memory that is not in the cache reads every destination line before it
//! writes it (the store misses, and the core fetches the line to merge the store into): three
//! bytes of memory traffic for every two that the copy needs. Non-temporal stores write whole
//! lines straight to memory without that read. glibc's `memcpy` switches to them only above
//! about three quarters of the last-level cache per thread, so the runs of a large output
//! written piece by piece (a column of a table, a chunk of a column, a run of a strided view),
//! each below that size, never get them.
//!
//! [`copy_to_uninit`] takes the decision from the size of the whole output: when it is at least
//! [`STREAM_THRESHOLD`] bytes, runs of at least [`STREAM_MIN_RUN`] bytes are streamed. Below that
//! size, source and destination can stay in the cache between copies, and streaming would throw
//! that away: small outputs are copied plainly. docs/benchmarks.md ("Why the copy kernels are
//! shaped as they are") has the measurements behind the threshold.

use std::mem::MaybeUninit;

/// Outputs of this many bytes and more have their long runs written with non-temporal stores:
/// half the last-level cache of a typical server core complex, and twice the size below which
/// streaming measured slower than `memcpy`.
pub const STREAM_THRESHOLD: usize = 16 << 20;

/// The shortest run that is streamed: shorter runs leave partial cache lines at both ends for a
/// share of their bytes that is no longer small.
pub const STREAM_MIN_RUN: usize = 64 << 10;

/// The cache line, the unit that non-temporal stores write whole.
const LINE: usize = 64;

/// Copies `src` into `dst` (as many values), for an output of `output_bytes` bytes in all of
/// which `dst` is a part: with non-temporal stores when the output is at least
/// [`STREAM_THRESHOLD`] bytes and the run at least [`STREAM_MIN_RUN`] bytes, on x86-64; with
/// `copy_from_slice` otherwise. Either way every slot of `dst` is initialised on return, and the
/// stores are complete (fenced) before it returns.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
/// use std::mem::MaybeUninit;
/// let source: Vec<u64> = (0..1000).collect();
/// let mut out = vec![MaybeUninit::<u64>::uninit(); 1000];
/// arrow_dlpack::tensor::alloc::copy_to_uninit(&source, &mut out, 8000);
/// assert!(out.iter().zip(&source).all(|(slot, &v)| unsafe { slot.assume_init() } == v));
/// ```
///
/// # Panics
///
/// When `src` and `dst` differ in length.
pub fn copy_to_uninit<T: Copy>(src: &[T], dst: &mut [MaybeUninit<T>], output_bytes: usize) {
    assert_eq!(src.len(), dst.len(), "a copy has one slot per value");
    let bytes = size_of_val(src);
    if output_bytes >= STREAM_THRESHOLD && bytes >= STREAM_MIN_RUN {
        // SAFETY: `src` is `bytes` readable bytes and `dst` as many writable ones (same length,
        // same element type); they do not overlap, `dst` being borrowed exclusively while `src`
        // is borrowed.
        unsafe { stream_bytes(src.as_ptr().cast(), dst.as_mut_ptr().cast(), bytes) };
        return;
    }
    // SAFETY: `MaybeUninit<T>` has the layout of `T`, and `src` holds `src.len()` values.
    let values = unsafe { std::slice::from_raw_parts(src.as_ptr().cast(), src.len()) };
    dst.copy_from_slice(values);
}

/// Copies `len` bytes from `src` to `dst`: the bytes up to the first 64-byte boundary of `dst`
/// and after the last one with a plain copy, the whole lines between with unaligned 16-byte
/// loads and aligned non-temporal 16-byte stores (SSE2, part of every x86-64 target), then a
/// store fence, so that the bytes are visible to every later load and to other threads as
/// ordinary stores would be.
///
/// # Safety
///
/// `src` is readable and `dst` writable for `len` bytes, and the two ranges do not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_bytes(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let head = dst.align_offset(LINE).min(len);
    let lines = (len - head) / LINE;
    let tail = head + lines * LINE;
    // SAFETY: every offset below is less than `len`, so inside both ranges (the caller's
    // guarantee); the streamed stores are at `dst + head + k * 64 + 16 * j`, 16-byte aligned
    // because `dst + head` is 64-byte aligned; the fence orders them before anything after it.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        for line in 0..lines {
            let at = head + line * LINE;
            let (from, to) = (src.add(at), dst.add(at));
            let a = _mm_loadu_si128(from.cast::<__m128i>());
            let b = _mm_loadu_si128(from.add(16).cast::<__m128i>());
            let c = _mm_loadu_si128(from.add(32).cast::<__m128i>());
            let d = _mm_loadu_si128(from.add(48).cast::<__m128i>());
            _mm_stream_si128(to.cast::<__m128i>(), a);
            _mm_stream_si128(to.add(16).cast::<__m128i>(), b);
            _mm_stream_si128(to.add(32).cast::<__m128i>(), c);
            _mm_stream_si128(to.add(48).cast::<__m128i>(), d);
        }
        std::ptr::copy_nonoverlapping(src.add(tail), dst.add(tail), len - tail);
        _mm_sfence();
    }
}

/// Elsewhere than x86-64, a plain copy.
///
/// # Safety
///
/// `src` is readable and `dst` writable for `len` bytes, and the two ranges do not overlap.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's guarantee.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every alignment of the destination and length around the line edges, streamed.
    #[test]
    fn streamed_copies_equal_their_source_at_every_edge() {
        let source: Vec<u8> = (0..STREAM_MIN_RUN + 300)
            .map(|i| (i * 7 + 3) as u8)
            .collect();
        let mut out = vec![MaybeUninit::<u8>::uninit(); STREAM_MIN_RUN + 400];
        for offset in [0, 1, 15, 16, 63, 64, 65] {
            for len in [
                STREAM_MIN_RUN,
                STREAM_MIN_RUN + 1,
                STREAM_MIN_RUN + 63,
                STREAM_MIN_RUN + 64,
                STREAM_MIN_RUN + 127,
            ] {
                let before = MaybeUninit::new(0xAA);
                out.fill(before);
                copy_to_uninit(
                    &source[..len],
                    &mut out[offset..offset + len],
                    STREAM_THRESHOLD,
                );
                // SAFETY: every slot was filled before the copy.
                let written: Vec<u8> = out
                    .iter()
                    .map(|slot| unsafe { slot.assume_init() })
                    .collect();
                assert_eq!(&written[offset..offset + len], &source[..len]);
                assert!(written[..offset].iter().all(|&b| b == 0xAA));
                assert!(written[offset + len..].iter().all(|&b| b == 0xAA));
            }
        }
    }

    #[test]
    fn small_outputs_and_typed_values_are_copied_too() {
        let source: Vec<f64> = (0..20_000).map(|i| i as f64 * 0.5).collect();
        for output_bytes in [0, STREAM_THRESHOLD] {
            let mut out = vec![MaybeUninit::<f64>::uninit(); source.len()];
            copy_to_uninit(&source, &mut out, output_bytes);
            // SAFETY: `copy_to_uninit` initialises every slot.
            let written: Vec<f64> = out
                .iter()
                .map(|slot| unsafe { slot.assume_init() })
                .collect();
            assert!(
                written
                    .iter()
                    .zip(&source)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
    }

    #[test]
    #[should_panic(expected = "one slot per value")]
    fn lengths_must_agree() {
        let mut out = [MaybeUninit::<u8>::uninit(); 3];
        copy_to_uninit(&[1u8, 2], &mut out, 0);
    }
}
