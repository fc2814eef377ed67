"""Interpreter exit and the loaders still open: every loader is registered here as it is made,
and an ``atexit`` hook stops and closes them before the interpreter finalizes.

A loader's thread that reads a Python source (a ``RecordBatchReader`` over a generator) takes
the GIL, and a thread that takes it during finalization is ended by CPython with
``pthread_exit``, whose forced unwinding through Rust frames aborts the process; so does a
thread that is inside the loader's native code, the GIL released, when the interpreter
finalizes. The hook therefore leaves no loader thread running and no thread inside a loader's
``next()``, and no loader starts after it."""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

#: The loaders made and not yet collected (their native ``_Batches``).
_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()

#: Set by the exit hook: no loader starts after it (its thread could still be reading a Python
#: source when the interpreter finalizes).
_EXITING = False

#: Loaders being made (by any thread) and not yet in ``_LIVE``: the exit hook waits for them.
_OPENING = 0
_OPENING_LOCK = threading.Lock()


def _forget_openings() -> None:
    """In a child of ``fork``: the threads that were making loaders are not there, so their
    count (and its lock, which one of them may have held) does not carry over."""
    global _OPENING, _OPENING_LOCK
    _OPENING = 0
    _OPENING_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_openings)

#: The longest wait at exit, in all, for the loaders' threads to end.
_EXIT_WAIT = 30.0


def _exiting() -> RuntimeError:
    """The error of a loader asked for while the interpreter exits."""
    return RuntimeError(
        "cannot start a loader at interpreter exit: its thread could still be reading its "
        "source when the interpreter finalizes"
    )


def refuse_if_exiting() -> None:
    """Raises ``RuntimeError`` once the exit hook has run; called before anything native runs
    (a daemon thread's loop starting its next epoch)."""
    if _EXITING:
        raise _exiting()


@contextmanager
def opening() -> Iterator[None]:
    """Counts a loader being made until it is registered (or has failed): native code that
    runs without the GIL, which the exit hook waits for."""
    global _OPENING
    with _OPENING_LOCK:
        _OPENING += 1
    try:
        yield
    finally:
        with _OPENING_LOCK:
            _OPENING -= 1


def register(inner: Any) -> None:
    """Registers a native loader for the exit hook; one made while the hook ran (which may have
    missed it) is closed again, and ``RuntimeError`` raised."""
    _LIVE.add(inner)
    if _EXITING:
        inner.close()
        raise _exiting()


def close_live_loaders() -> None:
    """Stops and closes every loader still open, with the GIL released while it waits.

    Every loader's background thread is asked to stop first, then each is waited for (at most
    ``_EXIT_WAIT`` seconds in all, Ctrl-C ends the wait) to finish the read it is in and drop its
    source, and closed. A loader whose source never returns from its call is left after the
    wait, so that exit does not hang; one whose ``next()`` runs in another (daemon) thread is
    closed once that thread leaves ``next()``, which raises that the loader was stopped rather
    than end the loop as if its epoch were whole."""
    global _EXITING
    _EXITING = True
    deadline = time.monotonic() + _EXIT_WAIT
    while _OPENING > 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    loaders = list(_LIVE)
    for loader in loaders:
        try:
            loader._stop_at_exit(0.0)
        except Exception:  # noqa: BLE001 - at exit, nothing more can be done for it
            pass
    for loader in loaders:
        try:
            # True once its thread has ended and no thread is inside its `next()`.
            if loader._stop_at_exit(max(0.0, deadline - time.monotonic())):
                loader.close()
        except Exception:  # noqa: BLE001 - at exit, nothing more can be done for it
            pass


atexit.register(close_live_loaders)
