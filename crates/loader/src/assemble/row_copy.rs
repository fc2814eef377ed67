//! The byte kernel of shuffled batches: rows copied by index, a few bytes at a time, into a
//! fresh allocation.
//!
//! A shuffled batch is made of runs of one row each, mostly, drawn from the record batches of a
//! window. Copying such a row with `memcpy` costs a call whose length is only known at run time;
//! the copies here dispatch once on the element or row size to a loop whose size is a constant,
//! which the compiler turns into a few loads and stores. Long runs (the in-order batches that span
//! record batches) still go through [`copy_to_uninit`], one call per run.

use std::mem::MaybeUninit;

use arrow_dlpack_tensor::alloc::copy_to_uninit;

/// How many runs ahead of the copy [`copy_runs`] asks for a run's source bytes: a shuffled row's
/// bytes lie anywhere in the window, mostly out of the cache, and asking early lets the misses
/// of several rows overlap instead of each copy waiting for its own.
const PREFETCH_AHEAD: usize = 8;

/// Runs of at least this many bytes are copied with [`copy_to_uninit`] (a `memcpy`, or streamed
/// stores for large outputs); shorter ones by the fixed-size loops.
const LONG_COPY: usize = 256;

/// Hands each of `items` to `copy`, in order, having asked for the source bytes (`bytes`, when
/// it has some) of the item [`PREFETCH_AHEAD`] places later; stops at the first error.
pub(crate) fn copy_runs<'a, T, E>(
    items: &'a [T],
    bytes: impl Fn(&'a T) -> Option<&'a [u8]>,
    mut copy: impl FnMut(&'a T) -> Result<(), E>,
) -> Result<(), E> {
    for (i, item) in items.iter().enumerate() {
        if let Some(ahead) = items.get(i + PREFETCH_AHEAD).and_then(&bytes) {
            prefetch(ahead);
        }
        copy(item)?;
    }
    Ok(())
}

/// Asks the processor to bring the first and the last byte of `bytes` into the cache (both
/// lines of a short row that straddles two); a hint with no effect on the values.
#[inline(always)]
fn prefetch(bytes: &[u8]) {
    if let (Some(first), Some(last)) = (bytes.first(), bytes.last()) {
        prefetch_line(first);
        prefetch_line(last);
    }
}

/// Asks for the cache line that holds `byte`.
#[inline(always)]
fn prefetch_line(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 processor has (it is part of the
        // x86-64 baseline the target is compiled for); the instruction is a hint that neither
        // reads nor writes memory as far as the program can tell, and it never faults, and the
        // pointer is a valid reference anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

/// Copies `src` into the start of `dst`, for an output of `output_bytes` bytes in all.
///
/// # Panics
///
/// When `dst` is shorter than `src`.
pub(crate) fn copy_bytes(src: &[u8], dst: &mut [MaybeUninit<u8>], output_bytes: usize) {
    let dst = &mut dst[..src.len()];
    match src.len() {
        1 => copy_fixed::<1>(src, dst),
        2 => copy_fixed::<2>(src, dst),
        4 => copy_fixed::<4>(src, dst),
        8 => copy_fixed::<8>(src, dst),
        16 => copy_fixed::<16>(src, dst),
        32 => copy_fixed::<32>(src, dst),
        64 => copy_fixed::<64>(src, dst),
        len if len >= LONG_COPY => copy_to_uninit(src, dst, output_bytes),
        _ => {
            for (slot, &byte) in dst.iter_mut().zip(src) {
                slot.write(byte);
            }
        }
    }
}

/// Copies `count` elements of `size` bytes, element `i` from `src[i * src_stride * size..]` to
/// `dst[i * dst_stride * size..]`: a column of a group into every `k`-th slot of a row-major
/// output, or a column of row-major rows into a column-major one.
///
/// # Panics
///
/// When `src` or `dst` has no room for the last element.
pub(crate) fn copy_strided(
    src: &[u8],
    src_stride: usize,
    dst: &mut [MaybeUninit<u8>],
    dst_stride: usize,
    size: usize,
    count: usize,
) {
    if count == 0 {
        return;
    }
    let strides = (src_stride, dst_stride);
    match size {
        1 => strided::<1>(src, dst, count, strides),
        2 => strided::<2>(src, dst, count, strides),
        4 => strided::<4>(src, dst, count, strides),
        8 => strided::<8>(src, dst, count, strides),
        _ => {
            for i in 0..count {
                let (from, to) = (i * src_stride * size, i * dst_stride * size);
                for (slot, &byte) in dst[to..to + size].iter_mut().zip(&src[from..from + size]) {
                    slot.write(byte);
                }
            }
        }
    }
}

/// `copy_strided` for elements of `N` bytes.
#[inline(always)]
fn strided<const N: usize>(
    src: &[u8],
    dst: &mut [MaybeUninit<u8>],
    count: usize,
    (src_stride, dst_stride): (usize, usize),
) {
    // One bounds check for the whole run, so that the loop below has none.
    let src = &src[..(count - 1) * src_stride * N + N];
    let dst = &mut dst[..(count - 1) * dst_stride * N + N];
    for i in 0..count {
        let (from, to) = (i * src_stride * N, i * dst_stride * N);
        copy_fixed::<N>(&src[from..from + N], &mut dst[to..to + N]);
    }
}

/// Copies exactly `N` bytes; the caller's slices are `N` long.
#[inline(always)]
fn copy_fixed<const N: usize>(src: &[u8], dst: &mut [MaybeUninit<u8>]) {
    let src: &[u8; N] = src.try_into().expect("N bytes");
    let dst: &mut [MaybeUninit<u8>; N] = dst.try_into().expect("N slots");
    for (slot, &byte) in dst.iter_mut().zip(src) {
        slot.write(byte);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(slots: &[MaybeUninit<u8>]) -> Vec<u8> {
        // SAFETY: the tests initialise every slot before reading it (the buffer starts zeroed).
        slots
            .iter()
            .map(|slot| unsafe { slot.assume_init() })
            .collect()
    }

    #[test]
    fn copies_of_every_length_write_exactly_their_bytes() {
        for len in [0, 1, 2, 3, 4, 7, 8, 16, 32, 33, 64, 100, 256, 1000] {
            let src: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
            let mut dst = vec![MaybeUninit::new(0u8); len + 3];
            copy_bytes(&src, &mut dst, len);
            let out = written(&dst);
            assert_eq!(&out[..len], &src[..], "length {len}");
            assert_eq!(&out[len..], &[0, 0, 0], "length {len}");
        }
    }

    #[test]
    fn strided_copies_fill_every_stride_th_element() {
        for size in [1, 2, 3, 4, 8, 16] {
            let (count, stride) = (5, 3);
            let src: Vec<u8> = (0..count * size).map(|i| i as u8 + 1).collect();
            let mut dst = vec![MaybeUninit::new(0u8); count * stride * size];
            copy_strided(&src, 1, &mut dst, stride, size, count);
            let out = written(&dst);
            for i in 0..count {
                let element = &out[i * stride * size..i * stride * size + size];
                assert_eq!(element, &src[i * size..(i + 1) * size], "size {size}");
                let gap = &out[i * stride * size + size..(i + 1) * stride * size];
                assert!(gap.iter().all(|&b| b == 0), "size {size}");
            }
        }
    }

    #[test]
    fn strided_copies_read_every_stride_th_element() {
        for size in [1, 2, 4, 8, 5] {
            let (count, stride) = (4, 3);
            let src: Vec<u8> = (0..count * stride * size).map(|i| i as u8 + 1).collect();
            let mut dst = vec![MaybeUninit::new(0u8); count * size];
            copy_strided(&src, stride, &mut dst, 1, size, count);
            let want: Vec<u8> = (0..count)
                .flat_map(|i| src[i * stride * size..i * stride * size + size].to_vec())
                .collect();
            assert_eq!(written(&dst), want, "size {size}");
        }
    }
}
