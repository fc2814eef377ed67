"""Read-only is a promise (docs/contract.md).

- Every import that cannot prove it owns writable memory is read-only: every legacy capsule, and
  every versioned capsule flagged ``READ_ONLY``.
- Every export of memory that Arrow or another producer owns is ``READ_ONLY``.
- ``IS_COPIED`` marks only memory made for that one export and shared with nothing.
- ``copy=True`` never returns memory that aliases anything.

Each rule is checked for every class, every chunk pattern (empty chunks included), both capsule
kinds and every entry point: ``__dlpack__``, ``np.from_dlpack``, ``torch.from_dlpack`` and our own
``from_dlpack`` (which reaches our objects through the DLPack C exchange API).
"""

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

FST_TYPE = pa.fixed_shape_tensor(pa.int32(), [2])


def _fst(chunks):
    """A chunked fixed-shape tensor column of int32[2] cells, one list of cells per chunk."""
    storage_type = pa.list_(pa.int32(), 2)
    return pa.chunked_array(
        [
            pa.ExtensionArray.from_storage(FST_TYPE, pa.array(cells, type=storage_type))
            for cells in chunks
        ],
        type=FST_TYPE,
    )


# (id, chunks, whether an export must copy). One non-empty chunk among empty ones is shared as it
# is: exporting it must not claim a copy.
CHUNK_PATTERNS = [
    ("one_chunk", [[7, 8, 9]], False),
    ("empty_around_one", [[], [7, 8, 9], []], False),
    ("empty_first", [[], [7, 8, 9]], False),
    ("empty_last", [[7, 8, 9], []], False),
    ("two_non_empty", [[7], [8, 9]], True),
    ("two_non_empty_and_empty", [[7], [], [8, 9]], True),
]

FST_PATTERNS = [
    ("one_chunk", [[[1, 2], [3, 4]]], False),
    ("empty_around_one", [[], [[1, 2], [3, 4]], []], False),
    ("two_non_empty", [[[1, 2]], [[3, 4]]], True),
]


def _column(kind, chunks):
    if kind == "Array":
        return pa.chunked_array(chunks, type=pa.int64())
    return _fst(chunks)


def _cases():
    for kind, patterns in (("Array", CHUNK_PATTERNS), ("FixedShapeTensorArray", FST_PATTERNS)):
        for name, chunks, copies in patterns:
            yield pytest.param(kind, chunks, copies, id=f"{kind}-{name}")


CASES = list(_cases())


def _buffer_ranges(column):
    """(start, end) of every buffer of every chunk of a pyarrow column, its children's included."""
    ranges = []

    def walk(array):
        for buffer in array.buffers():
            if buffer is not None and buffer.size:
                ranges.append((buffer.address, buffer.address + buffer.size))

    for chunk in column.chunks:
        walk(chunk.storage if isinstance(chunk, pa.ExtensionArray) else chunk)
    return ranges


def _aliases(address, ranges):
    return any(start <= address < end for start, end in ranges)


@pytest.mark.parametrize("kind, chunks, copies", CASES)
def test_versioned_export_flags_say_who_owns_the_memory(kind, chunks, copies, dlpack):
    source = _column(kind, chunks)
    ours = ad.array(source)
    capsule = ours.__dlpack__(max_version=(1, 3))
    read = dlpack.read(capsule)
    if copies:
        assert read.flags == dlpack.IS_COPIED
        assert not _aliases(read.data, _buffer_ranges(source))
    else:
        assert read.flags == dlpack.READ_ONLY
        assert _aliases(read.data, _buffer_ranges(source))


@pytest.mark.parametrize("kind, chunks, copies", CASES)
def test_numpy_can_write_only_to_a_copy(kind, chunks, copies):
    source = _column(kind, chunks)
    before = source.to_pylist()
    result = np.from_dlpack(ad.array(source))
    assert result.flags.writeable is copies
    if copies:
        result[...] = -1
    else:
        with pytest.raises(ValueError, match="read-only"):
            result[...] = -1
    assert source.to_pylist() == before


@pytest.mark.parametrize("kind, chunks, copies", CASES)
def test_copy_true_never_aliases_the_source(kind, chunks, copies, dlpack):
    source = _column(kind, chunks)
    ranges = _buffer_ranges(source)
    ours = ad.array(source)
    for max_version in [(1, 3), None]:
        read = dlpack.read(ours.__dlpack__(max_version=max_version, copy=True))
        assert not _aliases(read.data, ranges)
        if max_version is not None:
            assert read.flags == dlpack.IS_COPIED
    copied = np.from_dlpack(ours, copy=True)
    assert copied.flags.writeable
    assert not _aliases(copied.ctypes.data, ranges)
    copied[...] = -1
    tensor = ad.Tensor.from_dlpack(ours, copy=True)
    assert tensor.is_mutable
    assert not _aliases(np.from_dlpack(tensor).ctypes.data, ranges)
    assert source.to_pylist() == _column(kind, chunks).to_pylist()


@pytest.mark.parametrize("kind, chunks, copies", CASES)
def test_copy_false_succeeds_exactly_when_no_copy_is_needed(kind, chunks, copies):
    ours = ad.array(_column(kind, chunks))
    if copies:
        with pytest.raises(BufferError):
            ad.Tensor.from_dlpack(ours, copy=False)
    else:
        tensor = ad.Tensor.from_dlpack(ours, copy=False)
        assert not tensor.is_mutable
        assert np.from_dlpack(tensor).flags.writeable is False


@pytest.mark.parametrize("kind, chunks, copies", CASES)
def test_our_import_of_our_export_keeps_read_only(kind, chunks, copies):
    ours = ad.array(_column(kind, chunks))
    # Through the DLPack C exchange API (copy=None), and through both capsule kinds.
    through_exchange = ad.Tensor.from_dlpack(ours)
    versioned = ad.Tensor.from_dlpack(ours.__dlpack__(max_version=(1, 3)))
    legacy = ad.Tensor.from_dlpack(ours.__dlpack__())
    assert through_exchange.is_mutable is copies
    assert versioned.is_mutable is copies
    # A legacy capsule cannot say that its memory may be written, copy or not.
    assert legacy.is_mutable is False
    assert np.from_dlpack(legacy).flags.writeable is False


@pytest.mark.parametrize("kind, chunks, copies", CASES)
def test_torch_sees_the_same_memory_as_numpy(kind, chunks, copies):
    source = _column(kind, chunks)
    tensor = torch.from_dlpack(ad.array(source))
    assert _aliases(tensor.data_ptr(), _buffer_ranges(source)) is not copies


def test_legacy_import_from_jax_is_read_only_and_jax_keeps_its_values(jax_x64):
    source = jnp.arange(6, dtype=jnp.float32)
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.is_mutable is False
    view = np.from_dlpack(tensor)
    assert view.flags.writeable is False
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 100.0
    np.testing.assert_array_equal(np.asarray(source), np.arange(6, dtype=np.float32))


def test_legacy_capsule_of_our_array_imports_read_only():
    source = pa.array([1, 2, 3])
    tensor = ad.Tensor.from_dlpack(ad.array(source).__dlpack__())
    assert tensor.is_mutable is False
    assert torch.from_dlpack(tensor).data_ptr() == source.buffers()[1].address
    with pytest.raises(ValueError, match="read-only"):
        np.from_dlpack(tensor)[0] = 9
    assert source.to_pylist() == [1, 2, 3]


def test_legacy_import_with_copy_true_is_writable_and_separate():
    source = pa.array([1, 2, 3])
    tensor = ad.Tensor.from_dlpack(ad.array(source).__dlpack__(), copy=True)
    assert tensor.is_mutable
    copied = np.from_dlpack(tensor)
    copied[0] = 9
    assert source.to_pylist() == [1, 2, 3]


def test_writable_versioned_numpy_import_stays_writable():
    # The rule is no broader than it must be: numpy's versioned capsule says "writable".
    source = np.arange(4, dtype=np.int32)
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.is_mutable
    np.from_dlpack(tensor)[0] = 7
    assert source[0] == 7


def test_torch_import_through_the_exchange_api_is_writable_like_torch():
    source = torch.arange(4, dtype=torch.int32)
    tensor = ad.Tensor.from_dlpack(source)
    assert tensor.is_mutable
    np.from_dlpack(tensor)[1] = 70
    assert int(source[1]) == 70

