//! [`WarmPages`]: a global allocator that serves every large allocation of a program from the
//! warm-page [`pool`](super::pool), and everything else from the system allocator.
//!
//! The pool's outputs are the copies this crate makes. A program's other large buffers (a
//! Parquet decoder's values, levels and offsets, grown by doubling, one set per row group; an
//! IPC body decompressed; an image batch) came from glibc, which serves requests above its mmap
//! threshold with fresh mappings and returns them to the kernel when freed, so every row group
//! faulted its pages in again: a third of the time of a pass over a Parquet list column went to
//! page faults and the kernel's zeroing of fresh pages. PyArrow's reader allocates from jemalloc
//! or mimalloc, which keep freed pages mapped. With [`WarmPages`] as the global allocator (the
//! Python extension module installs it), a large allocation takes a cached block of its size
//! class when one is there.
//!
//! - Requests of [`POOL_THRESHOLD`] bytes and more (and an alignment of at most
//!   [`BLOCK_ALIGN`]) are blocks: their size rounded up to the next multiple of 2 MiB (the size
//!   class, which is all `dealloc` needs to know: it is computed again from the layout), 2 MiB
//!   aligned and advised for huge pages. A block comes from the cache only for a request of its
//!   exact class, and goes back to it when freed, under the pool's limit and decay.
//! - A `realloc` within one class keeps its block (a growing vector doubles through classes
//!   instead of copying on every step of 2 MiB); across classes it moves to a block of the new
//!   class.
//! - With the pool off (a limit of 0, as the valgrind suites set it), blocks still have their
//!   class's layout but come from and go straight back to the system allocator.
//! - Smaller requests go to [`System`] unchanged, so nothing the pool's own bookkeeping
//!   allocates under its lock comes back to it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::NonNull;

use super::pool::{BLOCK_ALIGN, POOL_THRESHOLD, block_capacity, check_in, check_out, fresh, lock};

/// The global allocator that serves large allocations from the warm-page [`pool`](super::pool):
/// requests of [`POOL_THRESHOLD`] bytes and more are blocks of their size class (the request
/// rounded up to 2 MiB, 2 MiB-aligned), taken from the pool's cache when one of that class is
/// there and given back to it when freed, under the pool's limit and decay; a `realloc` within a
/// class keeps its block. Smaller requests go to [`System`]. With the pool off (a limit of 0),
/// blocks come from and go back to the system. Installed, it keeps the pages of a program's
/// large buffers mapped from one use to the next (a Parquet decoder's, one set per row group),
/// as PyArrow's jemalloc pool does.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; }
/// use arrow_dlpack::tensor::alloc::WarmPages;
///
/// // In a binary or a `cdylib`: `#[global_allocator] static ALLOCATOR: WarmPages = WarmPages;`
/// let values: Vec<u64> = vec![7; 1 << 20]; // 8 MiB: a block of the pool where installed
/// assert_eq!(values.iter().sum::<u64>(), 7 << 20);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct WarmPages;

/// The size class of a request served by blocks, or `None` for the system allocator.
fn class(layout: Layout) -> Option<usize> {
    if layout.size() < POOL_THRESHOLD || layout.align() > BLOCK_ALIGN {
        return None;
    }
    block_capacity(layout.size())
}

/// A block of `capacity` bytes (a class): a cached one of that class, or a new one; `zeroed`
/// asks for its first `len` bytes to be zero. Null when the system refuses, as `GlobalAlloc`
/// reports it. With the pool off, a new block counted in use all the same, as [`check_in`]
/// counts it out.
fn take(capacity: usize, len: usize, zeroed: bool) -> *mut u8 {
    match check_out(capacity, |cached| cached == capacity) {
        Some(Some(block)) => {
            let ptr = block.ptr.as_ptr();
            if zeroed {
                // SAFETY: the block is `capacity >= len` bytes, owned by the caller from here on.
                unsafe { ptr.write_bytes(0, len) };
            }
            ptr
        }
        reused => {
            if reused.is_none() {
                lock().in_use_bytes += capacity;
            }
            fresh(capacity, zeroed).map_or(std::ptr::null_mut(), NonNull::as_ptr)
        }
    }
}

// SAFETY: every pointer handed out is either the system allocator's for the same layout (small
// requests) or a block of `class(layout)` bytes aligned to `BLOCK_ALIGN >= layout.align()`, which
// holds `layout.size()` bytes; a block is owned by exactly one caller between `alloc` and
// `dealloc` (the pool's lock guards its cache), and `dealloc` finds the class again from the
// layout the caller must pass. No path unwinds: the pool's lock never panics, and its own
// bookkeeping allocates only small requests, which go to `System`.
//
// The entry points are never inlined: the compiler's allocation shims would otherwise inline
// them, with the pool's paths, into every allocation site of the fat-LTO build (371 KB of the
// wheel), for a saving of one call on paths that then take a lock or call `malloc` anyway.
unsafe impl GlobalAlloc for WarmPages {
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class(layout) {
            Some(capacity) => take(capacity, layout.size(), false),
            // SAFETY: the caller's contract (a non-zero size) is passed on.
            None => unsafe { System.alloc(layout) },
        }
    }

    #[inline(never)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class(layout) {
            Some(capacity) => take(capacity, layout.size(), true),
            // SAFETY: as `alloc`.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class(layout) {
            // Always cacheable: a block allocated before a fork is the child's own copy.
            Some(capacity) => {
                if let Some(ptr) = NonNull::new(ptr) {
                    check_in(ptr, capacity, true);
                }
            }
            // SAFETY: a small layout was allocated by `System` with this layout.
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees that `new_size`, rounded up to `layout.align()`, does not
        // overflow `isize`, which is what a layout needs.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class(layout), class(new_layout)) {
            // SAFETY: both sizes are the system allocator's, and the caller's contract holds.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            (Some(old), Some(new)) if old == new => ptr,
            _ => {
                // SAFETY: `new_layout` has a non-zero size (the caller's contract).
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    // SAFETY: both blocks hold at least the bytes copied, and are distinct
                    // allocations; the old one is freed with the layout it was allocated with.
                    unsafe {
                        moved.copy_from_nonoverlapping(ptr, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                moved
            }
        }
    }
}
