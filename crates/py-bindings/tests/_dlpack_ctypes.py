"""Hand-built DLPack producers for hostile-input tests, written with ctypes only.

Every field of a ``DLManagedTensor`` / ``DLManagedTensorVersioned`` can be set to anything, so
tests can hand ``arrow_dlpack`` the malformed tensors that real libraries never produce, and count
how often the producer's deleter runs.

- :class:`Spec` describes one tensor: storage, dtype, shape, strides, byte offset, data pointer,
  device, version, flags, ABI and deleter.
- :class:`ManagedTensor` builds one managed tensor from a spec; ``capsule()`` wraps it in a
  PyCapsule whose destructor follows the DLPack Python specification (it calls the deleter only
  while the capsule still has its unused name), and ``deleted`` counts the deleter's calls.
- :class:`Producer` is an object with ``__dlpack__`` and ``__dlpack_device__`` that hands out such
  capsules, with knobs for misbehaviour (ignoring keywords, raising, returning something else,
  lying about its device, reusing a capsule).

The deleters and the capsule destructor are module-level ctypes callbacks that never die, so a
consumer may call them late, from any thread (ctypes takes the GIL for them).

One limit of a destructor written in Python: it must not run while an exception is propagating
(ctypes turns the pending exception into "error return without exception set").
So a test keeps every capsule in a variable and never lets one die as the temporary argument of
a call that raises; a C producer (numpy, PyTorch) saves and restores the exception instead.
A managed tensor is registered under its ``manager_ctx`` until its deleter runs, which keeps its
storage alive exactly as long as a real producer would; a deleter called for an unknown or
already deleted tensor is counted as well (see :data:`STRAY_DELETES`).
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import struct
import threading
import weakref
from typing import Any, Callable, Optional, Sequence

# --- The DLPack ABI (dlpack.h, unchanged since 1.0) -------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.c_void_p),  # int64_t*
        ("strides", ctypes.c_void_p),  # int64_t*
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


# The deleter fields are plain pointers so that NULL and foreign functions can be stored as they
# are; the callbacks below are stored by address.
class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensor*)
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensorVersioned*)
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# The layouts of DLPack 1.3 (docs/compatibility.md), asserted rather than trusted.
assert ctypes.sizeof(DLTensor) == 48
assert ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80
assert DLManagedTensorVersioned.dl_tensor.offset == 32
assert DLManagedTensor.manager_ctx.offset == 48

# DLDeviceType values.
CPU = 1
CUDA = 2
CUDA_HOST = 3
# DLDataTypeCode values.
INT, UINT, FLOAT, OPAQUE_HANDLE, BFLOAT, COMPLEX, BOOL = 0, 1, 2, 3, 4, 5, 6
FLOAT4_E2M1FN = 17
# DLPack flags.
READ_ONLY = 1 << 0
IS_COPIED = 1 << 1

DLPACK_VERSION = (1, 3)

# Capsule names; the buffers live as long as the module, as the capsules' name pointers must.
_NAMES = {
    name: ctypes.create_string_buffer(name)
    for name in (
        b"dltensor",
        b"dltensor_versioned",
        b"used_dltensor",
        b"used_dltensor_versioned",
        b"dltensor_wrong",
        b"DLTENSOR",
    )
}

# --- The C API used ------------------------------------------------------------------------------

PyCapsule_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# Function objects of our own: `ctypes.pythonapi.X` is one shared object per name, whose argtypes
# other test code (conftest.py) sets differently; indexing creates a fresh one.
_PyCapsule_New = ctypes.pythonapi["PyCapsule_New"]
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, PyCapsule_Destructor]

_PyCapsule_IsValid = ctypes.pythonapi["PyCapsule_IsValid"]
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

_PyCapsule_GetPointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

_PyCapsule_GetName = ctypes.pythonapi["PyCapsule_GetName"]
_PyCapsule_GetName.restype = ctypes.c_char_p
_PyCapsule_GetName.argtypes = [ctypes.py_object]

_DeleterVersioned = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
_DeleterLegacy = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))


def capsule_name(capsule: Any) -> Optional[str]:
    """The current name of a capsule (``used_...`` once a consumer took it)."""
    name = _PyCapsule_GetName(capsule)
    return None if name is None else name.decode()


# --- Ownership bookkeeping -----------------------------------------------------------------------

# Reentrant: a deleter may run inside a locked section when an allocation there triggers the
# garbage collector, which frees an unconsumed capsule.
_lock = threading.RLock()
_keys = itertools.count(1)
# Managed tensors whose deleter has not run yet, by manager_ctx: the producer's own reference.
_live: dict[int, "ManagedTensor"] = {}
# Managed tensors already deleted, to count a second call; weak, so nothing is kept for it.
_deleted: "weakref.WeakValueDictionary[int, ManagedTensor]" = weakref.WeakValueDictionary()
#: Deleter calls for a manager_ctx that is neither live nor remembered (would be a double free).
STRAY_DELETES: list[int] = []


def _on_delete(key: int) -> None:
    with _lock:
        tensor = _live.pop(key, None)
        if tensor is not None:
            _deleted[key] = tensor
        else:
            tensor = _deleted.get(key)
        if tensor is None:
            STRAY_DELETES.append(key)
            return
        tensor._deleter_calls += 1
        tensor.deleter_threads.append(threading.get_ident())
    callback = tensor.on_delete
    if callback is not None:
        callback(tensor)


def _delete_versioned(managed: Any) -> None:
    _on_delete(managed.contents.manager_ctx or 0)


def _delete_legacy(managed: Any) -> None:
    _on_delete(managed.contents.manager_ctx or 0)


# Module-level callbacks: they must outlive every capsule and every consumer's reference.
_DELETE_VERSIONED = _DeleterVersioned(_delete_versioned)
_DELETE_LEGACY = _DeleterLegacy(_delete_legacy)
DELETER_VERSIONED_ADDRESS = ctypes.cast(_DELETE_VERSIONED, ctypes.c_void_p).value
DELETER_LEGACY_ADDRESS = ctypes.cast(_DELETE_LEGACY, ctypes.c_void_p).value


def _capsule_destructor(capsule: int) -> None:
    """The destructor of the DLPack Python specification, as numpy and PyTorch write it.

    A capsule that a consumer renamed ``used_...`` (or that never had a DLPack name) is not ours
    to release; one that still has its unused name was never consumed, so the producer releases
    it by calling the managed tensor's own deleter (which may be NULL).
    The capsule is passed as an address: it is being deallocated and must not be touched as a
    Python object.
    """
    if _PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        pointer = _PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        managed = DLManagedTensorVersioned.from_address(pointer)
        if managed.deleter:
            _DeleterVersioned(managed.deleter)(ctypes.pointer(managed))
    elif _PyCapsule_IsValid(capsule, b"dltensor"):
        pointer = _PyCapsule_GetPointer(capsule, b"dltensor")
        managed = DLManagedTensor.from_address(pointer)
        if managed.deleter:
            _DeleterLegacy(managed.deleter)(ctypes.pointer(managed))


_CAPSULE_DESTRUCTOR = PyCapsule_Destructor(_capsule_destructor)


# --- Storage and specs ---------------------------------------------------------------------------


class Storage:
    """Bytes the tensors point into, 64-byte aligned, freed when the last holder drops it."""

    ALIGN = 64

    def __init__(self, content: bytes):
        self.nbytes = len(content)
        self._raw = (ctypes.c_ubyte * (self.nbytes + self.ALIGN))()
        raw = ctypes.addressof(self._raw)
        self.address = (raw + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        ctypes.memmove(self.address, content, self.nbytes)

    def read(self, offset: int = 0, nbytes: Optional[int] = None) -> bytes:
        nbytes = self.nbytes - offset if nbytes is None else nbytes
        return ctypes.string_at(self.address + offset, nbytes)

    def write(self, offset: int, content: bytes) -> None:
        assert 0 <= offset and offset + len(content) <= self.nbytes
        ctypes.memmove(self.address + offset, content, len(content))


_DEFAULT = object()


@dataclasses.dataclass
class Spec:
    """Every field of one hand-built managed tensor; defaults describe a valid float32 tensor.

    ``shape``/``strides`` None store NULL pointers; ``ndim`` None means ``len(shape)``.
    ``data`` is the pointer as an offset into the storage (``data_offset``), or ``data_address``
    (an absolute address, 0 for NULL) when given.
    """

    content: bytes = struct.pack("<6f", 0, 1, 2, 3, 4, 5)
    dtype: tuple[int, int, int] = (FLOAT, 32, 1)
    shape: Optional[Sequence[int]] = (6,)
    strides: Optional[Sequence[int]] = None
    ndim: Optional[int] = None
    byte_offset: int = 0
    data_offset: int = 0
    data_address: Optional[int] = None
    device: tuple[int, int] = (CPU, 0)
    version: tuple[int, int] = DLPACK_VERSION
    flags: int = 0
    versioned: bool = True
    null_deleter: bool = False
    # A foreign storage to share (one producer exporting several tensors over the same bytes).
    storage: Optional[Storage] = None

    def replace(self, **changes: Any) -> "Spec":
        return dataclasses.replace(self, **changes)


def float32_spec(values: Sequence[float] = (0, 1, 2, 3, 4, 5), **changes: Any) -> Spec:
    """A valid 1-D float32 tensor over ``values`` (as stored), with ``changes`` applied."""
    content = struct.pack(f"<{len(values)}f", *values)
    return Spec(content=content, shape=(len(values),)).replace(**changes)


def array_spec(array: Any, **changes: Any) -> Spec:
    """A valid row-major tensor over a copy of a numpy array's bytes, with explicit strides."""
    code = {"i": INT, "u": UINT, "f": FLOAT, "c": COMPLEX, "b": BOOL}[array.dtype.kind]
    itemsize = array.dtype.itemsize
    shape = tuple(array.shape)
    strides = []
    step = 1
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return Spec(
        content=array.tobytes(),
        dtype=(code, itemsize * 8, 1),
        shape=shape,
        strides=tuple(reversed(strides)),
    ).replace(**changes)


# --- Managed tensors -----------------------------------------------------------------------------


class ManagedTensor:
    """One hand-built managed tensor: the struct, its shape and strides arrays and its storage.

    ``deleted`` counts deleter calls; ``deleter_threads`` records the thread of each call.
    ``on_delete`` (optional) is called after each count, in the deleter's thread.
    """

    def __init__(self, spec: Spec, on_delete: Optional[Callable[["ManagedTensor"], None]] = None):
        self.spec = spec
        self.on_delete = on_delete
        self._deleter_calls = 0
        self.deleter_threads: list[int] = []
        self.storage = spec.storage if spec.storage is not None else Storage(spec.content)
        self.key = next(_keys)
        shape = list(spec.shape) if spec.shape is not None else None
        ndim = spec.ndim if spec.ndim is not None else len(shape or ())
        # Arrays are padded to `ndim` entries so that a consumer that trusts `ndim` reads our
        # memory, never past it; a NULL pointer stays NULL.
        pad = max(ndim, 0)
        if shape is not None:
            entries = shape + [1] * (pad - len(shape))
            self._shape = (ctypes.c_int64 * max(len(entries), 1))(*entries)
        else:
            self._shape = None
        if spec.strides is not None:
            entries = list(spec.strides)
            entries += [1] * (pad - len(entries))
            self._strides = (ctypes.c_int64 * max(len(entries), 1))(*entries)
        else:
            self._strides = None

        if spec.data_address is not None:
            data = spec.data_address
        else:
            data = self.storage.address + spec.data_offset
        tensor = DLTensor(
            data=data or None,
            device=DLDevice(*spec.device),
            ndim=ndim,
            dtype=DLDataType(*spec.dtype),
            shape=ctypes.addressof(self._shape) if self._shape is not None else None,
            strides=ctypes.addressof(self._strides) if self._strides is not None else None,
            byte_offset=spec.byte_offset,
        )
        if spec.versioned:
            self.struct: Any = DLManagedTensorVersioned(
                version=DLPackVersion(*spec.version),
                manager_ctx=self.key,
                deleter=None if spec.null_deleter else DELETER_VERSIONED_ADDRESS,
                flags=spec.flags,
                dl_tensor=tensor,
            )
        else:
            self.struct = DLManagedTensor(
                dl_tensor=tensor,
                manager_ctx=self.key,
                deleter=None if spec.null_deleter else DELETER_LEGACY_ADDRESS,
            )
        with _lock:
            _live[self.key] = self

    @property
    def deleted(self) -> int:
        """How many times the deleter has run for this tensor."""
        with _lock:
            return self._deleter_calls

    @property
    def address(self) -> int:
        """The address of the struct (what the capsule points at)."""
        return ctypes.addressof(self.struct)

    @property
    def data_address(self) -> int:
        """``data + byte_offset``: where the first element is."""
        tensor = self.struct.dl_tensor
        return (tensor.data or 0) + tensor.byte_offset

    @property
    def default_name(self) -> bytes:
        return b"dltensor_versioned" if self.spec.versioned else b"dltensor"

    def capsule(self, name: Optional[bytes] = None) -> Any:
        """A new capsule over this tensor, named ``name`` (default: the unused DLPack name)."""
        name = self.default_name if name is None else name
        return _PyCapsule_New(
            self.address, ctypes.addressof(_NAMES[name]), _CAPSULE_DESTRUCTOR
        )

    def set_shape(self, dim: int, extent: int) -> None:
        """Overwrites the producer's shape array (after export, to test that metadata is
        copied)."""
        self._shape[dim] = extent

    def reclaim(self) -> None:
        """The producer takes back a tensor that no deleter will release (NULL deleter, or a
        capsule no consumer may take): forget it without counting a deletion."""
        with _lock:
            _live.pop(self.key, None)

    @property
    def is_live(self) -> bool:
        with _lock:
            return self.key in _live


def live_count() -> int:
    """Managed tensors built and not yet deleted (or reclaimed)."""
    with _lock:
        return len(_live)


# --- A producer with the Python protocol ---------------------------------------------------------


class Producer:
    """An object speaking the DLPack Python protocol with hand-built capsules.

    Each ``__dlpack__`` call builds a new :class:`ManagedTensor` over the same storage (as a real
    library does) and records its keywords in ``calls``.

    Knobs (all optional):

    - ``spec``: the tensor handed out (a versioned or a legacy one per ``spec.versioned``);
    - ``mode``:
      ``"negotiate"`` (default) honours ``max_version`` like a DLPack 1.x producer (legacy for
      None or below (1, 0), else ``spec.versioned``),
      ``"ignore"`` ignores every keyword and always gives ``spec``'s kind,
      ``"legacy_signature"`` has the pre-1.0 signature ``__dlpack__(stream=None)``, so keywords
      raise ``TypeError``,
      ``"raise"`` raises ``exception``,
      ``"return"`` returns ``returns(self)`` instead of a capsule,
      ``"reuse"`` hands out the same capsule on every call;
    - ``capsule_name``: the capsule's name (``b"dltensor_wrong"``, ``b"used_dltensor"``, ...);
    - ``device``: what ``__dlpack_device__`` answers (default: ``spec.device``), or ``None`` for
      a producer without ``__dlpack_device__`` (see :class:`LegacyProducer`).
    """

    def __init__(
        self,
        spec: Spec,
        *,
        mode: str = "negotiate",
        capsule_name: Optional[bytes] = None,
        device: Any = _DEFAULT,
        exception: Optional[BaseException] = None,
        returns: Optional[Callable[["Producer"], Any]] = None,
        on_delete: Optional[Callable[[ManagedTensor], None]] = None,
    ):
        self.spec = spec if spec.storage is not None else spec.replace(
            storage=Storage(spec.content)
        )
        self.mode = mode
        self.capsule_name = capsule_name
        self.device = spec.device if device is _DEFAULT else device
        self.exception = exception
        self.returns = returns
        self.on_delete = on_delete
        self.calls: list[dict[str, Any]] = []
        self.device_calls = 0
        self.tensors: list[ManagedTensor] = []
        self._reused: Any = None

    @property
    def storage(self) -> Storage:
        assert self.spec.storage is not None
        return self.spec.storage

    @property
    def deleted(self) -> int:
        """Deleter calls over every tensor handed out."""
        return sum(tensor.deleted for tensor in self.tensors)

    @property
    def data_address(self) -> int:
        return self.storage.address + self.spec.data_offset + self.spec.byte_offset

    def export(self, spec: Optional[Spec] = None) -> Any:
        tensor = ManagedTensor(spec or self.spec, on_delete=self.on_delete)
        self.tensors.append(tensor)
        return tensor.capsule(self.capsule_name)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "legacy_signature":
            return self._legacy_dlpack(*args, **kwargs)
        if args:
            raise TypeError("__dlpack__() takes keyword arguments only")
        unknown = set(kwargs) - {"stream", "max_version", "dl_device", "copy"}
        if unknown:
            raise TypeError(f"__dlpack__() got unexpected keywords {sorted(unknown)}")
        self.calls.append(dict(kwargs))
        if self.mode == "raise":
            assert self.exception is not None
            raise self.exception
        if self.mode == "return":
            assert self.returns is not None
            return self.returns(self)
        if self.mode == "reuse":
            if self._reused is None:
                self._reused = self.export()
            return self._reused
        if self.mode == "ignore":
            return self.export()
        max_version = kwargs.get("max_version")
        if max_version is None or tuple(max_version) < (1, 0):
            return self.export(self.spec.replace(versioned=False))
        return self.export()

    def _legacy_dlpack(self, stream: Any = None) -> Any:
        self.calls.append({"stream": stream} if stream is not None else {})
        return self.export(self.spec.replace(versioned=False))

    def __dlpack_device__(self) -> Any:
        self.device_calls += 1
        return self.device


class LegacyProducer(Producer):
    """A producer from before DLPack 1.0 that has no ``__dlpack_device__`` at all."""

    def __init__(self, spec: Spec, **knobs: Any):
        super().__init__(spec.replace(versioned=False), mode="legacy_signature", **knobs)

    def __getattribute__(self, name: str) -> Any:
        if name == "__dlpack_device__":
            raise AttributeError(name)
        return super().__getattribute__(name)
