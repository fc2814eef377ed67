"""Beyond PyArrow (issue 5): chunked columns, booleans, validity masks, tables to tensors, and
the DLPack C exchange API, against real peers (numpy, torch, pyarrow, polars, nanoarrow).

PyArrow decides the right values wherever it has a conversion of its own (``to_numpy``,
``is_valid``, ``RecordBatch.to_tensor``); where it has none, numpy does.
"""

import ctypes
import gc

import nanoarrow as na
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad
from arrow_dlpack._arrow_dlpack import _exchange_calls


def address(array: np.ndarray) -> int:
    return array.ctypes.data


def values_address(chunk: pa.Array) -> int:
    """The address of a primitive pyarrow array's first logical element."""
    return chunk.buffers()[1].address + chunk.offset * chunk.type.byte_width


# ---------------------------------------------------------------------------------------------
# Chunked columns


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


# ---------------------------------------------------------------------------------------------
# Booleans


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


# ---------------------------------------------------------------------------------------------
# Validity masks


@pytest.mark.parametrize(
    "source",
    [
        pa.array([1, None, 3, None, 5], pa.int32()),
        pa.array([1, None, 3, None, 5, 6, 7, None, 9, 10], pa.float64())[3:],
        pa.array([1, 2, 3], pa.int64()),
        pa.array([True, None, False]),
        pa.array([[1, 2], None, [5, 6]], pa.list_(pa.int16(), 2)),
        pa.array([], pa.uint8()),
    ],
    ids=["int32", "sliced-float64", "no-nulls", "bool", "fixed-size-list", "empty"],
)
def test_validity_is_pyarrows_is_valid_as_a_bool_tensor(source):
    mask = ad.array(source).validity()
    assert mask.type == "bool"
    assert mask.shape == (len(source),)
    assert mask.is_mutable
    expected = source.is_valid().to_numpy(zero_copy_only=False)
    np.testing.assert_array_equal(np.from_dlpack(mask), expected)
    np.testing.assert_array_equal(torch.from_dlpack(mask).numpy(), expected)


def test_validity_of_several_chunks_is_one_tensor():
    source = pa.chunked_array([[1, None], [], [None, 4, 5]], pa.int64())
    mask = ad.array(source).validity()
    expected = source.is_valid().to_numpy(zero_copy_only=False)
    np.testing.assert_array_equal(np.from_dlpack(mask), expected)


def test_values_and_validity_reach_torch_without_losing_the_nulls():
    source = pa.array([1.0, None, 3.0, None, 5.0], pa.float32())
    array = ad.array(source)
    values = torch.from_dlpack(array.to_tensor(allow_nulls=True))
    valid = torch.from_dlpack(array.validity())
    masked = values[valid]
    np.testing.assert_array_equal(masked.numpy(), source.drop_null().to_numpy())
    assert int((~valid).sum()) == source.null_count


def test_validity_of_a_fixed_shape_tensor_array():
    tensors = ad.FixedShapeTensorArray.from_dlpack(np.zeros((4, 2, 3), np.float64))
    np.testing.assert_array_equal(np.from_dlpack(tensors.validity()), [True] * 4)


# ---------------------------------------------------------------------------------------------
# The DLPack C exchange API
#
# The table's layout (dlpack.h 1.3): a header (version, previous table), then five function
# pointers. A pyo3 class cannot count Python calls of its own `__dlpack__`, so the native
# module counts the tensors that go out through our tables and come in through a producer's.


class _ExchangeHeader(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("prev_api", ctypes.c_void_p),
    ]


# PYFUNCTYPE keeps the GIL held during the call and raises the Python error a callback sets.
_FromPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_ToPyObject = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))


class _ExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", _ExchangeHeader),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", _FromPyObject),
        ("managed_tensor_to_py_object_no_sync", _ToPyObject),
        ("dltensor_from_py_object_no_sync", ctypes.c_void_p),
        ("current_work_stream", ctypes.c_void_p),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]


def exchange_table(cls) -> _ExchangeAPI:
    pointer = _capsule_pointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    return _ExchangeAPI.from_address(pointer)


def calls_since(before):
    now = _exchange_calls()
    return {key: now[key] - before[key] for key in now}


@pytest.mark.parametrize("cls", [ad.Array, ad.Tensor, ad.FixedShapeTensorArray])
def test_every_class_publishes_a_dlpack_1_3_exchange_table(cls):
    table = exchange_table(cls)
    assert (table.header.major, table.header.minor) == (1, 3)
    assert table.managed_tensor_from_py_object_no_sync


def test_torch_from_dlpack_of_ours_calls_dunder_dlpack_not_the_table():
    # torch 2.15 publishes a table (torch.Tensor.__dlpack_c_exchange_api__) but does not consume
    # others': torch.from_dlpack is torch/utils/dlpack.py, which always calls `__dlpack__`. So
    # our table is not used by torch.from_dlpack; the tests below show that it works with
    # torch's own table when a C consumer (tvm-ffi, CuteDSL, ...) takes that path.
    source = pa.array([1.5, 2.5, 3.5])
    before = _exchange_calls()
    result = torch.from_dlpack(ad.array(source))
    assert calls_since(before) == {"exported": 0, "imported": 0}
    np.testing.assert_array_equal(result.numpy(), source.to_numpy())
    assert result.data_ptr() == values_address(source)


def test_our_table_hands_a_tensor_to_torchs_table_without_a_python_call():
    # What a C consumer does: our table exports the managed tensor, torch's table wraps it.
    source = pa.array([1.5, 2.5, 3.5, 4.5])[1:]
    array = ad.array(source)
    ours = exchange_table(ad.Array)
    theirs = exchange_table(torch.Tensor)
    before = _exchange_calls()
    managed = ctypes.c_void_p()
    assert ours.managed_tensor_from_py_object_no_sync(id(array), ctypes.byref(managed)) == 0
    assert calls_since(before) == {"exported": 1, "imported": 0}
    out = ctypes.c_void_p()
    assert theirs.managed_tensor_to_py_object_no_sync(managed, ctypes.byref(out)) == 0
    result = ctypes.cast(out, ctypes.py_object).value
    _decref(result)  # `out` held a new reference, and `.value` took another
    assert isinstance(result, torch.Tensor)
    assert result.data_ptr() == values_address(source)
    del array, source
    gc.collect()
    np.testing.assert_array_equal(result.numpy(), [2.5, 3.5, 4.5])


@pytest.mark.parametrize(
    "cls, shape",
    [(ad.Tensor, (2, 3)), (ad.Array, (6,)), (ad.FixedShapeTensorArray, (3, 2))],
    ids=["Tensor", "Array", "FixedShapeTensorArray"],
)
def test_our_table_takes_back_a_tensor_that_torchs_table_exported(cls, shape):
    # What a C library does to return its result: torch's table exports, ours wraps.
    source = torch.arange(6, dtype=torch.float64).reshape(shape)
    managed = ctypes.c_void_p()
    assert exchange_table(torch.Tensor).managed_tensor_from_py_object_no_sync(
        id(source), ctypes.byref(managed)
    ) == 0
    before = _exchange_calls()
    out = ctypes.c_void_p()
    assert exchange_table(cls).managed_tensor_to_py_object_no_sync(managed, ctypes.byref(out)) == 0
    assert calls_since(before) == {"exported": 0, "imported": 1}
    result = ctypes.cast(out, ctypes.py_object).value
    _decref(result)
    assert type(result) is cls
    exported = np.from_dlpack(result)
    assert address(exported) == source.data_ptr()
    np.testing.assert_array_equal(exported, source.numpy())


def test_our_table_reports_errors_as_our_exceptions():
    array = ad.array(pa.array([1, None], pa.int64()))
    managed = ctypes.c_void_p()
    table = exchange_table(ad.Array)
    with pytest.raises(TypeError, match="found 1 nulls"):
        table.managed_tensor_from_py_object_no_sync(id(array), ctypes.byref(managed))
    assert managed.value is None


@pytest.mark.parametrize("cls", [ad.Array, ad.Tensor])
def test_our_from_dlpack_takes_torch_tensors_through_torchs_table(cls):
    source = torch.arange(6, dtype=torch.float32)
    before = _exchange_calls()
    result = cls.from_dlpack(source)
    assert calls_since(before) == {"exported": 0, "imported": 1}
    exported = np.from_dlpack(result)
    assert address(exported) == source.data_ptr()
    np.testing.assert_array_equal(exported, source.numpy())


def test_our_from_dlpack_takes_our_own_objects_through_our_table():
    source = pa.array([1, 2, 3], pa.int32())
    before = _exchange_calls()
    tensor = ad.Tensor.from_dlpack(ad.array(source))
    assert calls_since(before) == {"exported": 1, "imported": 1}
    assert address(np.from_dlpack(tensor)) == values_address(source)


def test_from_dlpack_with_copy_asks_dunder_dlpack_as_the_table_has_no_copy_argument():
    source = torch.arange(4, dtype=torch.int64)
    before = _exchange_calls()
    result = ad.Tensor.from_dlpack(source, copy=True)
    assert calls_since(before) == {"exported": 0, "imported": 0}
    exported = np.from_dlpack(result)
    assert address(exported) != source.data_ptr()
    np.testing.assert_array_equal(exported, source.numpy())


# ---------------------------------------------------------------------------------------------
# Tables and record batches to tensors


NUMERIC = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
]


def numeric_batch(types, rows=5, nulls=False):
    columns = {}
    for index, arrow_type in enumerate(types):
        values = [(row * 7 + index * 3) % 100 for row in range(rows)]
        if nulls and rows > 1:
            values[(index + 1) % rows] = None
        columns[f"c{index}"] = pa.array(values, arrow_type)
    return pa.record_batch(columns)


def assert_same_tensor(ours: ad.Tensor, theirs: pa.Tensor):
    expected = theirs.to_numpy()
    result = np.from_dlpack(ours)
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    assert result.strides == expected.strides
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("row_major", [True, False])
@pytest.mark.parametrize("first", NUMERIC, ids=str)
@pytest.mark.parametrize("second", NUMERIC, ids=str)
def test_from_arrow_promotes_types_as_pyarrows_to_tensor(first, second, row_major):
    batch = numeric_batch([first, second])
    ours = ad.Tensor.from_arrow(batch, row_major=row_major)
    assert_same_tensor(ours, batch.to_tensor(row_major=row_major))
    assert ours.is_mutable


@pytest.mark.parametrize("row_major", [True, False])
@pytest.mark.parametrize(
    "types",
    [[pa.int32(), pa.float32()], [pa.uint8(), pa.int16()], [pa.int64()], [pa.float64()] * 3],
    ids=str,
)
def test_from_arrow_null_to_nan_matches_pyarrow(types, row_major):
    batch = numeric_batch(types, nulls=True)
    ours = ad.Tensor.from_arrow(batch, row_major=row_major, null_to_nan=True)
    assert_same_tensor(ours, batch.to_tensor(row_major=row_major, null_to_nan=True))


def test_from_arrow_of_a_multi_batch_table_concatenates_the_rows():
    batch = numeric_batch([pa.int16(), pa.float32(), pa.uint8()], rows=7)
    table = pa.Table.from_batches([batch, batch.slice(2, 3), batch.slice(0, 0), batch.slice(5)])
    assert table.column(0).num_chunks == 4
    for row_major in (True, False):
        ours = ad.Tensor.from_arrow(table, row_major=row_major)
        assert_same_tensor(ours, table.to_tensor(row_major=row_major))


def test_from_arrow_of_a_sliced_record_batch_reads_from_its_offset():
    batch = numeric_batch([pa.int32(), pa.float64()], rows=10).slice(3, 4)
    assert_same_tensor(ad.Tensor.from_arrow(batch), batch.to_tensor())


def test_from_arrow_of_an_empty_table_has_zero_rows():
    batch = numeric_batch([pa.int32(), pa.float64()], rows=0)
    ours = ad.Tensor.from_arrow(batch)
    assert ours.shape == (0, 2)
    assert np.from_dlpack(ours).dtype == np.float64
    assert ad.Tensor.from_arrow(pa.Table.from_batches([], batch.schema)).shape == (0, 2)


def test_from_arrow_of_a_polars_dataframe_matches_pyarrow():
    frame = pl.DataFrame(
        {"a": pl.Series([1, 2, 3], dtype=pl.Int32), "b": pl.Series([0.5, None, 2.5])}
    )
    ours = ad.Tensor.from_arrow(frame, null_to_nan=True)
    assert_same_tensor(ours, frame.to_arrow().to_batches()[0].to_tensor(null_to_nan=True))


def test_from_arrow_of_a_struct_array_and_of_our_struct_array():
    batch = numeric_batch([pa.int64(), pa.uint16()])
    struct = batch.to_struct_array()
    assert_same_tensor(ad.Tensor.from_arrow(struct), batch.to_tensor())
    assert_same_tensor(ad.Tensor.from_arrow(ad.array(struct)), batch.to_tensor())


def test_from_arrow_converts_float16_mixes_that_pyarrow_refuses():
    batch = pa.record_batch(
        {
            "h": pa.array(np.array([0.5, 1.5], np.float16)),
            "f": pa.array([2.5, 3.5], pa.float32()),
        }
    )
    with pytest.raises(pa.ArrowNotImplementedError, match="halffloat"):
        batch.to_tensor()
    result = np.from_dlpack(ad.Tensor.from_arrow(batch))
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, [[0.5, 2.5], [1.5, 3.5]])


def test_from_arrow_refusals_are_pyarrows_type_errors():
    with_nulls = numeric_batch([pa.int32()], nulls=True)
    with pytest.raises(TypeError, match="with no nulls"):
        with_nulls.to_tensor()
    with pytest.raises(TypeError, match=r'found 1 nulls in column "c0".*null_to_nan'):
        ad.Tensor.from_arrow(with_nulls)
    strings = pa.record_batch({"s": ["x", "y"]})
    with pytest.raises(TypeError, match="not supported: string"):
        strings.to_tensor()
    with pytest.raises(TypeError, match='cannot convert column "s"'):
        ad.Tensor.from_arrow(strings)
    empty = pa.RecordBatch.from_pydict({})
    with pytest.raises(TypeError, match="without columns"):
        empty.to_tensor()
    with pytest.raises(TypeError, match="no columns given"):
        ad.Tensor.from_arrow(empty)


def test_from_arrow_refuses_what_is_not_a_table():
    with pytest.raises(TypeError, match=r"expected a table.*found Arrow type int64"):
        ad.Tensor.from_arrow(pa.array([1, 2]))
    with pytest.raises(TypeError, match="neither __arrow_c_array__ nor __arrow_c_stream__"):
        ad.Tensor.from_arrow({"a": [1, 2]})


def test_column_tensors_share_each_columns_memory():
    embeddings = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.float32)), 4)
    batch = pa.record_batch(
        {"id": pa.array([7, 8, 9], pa.int64()), "embedding": embeddings, "flag": [1, 0, 1]}
    )
    tensors = ad.column_tensors(batch)
    assert list(tensors) == ["id", "embedding", "flag"]
    assert tensors["embedding"].shape == (3, 4)
    assert not tensors["id"].is_mutable
    for name in ("id", "flag"):
        result = np.from_dlpack(tensors[name])
        assert address(result) == values_address(batch[name])
        np.testing.assert_array_equal(result, batch[name].to_numpy())
    result = np.from_dlpack(tensors["embedding"])
    assert address(result) == values_address(embeddings.values)
    np.testing.assert_array_equal(result, embeddings.values.to_numpy().reshape(3, 4))


def test_column_tensors_of_a_polars_dataframe():
    frame = pl.DataFrame({"x": [1, 2, 3], "y": [0.5, 1.5, 2.5]})
    tensors = ad.column_tensors(frame)
    for name in frame.columns:
        np.testing.assert_array_equal(np.from_dlpack(tensors[name]), frame[name].to_numpy())
    assert torch.from_dlpack(tensors["y"]).dtype == torch.float64


def test_column_tensors_of_a_fixed_shape_tensor_column_use_the_logical_shape():
    cells = np.arange(24, dtype=np.int32).reshape(2, 3, 4).transpose(0, 2, 1)  # (2, 4, 3)
    column = ad.FixedShapeTensorArray.from_dlpack(cells)
    assert column.permutation == [1, 0]
    table = pa.table({"image": pa.array(column)})
    tensor = ad.column_tensors(table)["image"]
    assert tensor.shape == (2, 4, 3)
    np.testing.assert_array_equal(np.from_dlpack(tensor), cells)


def test_column_tensors_of_several_batches_concatenate_unless_copy_false():
    batch = pa.record_batch({"a": pa.array([1, 2, 3], pa.int32()), "b": [0.5, 1.5, 2.5]})
    table = pa.Table.from_batches([batch, batch.slice(1)])
    tensors = ad.column_tensors(table)
    for name in table.column_names:
        np.testing.assert_array_equal(np.from_dlpack(tensors[name]), table[name].to_numpy())
    with pytest.raises(BufferError, match="concatenating 2 chunks requires a copy"):
        ad.column_tensors(table, copy=False)


def test_column_tensors_unpack_booleans_unless_copy_false():
    batch = pa.record_batch({"flag": [True, False, True]})
    result = np.from_dlpack(ad.column_tensors(batch)["flag"])
    np.testing.assert_array_equal(result, batch["flag"].to_numpy(zero_copy_only=False))
    with pytest.raises(TypeError, match='column "flag" of type Boolean: bit-packed'):
        ad.column_tensors(batch, copy=False)


def test_column_tensors_with_copy_true_are_fresh():
    batch = pa.record_batch({"a": pa.array([1, 2, 3], pa.int64())})
    result = np.from_dlpack(ad.column_tensors(batch, copy=True)["a"])
    assert address(result) != values_address(batch["a"])
    np.testing.assert_array_equal(result, [1, 2, 3])


def test_column_tensors_refuse_nulls_unless_allowed():
    batch = pa.record_batch({"a": pa.array([1, None, 3], pa.int64())})
    with pytest.raises(ValueError, match=r'found 1 nulls in column "a".*allow_nulls'):
        ad.column_tensors(batch)
    result = np.from_dlpack(ad.column_tensors(batch, allow_nulls=True)["a"])
    assert (result[0], result[2]) == (1, 3)
    struct = pa.StructArray.from_arrays(
        [pa.array([1, 2], pa.int64())], names=["a"], mask=pa.array([False, True])
    )
    with pytest.raises(ValueError, match="found 1 nulls in the struct array"):
        ad.column_tensors(struct)


def test_column_tensors_refuse_other_types_and_duplicate_names():
    with pytest.raises(TypeError, match='cannot convert column "s"'):
        ad.column_tensors(pa.record_batch({"s": ["x"]}))
    duplicated = pa.record_batch([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(ValueError, match='duplicate column name "a"'):
        ad.column_tensors(duplicated)
    with pytest.raises(TypeError, match="expected a table"):
        ad.column_tensors(pa.array([1.0]))
