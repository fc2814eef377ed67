//! The warm-page pool: large copy outputs whose pages stay mapped after their buffer is dropped.
//!
//! A copy into fresh memory pays a page fault for every page it writes, and for an 80 MB output
//! those faults cost more than the copy itself. PyArrow's memory pool (jemalloc or mimalloc) keeps
//! freed pages mapped and hands them to the next allocation; this pool does the same for the
//! outputs of [`POOL_THRESHOLD`] bytes and more:
//!
//! - A block's capacity is its request rounded up to [`BLOCK_ALIGN`] (2 MiB), and it starts on a
//!   2 MiB boundary, so that transparent huge pages can back all of it (it is advised
//!   `MADV_HUGEPAGE` on Linux).
//! - When the last Arrow [`Buffer`](arrow_buffer::Buffer) over a block is dropped, the block
//!   comes back here, exactly once (its owner's `Drop`), instead of going to the operating system.
//! - The next request takes the smallest cached block that fits it and wastes at most a quarter
//!   of the request (best fit within 1.25x); a miss allocates a new block.
//! - Cached bytes are bounded by a limit ([`set_limit`], [`DEFAULT_LIMIT`], or the environment
//!   variable [`LIMIT_VARIABLE`] read once): the oldest blocks go back to the system first. A
//!   block that sat unused for longer than the decay time ([`set_decay`], [`DEFAULT_DECAY`],
//!   [`DECAY_VARIABLE`]) is released on the next pool call; there is no background thread.
//! - A limit of 0 turns the pool off: outputs are plain heap allocations again.
//!
//! One process-wide mutex guards the cache; it is never held while pages are touched, allocated
//! or released. On Unix, a fork handler holds it across `fork`, so that a child never inherits
//! it locked, and the child empties its inherited cache (copy-on-write pages, which would fault
//! again, copied, on their first write) and never caches a block allocated before the fork.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{HUGE_PAGE_THRESHOLD, advise_huge_pages};
use crate::{Error, Result};

/// Requests of this many bytes and more come from the pool (when it is on).
///
/// The huge-page threshold: below it, a block rounded up to 2 MiB would waste more than half of
/// itself, and glibc serves such sizes from its heap, whose pages it keeps mapped anyway.
pub const POOL_THRESHOLD: usize = HUGE_PAGE_THRESHOLD;

/// The rounding and the alignment of every block: one x86-64 / aarch64 transparent huge page.
pub const BLOCK_ALIGN: usize = 2 << 20;

/// The default bound on cached bytes: 256 MiB, three 80 MB outputs.
///
/// One large output repeated is served from the pool once the limit holds it (docs/benchmarks.md
/// has the measurements); the rest covers a loop that keeps two or three outputs alive while it
/// frees older ones. The decay returns idle memory within a second, as PyArrow's pools do.
pub const DEFAULT_LIMIT: usize = 256 << 20;

/// The default time a cached block may sit unused before it goes back to the system.
pub const DEFAULT_DECAY: Duration = Duration::from_millis(1000);

/// The environment variable that sets the limit in bytes (read once, at the first pool call);
/// `0` turns the pool off.
pub const LIMIT_VARIABLE: &str = "ARROW_DLPACK_MEMORY_POOL_LIMIT";

/// The environment variable that sets the decay time in milliseconds (read once, with the limit).
pub const DECAY_VARIABLE: &str = "ARROW_DLPACK_MEMORY_POOL_DECAY_MS";

/// A snapshot of the pool's counters, from [`stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes held in cached blocks, ready for reuse.
    pub cached_bytes: usize,
    /// The number of cached blocks.
    pub cached_blocks: usize,
    /// Bytes of pool blocks that buffers hold now.
    pub in_use_bytes: usize,
    /// The bound on cached bytes (0: the pool is off).
    pub limit: usize,
    /// How long a block may stay cached unused.
    pub decay: Duration,
    /// Requests served from a cached block.
    pub hits: u64,
    /// Requests that allocated a new block.
    pub misses: u64,
    /// Blocks given back by their buffer's owner (each block exactly once).
    pub returns: u64,
    /// Blocks given back to the system (over the limit, decayed, released or turned off).
    pub released: u64,
}

/// A cached block, unused since `freed_at`.
pub(super) struct Cached {
    pub(super) ptr: NonNull<u8>,
    capacity: usize,
    freed_at: Instant,
}

// SAFETY: a cached block is memory that only the pool references (its buffer is gone); moving
// the pointer between threads moves that sole ownership.
unsafe impl Send for Cached {}

pub(super) struct State {
    configured: bool,
    limit: usize,
    decay: Duration,
    /// Oldest first.
    cached: Vec<Cached>,
    cached_bytes: usize,
    pub(super) in_use_bytes: usize,
    hits: u64,
    misses: u64,
    returns: u64,
    released: u64,
}

static POOL: Mutex<State> = Mutex::new(State {
    configured: false,
    limit: DEFAULT_LIMIT,
    decay: DEFAULT_DECAY,
    cached: Vec::new(),
    cached_bytes: 0,
    in_use_bytes: 0,
    hits: 0,
    misses: 0,
    returns: 0,
    released: 0,
});

/// Incremented in the child of every `fork`: a block allocated under an older generation is
/// released, never cached, when it comes back.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The pool, configured from the environment on first use. Nothing under the lock panics, so a
/// poisoned lock (a panic elsewhere on a thread holding it cannot happen) is taken as is.
pub(super) fn lock() -> MutexGuard<'static, State> {
    let mut state = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    if !state.configured {
        state.configured = true;
        let read = |name| std::env::var(name).ok()?.trim().parse::<u64>().ok();
        if let Some(limit) = read(LIMIT_VARIABLE) {
            state.limit = usize::try_from(limit).unwrap_or(usize::MAX);
        }
        if let Some(ms) = read(DECAY_VARIABLE) {
            state.decay = Duration::from_millis(ms);
        }
        fork::register();
    }
    state
}

impl State {
    /// Takes out the blocks unused for longer than the decay time and, oldest first, those over
    /// the limit, into `out` (released by the caller once the lock is dropped).
    fn trim(&mut self, now: Instant, out: &mut Vec<Cached>) {
        let decayed = self
            .cached
            .iter()
            .take_while(|block| now.saturating_duration_since(block.freed_at) > self.decay)
            .count();
        let mut evicted = decayed;
        let mut bytes = self.cached_bytes
            - self.cached[..decayed]
                .iter()
                .map(|block| block.capacity)
                .sum::<usize>();
        while bytes > self.limit {
            bytes -= self.cached[evicted].capacity;
            evicted += 1;
        }
        self.cached_bytes = bytes;
        self.released += evicted as u64;
        out.extend(self.cached.drain(..evicted));
    }

    fn snapshot(&self) -> PoolStats {
        PoolStats {
            cached_bytes: self.cached_bytes,
            cached_blocks: self.cached.len(),
            in_use_bytes: self.in_use_bytes,
            limit: self.limit,
            decay: self.decay,
            hits: self.hits,
            misses: self.misses,
            returns: self.returns,
            released: self.released,
        }
    }
}

/// Gives blocks back to the system; called without the lock.
fn release(blocks: Vec<Cached>) {
    for block in blocks {
        // SAFETY: every block was allocated from `System` with this capacity and alignment (by
        // `fresh`, for a `Block` or for the global allocator, [`super::WarmPages`]), and is owned
        // by the pool alone (its buffer or its allocation is gone).
        unsafe { System.dealloc(block.ptr.as_ptr(), block_layout(block.capacity)) };
    }
}

/// The capacity of a block for `len` bytes: `len` rounded up to [`BLOCK_ALIGN`], `None` where
/// no layout holds it.
pub(super) fn block_capacity(len: usize) -> Option<usize> {
    len.checked_next_multiple_of(BLOCK_ALIGN)
        .filter(|&capacity| Layout::from_size_align(capacity, BLOCK_ALIGN).is_ok())
}

/// The layout of a block of `capacity` bytes (a multiple of [`BLOCK_ALIGN`], checked valid by
/// whoever rounded it).
fn block_layout(capacity: usize) -> Layout {
    Layout::from_size_align(capacity, BLOCK_ALIGN).expect("capacity checked when rounded")
}

/// A block of the pool, writable for its capacity; it returns to the pool when dropped.
#[derive(Debug)]
pub(crate) struct Block {
    ptr: NonNull<u8>,
    capacity: usize,
    generation: u64,
}

// SAFETY: a block is memory that its owner alone references mutably (through `UninitBuffer`) or
// that Arrow buffers only read; the pointer carries that ownership to any thread, and returning
// the block from another thread is what the mutex-guarded pool is for.
unsafe impl Send for Block {}
// SAFETY: `&Block` gives no access to the memory; Arrow reads it through the buffer.
unsafe impl Sync for Block {}
impl std::panic::RefUnwindSafe for Block {}

impl Block {
    /// A block for `len` bytes (at least 1) from the pool, or `None` when the pool is off.
    ///
    /// [`Error::OutOfMemory`] when the system refuses a new block, even after the cached blocks
    /// were released.
    pub(crate) fn take(len: usize) -> Result<Option<Block>> {
        let out_of_memory = || Error::OutOfMemory { bytes: len };
        let capacity = block_capacity(len).ok_or_else(out_of_memory)?;
        // Best fit: the smallest cached block that holds `capacity` and wastes at most a quarter
        // of it.
        let fits = |cached: usize| cached >= capacity && cached - capacity <= capacity / 4;
        let Some(reused) = check_out(capacity, fits) else {
            return Ok(None);
        };
        let generation = GENERATION.load(Ordering::Acquire);
        if let Some(block) = reused {
            return Ok(Some(Block {
                ptr: block.ptr,
                capacity: block.capacity,
                generation,
            }));
        }
        let Some(ptr) = fresh(capacity, false) else {
            return Err(out_of_memory());
        };
        Ok(Some(Block {
            ptr,
            capacity,
            generation,
        }))
    }

    /// The start of the block, 2 MiB-aligned and valid for writes of its capacity.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The start of the block, non-null.
    pub(crate) fn non_null(&self) -> NonNull<u8> {
        self.ptr
    }
}

/// Takes a block for `capacity` bytes out of the cache: the smallest cached block whose capacity
/// `fits`, the most recently freed among equals (its pages the likeliest to be backed), counted
/// as a hit, or `Some(None)`, a miss; either way `capacity` (or the block's) is counted in use.
/// `None` when the pool is off, nothing counted. Blocks that decayed are released first.
pub(super) fn check_out(capacity: usize, fits: impl Fn(usize) -> bool) -> Option<Option<Cached>> {
    let mut released = Vec::new();
    let reused = {
        let mut state = lock();
        if state.limit == 0 {
            return None;
        }
        state.trim(Instant::now(), &mut released);
        let fit = state
            .cached
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, block)| fits(block.capacity))
            .min_by_key(|(_, block)| block.capacity)
            .map(|(index, _)| index);
        let reused = fit.map(|index| state.cached.remove(index));
        match &reused {
            Some(block) => {
                state.hits += 1;
                state.cached_bytes -= block.capacity;
                state.in_use_bytes += block.capacity;
            }
            None => {
                state.misses += 1;
                state.in_use_bytes += capacity;
            }
        }
        reused
    };
    release(released);
    Some(reused)
}

/// A new block of `capacity` bytes (a multiple of [`BLOCK_ALIGN`]) from the system allocator,
/// zeroed when asked, and advised for huge pages; a refusal is tried again after the cached
/// blocks are released, and then counted out of the bytes in use (which the caller counted in).
/// From `System`, not the global allocator: where [`super::WarmPages`] is that, a block must not
/// be counted by the pool twice.
pub(super) fn fresh(capacity: usize, zeroed: bool) -> Option<NonNull<u8>> {
    let layout = block_layout(capacity);
    let allocate = || {
        // SAFETY: `layout` has a non-zero size (a capacity is a positive multiple of
        // `BLOCK_ALIGN`) and was checked valid when the capacity was rounded.
        NonNull::new(unsafe {
            if zeroed {
                System.alloc_zeroed(layout)
            } else {
                System.alloc(layout)
            }
        })
    };
    let ptr = allocate().or_else(|| {
        // The system refused: the cached blocks may be what it is missing.
        release_unused();
        allocate()
    });
    let Some(ptr) = ptr else {
        let mut state = lock();
        state.in_use_bytes = state.in_use_bytes.saturating_sub(capacity);
        return None;
    };
    advise_huge_pages(ptr.as_ptr(), capacity);
    Some(ptr)
}

/// Gives back a block that was in use: into the cache when `cacheable` (allocated in this
/// process, not before a fork), the pool is on and the block fits its limit; to the system
/// otherwise. Counted as a return either way.
pub(super) fn check_in(ptr: NonNull<u8>, capacity: usize, cacheable: bool) {
    let block = Cached {
        ptr,
        capacity,
        freed_at: Instant::now(),
    };
    let mut released = Vec::new();
    {
        let mut state = lock();
        state.returns += 1;
        state.in_use_bytes = state.in_use_bytes.saturating_sub(capacity);
        let now = block.freed_at;
        if cacheable && capacity <= state.limit {
            state.cached_bytes += capacity;
            state.cached.push(block);
        } else {
            state.released += 1;
            released.push(block);
        }
        state.trim(now, &mut released);
    }
    release(released);
}

impl Drop for Block {
    fn drop(&mut self) {
        let same_process = self.generation == GENERATION.load(Ordering::Acquire);
        check_in(self.ptr, self.capacity, same_process);
    }
}

/// Applies `change` to the pool, then releases the blocks that decayed or exceed the limit.
fn update<T>(change: impl FnOnce(&mut State) -> T) -> T {
    let mut released = Vec::new();
    let result = {
        let mut state = lock();
        let result = change(&mut state);
        state.trim(Instant::now(), &mut released);
        result
    };
    release(released);
    result
}

/// The pool's counters now (after releasing the blocks that decayed).
pub fn stats() -> PoolStats {
    update(|_| ()); // the snapshot follows the release
    lock().snapshot()
}

/// Sets the bound on cached bytes, releasing the oldest blocks over it; `0` turns the pool off
/// (every block is released, and new outputs are plain heap allocations).
pub fn set_limit(bytes: usize) {
    update(|state| state.limit = bytes);
}

/// Sets how long a cached block may sit unused before it is released (on the next pool call).
pub fn set_decay(decay: Duration) {
    update(|state| state.decay = decay);
}

/// Gives every cached block back to the system now; returns the bytes released. Blocks in use
/// stay, and come back to the pool when their buffers are dropped.
pub fn release_unused() -> usize {
    let blocks = {
        let mut state = lock();
        let blocks = std::mem::take(&mut state.cached);
        state.released += blocks.len() as u64;
        state.cached_bytes = 0;
        blocks
    };
    let bytes = blocks.iter().map(|block| block.capacity).sum();
    release(blocks);
    bytes
}

#[cfg(unix)]
mod fork {
    //! Holds the pool's lock across `fork`, so that the child's copy of it is never locked by a
    //! thread that the child does not have.

    use std::cell::RefCell;
    use std::sync::{MutexGuard, Once, PoisonError};

    use super::{GENERATION, Ordering, POOL, State, release};

    thread_local! {
        /// The lock taken before `fork`, in the forking thread, until after it (in both
        /// processes).
        static HELD: RefCell<Option<MutexGuard<'static, State>>> = const { RefCell::new(None) };
    }

    pub(super) fn register() {
        static REGISTER: Once = Once::new();
        REGISTER.call_once(|| {
            // SAFETY: the handlers are `extern "C"` functions without arguments that never
            // unwind; registration failing (ENOMEM) only leaves fork unguarded.
            unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
        });
    }

    extern "C" fn prepare() {
        let guard = POOL.lock().unwrap_or_else(PoisonError::into_inner);
        HELD.with(|held| *held.borrow_mut() = Some(guard));
    }

    extern "C" fn parent() {
        HELD.with(|held| drop(held.borrow_mut().take()));
    }

    extern "C" fn child() {
        let Some(mut state) = HELD.with(|held| held.borrow_mut().take()) else {
            return;
        };
        GENERATION.fetch_add(1, Ordering::AcqRel);
        let blocks = std::mem::take(&mut state.cached);
        state.released += blocks.len() as u64;
        state.cached_bytes = 0;
        drop(state);
        // The child's copies of the parent's cached pages: writing them would copy each page.
        release(blocks);
    }
}

#[cfg(not(unix))]
mod fork {
    pub(super) fn register() {}
}
