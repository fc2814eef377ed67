"""The DLPack C exchange API (``__dlpack_c_exchange_api__``, dlpack.h 1.3): every class
publishes a process-lifetime table; ours and torch's hand tensors to each other without a Python
call; our ``from_dlpack`` uses a producer's table when ``copy`` allows. The native module counts
the tensors through the tables (``_exchange_calls``), since a pyo3 class cannot count calls of
its own ``__dlpack__``.
"""

import ctypes
import gc
import weakref

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad
from arrow_dlpack._arrow_dlpack import _exchange_calls


def address(array: np.ndarray) -> int:
    return array.ctypes.data


def values_address(chunk: pa.Array) -> int:
    """The address of a primitive pyarrow array's first logical element."""
    return chunk.buffers()[1].address + chunk.offset * chunk.type.byte_width


# The DLPack C exchange API
#
# The table's layout (dlpack.h 1.3): a header (version, previous table), then five function
# pointers. A pyo3 class cannot count Python calls of its own `__dlpack__`, so the native
# module counts the tensors that go out through our tables and come in through a producer's.


class _ExchangeHeader(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("prev_api", ctypes.c_void_p),
    ]


# PYFUNCTYPE keeps the GIL held during the call and raises the Python error a callback sets.
_FromPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_ToPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))


class _ExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", _ExchangeHeader),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", _FromPyObject),
        ("managed_tensor_to_py_object_no_sync", _ToPyObject),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]


def exchange_table(cls) -> _ExchangeAPI:
    pointer = _capsule_pointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    return _ExchangeAPI.from_address(pointer)


def calls_since(before):
    now = _exchange_calls()
    return {key: now[key] - before[key] for key in now}


@pytest.mark.parametrize("cls", [ad.Array, ad.Tensor, ad.FixedShapeTensorArray])
def test_every_class_publishes_a_dlpack_1_3_exchange_table(cls):
    table = exchange_table(cls)
    assert (table.header.major, table.header.minor) == (1, 3)
    assert table.managed_tensor_from_py_object_no_sync


def test_torch_from_dlpack_of_ours_calls_dunder_dlpack_not_the_table():
    # torch 2.15 publishes a table (torch.Tensor.__dlpack_c_exchange_api__) but does not consume
    # others': torch.from_dlpack is torch/utils/dlpack.py, which always calls `__dlpack__`. So
    # our table is not used by torch.from_dlpack; the tests below show that it works with
    # torch's own table when a C consumer (tvm-ffi, CuteDSL, ...) takes that path.
    source = pa.array([1.5, 2.5, 3.5])
    before = _exchange_calls()
    result = torch.from_dlpack(ad.array(source))
    assert calls_since(before) == {"exported": 0, "imported": 0}
    np.testing.assert_array_equal(result.numpy(), source.to_numpy())
    assert result.data_ptr() == values_address(source)


def test_our_table_hands_a_tensor_to_torchs_table_without_a_python_call():
    # What a C consumer does: our table exports the managed tensor, torch's table wraps it.
    source = pa.array([1.5, 2.5, 3.5, 4.5])[1:]
    array = ad.array(source)
    ours = exchange_table(ad.Array)
    theirs = exchange_table(torch.Tensor)
    before = _exchange_calls()
    managed = ctypes.c_void_p()
    assert ours.managed_tensor_from_py_object_no_sync(id(array), ctypes.byref(managed)) == 0
    assert calls_since(before) == {"exported": 1, "imported": 0}
    out = ctypes.c_void_p()
    assert theirs.managed_tensor_to_py_object_no_sync(managed, ctypes.byref(out)) == 0
    result = ctypes.cast(out, ctypes.py_object).value
    _decref(result)  # `out` held a new reference, and `.value` took another
    assert isinstance(result, torch.Tensor)
    assert result.data_ptr() == values_address(source)
    del array, source
    gc.collect()
    np.testing.assert_array_equal(result.numpy(), [2.5, 3.5, 4.5])


@pytest.mark.parametrize(
    "cls, shape",
    [(ad.Tensor, (2, 3)), (ad.Array, (6,)), (ad.FixedShapeTensorArray, (3, 2))],
    ids=["Tensor", "Array", "FixedShapeTensorArray"],
)
def test_our_table_takes_back_a_tensor_that_torchs_table_exported(cls, shape):
    # What a C library does to return its result: torch's table exports, ours wraps.
    source = torch.arange(6, dtype=torch.float64).reshape(shape)
    managed = ctypes.c_void_p()
    assert exchange_table(torch.Tensor).managed_tensor_from_py_object_no_sync(
        id(source), ctypes.byref(managed)
    ) == 0
    before = _exchange_calls()
    out = ctypes.c_void_p()
    assert exchange_table(cls).managed_tensor_to_py_object_no_sync(managed, ctypes.byref(out)) == 0
    assert calls_since(before) == {"exported": 0, "imported": 1}
    result = ctypes.cast(out, ctypes.py_object).value
    _decref(result)
    assert type(result) is cls
    exported = np.from_dlpack(result)
    assert address(exported) == source.data_ptr()
    np.testing.assert_array_equal(exported, source.numpy())


def test_our_table_reports_errors_as_our_exceptions():
    array = ad.array(pa.array([1, None], pa.int64()))
    managed = ctypes.c_void_p()
    table = exchange_table(ad.Array)
    with pytest.raises(TypeError, match="found 1 nulls"):
        table.managed_tensor_from_py_object_no_sync(id(array), ctypes.byref(managed))
    assert managed.value is None


@pytest.mark.parametrize("cls", [ad.Array, ad.Tensor])
def test_our_from_dlpack_takes_torch_tensors_through_torchs_table(cls):
    source = torch.arange(6, dtype=torch.float32)
    before = _exchange_calls()
    result = cls.from_dlpack(source)
    assert calls_since(before) == {"exported": 0, "imported": 1}
    exported = np.from_dlpack(result)
    assert address(exported) == source.data_ptr()
    np.testing.assert_array_equal(exported, source.numpy())


def test_our_from_dlpack_takes_our_own_objects_through_our_table():
    source = pa.array([1, 2, 3], pa.int32())
    before = _exchange_calls()
    tensor = ad.Tensor.from_dlpack(ad.array(source))
    assert calls_since(before) == {"exported": 1, "imported": 1}
    assert address(np.from_dlpack(tensor)) == values_address(source)


def test_from_dlpack_with_copy_asks_dunder_dlpack_as_the_table_has_no_copy_argument():
    source = torch.arange(4, dtype=torch.int64)
    before = _exchange_calls()
    result = ad.Tensor.from_dlpack(source, copy=True)
    assert calls_since(before) == {"exported": 0, "imported": 0}
    exported = np.from_dlpack(result)
    assert address(exported) != source.data_ptr()
    np.testing.assert_array_equal(exported, source.numpy())


# The table driven as a C consumer drives it, through its raw function pointers.


_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
_TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.py_object))
_WORK_STREAM = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class ExchangeTable:
    """The function table behind a type's ``__dlpack_c_exchange_api__`` capsule."""

    def __init__(self, cls):
        self.address = _get_pointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
        words = (ctypes.c_void_p * 7).from_address(self.address + 8)
        self.version = tuple((ctypes.c_uint32 * 2).from_address(self.address))
        self.prev_api, self.allocator, from_py, to_py, self.view, stream = (
            words[i] for i in range(6)
        )
        self.from_py_object = _FROM_PY(from_py)
        self.to_py_object = _TO_PY(to_py)
        self.current_work_stream = _WORK_STREAM(stream)


def take_new_reference(out: ctypes.py_object):
    """The object a table wrote into ``out``, owning the new reference the table gave."""
    obj = out.value
    _decref(obj)  # ``out.value`` took a reference of its own; drop the table's.
    return obj


def managed_from(cls, obj):
    """A managed tensor (address) exported through ``cls``'s table."""
    out = ctypes.c_void_p()
    assert ExchangeTable(cls).from_py_object(obj, ctypes.byref(out)) == 0
    return out.value


@pytest.mark.parametrize("cls", [ad.Array, ad.Tensor, ad.FixedShapeTensorArray])
def test_exchange_table_is_a_process_lifetime_dlpack_1_3_table(cls):
    first, second = ExchangeTable(cls), ExchangeTable(cls)
    assert first.address == second.address
    assert first.version == (1, 3)
    assert first.prev_api is None
    stream = ctypes.c_void_p(1)
    assert first.current_work_stream(1, 0, ctypes.byref(stream)) == 0
    assert stream.value is None  # The CPU has no stream.


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x: ad.Array.from_dlpack(x), id="Array"),
        pytest.param(lambda x: ad.Tensor.from_dlpack(x.reshape(2, 3)), id="Tensor"),
        pytest.param(
            lambda x: ad.FixedShapeTensorArray.from_dlpack(x.reshape(3, 2)),
            id="FixedShapeTensorArray",
        ),
    ],
)
def test_exchange_table_exports_a_read_only_versioned_tensor_that_owns_its_data(make, dlpack):
    source = np.arange(6, dtype=np.float32)
    alive = weakref.ref(source)
    obj = make(source)
    pointer = managed_from(type(obj), obj)
    header = (ctypes.c_uint32 * 2).from_address(pointer)
    assert tuple(header) == (1, 3)
    flags = ctypes.c_uint64.from_address(pointer + 24).value
    data = ctypes.c_void_p.from_address(pointer + 32).value
    assert data == source.ctypes.data
    ndim = ctypes.c_int32.from_address(pointer + 32 + 16).value
    assert ndim == np.from_dlpack(obj).ndim
    # Arrow arrays are immutable; the Tensor imported from a writable numpy array is not.
    assert flags == (0 if type(obj) is ad.Tensor else dlpack.READ_ONLY)
    del obj, source
    gc.collect()
    assert alive() is not None  # The managed tensor holds the memory.
    deleter = _DELETER(ctypes.c_void_p.from_address(pointer + 16).value)
    deleter(pointer)
    gc.collect()
    assert alive() is None


def test_exchange_table_hands_our_tensor_to_torchs_table():
    source = pa.array(np.arange(12, dtype=np.int32))
    tensors = ad.FixedShapeTensorArray.from_dlpack(
        np.from_dlpack(ad.array(source)).reshape(3, 2, 2)
    )
    pointer = managed_from(ad.FixedShapeTensorArray, tensors)
    result = ctypes.py_object()
    assert ExchangeTable(torch.Tensor).to_py_object(pointer, ctypes.byref(result)) == 0
    result = take_new_reference(result)
    assert isinstance(result, torch.Tensor)
    assert tuple(result.shape) == (3, 2, 2)
    assert result.data_ptr() == values_address(source)
    np.testing.assert_array_equal(result.numpy(), np.arange(12).reshape(3, 2, 2))


@pytest.mark.parametrize(
    "cls, shape",
    [(ad.Array, (6,)), (ad.Tensor, (2, 3)), (ad.FixedShapeTensorArray, (2, 3))],
    ids=["Array", "Tensor", "FixedShapeTensorArray"],
)
def test_exchange_table_turns_a_foreign_managed_tensor_into_our_object(cls, shape):
    # The table's managed_tensor_to_py_object_no_sync is how a C library returns a result to the
    # framework whose table it uses: here torch's tensor, exported by torch's table, must come
    # back as an arrow_dlpack object sharing torch's memory.
    source = torch.arange(6, dtype=torch.float64).reshape(shape)
    out = ctypes.c_void_p()
    assert ExchangeTable(torch.Tensor).from_py_object(source, ctypes.byref(out)) == 0
    result = ctypes.py_object()
    assert ExchangeTable(cls).to_py_object(out.value, ctypes.byref(result)) == 0
    obj = take_new_reference(result)
    assert type(obj) is cls
    back = np.from_dlpack(obj)
    assert back.shape == shape
    assert back.ctypes.data == source.data_ptr()
    np.testing.assert_array_equal(back, source.numpy())


def test_our_from_dlpack_imports_through_torchs_table_without_calling_dunder_dlpack():
    class NoDunderDLPack(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            raise AssertionError("__dlpack__ must not be called when the exchange table is used")

    source = torch.arange(5, dtype=torch.int16).as_subclass(NoDunderDLPack)
    tensor = ad.Tensor.from_dlpack(source)
    result = np.from_dlpack(tensor)
    assert result.tolist() == [0, 1, 2, 3, 4]
    assert result.ctypes.data == source.data_ptr()
    array = ad.Array.from_dlpack(source)
    assert array.to_pylist() == [0, 1, 2, 3, 4]
    # copy=True cannot go through the table (it has no copy argument): __dlpack__ is asked.
    with pytest.raises(AssertionError, match="must not be called"):
        ad.Tensor.from_dlpack(source, copy=True)
