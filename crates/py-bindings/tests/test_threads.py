"""Threads: exports and imports from 8 Python threads at once, and deleters run from the thread
that drops the last reference, which is not the thread that imported."""

import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad


# `conftest.py` loads the helper by path and registers it (the tests are not a package).
import _dlpack_ctypes as dl  # noqa: E402

THREADS = 8
ITERATIONS = 1000


def _worker(worker, barrier, shared_array, shared_tensor, shared_fixed):
    """One thread's mix of exports and imports; returns its hand-built tensors for counting."""
    barrier.wait()
    managed_tensors = []
    for i in range(ITERATIONS):
        seed = worker * 1_000_000 + i
        # Export of objects shared by every thread.
        exported = np.from_dlpack(shared_array)
        assert exported[0] == 0 and exported[-1] == 999
        assert np.from_dlpack(shared_tensor)[2, 3] == 11.0
        assert np.from_dlpack(shared_fixed)[1, 1, 0] == 6
        capsule = shared_tensor.__dlpack__(max_version=(1, 3) if i % 2 else None)
        assert np.from_dlpack(ad.Tensor.from_dlpack(capsule))[1, 0] == 4.0
        del capsule
        # Export of this thread's own Arrow data.
        own = np.arange(seed, seed + 16, dtype=np.int64)
        assert np.from_dlpack(ad.array(pa.array(own)))[15] == seed + 15
        # Import of this thread's own numpy data, a strided view.
        view = own.reshape(4, 4)[::-1, ::2]
        tensor = ad.Tensor.from_dlpack(view)
        assert tensor.strides == (-32, 16)
        np.testing.assert_array_equal(np.from_dlpack(tensor), view)
        # Import of a hand-built tensor with a counting deleter; every other one malformed.
        values = (float(seed % 1000), float(i), float(worker))
        shape = (3,) if i % 2 == 0 else (-3,)
        managed = dl.ManagedTensor(dl.float32_spec(values, shape=shape))
        managed_tensors.append(managed)
        capsule = managed.capsule()
        if i % 2 == 0:
            np.testing.assert_array_equal(
                np.from_dlpack(ad.Tensor.from_dlpack(capsule)), np.float32(values)
            )
        else:
            with pytest.raises(ValueError, match=r"shape\[0\] is -3"):
                ad.Tensor.from_dlpack(capsule)
        del capsule
        assert managed.deleted == 1
    return managed_tensors


def test_exports_and_imports_from_eight_threads_at_once():
    shared_array = ad.array(pa.array(np.arange(1000, dtype=np.int64)))
    shared_tensor = ad.Tensor.from_dlpack(np.arange(12, dtype=np.float64).reshape(3, 4))
    cells = np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    shared_fixed = ad.FixedShapeTensorArray.from_dlpack(cells)
    barrier = threading.Barrier(THREADS)
    with ThreadPoolExecutor(THREADS) as pool:
        futures = [
            pool.submit(_worker, worker, barrier, shared_array, shared_tensor, shared_fixed)
            for worker in range(THREADS)
        ]
        results = [future.result(timeout=300) for future in futures]
    managed = [tensor for result in results for tensor in result]
    assert len(managed) == THREADS * ITERATIONS
    assert [tensor.deleted for tensor in managed] == [1] * len(managed)
    assert dl.STRAY_DELETES == []
    # The shared objects are intact after the storm.
    np.testing.assert_array_equal(np.from_dlpack(shared_array), np.arange(1000))
    np.testing.assert_array_equal(np.from_dlpack(shared_tensor), np.arange(12.0).reshape(3, 4))


def test_deleters_run_in_the_worker_that_drops_the_last_reference():
    main = threading.get_ident()
    producers = [dl.Producer(dl.float32_spec((k, k + 1.0, k + 2.0))) for k in range(THREADS)]
    handoff = [queue.Queue() for _ in range(THREADS)]
    for producer, box in zip(producers, handoff):
        tensor = ad.Tensor.from_dlpack(producer)
        # The last reference lives in a numpy re-export, handed to the worker with the tensor.
        box.put((tensor, np.from_dlpack(tensor)))
        del tensor
    barrier = threading.Barrier(THREADS)

    def drop(index):
        objects = handoff[index].get()
        barrier.wait()
        tensor, reexport = objects
        del objects
        assert reexport[2] == index + 2.0
        del tensor
        assert producers[index].deleted == 0
        del reexport
        assert producers[index].deleted == 1
        return threading.get_ident()

    with ThreadPoolExecutor(THREADS) as pool:
        workers = list(pool.map(drop, range(THREADS)))
    for producer, worker in zip(producers, workers):
        assert producer.deleted == 1
        assert producer.tensors[0].deleter_threads == [worker]
        assert worker != main


def test_deleters_run_in_the_main_thread_for_tensors_imported_by_workers():
    main = threading.get_ident()

    def load(index):
        producer = dl.Producer(dl.float32_spec((index, 0.0, 0.0)))
        array = ad.Array.from_dlpack(producer)
        return producer, array, threading.get_ident()

    with ThreadPoolExecutor(THREADS) as pool:
        loaded = list(pool.map(load, range(THREADS)))
    importers = {worker for _, _, worker in loaded}
    assert main not in importers
    for index, (producer, array, _) in enumerate(loaded):
        assert array.to_pylist() == [index, 0.0, 0.0]
        assert producer.deleted == 0
    producers = [producer for producer, _, _ in loaded]
    del loaded, array
    for producer in producers:
        assert producer.deleted == 1
        assert producer.tensors[0].deleter_threads == [main]


def test_deleter_called_while_other_threads_import_counts_each_tensor_once():
    """A deleter that itself takes time (it calls back into Python) does not block or double up
    with imports running in other threads."""
    started = threading.Event()
    seen = []

    def slow_delete(tensor):
        seen.append(threading.get_ident())
        started.set()

    producers = [dl.Producer(dl.float32_spec(), on_delete=slow_delete) for _ in range(THREADS * 8)]

    def churn(chunk):
        total = 0
        for producer in chunk:
            tensor = ad.Tensor.from_dlpack(producer)
            total += int(np.from_dlpack(tensor).sum())
            del tensor
        return total

    chunks = [producers[k::THREADS] for k in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        totals = list(pool.map(churn, chunks))
    assert totals == [15 * len(chunk) for chunk in chunks]
    assert started.is_set()
    assert len(seen) == len(producers)
    assert [producer.deleted for producer in producers] == [1] * len(producers)


def _ticks_during(copy):
    """Runs `copy` while another thread appends a timestamp every half millisecond (sleeping, so
    releasing the GIL, in between); returns how many it appended while `copy` ran."""
    import time

    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    thread = threading.Thread(target=tick)
    thread.start()
    time.sleep(0.05)
    start = time.perf_counter()
    copy()
    end = time.perf_counter()
    stop.set()
    thread.join()
    return sum(start < t < end for t in ticks), end - start


@pytest.mark.parametrize(
    "what", ["export_copy_true", "import_copy_true", "table_to_tensor"]
)
def test_large_copies_let_other_threads_run(what):
    # 32 MiB moved by each copy: a thread that needs the GIL could not tick while it ran if the
    # copy held the GIL.
    view = np.arange(8_000_000, dtype=np.float64)[::2].reshape(2_000, 2_000)
    tensor = ad.Tensor.from_dlpack(view)
    table = pa.table({f"c{i}": np.arange(1_000_000, dtype=np.float64) for i in range(4)})
    copy = {
        "export_copy_true": lambda: np.from_dlpack(tensor, copy=True),
        "import_copy_true": lambda: ad.Tensor.from_dlpack(tensor.__dlpack__(max_version=(1, 3)), copy=True),
        "table_to_tensor": lambda: ad.Tensor.from_arrow(table),
    }[what]
    # Holding the GIL, a copy would allow at most one tick (a thread switch between taking the
    # start time and entering the copy); released, a tick lands every half millisecond or so. A
    # copy of a few milliseconds on a busy 2-core machine can still see the ticking thread
    # descheduled throughout, so up to five copies are tried: any one with 3 ticks or more shows
    # the GIL released, and a copy that held it could never show that many.
    attempts = []
    for _ in range(5):
        ticks, seconds = _ticks_during(copy)
        attempts.append(f"{ticks} ticks in {seconds * 1000:.1f} ms")
        if ticks >= 3:
            break
    assert ticks >= 3, "no copy let another thread run: " + ", ".join(attempts)


def test_a_batch_that_is_ready_is_taken_without_letting_another_thread_run():
    # A thread that counts while it holds the GIL, and a switch interval of half a second: if
    # `next()` let go of the GIL for a batch that is already waiting, the counter would move
    # (and taking the GIL back would wait for the counter's interval).
    import sys
    import time

    table = pa.table({"x": np.arange(64)})
    loader = ad.batches(table, 8, prefetch=4)
    counter, stop = [0], threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        # The first batch arrives while this thread sleeps (the counter has not started).
        time.sleep(0.2)
        thread = threading.Thread(target=count)
        thread.start()
        before = counter[0]
        batch = next(loader)
        after = counter[0]
        stop.set()
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert np.from_dlpack(batch["x"]).tolist() == list(range(8))
    assert after == before
