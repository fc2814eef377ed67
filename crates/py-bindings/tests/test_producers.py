"""Arrow producers through the Arrow PyCapsule interface (pyarrow, polars, nanoarrow, arro3), zero
copy where the data is one chunk, and our arrays back to Arrow consumers (``pa.array(ad_obj)``,
nanoarrow, arro3, polars) with values, buffer addresses and extension metadata intact."""

import arro3.core as a3
import nanoarrow as na
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import arrow_dlpack as ad


def address(array: pa.Array) -> int:
    return array.buffers()[1].address + array.offset * array.type.byte_width


def body(obj) -> str:
    return repr(obj).split("\n", 1)[1]


# pyarrow


def test_imports_pyarrow_array_zero_copy():
    source = pa.array([1.5, 2.5, -3.0], pa.float32())
    array = ad.array(source)
    assert type(array) is ad.Array
    assert array.type == "float"
    assert len(array) == 3
    assert array.null_count == 0
    assert array.to_pylist() == source.to_pylist()
    assert body(array) == body(source)
    assert np.from_dlpack(array).ctypes.data == address(source)


def test_imports_pyarrow_array_with_nulls_keeping_them():
    source = pa.array([1, None, 3, None], pa.uint16())
    array = ad.array(source)
    assert array.null_count == 2
    assert array.to_pylist() == [1, None, 3, None]
    assert body(array) == body(source)
    back = pa.array(array)
    assert back.null_count == 2
    assert back.equals(source)


def test_imports_pyarrow_slice_at_its_offset():
    base = pa.array(np.arange(20, dtype=np.int16))
    source = base.slice(5, 10)
    array = ad.array(source)
    assert len(array) == 10
    assert array.to_pylist() == list(range(5, 15))
    assert np.from_dlpack(array).ctypes.data == base.buffers()[1].address + 5 * 2


def test_imports_pyarrow_chunked_array_of_one_chunk_zero_copy():
    chunk = pa.array(np.arange(5, dtype=np.int64))
    array = ad.array(pa.chunked_array([chunk]))
    assert array.to_pylist() == [0, 1, 2, 3, 4]
    assert np.from_dlpack(array).ctypes.data == address(chunk)
    assert np.from_dlpack(array, copy=False).ctypes.data == address(chunk)


def test_imports_pyarrow_chunked_array_of_several_chunks_copying_only_when_allowed():
    chunks = [pa.array([1, 2], pa.int32()), pa.array([3, 4, 5], pa.int32())]
    array = ad.array(pa.chunked_array(chunks))
    assert len(array) == 5
    assert array.to_pylist() == [1, 2, 3, 4, 5]
    result = np.from_dlpack(array)
    assert result.tolist() == [1, 2, 3, 4, 5]
    assert result.ctypes.data not in {address(chunk) for chunk in chunks}
    with pytest.raises(ad.ArrowDLPackBufferError, match="copy=False"):
        np.from_dlpack(array, copy=False)


def test_imports_pyarrow_chunked_array_of_no_chunks_as_empty():
    array = ad.array(pa.chunked_array([], pa.float64()))
    assert len(array) == 0
    assert array.type == "double"
    assert np.from_dlpack(array).shape == (0,)


def test_imports_pyarrow_chunked_array_with_empty_chunks():
    array = ad.array(pa.chunked_array([[], [1, 2], []], pa.int8()))
    assert array.to_pylist() == [1, 2]
    assert np.from_dlpack(array).tolist() == [1, 2]


def test_imports_pyarrow_fixed_size_list_as_array_with_tensor():
    source = pa.array([[1, 2, 3], [4, 5, 6]], pa.list_(pa.uint8(), 3))
    array = ad.array(source)
    assert type(array) is ad.Array
    assert array.type == "fixed_size_list<item: uint8>[3]"
    assert array.type == str(source.type)
    result = np.from_dlpack(array)
    assert result.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert result.ctypes.data == source.values.buffers()[1].address


def test_imports_pyarrow_fixed_shape_tensor_column_as_fixed_shape_tensor_array():
    source = pa.FixedShapeTensorArray.from_numpy_ndarray(
        np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    )
    array = ad.array(source)
    assert type(array) is ad.FixedShapeTensorArray
    assert isinstance(array, ad.Array)
    assert array.shape == [2, 2]
    assert array.value_type == "float"
    np.testing.assert_array_equal(np.from_dlpack(array), source.to_numpy_ndarray())
    assert np.from_dlpack(array).ctypes.data == source.storage.values.buffers()[1].address


def test_imports_pyarrow_chunked_fixed_shape_tensor_column():
    chunk = pa.FixedShapeTensorArray.from_numpy_ndarray(
        np.arange(8, dtype=np.int32).reshape(2, 2, 2)
    )
    array = ad.array(pa.chunked_array([chunk, chunk]))
    assert type(array) is ad.FixedShapeTensorArray
    assert len(array) == 4
    expected = np.concatenate([chunk.to_numpy_ndarray()] * 2)
    np.testing.assert_array_equal(np.from_dlpack(array), expected)
    with pytest.raises(BufferError, match="copy=False"):
        array.__dlpack__(copy=False)


# polars


def test_imports_polars_series_zero_copy():
    series = pl.Series("x", [1, 2, 3], dtype=pl.Int32)
    array = ad.array(series)
    assert array.type == "int32"
    assert array.to_pylist() == [1, 2, 3]
    result = np.from_dlpack(array)
    assert result.tolist() == [1, 2, 3]
    assert result.ctypes.data == address(series.to_arrow())


def test_imports_polars_series_with_nulls():
    array = ad.array(pl.Series("x", [1.0, None, 3.0]))
    assert array.type == "double"
    assert array.null_count == 1
    assert array.to_pylist() == [1.0, None, 3.0]
    with pytest.raises(TypeError, match="nulls"):
        np.from_dlpack(array)


def test_imports_polars_series_of_several_chunks_copying_only_when_allowed():
    series = pl.concat([pl.Series("x", [1, 2]), pl.Series("x", [3, 4, 5])], rechunk=False)
    assert series.n_chunks() == 2
    array = ad.array(series)
    assert len(array) == 5
    assert array.to_pylist() == [1, 2, 3, 4, 5]
    assert np.from_dlpack(array).tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(ad.ArrowDLPackBufferError, match="copy=False"):
        array.__dlpack__(max_version=(1, 3), copy=False)


def test_imports_polars_array_column_as_tensor():
    series = pl.Series("x", [[1, 2], [3, 4], [5, 6]], dtype=pl.Array(pl.Int16, 2))
    array = ad.array(series)
    assert array.type == "fixed_size_list<item: int16>[2]"
    tensor = array.to_tensor()
    assert tensor.shape == (3, 2)
    assert np.from_dlpack(tensor).tolist() == [[1, 2], [3, 4], [5, 6]]


def test_polars_reads_our_array():
    array = ad.Array.from_dlpack(np.array([4, 5, 6], np.uint32))
    series = pl.Series(array)
    assert series.dtype == pl.UInt32
    assert series.to_list() == [4, 5, 6]


# nanoarrow


def test_imports_nanoarrow_c_array_zero_copy():
    source = na.c_array([1, 2, 3], na.int16())
    array = ad.array(source)
    assert array.type == "int16"
    result = np.from_dlpack(array)
    assert result.tolist() == [1, 2, 3]
    assert result.ctypes.data == source.buffers[1]


def test_imports_nanoarrow_c_array_over_numpy_zero_copy():
    numpy_source = np.arange(5, dtype=np.float64)
    array = ad.array(na.c_array(numpy_source))
    result = np.from_dlpack(array)
    assert result.ctypes.data == numpy_source.ctypes.data
    assert result.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_imports_nanoarrow_array():
    array = ad.array(na.Array([7, 8, 9], na.uint8()))
    assert array.type == "uint8"
    assert np.from_dlpack(array).tolist() == [7, 8, 9]


def test_imports_nanoarrow_array_of_several_chunks_through_its_stream():
    # nanoarrow's __arrow_c_array__ refuses several chunks ("non-contiguous"); its
    # __arrow_c_stream__ gives them, and ad.array must take the object either way.
    source = na.Array(pa.chunked_array([[1, 2], [3]], pa.int32()))
    assert source.n_chunks == 2
    array = ad.array(source)
    assert array.to_pylist() == [1, 2, 3]
    assert np.from_dlpack(array).tolist() == [1, 2, 3]


def test_nanoarrow_reads_our_array_zero_copy():
    source = pa.array([10, 20, 30], pa.int64())
    result = na.c_array(ad.array(source))
    assert result.length == 3
    assert result.buffers[1] == address(source)
    assert list(na.Array(ad.array(source)).to_pylist()) == [10, 20, 30]


# arro3


def test_imports_arro3_array_zero_copy():
    numpy_source = np.arange(4, dtype=np.uint64)
    array = ad.array(a3.Array.from_numpy(numpy_source))
    assert array.type == "uint64"
    result = np.from_dlpack(array)
    assert result.tolist() == [0, 1, 2, 3]
    assert result.ctypes.data == numpy_source.ctypes.data


def test_imports_arro3_chunked_array_of_several_chunks():
    chunks = [
        a3.Array.from_numpy(np.arange(2, dtype=np.int32)),
        a3.Array.from_numpy(np.arange(3, dtype=np.int32)),
    ]
    array = ad.array(a3.ChunkedArray(chunks))
    assert array.to_pylist() == [0, 1, 0, 1, 2]
    assert np.from_dlpack(array).tolist() == [0, 1, 0, 1, 2]
    with pytest.raises(BufferError, match="copy=False"):
        np.from_dlpack(array, copy=False)


def test_arro3_reads_our_array_zero_copy():
    numpy_source = np.arange(3, dtype=np.float32)
    result = a3.Array.from_arrow(ad.Array.from_dlpack(numpy_source))
    assert result.to_numpy().tolist() == [0.0, 1.0, 2.0]
    assert address(pa.array(result)) == numpy_source.ctypes.data


# pa.array(ad_obj) round trips


@pytest.mark.parametrize(
    "source",
    [
        pa.array([1, 2, 3], pa.int8()),
        pa.array([1, None, 3], pa.int64()),
        pa.array(np.arange(10, dtype=np.float16)).slice(3, 4),
        pa.array([True, None, False]),
        pa.array(["a", None, "ccc"]),
        pa.array([[1, 2], None, [5, 6]], pa.list_(pa.int32(), 2)),
        pa.array([[1], [2, 3]], pa.list_(pa.int32())),
        pa.array([{"a": 1, "b": "x"}]),
        pa.array([], pa.float64()),
    ],
    ids=lambda source: str(source.type),
)
def test_pyarrow_round_trips_our_array_with_values_and_buffers(source):
    back = pa.array(ad.array(source))
    assert back.type == source.type
    assert back.equals(source)
    if source.offset:
        # A slice may come back as an offset or as buffers that start at the slice.
        assert address(back) == address(source)
        return
    pairs = zip(back.buffers(), source.buffers())
    for ours, theirs in pairs:
        if theirs is not None and theirs.size:
            assert ours.address == theirs.address


def test_pyarrow_round_trips_array_imported_from_numpy_zero_copy():
    source = np.arange(6, dtype=np.int32)
    back = pa.array(ad.Array.from_dlpack(source))
    assert back.type == pa.int32()
    assert back.to_pylist() == list(range(6))
    assert address(back) == source.ctypes.data


def test_pyarrow_round_trips_concatenated_chunks():
    back = pa.array(ad.array(pa.chunked_array([[1, 2], [3]], pa.int16())))
    assert back.type == pa.int16()
    assert back.to_pylist() == [1, 2, 3]


def test_pyarrow_reads_our_schema():
    assert pa.field(ad.array(pa.array([1], pa.uint32()))).type == pa.uint32()
    tensors = ad.FixedShapeTensorArray.from_dlpack(np.zeros((2, 3, 4), np.float32))
    field = pa.field(tensors)
    assert isinstance(field.type, pa.FixedShapeTensorType)
    assert field.type.shape == [3, 4]


def test_arrow_c_array_gives_fresh_capsules_each_call():
    array = ad.array(pa.array([1, 2, 3]))
    first = pa.array(array)
    second = pa.array(array)
    assert first.equals(second)
    assert address(first) == address(second)


@pytest.mark.parametrize(
    "permutation, dim_names",
    [(None, None), ([1, 0, 2], None), ([2, 0, 1], ["C", "H", "W"]), (None, ["x", "y", "z"])],
)
def test_pyarrow_round_trips_fixed_shape_tensor_extension_type(permutation, dim_names):
    extension = pa.fixed_shape_tensor(
        pa.int16(), [2, 3, 4], dim_names=dim_names, permutation=permutation
    )
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(48, dtype=np.int16)), 24)
    source = pa.ExtensionArray.from_storage(extension, storage)
    ours = ad.array(source)
    assert type(ours) is ad.FixedShapeTensorArray
    assert ours.shape == [2, 3, 4]
    assert ours.permutation == permutation
    assert ours.dim_names == dim_names
    back = pa.array(ours)
    assert isinstance(back, pa.FixedShapeTensorArray)
    assert isinstance(back.type, pa.FixedShapeTensorType)
    assert back.type.shape == [2, 3, 4]
    assert back.type.value_type == pa.int16()
    assert back.type.dim_names == dim_names
    assert back.type.permutation == (permutation if permutation is not None else None)
    assert back.storage.equals(storage)
    assert back.storage.values.buffers()[1].address == storage.values.buffers()[1].address
