"""``ad.FixedShapeTensorArray``: the ``arrow.fixed_shape_tensor`` extension type, its metadata as
the spec writes it, ``from_dlpack`` / ``from_tensor`` / ``to_tensor``, and PyArrow as the oracle
for types, reprs and values (where PyArrow is right: identity and 2-cycle permutations)."""

import json

import jax.numpy as jnp
import nanoarrow as na
import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad


def extension_metadata(obj) -> dict:
    """The raw ``ARROW:extension:metadata`` JSON our schema carries."""
    metadata = dict(na.c_schema(obj).metadata)
    assert metadata[b"ARROW:extension:name"] == b"arrow.fixed_shape_tensor"
    return json.loads(metadata[b"ARROW:extension:metadata"])


def pyarrow_column(shape, permutation=None, dim_names=None, length=2, value_type=pa.int32()):
    """A pyarrow fixed_shape_tensor column with values 0, 1, 2, ... in storage order."""
    size = int(np.prod(shape))
    extension = pa.fixed_shape_tensor(
        value_type, shape, dim_names=dim_names, permutation=permutation
    )
    values = pa.array(np.arange(length * size).astype(value_type.to_pandas_dtype()))
    storage = pa.FixedSizeListArray.from_arrays(values, size)
    return pa.ExtensionArray.from_storage(extension, storage)


# Metadata.


def test_writes_spec_metadata_without_absent_keys():
    array = ad.FixedShapeTensorArray.from_dlpack(np.zeros((2, 3, 4), np.float32))
    assert extension_metadata(array) == {"shape": [3, 4]}


def test_writes_permutation_under_the_spec_key():
    array = ad.FixedShapeTensorArray.from_dlpack(np.zeros((2, 3, 4), np.float32).transpose(0, 2, 1))
    assert extension_metadata(array) == {"shape": [3, 4], "permutation": [1, 0]}


def test_keeps_dim_names_and_permutation_of_pyarrow_columns():
    array = ad.array(pyarrow_column([2, 3], permutation=[1, 0], dim_names=["H", "W"]))
    assert extension_metadata(array) == {
        "shape": [2, 3],
        "permutation": [1, 0],
        "dim_names": ["H", "W"],
    }
    assert array.dim_names == ["H", "W"]
    assert array.permutation == [1, 0]


def test_type_name_matches_pyarrow():
    for array in (
        ad.FixedShapeTensorArray.from_dlpack(np.zeros((2, 3, 4), np.int8)),
        ad.FixedShapeTensorArray.from_dlpack(np.zeros((2, 3, 4), np.float64).transpose(0, 2, 1)),
        ad.array(pyarrow_column([2, 3], permutation=[1, 0], dim_names=["H", "W"])),
    ):
        assert array.type == str(pa.array(array).type)


def test_properties_of_an_imported_cube():
    array = ad.FixedShapeTensorArray.from_dlpack(np.arange(24, dtype=np.uint16).reshape(2, 3, 4))
    assert isinstance(array, ad.Array)
    assert len(array) == 2
    assert array.shape == [3, 4]
    assert array.permutation is None
    assert array.dim_names is None
    assert array.value_type == "uint16"
    assert array.null_count == 0
    assert array.__dlpack_device__() == (1, 0)
    assert array.to_pylist() == [list(range(12)), list(range(12, 24))]


def test_repr_matches_pyarrow():
    array = ad.FixedShapeTensorArray.from_dlpack(np.arange(8, dtype=np.int32).reshape(2, 2, 2))
    ours = repr(array)
    assert ours.startswith("<arrow_dlpack.FixedShapeTensorArray object at 0x")
    assert ours.split("\n", 1)[1] == repr(pa.array(array)).split("\n", 1)[1]


# from_dlpack and from_tensor.


def test_from_dlpack_copy_true_gives_fresh_memory():
    source = np.arange(12, dtype=np.int32).reshape(3, 2, 2)
    array = ad.FixedShapeTensorArray.from_dlpack(source, copy=True)
    result = np.from_dlpack(array)
    assert result.ctypes.data != source.ctypes.data
    source[0, 0, 0] = 99
    assert result[0, 0, 0] == 0


def test_from_dlpack_copy_true_accepts_a_tensor_that_is_not_first_major():
    # The stub: "a tensor that is not first-major ... raises ArrowDLPackValueError unless
    # copy=True"; with copy=True the copy is laid out first-major.
    source = np.arange(24, dtype=np.int32).reshape(2, 3, 4).transpose(1, 0, 2)
    array = ad.FixedShapeTensorArray.from_dlpack(source, copy=True)
    assert len(array) == 3
    np.testing.assert_array_equal(np.from_dlpack(array), source)


def test_rejects_not_first_major_tensor_without_copy():
    source = np.arange(24, dtype=np.int32).reshape(2, 3, 4).transpose(2, 1, 0)
    for copy in (None, False):
        with pytest.raises(ad.ArrowDLPackValueError, match="first-major"):
            ad.FixedShapeTensorArray.from_dlpack(source, copy=copy)


def test_from_tensor_of_our_tensor_shares_memory():
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    array = ad.FixedShapeTensorArray.from_tensor(ad.Tensor.from_dlpack(source))
    assert array.shape == [4]
    assert len(array) == 3
    assert np.from_dlpack(array).ctypes.data == source.ctypes.data


def test_from_tensor_of_transposed_tensor_records_the_permutation():
    source = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(0, 2, 1)
    array = ad.FixedShapeTensorArray.from_tensor(ad.Tensor.from_dlpack(source))
    assert array.shape == [3, 4]
    assert array.permutation == [1, 0]
    np.testing.assert_array_equal(np.from_dlpack(array), source)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x: x, id="numpy"),
        pytest.param(lambda x: torch.from_numpy(x), id="torch"),
        pytest.param(lambda x: jnp.asarray(x), id="jax"),
        pytest.param(lambda x: pa.Tensor.from_numpy(x), id="pyarrow-tensor"),
    ],
)
def test_from_tensor_and_from_dlpack_take_any_producer(make):
    source = np.arange(18, dtype=np.float32).reshape(3, 2, 3)
    for array in (
        ad.FixedShapeTensorArray.from_tensor(make(source)),
        ad.FixedShapeTensorArray.from_dlpack(make(source)),
    ):
        assert array.shape == [2, 3]
        np.testing.assert_array_equal(np.from_dlpack(array), source)


def test_from_dlpack_of_one_dimensional_tensor_gives_scalar_cells():
    array = ad.FixedShapeTensorArray.from_dlpack(np.arange(3, dtype=np.int64))
    assert len(array) == 3
    assert array.shape == []
    assert np.from_dlpack(array).tolist() == [0, 1, 2]


# to_tensor.


def test_to_tensor_is_the_whole_logical_tensor_zero_copy():
    source = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    array = ad.FixedShapeTensorArray.from_dlpack(source)
    tensor = array.to_tensor()
    assert tensor.shape == (2, 3, 4)
    assert tensor.strides == (24, 8, 2)
    assert tensor.type == "int16"
    assert tensor.is_row_major
    assert np.from_dlpack(tensor).ctypes.data == source.ctypes.data


@pytest.mark.parametrize(
    "permutation, dim_names",
    [(None, None), ([1, 0], ["H", "W"]), (None, ["H", "W"])],
)
def test_to_tensor_matches_pyarrows_to_tensor(permutation, dim_names):
    column = pyarrow_column([2, 3], permutation=permutation, dim_names=dim_names)
    theirs = column.to_tensor()
    ours = ad.array(column).to_tensor()
    assert ours.shape == theirs.shape
    assert ours.strides == theirs.strides
    assert (ours.dim_names or []) == theirs.dim_names  # PyArrow says [] for "no names"
    assert repr(ours).split("\n", 1)[1] == repr(theirs).split("\n", 1)[1]
    np.testing.assert_array_equal(np.from_dlpack(ours), np.asarray(theirs))


def test_to_tensor_refuses_null_cells_unless_allowed():
    extension = pa.fixed_shape_tensor(pa.int32(), [2])
    storage = pa.array([[1, 2], None, [5, 6]], pa.list_(pa.int32(), 2))
    array = ad.array(pa.ExtensionArray.from_storage(extension, storage))
    assert array.null_count == 1
    with pytest.raises(ad.ArrowDLPackValueError, match="allow_nulls"):
        array.to_tensor()
    with pytest.raises(ad.ArrowDLPackTypeError, match="nulls"):
        array.__dlpack__()
    result = np.from_dlpack(array.to_tensor(allow_nulls=True))
    assert result.shape == (3, 2)
    assert result[0].tolist() == [1, 2]
    assert result[2].tolist() == [5, 6]


# Exports.


def test_exports_sliced_column_from_the_slice():
    column = pyarrow_column([2, 2], length=5).slice(2, 2)
    array = ad.array(column)
    assert len(array) == 2
    result = np.from_dlpack(array)
    assert result.tolist() == [[[8, 9], [10, 11]], [[12, 13], [14, 15]]]
    storage = column.storage
    assert result.ctypes.data == storage.values.buffers()[1].address + 8 * 4


def test_exports_to_pyarrow_tensor_and_fixed_shape_tensor_array():
    source = np.arange(24, dtype=np.float64).reshape(2, 3, 4).transpose(0, 2, 1)
    array = ad.FixedShapeTensorArray.from_dlpack(source)
    np.testing.assert_array_equal(np.asarray(pa.Tensor.from_dlpack(array)), source)
    theirs = pa.FixedShapeTensorArray.from_dlpack(array)
    # A 2-cycle: PyArrow reads the permutation correctly.
    assert theirs.type.permutation == [1, 0]
    np.testing.assert_array_equal(theirs.to_numpy_ndarray(), source)


# Cells.


@pytest.mark.parametrize(
    "shape, permutation, dim_names",
    [([2, 3], None, None), ([2, 3], [1, 0], ["H", "W"]), ([2, 3, 2], [0, 2, 1], None), ([4], None, ["x"])],
)
def test_a_cell_is_a_read_only_tensor_of_the_cells_shape(shape, permutation, dim_names):
    # It was a flat list of the cell's storage.
    column = pyarrow_column(shape, permutation=permutation, dim_names=dim_names, length=3)
    array = ad.array(column)
    for index in (0, 2, -1):
        cell = array[index]
        assert isinstance(cell, ad.Tensor)
        # PyArrow's array gives the cell with its permutation applied (its scalar's `to_numpy()`
        # reads a permuted cell with wrong strides: docs/compatibility.md, bug 6).
        expected = column.to_numpy_ndarray()[index]
        assert cell.shape == expected.shape
        assert not cell.is_mutable
        view = np.from_dlpack(cell)
        np.testing.assert_array_equal(view, expected)
        np.testing.assert_array_equal(view, np.from_dlpack(array.to_tensor())[index])
        # Zero-copy: inside the storage's values buffer.
        start = column.storage.values.buffers()[1].address
        assert start <= view.ctypes.data < start + column.storage.values.nbytes
        # The names of the logical dimensions, as the column's tensor has them after its rows.
        names = array.to_tensor().dim_names
        assert cell.dim_names == (None if names is None else names[1:])


def test_cells_of_a_chunked_and_sliced_column_and_null_cells():
    extension = pa.fixed_shape_tensor(pa.int32(), [2])
    storage = pa.array([[1, 2], None, [5, 6]], pa.list_(pa.int32(), 2))
    column = pa.chunked_array([pa.ExtensionArray.from_storage(extension, storage)] * 2)
    array = ad.array(column)
    assert array[1] is None
    assert np.from_dlpack(array[5]).tolist() == [5, 6]
    assert np.from_dlpack(array[3]).tolist() == [1, 2]  # in the second chunk
    assert np.from_dlpack(array[1:][1]).tolist() == [5, 6]
    assert type(array[::2]) is ad.FixedShapeTensorArray and len(array[::2]) == 3
    with pytest.raises(IndexError):
        array[6]
    with pytest.raises(TypeError):
        array["0"]
    # to_pylist() gives each cell's storage, flat, as PyArrow's `to_pylist()` and
    # `FixedShapeTensorScalar.as_py()` do.
    assert array.to_pylist() == column.to_pylist() == [[1, 2], None, [5, 6]] * 2
    assert column[0].as_py() == [1, 2]


def test_a_cell_with_null_elements_is_refused():
    extension = pa.fixed_shape_tensor(pa.float32(), [2])
    storage = pa.array([[1, None], [3, 4]], pa.list_(pa.float32(), 2))
    array = ad.array(pa.ExtensionArray.from_storage(extension, storage))
    assert np.from_dlpack(array[1]).tolist() == [3, 4]
    with pytest.raises(ad.ArrowDLPackValueError, match="nulls"):
        array[0]
