"""Variable-length list columns as ragged tensors (`ad.ListArray`): values and offsets that share
the column's memory, padding and truncation, packing for varlen attention, `torch.nested`, the
way back to Arrow, and malformed offsets from foreign memory.

pyarrow, numpy and torch are the oracles: pyarrow's `to_pylist` says what the rows are, numpy
reads what we export.
"""

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

# `conftest.py` loads the helpers by path and registers them (the tests are not a package).
import _arrow_c_ctypes as ac  # noqa: E402
from _arrow_c_case_builders import list_pair  # noqa: E402

ROWS = [[1, 2, 3], [], [4, 5], [6]]


def rows_of(values, offsets):
    """The rows that values and offsets (numpy) describe."""
    return [values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def buffer_address(array, index):
    """The address of buffer `index` of a pyarrow array (its values or offsets)."""
    return array.buffers()[index].address


@pytest.mark.parametrize(
    "arrow_type, offset_dtype",
    [
        (pa.list_(pa.int32()), np.int32),
        (pa.large_list(pa.int32()), np.int64),
        (pa.list_view(pa.int32()), np.int32),
        (pa.large_list_view(pa.int32()), np.int64),
    ],
)
def test_every_list_layout_gives_values_and_offsets(arrow_type, offset_dtype):
    column = pa.array(ROWS, arrow_type)
    array = ad.array(column)
    assert type(array) is ad.ListArray
    assert isinstance(array, ad.Array)
    values, offsets = np.from_dlpack(array.values), np.from_dlpack(array.offsets)
    assert offsets.dtype == offset_dtype
    assert offsets[0] == 0
    assert rows_of(values, offsets) == column.to_pylist()
    assert np.from_dlpack(array.lengths()).tolist() == [3, 0, 2, 1]
    assert np.from_dlpack(array.lengths()).dtype == np.int64


def test_values_and_offsets_share_the_pyarrow_buffers():
    column = pa.array(ROWS, pa.list_(pa.int64()))
    array = ad.array(column)
    values = np.from_dlpack(array.values)
    offsets = np.from_dlpack(array.offsets)
    assert values.ctypes.data == buffer_address(column.values, 1)
    assert offsets.ctypes.data == buffer_address(column, 1)
    assert not values.flags.writeable


def test_a_sliced_column_views_only_its_elements():
    column = pa.array(ROWS, pa.list_(pa.float32())).slice(2, 2)  # [4, 5], [6]
    array = ad.array(column)
    values = np.from_dlpack(array.values)
    assert values.tolist() == [4.0, 5.0, 6.0]
    # The view starts at the slice's first element: values buffer + offsets[0] * 4 bytes.
    first = column.offsets[0].as_py()
    assert first == 3
    assert values.ctypes.data == buffer_address(column.values, 1) + first * 4
    assert np.from_dlpack(array.offsets).tolist() == [0, 2, 3]


def test_an_out_of_order_list_view_is_copied():
    column = pa.ListViewArray.from_arrays(
        pa.array([3, 0, 1], pa.int32()),
        pa.array([2, 2, 0], pa.int32()),
        pa.array([10, 11, 12, 13, 14], pa.int16()),
    )
    array = ad.array(column)
    values, offsets = np.from_dlpack(array.values), np.from_dlpack(array.offsets)
    assert rows_of(values, offsets) == column.to_pylist() == [[13, 14], [10, 11], []]


def test_an_empty_row_outside_the_copied_range_is_empty():
    # Rows out of order (copied), and an empty row whose offset, 0, lies before them.
    column = pa.ListViewArray.from_arrays(
        pa.array([4, 3, 0], pa.int32()),
        pa.array([1, 1, 0], pa.int32()),
        pa.array([10, 11, 12, 13, 14], pa.int64()),
    )
    array = ad.array(column)
    assert np.from_dlpack(array.to_padded(-1)).tolist() == [[14], [13], [-1]]
    assert rows_of(np.from_dlpack(array.values), np.from_dlpack(array.offsets)) == column.to_pylist()


def test_inner_dimensions_from_fixed_size_lists_and_fixed_shape_tensors():
    vectors = pa.array([[[1, 2], [3, 4]], [[5, 6]]], pa.list_(pa.list_(pa.float64(), 2)))
    array = ad.array(vectors)
    assert array.values.shape == (3, 2)
    cells = pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(12, dtype=np.int8).reshape(3, 2, 2))
    nested = pa.ListArray.from_arrays(pa.array([0, 1, 3], pa.int32()), cells)
    array = ad.array(nested)
    values = np.from_dlpack(array.values)
    assert values.shape == (3, 2, 2)
    assert values.tolist() == np.arange(12).reshape(3, 2, 2).tolist()


def test_booleans_are_unpacked():
    array = ad.array(pa.array([[True, False], [True]], pa.list_(pa.bool_())))
    values = np.from_dlpack(array.values)
    assert values.dtype == np.bool_
    assert values.tolist() == [True, False, True]


def test_null_rows_are_refused_then_empty_when_allowed():
    column = pa.array([[1, 2], None, [3]], pa.list_(pa.int32()))
    array = ad.array(column)
    with pytest.raises(ValueError, match="row 1 of the list array is null"):
        array.values
    with pytest.raises(ValueError, match="allow_nulls=True"):
        array.to_padded()
    assert np.from_dlpack(array.lengths(allow_nulls=True)).tolist() == [2, 0, 1]
    padded = np.from_dlpack(array.to_padded(-1, allow_nulls=True))
    assert padded.tolist() == [[1, 2], [-1, -1], [3, -1]]


def test_a_null_row_that_covers_elements_drops_them():
    # Row 1 is null, but its offsets still cover 8 and 9 (Arrow allows this).
    column = pa.ListArray.from_arrays(
        pa.array([0, 1, 3, 4], pa.int32()),
        pa.array([7, 8, 9, 10], pa.int32()),
        mask=pa.array([False, True, False]),
    )
    assert column.to_pylist() == [[7], None, [10]]
    values, offsets = ad.array(column).to_jagged(allow_nulls=True)
    assert np.from_dlpack(values).tolist() == [7, 10]
    assert np.from_dlpack(offsets).tolist() == [0, 1, 1, 2]


def test_null_elements_are_refused():
    array = ad.array(pa.array([[1, None], [3]], pa.list_(pa.int32())))
    with pytest.raises(ValueError, match="nulls"):
        array.values
    assert np.from_dlpack(array.lengths(allow_nulls=True)).tolist() == [2, 1]


def test_chunked_columns_pad_and_pack_across_chunks():
    chunked = pa.chunked_array([pa.array(ROWS[:2], pa.list_(pa.int32())), pa.array(ROWS[2:], pa.list_(pa.int32()))])
    array = ad.array(chunked)
    assert array.num_chunks == 2
    values, offsets = np.from_dlpack(array.values), np.from_dlpack(array.offsets)
    assert rows_of(values, offsets) == ROWS  # concatenated (a copy)
    padded = np.from_dlpack(array.to_padded())
    assert padded.tolist() == [[1, 2, 3], [0, 0, 0], [4, 5, 0], [6, 0, 0]]
    packed = array.to_packed()
    assert np.from_dlpack(packed["cu_seqlens"]).tolist() == [0, 3, 3, 5, 6]
    # A null row in the second chunk is named by its position in the whole column.
    with_null = ad.array(pa.chunked_array([pa.array([[1]]), pa.array([[2], None])]))
    with pytest.raises(ValueError, match="row 2 of the list array is null"):
        with_null.values


@pytest.mark.parametrize("padding_side", ["left", "right"])
@pytest.mark.parametrize("truncation_side", ["left", "right"])
@pytest.mark.parametrize("max_length", [None, 0, 2])
@pytest.mark.parametrize("multiple", [None, 4])
def test_padding_matches_numpy(padding_side, truncation_side, max_length, multiple):
    array = ad.array(pa.array(ROWS, pa.list_(pa.int64())))
    padded = np.from_dlpack(
        array.to_padded(
            -100,
            max_length=max_length,
            pad_to_multiple_of=multiple,
            padding_side=padding_side,
            truncation_side=truncation_side,
        )
    )
    cap = len(max(ROWS, key=len)) if max_length is None else max_length
    kept = [row[:cap] if truncation_side == "right" else row[len(row) - min(cap, len(row)) :] for row in ROWS]
    width = max(len(row) for row in kept)
    if multiple:
        width = -(-width // multiple) * multiple
    expected = np.full((len(ROWS), width), -100, dtype=np.int64)
    for i, row in enumerate(kept):
        if row:
            if padding_side == "right":
                expected[i, : len(row)] = row
            else:
                expected[i, width - len(row) :] = row
    assert padded.shape == expected.shape
    assert padded.tolist() == expected.tolist()
    assert padded.flags.writeable


def test_pad_values_are_checked():
    array = ad.array(pa.array([[1], [2, 3]], pa.list_(pa.uint8())))
    with pytest.raises(ValueError, match="does not fit type uint8"):
        array.to_padded(-100)
    with pytest.raises(ValueError, match="does not fit type int32"):
        ad.array(pa.array([[1]], pa.list_(pa.int32()))).to_padded(0.5)
    with pytest.raises(TypeError, match="pad_value"):
        array.to_padded("x")
    with pytest.raises(ValueError, match="padding_side"):
        array.to_padded(padding_side="middle")
    with pytest.raises(ValueError, match="max_length"):
        array.to_padded(max_length=-1)
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        array.to_padded(pad_to_multiple_of=0)
    # Beyond 64 bits is a ValueError naming the argument too, not OverflowError.
    for huge in (2**63, 2**70):
        with pytest.raises(ValueError, match="max_length"):
            array.to_padded(max_length=huge)
        with pytest.raises(ValueError, match="pad_to_multiple_of"):
            array.to_padded(pad_to_multiple_of=-huge)
    with pytest.raises(TypeError):
        array.to_padded(max_length=1.5)
    floats = ad.array(pa.array([[1.5], []], pa.list_(pa.float16())))
    assert np.from_dlpack(floats.to_padded(float("nan"))).tolist()[1][0] != 0


def test_packed_matches_the_flattening_collator():
    array = ad.array(pa.array(ROWS, pa.list_(pa.int64())))
    packed = array.to_packed()
    assert set(packed) == {"values", "cu_seqlens", "position_ids", "max_seqlen"}
    values = np.from_dlpack(packed["values"])
    assert values.ctypes.data == np.from_dlpack(array.values).ctypes.data  # zero-copy
    cu = np.from_dlpack(packed["cu_seqlens"])
    assert cu.dtype == np.int32 and cu.tolist() == [0, 3, 3, 5, 6]
    positions = np.from_dlpack(packed["position_ids"])
    assert positions.dtype == np.int64
    assert positions.tolist() == [0, 1, 2, 0, 1, 0]
    assert packed["max_seqlen"] == 3


def test_torch_nested_from_jagged_views_the_rows():
    array = ad.array(pa.array(ROWS, pa.list_(pa.float32())))
    values, offsets = array.to_jagged()
    offsets_t = torch.from_dlpack(offsets)
    assert offsets_t.dtype == torch.int64
    nested = torch.nested.nested_tensor_from_jagged(torch.from_dlpack(values), offsets_t)
    assert [row.tolist() for row in nested.unbind()] == ROWS
    assert torch.from_dlpack(values).data_ptr() == np.from_dlpack(array.values).ctypes.data


def test_round_trips_through_pyarrow():
    for arrow_type in [pa.list_(pa.int32()), pa.large_list(pa.float64())]:
        column = pa.array(ROWS, arrow_type)
        back = pa.array(ad.array(column))
        assert back.type == arrow_type
        assert back.equals(column)
    assert pa.array(ad.array(pa.array(ROWS, pa.list_(pa.int8())).slice(1, 2))).to_pylist() == ROWS[1:3]


def test_from_offsets_shares_numpy_memory():
    values = np.arange(6, dtype=np.float32)
    offsets = np.array([0, 2, 2, 6], dtype=np.int32)
    array = ad.ListArray.from_offsets(values, offsets)
    assert array.type == "list<item: float>"
    column = pa.array(array)
    assert column.to_pylist() == [[0.0, 1.0], [], [2.0, 3.0, 4.0, 5.0]]
    assert buffer_address(column.values, 1) == values.ctypes.data
    large = ad.ListArray.from_offsets(np.arange(4).reshape(2, 2), np.array([0, 2], dtype=np.int64))
    # Inner dimensions are fixed-size lists whose items are not nullable (they hold no nulls).
    assert str(pa.array(large).type) == "large_list<item: fixed_size_list<item: int64 not null>[2]>"


@pytest.mark.parametrize(
    "offsets",
    [[1, 2], [0, 3, 2, 6], [0, 7], [0, 5], [-1, 6], []],
    ids=["not-from-zero", "decreasing", "past-the-end", "short", "negative", "empty"],
)
def test_from_offsets_refuses_malformed_offsets(offsets):
    with pytest.raises(ValueError, match="offsets"):
        ad.ListArray.from_offsets(np.arange(6), np.array(offsets, dtype=np.int32))


def test_from_offsets_refuses_other_offset_dtypes():
    with pytest.raises(ValueError, match="int32 or int64"):
        ad.ListArray.from_offsets(np.arange(2), np.array([0, 2], dtype=np.uint32))


@pytest.mark.parametrize("padding_side", ["left", "right"])
def test_from_padded_inverts_to_padded(padding_side):
    array = ad.array(pa.array(ROWS, pa.list_(pa.int16())))
    padded = array.to_padded(-1, padding_side=padding_side)
    back = ad.ListArray.from_padded(padded, array.lengths(), padding_side=padding_side)
    assert pa.array(back).to_pylist() == ROWS
    from_torch = ad.ListArray.from_padded(torch.from_dlpack(padded), torch.tensor([3, 0, 2, 1]), padding_side=padding_side)
    assert pa.array(from_torch).to_pylist() == ROWS
    with pytest.raises(ValueError, match="length"):
        ad.ListArray.from_padded(padded, np.array([4, 0, 0, 0]))


def test_from_tensors():
    rows = [np.ones((2, 3), np.float32), np.zeros((0, 3), np.float32), np.full((1, 3), 2, np.float32)]
    array = ad.ListArray.from_tensors(rows)
    assert np.from_dlpack(array.values).shape == (3, 3)
    assert np.from_dlpack(array.offsets).tolist() == [0, 2, 2, 3]
    with pytest.raises(ValueError, match="element shape"):
        ad.ListArray.from_tensors([np.ones((2, 3)), np.ones((2, 2))])
    with pytest.raises(ValueError, match="no rows"):
        ad.ListArray.from_tensors([])


def test_empty_columns():
    array = ad.array(pa.array([], pa.list_(pa.int32())))
    assert np.from_dlpack(array.values).shape == (0,)
    assert np.from_dlpack(array.offsets).tolist() == [0]
    assert np.from_dlpack(array.to_padded()).shape == (0, 0)
    assert ad.array(pa.chunked_array([], pa.list_(pa.int32()))).to_packed()["max_seqlen"] == 0


def test_other_element_types_raise_type_error():
    array = ad.array(pa.array([["a"], []], pa.list_(pa.string())))
    with pytest.raises(TypeError):
        array.values


@pytest.mark.parametrize(
    "buffers",
    [
        [None, ac.packed("i", [0, 3, 2])],  # decreasing
        [None, ac.packed("i", [0, 2, 9])],  # past the 3 child values
        [None, ac.packed("i", [-4, 2, 3])],  # negative
    ],
    ids=["decreasing", "past-the-end", "negative"],
)
def test_malformed_offsets_from_the_c_interface_are_refused(buffers):
    schema, array = list_pair(array=dict(buffers=buffers))
    producer = ac.ArrayProducer(schema, array)
    with pytest.raises(ValueError):
        imported = ad.array(producer)
        imported.to_padded()
    del producer
