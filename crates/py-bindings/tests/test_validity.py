"""Validity masks: ``Array.validity()`` is PyArrow's ``is_valid()`` as a writable 1-D ``bool``
tensor, one for several chunks, which masks the values of ``to_tensor(allow_nulls=True)``.
"""

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad


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
