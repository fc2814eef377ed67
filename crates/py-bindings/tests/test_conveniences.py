"""PyArrow's conveniences on our classes, each compared with PyArrow's result on the same data:
``to_numpy``, ``to_numpy_ndarray``/``from_numpy_ndarray``, ``slice`` and ``[]``, ``nbytes``,
``equals``, ``dim_name``, ``is_null``/``is_valid``.

Zero-copy is checked by pointer: a numpy result's ``ctypes.data`` against the address of
PyArrow's values buffer plus the slice offset."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad

NUMERIC = [pa.int8(), pa.uint16(), pa.int32(), pa.int64(), pa.float16(), pa.float32(), pa.float64()]
RANGES = [(0, None), (1, None), (2, 3), (5, 0), (7, None), (100, 4)]


def values_address(array):
    """Where PyArrow's (sliced) primitive array has its first value."""
    return array.buffers()[1].address + array.offset * array.type.bit_width // 8


def numeric_array(value_type, length=8):
    values = np.arange(length).astype(value_type.to_pandas_dtype())
    return pa.array(values, type=value_type)


def assert_same_numpy(ours, theirs):
    assert type(ours) is np.ndarray
    assert ours.dtype == theirs.dtype
    assert ours.shape == theirs.shape
    if theirs.dtype == object:
        assert len(ours) == len(theirs)
        for mine, other in zip(ours, theirs):
            if isinstance(other, np.ndarray):
                np.testing.assert_array_equal(mine, other)
            else:
                assert mine == other or (mine is None and other is None)
    else:
        np.testing.assert_array_equal(ours, theirs)


# Array.to_numpy


@pytest.mark.parametrize("value_type", NUMERIC, ids=str)
@pytest.mark.parametrize("offset, length", RANGES)
def test_to_numpy_is_a_read_only_view_like_pyarrows(value_type, offset, length):
    base = numeric_array(value_type)
    theirs = base.slice(offset, length)
    ours = ad.array(base).slice(offset, length)
    mine, other = ours.to_numpy(), theirs.to_numpy()
    assert_same_numpy(mine, other)
    assert mine.flags.writeable is other.flags.writeable is False
    if len(theirs):
        assert mine.ctypes.data == values_address(theirs) == other.ctypes.data
    mine = ours.to_numpy(zero_copy_only=False)
    assert not mine.flags.writeable
    if len(theirs):
        assert mine.ctypes.data == values_address(theirs)


@pytest.mark.parametrize(
    "theirs",
    [
        pa.array([1, None]),
        pa.array([True, False]),
        pa.array(["a", "b"]),
        pa.array([[1, 2], [3, 4]], pa.list_(pa.int32(), 2)),
    ],
    ids=["nulls", "bool", "string", "fixed_size_list"],
)
def test_to_numpy_refuses_copies_with_a_value_error_like_pyarrow(theirs):
    with pytest.raises(ValueError):
        theirs.to_numpy()
    with pytest.raises(ad.ArrowDLPackValueError, match="zero_copy_only=False"):
        ad.array(theirs).to_numpy()


def test_to_numpy_of_several_chunks_copies_only_when_allowed():
    theirs = pa.chunked_array([[1, 2], [3]])
    ours = ad.array(theirs)
    with pytest.raises(ad.ArrowDLPackValueError, match="several chunks"):
        ours.to_numpy()
    mine = ours.to_numpy(zero_copy_only=False)
    assert_same_numpy(mine, theirs.to_numpy())
    assert mine.flags.writeable
    # One non-empty chunk among empty ones needs no copy.
    one = pa.chunked_array([[], [5, 6], []], pa.int64())
    assert_same_numpy(ad.array(one).to_numpy(), one.to_numpy())


@pytest.mark.parametrize(
    "theirs",
    [
        pa.array([1, None, 3], pa.int32()),
        pa.array([1, None], pa.uint8()),
        pa.array([2**62, None], pa.int64()),
        pa.array([1.5, None], pa.float32()),
        pa.array(np.array([1.5, 2], np.float16), mask=np.array([False, True])),
        pa.array([1.0, None, 3.0]).slice(1),
        pa.array([True, False]),
        pa.array([True, None]),
        pa.array(["a", None]),
        pa.array([None, None], pa.int16()),
        pa.array([], pa.int32()),
    ],
    ids=lambda array: f"{array.type}-{array.null_count}-{len(array)}",
)
def test_to_numpy_copy_matches_pyarrow(theirs):
    other = theirs.to_numpy(zero_copy_only=False)
    mine = ad.array(theirs).to_numpy(zero_copy_only=False)
    assert_same_numpy(mine, other)
    if theirs.null_count:
        assert mine.flags.writeable


def test_to_numpy_of_fixed_size_lists_gives_an_object_array_of_rows():
    theirs = pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.int32(), 2)).slice(1)
    assert_same_numpy(ad.array(theirs).to_numpy(zero_copy_only=False), theirs.to_numpy(zero_copy_only=False))
    with_null = pa.array([[1, 2], None], pa.list_(pa.int32(), 2))
    mine = ad.array(with_null).to_numpy(zero_copy_only=False)
    assert mine.dtype == object and mine[1] is None
    np.testing.assert_array_equal(mine[0], [1, 2])


def test_to_numpy_writable():
    theirs = pa.array([1, 2, 3])
    ours = ad.array(theirs)
    with pytest.raises(ValueError):
        theirs.to_numpy(writable=True)
    with pytest.raises(ad.ArrowDLPackValueError, match="writable"):
        ours.to_numpy(writable=True)
    mine = ours.to_numpy(zero_copy_only=False, writable=True)
    other = theirs.to_numpy(zero_copy_only=False, writable=True)
    assert_same_numpy(mine, other)
    assert mine.flags.writeable and other.flags.writeable
    assert mine.ctypes.data != values_address(theirs)
    mine[0] = 100
    assert ours.to_pylist() == [1, 2, 3]


# Tensor


def test_tensor_to_numpy_is_a_view_read_only_when_the_tensor_is():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    theirs = pa.Tensor.from_numpy(x).to_numpy()
    ours = ad.Tensor.from_dlpack(x)
    mine = ours.to_numpy()
    assert_same_numpy(mine, theirs)
    assert mine.ctypes.data == x.ctypes.data == theirs.ctypes.data
    assert mine.strides == theirs.strides
    assert mine.flags.writeable is ours.is_mutable
    # Arrow memory is read-only, in PyArrow's tensors too.
    arrow_values = pa.array(np.arange(6, dtype=np.int16))
    tensor = ad.array(arrow_values).to_tensor()
    mine = tensor.to_numpy()
    assert not tensor.is_mutable and not mine.flags.writeable
    assert mine.ctypes.data == values_address(arrow_values)
    readonly = x.copy()
    readonly.flags.writeable = False
    assert not pa.Tensor.from_numpy(readonly).to_numpy().flags.writeable


def test_tensor_to_numpy_keeps_strides():
    x = np.arange(24, dtype=np.int64).reshape(4, 6)[::2, ::-1].T
    mine = ad.Tensor.from_dlpack(x).to_numpy()
    np.testing.assert_array_equal(mine, x)
    assert mine.strides == x.strides and mine.ctypes.data == x.ctypes.data


@pytest.mark.parametrize(
    "x",
    [
        np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        np.arange(24, dtype=np.int8).reshape(4, 6)[:, ::2],
        np.zeros((0, 3), np.float64),
        np.array(7, np.uint32),
    ],
    ids=["contiguous", "strided", "empty", "0-d"],
)
def test_tensor_nbytes_is_numpys(x):
    assert ad.Tensor.from_dlpack(x).nbytes == x.nbytes


def tensor_pairs():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    nan = np.array([1.0, np.nan])
    yield "same", x, x.copy()
    yield "fortran", x, np.asfortranarray(x)
    yield "values", x, x + 1
    yield "dtype", x, x.astype(np.float64)
    yield "shape", x, x.reshape(6, 4)
    yield "nan", nan, nan.copy()
    yield "zero", np.array([0.0]), np.array([-0.0])
    yield "ints", np.arange(6, dtype=np.int32), np.arange(6, dtype=np.int32)
    yield "float16", x.astype(np.float16), x.astype(np.float16)


@pytest.mark.parametrize("left, right", [pair[1:] for pair in tensor_pairs()], ids=[pair[0] for pair in tensor_pairs()])
def test_tensor_equals_matches_pyarrow(left, right):
    expected = pa.Tensor.from_numpy(left).equals(pa.Tensor.from_numpy(right))
    assert ad.Tensor.from_dlpack(left).equals(ad.Tensor.from_dlpack(right)) is expected
    # Any DLPack producer is accepted as the other side.
    assert ad.Tensor.from_dlpack(left).equals(right) is expected


@pytest.mark.parametrize(
    "x",
    [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(5), np.array([True, False]),
     np.zeros((0, 4), np.int8), np.asfortranarray(np.arange(6.0).reshape(3, 2))],
    ids=["float32 2-D", "int64", "bool", "empty", "column-major"],
)
def test_tensor_dtype_len_and_tolist_are_numpys(x):
    import jax.numpy as jnp
    import ml_dtypes
    import torch

    tensor = ad.Tensor.from_dlpack(x)
    assert tensor.dtype == x.dtype and isinstance(tensor.dtype, np.dtype)
    assert getattr(torch, str(tensor.dtype)) == torch.from_numpy(x).dtype
    assert len(tensor) == len(x)
    assert tensor.tolist() == x.tolist()
    if x.ndim == 2 and x.dtype == np.float32:
        assert jnp.asarray(tensor).tolist() == x.tolist()  # JAX reads dtype beside __array__
    # numpy has no bfloat16: ml_dtypes' (which JAX brings) where it is installed.
    bf16 = ad.Tensor.from_dlpack(torch.ones(2, dtype=torch.bfloat16))
    assert bf16.dtype == np.dtype(ml_dtypes.bfloat16)
    scalar = ad.Tensor.from_dlpack(np.array(2.5))
    assert scalar.tolist() == 2.5 and float(scalar) == 2.5 and int(scalar) == 2 and complex(scalar) == 2.5
    assert complex(ad.Tensor.from_dlpack(np.array(1 + 2j, np.complex64))) == 1 + 2j
    seven = ad.Tensor.from_dlpack(np.array(7, np.int32))
    assert int(seven) == 7 and list(range(seven)) == list(range(7))
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(scalar)


def test_tensor_equals_ignores_dim_names_like_pyarrow():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    theirs = pa.Tensor.from_numpy(x, dim_names=["a", "b"])
    assert theirs.equals(pa.Tensor.from_numpy(x))
    column = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.int32(), [3], dim_names=["b"]), pa.array([[0, 1, 2], [3, 4, 5]], pa.list_(pa.int32(), 3))
    )
    named = ad.array(column).to_tensor()
    assert named.dim_names == ["", "b"]
    assert named.equals(ad.Tensor.from_dlpack(x))


def test_tensor_dim_name_matches_pyarrow():
    column = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.int32(), [2, 2], dim_names=["H", "W"]),
        pa.array([[0, 1, 2, 3]], pa.list_(pa.int32(), 4)),
    )
    tensor = ad.array(column).to_tensor()
    assert [tensor.dim_name(i) for i in range(3)] == ["", "H", "W"]
    x = np.zeros((2, 2))
    assert ad.Tensor.from_dlpack(x).dim_name(1) == pa.Tensor.from_numpy(x).dim_name(1) == ""
    # PyArrow aborts the process here; we raise.
    for index in (3, -1):
        with pytest.raises(IndexError):
            tensor.dim_name(index)


# FixedShapeTensorArray


def fixed_shape_column(shape, permutation=None, length=3):
    size = int(np.prod(shape))
    storage = pa.array(np.arange(length * size, dtype=np.int32).reshape(length, size).tolist(), pa.list_(pa.int32(), size))
    return pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.int32(), shape, permutation=permutation), storage)


@pytest.mark.parametrize("permutation", [None, [0, 1], [1, 0]])
@pytest.mark.parametrize("offset, length", [(0, None), (1, None), (1, 1), (3, 0)])
def test_to_numpy_ndarray_matches_pyarrow(permutation, offset, length):
    base = fixed_shape_column([2, 3], permutation)
    theirs = base.slice(offset, length)
    ours = ad.array(base).slice(offset, length)
    assert isinstance(ours, ad.FixedShapeTensorArray)
    mine, other = ours.to_numpy_ndarray(), theirs.to_numpy_ndarray()
    assert_same_numpy(mine, other)
    assert not mine.flags.writeable and not other.flags.writeable
    if len(theirs):
        assert mine.strides == other.strides
        assert mine.ctypes.data == other.ctypes.data == values_address(theirs.storage.values) + offset * 6 * 4


def test_to_numpy_ndarray_of_a_three_cycle_follows_the_spec():
    # PyArrow gets 3-cycles wrong (bug 4); logical dimension i is physical dimension
    # permutation[i], so the cells are the physical cells with axes taken in that order.
    column = fixed_shape_column([2, 3, 4], [1, 2, 0])
    mine = ad.array(column).to_numpy_ndarray()
    physical = np.arange(3 * 24, dtype=np.int32).reshape(3, 2, 3, 4)
    np.testing.assert_array_equal(mine, physical.transpose(0, *[p + 1 for p in [1, 2, 0]]))


def test_to_numpy_ndarray_refuses_nulls_like_pyarrow():
    storage = pa.array([[1, 2], None], pa.list_(pa.int32(), 2))
    theirs = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.int32(), [2]), storage)
    with pytest.raises(ValueError):
        theirs.to_numpy_ndarray()
    with pytest.raises(ad.ArrowDLPackValueError):
        ad.array(theirs).to_numpy_ndarray()


def from_numpy_inputs():
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    yield "c_order", x, None
    yield "dim_names", x, ["H", "W"]
    yield "transposed", x.transpose(0, 2, 1), None
    yield "gapped", np.arange(48, dtype=np.int64).reshape(4, 3, 4)[::2], None
    yield "2d", np.arange(6, dtype=np.uint8).reshape(3, 2), ["x"]


@pytest.mark.parametrize(
    "x, dim_names", [case[1:] for case in from_numpy_inputs()], ids=[case[0] for case in from_numpy_inputs()]
)
def test_from_numpy_ndarray_matches_pyarrow(x, dim_names):
    theirs = pa.FixedShapeTensorArray.from_numpy_ndarray(x, dim_names=dim_names)
    ours = ad.FixedShapeTensorArray.from_numpy_ndarray(x, dim_names=dim_names)
    assert isinstance(ours, ad.FixedShapeTensorArray)
    assert len(ours) == len(theirs) == x.shape[0]
    assert pa.array(ours).type == theirs.type
    assert pa.array(ours).equals(theirs)
    assert_same_numpy(ours.to_numpy_ndarray(), theirs.to_numpy_ndarray())
    np.testing.assert_array_equal(ours.to_numpy_ndarray(), x)


def test_from_numpy_ndarray_is_zero_copy_for_packed_data():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    ours = ad.FixedShapeTensorArray.from_numpy_ndarray(x)
    assert ours.to_numpy_ndarray().ctypes.data == x.ctypes.data
    transposed = x.transpose(0, 2, 1)
    assert ad.FixedShapeTensorArray.from_numpy_ndarray(transposed).to_numpy_ndarray().ctypes.data == x.ctypes.data


@pytest.mark.parametrize(
    "x, dim_names",
    [
        (np.asfortranarray(np.arange(24.0).reshape(2, 3, 4)), None),
        (np.arange(3), None),
        (np.array(3), None),
        (np.zeros((2, 3, 4)), ["only_one"]),
    ],
    ids=["fortran", "1-d", "0-d", "dim_names_length"],
)
def test_from_numpy_ndarray_refuses_what_pyarrow_refuses(x, dim_names):
    with pytest.raises(ValueError):
        pa.FixedShapeTensorArray.from_numpy_ndarray(x, dim_names=dim_names)
    with pytest.raises(ad.ArrowDLPackValueError):
        ad.FixedShapeTensorArray.from_numpy_ndarray(x, dim_names=dim_names)


def test_from_numpy_ndarray_of_booleans_is_refused_where_pyarrow_packs_them():
    x = np.array([[True, False], [False, True]])
    assert pa.FixedShapeTensorArray.from_numpy_ndarray(x).type.value_type == pa.bool_()
    with pytest.raises(ad.ArrowDLPackValueError, match="bool"):
        ad.FixedShapeTensorArray.from_numpy_ndarray(x)


def test_from_numpy_ndarray_accepts_empty_arrays_where_pyarrow_refuses():
    x = np.zeros((0, 2), np.int32)
    with pytest.raises(ValueError):
        pa.FixedShapeTensorArray.from_numpy_ndarray(x)
    ours = ad.FixedShapeTensorArray.from_numpy_ndarray(x)
    assert len(ours) == 0 and ours.shape == [2]


# slice and []


def chunked_inputs():
    yield "one_chunk", pa.chunked_array([[0, 1, None, 3, 4, 5, 6]])
    yield "chunks", pa.chunked_array([[0, 1], [None, 3, 4], [], [5, 6]])
    yield "empty_chunks", pa.chunked_array([[], []], pa.int64())


@pytest.mark.parametrize("theirs", [case[1] for case in chunked_inputs()], ids=[case[0] for case in chunked_inputs()])
@pytest.mark.parametrize("offset, length", RANGES + [(2, 2), (3, 1), (0, 0)])
def test_slice_matches_pyarrows_chunked_slice(theirs, offset, length):
    ours = ad.array(theirs).slice(offset, length)
    expected = theirs.slice(offset, length)
    assert ours.to_pylist() == expected.to_pylist()
    assert len(ours) == len(expected)
    assert ours.num_chunks == expected.num_chunks
    assert ours.type == str(expected.type)
    assert pa.chunked_array(ours).equals(expected)


def test_slice_is_zero_copy():
    theirs = pa.array(np.arange(10, dtype=np.int64))
    ours = ad.array(theirs).slice(3, 4)
    assert np.from_dlpack(ours).ctypes.data == values_address(theirs.slice(3, 4))
    # A slice of a slice keeps pointing into the same buffer.
    assert np.from_dlpack(ours.slice(1)).ctypes.data == values_address(theirs.slice(4))
    assert np.from_dlpack(ours[1:3]).ctypes.data == values_address(theirs.slice(4))


def test_slice_arguments_are_checked_like_pyarrows():
    theirs = pa.array([1, 2, 3])
    ours = ad.array(theirs)
    with pytest.raises(IndexError):
        theirs.slice(-1)
    with pytest.raises(IndexError):
        ours.slice(-1)
    with pytest.raises(ValueError):
        theirs.slice(0, -1)
    with pytest.raises(ad.ArrowDLPackValueError):
        ours.slice(0, -1)
    assert ours.slice(10 ** 15, 10 ** 15).to_pylist() == []


KEYS = [
    slice(None),
    slice(1, 4),
    slice(-3, None),
    slice(5, 2),
    slice(None, None, 2),
    slice(None, None, -1),
    slice(-2, 1, -2),
    slice(1, 100, 3),
    slice(100, None),
    slice(None, None, -3),
]


@pytest.mark.parametrize("theirs", [case[1] for case in chunked_inputs()], ids=[case[0] for case in chunked_inputs()])
@pytest.mark.parametrize("key", KEYS, ids=str)
def test_getitem_slices_match_pyarrow(theirs, key):
    ours = ad.array(theirs)[key]
    expected = theirs[key]
    assert isinstance(ours, ad.Array)
    assert ours.to_pylist() == expected.to_pylist()
    assert ours.type == str(expected.type)


@pytest.mark.parametrize("theirs", [case[1] for case in chunked_inputs()], ids=[case[0] for case in chunked_inputs()])
def test_getitem_integers_match_pyarrow(theirs):
    ours = ad.array(theirs)
    for index in range(-len(theirs), len(theirs)):
        assert ours[index] == theirs[index].as_py()
    for index in (len(theirs), -len(theirs) - 1):
        with pytest.raises(IndexError):
            theirs[index]
        with pytest.raises(IndexError):
            ours[index]
    with pytest.raises(TypeError):
        theirs[1.0]
    with pytest.raises(TypeError):
        ours[1.0]
    # PyArrow raises OverflowError for an index beyond ssize_t; a Python list and numpy raise
    # IndexError, and so do we.
    for index in (2**70, -(2**70)):
        with pytest.raises(OverflowError):
            theirs[index]
        with pytest.raises(IndexError, match="out of bounds"):
            ours[index]


def test_getitem_of_fixed_shape_tensors_keeps_the_class():
    theirs = fixed_shape_column([2, 2], [1, 0], length=4)
    ours = ad.array(theirs)
    for key in (slice(1, 3), slice(None, None, 2), slice(None, None, -1)):
        part = ours[key]
        assert isinstance(part, ad.FixedShapeTensorArray)
        assert part.permutation == [1, 0]
        assert pa.array(part).equals(theirs[key])
        np.testing.assert_array_equal(part.to_numpy_ndarray(), theirs[key].to_numpy_ndarray())
    # A cell is a tensor of its logical shape (PyArrow's scalar reads a permuted cell with wrong
    # strides, docs/compatibility.md bug 6); to_pylist() gives its flat values, as PyArrow's.
    np.testing.assert_array_equal(np.from_dlpack(ours[1]), theirs.to_numpy_ndarray()[1])
    assert ours.to_pylist()[1] == theirs[1].as_py()


# nbytes, equals, is_null, is_valid


NBYTES = [
    pa.array([1, None, 3]),
    pa.array([1, None, 3]).slice(1),
    pa.array([1, 2, 3]).slice(1),
    pa.array([1, None] * 10).slice(7, 2),
    pa.array([True] * 20).slice(3),
    pa.array([True] * 20).slice(7, 2),
    pa.array([[1, 2], [3, 4], None], pa.list_(pa.int32(), 2)).slice(1),
    pa.array([], pa.float32()),
    pa.chunked_array([[1, None, 3], [4, 5]]),
    fixed_shape_column([2, 3]).slice(1),
]


@pytest.mark.parametrize("theirs", NBYTES, ids=range(len(NBYTES)))
def test_nbytes_matches_pyarrow(theirs):
    assert ad.array(theirs).nbytes == theirs.nbytes


NAN = float("nan")
F64_LIST = pa.list_(pa.float64(), 2)
EQUALS = [
    (pa.array([1, None]), pa.array([1, None])),
    (pa.array([1, None]), pa.array([None, 1])),
    (pa.array([1, 2]), pa.array([1, 3])),
    (pa.array([1, 2]), pa.array([1, 2], pa.int32())),
    (pa.array([1, 2]), pa.array([1, 2, 3])),
    (pa.array([NAN]), pa.array([NAN])),
    (pa.array([0.0]), pa.array([-0.0])),
    (pa.array([1.0, None]), pa.array([1.0, None])),
    (pa.array([[1.0, 2.0], None], F64_LIST), pa.array([[1.0, 2.0], None], F64_LIST)),
    (pa.array([[1.0, NAN]], F64_LIST), pa.array([[1.0, NAN]], F64_LIST)),
    (pa.array([[1.0, 0.0]], F64_LIST), pa.array([[1.0, -0.0]], F64_LIST)),
    (pa.array(["a", None]), pa.array(["a", None])),
    (pa.chunked_array([[1], [2, 3]]), pa.chunked_array([[1, 2], [3]])),
    (pa.chunked_array([[1], [2, 3]]), pa.chunked_array([[1, 2], [4]])),
    (pa.array([1, 2, 3]).slice(1), pa.array([2, 3])),
    (fixed_shape_column([2, 2]), fixed_shape_column([2, 2])),
    (fixed_shape_column([2, 2]), fixed_shape_column([2, 2], [1, 0])),
]


@pytest.mark.parametrize("left, right", EQUALS, ids=range(len(EQUALS)))
def test_equals_matches_pyarrow(left, right):
    expected = left.equals(right)
    ours = ad.array(left)
    assert ours.equals(ad.array(right)) is expected
    # Any Arrow producer is accepted as the other side.
    assert ours.equals(right) is expected


def test_equals_compares_with_a_fixed_shape_tensor_storage_as_unequal():
    column = fixed_shape_column([2])
    assert not ad.array(column).equals(ad.array(column.storage))
    assert not column.equals(column.storage)


VALIDITY = [
    pa.array([1, None, 3]),
    pa.array([1, 2]),
    pa.array([1.0, NAN, None]),
    pa.array(["a", None]),
    pa.array([None, None]),
    pa.array([1, None, 3, None]).slice(1, 2),
    pa.chunked_array([[1, None], [], [None, 4]]),
    pa.array([[1, 2], None], pa.list_(pa.int32(), 2)),
]


@pytest.mark.parametrize("theirs", VALIDITY, ids=range(len(VALIDITY)))
def test_is_null_and_is_valid_match_pyarrow(theirs):
    ours = ad.array(theirs)
    for mine, other in [
        (ours.is_null(), theirs.is_null()),
        (ours.is_valid(), theirs.is_valid()),
        (ours.is_null(nan_is_null=True), theirs.is_null(nan_is_null=True)),
    ]:
        assert isinstance(mine, ad.Array)
        assert mine.type == "bool" and mine.null_count == 0
        assert mine.to_pylist() == other.to_pylist()
        # A boolean array exports as a bool tensor.
        exported = np.from_dlpack(mine)
        assert exported.dtype == np.bool_
        np.testing.assert_array_equal(exported, np.array(other.to_pylist(), dtype=bool))


def test_numpy_stays_optional():
    script = """
import sys
sys.modules["numpy"] = None
import arrow_dlpack as ad

class Producer:
    def __init__(self, array):
        self.array = array
    def __arrow_c_array__(self, requested_schema=None):
        return self.array.__arrow_c_array__()

try:
    import pyarrow as pa
    source = pa.array([1, None, 3])
except ImportError:
    sys.exit(0)
array = ad.array(source)
assert array[0] == 1 and array[1] is None
assert array.slice(1).to_pylist() == [None, 3]
assert array.is_null().to_pylist() == [False, True, False]
assert array.nbytes == source.nbytes
assert array.equals(source)
try:
    array.to_numpy(zero_copy_only=False)
except ImportError as error:
    assert "numpy" in str(error)
else:
    raise AssertionError("to_numpy without numpy")
"""
    subprocess.run([sys.executable, "-c", script], check=True)
