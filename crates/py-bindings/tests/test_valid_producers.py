"""Hand-built DLPack producers of unusual but valid tensors, and the happy path: each imports
exactly (zero-copy where the layout allows), its deleter called exactly once, when the last view
of it dies; and protocol objects that carry their exchange attributes oddly.

The malformed producers are in ``test_hostile_producers.py``; the helper and its case tables are
loaded by ``conftest.py`` (the tests are not a package).
"""

import struct

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad

import _dlpack_ctypes as dl  # noqa: E402
from _dlpack_cases import ENTRY_POINTS  # noqa: E402
from _dlpack_cases import dlpack_f32 as f32  # noqa: E402


# --- unusual but valid tensors -------------------------------------------------------------------


def test_metadata_is_copied_at_import():
    managed = dl.ManagedTensor(f32(shape=(2, 3), strides=(3, 1)))
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    managed.set_shape(0, 1_000_000)
    assert tensor.shape == (2, 3)
    assert tensor.strides == (12, 4)
    expected = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.from_dlpack(tensor), expected)
    del tensor
    assert managed.deleted == 1


@pytest.mark.parametrize(
    "spec",
    [
        f32(shape=(0, 3), data_address=0),
        f32(shape=(0, 3), strides=(-7, 99), data_address=0),
        # An empty tensor's data pointer is never read, whatever it is.
        f32(shape=(3, 0), data_address=2**64 - 8),
        f32(shape=(0,), data_offset=1),
    ],
    ids=["null_data", "wild_strides", "wild_pointer", "misaligned"],
)
def test_empty_tensor_imports_and_is_released_at_once(spec):
    managed = dl.ManagedTensor(spec)
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    assert managed.deleted == 1, "an empty tensor holds no foreign memory"
    assert tensor.shape == tuple(spec.shape)
    assert tensor.size == 0
    assert np.from_dlpack(tensor).shape == tuple(spec.shape)


def test_zero_dimensional_tensor_with_null_shape_imports():
    managed = dl.ManagedTensor(f32(shape=None, ndim=0, strides=None, byte_offset=12))
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    assert tensor.shape == () and tensor.size == 1
    assert np.from_dlpack(tensor)[()] == 3.0
    del tensor
    assert managed.deleted == 1


def test_null_strides_with_ndim_2_mean_row_major():
    managed = dl.ManagedTensor(f32(shape=(2, 3), strides=None, versioned=False))
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    assert tensor.strides == (12, 4) and tensor.is_row_major
    expected = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.from_dlpack(tensor), expected)
    del tensor
    assert managed.deleted == 1


def test_zero_and_negative_strides_are_viewed_exactly():
    # Rows in reverse order, every other column: storage holds 0..12.
    spec = dl.float32_spec(range(12), shape=(3, 2), strides=(-4, 2), byte_offset=8 * 4)
    managed = dl.ManagedTensor(spec)
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    assert tensor.strides == (-16, 8)
    np.testing.assert_array_equal(np.from_dlpack(tensor), [[8, 10], [4, 6], [0, 2]])
    del tensor
    assert managed.deleted == 1
    broadcast = dl.ManagedTensor(dl.float32_spec(range(3), shape=(2, 3), strides=(0, 1)))
    tensor = ad.Tensor.from_dlpack(broadcast.capsule())
    np.testing.assert_array_equal(np.from_dlpack(tensor), [[0, 1, 2], [0, 1, 2]])
    del tensor
    assert broadcast.deleted == 1


def test_read_only_flag_is_honoured():
    managed = dl.ManagedTensor(f32(flags=dl.READ_ONLY))
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    assert not tensor.is_mutable
    writable = dl.ManagedTensor(f32())
    assert ad.Tensor.from_dlpack(writable.capsule()).is_mutable
    assert writable.deleted == 1
    del tensor
    assert managed.deleted == 1


@pytest.mark.parametrize(
    "entry, spec, pattern",
    [
        ("Array", f32(shape=(2, 3)), r"1-D|one-dimensional|dimension"),
        ("Array", f32(shape=(3,), strides=(2,)), r"contiguous|stride"),
        ("FixedShapeTensorArray", f32(shape=(), byte_offset=4), r"0-d|zero-dimensional|dimension"),
        ("FixedShapeTensorArray", f32(shape=(2, 3), strides=(1, 2)), r"first-major|largest stride"),
    ],
    ids=["array_2d", "array_strided", "fixed_shape_0d", "fixed_shape_column_major"],
)
def test_valid_tensor_that_cannot_become_the_requested_object_is_released_once(
    entry, spec, pattern
):
    managed = dl.ManagedTensor(spec)
    capsule = managed.capsule()
    with pytest.raises(ValueError, match=pattern) as raised:
        ENTRY_POINTS[entry](capsule, copy=False)
    assert isinstance(raised.value, ad.ArrowDLPackError)
    assert managed.deleted == 1


def test_bool_tensor_is_packed_into_an_array_and_released_at_once():
    managed = dl.ManagedTensor(dl.array_spec(np.array([True, False, True, True])))
    array = ad.Array.from_dlpack(managed.capsule())
    assert array.type == "bool"
    assert array.to_pylist() == [True, False, True, True]
    assert managed.deleted == 1, "packing copied the values; the producer is released at once"
    refused = dl.ManagedTensor(dl.array_spec(np.array([True, False])))
    capsule = refused.capsule()
    with pytest.raises(BufferError, match=r"copy=False"):
        ad.Array.from_dlpack(capsule, copy=False)
    assert refused.deleted == 1


# --- the happy path ------------------------------------------------------------------------------


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_hand_built_tensor_imports_zero_copy_and_is_released_when_the_last_reexport_dies(versioned):
    values = np.arange(12, dtype=np.int32).reshape(3, 4)
    producer = dl.Producer(dl.array_spec(values, versioned=versioned), mode="ignore")
    tensor = ad.Tensor.from_dlpack(producer)
    assert (tensor.shape, tensor.strides, tensor.type) == ((3, 4), (16, 4), "int32")
    reexported = np.from_dlpack(tensor)
    assert reexported.ctypes.data == producer.data_address, "the import must not copy"
    np.testing.assert_array_equal(reexported, values)
    del tensor
    assert producer.deleted == 0, "numpy's re-export still holds the producer's memory"
    np.testing.assert_array_equal(reexported, values)
    del reexported
    assert producer.deleted == 1
    assert dl.STRAY_DELETES == []


def test_hand_built_array_survives_in_pyarrow_and_is_released_once():
    producer = dl.Producer(dl.array_spec(np.arange(5, dtype=np.int64)))
    array = ad.Array.from_dlpack(producer)
    arrow = pa.array(array)
    assert arrow.buffers()[1].address == producer.data_address
    del array
    assert producer.deleted == 0
    assert arrow.to_pylist() == [0, 1, 2, 3, 4]
    del arrow
    assert producer.deleted == 1


def test_hand_built_fixed_shape_tensor_array_is_zero_copy_and_released_once():
    values = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    producer = dl.Producer(dl.array_spec(values))
    array = ad.FixedShapeTensorArray.from_dlpack(producer)
    assert array.shape == [3, 4] and len(array) == 2
    back = np.from_dlpack(array)
    assert back.ctypes.data == producer.data_address
    np.testing.assert_array_equal(back, values)
    del array
    assert producer.deleted == 0
    del back
    assert producer.deleted == 1


def test_values_written_by_the_producer_after_import_are_seen():
    producer = dl.Producer(f32())
    tensor = ad.Tensor.from_dlpack(producer)
    producer.storage.write(0, struct.pack("<f", 42.0))
    assert np.from_dlpack(tensor)[0] == 42.0, "zero-copy: the view is the producer's memory"
    del tensor
    assert producer.deleted == 1


# Regressions of the hostile-producer review (docs/reliability.md): each failed before its fix.


def test_copy_of_a_huge_broadcast_is_a_memory_error_not_a_panic():
    # 2**47 float64 elements (1 PiB) viewed over one element: the copy cannot be allocated.
    broadcast = np.broadcast_to(np.float64(1), (2**47,))
    tensor = ad.Tensor.from_dlpack(broadcast)
    assert tensor.shape == (2**47,)
    with pytest.raises(MemoryError):
        np.from_dlpack(tensor, copy=True)
    with pytest.raises(MemoryError):
        ad.Tensor.from_dlpack(broadcast, copy=True)
    with pytest.raises(MemoryError):
        ad.Tensor.from_dlpack(tensor.__dlpack__(max_version=(1, 3), copy=True))


def test_copy_of_complex64_at_an_address_4_mod_8_reads_each_value_aligned():
    # complex64 needs 4-byte alignment only; a strided copy must not read it as 8-byte words
    # (undefined behaviour, which the debug-build pass turns into an abort).
    values = np.arange(8, dtype=np.float32).view(np.complex64)  # 4 complex values
    spec = dl.array_spec(values, data_offset=4, shape=(2,), strides=(2,))
    spec = spec.replace(content=b"\0" * 4 + values.tobytes())
    managed = dl.ManagedTensor(spec)
    assert managed.data_address % 8 == 4
    capsule = managed.capsule()
    tensor = ad.Tensor.from_dlpack(capsule)
    copied = np.from_dlpack(tensor, copy=True)
    np.testing.assert_array_equal(copied, values[::2])
    del tensor, capsule
    assert managed.deleted == 1


class _ExchangeAttributeNone:
    """A producer whose type has ``__dlpack_c_exchange_api__ = None`` and a working ``__dlpack__``."""

    __dlpack_c_exchange_api__ = None

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


@pytest.mark.parametrize("entry", list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
def test_an_exchange_attribute_that_is_no_capsule_falls_back_to_dlpack(entry):
    source = np.arange(6, dtype=np.float32).reshape(3, 2)
    if entry == "Array":
        source = source.ravel()
    imported = ENTRY_POINTS[entry](_ExchangeAttributeNone(source))
    np.testing.assert_array_equal(np.from_dlpack(imported), source)


def test_protocols_carried_by_an_instance_are_found_after_an_instance_without_them():
    # `types.SimpleNamespace` is an immutable type whose instances carry attributes in their
    # `__dict__`: "absent" for one instance says nothing about the next.
    import types

    with pytest.raises(TypeError):
        ad.array(types.SimpleNamespace())
    source = pa.array([1, 2, 3])
    chunked = pa.chunked_array([source])
    with_stream = types.SimpleNamespace(
        __arrow_c_stream__=lambda requested_schema=None: chunked.__arrow_c_stream__()
    )
    assert ad.array(with_stream).to_pylist() == [1, 2, 3]
    with_array = types.SimpleNamespace(
        __arrow_c_array__=lambda requested_schema=None: source.__arrow_c_array__()
    )
    assert ad.array(with_array).to_pylist() == [1, 2, 3]
    with pytest.raises(TypeError):
        ad.Tensor.from_dlpack(types.SimpleNamespace())
    array = np.arange(3.0)
    with_dlpack = types.SimpleNamespace(
        __dlpack__=array.__dlpack__, __dlpack_device__=array.__dlpack_device__
    )
    np.testing.assert_array_equal(np.from_dlpack(ad.Tensor.from_dlpack(with_dlpack)), array)
