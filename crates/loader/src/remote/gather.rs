//! The buffer a fetched range's bytes are gathered in as they arrive ([`Gather`]).
//!
//! It grows with the bytes received, never past the range asked for, so that no allocation is
//! sized by a length a footer or a server declares before the bytes come: at first the whole
//! range or [`FIRST_RESERVE`], whichever is smaller, then doubling. An allocation that fails is
//! an error, never an abort.
//!
//! Buffers of [`MAPPED_MIN`] bytes and more come from the warm-page pool of the tensor crate
//! (`arrow_dlpack_tensor::alloc::pool`), and go back to it when the bytes are dropped, so that the
//! next range is written into pages that are already mapped. In a pass over a server on loopback
//! (row groups of about 1 MB), a range gathered into a fresh mapping faulted in and zeroed every
//! 4 KiB page it wrote: about 40% of the fetching threads' time, more than the copies out of the
//! socket and into the buffer (measured in docs/benchmarks.md, "Object storage"). A block's
//! capacity is the buffer's size rounded up to 2 MiB.
//!
//! With the pool off (`ad.set_memory_pool_limit(0)`), such a buffer is an anonymous mapping of
//! its own, advised for transparent huge pages and returned to the system when the bytes are
//! dropped: not glibc's heap, whose per-thread arenas kept tens of megabytes of ranges that the
//! fetch, decode and consumer threads had freed across one another.

use std::io;

use arrow_dlpack_tensor::alloc::{UninitBuffer, copy_to_uninit};
use bytes::Bytes;
use memmap2::MmapMut;

/// The most bytes reserved for a range before its bytes arrive; the buffer then doubles with
/// the bytes received, up to the range's length.
pub(super) const FIRST_RESERVE: usize = 8 << 20;

/// Buffers of at least this many bytes come from the warm-page pool (or, with the pool off, are
/// mappings of their own).
pub(super) const MAPPED_MIN: usize = 1 << 20;

/// The bytes of one range, gathered as they arrive.
pub(super) struct Gather {
    storage: Storage,
    /// The bytes gathered.
    len: usize,
    /// The range's length: the buffer never grows past it.
    limit: usize,
}

enum Storage {
    Heap(Vec<u8>),
    Pooled(UninitBuffer),
    Mapped(MmapMut),
}

impl Storage {
    fn room(&self) -> usize {
        match self {
            Storage::Heap(vec) => vec.capacity(),
            Storage::Pooled(buffer) => buffer.len(),
            Storage::Mapped(map) => map.len(),
        }
    }

    /// Room for `len` bytes of [`MAPPED_MIN`] and more: a block of the pool, or a mapping of
    /// its own when the pool is off.
    fn large(len: usize) -> Result<Self, (usize, String)> {
        let refused = |error: String| (len, error);
        match UninitBuffer::try_from_pool(len).map_err(|error| refused(error.to_string()))? {
            Some(buffer) => Ok(Storage::Pooled(buffer)),
            None => Ok(Storage::Mapped(
                mapping(len).map_err(|error| refused(error.to_string()))?,
            )),
        }
    }

    /// Writes `bytes` at `at`, within the room.
    fn write(&mut self, at: usize, bytes: &[u8]) {
        let end = at + bytes.len();
        match self {
            Storage::Heap(vec) => {
                debug_assert_eq!(vec.len(), at);
                vec.extend_from_slice(bytes);
            }
            Storage::Pooled(buffer) => {
                let room = buffer.len();
                copy_to_uninit(bytes, &mut buffer.as_uninit_mut()[at..end], room);
            }
            Storage::Mapped(map) => map[at..end].copy_from_slice(bytes),
        }
    }
}

/// The gathered prefix of a pool block, as the owner of a [`Bytes`]; the block goes back to the
/// pool when the last [`Bytes`] over it is dropped.
pub(super) struct PooledBytes(pub(super) arrow_buffer::Buffer);

impl AsRef<[u8]> for PooledBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

/// The gathered prefix of a mapping, as the owner of a [`Bytes`].
struct MappedPrefix {
    map: MmapMut,
    len: usize,
}

impl AsRef<[u8]> for MappedPrefix {
    fn as_ref(&self) -> &[u8] {
        &self.map[..self.len]
    }
}

impl Gather {
    /// An empty buffer for a range of `limit` bytes.
    pub(super) fn new(limit: usize) -> Self {
        Gather {
            storage: Storage::Heap(Vec::new()),
            len: 0,
            limit,
        }
    }

    /// The bytes gathered so far.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends `part`, growing the buffer first if it must; a refused allocation is `Err` of
    /// the size that was asked for and why.
    pub(super) fn push(&mut self, part: &[u8]) -> Result<(), (usize, String)> {
        let needed = self.len + part.len();
        if needed > self.storage.room() {
            self.grow(needed)?;
        }
        self.storage.write(self.len, part);
        self.len = needed;
        Ok(())
    }

    /// Room for `needed` bytes: at least [`FIRST_RESERVE`] (or the whole range when smaller) at
    /// first, then doubling, never past the range (unless `needed` is larger, which the caller
    /// refuses before it pushes).
    fn grow(&mut self, needed: usize) -> Result<(), (usize, String)> {
        let target = (self.storage.room() * 2)
            .max(FIRST_RESERVE)
            .max(needed)
            .min(self.limit.max(needed));
        // A mapping holds at least MAPPED_MIN bytes, so a smaller target is the heap's.
        if let Storage::Heap(vec) = &mut self.storage
            && target < MAPPED_MIN
        {
            return vec
                .try_reserve_exact(target - vec.len())
                .map_err(|error| (target, error.to_string()));
        }
        let mut larger = Storage::large(target)?;
        match std::mem::replace(&mut self.storage, Storage::Heap(Vec::new())) {
            Storage::Heap(vec) => larger.write(0, &vec),
            Storage::Pooled(buffer) => {
                // SAFETY: `push` wrote the first `self.len` bytes, and never past the room. The
                // old block goes back to the pool once its bytes are copied.
                let gathered = unsafe { buffer.assume_init_prefix(self.len) };
                larger.write(0, gathered.as_slice());
            }
            Storage::Mapped(map) => larger.write(0, &map[..self.len]),
        }
        self.storage = larger;
        Ok(())
    }

    /// The gathered bytes.
    pub(super) fn into_bytes(self) -> Bytes {
        match self.storage {
            Storage::Heap(vec) => Bytes::from(vec),
            Storage::Pooled(buffer) => {
                // SAFETY: `push` wrote the first `self.len` bytes, and never past the room.
                let buffer = unsafe { buffer.assume_init_prefix(self.len) };
                Bytes::from_owner(PooledBytes(buffer))
            }
            Storage::Mapped(map) => Bytes::from_owner(MappedPrefix { map, len: self.len }),
        }
    }
}

/// An anonymous mapping of `len` bytes, advised for huge pages where the system has them (the
/// advice is a hint: refused, the mapping stays as it is).
fn mapping(len: usize) -> io::Result<MmapMut> {
    let map = MmapMut::map_anon(len)?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage);
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the buffer is a large one (a pool block, or a mapping with the pool off) of
    /// `room` bytes.
    fn large_of(gather: &Gather, room: usize) -> bool {
        matches!(gather.storage, Storage::Pooled(_) | Storage::Mapped(_))
            && gather.storage.room() == room
    }

    #[test]
    fn room_grows_from_the_first_reserve_by_doubling_up_to_the_range() {
        // A small range: the whole range at once, on the heap.
        let mut small = Gather::new(100);
        small.push(&[1; 10]).unwrap();
        assert!(matches!(&small.storage, Storage::Heap(vec) if vec.capacity() == 100));
        // A large one: the first reserve, then its double, each a large buffer of its own.
        let limit = 64 << 20;
        let mut large = Gather::new(limit);
        large.push(&[2; 10]).unwrap();
        assert!(large_of(&large, FIRST_RESERVE));
        large.push(&vec![3; FIRST_RESERVE - 10]).unwrap();
        large.push(&[4]).unwrap();
        assert!(large_of(&large, 2 * FIRST_RESERVE));
        let bytes = large.into_bytes();
        assert_eq!(bytes.len(), FIRST_RESERVE + 1);
        assert_eq!((bytes[0], bytes[10], bytes[FIRST_RESERVE]), (2, 3, 4));
        // Never past the range: 9 MiB of a 9 MiB range is one buffer of 9 MiB.
        let mut exact = Gather::new(9 << 20);
        for _ in 0..9 {
            exact.push(&vec![5; 1 << 20]).unwrap();
        }
        assert!(large_of(&exact, 9 << 20));
        assert_eq!(exact.len(), 9 << 20);
        assert!(exact.into_bytes().iter().all(|&byte| byte == 5));
    }

    #[test]
    fn a_range_from_the_heap_grows_into_a_large_buffer_with_its_bytes() {
        // Between the heap and the large buffers: a range of 3 MiB first reserved whole (3 MiB
        // is under the first reserve), so its first part goes straight into a large buffer;
        // a range under MAPPED_MIN stays on the heap.
        let mut range = Gather::new(3 << 20);
        let part: Vec<u8> = (0..=255).cycle().take(1 << 20).collect();
        for _ in 0..3 {
            range.push(&part).unwrap();
        }
        assert!(large_of(&range, 3 << 20));
        let bytes = range.into_bytes();
        assert_eq!(bytes.len(), 3 << 20);
        assert!(bytes.chunks(1 << 20).all(|chunk| chunk == &part[..]));
        let mut under = Gather::new(MAPPED_MIN - 1);
        under.push(&part[..MAPPED_MIN - 1]).unwrap();
        assert!(matches!(&under.storage, Storage::Heap(_)));
        assert_eq!(&under.into_bytes()[..], &part[..MAPPED_MIN - 1]);
    }

    #[test]
    fn a_pool_block_goes_back_to_the_pool_when_its_bytes_are_dropped() {
        // Two ranges one after the other: the second takes the block the first gave back, so
        // its pages are warm (with the pool off, as the environment may set it, both are
        // mappings of their own and nothing is pooled).
        let fill = |byte| {
            let mut range = Gather::new(5 << 20);
            range.push(&vec![byte; 5 << 20]).unwrap();
            let pooled = matches!(range.storage, Storage::Pooled(_));
            (range.into_bytes(), pooled)
        };
        let (first, pooled) = fill(1);
        if !pooled {
            return;
        }
        let address = first.as_ptr();
        let clone = first.clone();
        drop(first);
        // Still held by the clone: a new range cannot take that block.
        let (second, _) = fill(2);
        assert_ne!(second.as_ptr(), address);
        assert!(clone.iter().all(|&byte| byte == 1));
        drop(clone);
        drop(second);
        let (third, _) = fill(3);
        assert!(third.iter().all(|&byte| byte == 3));
    }
}
