"""The Python DLPack protocol rules and exception types of docs/contract.md, checked on the
capsules themselves (read with ctypes, as a C consumer reads them) and through real consumers."""

import warnings

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad


def arrow_source():
    """A sliced pyarrow int32 array: the exported data must start at the slice."""
    return pa.array(np.arange(10, dtype=np.int32)).slice(3, 4)


def address(array: pa.Array) -> int:
    return array.buffers()[1].address + array.offset * array.type.byte_width


def each_kind():
    """One object of each exporting class, with the address of its first element."""
    source = arrow_source()
    cells = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    tensors = ad.FixedShapeTensorArray.from_dlpack(cells)
    return [
        (ad.array(source), address(source)),
        (ad.array(source).to_tensor(), address(source)),
        (tensors, cells.ctypes.data),
    ]


KINDS = ["Array", "Tensor", "FixedShapeTensorArray"]


@pytest.fixture(params=range(3), ids=KINDS)
def exported(request):
    """(object, address of its first element) for each exporting class."""
    return each_kind()[request.param]


# Capsule kinds and versions.


@pytest.mark.parametrize("max_version", [None, (0, 0), (0, 8)])
def test_exports_legacy_capsule_without_warning_below_version_one(exported, dlpack, max_version):
    obj, data = exported
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capsule = obj.__dlpack__(max_version=max_version)
    read = dlpack.read(capsule)
    assert read.name == "dltensor"
    assert read.data == data
    assert read.device == (1, 0)


def test_exports_legacy_capsule_when_called_without_arguments(exported, dlpack):
    obj, data = exported
    assert dlpack.name(obj.__dlpack__()) == "dltensor"


@pytest.mark.parametrize("max_version", [(1, 0), (1, 3), (1, 99)])
def test_exports_versioned_capsule_stamped_with_dlpack_1_3(exported, dlpack, max_version):
    obj, data = exported
    read = dlpack.read(obj.__dlpack__(max_version=max_version))
    assert read.name == "dltensor_versioned"
    assert read.version == (1, 3)
    assert read.data == data


def test_exports_versioned_capsule_at_our_version_for_a_newer_major(exported, dlpack):
    # docs/contract.md: anything not below (1, 0) gets "dltensor_versioned at the library's DLPack
    # version"; the array API lets a producer answer max_version with an older version, and the
    # consumer checks the major it finds (numpy and pyarrow answer (2, 0) the same way).
    obj, _ = exported
    read = dlpack.read(obj.__dlpack__(max_version=(2, 0)))
    assert read.name == "dltensor_versioned"
    assert read.version == (1, 3)


# Flags.


def test_flags_arrow_data_read_only_in_versioned_capsules(exported, dlpack):
    obj, _ = exported
    assert dlpack.read(obj.__dlpack__(max_version=(1, 3))).flags == dlpack.READ_ONLY


def test_reports_arrow_tensors_immutable():
    assert ad.array(arrow_source()).to_tensor().is_mutable is False


def test_numpy_receives_arrow_data_read_only(exported):
    obj, _ = exported
    result = np.from_dlpack(obj)
    assert result.flags.writeable is False
    with pytest.raises(ValueError, match="read-only"):
        result[0] = 1


def test_tensor_from_writable_numpy_is_mutable_and_flagged_so(dlpack):
    source = np.arange(6, dtype=np.int32)
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.is_mutable is True
    assert dlpack.read(tensor.__dlpack__(max_version=(1, 3))).flags == 0


def test_tensor_from_read_only_numpy_keeps_read_only_flag(dlpack):
    source = np.arange(6, dtype=np.int32)
    source.flags.writeable = False
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.is_mutable is False
    assert dlpack.read(tensor.__dlpack__(max_version=(1, 3))).flags == dlpack.READ_ONLY


def test_legacy_capsule_of_read_only_data_reaches_jax():
    # JAX asks only for legacy capsules, which cannot say READ_ONLY: they are produced anyway.
    result = jnp.from_dlpack(ad.array(pa.array([7, 8, 9], pa.int16())))
    assert result.tolist() == [7, 8, 9]
    tensors = ad.FixedShapeTensorArray.from_dlpack(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
    np.testing.assert_array_equal(
        np.asarray(jnp.from_dlpack(tensors)), np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    )


# copy=True / None / False.


def test_copy_true_copies_and_flags_is_copied(exported, dlpack):
    obj, data = exported
    read = dlpack.read(obj.__dlpack__(max_version=(1, 3), copy=True))
    assert read.data != data
    assert read.flags & dlpack.IS_COPIED
    assert not read.flags & dlpack.READ_ONLY
    np.testing.assert_array_equal(np.from_dlpack(obj, copy=True), np.from_dlpack(obj))


def test_copy_true_copies_for_legacy_capsules_too(exported, dlpack):
    obj, data = exported
    capsule = obj.__dlpack__(copy=True)
    read = dlpack.read(capsule)
    assert read.name == "dltensor"
    assert read.data != data
    result = np.from_dlpack(dlpack.holder(capsule))
    np.testing.assert_array_equal(result, np.from_dlpack(obj))


def test_copy_true_copies_exactly_the_logical_elements_compacted(dlpack):
    source = np.arange(60, dtype=np.int16).reshape(3, 4, 5)[::2, 1:3, ::-2].transpose(2, 0, 1)
    tensor = ad.Tensor.from_dlpack(source)
    read = dlpack.read(tensor.__dlpack__(max_version=(1, 3), copy=True))
    assert read.shape == source.shape
    assert read.strides == (4, 2, 1)
    assert read.data != source.ctypes.data
    copied = np.from_dlpack(tensor, copy=True)
    np.testing.assert_array_equal(copied, source)
    assert copied.flags.c_contiguous


@pytest.mark.parametrize(
    "make",
    [
        lambda: ad.array(pa.array([True, False, True])),
        lambda: ad.array(pa.chunked_array([[1, 2], [3]], pa.int64())),
    ],
    ids=["booleans (unpacked)", "two chunks (concatenated)"],
)
def test_copies_made_for_an_export_are_flagged_and_not_copied_twice(make, dlpack):
    obj = make()
    for copy in (None, True):
        read = dlpack.read(obj.__dlpack__(max_version=(1, 3), copy=copy))
        assert read.flags & dlpack.IS_COPIED, f"copy={copy}"
        assert not read.flags & dlpack.READ_ONLY, f"copy={copy}"
    assert np.from_dlpack(obj).tolist() == pa.array(obj).to_pylist()


def test_copy_true_of_a_slice_copies_only_the_slice(dlpack):
    array = ad.array(pa.array(np.arange(1000, dtype=np.int64)).slice(500, 3))
    read = dlpack.read(array.__dlpack__(max_version=(1, 3), copy=True))
    assert read.shape == (3,)
    assert np.from_dlpack(array, copy=True).tolist() == [500, 501, 502]


def test_copy_none_shares_memory(exported, dlpack):
    obj, data = exported
    for max_version in (None, (1, 3)):
        read = dlpack.read(obj.__dlpack__(max_version=max_version, copy=None))
        assert read.data == data
    assert not dlpack.read(obj.__dlpack__(max_version=(1, 3))).flags & dlpack.IS_COPIED


def test_copy_false_shares_memory(exported, dlpack):
    obj, data = exported
    for max_version in (None, (1, 3)):
        read = dlpack.read(obj.__dlpack__(max_version=max_version, copy=False))
        assert read.data == data
        assert read.flags in (None, dlpack.READ_ONLY)


def test_rejects_copy_false_for_booleans_with_buffer_error():
    array = ad.array(pa.array([True, False, True]))
    with pytest.raises(BufferError, match="copy=False"):
        array.__dlpack__(copy=False)
    with pytest.raises(BufferError, match="copy=False"):
        array.__dlpack__(max_version=(1, 3), copy=False)


def test_rejects_copy_false_for_several_chunks_with_buffer_error():
    array = ad.array(pa.chunked_array([[1, 2], [3]], pa.int32()))
    with pytest.raises(BufferError, match="copy=False"):
        array.__dlpack__(max_version=(1, 3), copy=False)
    with pytest.raises(BufferError, match="copy=False"):
        np.from_dlpack(array, copy=False)


# Devices and streams.


def test_reports_cpu_device(exported):
    obj, _ = exported
    assert obj.__dlpack_device__() == (1, 0)


def test_accepts_dl_device_cpu(exported, dlpack):
    obj, data = exported
    assert dlpack.read(obj.__dlpack__(dl_device=(1, 0))).data == data


@pytest.mark.parametrize("device", [(2, 0), (1, 1), (13, 0)])
def test_rejects_other_dl_device_with_buffer_error(exported, device):
    obj, _ = exported
    with pytest.raises(BufferError, match="dl_device"):
        obj.__dlpack__(dl_device=device)
    with pytest.raises(ad.ArrowDLPackBufferError):
        obj.__dlpack__(max_version=(1, 3), dl_device=device)


@pytest.mark.parametrize("stream", [0, 1, -1, 2])
def test_rejects_stream_for_cpu_data(exported, stream):
    obj, _ = exported
    with pytest.raises((BufferError, NotImplementedError), match="stream"):
        obj.__dlpack__(stream=stream)


def test_accepts_stream_none(exported, dlpack):
    obj, data = exported
    assert dlpack.read(obj.__dlpack__(stream=None)).data == data


# Exported metadata.


def test_exports_explicit_strides_and_zero_byte_offset(exported, dlpack):
    obj, _ = exported
    for max_version in (None, (1, 3)):
        read = dlpack.read(obj.__dlpack__(max_version=max_version))
        assert read.strides is not None
        assert len(read.strides) == read.ndim
        assert read.byte_offset == 0


def test_exports_row_major_strides_in_elements(dlpack):
    source = pa.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], pa.list_(pa.list_(pa.uint8(), 2), 2))
    read = dlpack.read(ad.array(source).__dlpack__(max_version=(1, 3)))
    assert read.shape == (2, 2, 2)
    assert read.strides == (4, 2, 1)
    assert read.dtype == (1, 8, 1)


def test_exports_slice_with_folded_offset_and_zero_byte_offset(dlpack):
    base = pa.array(np.arange(100, dtype=np.float64))
    read = dlpack.read(ad.array(base.slice(17, 5)).__dlpack__(max_version=(1, 3)))
    assert read.data == base.buffers()[1].address + 17 * 8
    assert read.byte_offset == 0
    assert read.shape == (5,)
    assert read.strides == (1,)
    assert read.dtype == (2, 64, 1)


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_exports_null_data_for_empty_tensors(dlpack, max_version):
    empties = [
        ad.array(pa.array([], pa.int32())),
        ad.array(pa.array(np.arange(4, dtype=np.int32)).slice(4)),
        ad.array(pa.array([], pa.list_(pa.float32(), 3))),
        ad.FixedShapeTensorArray.from_dlpack(np.zeros((0, 2, 2), np.int32)),
        ad.Tensor.from_dlpack(np.zeros((3, 0), np.int32)),
    ]
    for empty in empties:
        read = dlpack.read(empty.__dlpack__(max_version=max_version))
        assert read.data is None
        assert read.byte_offset == 0
        assert 0 in read.shape


def test_exports_dtype_codes_of_each_kind(dlpack):
    cases = [
        (pa.array([1, 0], pa.int8()), (0, 8, 1)),
        (pa.array([1, 0], pa.uint64()), (1, 64, 1)),
        (pa.array(np.array([1, 0], np.float16)), (2, 16, 1)),
        (pa.array([1, 0], pa.float32()), (2, 32, 1)),
        (pa.array([True, False]), (6, 8, 1)),
    ]
    for source, expected in cases:
        array = ad.array(source)
        assert dlpack.read(array.__dlpack__(max_version=(1, 3))).dtype == expected


# Capsules are consumed once.


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_rejects_capsule_consumed_twice_with_value_error(dlpack, max_version):
    capsule = ad.array(pa.array([1, 2, 3])).__dlpack__(max_version=max_version)
    name = dlpack.name(capsule)
    assert ad.Array.from_dlpack(capsule).to_pylist() == [1, 2, 3]
    assert dlpack.name(capsule) == "used_" + name
    with pytest.raises(ValueError, match="consumed"):
        ad.Array.from_dlpack(capsule)
    with pytest.raises(ValueError, match="consumed"):
        ad.Tensor.from_dlpack(capsule)


def test_rejects_capsule_consumed_by_numpy_with_value_error(dlpack):
    capsule = np.arange(3).__dlpack__()
    np.from_dlpack(dlpack.holder(capsule))
    with pytest.raises(ValueError, match="consumed"):
        ad.Tensor.from_dlpack(capsule)


def test_rejects_capsule_of_another_kind_with_type_error():
    schema_capsule = pa.int32().__arrow_c_schema__()
    with pytest.raises(TypeError, match="dltensor"):
        ad.Tensor.from_dlpack(schema_capsule)


def test_dlpack_arguments_are_keyword_only(exported):
    obj, _ = exported
    with pytest.raises(TypeError):
        obj.__dlpack__(None)
    with pytest.raises(TypeError):
        obj.__dlpack__(None, (1, 3))
