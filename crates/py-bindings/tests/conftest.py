"""Shared fixtures: reading DLPack capsules with ctypes, a hand-built (ctypes) DLPack producer
whose deleter calls are counted, and JAX's 64-bit mode.

The fixtures hand out objects rather than module-level helpers because the tests run with
``--import-mode=importlib``, under which test modules cannot import this file by name.
"""

import ctypes
import gc
import importlib.util
import sys
from pathlib import Path
from typing import NamedTuple, Optional, Tuple

import numpy as np
import pytest


def _register_helper(name):
    """Loads the helper ``<name>.py`` by path, once per process, as the module ``name``, so that
    test modules can ``import name`` although the tests are not a package."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


# The hand-built DLPack producers and the hand-built Arrow C Data Interface producers.
_register_helper("_dlpack_ctypes")
_register_helper("_arrow_c_registry")  # before the module that re-exports it
_register_helper("_arrow_c_ctypes")
# The hand-built Arrow C Device Data Interface producers (fake device memory).
_register_helper("_arrow_device_ctypes")
# The hostile case tables built with them (shared by the hostile suites and test_no_panics.py).
_register_helper("_dlpack_cases")
_register_helper("_arrow_c_case_builders")
_register_helper("_arrow_c_cases")
_register_helper("_arrow_c_good_cases")
# The HTTP server with byte ranges of the object-storage tests.
_register_helper("_object_servers")
# The editor of Parquet footers and page headers of the corrupt-file tests.
_register_helper("_parquet_editor")
# Forked worker processes whose results come back through a queue.
_register_helper("_forked")
# The watchdog that ends a test process growing past its memory limit, naming the test.
_register_helper("_memory_guard")


def pytest_configure(config):
    """Starts the memory guard in every process that runs tests (each pytest-xdist worker)."""
    sys.modules["_memory_guard"].start()


def pytest_collection_finish(session):
    """Moves every object alive after collection (torch, JAX, pyarrow and the test modules, about
    250,000 objects) out of the garbage collector's sight, in each process that runs tests.

    They live for the whole run anyway; without this, each full collection walks them all: the
    suite calls ``gc.collect()`` in hundreds of tests (to run a cycle's deleters before counting
    releases), and each took about 150 ms, a third of the suite's time. Collections then see only
    what the tests made.
    """
    gc.collect()
    gc.freeze()


# DLPack flag bits (dlpack.h 1.3).
READ_ONLY = 1 << 0
IS_COPIED = 1 << 1

_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


# The DLPack structs, declared once in the hostile-producer helper. Its pointer fields are raw
# addresses (`c_void_p`), so that tests can store anything there; `int64_array` reads them.
_dl = sys.modules["_dlpack_ctypes"]
DLDevice = _dl.DLDevice
DLDataType = _dl.DLDataType
DLTensor = _dl.DLTensor
DLPackVersion = _dl.DLPackVersion
DLManagedTensor = _dl.DLManagedTensor
DLManagedTensorVersioned = _dl.DLManagedTensorVersioned


def int64_array(address):
    """The ``int64_t`` array at ``address`` (a ``shape`` or ``strides`` field), indexable."""
    return ctypes.cast(address, ctypes.POINTER(ctypes.c_int64))


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# Producers live as long as the process: a tensor that outlives its test must still find its
# deleter (a ctypes thunk) when it is finally released.
_PRODUCERS = []


class Capsule(NamedTuple):
    """What a DLPack capsule holds, read without consuming it."""

    name: str
    version: Optional[Tuple[int, int]]  # None for legacy capsules
    flags: Optional[int]  # None for legacy capsules
    data: Optional[int]  # None for NULL
    device: Tuple[int, int]
    ndim: int
    dtype: Tuple[int, int, int]  # (code, bits, lanes)
    shape: Tuple[int, ...]
    strides: Optional[Tuple[int, ...]]  # in elements; None for NULL
    byte_offset: int


class CapsuleHolder:
    """A producer that hands out one given capsule, so that numpy or torch can consume it."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


class DLPackInspector:
    """Reads DLPack capsules through ctypes, as a C consumer would."""

    READ_ONLY = READ_ONLY
    IS_COPIED = IS_COPIED

    @staticmethod
    def name(capsule) -> str:
        return _api.PyCapsule_GetName(capsule).decode()

    @staticmethod
    def read(capsule) -> Capsule:
        name = DLPackInspector.name(capsule)
        pointer = _api.PyCapsule_GetPointer(capsule, name.encode())
        if name == "dltensor_versioned":
            managed = DLManagedTensorVersioned.from_address(pointer)
            version, flags, tensor = (
                (managed.version.major, managed.version.minor),
                managed.flags,
                managed.dl_tensor,
            )
        elif name == "dltensor":
            version, flags, tensor = None, None, DLManagedTensor.from_address(pointer).dl_tensor
        else:
            raise AssertionError(f"not an unused DLPack capsule: {name!r}")
        ndim = tensor.ndim
        return Capsule(
            name=name,
            version=version,
            flags=flags,
            data=tensor.data,
            device=(tensor.device.device_type, tensor.device.device_id),
            ndim=ndim,
            dtype=(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes),
            shape=tuple(int64_array(tensor.shape)[i] for i in range(ndim)),
            strides=tuple(int64_array(tensor.strides)[i] for i in range(ndim)) if tensor.strides else None,
            byte_offset=tensor.byte_offset,
        )

    @staticmethod
    def holder(capsule) -> CapsuleHolder:
        return CapsuleHolder(capsule)


class CountedProducer:
    """Builds DLPack capsules by hand over numpy arrays and counts its deleter's calls.

    Each managed tensor keeps its numpy array (and its shape and strides arrays) alive until the
    deleter runs; ``deleted`` counts the calls and ``alive`` the tensors not yet deleted.
    The capsules have no destructor: tests consume every capsule they build.
    """

    def __init__(self):
        self.deleted = 0
        self._owned = {}
        self._deleter = _DELETER(self._delete)
        _PRODUCERS.append(self)

    @property
    def alive(self) -> int:
        return len(self._owned)

    def _delete(self, address):
        self.deleted += 1
        self._owned.pop(address)

    def capsule(
        self,
        array: np.ndarray,
        *,
        versioned: bool = True,
        version: Tuple[int, int] = (1, 3),
        flags: int = 0,
        lanes: int = 1,
        null_strides: bool = False,
        byte_offset: int = 0,
        edit=None,
    ):
        """A capsule over ``array`` (same dtype, shape and strides) with the given header.

        ``byte_offset`` moves that many bytes from ``data`` into ``byte_offset`` (the memory
        before ``array`` must belong to the same allocation); ``edit(dl_tensor)`` may then change
        any field of the ``DLTensor`` to build a malformed tensor
        (``int64_array(tensor.shape)`` reaches the extents).
        """
        shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        strides = (ctypes.c_int64 * max(array.ndim, 1))(
            *(stride // array.itemsize for stride in array.strides)
        )
        code = {"i": 0, "u": 1, "f": 2, "b": 6}[array.dtype.kind]
        tensor = DLTensor(
            data=array.ctypes.data - byte_offset if array.size else None,
            device=DLDevice(1, 0),
            ndim=array.ndim,
            dtype=DLDataType(code, array.itemsize * 8, lanes),
            shape=ctypes.addressof(shape),
            strides=None if null_strides else ctypes.addressof(strides),
            byte_offset=byte_offset,
        )
        if edit is not None:
            edit(tensor)
        deleter = ctypes.cast(self._deleter, ctypes.c_void_p).value
        if versioned:
            managed = DLManagedTensorVersioned(
                version=DLPackVersion(*version), deleter=deleter, flags=flags, dl_tensor=tensor
            )
            name = b"dltensor_versioned"
        else:
            managed = DLManagedTensor(dl_tensor=tensor, deleter=deleter)
            name = b"dltensor"
        address = ctypes.addressof(managed)
        self._owned[address] = (managed, array, shape, strides)
        return _api.PyCapsule_New(address, name, None)


@pytest.fixture(scope="session")
def dlpack() -> DLPackInspector:
    """Reads DLPack capsules (name, version, flags, DLTensor fields) without consuming them."""
    return DLPackInspector()


@pytest.fixture
def producer() -> CountedProducer:
    """A hand-built DLPack producer whose deleter calls are counted."""
    return CountedProducer()


@pytest.fixture
def jax_x64():
    """JAX with 64-bit types enabled (else int64 arrives as int32), restored afterwards."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def jax_x32():
    """JAX in its default 32-bit mode, restored afterwards."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    yield jax
    jax.config.update("jax_enable_x64", previous)
