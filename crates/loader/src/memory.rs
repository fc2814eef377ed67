//! Fallible allocation: memory whose size a source or a state decides is reserved before it is
//! used, so that a request past what the process may allocate (an address-space limit, more
//! than the machine has) is an out-of-memory error, never an abort midway.

use crate::{Error, Result};

/// Reserves room for `more` elements in `values` (with the vector's amortised growth: an empty
/// vector gets exactly `more`); a refusal is the tensor layer's out-of-memory error, naming the
/// bytes asked for.
pub(crate) fn reserve<T>(values: &mut Vec<T>, more: usize) -> Result<()> {
    values.try_reserve(more).map_err(|_| {
        Error::from(arrow_dlpack_tensor::Error::OutOfMemory {
            bytes: more.saturating_mul(std::mem::size_of::<T>()),
        })
    })
}

/// Refuses, with the out-of-memory error, work about to hold `bytes` that the process could
/// not allocate now: the memory is reserved, and freed at once for the work to use.
///
/// The reservation asks the system allocator itself, not the program's global one: a global
/// allocator that keeps freed blocks for reuse (the Python module's warm-page pool) would keep
/// this block, which is never written, in place of blocks whose pages are warm.
pub(crate) fn ensure_available(bytes: usize) -> Result<()> {
    use std::alloc::{GlobalAlloc, Layout, System};

    let refused = || Error::from(arrow_dlpack_tensor::Error::OutOfMemory { bytes });
    if bytes == 0 {
        return Ok(());
    }
    let layout = Layout::from_size_align(bytes, 1).map_err(|_| refused())?;
    // SAFETY: `layout` has a non-zero size; the block is freed at once with the same layout and
    // never read or written.
    unsafe {
        let block = System.alloc(layout);
        if block.is_null() {
            return Err(refused());
        }
        System.dealloc(block, layout);
    }
    Ok(())
}
