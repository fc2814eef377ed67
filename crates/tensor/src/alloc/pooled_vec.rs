//! [`PooledVec`]: a typed, fixed-capacity output that becomes an Arrow buffer without a copy.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use arrow_buffer::Buffer;

use super::UninitBuffer;
use crate::{Error, Result};

/// A vector of plain values with a fixed capacity, allocated fallibly and never zeroed, whose
/// memory comes from the warm-page [`pool`](super::pool) when large; it becomes an Arrow
/// [`Buffer`] of exactly its values without a copy.
///
/// It stands where a `Vec<T>` turned into a `Buffer` would: `push`, `extend` and `resize` write
/// values in order; `spare_capacity_mut` and `set_len` fill it out of order.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
/// use arrow_dlpack::tensor::alloc::PooledVec;
///
/// let mut values = PooledVec::<f32>::try_with_capacity(4)?;
/// values.extend((0..3).map(|i| i as f32));
/// values.push(9.0);
/// let buffer = values.into_buffer();
/// assert_eq!(buffer.typed_data::<f32>(), &[0.0, 1.0, 2.0, 9.0]);
/// # Ok::<(), arrow_dlpack::Error>(())
/// ```
#[derive(Debug)]
pub struct PooledVec<T> {
    out: UninitBuffer,
    len: usize,
    capacity: usize,
    _values: PhantomData<T>,
}

impl<T: Copy> PooledVec<T> {
    /// Room for `capacity` values; [`Error::OutOfMemory`] when the allocator refuses.
    ///
    /// `T` must be a sized type aligned to at most 16 bytes (every number type is).
    pub fn try_with_capacity(capacity: usize) -> Result<Self> {
        const {
            assert!(size_of::<T>() > 0 && align_of::<T>() <= 16);
        }
        let bytes = capacity
            .checked_mul(size_of::<T>())
            .ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        Ok(PooledVec {
            out: UninitBuffer::try_new(bytes)?,
            len: 0,
            capacity,
            _values: PhantomData,
        })
    }

    /// The number of values written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no value was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of values it has room for.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The values written so far.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` values were written, and the memory is aligned for `T`
        // (16-byte aligned, `T` at most 16).
        unsafe { std::slice::from_raw_parts(self.base().cast_const(), self.len) }
    }

    fn base(&self) -> *mut T {
        // `UninitBuffer::as_mut_ptr` needs `&mut`; the pointer is the same either way.
        match &self.out.storage {
            super::Storage::Heap(units) => units.as_ptr().cast_mut().cast(),
            super::Storage::Pooled(block) => block.as_ptr().cast(),
        }
    }

    /// The room after the written values.
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<T>] {
        // SAFETY: the memory holds `capacity` values of `T` (aligned, see `as_slice`), of which
        // those after `len` are borrowed mutably through `self`.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base().add(self.len).cast::<MaybeUninit<T>>(),
                self.capacity - self.len,
            )
        }
    }

    /// Declares the first `len` values written.
    ///
    /// # Safety
    ///
    /// `len <= capacity`, and every value below `len` was written.
    pub unsafe fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.capacity);
        self.len = len;
    }

    /// Appends `value`.
    ///
    /// # Panics
    ///
    /// When the vector is full.
    pub fn push(&mut self, value: T) {
        self.spare_capacity_mut()
            .first_mut()
            .expect("PooledVec::push past its capacity")
            .write(value);
        self.len += 1;
    }

    /// Appends the values of `values`.
    ///
    /// # Panics
    ///
    /// When the iterator's lower size bound exceeds the room left. An iterator that yields more
    /// than the room (beyond what its size hint admitted) has only the values that fit written.
    pub fn extend<I: IntoIterator<Item = T>>(&mut self, values: I) {
        let values = values.into_iter();
        let spare = self.spare_capacity_mut();
        assert!(
            values.size_hint().0 <= spare.len(),
            "PooledVec::extend past its capacity"
        );
        let mut written = 0;
        // A zip of the slots and the values themselves (not borrowed), so that slice-based
        // iterators run as one counted loop, as in `Vec::extend`; checking each slot instead,
        // or zipping with a borrowed iterator, made the boolean unpacking slower
        // (docs/benchmarks.md).
        for (slot, value) in spare.iter_mut().zip(values) {
            slot.write(value);
            written += 1;
        }
        self.len += written;
    }

    /// Appends a copy of `values`, with non-temporal stores when the vector's capacity is at
    /// least [`STREAM_THRESHOLD`](super::STREAM_THRESHOLD) bytes (see
    /// [`copy_to_uninit`](super::copy_to_uninit)).
    ///
    /// # Panics
    ///
    /// When they do not fit.
    pub fn extend_from_slice(&mut self, values: &[T]) {
        let output_bytes = self.capacity * size_of::<T>();
        let spare = self.spare_capacity_mut();
        assert!(
            values.len() <= spare.len(),
            "PooledVec::extend_from_slice past its capacity"
        );
        super::copy_to_uninit(values, &mut spare[..values.len()], output_bytes);
        self.len += values.len();
    }

    /// Appends copies of `value` until it holds `len` values (nothing when it holds as many).
    ///
    /// # Panics
    ///
    /// When `len` exceeds the capacity.
    pub fn resize(&mut self, len: usize, value: T) {
        assert!(len <= self.capacity, "PooledVec::resize past its capacity");
        let more = len.saturating_sub(self.len);
        self.spare_capacity_mut()[..more].fill(MaybeUninit::new(value));
        self.len += more;
    }

    /// The written values as a buffer of `len * size_of::<T>()` bytes, without a copy.
    pub fn into_buffer(self) -> Buffer {
        let bytes = self.len * size_of::<T>();
        // SAFETY: the first `len` values, `bytes` bytes, were written; `bytes` is at most the
        // buffer's length (`capacity` values).
        unsafe { self.out.assume_init_prefix(bytes) }
    }
}
