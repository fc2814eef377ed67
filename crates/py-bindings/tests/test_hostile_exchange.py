"""The exchange objects under random input (hypothesis): pickles of any view (negative, zero and
gapped strides, every dtype numpy has), `np.asarray` of any pyarrow column beside PyArrow's own,
the cells of fixed-shape tensor columns of any permutation, and variable-shape tensor columns
built from any views. Each case is exact against numpy or PyArrow, or raises one of the
contract's exceptions; never a panic or another exception."""

import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import arrow_dlpack as ad

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DTYPES = [
    np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128, np.bool_,
]  # fmt: skip


@st.composite
def views(draw):
    """A numpy view of any dtype, up to 4 dimensions of up to 5 elements, sliced with steps of
    either sign, transposed or broadcast."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    base = draw(hnp.arrays(dtype, shape, elements=hnp.from_dtype(np.dtype(dtype), allow_nan=True)))
    view = base
    if view.ndim:
        steps = draw(st.lists(st.sampled_from([1, 2, -1, -2]), min_size=view.ndim, max_size=view.ndim))
        view = view[tuple(slice(None, None, step) for step in steps)]
        if draw(st.booleans()):
            view = view.transpose(draw(st.permutations(range(view.ndim))))
    if draw(st.booleans()) and view.size:
        view = np.broadcast_to(view, (draw(st.integers(0, 3)), *view.shape))
    return view


@SETTINGS
@given(view=views(), protocol=st.sampled_from([2, 4, 5]), out_of_band=st.booleans())
def test_pickles_of_any_view_are_bit_exact(view, protocol, out_of_band):
    tensor = ad.Tensor.from_dlpack(view)
    buffers = []
    callback = buffers.append if protocol == 5 and out_of_band else None
    data = pickle.dumps(tensor, protocol=protocol, buffer_callback=callback)
    restored = pickle.loads(data, buffers=buffers)
    assert restored.shape == view.shape and restored.type == tensor.type
    assert restored.is_row_major and restored.is_mutable
    result = np.from_dlpack(restored)
    assert result.tobytes() == np.ascontiguousarray(view).tobytes()


ARROW_TYPES = [pa.int8(), pa.uint32(), pa.int64(), pa.float16(), pa.float32(), pa.float64(), pa.bool_()]


@st.composite
def pyarrow_columns(draw):
    """A pyarrow array or chunked array of a numeric, boolean, string or list type, with or
    without nulls, sliced."""
    kind = draw(st.sampled_from(["numeric", "string", "list", "fixed_size_list"]))
    length = draw(st.integers(0, 12))
    valid = draw(st.lists(st.booleans(), min_size=length, max_size=length))
    nulls = draw(st.booleans())
    values = [i if (v or not nulls) else None for i, v in enumerate(valid)]
    if kind == "numeric":
        arrow_type = draw(st.sampled_from(ARROW_TYPES))
        if arrow_type == pa.bool_():
            values = [None if v is None else v % 2 == 0 for v in values]
        array = pa.array(values, arrow_type)
    elif kind == "string":
        array = pa.array([None if v is None else str(v) for v in values])
    elif kind == "list":
        array = pa.array([None if v is None else list(range(v % 4)) for v in values], pa.list_(pa.int16()))
    else:
        array = pa.array([None if v is None else [v, -v] for v in values], pa.list_(pa.float32(), 2))
    offset = draw(st.integers(0, length))
    array = array.slice(offset, draw(st.integers(0, length - offset)))
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(array)))
        return pa.chunked_array([array.slice(0, cut), array.slice(cut)], array.type)
    return array


def same(ours, theirs):
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    for left, right in zip(ours.tolist(), theirs.tolist()):
        if isinstance(right, np.ndarray) or isinstance(left, np.ndarray):
            np.testing.assert_array_equal(left, right)
        else:
            assert left == right or (left != left and right != right)


@SETTINGS
@given(column=pyarrow_columns(), copy=st.sampled_from([None, True, False]))
def test_asarray_of_any_column_is_pyarrows(column, copy):
    ours = ad.array(column)
    # PyArrow refuses copy=False for any ChunkedArray; we share one non-empty chunk as it is
    # (as `to_numpy()` does), so a chunked column is judged by its chunks joined, and refused
    # only when several chunks hold elements.
    chunked = isinstance(column, pa.ChunkedArray)
    several = chunked and sum(len(chunk) > 0 for chunk in column.chunks) > 1
    theirs = column.combine_chunks() if chunked else column
    try:
        expected = np.array(theirs, copy=copy)
    except ValueError:
        with pytest.raises(ValueError):
            np.array(ours, copy=copy)
        return
    if several and copy is False:
        with pytest.raises(ValueError, match="several chunks"):
            np.array(ours, copy=copy)
        return
    same(np.array(ours, copy=copy), expected)


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    data=st.data(),
    length=st.integers(0, 3),
)
def test_cells_of_any_permutation_are_rows_of_the_tensor(shape, data, length):
    permutation = data.draw(st.permutations(range(len(shape))))
    size = int(np.prod(shape))
    extension = pa.fixed_shape_tensor(pa.int32(), shape, permutation=permutation)
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(length * size, dtype=np.int32)), size)
    column = ad.array(pa.ExtensionArray.from_storage(extension, storage))
    whole = np.from_dlpack(column.to_tensor())
    for index in range(-length, length):
        cell = column[index]
        assert not cell.is_mutable
        np.testing.assert_array_equal(np.from_dlpack(cell), whole[index])
    np.testing.assert_array_equal(np.asarray(column), whole)


@SETTINGS
@given(rows=st.lists(views(), min_size=1, max_size=4))
def test_variable_shape_columns_of_any_views_keep_every_row_or_refuse(rows):
    try:
        column = ad.VariableShapeTensorArray.from_numpy_ndarray(rows)
    except (ValueError, TypeError) as error:
        assert isinstance(error, ad.ArrowDLPackError)
        # Refused only for what the type cannot hold: mixed dtypes or ranks, 0-d rows, or
        # element types Arrow lacks.
        kinds = {(row.dtype, row.ndim) for row in rows}
        assert len(kinds) > 1 or rows[0].ndim == 0 or rows[0].dtype.kind in "cb"
        return
    for index, row in enumerate(rows):
        np.testing.assert_array_equal(np.from_dlpack(column[index]), row)
    assert [r.shape for r in np.asarray(column)] == [row.shape for row in rows]
    restored = pickle.loads(pickle.dumps(column))
    assert restored == column


def test_the_truth_and_the_numpy_values_of_a_tensor_are_numpys_or_refused_in_our_words():
    import torch

    # bool() is the value of one element (it was the length), ambiguous for several, as numpy's.
    assert bool(ad.Tensor.from_dlpack(np.array([0.0]))) is False
    assert bool(ad.Tensor.from_dlpack(np.array(3))) is True
    with pytest.raises(ValueError, match="ambiguous"):
        bool(ad.Tensor.from_dlpack(np.array([1, 2])))
    # numpy has no bfloat16 or float8: refused as our TypeError, not numpy's bare RuntimeError.
    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        tensor = ad.Tensor.from_dlpack(torch.ones(2).to(dtype))
        for convert in (lambda t: t.tolist(), lambda t: t.to_numpy(), np.asarray):
            with pytest.raises(ad.ArrowDLPackTypeError, match="numpy has no"):
                convert(tensor)
