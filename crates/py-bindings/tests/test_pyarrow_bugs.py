"""The six PyArrow 26 bugs listed in docs/compatibility.md, each as a case that arrow_dlpack gets
right.

PyArrow serves as an oracle only where it is right: its readers of data we export are used for
identity and 2-cycle permutations, never for 3-cycles, which it reads with the inverse
permutation.
"""

import itertools

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

# Bug 1: FixedShapeTensorArray.from_dlpack of a 0-d array crashes; of shape (0, 2, 2) it divides
# by zero.


@pytest.mark.parametrize("copy", [None, False, True])
def test_bug1_rejects_0d_tensor_as_fixed_shape_tensor_array_with_value_error(copy):
    with pytest.raises(ad.ArrowDLPackValueError, match="0-dimensional"):
        ad.FixedShapeTensorArray.from_dlpack(np.array(7, np.int32), copy=copy)


def test_bug1_0d_tensor_is_still_a_valid_tensor():
    tensor = ad.Tensor.from_dlpack(np.array(7.5))
    assert tensor.shape == ()
    assert tensor.strides == ()
    assert tensor.ndim == 0
    assert tensor.size == 1
    assert np.from_dlpack(tensor).item() == 7.5


@pytest.mark.parametrize("copy", [None, False, True])
def test_bug1_imports_zero_length_cube_as_empty_fixed_shape_tensor_array(copy):
    array = ad.FixedShapeTensorArray.from_dlpack(np.zeros((0, 2, 2), np.int32), copy=copy)
    assert len(array) == 0
    assert array.shape == [2, 2]
    assert array.value_type == "int32"
    assert array.to_pylist() == []
    assert np.from_dlpack(array).shape == (0, 2, 2)
    theirs = pa.array(array)
    assert isinstance(theirs, pa.FixedShapeTensorArray)
    assert len(theirs) == 0
    assert theirs.type.shape == [2, 2]


def test_bug1_imports_zero_extent_cells():
    array = ad.FixedShapeTensorArray.from_dlpack(np.zeros((3, 0, 2), np.float32))
    assert len(array) == 3
    assert array.shape == [0, 2]
    assert np.from_dlpack(array).shape == (3, 0, 2)


# Bug 2: FixedShapeTensorArray.from_dlpack of a gapped-stride input returns wrong data silently.

CUBE = np.arange(4 * 6 * 4, dtype=np.int32).reshape(4, 6, 4)

GAPPED = {
    "x[:, ::2]": CUBE[:, ::2],
    "x[::2]": CUBE[::2],
    "x[:, :, ::2]": CUBE[:, :, ::2],
    "x[..., 1:3]": CUBE[..., 1:3],
    "x[1:3, 2:5, :3]": CUBE[1:3, 2:5, :3],
    "x[::-1]": CUBE[::-1],
    "x[::2].transpose(0, 2, 1)": CUBE[::2].transpose(0, 2, 1),
}


@pytest.mark.parametrize("source", GAPPED.values(), ids=GAPPED.keys())
def test_bug2_copies_gapped_input_with_exact_values(source):
    array = ad.FixedShapeTensorArray.from_dlpack(source)
    assert len(array) == source.shape[0]
    result = np.from_dlpack(array)
    np.testing.assert_array_equal(result, source)


@pytest.mark.parametrize("source", GAPPED.values(), ids=GAPPED.keys())
def test_bug2_pyarrow_reads_our_copy_of_gapped_input_exactly(source):
    theirs = pa.array(ad.FixedShapeTensorArray.from_dlpack(source))
    assert isinstance(theirs, pa.FixedShapeTensorArray)
    np.testing.assert_array_equal(theirs.to_numpy_ndarray(), source)


@pytest.mark.parametrize("source", GAPPED.values(), ids=GAPPED.keys())
def test_bug2_rejects_gapped_input_with_copy_false_with_buffer_error(source):
    with pytest.raises(ad.ArrowDLPackBufferError, match="copy=False"):
        ad.FixedShapeTensorArray.from_dlpack(source, copy=False)


def test_bug2_imports_dense_first_major_input_zero_copy_with_copy_false():
    source = CUBE[1:3]  # Outer slices of a dense cube are dense.
    array = ad.FixedShapeTensorArray.from_dlpack(source, copy=False)
    result = np.from_dlpack(array)
    assert result.ctypes.data == source.ctypes.data
    np.testing.assert_array_equal(result, source)


def test_bug2_from_tensor_copies_gapped_tensor_with_exact_values():
    source = CUBE[::2, 1::2]
    array = ad.FixedShapeTensorArray.from_tensor(ad.Tensor.from_dlpack(source))
    np.testing.assert_array_equal(np.from_dlpack(array), source)


# Bug 3: Tensor.__dlpack__(copy=True) of a strided tensor copies too few bytes.

STRIDED = {
    "gapped": CUBE[:, ::3, 1:],
    "transposed": CUBE.transpose(2, 0, 1),
    "reversed": CUBE[::-1, :, ::-2],
    "broadcast": np.broadcast_to(np.arange(4, dtype=np.int32), (3, 5, 4)),
    "single column": CUBE[:, :, 3],
}


@pytest.mark.parametrize("source", STRIDED.values(), ids=STRIDED.keys())
def test_bug3_tensor_copy_true_of_strided_tensor_gives_exact_values(source, dlpack):
    tensor = ad.Tensor.from_dlpack(source)
    for max_version in (None, (1, 3)):
        capsule = tensor.__dlpack__(max_version=max_version, copy=True)
        read = dlpack.read(capsule)
        assert read.shape == source.shape
        result = np.from_dlpack(dlpack.holder(capsule))
        np.testing.assert_array_equal(result, source)
    np.testing.assert_array_equal(np.from_dlpack(tensor, copy=True), source)


@pytest.mark.parametrize("source", STRIDED.values(), ids=STRIDED.keys())
def test_bug3_torch_copy_of_strided_tensor_gives_exact_values(source):
    result = torch.from_dlpack(ad.Tensor.from_dlpack(source), copy=True)
    np.testing.assert_array_equal(result.numpy(), source)
    assert result.data_ptr() != source.ctypes.data


# Bug 4: 3-cycle permutations overlap on export and invert on import.
# The spec: logical dimension i is physical dimension permutation[i].


def permuted(rank: int, permutation):
    """Cells of ``rank`` dims stored row-major (physical shape 3, 4, 5, ...), viewed with logical
    dimension i = physical dimension permutation[i]."""
    physical = tuple(range(3, 3 + rank))
    base = np.arange(2 * int(np.prod(physical)), dtype=np.int32).reshape(2, *physical)
    return base, base.transpose(0, *(axis + 1 for axis in permutation))


PERMUTATIONS_3 = list(itertools.permutations(range(3)))
PERMUTATIONS_4 = list(itertools.permutations(range(4)))


def is_identity(permutation) -> bool:
    return list(permutation) == sorted(permutation)


def is_involution(permutation) -> bool:
    """Identity or made of 2-cycles: the permutation is its own inverse (PyArrow reads those
    correctly)."""
    return all(permutation[axis] == position for position, axis in enumerate(permutation))


@pytest.mark.parametrize(
    "permutation",
    PERMUTATIONS_3 + PERMUTATIONS_4,
    ids=lambda permutation: "".join(map(str, permutation)),
)
def test_bug4_imports_every_permutation_with_spec_metadata_zero_copy(permutation, dlpack):
    base, source = permuted(len(permutation), permutation)
    array = ad.FixedShapeTensorArray.from_dlpack(source)
    physical = list(base.shape[1:])
    assert array.shape == physical
    assert array.permutation == (None if is_identity(permutation) else list(permutation))
    # The spec's rule, checked on the metadata itself.
    assert tuple(physical[axis] for axis in permutation) == source.shape[1:]
    # Export gives back the logical view, on the same memory, with non-overlapping strides.
    result = np.from_dlpack(array)
    np.testing.assert_array_equal(result, source)
    assert result.ctypes.data == base.ctypes.data
    read = dlpack.read(array.__dlpack__(max_version=(1, 3)))
    assert read.strides == tuple(stride // 4 for stride in source.strides)
    assert sorted(read.strides[1:], reverse=True) == [
        int(np.prod(physical[axis + 1 :])) for axis in range(len(physical))
    ]


@pytest.mark.parametrize(
    "permutation",
    PERMUTATIONS_3 + PERMUTATIONS_4,
    ids=lambda permutation: "".join(map(str, permutation)),
)
def test_bug4_pyarrow_receives_spec_permutation_metadata(permutation):
    base, source = permuted(len(permutation), permutation)
    theirs = pa.array(ad.FixedShapeTensorArray.from_dlpack(source))
    assert isinstance(theirs, pa.FixedShapeTensorArray)
    assert theirs.type.shape == list(base.shape[1:])
    # An identity permutation is omitted from the metadata, as the spec allows.
    assert theirs.type.permutation == (None if is_identity(permutation) else list(permutation))
    assert theirs.storage.values.buffers()[1].address == base.ctypes.data
    if is_involution(permutation):
        np.testing.assert_array_equal(theirs.to_numpy_ndarray(), source)


@pytest.mark.parametrize(
    "permutation", PERMUTATIONS_3, ids=lambda permutation: "".join(map(str, permutation))
)
def test_bug4_reads_pyarrow_permuted_column_by_the_spec(permutation):
    physical = [3, 4, 5]
    storage_values = np.arange(2 * 60, dtype=np.int32)
    extension = pa.fixed_shape_tensor(pa.int32(), physical, permutation=list(permutation))
    storage = pa.FixedSizeListArray.from_arrays(pa.array(storage_values), 60)
    column = pa.ExtensionArray.from_storage(extension, storage)
    array = ad.array(column)
    assert isinstance(array, ad.FixedShapeTensorArray)
    assert array.shape == physical
    assert array.permutation == list(permutation)
    expected = storage_values.reshape(2, *physical).transpose(
        0, *(axis + 1 for axis in permutation)
    )
    result = np.from_dlpack(array)
    np.testing.assert_array_equal(result, expected)
    assert result.ctypes.data == storage.values.buffers()[1].address
    tensor = array.to_tensor()
    assert tensor.shape == expected.shape
    assert tensor.strides == expected.strides


@pytest.mark.parametrize(
    "permutation", PERMUTATIONS_3, ids=lambda permutation: "".join(map(str, permutation))
)
def test_bug4_round_trips_permuted_column_through_pyarrow(permutation):
    _, source = permuted(3, permutation)
    once = ad.FixedShapeTensorArray.from_dlpack(source)
    twice = ad.array(pa.array(once))
    assert twice.permutation == once.permutation
    assert twice.shape == once.shape
    np.testing.assert_array_equal(np.from_dlpack(twice), source)


# Bug 5: to_tensor(allow_nulls=False) ignores nulls inside FixedSizeList child values.


def test_bug5_rejects_nulls_in_child_values_on_to_tensor():
    source = pa.array([[1, None], [3, 4]], pa.list_(pa.int32(), 2))
    with pytest.raises(ad.ArrowDLPackValueError, match="allow_nulls"):
        ad.array(source).to_tensor()
    with pytest.raises(ad.ArrowDLPackValueError, match="allow_nulls"):
        ad.array(source).to_tensor(allow_nulls=False)


def test_bug5_rejects_nulls_in_nested_child_values_on_to_tensor():
    source = pa.array([[[1, 2], [3, 4]], [[5, 6], [7, None]]], pa.list_(pa.list_(pa.int16(), 2), 2))
    with pytest.raises(ValueError, match="depth 2"):
        ad.array(source).to_tensor()
    source = pa.array([[[1, 2], [3, 4]], [[5, 6], None]], pa.list_(pa.list_(pa.int16(), 2), 2))
    with pytest.raises(ValueError, match="depth 1"):
        ad.array(source).to_tensor()


def test_bug5_rejects_nulls_in_child_values_on_export():
    array = ad.array(pa.array([[1, None], [3, 4]], pa.list_(pa.float64(), 2)))
    with pytest.raises(ad.ArrowDLPackTypeError, match="nulls"):
        np.from_dlpack(array)


def test_bug5_rejects_nulls_in_fixed_shape_tensor_storage_values():
    extension = pa.fixed_shape_tensor(pa.int32(), [2])
    storage = pa.array([[1, None], [3, 4]], pa.list_(pa.int32(), 2))
    array = ad.array(pa.ExtensionArray.from_storage(extension, storage))
    assert isinstance(array, ad.FixedShapeTensorArray)
    with pytest.raises(ad.ArrowDLPackValueError, match="allow_nulls"):
        array.to_tensor()
    with pytest.raises(ad.ArrowDLPackTypeError, match="nulls"):
        np.from_dlpack(array)


def test_bug5_allows_nulls_in_child_values_when_asked():
    source = pa.array([[1, None], [3, 4]], pa.list_(pa.int32(), 2))
    result = np.from_dlpack(ad.array(source).to_tensor(allow_nulls=True))
    assert result.shape == (2, 2)
    assert (result[0, 0], result[1, 0], result[1, 1]) == (1, 3, 4)


def test_bug5_ignores_nulls_outside_the_slice():
    source = pa.array([[1, None], [3, 4], [5, 6]], pa.list_(pa.int32(), 2)).slice(1)
    result = np.from_dlpack(ad.array(source).to_tensor())
    assert result.tolist() == [[3, 4], [5, 6]]


# Bug 6: `FixedShapeTensorScalar.to_numpy()` (and `to_tensor()`) of a permuted cell reads it with
# the strides of the unpermuted shape: for shape [2, 3] and permutation [1, 0] it gives
# [[0, 2], [1, 3], [2, 4]], where the column's `to_numpy_ndarray()` gives [[0, 3], [1, 4], [2, 5]].


def test_bug6_a_permuted_cell_is_the_columns_row():
    extension = pa.fixed_shape_tensor(pa.int32(), [2, 3], permutation=[1, 0])
    column = pa.ExtensionArray.from_storage(extension, pa.array([list(range(6))], pa.list_(pa.int32(), 6)))
    expected = [[0, 3], [1, 4], [2, 5]]
    assert column.to_numpy_ndarray()[0].tolist() == expected
    assert np.from_dlpack(ad.array(column)[0]).tolist() == expected
