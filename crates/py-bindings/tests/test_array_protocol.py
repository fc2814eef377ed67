"""numpy's `__array__` protocol and `==` on every class, as numpy 2 and PyArrow 26 define them:
`np.asarray` and `jnp.asarray` of our objects give what they give for PyArrow's (zero-copy where
PyArrow's is), `copy` and `dtype` are honoured, `==` compares contents and the objects are
unhashable.

PyArrow is the oracle where it has the same object; where it gives an `object` array of flat
cells (a fixed-shape tensor column), ours gives the tensor, as `to_numpy_ndarray()` does."""

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

COLUMNS = {
    "int64": lambda: pa.array([1, 2, 3]),
    "float32 with nulls": lambda: pa.array([1.5, None, 3.0], pa.float32()),
    "int16 with nulls": lambda: pa.array([1, None, 3], pa.int16()),
    "bool": lambda: pa.array([True, False]),
    "bool with nulls": lambda: pa.array([True, None]),
    "string": lambda: pa.array(["a", None, "c"]),
    "chunked": lambda: pa.chunked_array([[1, 2], [], [3]], pa.uint8()),
    "sliced": lambda: pa.array(np.arange(10, dtype=np.float64)).slice(2, 5),
    "fixed_size_list": lambda: pa.array([[1, 2], None, [3, 4]], pa.list_(pa.int32(), 2)),
    # A null inside an element is NaN, the rows float (integers float64), as PyArrow gives them.
    "fixed_size_list with null values": lambda: pa.array([[1, None], None, [3, 4]], pa.list_(pa.int32(), 2)),
    "float fixed_size_list with null values": lambda: pa.array([[1.5, None, 3.0], [4.0, 5.0, 6.0]], pa.list_(pa.float32(), 3)),
    "empty": lambda: pa.array([], pa.int32()),
}


def same(ours, theirs):
    """Equal numpy results: dtype, shape and values (object arrays element by element)."""
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    for left, right in zip(ours.tolist(), theirs.tolist()):
        if isinstance(left, list) or isinstance(right, np.ndarray) or hasattr(left, "shape"):
            np.testing.assert_array_equal(np.asarray(left), np.asarray(right))
        else:
            assert left == right or (left != left and right != right)  # NaN equals NaN here


@pytest.mark.parametrize("name", list(COLUMNS))
def test_asarray_of_an_array_is_pyarrows(name):
    theirs = COLUMNS[name]()
    ours = ad.array(theirs)
    same(np.asarray(ours), np.asarray(theirs))
    same(np.array(ours, copy=True), np.array(theirs, copy=True))
    assert np.array(ours, copy=True).flags.writeable


@pytest.mark.parametrize("name", list(COLUMNS))
def test_copy_false_raises_value_error_exactly_where_pyarrow_does(name):
    theirs = COLUMNS[name]()
    ours = ad.array(theirs)
    try:
        expected = np.array(theirs, copy=False)
    except ValueError:
        with pytest.raises(ValueError, match="unable to avoid a copy") as raised:
            np.array(ours, copy=False)
        assert isinstance(raised.value, ad.ArrowDLPackValueError)
    else:
        same(np.array(ours, copy=False), expected)


def test_nulls_inside_nested_fixed_size_lists_are_nan_in_float_rows():
    # PyArrow gives object arrays of object arrays here; ours are each row's values, as for one
    # level, with NaN for a null value and for the values of a null inner list.
    nested = pa.array([[[1, 2], None], [[3, None], [5, 6]], None], pa.list_(pa.list_(pa.int64(), 2), 2))
    rows = np.asarray(ad.array(nested))
    assert rows.dtype == object and rows[2] is None
    assert rows[0].dtype == np.float64 and rows[0].shape == (2, 2)
    np.testing.assert_array_equal(rows[0], [[1, 2], [np.nan, np.nan]])
    np.testing.assert_array_equal(rows[1], [[3, np.nan], [5, 6]])


def test_asarray_of_a_numeric_array_is_a_read_only_view_of_the_arrow_buffer():
    theirs = pa.array(np.arange(8, dtype=np.int32)).slice(3)
    view = np.asarray(ad.array(theirs))
    assert view.ctypes.data == theirs.buffers()[1].address + 3 * 4
    assert not view.flags.writeable
    copy = np.array(ad.array(theirs), copy=True)
    assert copy.ctypes.data != view.ctypes.data and copy.flags.writeable


@pytest.mark.parametrize("dtype", ["float32", np.int8, "object"])
def test_dtype_is_a_cast_as_for_pyarrow(dtype):
    theirs = pa.array([1, 2, 3])
    same(np.asarray(ad.array(theirs), dtype=dtype), np.asarray(theirs, dtype=dtype))
    with pytest.raises(ValueError):
        np.array(ad.array(theirs), dtype=dtype, copy=False)  # a cast is a copy


def test_jax_and_torch_read_arrays_through_the_protocol():
    ours = ad.array(pa.array([1.0, None, 4.0]))
    np.testing.assert_array_equal(np.asarray(jnp.asarray(ours)), [1.0, np.nan, 4.0])
    assert torch.asarray(np.asarray(ad.array(pa.array([5, 6])))).tolist() == [5, 6]
    tensor = ad.Tensor.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(jnp.asarray(tensor)), np.arange(6).reshape(2, 3))
    cells = ad.array(pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(8, dtype=np.int16).reshape(2, 2, 2)))
    assert jnp.asarray(cells).shape == (2, 2, 2)


def test_asarray_of_a_tensor_is_pyarrows_and_zero_copy():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)[::2, 1::2]
    ours = ad.Tensor.from_dlpack(x)
    theirs = pa.Tensor.from_numpy(x)
    view = np.asarray(ours)
    np.testing.assert_array_equal(view, np.asarray(theirs))
    assert view.ctypes.data == x.ctypes.data and view.strides == x.strides
    assert view.flags.writeable  # numpy's memory, writable through a versioned capsule
    assert np.array(ours, copy=True).ctypes.data != x.ctypes.data
    read_only = ad.array(pa.array([1, 2])).to_tensor()
    assert not np.asarray(read_only).flags.writeable
    np.testing.assert_array_equal(np.asarray(ours, dtype=np.float32), x.astype(np.float32))


def test_asarray_of_a_fixed_shape_tensor_array_is_the_tensor():
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    theirs = pa.FixedShapeTensorArray.from_numpy_ndarray(x)
    ours = ad.array(theirs)
    view = np.asarray(ours)
    np.testing.assert_array_equal(view, theirs.to_numpy_ndarray())
    assert view.ctypes.data == theirs.storage.values.buffers()[1].address
    assert not view.flags.writeable
    chunked = ad.array(pa.chunked_array([theirs, theirs]))
    np.testing.assert_array_equal(np.asarray(chunked), np.concatenate([x, x]))
    with pytest.raises(ValueError, match="chunks must be joined"):
        np.array(chunked, copy=False)
    with_null = ad.array(pa.ExtensionArray.from_storage(theirs.type, pa.array([None, list(range(6))], theirs.storage.type)))
    with pytest.raises(ValueError, match="nulls"):
        np.asarray(with_null)


def test_asarray_of_a_list_array_is_pyarrows_object_array_of_rows():
    theirs = pa.array([[1, 2, 3], None, [], [4]], pa.list_(pa.int64()))
    ours = ad.array(theirs)
    result = np.asarray(ours)
    expected = np.asarray(theirs)
    assert result.dtype == expected.dtype == object and result.shape == expected.shape
    assert [None if row is None else row.tolist() for row in result] == [
        None if row is None else row.tolist() for row in expected
    ]
    # The rows are views of the column's values.
    assert result[0].ctypes.data == theirs.values.buffers()[1].address
    assert not result[0].flags.writeable
    with pytest.raises(ValueError, match="rows differ in length"):
        np.array(ours, copy=False)


def test_asarray_of_a_variable_shape_tensor_array_is_an_object_array_of_rows():
    rows = [np.arange(6, dtype=np.int32).reshape(2, 3), None, np.ones((1, 1), np.int32)]
    ours = ad.VariableShapeTensorArray.from_numpy_ndarray(rows)
    result = np.asarray(ours)
    assert result.dtype == object and result.shape == (3,)
    np.testing.assert_array_equal(result[0], rows[0])
    assert result[1] is None
    np.testing.assert_array_equal(result[2], rows[2])
    with pytest.raises(ValueError, match="unable to avoid a copy"):
        np.array(ours, copy=False)


@pytest.mark.parametrize("name", list(COLUMNS))
def test_equality_compares_contents_as_pyarrow_does(name):
    theirs = COLUMNS[name]()
    ours, again = ad.array(theirs), ad.array(COLUMNS[name]())
    expected = pa.chunked_array(theirs) == pa.chunked_array(COLUMNS[name]())
    assert (ours == again) is expected
    assert (ours != again) is (not expected)
    assert (ours == theirs) is expected and (theirs == ours) is expected


def test_equality_of_different_types_values_and_nans_is_false():
    assert (ad.array(pa.array([1, 2])) == ad.array(pa.array([1, 2], pa.int32()))) is False
    assert (ad.array(pa.array([1, 2])) == ad.array(pa.array([1, 3]))) is False
    nan = pa.array([1.0, float("nan")])
    assert (ad.array(nan) == ad.array(nan)) is (nan == nan) is False
    assert ad.array(pa.array([1])) != "a string"
    # numpy compares element by element, as for PyArrow's arrays.
    assert (ad.array(pa.array([1, 2])) == np.array([1, 5])).tolist() == [True, False]


def test_arrays_and_tensors_are_unhashable_as_pyarrows_are():
    for theirs, ours in [
        (pa.array([1]), ad.array(pa.array([1]))),
        (pa.Tensor.from_numpy(np.arange(2)), ad.Tensor.from_dlpack(np.arange(2))),
    ]:
        for obj in (theirs, ours):
            with pytest.raises(TypeError, match="unhashable"):
                hash(obj)
    for ours in (
        ad.array(pa.array([[1]])),
        ad.array(pa.FixedShapeTensorArray.from_numpy_ndarray(np.zeros((1, 2, 2)))),
        ad.VariableShapeTensorArray.from_numpy_ndarray([np.zeros((1, 2))]),
    ):
        with pytest.raises(TypeError, match="unhashable"):
            hash(ours)


def test_tensor_equality_is_pyarrows():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    ours = ad.Tensor.from_dlpack(x)
    assert (ours == ad.Tensor.from_dlpack(x.copy())) is True
    assert (ours == ad.Tensor.from_dlpack(x.T.copy().T)) is True  # strides do not count
    assert (ours == ad.Tensor.from_dlpack(x.astype(np.int64))) is False
    assert (ours != ad.Tensor.from_dlpack(x + 1)) is True
    theirs = pa.Tensor.from_numpy(x)
    assert (ours == theirs) is True and (theirs == ours) is (theirs == pa.Tensor.from_numpy(x)) is True
    assert (ours == x).shape == (2, 3)  # numpy compares element by element


def test_a_null_typed_array_reads_as_nones_as_pyarrows_does():
    # to_pylist() refused the null type (found by the hypothesis sweep of np.asarray).
    theirs = pa.array([None, None])
    ours = ad.array(theirs)
    assert ours.to_pylist() == theirs.to_pylist() == [None, None]
    same(np.asarray(ours), np.asarray(theirs))
    assert repr(ours).split("\n", 1)[1] == "[\n  null,\n  null\n]"
