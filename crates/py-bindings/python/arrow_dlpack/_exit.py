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
from typing import Any, Dict, Iterator

#: The loaders made and not yet collected (their native ``_Batches``).
_LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()

#: Set by the exit hook: no loader starts after it (its thread could still be reading a Python
#: source when the interpreter finalizes).
_EXITING = False

#: Loaders being made and not yet in ``_LIVE``, by the thread making them: the exit hook waits
#: for them.
_OPENING: Dict[int, int] = {}
_OPENING_LOCK = threading.Lock()


def _forget_openings() -> None:
    """In a child of ``fork``: the other threads that were making loaders are not there, so
    their counts (and the lock, which one of them may have held) do not carry over; the forking
    thread's own (a source that forked inside ``ad.batches``) does, and ends as its call does."""
    global _OPENING, _OPENING_LOCK
    me = threading.get_ident()
    _OPENING = {me: _OPENING[me]} if me in _OPENING else {}
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


@contextmanager
def opening() -> Iterator[None]:
    """Counts a loader being made, from its first check to its registration (or failure):
    native code that may run without the GIL, which the exit hook waits for. Raises
    ``RuntimeError`` once the exit hook has run, before anything native runs (a daemon thread's
    loop starting its next epoch); the count and the check share a lock with the hook, so that
    a loader is either refused or waited for."""
    me = threading.get_ident()
    with _OPENING_LOCK:
        if _EXITING:
            raise _exiting()
        _OPENING[me] = _OPENING.get(me, 0) + 1
    try:
        yield
    finally:
        with _OPENING_LOCK:
            left = _OPENING.get(me, 1) - 1
            if left:
                _OPENING[me] = left
            else:
                _OPENING.pop(me, None)


def register(inner: Any) -> None:
    """Registers a native loader for the exit hook; one made while the hook ran (which may have
    missed it) is closed again, and ``RuntimeError`` raised."""
    _LIVE.add(inner)
    if _EXITING:
        inner.close()
        raise _exiting()


#: After an exception ended the wait (Ctrl-C, a signal handler's), the longest further wait for
#: the stopped loaders' threads, most of which end within milliseconds of being stopped.
_GRACE = 1.0


def _stop_all(stopped: "weakref.WeakSet[Any]") -> None:
    """Asks every loader not yet asked (those registered since included) to stop, without
    waiting."""
    for loader in list(_LIVE):
        if loader not in stopped:
            stopped.add(loader)
            try:
                loader._stop_at_exit(0.0)
            except Exception:  # noqa: BLE001 - at exit, nothing more can be done for it
                pass


def _wait_and_close(stopped: "weakref.WeakSet[Any]", deadline: float) -> None:
    """Waits until ``deadline`` at most for the loaders being made, stopping each as it is
    registered, then for every stopped loader's thread to end and for threads inside its
    ``next()`` to leave it, and closes each that did."""
    while _OPENING and time.monotonic() < deadline:
        time.sleep(0.005)
        _stop_all(stopped)
    _stop_all(stopped)
    for loader in list(_LIVE):
        # True once its thread has ended and no thread is inside its `next()`.
        if loader._stop_at_exit(max(0.0, deadline - time.monotonic())):
            try:
                loader.close()
            except Exception:  # noqa: BLE001 - at exit, nothing more can be done for it
                pass


def close_live_loaders() -> None:
    """Stops and closes every loader still open, with the GIL released while it waits.

    Every loader's background thread is asked to stop first, then the hook waits (at most
    ``_EXIT_WAIT`` seconds in all) for loaders that other threads are making (each is stopped
    as it is registered, and a loader asked for after this point is refused), and for each
    loader to finish the read it is in and drop its source, and closes it. A loader whose
    source never returns from its call is left after the wait, so that exit does not hang; one
    whose ``next()`` runs in another (daemon) thread is closed once that thread leaves
    ``next()``, which raises that the loader was stopped rather than end the loop as if its
    epoch were whole. An exception raised during the wait (Ctrl-C's ``KeyboardInterrupt``, a
    signal handler's) ends it: the loaders are still stopped, given at most ``_GRACE`` seconds
    more, and the exception goes on (CPython prints an exception of an ``atexit`` hook; the
    exit status stays that of the exit under way)."""
    global _EXITING
    with _OPENING_LOCK:
        _EXITING = True
    stopped: "weakref.WeakSet[Any]" = weakref.WeakSet()
    _stop_all(stopped)
    try:
        _wait_and_close(stopped, time.monotonic() + _EXIT_WAIT)
    except BaseException:
        _stop_all(stopped)
        try:
            _wait_and_close(stopped, time.monotonic() + _GRACE)
        except BaseException:  # noqa: BLE001 - a second interrupt ends the grace as well
            pass
        raise


atexit.register(close_live_loaders)
