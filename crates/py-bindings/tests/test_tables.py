"""Tables and record batches to tensors: ``Tensor.from_arrow`` (one 2-D copy, PyArrow's
``RecordBatch.to_tensor`` with its type promotion, row- and column-major, ``null_to_nan``) and
``column_tensors`` (one zero-copy tensor per column), with PyArrow as the oracle; pyarrow tables,
record batches and struct arrays, and polars data frames as sources.
"""

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
    with pytest.raises(TypeError, match='column "flag" of type bool: bit-packed'):
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


# Sweeps against RecordBatch.to_tensor, and other sources.


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
        (pa.record_batch({}), "column"),
        (pa.array([1, 2, 3]), "struct"),
    ],
    ids=["nulls", "strings", "no columns", "not a table"],
)
def test_from_arrow_refuses_what_pyarrow_refuses_with_type_error(obj, match):
    # (Booleans, which PyArrow refuses too, are converted: test_loader_options.py.)
    with pytest.raises(ad.ArrowDLPackTypeError, match=match):
        ad.Tensor.from_arrow(obj)


def test_column_tensors_are_zero_copy_per_column_in_order():
    table = pa.table({"x": pa.array([1, 2, 3], pa.int16()), "y": pa.array([0.5, 1.5, 2.5])})
    tensors = ad.column_tensors(table)
    assert list(tensors) == ["x", "y"]
    for name, tensor in tensors.items():
        result = np.from_dlpack(tensor)
        chunk = table.column(name).chunk(0)
        assert result.ctypes.data == values_address(chunk)
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
    assert copied.ctypes.data != values_address(single.column("a").chunk(0))
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
