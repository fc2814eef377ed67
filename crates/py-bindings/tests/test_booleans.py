"""Booleans: bit-packed boolean arrays export as DLPack ``bool`` tensors (an unpacking copy,
refused with ``copy=False``), and bool tensors import as boolean arrays (a packing copy), with
PyArrow's ``to_numpy`` as the oracle; numpy, torch and JAX as peers.
"""

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad


def address(array: np.ndarray) -> int:
    return array.ctypes.data


# Seventeen values, so that slices cross byte boundaries at every offset.
SWEEP_BOOLS = [
    True,
    False,
    True,
    True,
    False,
    False,
    True,
    False,
    True,
    True,
    False,
    True,
    False,
    False,
    True,
    True,
    True,
]


BOOLS = [True, False, False, True, True, False, True, True, False, True, False]


@pytest.mark.parametrize("offset", [0, 1, 3, 8, 9])
def test_boolean_array_exports_as_a_bool_tensor_like_pyarrows_to_numpy(offset):
    source = pa.array(BOOLS)[offset:]
    expected = source.to_numpy(zero_copy_only=False)
    result = np.from_dlpack(ad.array(source))
    assert result.dtype == np.bool_
    np.testing.assert_array_equal(result, expected)
    result = torch.from_dlpack(ad.array(source))
    assert result.dtype == torch.bool
    np.testing.assert_array_equal(result.numpy(), expected)


# numpy retries pyarrow's refusal without keywords, which pyarrow answers with this warning.
@pytest.mark.filterwarnings("ignore:Exporting an unversioned DLPack capsule")
def test_pyarrow_refuses_booleans_that_we_export():
    with pytest.raises(TypeError, match="Bit-packed boolean"):
        np.from_dlpack(pa.array([True, False]))
    np.testing.assert_array_equal(np.from_dlpack(ad.array(pa.array([True, False]))), [1, 0])


def test_boolean_export_is_a_copy_refused_with_copy_false():
    array = ad.array(pa.array(BOOLS))
    with pytest.raises(BufferError, match=r"unpacking bit-packed booleans.*copy=False"):
        array.__dlpack__(max_version=(1, 3), copy=False)
    with pytest.raises(BufferError, match="unpacking bit-packed booleans"):
        np.from_dlpack(array, copy=False)
    np.testing.assert_array_equal(np.from_dlpack(array, copy=True), BOOLS)


def test_boolean_export_with_nulls_is_a_type_error():
    with pytest.raises(TypeError, match="found 1 nulls"):
        np.from_dlpack(ad.array(pa.array([True, None, False])))


def test_boolean_array_to_tensor_and_fixed_size_lists_of_booleans():
    source = pa.array([[True, False], [False, False], [True, True]], pa.list_(pa.bool_(), 2))
    tensor = ad.array(source).to_tensor()
    assert tensor.type == "bool"
    assert tensor.shape == (3, 2)
    np.testing.assert_array_equal(
        np.from_dlpack(tensor), [[True, False], [False, False], [True, True]]
    )


@pytest.mark.parametrize(
    "make", [lambda: np.array(BOOLS), lambda: torch.tensor(BOOLS)], ids=["numpy", "torch"]
)
def test_array_from_a_bool_tensor_is_a_boolean_array(make):
    array = ad.Array.from_dlpack(make())
    assert array.type == "bool"
    result = pa.array(array)
    assert result.type == pa.bool_()
    assert result.equals(pa.array(BOOLS))


def test_array_from_a_bool_tensor_refuses_copy_false():
    with pytest.raises(BufferError, match=r"packing a bool tensor.*copy=False"):
        ad.Array.from_dlpack(np.array(BOOLS), copy=False)


def test_tensor_from_a_bool_tensor_stays_a_zero_copy_bool_tensor():
    source = np.array(BOOLS)
    tensor = ad.Tensor.from_dlpack(source, copy=False)
    assert tensor.type == "bool"
    assert tensor.shape == (len(BOOLS),)
    result = np.from_dlpack(tensor)
    assert address(result) == address(source)
    np.testing.assert_array_equal(result, source)


# Sweeps over slices and producers.


@pytest.mark.parametrize("offset", [0, 1, 7, 8, 9, 17])
@pytest.mark.parametrize("length", [0, 1, 8, 9])
def test_exports_sliced_booleans_with_pyarrows_values(offset, length):
    source = pa.array(SWEEP_BOOLS + SWEEP_BOOLS).slice(offset, length)
    expected = source.to_numpy(zero_copy_only=False)
    array = ad.array(source)
    as_numpy = np.from_dlpack(array)
    assert as_numpy.dtype == np.bool_
    np.testing.assert_array_equal(as_numpy, expected)
    np.testing.assert_array_equal(torch.from_dlpack(array).numpy(), expected)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(array)), expected)


def test_boolean_export_is_a_private_writable_copy(dlpack):
    source = pa.array(SWEEP_BOOLS)
    array = ad.array(source)
    read = dlpack.read(array.__dlpack__(max_version=(1, 3)))
    assert not read.flags & dlpack.READ_ONLY
    result = np.from_dlpack(array)
    result[:] = False
    assert array.to_pylist() == SWEEP_BOOLS
    assert source.to_pylist() == SWEEP_BOOLS


def test_boolean_to_tensor_with_nulls_allowed_keeps_valid_values():
    source = pa.array([True, None, False, True, None])
    array = ad.array(source)
    with pytest.raises(ad.ArrowDLPackValueError, match="allow_nulls"):
        array.to_tensor()
    result = np.from_dlpack(array.to_tensor(allow_nulls=True))
    assert result.dtype == np.bool_
    assert (result[0], result[2], result[3]) == (True, False, True)


def test_rejects_fixed_size_list_of_booleans_export_with_copy_false():
    array = ad.array(pa.array([[True, False], [False, True]], pa.list_(pa.bool_(), 2)))
    with pytest.raises(ad.ArrowDLPackBufferError, match="copy=False"):
        array.__dlpack__(max_version=(1, 3), copy=False)
    assert np.from_dlpack(array).tolist() == [[True, False], [False, True]]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda values: np.array(values), id="numpy"),
        pytest.param(lambda values: torch.tensor(values), id="torch"),
        pytest.param(lambda values: jnp.array(values), id="jax"),
        pytest.param(lambda values: np.array(values + values)[::2], id="numpy-strided"),
    ],
)
def test_imports_bool_tensors_as_boolean_arrays(make):
    values = SWEEP_BOOLS[:9]
    source = make(values)
    expected = list(np.asarray(source))
    copy = True if isinstance(source, np.ndarray) and not source.flags.c_contiguous else None
    array = ad.Array.from_dlpack(source, copy=copy)
    assert array.type == "bool"
    assert array.to_pylist() == expected
    back = pa.array(array)
    assert back.type == pa.bool_()
    assert back.to_pylist() == expected


def test_bool_tensor_round_trips_through_our_array_and_back():
    source = np.array(SWEEP_BOOLS)
    array = ad.Array.from_dlpack(source)
    np.testing.assert_array_equal(np.from_dlpack(array), source)
