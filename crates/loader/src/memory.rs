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
pub(crate) fn ensure_available(bytes: usize) -> Result<()> {
    reserve(&mut Vec::<u8>::new(), bytes)
}
