//! Tests of the fallible allocation and of the warm-page pool.

use super::*;

#[test]
fn refuses_more_than_the_address_space_without_aborting() {
    // A refused block releases the cached ones first: serialised with the other pool tests.
    let _pool = pool_test();
    assert_eq!(
        UninitBuffer::try_new(usize::MAX).unwrap_err(),
        Error::OutOfMemory { bytes: usize::MAX }
    );
    // Fits `isize` but no machine has it: the allocator refuses, and that is an error too.
    let huge = 1usize << 60;
    assert_eq!(
        UninitBuffer::try_new(huge).unwrap_err(),
        Error::OutOfMemory { bytes: huge }
    );
}

#[test]
fn huge_outputs_are_allocated_and_fully_writable() {
    let _pool = pool_test();
    let len = HUGE_PAGE_THRESHOLD * 2 + 3;
    let mut out = UninitBuffer::try_new(len).unwrap();
    // SAFETY: `out` has room for `len` bytes, all written here.
    let buffer = unsafe {
        out.as_mut_ptr().write_bytes(7, len);
        out.assume_init()
    };
    assert_eq!(buffer.len(), len);
    assert!(buffer.as_slice().iter().all(|&byte| byte == 7));
    assert_eq!(
        try_vec_with_capacity::<u64>(usize::MAX / 4).unwrap_err(),
        Error::OutOfMemory { bytes: usize::MAX }
    );
}

#[test]
fn buffers_are_aligned_and_exactly_long() {
    for len in [0, 1, 15, 16, 17, 1000] {
        let mut out = UninitBuffer::try_new(len).unwrap();
        // SAFETY: `out` has room for `len` bytes, all written here.
        let buffer = unsafe {
            out.as_mut_ptr().write_bytes(0, len);
            out.assume_init()
        };
        assert_eq!(buffer.len(), len);
        assert!(buffer.as_slice().iter().all(|&byte| byte == 0));
        assert_eq!(buffer.as_ptr().align_offset(16), 0);
    }
}

/// The pool is process-wide: its tests run one at a time, from a known state (default limit, a
/// decay long enough not to interfere, nothing cached), and restore the defaults when done.
struct PoolTest(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

fn pool_test() -> PoolTest {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    set_limit(DEFAULT_LIMIT);
    set_decay(std::time::Duration::from_secs(600));
    release_unused();
    PoolTest(guard)
}

impl Drop for PoolTest {
    fn drop(&mut self) {
        set_limit(DEFAULT_LIMIT);
        set_decay(DEFAULT_DECAY);
        release_unused();
    }
}

/// A buffer of `len` bytes, each `byte`, and where it starts.
fn filled(len: usize, byte: u8) -> Buffer {
    let mut out = UninitBuffer::try_new(len).unwrap();
    // SAFETY: `out` has room for `len` bytes, all written here.
    unsafe {
        out.as_mut_ptr().write_bytes(byte, len);
        out.assume_init()
    }
}

const MIB: usize = 1 << 20;

#[test]
fn a_freed_block_is_reused_and_counted() {
    let _pool = pool_test();
    let before = stats();
    let first = filled(10 * MIB, 1);
    let start = first.as_ptr();
    assert_eq!(start.align_offset(BLOCK_ALIGN), 0);
    assert_eq!(stats().in_use_bytes, 10 * MIB);
    drop(first);
    assert_eq!(stats().cached_bytes, 10 * MIB, "rounded up to 2 MiB");
    // A slightly smaller request fits the same block.
    let second = filled(9 * MIB + 5, 2);
    assert_eq!(second.as_ptr(), start);
    assert!(second.as_slice().iter().all(|&byte| byte == 2));
    let after = stats();
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (1, 1)
    );
    assert_eq!(after.returns - before.returns, 1);
    assert_eq!(after.cached_bytes, 0);
}

#[test]
fn best_fit_bounds_the_waste() {
    let _pool = pool_test();
    let big = filled(16 * MIB, 0);
    let big_start = big.as_ptr();
    drop(big);
    // 4 MiB in a 16 MiB block would waste three quarters: a new block instead.
    let small = filled(4 * MIB, 0);
    assert_ne!(small.as_ptr(), big_start);
    let small_start = small.as_ptr();
    drop(small);
    // Two blocks fit 13 MiB within 1.25x? 16 MiB does (3 MiB of waste <= 14/4), 4 MiB does not.
    let fitting = filled(13 * MIB, 0);
    assert_eq!(fitting.as_ptr(), big_start);
    drop(fitting);
    // The smallest that fits wins.
    let smallest = filled(4 * MIB, 0);
    assert_eq!(smallest.as_ptr(), small_start);
}

#[test]
fn the_limit_is_honoured_oldest_first() {
    let _pool = pool_test();
    set_limit(9 * MIB);
    let buffers: Vec<Buffer> = (0..3).map(|i| filled(4 * MIB, i)).collect();
    let starts: Vec<*const u8> = buffers.iter().map(|b| b.as_ptr()).collect();
    let before = stats();
    drop(buffers);
    let after = stats();
    assert_eq!(after.cached_bytes, 8 * MIB);
    assert_eq!(after.cached_blocks, 2);
    assert_eq!(after.released - before.released, 1);
    // The oldest (the first dropped) went back to the system; a block larger than the limit is
    // never cached.
    let reused = filled(4 * MIB, 9);
    assert_ne!(reused.as_ptr(), starts[0]);
    let larger = filled(10 * MIB, 0);
    drop(larger);
    assert_eq!(stats().cached_bytes, 4 * MIB);
    // Lowering the limit releases at once.
    set_limit(0);
    assert_eq!(stats().cached_bytes, 0);
}

#[test]
fn blocks_unused_past_the_decay_are_released() {
    let _pool = pool_test();
    set_decay(std::time::Duration::from_millis(20));
    drop(filled(4 * MIB, 0));
    assert_eq!(stats().cached_blocks, 1);
    std::thread::sleep(std::time::Duration::from_millis(60));
    let after = stats();
    assert_eq!((after.cached_blocks, after.cached_bytes), (0, 0));
}

#[test]
fn every_block_returns_exactly_once() {
    let _pool = pool_test();
    let before = stats();
    let buffer = filled(6 * MIB, 3);
    let clones = [
        buffer.clone(),
        buffer.slice(100),
        buffer.slice_with_length(7, 9),
    ];
    drop(buffer);
    assert_eq!(
        stats().returns,
        before.returns,
        "clones still hold the block"
    );
    drop(clones);
    assert_eq!(stats().returns - before.returns, 1);
    // An output dropped before it was ever a buffer returns too.
    drop(UninitBuffer::try_new(5 * MIB).unwrap());
    let after = stats();
    assert_eq!(after.returns - before.returns, 2);
    assert_eq!(after.in_use_bytes, 0);
}

#[test]
fn data_survives_reuse_of_other_blocks() {
    let _pool = pool_test();
    let kept = filled(8 * MIB, 0xAB);
    for round in 0..4u8 {
        let scratch = filled(8 * MIB, round);
        assert!(scratch.as_slice().iter().all(|&byte| byte == round));
    }
    assert!(kept.as_slice().iter().all(|&byte| byte == 0xAB));
}

#[test]
fn two_threads_allocate_and_free_concurrently() {
    let _pool = pool_test();
    let before = stats();
    std::thread::scope(|scope| {
        for thread in 1..=2u8 {
            scope.spawn(move || {
                for round in 0..40usize {
                    let len = (4 + round % 3) * MIB + round;
                    let buffer = filled(len, thread);
                    assert!(buffer.as_slice().iter().all(|&byte| byte == thread));
                }
            });
        }
    });
    let after = stats();
    let taken = (after.hits - before.hits) + (after.misses - before.misses);
    assert_eq!(taken, 80);
    assert_eq!(after.returns - before.returns, 80);
    assert!(after.hits - before.hits > 0);
    assert_eq!(after.in_use_bytes, 0);
    assert!(after.cached_bytes <= after.limit);
}

#[test]
fn a_limit_of_zero_turns_the_pool_off() {
    let _pool = pool_test();
    set_limit(0);
    let before = stats();
    let out = UninitBuffer::try_new(8 * MIB).unwrap();
    assert!(!out.is_pooled());
    drop(out);
    let after = stats();
    assert_eq!(
        (after.hits, after.misses, after.cached_bytes),
        (before.hits, before.misses, 0)
    );
    set_limit(DEFAULT_LIMIT);
    assert!(UninitBuffer::try_new(8 * MIB).unwrap().is_pooled());
    assert!(
        !UninitBuffer::try_new(POOL_THRESHOLD - 1)
            .unwrap()
            .is_pooled()
    );
}

#[test]
fn from_the_pool_any_length_takes_a_block_and_a_prefix_returns_it() {
    let _pool = pool_test();
    let before = stats();
    // Under the pool's threshold, still a block: 1 MiB + 1 rounded up to 2 MiB.
    let mut out = UninitBuffer::try_from_pool(MIB + 1).unwrap().unwrap();
    assert!(out.is_pooled());
    assert_eq!(out.len(), MIB + 1);
    let start = out.as_mut_ptr();
    assert_eq!(start.align_offset(BLOCK_ALIGN), 0);
    // SAFETY: the first 1,000 of its `MIB + 1` bytes are written before the prefix is taken.
    let prefix = unsafe {
        start.write_bytes(7, 1000);
        out.assume_init_prefix(1000)
    };
    assert_eq!(prefix.len(), 1000);
    assert!(prefix.as_slice().iter().all(|&byte| byte == 7));
    assert_eq!(stats().in_use_bytes - before.in_use_bytes, BLOCK_ALIGN);
    drop(prefix);
    // Back in the pool, and the next buffer of that class takes it.
    assert_eq!(stats().cached_bytes, BLOCK_ALIGN);
    let again = UninitBuffer::try_from_pool(2 * MIB).unwrap().unwrap();
    assert_eq!(again.len(), 2 * MIB);
    drop(again);
    let after = stats();
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (1, 1)
    );
    // Nothing to take for no bytes, and nothing with the pool off.
    assert!(UninitBuffer::try_from_pool(0).unwrap().is_none());
    set_limit(0);
    assert!(UninitBuffer::try_from_pool(MIB).unwrap().is_none());
}

#[test]
#[should_panic(expected = "a prefix longer than the buffer")]
fn a_prefix_longer_than_the_buffer_is_refused() {
    let out = UninitBuffer::try_new(16).unwrap();
    // SAFETY: the precondition is broken on purpose: the length is checked before any byte is
    // read, so the call panics instead.
    let _ = unsafe { out.assume_init_prefix(17) };
}

#[test]
fn pooled_vectors_write_in_order_and_become_exact_buffers() {
    let _pool = pool_test();
    for capacity in [0, 5, POOL_THRESHOLD / 8 + 3] {
        let mut values = PooledVec::<u64>::try_with_capacity(capacity).unwrap();
        let half = capacity / 2;
        values.extend((0..half).map(|i| i as u64));
        if half < capacity {
            values.push(7);
        }
        values.resize(capacity, 9);
        assert_eq!(values.len(), capacity);
        let buffer = values.into_buffer();
        assert_eq!(buffer.len(), capacity * 8);
        let typed = buffer.typed_data::<u64>();
        assert!(
            typed[..half]
                .iter()
                .enumerate()
                .all(|(i, &v)| v == i as u64)
        );
        assert!(typed[half.min(capacity)..].iter().skip(1).all(|&v| v == 9));
    }
    let mut partly = PooledVec::<u16>::try_with_capacity(10).unwrap();
    partly.extend_from_slice(&[1, 2, 3]);
    assert_eq!(partly.as_slice(), &[1, 2, 3]);
    assert_eq!(partly.into_buffer().typed_data::<u16>(), &[1, 2, 3]);
    assert_eq!(
        PooledVec::<u64>::try_with_capacity(usize::MAX / 4).unwrap_err(),
        Error::OutOfMemory { bytes: usize::MAX }
    );
}

#[test]
#[should_panic(expected = "past its capacity")]
fn a_pooled_vector_refuses_to_overflow() {
    let _pool = pool_test();
    let mut values = PooledVec::<u8>::try_with_capacity(2).unwrap();
    values.extend([1, 2, 3]);
}

/// The global allocator, called directly (this test binary keeps the system allocator).
mod global {
    use std::alloc::{GlobalAlloc, Layout};

    use super::*;

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 64).unwrap()
    }

    #[test]
    fn a_large_allocation_is_a_block_reused_by_its_size_class() {
        let _pool = pool_test();
        let before = stats();
        // SAFETY: layouts of non-zero size; every pointer is freed once with its layout.
        unsafe {
            let first = WarmPages.alloc(layout(5 * MIB));
            assert_eq!(first.align_offset(BLOCK_ALIGN), 0);
            first.write_bytes(3, 5 * MIB);
            assert_eq!(
                stats().in_use_bytes - before.in_use_bytes,
                6 * MIB,
                "rounded up"
            );
            WarmPages.dealloc(first, layout(5 * MIB));
            assert_eq!(stats().cached_bytes, 6 * MIB);
            // Another request of the same class takes the block; zeroed, it is zero.
            let second = WarmPages.alloc_zeroed(layout(6 * MIB - 1));
            assert_eq!(second, first);
            assert!(
                std::slice::from_raw_parts(second, 6 * MIB - 1)
                    .iter()
                    .all(|&b| b == 0)
            );
            // A request of another class does not.
            let third = WarmPages.alloc(layout(7 * MIB));
            assert_ne!(third, first);
            WarmPages.dealloc(second, layout(6 * MIB - 1));
            WarmPages.dealloc(third, layout(7 * MIB));
        }
        let after = stats();
        assert_eq!(
            (after.hits - before.hits, after.misses - before.misses),
            (1, 2)
        );
        assert_eq!(after.returns - before.returns, 3);
        assert_eq!(after.in_use_bytes, before.in_use_bytes);
        assert_eq!(after.cached_bytes, 14 * MIB);
    }

    #[test]
    fn realloc_keeps_a_block_within_its_class_and_moves_the_bytes_across_classes() {
        let _pool = pool_test();
        // SAFETY: as above; each pointer is reallocated or freed with the layout it has now.
        unsafe {
            let small = WarmPages.alloc(layout(1000));
            small.write_bytes(7, 1000);
            // Small to large: the bytes move into a block.
            let large = WarmPages.realloc(small, layout(1000), 4 * MIB + 1);
            assert_eq!(large.align_offset(BLOCK_ALIGN), 0);
            large.add(1000).write_bytes(8, 4 * MIB + 1 - 1000);
            // Within the class (6 MiB): the same block.
            let grown = WarmPages.realloc(large, layout(4 * MIB + 1), 6 * MIB);
            assert_eq!(grown, large);
            // Across classes: a new block with every byte.
            let moved = WarmPages.realloc(grown, layout(6 * MIB), 9 * MIB);
            assert_ne!(moved, grown);
            let bytes = std::slice::from_raw_parts(moved, 6 * MIB);
            assert!(bytes[..1000].iter().all(|&b| b == 7));
            assert!(bytes[1000..4 * MIB + 1].iter().all(|&b| b == 8));
            // Back down to a small allocation.
            let shrunk = WarmPages.realloc(moved, layout(9 * MIB), 100);
            assert!(
                std::slice::from_raw_parts(shrunk, 100)
                    .iter()
                    .all(|&b| b == 7)
            );
            WarmPages.dealloc(shrunk, layout(100));
        }
        assert_eq!(stats().in_use_bytes, 0);
    }

    #[test]
    fn with_the_pool_off_blocks_go_back_to_the_system() {
        let _pool = pool_test();
        set_limit(0);
        let before = stats();
        // SAFETY: as above.
        unsafe {
            let block = WarmPages.alloc(layout(8 * MIB));
            assert!(!block.is_null());
            block.write_bytes(1, 8 * MIB);
            WarmPages.dealloc(block, layout(8 * MIB));
        }
        let after = stats();
        assert_eq!(after.cached_bytes, 0);
        assert_eq!((after.hits, after.misses), (before.hits, before.misses));
        assert_eq!(after.in_use_bytes, before.in_use_bytes);
    }

    #[test]
    fn a_request_larger_than_the_address_space_is_refused_not_aborted() {
        let _pool = pool_test();
        let huge = Layout::from_size_align(isize::MAX as usize - (4 << 20), 64).unwrap();
        // SAFETY: a non-zero layout; a null answer is the refusal.
        let ptr = unsafe { WarmPages.alloc(huge) };
        assert!(ptr.is_null());
        assert_eq!(stats().in_use_bytes, 0);
    }
}
