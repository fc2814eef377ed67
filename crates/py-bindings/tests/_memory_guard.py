"""A watchdog on the memory of the test process.

A test that makes the process grow without bound (a loader that reads ahead without limit, a
length taken from a hostile header and allocated) would otherwise grow until the kernel's
out-of-memory killer ends it, or ends another process of the machine, and pytest-xdist reports
only "node down". The guard samples the process's resident memory a few times a second; past the
limit it writes the running test's id, the resident memory and every Python thread's stack to
file descriptor 2 (which the suite does not capture) and ends the process with exit status 70,
while the machine still has memory to report it.

The limit is ``ARROW_DLPACK_TEST_RSS_LIMIT_GIB`` (a number of GiB), by default a third of the
machine's memory and at most 8 GiB: one test file alone stays under 2.5 GiB.
"""

import faulthandler
import os
import sys
import threading

_PAGE = os.sysconf("SC_PAGE_SIZE")
_GIB = 1 << 30
EXIT_STATUS = 70


def _total_memory():
    return os.sysconf("SC_PHYS_PAGES") * _PAGE


def limit_bytes():
    """The resident memory past which the process is ended."""
    stated = os.environ.get("ARROW_DLPACK_TEST_RSS_LIMIT_GIB")
    if stated:
        return int(float(stated) * _GIB)
    return min(8 * _GIB, _total_memory() // 3)


def resident_bytes():
    """The process's resident memory, from /proc/self/statm."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * _PAGE


def _report_and_exit(rss, limit):
    test = os.environ.get("PYTEST_CURRENT_TEST", "(between tests)")
    err = sys.__stderr__
    err.write(
        f"\n==> memory guard: pid {os.getpid()} holds {rss / _GIB:.2f} GiB resident, over its "
        f"limit of {limit / _GIB:.2f} GiB, in {test}; every Python thread's stack follows\n"
    )
    err.flush()
    faulthandler.dump_traceback(file=err, all_threads=True)
    err.flush()
    os._exit(EXIT_STATUS)


def _watch(limit, interval):
    while True:
        rss = resident_bytes()
        if rss > limit:
            _report_and_exit(rss, limit)
        # Sampled more often as the process nears its limit.
        threading.Event().wait(interval if rss < limit // 2 else interval / 10)


def start(interval=0.2):
    """Starts the watchdog thread (a daemon: it never keeps the process alive)."""
    thread = threading.Thread(
        target=_watch, args=(limit_bytes(), interval), name="memory-guard", daemon=True
    )
    thread.start()
    return thread
