"""Interpreter exit with loaders being made, iterated by other threads, or read by exit handlers.

Each case runs in a child interpreter: what is tested is how it ends (its status, its output),
and an abort there (CPython ending a thread inside the loader's native code while it finalizes)
must not take the suite with it.
"""

import signal
import subprocess
import sys
import time

_PRELUDE = """
import atexit, sys, threading, time
import pyarrow as pa
schema = pa.schema([("x", pa.int64())])
def endless():
    i = 0
    while True:
        yield pa.record_batch({"x": pa.array(range(i, i + 10), pa.int64())})
        i += 10
"""

# A daemon thread makes a loader whose source takes 20 s to open while another daemon thread
# iterates a loader over a generator; the main thread returns.
_SLOW_OPENING = _PRELUDE + """
import arrow_dlpack as ad
class SlowToOpen:
    def __arrow_c_stream__(self, requested_schema=None):
        time.sleep(20)
        return pa.table({"x": [1, 2, 3]}).__arrow_c_stream__(requested_schema)
def make():
    ad.batches(SlowToOpen(), 2)
def iterate():
    for _ in ad.batches(pa.RecordBatchReader.from_batches(schema, endless()), 10):
        pass
threading.Thread(target=make, daemon=True).start()
threading.Thread(target=iterate, daemon=True).start()
time.sleep(0.5)
print("main returns", flush=True)
"""


def test_ctrl_c_while_exit_waits_for_a_loader_being_made_still_stops_the_others_first():
    # The hook once waited for loaders being made before stopping any: Ctrl-C during that wait
    # left the generator's loader running into finalization, and the process aborted (7 of 8).
    for _ in range(3):
        child = subprocess.Popen(
            [sys.executable, "-c", _SLOW_OPENING],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert child.stdout.readline() == "main returns\n"
        time.sleep(1.5)  # inside the exit hook's wait for the loader being made
        child.send_signal(signal.SIGINT)
        started = time.monotonic()
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err[-2000:]
        assert "FATAL" not in err and "Fatal Python error" not in err, err[-2000:]
        # The generator loop's thread met the stop; the wait ended within its grace.
        assert "stopped at interpreter exit" in err
        assert "KeyboardInterrupt" in err
        assert time.monotonic() - started < 15


# `make` enters `ad.batches` and, inside it, looks up an attribute that takes 1 s: the exit hook
# starts meanwhile. The loader's source is a generator, read by its thread as soon as it is made.
_MADE_AS_EXIT_STARTS = _PRELUDE + """
import arrow_dlpack as ad
inside = threading.Event()
class Source:
    def __getattr__(self, name):
        if not inside.is_set():
            inside.set()
            time.sleep(1)
        raise AttributeError(name)
    def __arrow_c_stream__(self, requested_schema=None):
        reader = pa.RecordBatchReader.from_batches(schema, endless())
        return reader.__arrow_c_stream__(requested_schema)
def make():
    try:
        ad.batches(Source(), 2)
        print("made a loader after the exit hook ran", flush=True)
    except RuntimeError as error:
        print("refused:", error, flush=True)
threading.Thread(target=make, daemon=True).start()
inside.wait()
print("main returns", flush=True)
"""


def test_a_loader_asked_for_just_before_exit_is_waited_for_and_refused():
    # Its count once began after the check for exit, late in `ad.batches`: a call already past
    # the check was neither waited for nor refused, and its loader's thread read the generator
    # while the interpreter finalized (an abort).
    for _ in range(3):
        result = subprocess.run(
            [sys.executable, "-c", _MADE_AS_EXIT_STARTS], capture_output=True, text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert "FATAL" not in result.stderr, result.stderr[-2000:]
        lines = result.stdout.splitlines()
        assert lines[0] == "main returns"
        assert lines[1].startswith("refused: cannot start a loader at interpreter exit"), lines


# An exit handler registered before the package's (so run after it) reads a loader left open.
_READ_AFTER_THE_HOOK = _PRELUDE + """
def read_on():
    try:
        next(loader)
    except ValueError as error:
        print(type(error).__name__, error, flush=True)
atexit.register(read_on)
import arrow_dlpack as ad
loader = ad.batches(pa.RecordBatchReader.from_batches(schema, endless()), 10)
next(loader)
"""


def test_a_loader_the_exit_hook_closed_says_so_not_that_the_program_closed_it():
    result = subprocess.run(
        [sys.executable, "-c", _READ_AFTER_THE_HOOK], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(
        "ArrowDLPackValueError this loader was stopped at interpreter exit before its last batch"
    ), result.stdout


# A source that forks inside `ad.batches` (its `__arrow_c_stream__`): the child goes on with the
# same call, makes its loader there, reads it, and says how many loaders its exit hook would
# wait for as being made.
_FORKS_WHILE_MADE = _PRELUDE + """
import os
import arrow_dlpack as ad
from arrow_dlpack import _exit
class Forks:
    def __arrow_c_stream__(self, requested_schema=None):
        global child
        child = os.fork() == 0
        return pa.table({"x": list(range(10))}).__arrow_c_stream__(requested_schema)
child = False
loader = ad.batches(Forks(), 5)
rows = sum(len(batch["x"]) for batch in loader)
if child:
    print("child", rows, sum(_exit._OPENING.values()), flush=True)
    os._exit(0)
os.wait()
print("parent", rows, sum(_exit._OPENING.values()), flush=True)
"""


def test_a_child_forked_inside_ad_batches_counts_no_loader_being_made_once_its_call_returns():
    # The child's count of loaders being made was once reset to 0 at the fork, and the call
    # that forked then took it to -1: a later loader of that child counted as 0, not waited for.
    result = subprocess.run(
        [sys.executable, "-c", _FORKS_WHILE_MADE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(result.stdout.splitlines()) == ["child 10 0", "parent 10 0"], result.stdout
