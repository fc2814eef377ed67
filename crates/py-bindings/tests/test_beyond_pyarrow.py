"""Beyond PyArrow (issue 5): booleans, chunked columns, tables to tensors, validity masks and the
DLPack C exchange API, with PyArrow's own conversions (``to_numpy``, ``is_valid``,
``RecordBatch.to_tensor``) as the oracle and numpy where PyArrow has no answer.

These cases complement ``test_issue5_surface.py``: value sweeps against the oracles, other
producers (polars, arro3, JAX), and the exchange table driven as a C consumer drives it.
"""

import ctypes
import gc
import weakref

import arro3.core as a3
import jax.numpy as jnp
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

BOOLS = [
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


def address(array: pa.Array) -> int:
    return array.buffers()[1].address + array.offset * array.type.byte_width


# Booleans.


@pytest.mark.parametrize("offset", [0, 1, 7, 8, 9, 17])
@pytest.mark.parametrize("length", [0, 1, 8, 9])
def test_exports_sliced_booleans_with_pyarrows_values(offset, length):
    source = pa.array(BOOLS + BOOLS).slice(offset, length)
    expected = source.to_numpy(zero_copy_only=False)
    array = ad.array(source)
    as_numpy = np.from_dlpack(array)
    assert as_numpy.dtype == np.bool_
    np.testing.assert_array_equal(as_numpy, expected)
    np.testing.assert_array_equal(torch.from_dlpack(array).numpy(), expected)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(array)), expected)


def test_boolean_export_is_a_private_writable_copy(dlpack):
    source = pa.array(BOOLS)
    array = ad.array(source)
    read = dlpack.read(array.__dlpack__(max_version=(1, 3)))
    assert not read.flags & dlpack.READ_ONLY
    result = np.from_dlpack(array)
    result[:] = False
    assert array.to_pylist() == BOOLS
    assert source.to_pylist() == BOOLS


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
    values = BOOLS[:9]
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
    source = np.array(BOOLS)
    array = ad.Array.from_dlpack(source)
    np.testing.assert_array_equal(np.from_dlpack(array), source)


# Chunked columns.


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
    assert np.from_dlpack(array.chunks[0]).ctypes.data == address(base) + 3 * 4


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
        assert address(ours) == address(original)


# Tables and record batches to tensors.

PROMOTIONS = {
    "int8+int16": {"a": pa.array([1, -2], pa.int8()), "b": pa.array([300, 4], pa.int16())},
    "uint8+int8": {"a": pa.array([255, 2], pa.uint8()), "b": pa.array([-3, 4], pa.int8())},
    "int32+float32": {"a": pa.array([1, 2], pa.int32()), "b": pa.array([0.5, 4], pa.float32())},
    "uint64+int64": {"a": pa.array([1, 2], pa.uint64()), "b": pa.array([-3, 4], pa.int64())},
    "uint32+float64": {"a": pa.array([7, 8], pa.uint32()), "b": pa.array([0.25, 1], pa.float64())},
    "float32 alone": {"a": pa.array([1.5, -2.5], pa.float32())},
    "three columns": {
        "a": pa.array([1, 2], pa.int16()),
        "b": pa.array([3, 4], pa.int16()),
        "c": pa.array([5, 6], pa.int16()),
    },
}


@pytest.mark.parametrize("columns", PROMOTIONS.values(), ids=PROMOTIONS.keys())
@pytest.mark.parametrize("row_major", [True, False])
@pytest.mark.parametrize("null_to_nan", [False, True])
def test_from_arrow_matches_pyarrow_record_batch_to_tensor(columns, row_major, null_to_nan):
    batch = pa.record_batch(columns)
    theirs = batch.to_tensor(row_major=row_major, null_to_nan=null_to_nan)
    ours = ad.Tensor.from_arrow(batch, row_major=row_major, null_to_nan=null_to_nan)
    assert ours.type == str(theirs.type)
    assert ours.shape == theirs.shape
    assert ours.strides == theirs.strides
    single_column = ours.shape[1] == 1  # both row- and column-major
    assert ours.is_row_major == (row_major or single_column)
    assert ours.is_column_major == (not row_major or single_column)
    assert ours.is_mutable
    np.testing.assert_array_equal(np.from_dlpack(ours), np.asarray(theirs))


def test_from_arrow_writes_nan_for_nulls_like_pyarrow():
    batch = pa.record_batch(
        {"a": pa.array([1, None, 3], pa.int32()), "b": pa.array([None, 0.5, 1.5])}
    )
    theirs = np.asarray(batch.to_tensor(null_to_nan=True))
    ours = np.from_dlpack(ad.Tensor.from_arrow(batch, null_to_nan=True))
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(
    "columns, expected_dtype",
    [
        ({"a": np.array([1, 2], np.float16), "b": np.array([3, 4], np.float32)}, np.float32),
        ({"a": np.array([1, 2], np.float16), "b": np.array([3, 4], np.int8)}, np.float16),
    ],
    ids=["float16+float32", "float16+int8"],
)
def test_from_arrow_converts_float16_mixes_pyarrow_refuses(columns, expected_dtype):
    batch = pa.record_batch({name: pa.array(values) for name, values in columns.items()})
    with pytest.raises(pa.ArrowNotImplementedError):
        batch.to_tensor()
    result = np.from_dlpack(ad.Tensor.from_arrow(batch))
    assert result.dtype == expected_dtype
    np.testing.assert_array_equal(
        result, np.column_stack(list(columns.values())).astype(expected_dtype)
    )


def test_from_arrow_concatenates_the_batches_of_a_table():
    table = pa.concat_tables([pa.table({"a": [1, 2], "b": [0.5, 1.5]})] * 3)
    assert len(table.to_batches()) == 3
    expected = np.asarray(table.combine_chunks().to_batches()[0].to_tensor())
    np.testing.assert_array_equal(np.from_dlpack(ad.Tensor.from_arrow(table)), expected)


def test_from_arrow_takes_polars_data_frames():
    frame = pl.DataFrame({"a": [1, 2, 3], "b": [4.0, 5.0, 6.0]})
    result = np.from_dlpack(ad.Tensor.from_arrow(frame))
    np.testing.assert_array_equal(result, frame.to_numpy())


@pytest.mark.parametrize(
    "obj, match",
    [
        (pa.record_batch({"a": pa.array([1, None])}), "null_to_nan"),
        (pa.record_batch({"a": pa.array(["x", "y"])}), '"a"'),
        (pa.record_batch({"a": pa.array([True, False])}), '"a"'),
        (pa.record_batch({}), "column"),
        (pa.array([1, 2, 3]), "struct"),
    ],
    ids=["nulls", "strings", "booleans", "no columns", "not a table"],
)
def test_from_arrow_refuses_what_pyarrow_refuses_with_type_error(obj, match):
    with pytest.raises(ad.ArrowDLPackTypeError, match=match):
        ad.Tensor.from_arrow(obj)


def test_column_tensors_are_zero_copy_per_column_in_order():
    table = pa.table({"x": pa.array([1, 2, 3], pa.int16()), "y": pa.array([0.5, 1.5, 2.5])})
    tensors = ad.column_tensors(table)
    assert list(tensors) == ["x", "y"]
    for name, tensor in tensors.items():
        result = np.from_dlpack(tensor)
        chunk = table.column(name).chunk(0)
        assert result.ctypes.data == address(chunk)
        np.testing.assert_array_equal(result, chunk.to_numpy())


def test_column_tensors_of_record_batch_and_polars_frame():
    batch = pa.record_batch({"a": pa.array([1, 2], pa.uint8())})
    assert np.from_dlpack(ad.column_tensors(batch)["a"]).tolist() == [1, 2]
    frame = pl.DataFrame({"p": [1.0, 2.0], "q": [3, 4]})
    tensors = ad.column_tensors(frame)
    assert np.from_dlpack(tensors["p"]).tolist() == [1.0, 2.0]
    assert np.from_dlpack(tensors["q"]).tolist() == [3, 4]


def test_column_tensors_give_fixed_shape_tensor_columns_their_logical_shape():
    images = pa.FixedShapeTensorArray.from_numpy_ndarray(
        np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    )
    table = pa.table({"image": images, "label": pa.array([0, 1], pa.int8())})
    tensors = ad.column_tensors(table)
    assert tensors["image"].shape == (2, 3, 4)
    np.testing.assert_array_equal(np.from_dlpack(tensors["image"]), images.to_numpy_ndarray())
    assert (
        np.from_dlpack(tensors["image"]).ctypes.data == images.storage.values.buffers()[1].address
    )


def test_column_tensors_copy_rules():
    table = pa.concat_tables([pa.table({"a": [1, 2]})] * 2)
    assert np.from_dlpack(ad.column_tensors(table)["a"]).tolist() == [1, 2, 1, 2]
    with pytest.raises(ad.ArrowDLPackBufferError, match="copy=False"):
        ad.column_tensors(table, copy=False)
    single = pa.table({"a": [5, 6]})
    copied = np.from_dlpack(ad.column_tensors(single, copy=True)["a"])
    assert copied.ctypes.data != address(single.column("a").chunk(0))
    assert copied.tolist() == [5, 6]


def test_column_tensors_refusals():
    with pytest.raises(ad.ArrowDLPackValueError, match="allow_nulls"):
        ad.column_tensors(pa.table({"a": [1, None]}))
    assert ad.column_tensors(pa.table({"a": [1, None]}), allow_nulls=True)["a"].shape == (2,)
    with pytest.raises(ad.ArrowDLPackTypeError, match='"s"'):
        ad.column_tensors(pa.table({"s": ["x"]}))
    with pytest.raises(ad.ArrowDLPackValueError, match="duplicate"):
        ad.column_tensors(pa.table([pa.array([1]), pa.array([2])], names=["a", "a"]))
    with pytest.raises(ad.ArrowDLPackTypeError):
        ad.column_tensors(pa.array([1, 2]))


# Validity masks.


@pytest.mark.parametrize("offset", [0, 1, 5, 8, 13])
def test_validity_of_sliced_arrays_is_pyarrows_is_valid(offset):
    values = [None if i % 3 == 0 else i for i in range(30)]
    source = pa.array(values, pa.int32()).slice(offset, 12)
    mask = ad.array(source).validity()
    np.testing.assert_array_equal(
        np.from_dlpack(mask), source.is_valid().to_numpy(zero_copy_only=False)
    )


def test_validity_of_polars_series_with_nulls():
    series = pl.Series("x", [1, None, 3, None])
    mask = np.from_dlpack(ad.array(series).validity())
    assert mask.tolist() == series.is_not_null().to_list()


def test_validity_masks_the_values_to_pyarrows_drop_null():
    source = pa.array([1.0, None, 2.0, 3.0, None], pa.float64())
    array = ad.array(source)
    values = np.from_dlpack(array.to_tensor(allow_nulls=True))
    mask = np.from_dlpack(array.validity())
    np.testing.assert_array_equal(values[mask], source.drop_null().to_numpy())


# The DLPack C exchange API, driven as a C consumer drives it (dlpack.h 1.3).

_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
_TO_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.py_object))
_WORK_STREAM = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]


class ExchangeTable:
    """The function table behind a type's ``__dlpack_c_exchange_api__`` capsule."""

    def __init__(self, cls):
        self.address = _get_pointer(cls.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
        words = (ctypes.c_void_p * 7).from_address(self.address + 8)
        self.version = tuple((ctypes.c_uint32 * 2).from_address(self.address))
        self.prev_api, self.allocator, from_py, to_py, self.view, stream = (
            words[i] for i in range(6)
        )
        self.from_py_object = _FROM_PY(from_py)
        self.to_py_object = _TO_PY(to_py)
        self.current_work_stream = _WORK_STREAM(stream)


def take_new_reference(out: ctypes.py_object):
    """The object a table wrote into ``out``, owning the new reference the table gave."""
    obj = out.value
    _decref(obj)  # ``out.value`` took a reference of its own; drop the table's.
    return obj


def managed_from(cls, obj):
    """A managed tensor (address) exported through ``cls``'s table."""
    out = ctypes.c_void_p()
    assert ExchangeTable(cls).from_py_object(obj, ctypes.byref(out)) == 0
    return out.value


@pytest.mark.parametrize("cls", [ad.Array, ad.Tensor, ad.FixedShapeTensorArray])
def test_exchange_table_is_a_process_lifetime_dlpack_1_3_table(cls):
    first, second = ExchangeTable(cls), ExchangeTable(cls)
    assert first.address == second.address
    assert first.version == (1, 3)
    assert first.prev_api is None
    stream = ctypes.c_void_p(1)
    assert first.current_work_stream(1, 0, ctypes.byref(stream)) == 0
    assert stream.value is None  # The CPU has no stream.


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x: ad.Array.from_dlpack(x), id="Array"),
        pytest.param(lambda x: ad.Tensor.from_dlpack(x.reshape(2, 3)), id="Tensor"),
        pytest.param(
            lambda x: ad.FixedShapeTensorArray.from_dlpack(x.reshape(3, 2)),
            id="FixedShapeTensorArray",
        ),
    ],
)
def test_exchange_table_exports_a_read_only_versioned_tensor_that_owns_its_data(make, dlpack):
    source = np.arange(6, dtype=np.float32)
    alive = weakref.ref(source)
    obj = make(source)
    pointer = managed_from(type(obj), obj)
    header = (ctypes.c_uint32 * 2).from_address(pointer)
    assert tuple(header) == (1, 3)
    flags = ctypes.c_uint64.from_address(pointer + 24).value
    data = ctypes.c_void_p.from_address(pointer + 32).value
    assert data == source.ctypes.data
    ndim = ctypes.c_int32.from_address(pointer + 32 + 16).value
    assert ndim == np.from_dlpack(obj).ndim
    # Arrow arrays are immutable; the Tensor imported from a writable numpy array is not.
    assert flags == (0 if type(obj) is ad.Tensor else dlpack.READ_ONLY)
    del obj, source
    gc.collect()
    assert alive() is not None  # The managed tensor holds the memory.
    deleter = _DELETER(ctypes.c_void_p.from_address(pointer + 16).value)
    deleter(pointer)
    gc.collect()
    assert alive() is None


def test_exchange_table_hands_our_tensor_to_torchs_table():
    source = pa.array(np.arange(12, dtype=np.int32))
    tensors = ad.FixedShapeTensorArray.from_dlpack(
        np.from_dlpack(ad.array(source)).reshape(3, 2, 2)
    )
    pointer = managed_from(ad.FixedShapeTensorArray, tensors)
    result = ctypes.py_object()
    assert ExchangeTable(torch.Tensor).to_py_object(pointer, ctypes.byref(result)) == 0
    result = take_new_reference(result)
    assert isinstance(result, torch.Tensor)
    assert tuple(result.shape) == (3, 2, 2)
    assert result.data_ptr() == address(source)
    np.testing.assert_array_equal(result.numpy(), np.arange(12).reshape(3, 2, 2))


@pytest.mark.parametrize(
    "cls, shape",
    [(ad.Array, (6,)), (ad.Tensor, (2, 3)), (ad.FixedShapeTensorArray, (2, 3))],
    ids=["Array", "Tensor", "FixedShapeTensorArray"],
)
def test_exchange_table_turns_a_foreign_managed_tensor_into_our_object(cls, shape):
    # The table's managed_tensor_to_py_object_no_sync is how a C library returns a result to the
    # framework whose table it uses: here torch's tensor, exported by torch's table, must come
    # back as an arrow_dlpack object sharing torch's memory.
    source = torch.arange(6, dtype=torch.float64).reshape(shape)
    out = ctypes.c_void_p()
    assert ExchangeTable(torch.Tensor).from_py_object(source, ctypes.byref(out)) == 0
    result = ctypes.py_object()
    assert ExchangeTable(cls).to_py_object(out.value, ctypes.byref(result)) == 0
    obj = take_new_reference(result)
    assert type(obj) is cls
    back = np.from_dlpack(obj)
    assert back.shape == shape
    assert back.ctypes.data == source.data_ptr()
    np.testing.assert_array_equal(back, source.numpy())


def test_our_from_dlpack_imports_through_torchs_table_without_calling_dunder_dlpack():
    class NoDunderDLPack(torch.Tensor):
        def __dlpack__(self, *args, **kwargs):
            raise AssertionError("__dlpack__ must not be called when the exchange table is used")

    source = torch.arange(5, dtype=torch.int16).as_subclass(NoDunderDLPack)
    tensor = ad.Tensor.from_dlpack(source)
    result = np.from_dlpack(tensor)
    assert result.tolist() == [0, 1, 2, 3, 4]
    assert result.ctypes.data == source.data_ptr()
    array = ad.Array.from_dlpack(source)
    assert array.to_pylist() == [0, 1, 2, 3, 4]
    # copy=True cannot go through the table (it has no copy argument): __dlpack__ is asked.
    with pytest.raises(AssertionError, match="must not be called"):
        ad.Tensor.from_dlpack(source, copy=True)
