"""Chunked columns and the Arrow C stream: an array keeps the chunks of a chunked array or
stream zero-copy, concatenates them only for an export that needs one tensor (and refuses with
``copy=False``), and hands them out again as a stream to pyarrow, nanoarrow and polars; against
pyarrow, polars, nanoarrow and arro3.
"""

import gc

import arro3.core as a3
import nanoarrow as na
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad


def address(array: np.ndarray) -> int:
    return array.ctypes.data


def values_address(chunk: pa.Array) -> int:
    """The address of a primitive pyarrow array's first logical element."""
    return chunk.buffers()[1].address + chunk.offset * chunk.type.byte_width


def test_a_multi_chunk_stream_keeps_its_chunks_zero_copy():
    source = pa.chunked_array([[1, 2, 3], [4, 5]], pa.int64())
    array = ad.array(source)
    assert array.num_chunks == 2
    assert [len(chunk) for chunk in array.chunks] == [3, 2]
    assert all(type(chunk) is ad.Array for chunk in array.chunks)
    for ours, theirs in zip(array.chunks, source.chunks):
        assert address(np.from_dlpack(ours)) == values_address(theirs)
    assert len(array) == 5
    assert array.to_pylist() == source.to_pylist()


def test_dlpack_of_several_chunks_concatenates_when_copy_allows():
    source = pa.chunked_array([[1.5, 2.5], [], [3.5, 4.5, 5.5]], pa.float32())
    array = ad.array(source)
    expected = source.to_numpy()
    for copy in (None, True):
        result = np.from_dlpack(array, copy=copy)
        np.testing.assert_array_equal(result, expected)
        assert result.dtype == np.float32
    np.testing.assert_array_equal(torch.from_dlpack(array).numpy(), expected)


def test_dlpack_of_several_chunks_refuses_copy_false():
    array = ad.array(pa.chunked_array([[1, 2], [3]], pa.int32()))
    with pytest.raises(BufferError, match=r"concatenating 2 chunks requires a copy.*copy=False"):
        array.__dlpack__(max_version=(1, 3), copy=False)
    with pytest.raises(BufferError, match="concatenating 2 chunks"):
        np.from_dlpack(array, copy=False)


def test_one_non_empty_chunk_among_empty_ones_is_zero_copy_even_with_copy_false():
    source = pa.chunked_array([[], [7, 8, 9], []], pa.int16())
    result = np.from_dlpack(ad.array(source), copy=False)
    np.testing.assert_array_equal(result, [7, 8, 9])
    assert address(result) == values_address(source.chunk(1))


def test_an_empty_stream_has_no_chunks_and_exports_an_empty_tensor():
    array = ad.array(pa.chunked_array([], pa.uint32()))
    assert array.num_chunks == 0
    assert array.chunks == []
    assert len(array) == 0
    result = np.from_dlpack(array)
    assert result.shape == (0,) and result.dtype == np.uint32
    assert pa.chunked_array(array).num_chunks == 0


def test_pyarrow_chunked_array_takes_our_stream_with_its_chunks_zero_copy():
    source = pa.chunked_array([[1, None, 3], [4, 5]], pa.int64())
    result = pa.chunked_array(ad.array(source))
    assert result.equals(source)
    assert result.num_chunks == 2
    for ours, theirs in zip(result.chunks, source.chunks):
        assert values_address(ours) == values_address(theirs)


def test_the_stream_outlives_the_array_and_its_source():
    source = pa.chunked_array([[10, 20], [30]], pa.int64())
    capsule = ad.array(source).__arrow_c_stream__()
    expected = source.to_pylist()
    del source
    gc.collect()
    assert pa.ChunkedArray._import_from_c_capsule(capsule).to_pylist() == expected


def test_a_stream_capsule_is_consumed_once():
    capsule = ad.array(pa.chunked_array([[1], [2]])).__arrow_c_stream__()
    pa.ChunkedArray._import_from_c_capsule(capsule)
    with pytest.raises(ValueError, match="released"):
        pa.ChunkedArray._import_from_c_capsule(capsule)


def test_an_unread_stream_capsule_is_released_when_dropped():
    source = pa.chunked_array([[1, 2], [3]])
    array = ad.array(source)
    for _ in range(100):
        array.__arrow_c_stream__()
    gc.collect()
    assert pa.chunked_array(array).equals(source)


def test_the_stream_carries_the_fixed_shape_tensor_extension_type():
    cells = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    tensor_type = pa.fixed_shape_tensor(pa.float32(), [2, 2])
    storage = pa.array(list(cells.reshape(6, 4)), pa.list_(pa.float32(), 4))
    source = pa.chunked_array(
        [
            pa.ExtensionArray.from_storage(tensor_type, storage[:4]),
            pa.ExtensionArray.from_storage(tensor_type, storage[4:]),
        ]
    )
    array = ad.array(source)
    assert isinstance(array, ad.FixedShapeTensorArray)
    assert array.num_chunks == 2
    assert all(isinstance(chunk, ad.FixedShapeTensorArray) for chunk in array.chunks)
    result = pa.chunked_array(array)
    assert result.type == tensor_type
    assert result.num_chunks == 2
    np.testing.assert_array_equal(np.from_dlpack(array), cells)
    np.testing.assert_array_equal(np.from_dlpack(array.chunks[1]), cells[4:])
    with pytest.raises(BufferError, match="concatenating 2 chunks"):
        np.from_dlpack(array, copy=False)


def test_nanoarrow_reads_our_stream_chunk_by_chunk():
    source = pa.chunked_array([[1, 2, 3], [4, 5]], pa.int64())
    stream = na.ArrayStream(ad.array(source))
    chunks = list(stream.iter_chunks())
    assert [len(chunk) for chunk in chunks] == [3, 2]
    assert [chunk.to_pylist() for chunk in chunks] == [[1, 2, 3], [4, 5]]


def test_a_producer_with_both_protocols_is_read_through_its_stream():
    # nanoarrow refuses __arrow_c_array__ for an array of several chunks; its stream keeps them.
    source = na.Array(pa.chunked_array([[1, 2], [3]], pa.int32()))
    with pytest.raises(ValueError, match="non-contiguous"):
        source.__arrow_c_array__()
    array = ad.array(source)
    assert array.num_chunks == 2
    assert array.to_pylist() == [1, 2, 3]


def test_polars_series_with_several_chunks_keeps_them():
    series = pl.concat([pl.Series("x", [1, 2, 3]), pl.Series("x", [4, 5])], rechunk=False)
    assert series.n_chunks() == 2
    array = ad.array(series)
    assert array.num_chunks == 2
    np.testing.assert_array_equal(np.from_dlpack(array), series.to_numpy())


def test_polars_prefers_our_array_capsule_and_gets_one_concatenated_chunk():
    # polars (like arro3) asks for `__arrow_c_array__` when an object has both protocols, and
    # that protocol gives one array: several chunks are concatenated (a copy). Stream-only
    # consumers (pyarrow's chunked_array, nanoarrow) keep the chunks, as tested above.
    source = pa.chunked_array([[1, 2, 3], [4, 5]], pa.int64())
    series = pl.Series(ad.array(source))
    assert series.to_list() == [1, 2, 3, 4, 5]
    assert series.n_chunks() == 1


def test_array_of_our_own_array_shares_its_chunks():
    source = pa.chunked_array([[1, 2], [3]], pa.int8())
    first = ad.array(source)
    second = ad.array(first)
    assert second.num_chunks == 2
    for ours, theirs in zip(second.chunks, source.chunks):
        assert address(np.from_dlpack(ours)) == values_address(theirs)


# Other producers and consumers of chunks.


def test_polars_series_of_several_chunks_keeps_them():
    series = pl.concat([pl.Series("x", [1.0, 2.0]), pl.Series("x", [3.0])], rechunk=False)
    array = ad.array(series)
    assert array.num_chunks == 2
    assert [chunk.to_pylist() for chunk in array.chunks] == [[1.0, 2.0], [3.0]]
    assert np.from_dlpack(array).tolist() == [1.0, 2.0, 3.0]


def test_arro3_chunked_array_keeps_its_chunks_zero_copy():
    parts = [np.arange(3, dtype=np.int32), np.arange(10, 12, dtype=np.int32)]
    array = ad.array(a3.ChunkedArray([a3.Array.from_numpy(part) for part in parts]))
    assert array.num_chunks == 2
    for chunk, part in zip(array.chunks, parts):
        assert np.from_dlpack(chunk).ctypes.data == part.ctypes.data
    assert array.to_pylist() == [0, 1, 2, 10, 11]


def test_chunks_of_sliced_pyarrow_chunks_concatenate_to_pyarrows_values():
    base = pa.array(np.arange(20, dtype=np.float32))
    source = pa.chunked_array([base.slice(3, 4), base.slice(11, 2), base.slice(0, 0)])
    array = ad.array(source)
    np.testing.assert_array_equal(np.from_dlpack(array), source.to_numpy())
    np.testing.assert_array_equal(np.from_dlpack(array.to_tensor()), source.to_numpy())
    assert np.from_dlpack(array.chunks[0]).ctypes.data == values_address(base) + 3 * 4


def test_chunked_fixed_shape_tensor_column_keeps_class_and_extension_type():
    chunk = pa.FixedShapeTensorArray.from_numpy_ndarray(
        np.arange(8, dtype=np.int16).reshape(2, 2, 2)
    )
    array = ad.array(pa.chunked_array([chunk, chunk]))
    assert type(array) is ad.FixedShapeTensorArray
    assert array.num_chunks == 2
    assert all(type(part) is ad.FixedShapeTensorArray for part in array.chunks)
    assert all(part.shape == [2, 2] for part in array.chunks)
    theirs = pa.chunked_array(array)
    assert theirs.num_chunks == 2
    assert isinstance(theirs.type, pa.FixedShapeTensorType)
    assert (
        theirs.chunk(1).storage.values.buffers()[1].address
        == chunk.storage.values.buffers()[1].address
    )


def test_pyarrow_chunked_array_of_ours_shares_each_chunk():
    source = pa.chunked_array([[1, 2], [3, 4, 5]], pa.int64())
    theirs = pa.chunked_array(ad.array(source))
    assert theirs.num_chunks == 2
    assert theirs.equals(source)
    for ours, original in zip(theirs.chunks, source.chunks):
        assert values_address(ours) == values_address(original)
