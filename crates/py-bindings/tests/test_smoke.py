"""Smoke tests: the first examples of the PyArrow DLPack guide, with arrow_dlpack objects."""

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad


def test_pyarrow_array_to_numpy_shares_memory():
    source = pa.array([2, 0, 2, 4])
    array = ad.array(source)
    result = np.from_dlpack(array)
    np.testing.assert_array_equal(result, np.array([2, 0, 2, 4]))
    assert result.dtype == np.int64
    assert result.ctypes.data == source.buffers()[1].address


def test_array_reports_type_length_and_nulls():
    array = ad.array(pa.array([2, None, 4], pa.int32()))
    assert array.type == "int32"
    assert len(array) == 3
    assert array.null_count == 1
    assert array.to_pylist() == [2, None, 4]


def test_nulls_are_refused_on_export_and_allowed_by_to_tensor():
    array = ad.array(pa.array([2, None, 4], pa.int32()))
    with pytest.raises(TypeError, match="found 1 nulls"):
        np.from_dlpack(array)
    with pytest.raises(ValueError, match="allow_nulls"):
        array.to_tensor()
    result = np.from_dlpack(array.to_tensor(allow_nulls=True))
    assert result[0] == 2 and result[2] == 4


def test_fixed_size_list_to_tensor():
    source = pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float64(), 2))
    tensor = ad.array(source).to_tensor()
    assert repr(tensor) == "<arrow_dlpack.Tensor>\ntype: double\nshape: (3, 2)\nstrides: (16, 8)"
    np.testing.assert_array_equal(
        np.from_dlpack(tensor), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    )


def test_numpy_to_array_tensor_and_fixed_shape_tensor_array():
    array = ad.Array.from_dlpack(np.array([2, 0, 2, 4]))
    assert array.to_pylist() == [2, 0, 2, 4]
    tensor = ad.Tensor.from_dlpack(np.array([[2, 0], [2, 4]], np.int32))
    assert repr(tensor) == "<arrow_dlpack.Tensor>\ntype: int32\nshape: (2, 2)\nstrides: (8, 4)"
    # print() adds the values as numpy prints them; a long tensor is summarised.
    assert str(tensor) == repr(tensor) + "\n[[2 0]\n [2 4]]"
    long = ad.Tensor.from_dlpack(np.arange(100_000, dtype=np.float32))
    assert str(long).endswith("[0.0000e+00 1.0000e+00 2.0000e+00 ... 9.9997e+04 9.9998e+04 9.9999e+04]")
    tensors = ad.FixedShapeTensorArray.from_dlpack(np.arange(12, dtype=np.int32).reshape(3, 2, 2))
    assert len(tensors) == 3
    assert tensors.shape == [2, 2]
    assert np.from_dlpack(tensors).shape == (3, 2, 2)


def test_pyarrow_imports_our_fixed_shape_tensor_array_with_its_extension_type():
    tensors = ad.FixedShapeTensorArray.from_dlpack(np.arange(12, dtype=np.int32).reshape(3, 2, 2))
    result = pa.array(tensors)
    assert isinstance(result, pa.FixedShapeTensorArray)
    assert result.type.shape == [2, 2]
    np.testing.assert_array_equal(
        result.to_numpy_ndarray(), np.arange(12, dtype=np.int32).reshape(3, 2, 2)
    )
