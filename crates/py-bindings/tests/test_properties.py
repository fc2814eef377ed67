"""Property tests: random numpy views and random pyarrow slices, with numpy and pyarrow as oracles.

- Any numpy array or view (every numeric dtype and bool, 0-d, empty, sliced with positive and
  negative steps, transposed, broadcast) goes through ``ad.Tensor.from_dlpack`` and back through
  ``np.from_dlpack`` bit for bit, sharing memory.
- Any pyarrow slice exports through ``ad.array(...)`` exactly as the contract says: equal to
  ``to_numpy()`` and zero-copy without nulls, ``TypeError`` with nulls, as pyarrow itself does.
"""

import warnings

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import arrow_dlpack as ad

NUMERIC = [
    np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64,
]  # fmt: skip
# The tensor layer carries bool and complex as well (Arrow does not have complex).
TENSOR_DTYPES = NUMERIC + [np.bool_, np.complex64, np.complex128]

PROPERTY_SETTINGS = settings(
    max_examples=250,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def numpy_views(draw):
    """A random array and a random view of it: slices with steps (negative too), a transpose,
    or a broadcast (zero strides)."""
    dtype = draw(st.sampled_from(TENSOR_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    # Any values: NaNs, infinities, negative zeros and subnormals must survive bit for bit.
    base = draw(hnp.arrays(np.dtype(dtype), shape))
    view = base
    if view.ndim > 0 and draw(st.booleans()):
        index = []
        for extent in view.shape:
            start = draw(st.integers(-extent - 1, extent + 1)) if extent else None
            stop = draw(st.one_of(st.none(), st.integers(-extent - 1, extent + 1)))
            step = draw(st.sampled_from([1, 2, 3, -1, -2, -3]))
            index.append(slice(start, stop, step))
        view = view[tuple(index)]
    if view.ndim > 1 and draw(st.booleans()):
        view = view.transpose(draw(st.permutations(range(view.ndim))))
    if draw(st.integers(0, 5)) == 0:
        extra = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
        view = np.broadcast_to(view, extra + view.shape)
    return view


def assert_same_bits(result, expected):
    assert result.shape == expected.shape
    assert result.dtype == expected.dtype
    assert result.tobytes() == expected.tobytes()


@PROPERTY_SETTINGS
@given(view=numpy_views())
def test_numpy_views_round_trip_bit_for_bit_and_zero_copy(view):
    tensor = ad.Tensor.from_dlpack(view)
    assert tensor.shape == view.shape
    assert tensor.ndim == view.ndim
    assert tensor.size == view.size
    if view.size > 0:
        # Strides are reported in bytes, as numpy does; empty views may be normalised.
        assert tensor.strides == view.strides
    back = np.from_dlpack(tensor)
    assert_same_bits(back, view)
    if view.size > 0:
        assert back.ctypes.data == view.ctypes.data, "the round trip must not copy"


@PROPERTY_SETTINGS
@given(view=numpy_views(), versioned=st.booleans())
def test_capsules_of_both_abis_round_trip_between_tensors(view, versioned):
    tensor = ad.Tensor.from_dlpack(view)
    capsule = tensor.__dlpack__(max_version=(1, 3) if versioned else None)
    again = ad.Tensor.from_dlpack(capsule)
    assert again.shape == view.shape
    assert_same_bits(np.from_dlpack(again), view)
    if view.size > 0:
        assert np.from_dlpack(again).ctypes.data == view.ctypes.data


@PROPERTY_SETTINGS
@given(view=numpy_views())
def test_copy_true_gives_a_compact_copy(view):
    tensor = ad.Tensor.from_dlpack(view, copy=True)
    back = np.from_dlpack(tensor)
    assert_same_bits(back, view)
    if view.size > 0:
        assert back.ctypes.data != view.ctypes.data
        # docs/contract.md: copy=True copies exactly the logical elements, compacted: the copy spans
        # size * itemsize bytes, with no gap and no repeated element.
        span = sum((n - 1) * abs(s) for n, s in zip(tensor.shape, tensor.strides))
        assert span + view.itemsize == view.size * view.itemsize
        for extent, stride in zip(tensor.shape, tensor.strides):
            assert stride != 0 or extent == 1


@pytest.mark.parametrize(
    "view",
    [
        np.arange(6, dtype=np.int8).reshape(2, 3).T,
        np.asfortranarray(np.arange(24.0).reshape(2, 3, 4)),
        np.arange(12, dtype=np.int32).reshape(3, 4)[::-1, ::2],
    ],
    ids=["transposed", "fortran", "reversed_gapped"],
)
def test_copy_true_of_a_non_row_major_view_is_row_major(view):
    # The stub of Tensor.from_dlpack: "copy=True gives a row-major copy that no one else
    # references", whoever did the copy (numpy copies itself when asked for copy=True).
    tensor = ad.Tensor.from_dlpack(view, copy=True)
    assert tensor.is_row_major, (tensor.shape, tensor.strides)
    assert_same_bits(np.from_dlpack(tensor), view)


@st.composite
def pyarrow_slices(draw):
    """A random primitive or boolean pyarrow array with random nulls, and a random slice."""
    dtype = draw(st.sampled_from(NUMERIC + [np.bool_]))
    length = draw(st.integers(0, 40))
    values = draw(hnp.arrays(np.dtype(dtype), length))
    null_kind = draw(st.sampled_from(["none", "some", "all"]))
    if null_kind == "none":
        mask = None
    elif null_kind == "all":
        mask = np.ones(length, dtype=bool)
    else:
        mask = draw(hnp.arrays(np.bool_, length))
    array = pa.array(values, mask=mask, type=pa.from_numpy_dtype(np.dtype(dtype)))
    offset = draw(st.integers(0, length))
    size = draw(st.integers(0, length - offset))
    return array.slice(offset, size)


@settings(max_examples=300, deadline=None, database=None)
@given(source=pyarrow_slices())
def test_pyarrow_slices_export_or_refuse_as_the_contract_says(source):
    array = ad.array(source)
    assert len(array) == len(source)
    assert array.null_count == source.null_count
    is_bool = pa.types.is_boolean(source.type)
    if source.null_count:
        with pytest.raises(TypeError, match=r"null") as raised:
            np.from_dlpack(array)
        assert isinstance(raised.value, ad.ArrowDLPackTypeError)
        with pytest.raises(ValueError, match=r"allow_nulls"):
            array.to_tensor()
        # pyarrow, the reference, refuses the same slice with a TypeError too (numpy retries it
        # without keywords, which pyarrow answers with a deprecation warning).
        with warnings.catch_warnings(), pytest.raises(TypeError, match=r"no nulls"):
            warnings.simplefilter("ignore", DeprecationWarning)
            np.from_dlpack(source)
        # With allow_nulls=True the valid slots hold their values.
        tensor = np.from_dlpack(array.to_tensor(allow_nulls=True))
        valid = ~np.asarray(source.is_null())
        expected = source.to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(tensor[valid], expected[valid])
        return
    result = np.from_dlpack(array)
    expected = source.to_numpy(zero_copy_only=False)
    assert_same_bits(result, expected)
    if is_bool:
        # Bits are unpacked: a copy that copy=None allows and copy=False refuses.
        with pytest.raises(BufferError, match=r"copy"):
            array.__dlpack__(copy=False)
        return
    # pyarrow's own export agrees bit for bit.
    assert_same_bits(np.from_dlpack(source), expected)
    if len(source) > 0:
        width = source.type.bit_width // 8
        assert result.ctypes.data == source.buffers()[1].address + source.offset * width
    # Memory outlives the pyarrow array and the arrow_dlpack wrapper.
    del source, array
    np.testing.assert_array_equal(result, expected)
