"""Each of the 11 numeric dtypes in both directions, with numpy, PyTorch, JAX and PyArrow as
peers: values, dtypes, slices, empty arrays, strided and transposed tensors, and pointer identity
where the exchange is zero-copy.

JAX copies CPU buffers it finds unaligned, so JAX is checked by value only.
"""

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

DTYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]


def values(dtype: str) -> np.ndarray:
    """Eight values that reach both ends of the type's range."""
    kind = np.dtype(dtype).kind
    if kind == "f":
        info = np.finfo(dtype)
        return np.array([info.min, -1.5, -0.0, 0.25, 2.0, info.max, np.inf, np.nan], dtype)
    info = np.iinfo(dtype)
    middle = [0, 1, 2, 3, 5, 7] if kind == "u" else [-1, 0, 1, 2, 3, 5]
    return np.array([info.min, *middle, info.max], dtype)


def arrow_name(dtype: str) -> str:
    """The name PyArrow gives the type (``halffloat``, ``float``, ``double``, ``int8``, ...)."""
    return str(pa.from_numpy_dtype(np.dtype(dtype)))


def torch_dtype(dtype: str) -> torch.dtype:
    return getattr(torch, dtype)


def address(array: pa.Array) -> int:
    """The address of the first logical element of a primitive pyarrow array."""
    return array.buffers()[1].address + array.offset * array.type.byte_width


def cube(dtype: str) -> np.ndarray:
    """A (4, 3, 2) tensor of the dtype, values 0..23 (exact in every dtype)."""
    return np.arange(24).astype(dtype).reshape(4, 3, 2)


# Export: our objects to numpy, torch, JAX and pyarrow.


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_array_to_numpy_zero_copy(dtype):
    source = pa.array(values(dtype))
    result = np.from_dlpack(ad.array(source))
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result, values(dtype))
    assert result.ctypes.data == address(source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_sliced_array_to_numpy_at_the_slice_offset(dtype):
    source = pa.array(values(dtype)).slice(3, 4)
    result = np.from_dlpack(ad.array(source))
    np.testing.assert_array_equal(result, values(dtype)[3:7])
    assert result.ctypes.data == address(source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_empty_array_to_numpy_and_torch(dtype):
    array = ad.array(pa.array([], pa.from_numpy_dtype(np.dtype(dtype))))
    result = np.from_dlpack(array)
    assert result.dtype == np.dtype(dtype)
    assert result.shape == (0,)
    tensor = torch.from_dlpack(array)
    assert tensor.dtype == torch_dtype(dtype)
    assert tuple(tensor.shape) == (0,)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_array_to_torch_zero_copy(dtype):
    source = pa.array(values(dtype))
    result = torch.from_dlpack(ad.array(source))
    assert result.dtype == torch_dtype(dtype)
    np.testing.assert_array_equal(result.numpy(), values(dtype))
    assert result.data_ptr() == address(source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_sliced_array_to_torch_at_the_slice_offset(dtype):
    source = pa.array(values(dtype)).slice(1, 5)
    result = torch.from_dlpack(ad.array(source))
    np.testing.assert_array_equal(result.numpy(), values(dtype)[1:6])
    assert result.data_ptr() == address(source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_array_to_jax_with_exact_values(dtype, jax_x64):
    result = jnp.from_dlpack(ad.array(pa.array(values(dtype)).slice(1)))
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(result), values(dtype)[1:])


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_array_to_pyarrow_zero_copy(dtype):
    source = pa.array(values(dtype)).slice(2)
    result = pa.Array.from_dlpack(ad.array(source))
    assert result.type == source.type
    np.testing.assert_array_equal(result.to_numpy(), source.to_numpy())  # NaN equals NaN here
    assert address(result) == address(source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_fixed_size_list_tensor_to_numpy_torch_and_pyarrow(dtype):
    flat = pa.array(cube(dtype).ravel())
    source = pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(flat, 2), 3)
    tensor = ad.array(source).to_tensor()
    assert tensor.type == arrow_name(dtype)
    assert tensor.shape == (4, 3, 2)
    assert tensor.strides == cube(dtype).strides
    as_numpy = np.from_dlpack(tensor)
    np.testing.assert_array_equal(as_numpy, cube(dtype))
    assert as_numpy.ctypes.data == address(flat)
    as_torch = torch.from_dlpack(tensor)
    assert as_torch.data_ptr() == address(flat)
    np.testing.assert_array_equal(as_torch.numpy(), cube(dtype))
    as_pyarrow = pa.Tensor.from_dlpack(tensor)
    assert as_pyarrow.equals(pa.Tensor.from_numpy(cube(dtype)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_fixed_shape_tensor_array_to_pyarrow_and_torch(dtype):
    source = cube(dtype)
    ours = ad.FixedShapeTensorArray.from_dlpack(source)
    theirs = pa.FixedShapeTensorArray.from_dlpack(ours)
    assert theirs.type.value_type == pa.from_numpy_dtype(np.dtype(dtype))
    assert theirs.type.shape == [3, 2]
    np.testing.assert_array_equal(theirs.to_numpy_ndarray(), source)
    assert theirs.storage.values.buffers()[1].address == source.ctypes.data
    as_torch = torch.from_dlpack(ours)
    assert as_torch.data_ptr() == source.ctypes.data
    np.testing.assert_array_equal(as_torch.numpy(), source)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "view",
    [
        pytest.param(lambda x: x.transpose(2, 0, 1), id="transposed"),
        pytest.param(lambda x: x[::2, :, ::-1], id="stepped-and-reversed"),
        pytest.param(lambda x: x[:, 1:, :1], id="sub-block"),
        pytest.param(lambda x: x[:0], id="empty"),
    ],
)
def test_exports_strided_tensor_to_numpy_torch_and_pyarrow_with_its_strides(dtype, view):
    source = view(cube(dtype))
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.shape == source.shape
    assert tensor.type == arrow_name(dtype)
    as_numpy = np.from_dlpack(tensor)
    np.testing.assert_array_equal(as_numpy, source)
    if source.size:
        assert tensor.strides == source.strides
        assert as_numpy.strides == source.strides
        assert as_numpy.ctypes.data == source.ctypes.data
    if min(source.strides) < 0:
        # PyTorch and PyArrow refuse negative strides; numpy above is the peer that takes them.
        return
    as_torch = torch.from_dlpack(tensor)
    np.testing.assert_array_equal(as_torch.numpy(), source)
    if source.size:
        assert as_torch.data_ptr() == source.ctypes.data
        assert tuple(as_torch.stride()) == tuple(s // source.itemsize for s in source.strides)
    np.testing.assert_array_equal(np.asarray(pa.Tensor.from_dlpack(tensor)), source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exports_transposed_tensor_to_jax_with_exact_values(dtype, jax_x64):
    source = cube(dtype).transpose(1, 2, 0)
    result = jnp.from_dlpack(ad.Tensor.from_dlpack(source))
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(np.asarray(result), source)


# Import: numpy, torch, JAX and pyarrow producers to our objects.


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_numpy_array_zero_copy(dtype):
    source = values(dtype)
    array = ad.Array.from_dlpack(source)
    assert array.type == arrow_name(dtype)
    assert len(array) == len(source)
    back = pa.array(array)
    assert back.type == pa.from_numpy_dtype(np.dtype(dtype))
    np.testing.assert_array_equal(back.to_numpy(), source)
    assert address(back) == source.ctypes.data


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_numpy_slice_at_its_offset(dtype):
    base = values(dtype)
    array = ad.Array.from_dlpack(base[2:6])
    assert address(pa.array(array)) == base[2:].ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(array), base[2:6])


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_empty_numpy_array(dtype):
    # numpy exports empty arrays with stride 0, which PyArrow wrongly refuses.
    array = ad.Array.from_dlpack(np.array([], dtype))
    assert array.type == arrow_name(dtype)
    assert len(array) == 0
    assert array.to_pylist() == []
    tensor = ad.Tensor.from_dlpack(np.zeros((0, 3), dtype))
    assert tensor.shape == (0, 3)
    assert tensor.size == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_strided_numpy_tensor_zero_copy(dtype):
    source = cube(dtype)[:, ::-1, 1:].transpose(1, 0, 2)
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.shape == source.shape
    assert tensor.strides == source.strides
    assert tensor.type == arrow_name(dtype)
    back = np.from_dlpack(tensor)
    assert back.ctypes.data == source.ctypes.data
    np.testing.assert_array_equal(back, source)


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_numpy_cube_as_fixed_shape_tensor_array_zero_copy(dtype):
    source = cube(dtype)
    array = ad.FixedShapeTensorArray.from_dlpack(source)
    assert array.value_type == arrow_name(dtype)
    assert array.shape == [3, 2]
    assert len(array) == 4
    assert pa.array(array).storage.values.buffers()[1].address == source.ctypes.data


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_torch_tensor_zero_copy(dtype):
    source = torch.from_numpy(values(dtype))
    array = ad.Array.from_dlpack(source)
    assert array.type == arrow_name(dtype)
    back = pa.array(array)
    np.testing.assert_array_equal(back.to_numpy(), values(dtype))
    assert address(back) == source.data_ptr()


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_transposed_torch_tensor_zero_copy(dtype):
    source = torch.from_numpy(cube(dtype)).permute(2, 0, 1)[:, 1:]
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.shape == tuple(source.shape)
    assert tensor.strides == tuple(s * source.element_size() for s in source.stride())
    back = np.from_dlpack(tensor)
    assert back.ctypes.data == source.data_ptr()
    np.testing.assert_array_equal(back, source.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_torch_tensor_as_fixed_shape_tensor_array(dtype):
    source = torch.from_numpy(cube(dtype))
    array = ad.FixedShapeTensorArray.from_dlpack(source)
    assert array.shape == [3, 2]
    np.testing.assert_array_equal(pa.array(array).to_numpy_ndarray(), cube(dtype))
    assert pa.array(array).storage.values.buffers()[1].address == source.data_ptr()


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_jax_array_with_exact_values(dtype, jax_x64):
    source = jnp.asarray(values(dtype))
    assert source.dtype == np.dtype(dtype)
    array = ad.Array.from_dlpack(source)
    assert array.type == arrow_name(dtype)
    np.testing.assert_array_equal(pa.array(array).to_numpy(), values(dtype))
    tensor = ad.Tensor.from_dlpack(jnp.asarray(cube(dtype)))
    assert tensor.shape == (4, 3, 2)
    np.testing.assert_array_equal(np.from_dlpack(tensor), cube(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_imports_pyarrow_array_tensor_and_fixed_shape_tensor_array_zero_copy(dtype):
    source = pa.array(values(dtype)).slice(1)
    array = ad.Array.from_dlpack(source)
    assert array.type == str(source.type)
    assert address(pa.array(array)) == address(source)
    np.testing.assert_array_equal(pa.array(array).to_numpy(), source.to_numpy())

    numpy_source = cube(dtype).transpose(0, 2, 1)
    tensor = ad.Tensor.from_dlpack(pa.Tensor.from_numpy(numpy_source))
    assert tensor.strides == numpy_source.strides
    assert np.from_dlpack(tensor).ctypes.data == numpy_source.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(tensor), numpy_source)

    theirs = pa.FixedShapeTensorArray.from_numpy_ndarray(cube(dtype))
    ours = ad.FixedShapeTensorArray.from_dlpack(theirs)
    assert ours.shape == [3, 2]
    np.testing.assert_array_equal(np.from_dlpack(ours), cube(dtype))
    assert np.from_dlpack(ours).ctypes.data == theirs.storage.values.buffers()[1].address
