"""Ctrl-C while ``next()`` of a loader waits, and interpreter exit with a loader left open: each
in a child process, since what is tested is a signal's delivery, the exit status and what the
interpreter prints as it finalizes."""

import subprocess
import sys

import pytest

# A loader (batches of BATCH rows) behind a Python generator that yields one record batch of 10
# rows, then waits up to WAIT seconds, in sleeps of SLICE (so that the test can end the wait),
# before the next; with INTERRUPT, a SIGINT arrives after half a second.
_SLOW_SOURCE = """
import os, signal, threading, time
# Ctrl-C raises KeyboardInterrupt even where the suite was started with SIGINT ignored (in the
# background of a shell), which the child inherits.
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np, pyarrow as pa, arrow_dlpack as ad

release = threading.Event()
schema = pa.schema([("x", pa.int64())])

def slow():
    yield pa.record_batch({"x": np.arange(10)})
    deadline = time.monotonic() + WAIT
    while not release.is_set() and time.monotonic() < deadline:
        time.sleep(SLICE)
    yield pa.record_batch({"x": np.arange(10, 20)})

loader = ad.batches(pa.RecordBatchReader.from_batches(schema, slow()), BATCH)
if INTERRUPT:
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
"""


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ctrl_c_interrupts_next_waiting_for_a_slow_source_and_the_loader_stays_usable():
    script = (
        "WAIT, SLICE, BATCH, INTERRUPT = 60, 0.02, 15, True\n"
        + _SLOW_SOURCE
        + """
try:
    next(loader)
except KeyboardInterrupt:
    # The source still waits: the interrupt did not wait for its batch.
    print("interrupted while the source waits:", not release.is_set(), flush=True)
release.set()
batch = next(loader)
print("next batch:", np.from_dlpack(batch["x"]).tolist(), flush=True)
print("rest:", [np.from_dlpack(b["x"]).tolist() for b in loader], flush=True)
"""
    )
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "interrupted while the source waits: True",
        f"next batch: {list(range(15))}",
        f"rest: {[list(range(15, 20))]}",
    ], result.stderr


def test_exit_after_ctrl_c_with_a_loader_left_open_inside_a_python_source_does_not_abort():
    # The loader's thread is inside the generator (sleeping, the GIL released) when the
    # interpreter exits; without the loaders closed at exit, it takes the GIL back during
    # finalization, and CPython's forced unwinding of that thread aborts the process.
    script = (
        "WAIT, SLICE, BATCH, INTERRUPT = 3, 3, 15, True\n"
        + _SLOW_SOURCE
        + """
try:
    next(loader)
except KeyboardInterrupt:
    print("interrupted", flush=True)
print("exiting", flush=True)
"""
    )
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert "FATAL" not in result.stderr
    assert result.stdout.splitlines() == ["interrupted", "exiting"], result.stderr


def test_exit_with_a_loader_prefetching_from_a_python_source_does_not_abort():
    script = (
        "WAIT, SLICE, BATCH, INTERRUPT = 2, 2, 10, False\n"
        + _SLOW_SOURCE
        + """
print("first:", np.from_dlpack(next(loader)["x"]).tolist()[:3], flush=True)
time.sleep(0.2)
"""
    )
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert "FATAL" not in result.stderr
    assert result.stdout.splitlines() == ["first: [0, 1, 2]"], result.stderr


DAEMON = """
import threading, time, pyarrow as pa, arrow_dlpack as ad
schema = pa.schema([("x", pa.float32())])
def rows():
    while True:
        time.sleep(0.01)
        yield pa.record_batch([pa.array([1.0] * 10, pa.float32())], schema=schema)
def read():
    for batch in ad.batches(pa.RecordBatchReader.from_batches(schema, rows()), 5):
        pass
threading.Thread(target=read, daemon=True).start()
time.sleep(0.5)
print("main done", flush=True)
"""


def test_exit_while_a_daemon_thread_iterates_a_python_source_does_not_abort():
    # The loader cannot be closed from the exit hook (its next() runs in the daemon thread):
    # its background thread is stopped and waited for instead, before CPython finalizes.
    for _ in range(3):
        result = subprocess.run([sys.executable, "-c", DAEMON], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "Fatal Python error" not in result.stderr
        assert result.stdout.splitlines() == ["main done"]


def test_ctrl_c_interrupts_the_planning_of_a_large_uneven_epoch_of_local_files(tmp_path):
    """A Parquet file of 33 row groups of 2**23 constant rows (277M rows in 1 MB) over 2 ranks,
    shuffled: the epoch is planned by rows, and listing the shard's 138M rows takes tens of
    seconds on the debug build. A SIGINT 2 s in raises KeyboardInterrupt at once."""
    path = tmp_path / "t.parquet"
    script = f"""
import os, signal, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np, pyarrow as pa, pyarrow.parquet as pq, arrow_dlpack as ad
with pq.ParquetWriter({str(path)!r}, pa.schema([("v", pa.int8())]), compression="zstd") as writer:
    chunk = pa.table({{"v": np.zeros(2**23, dtype=np.int8)}})
    for _ in range(33):
        writer.write_table(chunk, row_group_size=2**23)
threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
started = time.monotonic()
try:
    ad.batches({str(path)!r}, 1024, rank=0, world_size=2, columns=["v"], shuffle=True, seed=1)
    print("planned", flush=True)
except KeyboardInterrupt:
    print("interrupted after", round(time.monotonic() - started), flush=True)
os._exit(0)  # the planning thread, still listing, is not waited for
"""
    done = _run(script)
    assert done.returncode == 0, done.stderr[-2000:]
    words = done.stdout.split()
    assert words[:2] == ["interrupted", "after"] and int(words[2]) <= 5, done.stdout


CLOSE_SLOW = """
import threading, time, pyarrow as pa, arrow_dlpack as ad
schema = pa.schema([("x", pa.int64())])
calls = []
def rows():
    while True:
        calls.append(time.monotonic())
        time.sleep(0.2)
        yield pa.record_batch([pa.array([1])], schema=schema)
loader = ad.batches(pa.RecordBatchReader.from_batches(schema, rows()), 1000)
time.sleep(1.0)
closing = len(calls)
loader.close()
time.sleep(0.5)
print(len(calls) - closing)
"""


def test_close_over_a_slow_python_reader_asks_it_for_no_more_rows():
    # A batch of 1,000 one-row record batches would take the generator 200 s: close() ends the
    # call in flight and asks for no further record batch (at most the one in flight counts).
    result = subprocess.run([sys.executable, "-c", CLOSE_SLOW], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.strip()) <= 1, result.stdout


def test_the_exit_hooks_stop_takes_any_timeout_without_a_panic():
    import numpy as np
    import pyarrow as pa

    import arrow_dlpack as ad

    # Not iterated, the loader's thread may have filled its queue and wait for a consumer
    # (a loader at exit is stopped so only while another thread's next() consumes): only waits
    # of no time here, then every timeout once the thread has ended.
    loader = ad.batches(pa.table({"x": np.arange(10)}), 4)
    for timeout in (float("nan"), float("inf"), -1.0, 0.0):
        assert loader._inner._stop_at_exit(timeout) in (True, False)
    loader.close()
    for timeout in (float("nan"), float("inf"), -1.0, 0.0, 1e300):
        assert loader._inner._stop_at_exit(timeout) in (True, False)


def test_the_exit_hooks_stop_ends_a_thread_that_waits_for_room_in_a_full_queue():
    import time

    import numpy as np
    import pyarrow as pa

    import arrow_dlpack as ad

    # One batch taken, then none: the loader's thread fills its queue of two and waits for room
    # that no consumer makes. The stop at exit reaches it there (it used to wait for the
    # consumer, and the hook waited out its whole timeout).
    loader = ad.batches(pa.table({"x": np.arange(100)}), 1, prefetch=2)
    assert int(np.from_dlpack(next(loader)["x"])[0]) == 0
    time.sleep(0.2)  # room for the thread to fill the queue and wait
    assert loader._inner._stop_at_exit(60.0) is True
    loader.close()


def test_ctrl_c_as_a_batch_arrives_keeps_the_batch_for_the_next_call():
    # Each record batch comes 100 ms after the last, and a SIGINT 3 ms before it: the interrupt
    # lands while `next()` waits, or as the batch arrives. Either way the batch is kept: the
    # loop gets every id once, and the loader counts only the batches it handed out.
    script = """
import os, signal, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np, pyarrow as pa, arrow_dlpack as ad

schema = pa.schema([("id", pa.int64())])
N = 10

def source():
    for i in range(N):
        threading.Timer(0.097, os.kill, (os.getpid(), signal.SIGINT)).start()
        time.sleep(0.1)
        yield pa.record_batch([pa.array([i], pa.int64())], schema=schema)

loader = ad.batches(pa.RecordBatchReader.from_batches(schema, source()), 1, prefetch=1)
got, interrupts = [], 0
while True:
    try:
        batch = next(loader)
    except StopIteration:
        break
    except KeyboardInterrupt:
        interrupts += 1
        continue
    got.append(int(np.from_dlpack(batch["id"])[0]))
print("ids:", got, flush=True)
print("interrupted:", interrupts > 0, "rows handed out:", loader.rows_yielded, flush=True)
"""
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"ids: {list(range(10))}",
        "interrupted: True rows handed out: 10",
    ], result.stderr


def test_a_hail_of_ctrl_c_loses_no_batch_and_counts_only_what_the_loop_got():
    # SIGINT every 0.2 to 3 ms while the loop takes 400 batches of a generator (2 ms each),
    # converted to torch tensors; a handler that raises only inside `next()`, as the default one
    # would there. Wherever an interrupt lands (waiting, as the batch arrives, while it is made
    # or converted), the batch is handed out again by the next call: every row once, in order,
    # and the loader's count and saved state agree with what the loop got.
    script = """
import os, random, signal, threading, time
import numpy as np, pyarrow as pa, arrow_dlpack as ad

BATCHES, ROWS = 400, 4
schema = pa.schema([("x", pa.int64())])

def source():
    for i in range(BATCHES):
        time.sleep(0.002)
        yield pa.record_batch([pa.array(np.arange(i * ROWS, (i + 1) * ROWS))], schema=schema)

armed, stop = [False], threading.Event()

def handler(number, frame):
    if armed[0]:
        raise KeyboardInterrupt

def shooter():
    while not stop.is_set():
        time.sleep(random.uniform(0.0002, 0.003))
        os.kill(os.getpid(), signal.SIGINT)

signal.signal(signal.SIGINT, handler)
loader = ad.batches(pa.RecordBatchReader.from_batches(schema, source()), ROWS, format="torch")
threading.Thread(target=shooter, daemon=True).start()
got, interrupts, agree = [], 0, True
while True:
    armed[0] = True
    try:
        batch = next(loader)
    except KeyboardInterrupt:
        armed[0] = False
        interrupts += 1
        # What the loader counts is what the loop got, and its state resumes right there.
        agree &= loader.rows_yielded == len(got)
        continue
    except StopIteration:
        break
    finally:
        armed[0] = False
    got.extend(batch["x"].tolist())
stop.set()
print("rows in order:", got == list(range(BATCHES * ROWS)), flush=True)
print("counts agreed:", agree and loader.rows_yielded == len(got), flush=True)
print("interrupted:", interrupts > 0, flush=True)
"""
    result = _run(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "rows in order: True",
        "counts agreed: True",
        "interrupted: True",
    ], result.stderr


def test_a_signal_handler_raising_any_exception_loses_no_batch():
    # SIGALRM every 0.3 ms, its handler raising TimeoutError (or SystemExit, as a SIGTERM
    # handler of a preempted job does): wherever it lands, the batch in flight is kept for the
    # next call, so the loop gets every row once and the loader counts only those.
    script = """
import signal, sys
import numpy as np, pyarrow as pa, arrow_dlpack as ad
exc = {"timeout": TimeoutError, "exit": SystemExit}[sys.argv[1]]
armed = [False]
def handler(*args):
    # Once per try: raised into the loop's own `except` it would end the script.
    if armed[0]:
        armed[0] = False
        raise exc("signal")
signal.signal(signal.SIGALRM, handler)
n = 50_000
loader = ad.batches(pa.table({"id": np.arange(n, dtype=np.int64)}), 100, prefetch=64, format=sys.argv[2])
got, interrupts = [], 0
signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
while True:
    try:
        armed[0] = True
        for batch in loader:
            got.append(batch)
            armed[0] = True
        break
    except exc:
        interrupts += 1
armed[0] = False
signal.setitimer(signal.ITIMER_REAL, 0, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
rows = sorted(int(v) for b in got for v in np.asarray(b["id"]).tolist())
print(interrupts > 0, rows == list(range(n)), loader.rows_yielded == n, flush=True)
"""
    for exception, format in (("timeout", "torch"), ("exit", "numpy")):
        result = subprocess.run(
            [sys.executable, "-c", script, exception, format],
            capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.split() == ["True", "True", "True"], (exception, result.stdout)


def test_a_loop_stopped_at_exit_raises_and_no_loader_starts_after_the_hook():
    # A daemon thread runs epochs over a Python generator when the main thread returns: the
    # exit hook stops the loader it iterates, and its loop gets an error instead of ending as
    # if the epoch were whole; a next epoch's loader would be refused (its thread would read the
    # generator while the interpreter finalizes, which aborts the process), as below.
    script = """
import threading, time
import numpy as np, pyarrow as pa, arrow_dlpack as ad
schema = pa.schema([("x", pa.int64())])
def rows():
    for i in range(10**9):
        yield pa.record_batch([pa.array(np.arange(100))], schema=schema)
def epochs():
    while True:
        try:
            for batch in ad.batches(pa.RecordBatchReader.from_batches(schema, rows()), 500):
                pass
        except Exception as error:
            print(type(error).__name__, str(error).split(":")[0], flush=True)
            if isinstance(error, RuntimeError):
                return
threading.Thread(target=epochs, daemon=True).start()
time.sleep(1.0)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[:1] == [
        "ArrowDLPackValueError this loader was stopped at interpreter exit before its last batch",
    ], result.stdout + result.stderr[-2000:]
    import numpy as np
    import pyarrow as pa

    import arrow_dlpack as ad
    import arrow_dlpack._exit as exit_hook

    exit_hook._EXITING = True
    try:
        with pytest.raises(RuntimeError, match="cannot start a loader at interpreter exit"):
            ad.batches(pa.table({"x": np.arange(10)}), 4)
    finally:
        exit_hook._EXITING = False


def test_exit_waits_a_bounded_time_for_a_source_stuck_in_its_call():
    # The generator blocks forever; the main thread took a batch and returns. The exit hook
    # stops the loader and waits at most its bound (shortened here) instead of hanging.
    script = """
import threading
import pyarrow as pa, arrow_dlpack as ad, arrow_dlpack._exit as exit_hook
exit_hook._EXIT_WAIT = 1.0
schema = pa.schema([("x", pa.int64())])
never = threading.Event()
def rows():
    yield pa.record_batch([pa.array([1])], schema=schema)
    never.wait()
    yield pa.record_batch([pa.array([2])], schema=schema)
loader = ad.batches(pa.RecordBatchReader.from_batches(schema, rows()), 1, prefetch=1)
print(next(loader)["x"].shape, flush=True)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "(1,)", result.stdout


def test_a_loader_dropped_on_its_own_thread_raises_no_panic():
    # The generator drops the last reference to the loader that reads it: the loader's drop
    # then runs on its own background thread, which must not join itself.
    script = """
import gc, time
import numpy as np, pyarrow as pa, arrow_dlpack as ad
schema = pa.schema([("id", pa.int64())])
holder = {}
def rows():
    for start in range(0, 10**6, 100):
        if start == 1000:
            holder.clear()
        yield pa.record_batch([pa.array(np.arange(start, start + 100))], schema=schema)
loader = ad.batches(pa.RecordBatchReader.from_batches(schema, rows()), 100, prefetch=64)
holder["loader"] = loader
first = next(loader)
del loader
time.sleep(1.0)
gc.collect()
print("ok", flush=True)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "PanicException" not in result.stderr and "panicked" not in result.stderr, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_child_forked_while_a_loader_is_made_exits_at_once():
    # Another thread is making a loader (counted by the exit hook) when the process forks: the
    # child's exit hook must not wait for a loader that no thread of the child is making.
    script = """
import os, threading, time
import arrow_dlpack._exit as exit_hook
exit_hook._EXIT_WAIT = 20.0
def make():
    with exit_hook.opening():
        time.sleep(3.0)
threading.Thread(target=make, daemon=True).start()
time.sleep(0.5)
pid = os.fork()
if pid == 0:
    started = time.monotonic()
    exit_hook.close_live_loaders()
    print(f"{time.monotonic() - started < 2.0}", flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "True", result.stdout + result.stderr[-2000:]
