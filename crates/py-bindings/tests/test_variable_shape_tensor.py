"""``ad.VariableShapeTensorArray``: the ``arrow.variable_shape_tensor`` extension type. PyArrow 26
reads the type (its C++ class) but has no Python class or constructor for it, so the columns here
are built from their storage and a field that carries the extension metadata; numpy is the
oracle for the values, PyArrow for the type and its metadata."""

import json

import nanoarrow as na
import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

NAME = "arrow.variable_shape_tensor"


class _Column:
    """An Arrow C producer of `storage` under a field that says `arrow.variable_shape_tensor`
    with `metadata` (a dict, or a raw string for hostile JSON)."""

    def __init__(self, storage, metadata):
        raw = metadata if isinstance(metadata, str) else json.dumps(metadata)
        self.field = pa.field(
            "x",
            storage.type,
            metadata={"ARROW:extension:name": NAME, "ARROW:extension:metadata": raw},
        )
        self.storage = storage

    def __arrow_c_array__(self, requested_schema=None):
        return self.field.__arrow_c_schema__(), self.storage.__arrow_c_array__()[1]


def storage_of(arrays, dtype=None, ndim=None, mask=None):
    """The spec's storage of `arrays` (None for a null row): data lists of the raveled elements
    in row-major order, int32 shapes."""
    sample = next(a for a in arrays if a is not None)
    dtype = np.dtype(dtype or sample.dtype)
    ndim = sample.ndim if ndim is None else ndim
    value_type = pa.from_numpy_dtype(dtype)
    data = pa.array(
        [None if a is None else np.ascontiguousarray(a).ravel() for a in arrays],
        pa.list_(value_type),
    )
    shape = pa.array(
        [None if a is None else list(a.shape) for a in arrays], pa.list_(pa.int32(), ndim)
    )
    if mask is None:
        mask = [a is None for a in arrays]
    return pa.StructArray.from_arrays([data, shape], names=["data", "shape"], mask=pa.array(mask))


def pyarrow_column(arrays, metadata=None, **kwargs):
    """A pyarrow `arrow.variable_shape_tensor` array (its C++ extension type) of `arrays`."""
    column = pa.array(_Column(storage_of(arrays, **kwargs), metadata or {}))
    assert str(column.type).startswith(f"extension<{NAME}")
    return column


def extension_metadata(obj) -> dict:
    """The raw `ARROW:extension:metadata` JSON that `obj`'s schema carries."""
    metadata = dict(na.c_schema(obj).metadata)
    assert metadata[b"ARROW:extension:name"] == NAME.encode()
    return json.loads(metadata[b"ARROW:extension:metadata"])


def images(seed=0):
    """Colour images of mixed sizes (H, W, 3), uint8."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for h, w in [(4, 5), (2, 7), (6, 1)]]


# Reading PyArrow's columns.


def test_images_of_mixed_sizes_are_zero_copy_rows():
    originals = images()
    column = pyarrow_column(originals, {"dim_names": ["H", "W", "C"], "uniform_shape": [None, None, 3]})
    array = ad.array(column)
    assert isinstance(array, ad.VariableShapeTensorArray)
    assert isinstance(array, ad.Array)
    assert len(array) == 3
    assert array.ndim == 3
    assert array.value_type == "uint8"
    assert array.dim_names == ["H", "W", "C"]
    assert array.uniform_shape == [None, None, 3]
    assert array.permutation is None
    assert array.type == str(column.type)
    assert array.shapes == [[4, 5, 3], [2, 7, 3], [6, 1, 3]]
    values = column.storage.field("data").values
    base = values.buffers()[1].address
    offsets = column.storage.field("data").offsets.to_numpy()
    for i, original in enumerate(originals):
        row = array[i]
        assert isinstance(row, ad.Tensor)
        assert row.shape == original.shape
        assert row.dim_names == ["H", "W", "C"]
        assert not row.is_mutable
        view = np.from_dlpack(row)
        np.testing.assert_array_equal(view, original)
        # A view of PyArrow's data buffer at the row's offset: zero-copy.
        assert view.ctypes.data == base + int(offsets[i])
        assert not view.flags.writeable


def test_negative_indexes_slices_and_index_errors():
    originals = [np.arange(n, dtype=np.int64) for n in (3, 0, 5, 2)]
    array = ad.array(pyarrow_column(originals))
    np.testing.assert_array_equal(np.from_dlpack(array[-1]), originals[-1])
    np.testing.assert_array_equal(np.from_dlpack(array[-4]), originals[0])
    assert array[1].shape == (0,)
    # An integer beyond any array's length is out of bounds, as for a Python list (not OverflowError).
    for bad in (4, -5, 100, 2**70, -(2**70)):
        with pytest.raises(IndexError, match="out of bounds"):
            array[bad]
    for bad in ("0", 1.0):
        with pytest.raises(TypeError):
            array[bad]
    middle = array[1:3]
    assert isinstance(middle, ad.VariableShapeTensorArray)
    assert middle.shapes == [[0], [5]]
    stepped = array[::2]
    assert isinstance(stepped, ad.VariableShapeTensorArray)
    np.testing.assert_array_equal(np.from_dlpack(stepped[1]), originals[2])


def test_one_and_three_dimensional_round_trips_through_numpy():
    for arrays in (
        [np.arange(n, dtype=np.float32) for n in (1, 4, 0, 2)],
        [np.arange(np.prod(s), dtype=np.int16).reshape(s) for s in [(2, 3, 4), (1, 1, 1), (0, 2, 5)]],
    ):
        array = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays)
        back = array.to_numpy_ndarray()
        assert len(back) == len(arrays)
        for got, want in zip(back, arrays):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            assert not got.flags.writeable
        # Every row views the one data buffer that from_numpy_ndarray filled.
        assert all(isinstance(array[i], ad.Tensor) for i in range(len(arrays)))


def test_strided_inputs_are_copied_in_their_logical_order():
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    arrays = [base[:, ::3], base.T, base[::-2, 1:4]]
    array = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays)
    for got, want in zip(array.to_numpy_ndarray(), arrays):
        np.testing.assert_array_equal(got, want)


# Permutations and metadata, against PyArrow.


def test_permutation_gives_logical_rows_and_pyarrow_keeps_it():
    # Logical (H, W) images stored transposed, (W, H).
    arrays = [np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(20, dtype=np.int32).reshape(4, 5)]
    array = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, permutation=[1, 0], dim_names=["W", "H"])
    assert array.permutation == [1, 0]
    assert array.shapes == [[2, 3], [4, 5]]
    for i, want in enumerate(arrays):
        row = array[i]
        assert row.shape == want.shape
        assert row.dim_names == ["H", "W"]
        np.testing.assert_array_equal(np.from_dlpack(row), want)
    assert extension_metadata(array) == {"dim_names": ["W", "H"], "permutation": [1, 0]}
    # PyArrow reads the permutation: we wrote the spec's key.
    theirs = pa.array(array)
    assert str(theirs.type) == (
        f"extension<{NAME}[value_type=int32, ndim=2, permutation=[1,0], dim_names=[W,H]]>"
    )
    assert array.type == str(theirs.type)
    # The storage holds the physical (transposed) layout.
    data = theirs.storage.field("data")
    np.testing.assert_array_equal(data[0].values.to_numpy(), arrays[0].T.ravel())
    assert theirs.storage.field("shape").to_pylist() == [[3, 2], [5, 4]]


@pytest.mark.parametrize("permutation", [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]])
def test_pyarrow_columns_follow_the_spec_permutation(permutation):
    # Logical dimension i is physical dimension permutation[i]: numpy's transpose(permutation).
    physical = [np.arange(24, dtype=np.int64).reshape(2, 3, 4), np.arange(10, dtype=np.int64).reshape(5, 1, 2)]
    array = ad.array(pyarrow_column(physical, {"permutation": permutation, "dim_names": ["a", "b", "c"]}))
    for i, stored in enumerate(physical):
        want = stored.transpose(permutation)
        row = array[i]
        assert row.shape == want.shape
        assert row.dim_names == [["a", "b", "c"][p] for p in permutation]
        np.testing.assert_array_equal(np.from_dlpack(row), want)
        assert array.shapes[i] == list(want.shape)


def test_reads_arrow_rs_misspelled_key_and_hands_pyarrow_the_spec_key():
    physical = [np.arange(6, dtype=np.float32).reshape(2, 3)]
    arrow_rs = {"dim_names": None, "permutations": [1, 0], "uniform_shape": None}
    # PyArrow refuses arrow-rs's explicit nulls, and ignores the misspelled key: the permutation
    # is lost there.
    with pytest.raises(pa.ArrowInvalid):
        pyarrow_column(physical, arrow_rs)
    assert "permutation" not in str(pyarrow_column(physical, {"permutations": [1, 0]}).type)
    array = ad.array(_Column(storage_of(physical), arrow_rs))
    assert array.permutation == [1, 0]
    np.testing.assert_array_equal(np.from_dlpack(array[0]), physical[0].T)
    # Our export carries the spec's key, which PyArrow reads.
    assert extension_metadata(array) == {"permutation": [1, 0]}
    assert "permutation=[1,0]" in str(pa.array(array).type)


def test_uniform_shape_is_checked_against_every_row():
    arrays = [np.zeros((2, 3)), np.zeros((5, 3))]
    array = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, uniform_shape=[None, 3])
    assert array.uniform_shape == [None, 3]
    assert extension_metadata(array) == {"uniform_shape": [None, 3]}
    assert "uniform_shape=[null,3]" in str(pa.array(array).type)
    with pytest.raises(ValueError, match="uniform_shape"):
        ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, uniform_shape=[2, None])
    # PyArrow accepts a column that breaks its uniform shape; we refuse it.
    liar = pyarrow_column(arrays, {"uniform_shape": [2, None]})
    with pytest.raises(ad.ArrowDLPackValueError, match="row 1 has shape \\[5, 3\\]"):
        ad.array(liar)


def test_from_numpy_ndarray_refuses_what_cannot_form_a_column():
    cases = [
        ([], {}),
        ([np.zeros(2, np.int32), np.zeros(2, np.int64)], {}),
        ([np.zeros(2), np.zeros((2, 2))], {}),
        ([np.zeros((2, 2))], {"permutation": [0, 0]}),
        ([np.zeros((2, 2))], {"dim_names": ["x"]}),
        ([np.zeros((2, 2))], {"uniform_shape": [2]}),
        ([np.zeros((2, 2))], {"uniform_shape": [-2, None]}),
        ([np.zeros(2, np.complex64)], {}),
    ]
    for arrays, kwargs in cases:
        with pytest.raises(ValueError):
            ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, **kwargs)
    with pytest.raises(TypeError):
        ad.VariableShapeTensorArray.from_numpy_ndarray(42)
    with pytest.raises(TypeError):
        ad.VariableShapeTensorArray.from_numpy_ndarray([object()])


# Nulls and empty columns.


def test_null_rows_are_none_and_pad_only_when_allowed():
    arrays = [np.array([[1, 2]], np.int64), None, np.array([[3], [4]], np.int64)]
    for array in (
        ad.array(pyarrow_column(arrays)),
        ad.VariableShapeTensorArray.from_numpy_ndarray(arrays),
    ):
        assert array.null_count == 1
        assert array[1] is None
        assert array.shapes == [[1, 2], None, [2, 1]]
        got = array.to_numpy_ndarray()
        assert got[1] is None
        np.testing.assert_array_equal(got[2], arrays[2])
        with pytest.raises(ValueError, match="allow_nulls"):
            array.to_padded()
        padded, shapes = array.to_padded(-1, allow_nulls=True)
        np.testing.assert_array_equal(
            np.from_dlpack(padded),
            [[[1, 2], [-1, -1]], [[-1, -1], [-1, -1]], [[3, -1], [4, -1]]],
        )
        np.testing.assert_array_equal(np.from_dlpack(shapes), [[1, 2], [0, 0], [2, 1]])
    # PyArrow reads our nulls back as nulls.
    assert pa.array(ad.VariableShapeTensorArray.from_numpy_ndarray(arrays)).is_null().to_pylist() == [
        False,
        True,
        False,
    ]


def test_nulls_inside_a_row_are_refused():
    data = pa.array([[1.0, None], [3.0]], pa.list_(pa.float64()))
    shape = pa.array([[2], [1]], pa.list_(pa.int32(), 1))
    storage = pa.StructArray.from_arrays([data, shape], names=["data", "shape"])
    array = ad.array(_Column(storage, {}))
    np.testing.assert_array_equal(np.from_dlpack(array[1]), [3.0])
    with pytest.raises(ValueError, match="null"):
        array[0]
    with pytest.raises(ValueError, match="null"):
        array.to_padded()
    padded, _ = array.to_padded(allow_nulls=True)
    assert padded.shape == (2, 2)


def test_empty_columns():
    empty = storage_of([np.zeros((1, 1), np.float32)]).slice(0, 0)
    array = ad.array(_Column(empty, {}))
    assert isinstance(array, ad.VariableShapeTensorArray)
    assert len(array) == 0
    assert array.shapes == []
    assert array.to_numpy_ndarray() == []
    padded, shapes = array.to_padded()
    assert padded.shape == (0, 0, 0)
    assert shapes.shape == (0, 2)
    with pytest.raises(IndexError):
        array[0]


# Hostile metadata and storage: errors, never a panic.


@pytest.mark.parametrize(
    "metadata",
    [
        "not json",
        "[1, 2]",
        '{"permutation": [0, 0]}',
        '{"permutation": [0, 1, 2]}',
        '{"permutation": [-1, 0]}',
        '{"dim_names": ["only one"]}',
        '{"dim_names": "HW"}',
        '{"uniform_shape": [1]}',
        '{"uniform_shape": [-3, null]}',
        '{"uniform_shape": [1e99, null]}',
        '{"permutation": [0, 1], "permutations": [1, 0]}',
    ],
)
def test_hostile_metadata_is_a_value_error(metadata):
    storage = storage_of([np.zeros((1, 1), np.float32)])
    with pytest.raises(ad.ArrowDLPackValueError, match="arrow.variable_shape_tensor"):
        ad.array(_Column(storage, metadata))


def test_hostile_storage_is_a_value_error():
    def column(data, shapes, ndim=2):
        storage = pa.StructArray.from_arrays(
            [pa.array(data, pa.list_(pa.int64())), pa.array(shapes, pa.list_(pa.int32(), ndim))],
            names=["data", "shape"],
        )
        return _Column(storage, {})

    cases = {
        "but 3 elements": column([[1, 2, 3]], [[2, 2]]),
        "expected extents >= 0": column([[1]], [[-1, -1]]),
        "but 0 elements": column([[]], [[2**31 - 1, 2**31 - 1]]),
        "null in its shape": column([[1]], [[1, None]]),
        "shape is null": column([[1]], [None]),
        "data is null": column([None], [[1, 1]]),
    }
    for message, hostile in cases.items():
        with pytest.raises(ad.ArrowDLPackValueError, match=message):
            ad.array(hostile)
    # Wrong storage shapes: a struct without `shape`, a shape of int64.
    for storage in (
        pa.StructArray.from_arrays([pa.array([[1]], pa.list_(pa.int64()))], names=["data"]),
        pa.StructArray.from_arrays(
            [pa.array([[1]], pa.list_(pa.int64())), pa.array([[1]], pa.list_(pa.int64(), 1))],
            names=["data", "shape"],
        ),
    ):
        with pytest.raises(ad.ArrowDLPackValueError, match="storage type"):
            ad.array(_Column(storage, {}))


def test_non_numeric_values_read_but_do_not_export():
    data = pa.array([["a", "b"]], pa.list_(pa.string()))
    shape = pa.array([[2]], pa.list_(pa.int32(), 1))
    storage = pa.StructArray.from_arrays([data, shape], names=["data", "shape"])
    array = ad.array(_Column(storage, {}))
    assert array.value_type == "string"
    assert array.shapes == [[2]]
    with pytest.raises(TypeError, match="string|Utf8"):
        array[0]


# PyArrow round trips, IPC files and chunks.


def test_round_trips_through_pyarrow_zero_copy():
    arrays = images(1)
    ours = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, dim_names=["H", "W", "C"])
    theirs = pa.array(ours)
    assert type(theirs.type).__name__ == "BaseExtensionType"
    assert theirs.type.extension_name == NAME
    assert theirs.storage.field("shape").to_pylist() == [list(a.shape) for a in arrays]
    again = ad.array(theirs)
    assert isinstance(again, ad.VariableShapeTensorArray)
    assert again.dim_names == ["H", "W", "C"]
    for i, want in enumerate(arrays):
        np.testing.assert_array_equal(np.from_dlpack(again[i]), want)
    # The same memory all the way: our buffer, PyArrow's view of it, our view of that.
    assert np.from_dlpack(again[0]).ctypes.data == np.from_dlpack(ours[0]).ctypes.data


def test_ipc_files_both_ways(tmp_path):
    arrays = [np.arange(n * 2, dtype=np.float32).reshape(n, 2) for n in (1, 3, 2)]
    # Written by PyArrow from its own column, read by us.
    path = tmp_path / "theirs.arrow"
    table = pa.table({"x": pyarrow_column(arrays, {"permutation": [1, 0]})})
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
    column = pa.ipc.open_file(path).read_all().column("x")
    assert str(column.type).startswith(f"extension<{NAME}[value_type=float, ndim=2, permutation=[1,0]")
    array = ad.array(column)
    for i, stored in enumerate(arrays):
        np.testing.assert_array_equal(np.from_dlpack(array[i]), stored.T)
    # Written by PyArrow from our column, read by PyArrow and by us.
    # uniform_shape describes the stored (physical) dimensions: (2, n) here.
    ours = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, permutation=[1, 0], uniform_shape=[2, None])
    path = tmp_path / "ours.arrow"
    table = pa.table({"x": pa.array(ours)})
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
    back = pa.ipc.open_file(path).read_all().column("x")
    assert str(back.type) == ours.type
    again = ad.array(back)
    assert again.permutation == [1, 0]
    assert again.uniform_shape == [2, None]
    for i, want in enumerate(arrays):
        np.testing.assert_array_equal(np.from_dlpack(again[i]), want)


def test_chunked_columns_index_across_chunks_and_pad_as_one():
    first = [np.arange(3, dtype=np.int32), np.arange(1, dtype=np.int32)]
    second = [np.arange(4, dtype=np.int32) + 10]
    chunked = pa.chunked_array([pyarrow_column(first), pyarrow_column(second)])
    array = ad.array(chunked)
    assert isinstance(array, ad.VariableShapeTensorArray)
    assert array.num_chunks == 2
    assert len(array) == 3
    np.testing.assert_array_equal(np.from_dlpack(array[2]), second[0])
    np.testing.assert_array_equal(np.from_dlpack(array[-2]), first[1])
    assert array.shapes == [[3], [1], [4]]
    padded, shapes = array.to_padded(pad_value=-7)
    np.testing.assert_array_equal(
        np.from_dlpack(padded), [[0, 1, 2, -7], [0, -7, -7, -7], [10, 11, 12, 13]]
    )
    np.testing.assert_array_equal(np.from_dlpack(shapes), [[3], [1], [4]])
    assert all(isinstance(chunk, ad.VariableShapeTensorArray) for chunk in array.chunks)


# Padding, against numpy.


def test_to_padded_matches_numpy():
    arrays = images(2)
    # Logical (H, W, C) stored as (C, H, W): logical H is physical 1, W 2, C 0.
    array = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, permutation=[1, 2, 0], dim_names=["C", "H", "W"])
    padded, shapes = array.to_padded(pad_value=255)
    assert padded.dim_names == ["", "H", "W", "C"]
    assert padded.is_mutable and shapes.is_mutable
    want = np.full((3, 6, 7, 3), 255, np.uint8)
    for i, a in enumerate(arrays):
        want[i, : a.shape[0], : a.shape[1], :] = a
    np.testing.assert_array_equal(np.from_dlpack(padded), want)
    np.testing.assert_array_equal(np.from_dlpack(shapes), [a.shape for a in arrays])
    assert np.from_dlpack(shapes).dtype == np.int32
    for bad in (0.5, 256, -1):
        with pytest.raises(ValueError, match="pad value"):
            array.to_padded(pad_value=bad)
    floats = ad.VariableShapeTensorArray.from_numpy_ndarray([np.ones(2, np.float16), np.ones(1, np.float16)])
    padded, _ = floats.to_padded(float("nan"))
    got = np.from_dlpack(padded)
    assert got.dtype == np.float16 and np.isnan(got[1, 1]) and got[1, 0] == 1


# Consumers of the rows.


def test_torch_and_numpy_consume_rows():
    arrays = [np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(2, dtype=np.float32).reshape(2, 1)]
    array = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, permutation=[1, 0])
    for i, want in enumerate(arrays):
        t = torch.from_dlpack(array[i])
        assert tuple(t.shape) == want.shape
        torch.testing.assert_close(t, torch.from_numpy(want))
        np.testing.assert_array_equal(np.from_dlpack(array[i]), want)
    # A row outlives its array.
    row = array[0]
    del array
    np.testing.assert_array_equal(np.from_dlpack(row), arrays[0])


def test_the_whole_array_does_not_export_through_dlpack():
    array = ad.VariableShapeTensorArray.from_numpy_ndarray([np.zeros(2), np.zeros(3)])
    with pytest.raises(TypeError):
        np.from_dlpack(array)


# Ragged views.


def test_to_ragged_views_rows_that_differ_only_in_their_first_dimension():
    arrays = [np.arange(n * 3, dtype=np.float32).reshape(n, 3) for n in (2, 0, 4)]
    array = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays)
    values, offsets = array.to_ragged()
    assert values.shape == (6, 3)
    np.testing.assert_array_equal(np.from_dlpack(values), np.concatenate(arrays))
    np.testing.assert_array_equal(np.from_dlpack(offsets), [0, 2, 2, 6])
    assert np.from_dlpack(values).ctypes.data == np.from_dlpack(array[0]).ctypes.data
    nested = torch.nested.nested_tensor_from_jagged(
        torch.from_dlpack(values), torch.from_dlpack(offsets).to(torch.int64)
    )
    for got, want in zip(nested.unbind(), arrays):
        torch.testing.assert_close(got, torch.from_numpy(want))
    with pytest.raises(ValueError):
        ad.VariableShapeTensorArray.from_numpy_ndarray([np.zeros((1, 2)), np.zeros((1, 3))]).to_ragged()
    permuted = ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, permutation=[1, 0])
    with pytest.raises(BufferError):
        permuted.to_ragged(copy=False)
    values, _ = permuted.to_ragged()
    np.testing.assert_array_equal(np.from_dlpack(values), np.concatenate(arrays))


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"permutation": [2, 0, 1]},
        {"dim_names": ["x", "y", "z"], "uniform_shape": [None, 1, None]},
        {"permutation": [1, 0, 2], "dim_names": ["x", "y", "z"], "uniform_shape": [2, None, None]},
    ],
)
def test_type_names_match_pyarrow(metadata):
    column = pyarrow_column([np.zeros((2, 1, 3), np.float64)], metadata)
    assert ad.array(column).type == str(column.type)


def test_padding_rows_of_huge_extents_and_no_elements_ends():
    # Extents of 2^31 - 1 whose product is 0: the padded tensor is empty, made without walking
    # the 2^62 empty rows of the extents one by one.
    storage = pa.StructArray.from_arrays(
        [pa.array([[]], pa.list_(pa.int64())), pa.array([[2**31 - 1, 2**31 - 1, 0]], pa.list_(pa.int32(), 3))],
        names=["data", "shape"],
    )
    padded, shapes = ad.array(_Column(storage, {})).to_padded()
    assert tuple(padded.shape) == (1, 2**31 - 1, 2**31 - 1, 0)
    assert np.from_dlpack(shapes).tolist() == [[2**31 - 1, 2**31 - 1, 0]]


def test_numpy_scalars_pad_like_python_numbers():
    array = ad.VariableShapeTensorArray.from_numpy_ndarray([np.ones(2, np.int16), np.ones(1, np.int16)])
    for pad in (np.int32(-3), np.uint8(253), np.float32(4.0), np.bool_(True)):
        padded, _ = array.to_padded(pad)
        assert np.from_dlpack(padded).tolist() == [[1, 1], [1, int(pad)]]
    with pytest.raises(ValueError, match="pad value"):
        array.to_padded(np.float32(0.5))
    with pytest.raises(TypeError):
        array.to_padded("x")


def test_negative_or_huge_metadata_arguments_are_value_errors():
    arrays = [np.zeros((2, 1), np.float32)]
    for kwargs in ({"permutation": [-1, 0]}, {"uniform_shape": [2**40, None]}, {"uniform_shape": [-1, None]}):
        with pytest.raises(ValueError):
            ad.VariableShapeTensorArray.from_numpy_ndarray(arrays, **kwargs)


def test_repr_shows_the_type_and_each_rows_shape():
    rows = [np.zeros((2, 2), np.float32), None, np.ones((1, 3), np.float32)]
    array = ad.VariableShapeTensorArray.from_numpy_ndarray(rows)
    lines = repr(array).splitlines()
    assert lines[0].startswith("<arrow_dlpack.VariableShapeTensorArray object at 0x")
    assert lines[1:] == [
        "type: extension<arrow.variable_shape_tensor[value_type=float, ndim=2]>",
        "[",
        "  tensor of shape (2, 2),",
        "  null,",
        "  tensor of shape (1, 3)",
        "]",
    ]
    # Long arrays are elided as PyArrow elides arrays of lists: two rows at each end.
    long = repr(ad.VariableShapeTensorArray.from_numpy_ndarray([np.zeros(n, np.int8) for n in range(9)]))
    assert long.splitlines()[2:] == [
        "[",
        "  tensor of shape (0,),",
        "  tensor of shape (1,),",
        "  ...",
        "  tensor of shape (7,),",
        "  tensor of shape (8,)",
        "]",
    ]
