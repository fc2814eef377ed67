"""The Python DLPack protocol rules of docs/contract.md on the consumer side, and the exception
types of both sides: what `from_dlpack` imports (strides, offsets, versions, devices, `copy`) and
what it refuses, checked with hand-built capsules and real producers."""

import ctypes

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad


# Import rules.


def test_imports_null_strides_as_row_major(producer):
    source = np.arange(12, dtype=np.int32).reshape(3, 4)
    tensor = ad.Tensor.from_dlpack(producer.capsule(source, null_strides=True))
    assert tensor.strides == (16, 4)
    np.testing.assert_array_equal(np.from_dlpack(tensor), source)
    array = ad.Array.from_dlpack(producer.capsule(source[1], null_strides=True))
    assert array.to_pylist() == [4, 5, 6, 7]


def test_imports_byte_offset(producer):
    base = np.arange(10, dtype=np.int64)
    tensor = ad.Tensor.from_dlpack(producer.capsule(base[3:], byte_offset=3 * 8))
    result = np.from_dlpack(tensor)
    assert result.tolist() == list(range(3, 10))
    assert result.ctypes.data == base[3:].ctypes.data
    array = ad.Array.from_dlpack(producer.capsule(base[5:], byte_offset=5 * 8))
    assert array.to_pylist() == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("version", [(1, 0), (1, 1), (1, 3), (1, 200)])
def test_imports_any_minor_version(producer, version):
    source = np.arange(4, dtype=np.uint16)
    assert ad.Array.from_dlpack(producer.capsule(source, version=version)).to_pylist() == [
        0,
        1,
        2,
        3,
    ]


def test_imports_legacy_capsule(producer):
    source = np.arange(4, dtype=np.float32)
    array = ad.Array.from_dlpack(producer.capsule(source, versioned=False))
    assert array.to_pylist() == [0.0, 1.0, 2.0, 3.0]


def test_imports_zero_and_negative_strides_as_tensor():
    source = np.broadcast_to(np.arange(3, dtype=np.int8)[::-1], (4, 3))
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.strides == (0, -1)
    assert tensor.is_mutable is False
    result = np.from_dlpack(tensor)
    np.testing.assert_array_equal(result, source)
    assert result.ctypes.data == source.ctypes.data


def test_imports_empty_inputs_with_any_stride(producer):
    for strides in ((0,), (7,), (-3,)):
        source = np.lib.stride_tricks.as_strided(np.zeros(1, np.int32), (0,), (strides[0] * 4,))
        assert ad.Array.from_dlpack(producer.capsule(source)).to_pylist() == []
        assert ad.Tensor.from_dlpack(producer.capsule(source)).shape == (0,)


def test_imports_from_legacy_only_producer_by_retrying_without_keywords():
    class LegacyOnly:
        calls = []

        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            LegacyOnly.calls.append(stream)
            return self.array.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    source = np.arange(5, dtype=np.int32)
    array = ad.Array.from_dlpack(LegacyOnly(source))
    assert array.to_pylist() == [0, 1, 2, 3, 4]
    assert pa.array(array).buffers()[1].address == source.ctypes.data
    assert LegacyOnly.calls == [None]


def test_imports_from_jax_legacy_capsules():
    source = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.shape == (2, 3)
    np.testing.assert_array_equal(np.from_dlpack(tensor), np.asarray(source))


@pytest.mark.parametrize("device", [None, "cpu", (1, 0)])
def test_accepts_cpu_device_argument(device):
    array = ad.Array.from_dlpack(np.arange(3, dtype=np.int8), device=device)
    assert array.to_pylist() == [0, 1, 2]


@pytest.mark.parametrize("device", [(2, 0), "cuda", (1, 1)])
def test_rejects_other_device_argument_with_buffer_error(device):
    for cls in (ad.Array, ad.Tensor, ad.FixedShapeTensorArray):
        with pytest.raises(BufferError, match="device"):
            cls.from_dlpack(np.arange(4, dtype=np.int8).reshape(2, 2), device=device)


def test_rejects_producer_on_another_device_before_export():
    class OnGpu:
        exported = False

        def __dlpack__(self, **kwargs):
            OnGpu.exported = True
            raise AssertionError("must not be asked to export")

        def __dlpack_device__(self):
            return (2, 0)

    # Arrow arrays hold CPU data only; a Tensor keeps device data, but not on another device
    # than the one requested.
    for import_ in (
        ad.Array.from_dlpack,
        ad.FixedShapeTensorArray.from_dlpack,
        lambda x: ad.Tensor.from_dlpack(x, device="cpu"),
        lambda x: ad.Tensor.from_dlpack(x, device=(2, 1)),
    ):
        with pytest.raises(BufferError, match=r"\(2, 0\)"):
            import_(OnGpu())
    assert OnGpu.exported is False


def test_from_dlpack_copy_true_gives_fresh_memory():
    source = np.arange(6, dtype=np.int32)
    array = ad.Array.from_dlpack(source, copy=True)
    assert pa.array(array).buffers()[1].address != source.ctypes.data
    source[0] = 100
    assert array.to_pylist() == [0, 1, 2, 3, 4, 5]
    tensor = ad.Tensor.from_dlpack(source[::2], copy=True)
    assert np.from_dlpack(tensor).ctypes.data != source.ctypes.data
    assert tensor.is_row_major
    assert np.from_dlpack(tensor).tolist() == [100, 2, 4]


def test_from_dlpack_copy_true_gives_a_row_major_tensor():
    # The stub: copy=True "gives a row-major copy that no one else references", whatever the
    # producer's copy looks like (numpy's copy keeps a transposed layout).
    source = np.arange(24, dtype=np.float64).reshape(2, 3, 4).transpose(2, 0, 1)
    tensor = ad.Tensor.from_dlpack(source, copy=True)
    assert tensor.shape == (4, 2, 3)
    assert tensor.is_row_major
    assert tensor.strides == (48, 24, 8)
    result = np.from_dlpack(tensor)
    assert result.ctypes.data != source.ctypes.data
    np.testing.assert_array_equal(result, source)


def test_from_dlpack_copy_false_shares_memory():
    source = np.arange(6, dtype=np.int32)
    array = ad.Array.from_dlpack(source, copy=False)
    assert pa.array(array).buffers()[1].address == source.ctypes.data
    tensor = ad.Tensor.from_dlpack(source, copy=False)
    assert np.from_dlpack(tensor).ctypes.data == source.ctypes.data


def test_rejects_copy_false_when_producer_copied(producer, dlpack):
    capsule = producer.capsule(np.arange(3, dtype=np.int32), flags=dlpack.IS_COPIED)
    with pytest.raises(BufferError, match="copy=False"):
        ad.Array.from_dlpack(dlpack.holder(capsule), copy=False)


def test_from_dlpack_copy_true_on_array_accepts_strided_input():
    source = np.arange(10, dtype=np.int16)[::-3]
    assert ad.Array.from_dlpack(source, copy=True).to_pylist() == [9, 6, 3, 0]


# Exception types and messages.


def test_exception_classes_subclass_the_builtins():
    assert issubclass(ad.ArrowDLPackTypeError, TypeError)
    assert issubclass(ad.ArrowDLPackValueError, ValueError)
    assert issubclass(ad.ArrowDLPackBufferError, BufferError)
    for cls in (ad.ArrowDLPackTypeError, ad.ArrowDLPackValueError, ad.ArrowDLPackBufferError):
        assert issubclass(cls, ad.ArrowDLPackError)
        assert cls.__module__ == "arrow_dlpack"


def test_rejects_export_of_nulls_with_type_error():
    with_nulls = [
        ad.array(pa.array([1, None, 3], pa.int32())),
        ad.array(pa.array([[1, 2], None], pa.list_(pa.int32(), 2))),
        ad.array(pa.array([[1, None], [3, 4]], pa.list_(pa.int32(), 2))),
    ]
    for array in with_nulls:
        for max_version in (None, (1, 3)):
            with pytest.raises(ad.ArrowDLPackTypeError, match="nulls"):
                array.__dlpack__(max_version=max_version)
        with pytest.raises(TypeError, match="nulls"):
            np.from_dlpack(array)


def test_exports_slice_that_excludes_the_nulls():
    array = ad.array(pa.array([1, None, 3, 4], pa.int64()).slice(2))
    assert np.from_dlpack(array).tolist() == [3, 4]


@pytest.mark.parametrize(
    "source",
    [
        pa.array(["a", "b"]),
        pa.array([b"x"], pa.binary()),
        pa.array([1], pa.decimal128(5, 2)),
        pa.array([{"x": 1}]),
        pa.array([[1, 2]], pa.list_(pa.int32())),
        pa.array([1], pa.timestamp("s")),
        pa.array([1], pa.date32()),
        pa.array([None], pa.null()),
    ],
    ids=lambda source: str(source.type),
)
def test_rejects_export_of_types_dlpack_cannot_carry_with_type_error(source):
    array = ad.array(source)
    with pytest.raises(ad.ArrowDLPackTypeError, match="expected"):
        array.__dlpack__()
    with pytest.raises(TypeError):
        np.from_dlpack(array)


def test_rejects_to_tensor_with_nulls_with_value_error():
    with pytest.raises(ad.ArrowDLPackValueError, match="allow_nulls"):
        ad.array(pa.array([1.0, None], pa.float32())).to_tensor()
    with pytest.raises(ValueError, match="allow_nulls"):
        ad.array(pa.array([[1, 2], None], pa.list_(pa.int8(), 2))).to_tensor()


def test_rejects_array_import_of_multidimensional_tensor_with_value_error():
    with pytest.raises(ad.ArrowDLPackValueError, match="1 dimension"):
        ad.Array.from_dlpack(np.zeros((2, 2), np.int32))
    with pytest.raises(ValueError, match="1 dimension"):
        ad.Array.from_dlpack(np.zeros((), np.int32))


def test_rejects_array_import_of_strided_tensor_with_value_error():
    with pytest.raises(ad.ArrowDLPackValueError, match="contiguous.*pass copy=True"):
        ad.Array.from_dlpack(np.arange(10, dtype=np.int32)[::2])
    with pytest.raises(ValueError, match="contiguous"):
        ad.Array.from_dlpack(np.arange(10, dtype=np.int32)[::-1])
    # The copy the message offers.
    assert ad.Array.from_dlpack(np.arange(10, dtype=np.int32)[::2], copy=True).to_pylist() == [0, 2, 4, 6, 8]


def test_rejects_fixed_shape_tensor_import_of_non_first_major_tensor_with_value_error():
    source = np.arange(24, dtype=np.int32).reshape(2, 3, 4).transpose(1, 0, 2)
    with pytest.raises(ad.ArrowDLPackValueError, match="first-major"):
        ad.FixedShapeTensorArray.from_dlpack(source)


def test_rejects_fixed_shape_tensor_import_of_0d_tensor_with_value_error():
    with pytest.raises(ad.ArrowDLPackValueError, match="0-dimensional"):
        ad.FixedShapeTensorArray.from_dlpack(np.array(5, np.int32))


def test_rejects_import_of_dtype_arrow_cannot_hold_with_value_error():
    with pytest.raises(ad.ArrowDLPackValueError, match="complex64"):
        ad.Array.from_dlpack(np.zeros(2, np.complex64))
    with pytest.raises(ad.ArrowDLPackValueError, match="complex64"):
        ad.FixedShapeTensorArray.from_dlpack(np.zeros((2, 2), np.complex64))


def test_imports_dtype_arrow_cannot_hold_as_tensor():
    # A Tensor holds any one-lane DLPack dtype; only Arrow arrays are limited to Arrow's types.
    tensor = ad.Tensor.from_dlpack(np.array([1 + 2j, 3 - 4j], np.complex64))
    assert tensor.type == "complex64"
    np.testing.assert_array_equal(np.from_dlpack(tensor), np.array([1 + 2j, 3 - 4j], np.complex64))


def test_rejects_import_of_lanes_other_than_one_with_value_error(producer):
    capsule = producer.capsule(np.arange(4, dtype=np.float32), lanes=4)
    with pytest.raises(ad.ArrowDLPackValueError, match="lanes"):
        ad.Tensor.from_dlpack(capsule)


@pytest.mark.parametrize("version", [(0, 9), (2, 0), (99, 1)])
def test_rejects_import_of_unknown_major_version_with_value_error(producer, version):
    capsule = producer.capsule(np.arange(4, dtype=np.float32), version=version)
    with pytest.raises(ad.ArrowDLPackValueError, match="version"):
        ad.Tensor.from_dlpack(capsule)


def test_rejects_import_of_malformed_tensor_with_value_error(producer):
    def negative_extent(tensor):
        ctypes.cast(tensor.shape, ctypes.POINTER(ctypes.c_int64))[0] = -2

    def null_data(tensor):
        tensor.data = None

    for edit in (negative_extent, null_data):
        capsule = producer.capsule(np.arange(4, dtype=np.int32), edit=edit)
        with pytest.raises(ad.ArrowDLPackValueError):
            ad.Tensor.from_dlpack(capsule)


@pytest.mark.parametrize("obj", [5, "text", [1, 2], object(), None])
def test_rejects_objects_without_any_protocol(obj):
    with pytest.raises((TypeError, AttributeError)):
        ad.array(obj)
    for cls in (ad.Array, ad.Tensor, ad.FixedShapeTensorArray):
        with pytest.raises((TypeError, AttributeError), match="DLPack|dltensor"):
            cls.from_dlpack(obj)
    with pytest.raises((TypeError, AttributeError)):
        ad.FixedShapeTensorArray.from_tensor(obj)
