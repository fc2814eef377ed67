//! Runs of stride 2 (every other element), with vector kernels for four- and eight-byte
//! elements on x86-64.

use std::mem::MaybeUninit;

/// Copies every other element of the `2 * len - 1` from `src` into `dst`.
///
/// Four- and eight-byte elements on x86-64 go through [`super::x86::gather_even`]: whole vectors
/// loaded and their even lanes packed with one shuffle (and a lane permute in AVX2), one
/// 64-byte output line per step. The rest, and every other size or architecture, is a loop over
/// pairs that the compiler vectorises as it can.
/// The copy reads twice the bytes it writes, so it is bound by memory bandwidth, not by its
/// instructions: criterion's `copy/reference/read_20_write_10`, the simplest loop that reads and
/// writes the same bytes, is its yardstick (docs/benchmarks.md).
///
/// # Safety
///
/// `len > 0`; `2 * len - 1` elements from `src` are readable, and `dst` is writable for `len`
/// elements that nothing else refers to.
pub(super) unsafe fn gather_every_other<T: Copy>(src: *const T, len: usize, dst: *mut T) {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // Only x86-64 has vector kernels.
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if matches!(size_of::<T>(), 4 | 8) && align_of::<T>() >= 4 {
        // SAFETY: the caller's guarantee; `T` has four or eight bytes.
        done = unsafe { super::x86::gather_even(src.cast(), len, dst.cast(), size_of::<T>()) };
    }
    // SAFETY: outputs `done..len` take source elements `2 * done..=2 * (len - 1)`, inside the
    // caller's ranges.
    unsafe { gather_every_other_portable(src.add(2 * done), len - done, dst.add(done)) }
}

/// The portable loop of [`gather_every_other`]: `len - 1` whole pairs, then the last element alone.
///
/// # Safety
///
/// As for [`gather_every_other`].
pub(super) unsafe fn gather_every_other_portable<T: Copy>(src: *const T, len: usize, dst: *mut T) {
    // SAFETY: the caller's guarantee.
    let (source, destination) = unsafe {
        (
            std::slice::from_raw_parts(src, 2 * len - 1),
            std::slice::from_raw_parts_mut(dst.cast::<MaybeUninit<T>>(), len),
        )
    };
    for (out, pair) in destination.iter_mut().zip(source.chunks_exact(2)) {
        out.write(pair[0]);
    }
    destination[len - 1].write(source[2 * (len - 1)]);
}
