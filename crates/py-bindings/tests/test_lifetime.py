"""Lifetimes across the exchange: exported capsules keep Arrow memory alive, imported arrays keep
their producer alive, memory is released once the last holder dies (in any order), and a
producer's deleter runs exactly once, on success and on failure."""

import ctypes
import gc
import itertools
import weakref

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad


def collect():
    """A full collection: slow (about 0.4 s with torch and JAX loaded), so used sparingly."""
    gc.collect()


def released(alive: weakref.ref) -> bool:
    """Whether the referent is gone: at once by reference counting, or after a collection."""
    if alive() is None:
        return True
    collect()
    return alive() is None


def deleted(producer, expected: int) -> bool:
    """Whether the producer's deleter has run ``expected`` times, collecting at most once."""
    if producer.deleted != expected:
        collect()
    return producer.deleted == expected


def numpy_source(n=64, dtype=np.int64):
    """A numpy array and a weak reference to it: the reference dies when the memory is freed."""
    source = np.arange(n, dtype=dtype)
    return source, weakref.ref(source)


# Export: a capsule keeps the data alive.


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_exported_capsule_keeps_data_after_source_is_deleted(dlpack, max_version):
    source, alive = numpy_source()
    arrow = pa.array(source)
    assert arrow.buffers()[1].address == source.ctypes.data  # pyarrow shares numpy's memory
    array = ad.array(arrow)
    capsule = array.__dlpack__(max_version=max_version)
    del source, arrow, array
    collect()
    assert alive() is not None
    result = np.from_dlpack(dlpack.holder(capsule))
    del capsule
    collect()
    assert result.tolist() == list(range(64))
    assert alive() is not None
    del result
    assert released(alive)


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_unconsumed_capsule_releases_data_when_deleted(max_version):
    source, alive = numpy_source()
    capsule = ad.array(pa.array(source)).__dlpack__(max_version=max_version)
    del source
    collect()
    assert alive() is not None
    del capsule
    assert released(alive)


def test_copied_capsule_does_not_hold_the_source(dlpack):
    source, alive = numpy_source()
    capsule = ad.array(pa.array(source)).__dlpack__(max_version=(1, 3), copy=True)
    del source
    assert released(alive)
    assert np.from_dlpack(dlpack.holder(capsule)).tolist() == list(range(64))


def test_numpy_result_keeps_arrow_data_after_our_array_is_deleted():
    source, alive = numpy_source()
    array = ad.array(pa.array(source))
    result = np.from_dlpack(array)
    del source, array
    collect()
    assert alive() is not None
    assert result.sum() == sum(range(64))
    del result
    assert released(alive)


def test_torch_result_keeps_arrow_data_after_our_tensor_is_deleted():
    source, alive = numpy_source()
    tensor = ad.FixedShapeTensorArray.from_dlpack(source.reshape(8, 2, 4)).to_tensor()
    result = torch.from_dlpack(tensor)
    del source, tensor
    collect()
    assert alive() is not None
    assert result.sum().item() == sum(range(64))
    del result
    assert released(alive)


# Import: an imported array keeps its producer alive.


@pytest.mark.parametrize(
    "importer",
    [
        pytest.param(lambda x: ad.Array.from_dlpack(x), id="Array"),
        pytest.param(lambda x: ad.Tensor.from_dlpack(x.reshape(8, 8)), id="Tensor"),
        pytest.param(
            lambda x: ad.FixedShapeTensorArray.from_dlpack(x.reshape(4, 4, 4)),
            id="FixedShapeTensorArray",
        ),
        pytest.param(
            lambda x: ad.FixedShapeTensorArray.from_tensor(ad.Tensor.from_dlpack(x.reshape(4, 16))),
            id="from_tensor",
        ),
    ],
)
def test_imported_object_keeps_numpy_producer_alive(importer):
    source, alive = numpy_source()
    imported = importer(source)
    del source
    collect()
    assert alive() is not None
    assert np.from_dlpack(imported).ravel().tolist() == list(range(64))
    del imported
    assert released(alive)


def test_imported_array_keeps_custom_producer_memory_alive():
    class Producer:
        def __init__(self, data):
            self.data = data

        def __dlpack__(self, **kwargs):
            return self.data.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    source, alive = numpy_source(dtype=np.float32)
    producer = Producer(source)
    producer_alive = weakref.ref(producer)
    array = ad.Array.from_dlpack(producer)
    del source, producer
    collect()
    # The capsule owns the memory, not the producer object: the object may go, its data stays.
    assert producer_alive() is None
    assert alive() is not None
    assert array.to_pylist() == [float(i) for i in range(64)]
    del array
    assert released(alive)


def test_imported_torch_tensor_stays_valid_after_torch_drops_it():
    source = torch.arange(64, dtype=torch.int32)
    array = ad.Array.from_dlpack(source)
    pointer = source.data_ptr()
    del source
    assert array.to_pylist() == list(range(64))
    assert pa.array(array).buffers()[1].address == pointer


def test_pyarrow_array_made_from_ours_keeps_the_producer_alive():
    source, alive = numpy_source()
    theirs = pa.array(ad.Array.from_dlpack(source))
    del source
    collect()
    assert alive() is not None
    assert theirs.to_pylist() == list(range(64))
    del theirs
    assert released(alive)


HOLDERS = ["source", "ours", "numpy", "pyarrow", "torch"]


def values_of(holders: dict) -> dict:
    """The values each holder sees (a function, so that no loop variable keeps one alive)."""
    return {
        name: holder.to_pylist() if name in ("ours", "pyarrow") else holder.tolist()
        for name, holder in holders.items()
    }


@pytest.mark.parametrize("order", list(itertools.permutations(HOLDERS)), ids="-".join)
def test_releases_memory_after_last_holder_in_any_deletion_order(order):
    source, alive = numpy_source()
    holders = {"source": source}
    del source
    holders["ours"] = ad.Array.from_dlpack(holders["source"])
    holders["numpy"] = np.from_dlpack(holders["ours"])
    holders["pyarrow"] = pa.array(holders["ours"])
    holders["torch"] = torch.from_dlpack(holders["ours"])
    expected = list(range(64))
    for position, name in enumerate(order):
        del holders[name]
        if position < len(order) - 1:
            assert alive() is not None
        for remaining, values in values_of(holders).items():
            assert values == expected, remaining
    assert released(alive)


# Deleters run exactly once (counted with a hand-built ctypes producer).


def test_deleter_runs_once_when_the_last_arrow_reference_dies(producer):
    source = np.arange(6, dtype=np.int32)
    array = ad.Array.from_dlpack(producer.capsule(source))
    as_numpy = np.from_dlpack(array)
    as_pyarrow = pa.array(array)
    del array
    assert producer.deleted == 0
    del as_numpy
    assert producer.deleted == 0
    assert as_pyarrow.to_pylist() == [0, 1, 2, 3, 4, 5]
    del as_pyarrow
    assert deleted(producer, 1)
    assert producer.alive == 0


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_deleter_runs_once_for_each_importing_class(producer, versioned):
    source = np.arange(12, dtype=np.float64).reshape(3, 4)
    imported = [
        ad.Tensor.from_dlpack(producer.capsule(source, versioned=versioned)),
        ad.FixedShapeTensorArray.from_dlpack(producer.capsule(source, versioned=versioned)),
        ad.Array.from_dlpack(producer.capsule(source[1], versioned=versioned)),
    ]
    assert producer.deleted == 0
    for count in range(1, 4):
        del imported[0]
        assert deleted(producer, count)
    assert producer.alive == 0


def test_deleter_runs_once_after_an_imported_copy(producer):
    source = np.arange(6, dtype=np.int16)[::2]
    array = ad.Array.from_dlpack(producer.capsule(source), copy=True)
    collect()
    assert array.to_pylist() == [0, 2, 4]
    del array
    assert deleted(producer, 1)


def test_deleter_runs_once_after_packing_booleans(producer):
    source = np.array([True, False, True])
    array = ad.Array.from_dlpack(producer.capsule(source))
    assert array.to_pylist() == [True, False, True]
    del array
    assert deleted(producer, 1)


FAILURES = {
    "Array of 2-D": (lambda capsule: ad.Array.from_dlpack(capsule), {}, (3, 4), ValueError),
    "Array of strided": (
        lambda capsule: ad.Array.from_dlpack(capsule),
        {},
        "strided",
        ValueError,
    ),
    "FixedShapeTensorArray of 0-d": (
        lambda capsule: ad.FixedShapeTensorArray.from_dlpack(capsule),
        {},
        (),
        ValueError,
    ),
    "lanes": (lambda capsule: ad.Tensor.from_dlpack(capsule), {"lanes": 2}, (4,), ValueError),
    "major version": (
        lambda capsule: ad.Tensor.from_dlpack(capsule),
        {"version": (2, 0)},
        (4,),
        ValueError,
    ),
    "copy=False of a copy": (
        lambda capsule: ad.Tensor.from_dlpack(capsule, copy=False),
        {"flags": 2},
        (4,),
        BufferError,
    ),
    "gapped with copy=False": (
        lambda capsule: ad.FixedShapeTensorArray.from_dlpack(capsule, copy=False),
        {},
        "gapped",
        BufferError,
    ),
}


@pytest.mark.parametrize("case", FAILURES.values(), ids=FAILURES.keys())
def test_deleter_runs_once_before_an_import_error_is_raised(producer, case):
    importer, header, shape, error = case
    if shape == "strided":
        source = np.arange(8, dtype=np.int32)[::2]
    elif shape == "gapped":
        source = np.arange(24, dtype=np.int32).reshape(2, 3, 4)[:, ::2]
    else:
        source = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    capsule = producer.capsule(source, **header)
    with pytest.raises(error):
        importer(capsule)
    assert producer.deleted == 1
    assert producer.alive == 0


def test_deleter_runs_once_when_import_is_refused_for_malformed_metadata(producer):
    def negative_extent(tensor):
        ctypes.cast(tensor.shape, ctypes.POINTER(ctypes.c_int64))[0] = -1

    with pytest.raises(ValueError):
        ad.Tensor.from_dlpack(producer.capsule(np.arange(4, dtype=np.int8), edit=negative_extent))
    assert producer.deleted == 1


def test_consumed_capsule_is_not_deleted_again(producer):
    capsule = producer.capsule(np.arange(3, dtype=np.uint8))
    array = ad.Array.from_dlpack(capsule)
    with pytest.raises(ValueError, match="consumed"):
        ad.Array.from_dlpack(capsule)
    del capsule
    assert producer.deleted == 0
    assert array.to_pylist() == [0, 1, 2]
    del array
    assert deleted(producer, 1)
