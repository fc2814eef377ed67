"""The direct import of fixed-width arrays and fixed-size lists of them (`arrow_ffi/direct.rs`),
the remembered schema fields (`arrow_ffi/fields.rs`) and the per-type protocol tables
(`arrow_ffi/methods.rs`), checked against PyArrow and the hand-built producers of
`_arrow_c_ctypes`, whose release callbacks count every call."""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pytest

import _arrow_c_ctypes as ac
import arrow_dlpack as ad

# Every fixed-width number the direct import builds.
CODES = "i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8"
NUMERIC = [pa.from_numpy_dtype(np.dtype(code)) for code in CODES.split()]


def values(arrow_type: pa.DataType, n: int) -> list:
    if pa.types.is_floating(arrow_type):
        return [None if i % 3 == 1 else float(i) / 2 for i in range(n)]
    return [None if i % 3 == 1 else i % 100 for i in range(n)]


def numeric_array(arrow_type: pa.DataType, n: int) -> pa.Array:
    if pa.types.is_float16(arrow_type):
        data = np.array([0 if v is None else v for v in values(pa.float32(), n)], np.float16)
        mask = np.array([v is None for v in values(pa.float32(), n)])
        return pa.array(data, type=arrow_type, mask=mask)
    return pa.array(values(arrow_type, n), type=arrow_type)


def same(ours: ad.Array, theirs: pa.Array) -> None:
    back = pa.array(ours)
    assert back.type == theirs.type
    assert back.equals(theirs), (back, theirs)
    assert ours.null_count == theirs.null_count
    assert len(ours) == len(theirs)


@pytest.mark.parametrize("arrow_type", NUMERIC, ids=str)
@pytest.mark.parametrize("offset, length", [(0, 20), (3, 11), (7, 0), (19, 1)])
def test_numeric_arrays_with_nulls_and_offsets_match_pyarrow(arrow_type, offset, length):
    source = numeric_array(arrow_type, 20).slice(offset, length)
    ours = ad.array(source)
    same(ours, source)
    assert ours.to_pylist() == source.to_pylist()


@pytest.mark.parametrize("arrow_type", NUMERIC, ids=str)
def test_numeric_arrays_without_nulls_share_pyarrows_memory(arrow_type):
    source = pa.array(np.arange(12).astype(arrow_type.to_pandas_dtype()), type=arrow_type)
    view = ad.array(source.slice(2, 8)).to_tensor()
    expected = source.buffers()[1].address + 2 * arrow_type.byte_width
    assert np.from_dlpack(view).__array_interface__["data"][0] == expected
    assert np.array_equal(np.from_dlpack(view), source.slice(2, 8).to_numpy())


@pytest.mark.parametrize("offset, length", [(0, 6), (2, 3), (5, 1), (6, 0)])
def test_fixed_size_lists_with_nulls_at_both_levels_match_pyarrow(offset, length):
    items = pa.array([None if i % 5 == 2 else i for i in range(18)], pa.int32())
    lists = pa.FixedSizeListArray.from_arrays(items, 3, mask=pa.array([i == 1 for i in range(6)]))
    source = lists.slice(offset, length)
    ours = ad.array(source)
    same(ours, source)
    assert ours.to_pylist() == source.to_pylist()


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_nested_fixed_size_lists_with_offsets_match_pyarrow(offset):
    items = pa.array(np.arange(48, dtype=np.float64))
    inner = pa.FixedSizeListArray.from_arrays(items.slice(4), 2)  # the child has an offset
    outer = pa.FixedSizeListArray.from_arrays(inner, 2)
    source = outer.slice(offset, 4)
    ours = ad.array(source)
    same(ours, source)
    tensor = np.from_dlpack(ours.to_tensor())
    assert tensor.shape == (4, 2, 2)
    assert np.array_equal(tensor, np.arange(4, 48).reshape(-1, 2, 2)[offset : offset + 4])


@pytest.mark.parametrize("offset", [0, 2])
def test_fixed_shape_tensor_arrays_match_pyarrow_and_keep_their_type(offset):
    data = np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3)
    source = pa.FixedShapeTensorArray.from_numpy_ndarray(data).slice(offset)
    for _ in range(3):  # the second and third imports use the remembered field and type
        ours = ad.array(source)
        assert isinstance(ours, ad.FixedShapeTensorArray)
        assert ours.shape == [2, 3]
        assert np.array_equal(ours.to_numpy_ndarray(), data[offset:])
        assert pa.array(ours).equals(source)


def test_a_remembered_field_is_not_taken_for_a_schema_that_differs():
    base = pa.array([1, 2, 3], pa.int32())
    for arrow_type in [pa.int32(), pa.int64(), pa.float32(), pa.int32()]:
        source = base.cast(arrow_type)
        assert ad.array(source).type == str(arrow_type)
    named = pa.chunked_array([base]).cast(pa.int16())
    assert ad.array(named).type == "int16"
    field = pa.field("x", pa.int32(), metadata={"k": "v"})
    table = pa.table([base], schema=pa.schema([field]))
    assert ad.array(table.column(0)).type == "int32"


def int32_producer(values, **overrides):
    return ac.ArrayProducer(ac.Schema("i"), ac.int32_array(values, **overrides))


def test_the_release_callback_runs_once_when_the_array_dies():
    producer = int32_producer([1, None, 3])
    array = ad.array(producer)
    assert array.to_pylist() == [1, None, 3]
    node = producer.array
    assert node.released == 0
    del array
    gc.collect()
    assert node.released == 1


def test_a_fixed_size_list_is_released_once_with_its_child():
    child = ac.int32_array([1, 2, 3, 4, 5, 6])
    parent = ac.Array(3, [None], children=[child])
    producer = ac.ArrayProducer(ac.Schema("+w:2", children=[ac.Schema("i")]), parent)
    array = ad.array(producer)
    tensor = array.to_tensor()
    del array
    gc.collect()
    assert parent.released == 0  # the tensor still shares the memory
    assert np.array_equal(np.from_dlpack(tensor), [[1, 2], [3, 4], [5, 6]])
    del tensor
    gc.collect()
    assert (parent.released, child.released) == (1, 1)


def test_a_refused_fixed_size_list_is_released_once():
    # A non-nullable child with a null that the parent does not mask.
    child = ac.int32_array([1, None, 3, 4])
    parent = ac.Array(2, [None], children=[child])
    schema = ac.Schema("+w:2", children=[ac.Schema("i", flags=0)])
    producer = ac.ArrayProducer(schema, parent)
    with pytest.raises(ValueError, match="ArrowArray"):
        ad.array(producer)
    gc.collect()
    assert (parent.released, child.released) == (1, 1)


def test_a_misaligned_buffer_is_copied_by_the_general_path_and_released_once():
    storage = ac.Storage(b"\0" + ac.packed("i", [7, 8, 9]))
    producer = int32_producer([7, 8, 9], buffers=[None, storage.address + 1])
    array = ad.array(producer)
    assert array.to_pylist() == [7, 8, 9]
    del array
    gc.collect()
    assert producer.array.released == 1


def test_an_unknown_null_count_is_counted():
    producer = int32_producer([1, None, None, 4], null_count=-1)
    array = ad.array(producer)
    assert array.null_count == 2
    assert array.to_pylist() == [1, None, None, 4]


class Mutable:
    """A Python class: its attributes may change, so no type table is kept for it."""

    def __init__(self, source):
        self.source = source

    def __arrow_c_array__(self, requested_schema=None):
        return self.source.__arrow_c_array__()


def test_a_mutable_class_is_asked_again_after_it_changes():
    source = pa.array([1, 2], pa.int64())
    assert ad.array(Mutable(source)).to_pylist() == [1, 2]
    del Mutable.__arrow_c_array__
    try:
        with pytest.raises(TypeError, match="Arrow PyCapsule interface"):
            ad.array(Mutable(source))
    finally:
        Mutable.__arrow_c_array__ = lambda self, requested_schema=None: (
            self.source.__arrow_c_array__()
        )
    assert ad.array(Mutable(source)).to_pylist() == [1, 2]


def test_producers_of_every_kind_still_import():
    source = pa.array([1.5, None], pa.float64())
    assert ad.array(pa.chunked_array([source, source])).to_pylist() == [1.5, None, 1.5, None]
    assert ad.array(pa.record_batch([source], names=["x"]).column(0)).to_pylist() == [1.5, None]
    assert ad.array(ad.array(source)).to_pylist() == [1.5, None]


class KeepsKeywords:
    """A DLPack producer that keeps and changes the keywords it is called with."""

    def __init__(self, source):
        self.source = source
        self.calls = []

    def __dlpack__(self, **kwargs):
        self.calls.append(dict(kwargs))
        kwargs["max_version"] = (0, 1)
        kwargs["extra"] = True
        return self.source.__dlpack__(max_version=self.calls[-1]["max_version"])

    def __dlpack_device__(self):
        return self.source.__dlpack_device__()


def test_dlpack_keywords_changed_by_a_producer_do_not_reach_the_next_import():
    producer = KeepsKeywords(np.arange(4, dtype=np.int64))
    for _ in range(3):
        assert ad.Array.from_dlpack(producer).to_pylist() == [0, 1, 2, 3]
    assert len(producer.calls) == 3
    assert producer.calls[0] == producer.calls[1] == producer.calls[2]
    assert set(producer.calls[0]) == {"max_version"}
    # `copy=False` is passed on (a CPU copy is made by the consumer, so `copy=True` is not).
    assert ad.Array.from_dlpack(producer, copy=False).to_pylist() == [0, 1, 2, 3]
    assert producer.calls[-1]["copy"] is False
    assert ad.Array.from_dlpack(producer, copy=True).to_pylist() == [0, 1, 2, 3]
    assert set(producer.calls[-1]) == {"max_version"}


def test_numpy_imports_through_the_type_table_keep_every_check():
    vector = np.arange(6, dtype=np.float32)
    for _ in range(2):
        assert np.array_equal(np.from_dlpack(ad.Array.from_dlpack(vector).to_tensor()), vector)
    with pytest.raises(ValueError):
        ad.Array.from_dlpack(vector.reshape(2, 3))
    with pytest.raises(BufferError):
        ad.Array.from_dlpack(vector, device=(2, 0))
