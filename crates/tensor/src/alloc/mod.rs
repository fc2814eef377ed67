//! Fallible allocation of the buffers that copies write into.
//!
//! Every copy in the workspace is sized by its input, and an input can ask for more memory than
//! the machine has (a zero-stride view of one element claims any size it likes). Arrow's
//! `MutableBuffer` aborts the process when an allocation fails, so copies allocate here instead:
//! a failure is [`Error::OutOfMemory`], which Python sees as `MemoryError`.
//!
//! Copies into fresh memory are bound by page faults: with transparent huge pages on `madvise`
//! (the common kernel default) every 4 KiB page of the output faults once, and the faults cost
//! more than the copy. Outputs of [`HUGE_PAGE_THRESHOLD`] bytes and more are therefore advised
//! `MADV_HUGEPAGE` on Linux, as numpy advises its large arrays, so that the kernel maps them with
//! 2 MiB pages and faults 512 times less often.
//!
//! Outputs of [`POOL_THRESHOLD`] bytes and more come from the warm-page [`pool`]: a freed output
//! keeps its pages mapped for the next one, as PyArrow's memory pool does, so that a repeated
//! copy faults nothing at all. [`UninitBuffer`] (bytes) and [`PooledVec`] (typed) allocate there.
//!
//! [`WarmPages`] is a global allocator that serves a whole program's large allocations from the
//! same pool (the Python extension module installs it).
//!
//! Copies into outputs of [`STREAM_THRESHOLD`] bytes and more, which cannot stay in the cache,
//! write their long runs with non-temporal stores ([`copy_to_uninit`]), skipping the read of
//! each destination line that a plain store into uncached memory makes.

mod global;
pub mod pool;
mod pooled_vec;
pub(crate) mod recycle;
mod stream;

use std::sync::Arc;

use arrow_buffer::Buffer;

pub use global::WarmPages;
pub use pool::{
    BLOCK_ALIGN, DECAY_VARIABLE, DEFAULT_DECAY, DEFAULT_LIMIT, LIMIT_VARIABLE, POOL_THRESHOLD,
    PoolStats, release_unused, set_decay, set_limit, stats,
};
pub use pooled_vec::PooledVec;
pub use stream::{STREAM_MIN_RUN, STREAM_THRESHOLD, copy_to_uninit};

use crate::{Error, Result};
use pool::Block;

/// The allocation unit: 16 bytes, aligned for every DLPack dtype (complex128 needs 8).
type Unit = i128;

/// Outputs of this many bytes and more are advised for huge pages (numpy's threshold).
pub const HUGE_PAGE_THRESHOLD: usize = 4 << 20;

/// An empty `Vec<T>` with room for `capacity` elements, allocated fallibly
/// ([`Error::OutOfMemory`] instead of an abort), and advised for huge pages when it spans
/// [`HUGE_PAGE_THRESHOLD`] bytes or more.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
/// let mut values = arrow_dlpack::tensor::alloc::try_vec_with_capacity::<f32>(1000)?;
/// values.extend((0..1000).map(|i| i as f32));
/// assert_eq!(values.capacity(), 1000);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
pub fn try_vec_with_capacity<T>(capacity: usize) -> Result<Vec<T>> {
    let bytes = capacity.saturating_mul(size_of::<T>());
    let mut vec = Vec::<T>::new();
    vec.try_reserve_exact(capacity)
        .map_err(|_| Error::OutOfMemory { bytes })?;
    advise_huge_pages(vec.as_mut_ptr().cast(), bytes);
    Ok(vec)
}

/// Asks the kernel to back `[start, start + len)` with huge pages, when it is large enough to
/// gain from them; a hint, whose failure changes nothing.
#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    if len < HUGE_PAGE_THRESHOLD {
        return;
    }
    // `madvise` takes a page-aligned start; the part of the first page before it keeps 4 KiB
    // pages.
    let skip = (PAGE - start as usize % PAGE) % PAGE;
    // SAFETY: `[start + skip, start + len)` lies inside an allocation we own and that stays
    // alive; `MADV_HUGEPAGE` changes how the kernel backs the range, never its contents, and
    // its result is ignored because it is only a hint.
    unsafe {
        libc::madvise(start.add(skip).cast(), len - skip, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *mut u8, _len: usize) {}

/// Memory for `len` bytes, allocated but not yet written, that becomes an Arrow [`Buffer`]
/// without a copy once it is.
///
/// Large buffers ([`POOL_THRESHOLD`] bytes and more) come from the warm-page [`pool`] and return
/// to it when the last [`Buffer`] over them is dropped; smaller ones are heap allocations.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
/// use arrow_dlpack::tensor::alloc::UninitBuffer;
///
/// let mut out = UninitBuffer::try_new(3)?;
/// // SAFETY: `out` has room for 3 bytes; all three are written before `assume_init`.
/// let buffer = unsafe {
///     out.as_mut_ptr().copy_from_nonoverlapping([1u8, 2, 3].as_ptr(), 3);
///     out.assume_init()
/// };
/// assert_eq!(buffer.as_slice(), &[1, 2, 3]);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug)]
pub struct UninitBuffer {
    storage: Storage,
    len: usize,
}

#[derive(Debug)]
enum Storage {
    Heap(Vec<Unit>),
    Pooled(Block),
}

impl UninitBuffer {
    /// Allocates room for `len` bytes, aligned to 16 bytes; [`Error::OutOfMemory`] when the
    /// allocator refuses or `len` exceeds `isize::MAX`.
    pub fn try_new(len: usize) -> Result<Self> {
        let out_of_memory = || Error::OutOfMemory { bytes: len };
        if len > isize::MAX as usize {
            return Err(out_of_memory());
        }
        if len >= POOL_THRESHOLD
            && let Some(block) = Block::take(len)?
        {
            return Ok(UninitBuffer {
                storage: Storage::Pooled(block),
                len,
            });
        }
        let units = try_vec_with_capacity::<Unit>(len.div_ceil(size_of::<Unit>()))
            .map_err(|_| out_of_memory())?;
        Ok(UninitBuffer {
            storage: Storage::Heap(units),
            len,
        })
    }

    /// Room for `len` bytes (at least 1) from the warm-page pool, whatever their number: for
    /// buffers that are filled and dropped again and again, such as the ranges a loader fetches,
    /// whose fresh pages would each fault and be zeroed on every fill. The block's capacity is
    /// `len` rounded up to 2 MiB (the pool's [`BLOCK_ALIGN`]), so a caller with small buffers
    /// pays that rounding in memory. `Ok(None)` when the pool is off (its limit is 0) or `len`
    /// is 0; [`Error::OutOfMemory`] when the system refuses a new block.
    pub fn try_from_pool(len: usize) -> Result<Option<Self>> {
        if len == 0 {
            return Ok(None);
        }
        if len > isize::MAX as usize {
            return Err(Error::OutOfMemory { bytes: len });
        }
        Ok(Block::take(len)?.map(|block| UninitBuffer {
            storage: Storage::Pooled(block),
            len,
        }))
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the memory came from the warm-page pool.
    pub fn is_pooled(&self) -> bool {
        matches!(self.storage, Storage::Pooled(_))
    }

    /// The start of the memory, valid for writes of [`len`](Self::len) bytes and 16-byte aligned.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        match &mut self.storage {
            Storage::Heap(units) => units.as_mut_ptr().cast(),
            Storage::Pooled(block) => block.as_ptr(),
        }
    }

    /// The memory as [`len`](Self::len) slots to write, for safe writers such as
    /// [`copy_to_uninit`].
    pub fn as_uninit_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        let len = self.len;
        // SAFETY: the memory is valid for writes of `len` bytes (`as_mut_ptr`) and borrowed
        // exclusively with `self`; `MaybeUninit<u8>` has no validity invariant and alignment 1.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr().cast(), len) }
    }

    /// The buffer of the written bytes.
    ///
    /// # Safety
    ///
    /// All [`len`](Self::len) bytes from [`as_mut_ptr`](Self::as_mut_ptr) must have been written.
    pub unsafe fn assume_init(self) -> Buffer {
        let len = self.len;
        // SAFETY: forwarded: the first `len` bytes were written.
        unsafe { self.assume_init_prefix(len) }
    }

    /// The buffer of the first `written` bytes (at most [`len`](Self::len)): a buffer filled
    /// with fewer bytes than it has room for.
    ///
    /// # Safety
    ///
    /// The first `written` bytes from [`as_mut_ptr`](Self::as_mut_ptr) must have been written,
    /// and `written <= len`.
    pub unsafe fn assume_init_prefix(self, written: usize) -> Buffer {
        assert!(written <= self.len, "a prefix longer than the buffer");
        match self.storage {
            Storage::Heap(mut units) => {
                let count = written.div_ceil(size_of::<Unit>());
                let tail = count * size_of::<Unit>() - written;
                // SAFETY: the capacity holds `len.div_ceil(16) >= count` units; the bytes after
                // `written` in the last unit (fewer than 16) are zeroed here so that every unit
                // is initialised.
                unsafe {
                    units
                        .as_mut_ptr()
                        .cast::<u8>()
                        .add(written)
                        .write_bytes(0, tail)
                };
                // SAFETY: the caller wrote the first `written` bytes and the tail was zeroed
                // above, so the first `count` units are initialised; `count` is within the
                // reserved capacity.
                unsafe { units.set_len(count) };
                Buffer::from_vec(units).slice_with_length(0, written)
            }
            Storage::Pooled(block) => {
                let ptr = block.non_null();
                // SAFETY: the block is valid for reads of its capacity (at least `len >= written`
                // bytes), the first `written` of which the caller wrote; the `Arc` owns the block,
                // which stays allocated until the last buffer over it is dropped, and then returns
                // to the pool exactly once (its `Drop`).
                unsafe { Buffer::from_custom_allocation(ptr, written, Arc::new(block)) }
            }
        }
    }
}

#[cfg(test)]
mod tests;
