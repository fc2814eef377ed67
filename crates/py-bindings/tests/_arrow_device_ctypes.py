"""Hand-built Arrow C Device Data Interface producers, written with ctypes only.

An ``ArrowDeviceArray`` wraps an ``ArrowArray`` built by :mod:`_arrow_c_ctypes` (moved into the
device struct, so that its release callback, and its count, are those of that module) and adds
``device_id``, ``device_type`` and ``sync_event``. Device memory is faked: buffer pointers are
integers that are never dereferenced, and a sync event points to a host ``c_void_p`` holding a
fake event handle, which the tests read back from the recording device runtime.

- :class:`DeviceArray` builds one struct; :class:`DeviceArrayProducer` speaks
  ``__arrow_c_device_array__`` (and, on request, ``__arrow_c_array__`` and ``__dlpack_device__``).
- :class:`DeviceStream` builds an ``ArrowDeviceArrayStream`` over prebuilt device arrays, and
  counts its own release; :class:`DeviceStreamProducer` speaks ``__arrow_c_device_stream__``.
- :func:`read_device_array` reads the fields of a device array capsule that a consumer has not
  taken (our exports), and releases it.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence

import _arrow_c_ctypes as c


class ArrowDeviceArray(ctypes.Structure):
    _fields_ = [
        ("array", c.ArrowArray),
        ("device_id", ctypes.c_int64),
        ("device_type", ctypes.c_int32),
        ("sync_event", ctypes.c_void_p),
        ("reserved", ctypes.c_int64 * 3),
    ]


class ArrowDeviceArrayStream(ctypes.Structure):
    _fields_ = [
        ("device_type", ctypes.c_int32),
        ("get_schema", ctypes.c_void_p),
        ("get_next", ctypes.c_void_p),
        ("get_last_error", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


assert ctypes.sizeof(ArrowDeviceArray) == 128 and ArrowDeviceArray.sync_event.offset == 96
assert ctypes.sizeof(ArrowDeviceArrayStream) == 48

CPU, CUDA, CUDA_HOST, ROCM = 1, 2, 3, 10

_Release = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_GetSchema = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GetNext = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GetLastError = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_PyCapsule_New = ctypes.pythonapi["PyCapsule_New"]
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, _Destructor]
_PyCapsule_GetPointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_PyCapsule_GetPointerRaw = ctypes.pythonapi["PyCapsule_GetPointer"]
_PyCapsule_GetPointerRaw.restype = ctypes.c_void_p
_PyCapsule_GetPointerRaw.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

_NAMES = {
    name: ctypes.create_string_buffer(name)
    for name in (b"arrow_device_array", b"arrow_device_array_stream")
}
# Everything a consumer may still reach lives for the whole process.
_KEEP: list[Any] = []


def _immortal(callback: Any) -> int:
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(callback))
    return ctypes.cast(callback, ctypes.c_void_p).value


def _destroy_device_array(capsule: int) -> None:
    pointer = _PyCapsule_GetPointerRaw(capsule, b"arrow_device_array")
    release = ArrowDeviceArray.from_address(pointer).array.release
    if release:
        _Release(release)(pointer)


def _destroy_device_stream(capsule: int) -> None:
    pointer = _PyCapsule_GetPointerRaw(capsule, b"arrow_device_array_stream")
    release = ArrowDeviceArrayStream.from_address(pointer).release
    if release:
        _Release(release)(pointer)


_DESTROY_ARRAY = _Destructor(_destroy_device_array)
_DESTROY_STREAM = _Destructor(_destroy_device_stream)
_immortal(_DESTROY_ARRAY)
_immortal(_DESTROY_STREAM)


def event(handle: int) -> ctypes.c_void_p:
    """A fake sync event: a host pointer-sized slot holding ``handle`` (a ``cudaEvent_t``)."""
    slot = ctypes.c_void_p(handle)
    _KEEP.append(slot)
    return slot


class DeviceArray:
    """One ``ArrowDeviceArray`` over ``array`` (an :class:`_arrow_c_ctypes.Array`, moved in)."""

    def __init__(
        self,
        array: c.Array,
        *,
        device_type: int = CUDA,
        device_id: int = 0,
        sync_event: Optional[ctypes.c_void_p] = None,
    ):
        self.array = array
        array.exposed = True
        self.struct = ArrowDeviceArray(
            device_id=device_id,
            device_type=device_type,
            sync_event=None if sync_event is None else ctypes.addressof(sync_event),
        )
        ctypes.memmove(
            ctypes.addressof(self.struct), array.address, ctypes.sizeof(c.ArrowArray)
        )
        # Moved: the original is released, and only the device struct's copy may be released.
        array.struct.release = None
        _KEEP.append(self)

    @property
    def released(self) -> int:
        return self.array.released

    def capsule(self) -> Any:
        return _PyCapsule_New(
            ctypes.addressof(self.struct),
            ctypes.addressof(_NAMES[b"arrow_device_array"]),
            _DESTROY_ARRAY,
        )


class DeviceArrayProducer:
    """``__arrow_c_device_array__`` over one schema and device array; ``cpu_protocol`` adds an
    ``__arrow_c_array__`` that records its calls, ``dlpack_device`` a ``__dlpack_device__``."""

    def __init__(self, schema: c.Schema, device_array: DeviceArray, *, cpu_protocol: bool = False,
                 dlpack_device: Optional[tuple[int, int]] = None):
        self.schema = schema
        self.device_array = device_array
        self.capsules: list[Any] = []
        self.calls: list[str] = []
        self.cpu_protocol = cpu_protocol
        self.dlpack_device = dlpack_device

    def __arrow_c_device_array__(self, requested_schema: Any = None, **kwargs: Any) -> Any:
        self.calls.append("device")
        capsules = (self.schema.capsule(), self.device_array.capsule())
        self.capsules.extend(capsules)
        return capsules

    def __getattr__(self, name: str) -> Any:
        if name == "__arrow_c_array__" and self.cpu_protocol:
            def cpu(requested_schema: Any = None) -> Any:
                self.calls.append("cpu")
                raise RuntimeError("the CPU protocol was asked")
            return cpu
        if name == "__dlpack_device__" and self.dlpack_device is not None:
            return lambda: self.dlpack_device
        raise AttributeError(name)


class DeviceStream:
    """An ``ArrowDeviceArrayStream`` handing out ``chunks`` (prebuilt :class:`DeviceArray`
    objects, moved out one by one) described by ``schema``; ``released`` counts its release."""

    def __init__(self, schema: c.Schema, chunks: Sequence[DeviceArray], *, device_type: int = CUDA):
        self.schema = schema
        self.chunks = list(chunks)
        self.next = 0
        self.released = 0
        for chunk in self.chunks:
            chunk.array.exposed = True
        self._callbacks = [
            _GetSchema(self._get_schema),
            _GetNext(self._get_next),
            _GetLastError(lambda stream: None),
            _Release(self._release),
        ]
        addresses = [_immortal(callback) for callback in self._callbacks]
        self.struct = ArrowDeviceArrayStream(device_type, *addresses, None)
        _KEEP.append(self)

    def _get_schema(self, stream: int, out: int) -> int:
        # The schema is moved to the consumer, which releases it: ours is marked released.
        self.schema.exposed = True
        ctypes.memmove(out, self.schema.address, ctypes.sizeof(c.ArrowSchema))
        self.schema.struct.release = None
        return 0

    def _get_next(self, stream: int, out: int) -> int:
        if self.next >= len(self.chunks):
            ctypes.memset(out, 0, ctypes.sizeof(ArrowDeviceArray))
            return 0
        chunk = self.chunks[self.next]
        self.next += 1
        ctypes.memmove(out, ctypes.addressof(chunk.struct), ctypes.sizeof(ArrowDeviceArray))
        chunk.struct.array.release = None
        return 0

    def _release(self, address: int) -> None:
        self.released += 1
        # Chunks never handed out are the stream's to release.
        for chunk in self.chunks[self.next:]:
            release = chunk.struct.array.release
            if release:
                _Release(release)(ctypes.addressof(chunk.struct))
        ArrowDeviceArrayStream.from_address(address).release = None

    def capsule(self) -> Any:
        return _PyCapsule_New(
            ctypes.addressof(self.struct),
            ctypes.addressof(_NAMES[b"arrow_device_array_stream"]),
            _DESTROY_STREAM,
        )


class DeviceStreamProducer:
    def __init__(self, stream: DeviceStream):
        self.stream = stream
        self.capsules: list[Any] = []

    def __arrow_c_device_stream__(self, requested_schema: Any = None, **kwargs: Any) -> Any:
        capsule = self.stream.capsule()
        self.capsules.append(capsule)
        return capsule


class Only:
    """Exposes only the named protocol methods of ``inner`` (a pyarrow or arrow_dlpack object)."""

    def __init__(self, inner: Any, *names: str):
        self._inner = inner
        self._names = names

    def __getattr__(self, name: str) -> Any:
        if name in self._names:
            return getattr(self._inner, name)
        raise AttributeError(name)


def read_device_array(capsule: Any) -> dict[str, Any]:
    """The fields of an unconsumed ``arrow_device_array`` capsule (ours), buffers and children
    pointers included; the capsule keeps ownership."""
    pointer = _PyCapsule_GetPointer(capsule, b"arrow_device_array")
    struct = ArrowDeviceArray.from_address(pointer)

    def array_fields(array: c.ArrowArray) -> dict[str, Any]:
        buffers = [
            (ctypes.c_void_p * array.n_buffers).from_address(array.buffers)[i] or 0
            for i in range(array.n_buffers)
        ]
        children = [
            array_fields(c.ArrowArray.from_address(
                (ctypes.c_void_p * array.n_children).from_address(array.children)[i]))
            for i in range(array.n_children)
        ]
        return {
            "length": array.length,
            "null_count": array.null_count,
            "offset": array.offset,
            "buffers": buffers,
            "children": children,
        }

    return {
        "device_type": struct.device_type,
        "device_id": struct.device_id,
        "sync_event": struct.sync_event or 0,
        "array": array_fields(struct.array),
    }
