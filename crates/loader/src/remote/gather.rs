//! The buffer a fetched range's bytes are gathered in as they arrive ([`Gather`]).
//!
//! It grows with the bytes received, never past the range asked for, so that no allocation is
//! sized by a length a footer or a server declares before the bytes come: at first the whole
//! range or [`FIRST_RESERVE`], whichever is smaller, then doubling. An allocation that fails is
//! an error, never an abort.
//!
//! Buffers of [`MAPPED_MIN`] bytes and more live in an anonymous mapping of their own, which is
//! returned to the system when the bytes are dropped. glibc's allocator raises its threshold for
//! such mappings to the size of each large block freed (up to 32 MiB), after which blocks of a
//! fetched range's size come from per-thread arenas; the fetch, decode and consumer threads free
//! them across one another, and the arenas kept tens of megabytes the loader no longer held
//! (measured in docs/benchmarks.md, "Object storage").
//!
//! Each mapping is advised for transparent huge pages (`MADV_HUGEPAGE`, on Linux): a fetched
//! range's first write faulted its pages in 4 KiB at a time, and the faults (with the kernel's
//! zeroing and the unmapping after) were about a quarter of the process's CPU time in a pass
//! over a server on loopback; 2 MiB pages take 512 times fewer.

use std::io;

use bytes::Bytes;
use memmap2::MmapMut;

/// The most bytes reserved for a range before its bytes arrive; the buffer then doubles with
/// the bytes received, up to the range's length.
pub(super) const FIRST_RESERVE: usize = 8 << 20;

/// Buffers of at least this many bytes are mappings of their own.
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
    Mapped(MmapMut),
}

impl Storage {
    fn room(&self) -> usize {
        match self {
            Storage::Heap(vec) => vec.capacity(),
            Storage::Mapped(map) => map.len(),
        }
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
        match &mut self.storage {
            Storage::Heap(vec) => vec.extend_from_slice(part),
            Storage::Mapped(map) => map[self.len..needed].copy_from_slice(part),
        }
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
        let mut map = mapping(target).map_err(|error| (target, error.to_string()))?;
        let gathered = match &self.storage {
            Storage::Heap(vec) => &vec[..],
            Storage::Mapped(old) => &old[..self.len],
        };
        map[..self.len].copy_from_slice(gathered);
        self.storage = Storage::Mapped(map);
        Ok(())
    }

    /// The gathered bytes.
    pub(super) fn into_bytes(self) -> Bytes {
        match self.storage {
            Storage::Heap(vec) => Bytes::from(vec),
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

    #[test]
    fn room_grows_from_the_first_reserve_by_doubling_up_to_the_range() {
        // A small range: the whole range at once, on the heap.
        let mut small = Gather::new(100);
        small.push(&[1; 10]).unwrap();
        assert!(matches!(&small.storage, Storage::Heap(vec) if vec.capacity() == 100));
        // A large one: the first reserve, then its double, each a mapping of its own.
        let limit = 64 << 20;
        let mut large = Gather::new(limit);
        large.push(&[2; 10]).unwrap();
        assert!(matches!(&large.storage, Storage::Mapped(map) if map.len() == FIRST_RESERVE));
        large.push(&vec![3; FIRST_RESERVE - 10]).unwrap();
        large.push(&[4]).unwrap();
        assert!(matches!(&large.storage, Storage::Mapped(map) if map.len() == 2 * FIRST_RESERVE));
        let bytes = large.into_bytes();
        assert_eq!(bytes.len(), FIRST_RESERVE + 1);
        assert_eq!((bytes[0], bytes[10], bytes[FIRST_RESERVE]), (2, 3, 4));
        // Never past the range: 9 MiB of a 9 MiB range is one mapping of 9 MiB.
        let mut exact = Gather::new(9 << 20);
        for _ in 0..9 {
            exact.push(&vec![5; 1 << 20]).unwrap();
        }
        assert!(matches!(&exact.storage, Storage::Mapped(map) if map.len() == 9 << 20));
        assert_eq!(exact.len(), 9 << 20);
        assert!(exact.into_bytes().iter().all(|&byte| byte == 5));
    }
}
