"""The ABI and the registry of :mod:`_arrow_c_ctypes` (which re-exports everything here): the
ctypes structs of the Arrow C Data Interface and C Stream Interface, the C API calls the
producers use, and the one registry whose callbacks count every release.

See :mod:`_arrow_c_ctypes` for the ownership rules these callbacks follow.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import Any, Callable, Optional

# --- The ABI (Arrow C Data Interface and C Stream Interface) ------------------------------------


# Every pointer field is a raw address (`c_void_p`), so that NULL, garbage and foreign callbacks
# can be stored as they are.
class ArrowSchema(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_void_p),  # const char*
        ("name", ctypes.c_void_p),  # const char*
        ("metadata", ctypes.c_void_p),  # const char*
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),  # struct ArrowSchema**
        ("dictionary", ctypes.c_void_p),  # struct ArrowSchema*
        ("release", ctypes.c_void_p),  # void (*)(struct ArrowSchema*)
        ("private_data", ctypes.c_void_p),
    ]


class ArrowArray(ctypes.Structure):
    _fields_ = [
        ("length", ctypes.c_int64),
        ("null_count", ctypes.c_int64),
        ("offset", ctypes.c_int64),
        ("n_buffers", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("buffers", ctypes.c_void_p),  # const void**
        ("children", ctypes.c_void_p),  # struct ArrowArray**
        ("dictionary", ctypes.c_void_p),  # struct ArrowArray*
        ("release", ctypes.c_void_p),  # void (*)(struct ArrowArray*)
        ("private_data", ctypes.c_void_p),
    ]


class ArrowArrayStream(ctypes.Structure):
    _fields_ = [
        ("get_schema", ctypes.c_void_p),  # int (*)(struct ArrowArrayStream*, struct ArrowSchema*)
        ("get_next", ctypes.c_void_p),  # int (*)(struct ArrowArrayStream*, struct ArrowArray*)
        ("get_last_error", ctypes.c_void_p),  # const char* (*)(struct ArrowArrayStream*)
        ("release", ctypes.c_void_p),  # void (*)(struct ArrowArrayStream*)
        ("private_data", ctypes.c_void_p),
    ]


# The layouts of the specification on 64-bit platforms, asserted rather than trusted.
assert ctypes.sizeof(ArrowSchema) == 72 and ArrowSchema.release.offset == 56
assert ctypes.sizeof(ArrowArray) == 80 and ArrowArray.release.offset == 64
assert ctypes.sizeof(ArrowArrayStream) == 40 and ArrowArrayStream.release.offset == 24

# Schema flags.
DICTIONARY_ORDERED = 1
NULLABLE = 2
MAP_KEYS_SORTED = 4

# errno values of the C stream interface (the same numbers on Linux, macOS and Windows).
EIO = 5
EINVAL = 22
ENOMEM = 12

# --- The C API used ------------------------------------------------------------------------------

_Release = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_GetSchema = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GetNext = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GetLastError = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# Function objects of our own (indexing `pythonapi` makes a fresh one), so that other test code
# setting `argtypes` on the shared ones cannot change these.
_PyCapsule_New = ctypes.pythonapi["PyCapsule_New"]
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, _CapsuleDestructor]

_PyCapsule_GetName = ctypes.pythonapi["PyCapsule_GetName"]
_PyCapsule_GetName.restype = ctypes.c_char_p
_PyCapsule_GetName.argtypes = [ctypes.c_void_p]

_PyCapsule_GetPointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Capsule names; the buffers live as long as the module, as the capsules' name pointers must.
_NAMES = {
    name: ctypes.create_string_buffer(name)
    for name in (b"arrow_schema", b"arrow_array", b"arrow_array_stream")
}

# --- The registry and the callbacks -------------------------------------------------------------


class _Registry:
    """Every struct built here, by key, and the callbacks that find them.

    The callbacks are bound methods of the one registry, and their bodies reach everything
    through ``self``, never through module globals: a struct that a consumer releases during
    interpreter shutdown (an ``ad.Array`` still alive then) must find its registry intact after
    Python has cleared this module's globals. The callback objects themselves are leaked on
    purpose (see :func:`_immortal`), so their code is never freed under a late caller.
    """

    def __init__(self) -> None:
        # Reentrant: a release may run inside a locked section when an allocation there
        # triggers the garbage collector, which frees an unconsumed capsule.
        self.lock = threading.RLock()
        self.keys = itertools.count(1)
        self.nodes: dict[int, Any] = {}
        self.stray_releases: list[int] = []
        self.callback_errors: list[BaseException] = []
        self.schema_type = ArrowSchema
        self.array_type = ArrowArray
        self.stream_type = ArrowArrayStream
        self.memmove = ctypes.memmove
        self.memset = ctypes.memset
        self.addressof = ctypes.addressof
        self.sizeof = ctypes.sizeof
        self.release_type = _Release
        self.capsule_get_name = _PyCapsule_GetName
        self.capsule_get_pointer = _PyCapsule_GetPointer

    def register(self, node: Any) -> int:
        with self.lock:
            key = next(self.keys)
            self.nodes[key] = node
            return key

    def guarded(self, default: Any, function: Callable) -> Callable:
        """A callback body whose exception is recorded (and ``default`` returned) instead of
        being printed and swallowed by ctypes."""

        def guarded(*args: Any) -> Any:
            try:
                return function(*args)
            except BaseException as error:  # noqa: BLE001 - recorded for the test to assert on
                self.callback_errors.append(error)
                return default

        return guarded

    def release(self, struct_type: type, address: int) -> None:
        """The body of the schema and array release callbacks (see the module docstring)."""
        struct = struct_type.from_address(address)
        key = struct.private_data or 0
        with self.lock:
            node = self.nodes.get(key)
            if node is None or getattr(node, "struct_type", None) is not struct_type:
                self.stray_releases.append(key)
                node = None
            else:
                node._released += 1
        if node is not None:
            # A parent owns its children and dictionary: release those still live (a consumer
            # may have moved one out, leaving it released).
            for owned in node.owned():
                if owned.struct.release:
                    self.release(struct_type, self.addressof(owned.struct))
        struct.release = None

    def release_schema(self, address: int) -> None:
        self.release(self.schema_type, address)

    def release_array(self, address: int) -> None:
        self.release(self.array_type, address)

    def destroy_capsule(self, capsule: int) -> None:
        """The producer's capsule destructor: releases the struct unless a consumer took it.

        The capsule is passed as an address: it is being deallocated and must not be touched as
        a Python object.
        """
        name = self.capsule_get_name(capsule)
        pointer = self.capsule_get_pointer(capsule, name)
        struct_type = {
            b"arrow_schema": self.schema_type,
            b"arrow_array": self.array_type,
            b"arrow_array_stream": self.stream_type,
        }[name]
        release = struct_type.from_address(pointer).release
        if release:
            self.release_type(release)(pointer)

    def stream(self, address: int) -> Any:
        key = self.stream_type.from_address(address).private_data or 0
        with self.lock:
            node = self.nodes.get(key)
        if getattr(node, "struct_type", None) is not self.stream_type:
            self.stray_releases.append(key)
            raise LookupError(f"a stream callback was called with unknown private_data {key}")
        return node

    def get_schema(self, stream: int, out: int) -> int:
        return self.stream(stream).get_schema(out)

    def get_next(self, stream: int, out: int) -> int:
        return self.stream(stream).get_next(out)

    def get_last_error(self, stream: int) -> Optional[int]:
        return self.stream(stream).get_last_error()

    def release_stream(self, address: int) -> None:
        struct = self.stream_type.from_address(address)
        try:
            stream = self.stream(address)
        except LookupError:
            struct.release = None
            return
        stream.release()
        struct.release = None


_registry = _Registry()
#: Release calls whose struct carried a key that no struct built here has (a double free of a
#: moved struct, or garbage): must stay empty.
STRAY_RELEASES = _registry.stray_releases
#: Exceptions raised inside callbacks (ctypes would print and swallow them): must stay empty.
CALLBACK_ERRORS = _registry.callback_errors


def _immortal(callback: Any) -> int:
    """The address of a ctypes callback that is never freed (its reference is leaked), so that a
    consumer may call it at any time, interpreter shutdown included."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(callback))
    return ctypes.cast(callback, ctypes.c_void_p).value


_guard = _registry.guarded
RELEASE_SCHEMA_ADDRESS = _immortal(_Release(_guard(None, _registry.release_schema)))
RELEASE_ARRAY_ADDRESS = _immortal(_Release(_guard(None, _registry.release_array)))
GET_SCHEMA_ADDRESS = _immortal(_GetSchema(_guard(EIO, _registry.get_schema)))
GET_NEXT_ADDRESS = _immortal(_GetNext(_guard(EIO, _registry.get_next)))
GET_LAST_ERROR_ADDRESS = _immortal(_GetLastError(_guard(None, _registry.get_last_error)))
RELEASE_STREAM_ADDRESS = _immortal(_Release(_guard(None, _registry.release_stream)))
_CAPSULE_DESTRUCTOR = _CapsuleDestructor(_guard(None, _registry.destroy_capsule))
_immortal(_CAPSULE_DESTRUCTOR)


def mark() -> int:
    """A mark: :func:`built_since` gives every struct built after it."""
    with _registry.lock:
        return next(_registry.keys)


def built_since(mark: int) -> list[Any]:
    """Every schema, array and stream built since ``mark``, in order."""
    with _registry.lock:
        return [node for key, node in sorted(_registry.nodes.items()) if key > mark]
