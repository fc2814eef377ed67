"""The memory pool that large copy outputs come from and return to: a freed block is reused (same
address), the limit and the decay release memory, the counters count, every block comes back
exactly once (numpy and torch freeing DLPack exports included), data survives reuse, threads
share the pool, a fork child starts empty, and a limit of 0 turns it off."""

import os
import threading
import time
import warnings

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

MIB = 1 << 20
DEFAULT_LIMIT = 256 * MIB


@pytest.fixture(autouse=True)
def pool():
    """A known state: the default limit, a decay that does not interfere, nothing cached."""
    ad.set_memory_pool_limit(DEFAULT_LIMIT)
    ad.set_memory_pool_decay_ms(600_000)
    ad.release_unused_memory()
    yield
    ad.set_memory_pool_limit(DEFAULT_LIMIT)
    ad.set_memory_pool_decay_ms(1000)
    ad.release_unused_memory()


def source(nbytes, start=0):
    """An Arrow int64 array of `nbytes` bytes (values start, start + 1, ...)."""
    return ad.array(pa.array(np.arange(start, start + nbytes // 8, dtype=np.int64)))


def address(array):
    return array.__array_interface__["data"][0]


def test_a_freed_copy_is_reused_and_counted():
    x = source(10 * MIB)
    before = ad.memory_pool_stats()
    first = np.from_dlpack(x, copy=True)
    start = address(first)
    assert start % (2 * MIB) == 0
    assert ad.memory_pool_stats()["in_use_bytes"] - before["in_use_bytes"] == 10 * MIB
    del first
    assert ad.memory_pool_stats()["cached_bytes"] == 10 * MIB
    second = np.from_dlpack(x, copy=True)
    assert address(second) == start
    np.testing.assert_array_equal(second, np.arange(10 * MIB // 8))
    after = ad.memory_pool_stats()
    assert after["hits"] - before["hits"] == 1
    assert after["misses"] - before["misses"] == 1
    assert after["returns"] - before["returns"] == 1


def test_the_limit_is_honoured():
    ad.set_memory_pool_limit(9 * MIB)
    x = source(4 * MIB)
    copies = [np.from_dlpack(x, copy=True) for _ in range(3)]
    before = ad.memory_pool_stats()
    del copies
    after = ad.memory_pool_stats()
    assert after["limit"] == 9 * MIB
    assert after["cached_bytes"] == 8 * MIB
    assert after["released"] - before["released"] == 1
    assert ad.release_unused_memory() == 8 * MIB
    assert ad.memory_pool_stats()["cached_bytes"] == 0


def test_idle_blocks_decay():
    ad.set_memory_pool_decay_ms(50)
    np.from_dlpack(source(4 * MIB), copy=True)  # a copy made and freed at once
    assert ad.memory_pool_stats()["cached_bytes"] == 4 * MIB
    time.sleep(0.3)
    stats = ad.memory_pool_stats()
    assert stats["cached_bytes"] == 0
    assert stats["decay_ms"] == 50


def test_consumers_return_each_block_exactly_once():
    x = source(8 * MIB)
    before = ad.memory_pool_stats()
    # numpy and torch take DLPack exports and free them when their arrays go.
    as_numpy = np.from_dlpack(x, copy=True)
    view = as_numpy[1:]
    del as_numpy
    assert ad.memory_pool_stats()["returns"] == before["returns"], "the view holds the block"
    del view
    as_torch = torch.from_dlpack(ad.Tensor.from_dlpack(x, copy=True))
    clone = as_torch[::2]
    del as_torch, clone
    # Chunk concatenation and a table copy allocate here too.
    chunked = pa.chunked_array([np.arange(MIB // 2), np.arange(MIB // 2)])
    joined = np.from_dlpack(ad.array(chunked))
    assert joined.nbytes == 8 * MIB
    del joined
    table = pa.table({"a": np.arange(MIB, dtype=np.float64), "b": np.ones(MIB, np.float32)})
    matrix = ad.Tensor.from_arrow(table)
    assert matrix.shape == (MIB, 2)
    del matrix
    after = ad.memory_pool_stats()
    taken = after["hits"] + after["misses"] - before["hits"] - before["misses"]
    assert taken == 4
    assert after["returns"] - before["returns"] == 4
    assert after["in_use_bytes"] == before["in_use_bytes"]


def test_data_is_intact_after_reuse():
    kept = np.from_dlpack(source(6 * MIB, start=7), copy=True)
    for round_ in range(4):
        x = source(6 * MIB, start=round_ * 1000)
        copy = np.from_dlpack(x, copy=True)
        np.testing.assert_array_equal(copy, np.arange(round_ * 1000, round_ * 1000 + 6 * MIB // 8))
        del copy
    np.testing.assert_array_equal(kept, np.arange(7, 7 + 6 * MIB // 8))
    assert ad.memory_pool_stats()["hits"] >= 3


def test_two_threads_share_the_pool():
    sources = [source(4 * MIB, start=1), source(5 * MIB, start=2)]
    before = ad.memory_pool_stats()
    failures = []

    def work(x, start):
        for _ in range(25):
            copy = np.from_dlpack(x, copy=True)
            if copy[0] != start or copy[-1] != start + copy.size - 1:
                failures.append(copy[:2])

    threads = [threading.Thread(target=work, args=(x, i + 1)) for i, x in enumerate(sources)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    after = ad.memory_pool_stats()
    taken = after["hits"] + after["misses"] - before["hits"] - before["misses"]
    assert taken == 50
    assert after["returns"] - before["returns"] == 50
    assert after["hits"] > before["hits"]
    assert after["in_use_bytes"] == before["in_use_bytes"]


def test_a_limit_of_zero_turns_the_pool_off():
    ad.set_memory_pool_limit(0)
    x = source(8 * MIB)
    before = ad.memory_pool_stats()
    for _ in range(3):
        copy = np.from_dlpack(x, copy=True)
        np.testing.assert_array_equal(copy[-3:], np.arange(MIB - 3, MIB))
        del copy
    after = ad.memory_pool_stats()
    assert (after["hits"], after["misses"]) == (before["hits"], before["misses"])
    assert after["cached_bytes"] == 0 and after["limit"] == 0


def test_a_fork_child_starts_with_an_empty_pool():
    x = source(4 * MIB, start=3)
    kept = np.from_dlpack(x, copy=True)
    np.from_dlpack(x, copy=True)  # made and freed at once
    assert ad.memory_pool_stats()["cached_bytes"] == 4 * MIB
    with warnings.catch_warnings():
        # Python (DeprecationWarning) and JAX, when another test imported it (RuntimeWarning),
        # warn that forking a process with threads may deadlock; the child uses neither.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = os.fork()
    if pid == 0:
        status = 1
        try:
            stats = ad.memory_pool_stats()
            copy = np.from_dlpack(x, copy=True)
            ok = stats["cached_bytes"] == 0 and copy[-1] == 3 + MIB // 2 - 1 and kept[0] == 3
            del kept, copy  # `kept` was allocated before the fork: released, not cached
            ok = ok and ad.memory_pool_stats()["cached_bytes"] == 4 * MIB
            status = 0 if ok else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's pool is untouched.
    assert ad.memory_pool_stats()["cached_bytes"] == 4 * MIB


def test_bad_limits_are_refused():
    with pytest.raises(OverflowError):
        ad.set_memory_pool_limit(-1)
    with pytest.raises(TypeError):
        ad.set_memory_pool_limit("1 GiB")
    with pytest.raises(OverflowError):
        ad.set_memory_pool_decay_ms(-5)
