"""Every example of PyArrow's DLPack guide, with arrow_dlpack objects in place of PyArrow's and
the guide's printed output checked (docs/compatibility.md says what the guide covers)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

ADDRESS = re.compile(r" object at 0x[0-9a-f]+>")


def body(obj) -> str:
    """A repr without its first line (the class name and address)."""
    return repr(obj).split("\n", 1)[1]


# Producing


def test_guide_pyarrow_array_repr_matches_pyarrow():
    source = pa.array([2, 0, 2, 4])
    array = ad.array(source)
    assert ADDRESS.sub(">", repr(array)) == "<arrow_dlpack.Array>\n[\n  2,\n  0,\n  2,\n  4\n]"
    assert body(array) == body(source)


def test_guide_array_to_numpy():
    array = ad.array(pa.array([2, 0, 2, 4]))
    result = np.from_dlpack(array)
    assert result.dtype == np.int64
    assert result.tolist() == [2, 0, 2, 4]
    assert repr(result) == "array([2, 0, 2, 4])"


def test_guide_array_to_torch():
    array = ad.array(pa.array([2, 0, 2, 4]))
    result = torch.from_dlpack(array)
    assert result.dtype == torch.int64
    assert repr(result) == "tensor([2, 0, 2, 4])"


def test_guide_array_to_jax_numpy_and_jax_dlpack_in_32_bit_mode(jax_x32):
    array = ad.array(pa.array([2, 0, 2, 4]))
    for result in (jnp.from_dlpack(array), jax.dlpack.from_dlpack(array)):
        # As in the guide: without jax_enable_x64, JAX narrows int64 to int32.
        assert result.dtype == jnp.int32
        assert result.tolist() == [2, 0, 2, 4]
        assert repr(result) == "Array([2, 0, 2, 4], dtype=int32)"


def test_guide_array_to_jax_keeps_int64_in_64_bit_mode(jax_x64):
    result = jnp.from_dlpack(ad.array(pa.array([2, 0, 2, 4])))
    assert result.dtype == jnp.int64
    assert result.tolist() == [2, 0, 2, 4]


def test_guide_fixed_size_list_to_tensor_repr_and_strides():
    source = pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float64(), 2))
    tensor = ad.array(source).to_tensor()
    assert repr(tensor) == ("<arrow_dlpack.Tensor>\ntype: double\nshape: (3, 2)\nstrides: (16, 8)")
    assert body(tensor) == body(source.to_tensor())
    assert tensor.shape == (3, 2)
    assert tensor.strides == (16, 8)
    assert tensor.type == "double"


def test_guide_fixed_size_list_tensor_to_numpy():
    source = pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float64(), 2))
    result = np.from_dlpack(ad.array(source).to_tensor())
    assert repr(result) == "array([[1., 2.],\n       [3., 4.],\n       [5., 6.]])"
    assert result.ctypes.data == source.values.buffers()[1].address


def test_guide_fixed_shape_tensor_array_from_nested_list_tensor():
    nested = pa.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], pa.list_(pa.list_(pa.int32(), 2), 2))
    tensor_array = ad.FixedShapeTensorArray.from_tensor(ad.array(nested).to_tensor())
    assert tensor_array.type == "extension<arrow.fixed_shape_tensor[value_type=int32, shape=[2,2]]>"
    assert tensor_array.shape == [2, 2]
    assert tensor_array.value_type == "int32"
    assert len(tensor_array) == 2
    result = np.from_dlpack(tensor_array)
    assert result.shape == (2, 2, 2)
    assert result.tolist() == [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]
    # PyArrow reads the same extension type from our array as from its own.
    theirs = pa.FixedShapeTensorArray.from_tensor(nested.to_tensor())
    assert pa.array(tensor_array).type == theirs.type


def test_guide_rejects_nulls_on_export_with_type_error():
    array_with_nulls = ad.array(pa.array([2, None, 4], pa.int32()))
    with pytest.raises(TypeError, match="nulls"):
        np.from_dlpack(array_with_nulls)


def test_guide_allows_nulls_through_to_tensor_allow_nulls():
    array_with_nulls = ad.array(pa.array([2, None, 4], pa.int32()))
    result = np.from_dlpack(array_with_nulls.to_tensor(allow_nulls=True))
    assert result.dtype == np.int32
    assert result.shape == (3,)
    assert (result[0], result[2]) == (2, 4)


# Consuming


def test_guide_array_from_numpy_repr_matches_pyarrow():
    source = np.array([2, 0, 2, 4])
    array = ad.Array.from_dlpack(source)
    assert ADDRESS.sub(">", repr(array)) == "<arrow_dlpack.Array>\n[\n  2,\n  0,\n  2,\n  4\n]"
    assert body(array) == body(pa.Array.from_dlpack(source))
    assert array.type == "int64"
    assert pa.array(array).buffers()[1].address == source.ctypes.data


def test_guide_tensor_from_numpy_repr_matches_pyarrow():
    source = np.array([[2, 0], [2, 4]], np.int32)
    tensor = ad.Tensor.from_dlpack(source)
    assert repr(tensor) == "<arrow_dlpack.Tensor>\ntype: int32\nshape: (2, 2)\nstrides: (8, 4)"
    assert body(tensor) == body(pa.Tensor.from_dlpack(source))
    assert np.from_dlpack(tensor).ctypes.data == source.ctypes.data


def test_guide_fixed_shape_tensor_array_from_numpy():
    source = np.arange(12, dtype=np.int32).reshape(3, 2, 2)
    array = ad.FixedShapeTensorArray.from_dlpack(source)
    assert array.type == "extension<arrow.fixed_shape_tensor[value_type=int32, shape=[2,2]]>"
    assert len(array) == 3
    assert array.shape == [2, 2]
    assert pa.array(array).type == pa.FixedShapeTensorArray.from_dlpack(source).type
    np.testing.assert_array_equal(np.from_dlpack(array), source)


# Reprs in PyArrow's layout (the guide prints them): the body of an Array's repr is PyArrow's,
# and a Tensor's repr is PyArrow's with the class name changed.

REPR_CASES = {
    "20 values": pa.array(range(20)),
    "21 values (PyArrow prints 2 * 10 + 1 in full)": pa.array(range(21)),
    "22 values (elided)": pa.array(range(22)),
    "30 values (elided)": pa.array(range(30)),
    "doubles": pa.array([0.1, 1e20, -0.0, float("nan"), float("inf"), 1.5e-7, 1 / 3]),
    "floats": pa.array(np.array([0.1, 1e20, 1 / 3, 65504], np.float32)),
    "halffloats": pa.array(np.array([0.1, 1 / 3, 65504, 6e-5], np.float16)),
    "uint64 max": pa.array([np.iinfo(np.uint64).max, 0], pa.uint64()),
    "int8 extremes": pa.array([-128, 127], pa.int8()),
    "nulls": pa.array([1, None, 3], pa.int32()),
    "booleans with nulls": pa.array([True, None, False]),
    "strings with nulls": pa.array(["a", None, "bc"]),
    "empty": pa.array([], pa.float32()),
    "5 fixed-size lists (PyArrow's container window is 2)": pa.array(
        [[1, 2]] * 5, pa.list_(pa.int8(), 2)
    ),
    "6 fixed-size lists (elided)": pa.array([[1, 2]] * 6, pa.list_(pa.int8(), 2)),
    "fixed-size list of 30 values": pa.array([list(range(30))], pa.list_(pa.int8(), 30)),
    "nested fixed-size lists": pa.array(
        [[[1, 2], [3, 4]]] * 3, pa.list_(pa.list_(pa.int16(), 2), 2)
    ),
    "fixed-size list with a null": pa.array([[1, 2], None], pa.list_(pa.float64(), 2)),
    "variable-size lists": pa.array([[1], [2, 3], []]),
}


@pytest.mark.parametrize("source", REPR_CASES.values(), ids=REPR_CASES.keys())
def test_array_repr_body_matches_pyarrow(source):
    array = ad.array(source)
    # Variable-size lists get their own class, the rest are plain arrays.
    cls = "ListArray" if pa.types.is_list(source.type) else "Array"
    assert re.fullmatch(
        rf"<arrow_dlpack\.{cls} object at 0x[0-9a-f]+>", repr(array).split("\n")[0]
    )
    assert body(array) == body(source)


TENSOR_CASES = {
    "0-d": np.array(2.5),
    "1-D": np.arange(3, dtype=np.int8),
    "2-D": np.zeros((2, 3), np.uint32),
    "transposed 3-D": np.zeros((2, 3, 4), np.float16).transpose(2, 0, 1),
    "gapped": np.zeros((4, 6), np.int64)[::2, 1::3],
    "empty": np.zeros((0, 3), np.float32),
}


@pytest.mark.parametrize("source", TENSOR_CASES.values(), ids=TENSOR_CASES.keys())
def test_tensor_repr_matches_pyarrow(source):
    theirs = repr(pa.Tensor.from_numpy(source))
    assert repr(ad.Tensor.from_dlpack(source)) == theirs.replace(
        "<pyarrow.Tensor>", "<arrow_dlpack.Tensor>"
    )
