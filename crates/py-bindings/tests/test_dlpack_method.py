"""`Array.__dlpack__` and `Tensor.__dlpack__` are a raw vectorcall method (`dlpack_method.rs`)
that matches keyword names by pointer, then by value, and remembers `max_version` tuples by
address: every way of calling it gives what pyo3's method gave."""

import gc
import inspect
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad


def producers():
    return [
        ad.array(pa.array([1, 2, 3], type=pa.int64())),
        ad.Tensor.from_dlpack(np.arange(6.0).reshape(2, 3)),
        # Not this method (pyo3's, which overrides it in the subclass): the two must agree.
        ad.FixedShapeTensorArray.from_dlpack(np.arange(12.0, dtype=np.float32).reshape(2, 2, 3)),
    ]


def fresh(name):
    """`name` as a new, non-interned str object (a keyword name matched by value)."""
    built = "".join(list(name))
    assert built == name and built is not sys.intern(name)
    return built


@pytest.mark.parametrize("index", range(3))
def test_signature_and_doc_are_pyo3s(index):
    method = type(producers()[index]).__dlpack__
    assert str(inspect.signature(method)) == (
        "(self, /, *, stream=None, max_version=None, dl_device=None, copy=None)"
    )
    assert "DLPack capsule" in method.__doc__
    assert "__dlpack__" in repr(method)


@pytest.mark.parametrize("index", range(3))
def test_keyword_names_that_are_not_interned_are_matched_by_value(index, dlpack):
    producer = producers()[index]
    keywords = {
        fresh("max_version"): (1, 3),
        fresh("copy"): True,
        fresh("dl_device"): (1, 0),
        fresh("stream"): None,
    }
    read = dlpack.read(producer.__dlpack__(**keywords))
    assert read.name == "dltensor_versioned"
    assert read.flags & dlpack.IS_COPIED
    assert not read.flags & dlpack.READ_ONLY
    shared = dlpack.read(producer.__dlpack__(**{fresh("max_version"): (1, 3)}))
    assert not shared.flags & dlpack.IS_COPIED
    # Arrow memory is read-only; the tensor shares a writable numpy array.
    assert bool(shared.flags & dlpack.READ_ONLY) == (index != 1)


@pytest.mark.parametrize("index", range(2))
def test_positional_and_unknown_arguments_are_refused_as_pyo3_refused_them(index):
    producer = producers()[index]
    name = type(producer).__name__
    positional = rf"^{name}.__dlpack__\(\) takes 0 positional arguments but 1 was given$"
    with pytest.raises(TypeError, match=positional):
        producer.__dlpack__(None)
    with pytest.raises(TypeError, match="but 2 were given"):
        producer.__dlpack__(None, (1, 0))
    unexpected = rf"^{name}.__dlpack__\(\) got an unexpected keyword argument 'maxversion'$"
    with pytest.raises(TypeError, match=unexpected):
        producer.__dlpack__(maxversion=(1, 0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'device'"):
        producer.__dlpack__(max_version=(1, 0), **{fresh("device"): None})
    # No stale exception is left behind.
    assert "dltensor_versioned" in repr(producer.__dlpack__(max_version=(1, 0)))


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize(
    ("keywords", "error", "note"),
    [
        ({"copy": 1}, TypeError, "while processing 'copy'"),
        ({"copy": "yes"}, TypeError, "while processing 'copy'"),
        ({"dl_device": "cpu"}, TypeError, "while processing 'dl_device'"),
        ({"dl_device": (1,)}, ValueError, "while processing 'dl_device'"),
        ({"dl_device": (-1, 0)}, OverflowError, "while processing 'dl_device'"),
    ],
)
def test_refused_values_get_pyo3s_error_and_note(index, keywords, error, note):
    producer = producers()[index]
    with pytest.raises(error) as raised:
        producer.__dlpack__(max_version=(1, 0), **keywords)
    assert note in getattr(raised.value, "__notes__", [])


@pytest.mark.parametrize("index", range(3))
def test_copy_accepts_numpy_bools(index, dlpack):
    producer = producers()[index]
    read = dlpack.read(producer.__dlpack__(max_version=(1, 3), copy=np.bool_(True)))
    assert read.flags & dlpack.IS_COPIED
    shared = dlpack.read(producer.__dlpack__(copy=np.bool_(False), max_version=(1, 3)))
    assert not shared.flags & dlpack.IS_COPIED
    assert bool(shared.flags & dlpack.READ_ONLY) == (index != 1)


def test_the_descriptor_refuses_an_instance_of_another_class():
    array, tensor, _ = producers()
    with pytest.raises(TypeError):
        type(array).__dlpack__(tensor)
    with pytest.raises(TypeError):
        type(tensor).__dlpack__(array)


def test_many_distinct_max_version_tuples_read_right():
    # More tuples than the address cache holds, each built at run time (not a code constant),
    # kept alive or dropped: every one selects the capsule its values ask for.
    array, tensor, _ = producers()
    kept = []
    for round_ in range(3):
        for minor in range(20):
            for major in range(3):
                name = "dltensor_versioned" if major else "dltensor"
                version = tuple([major, minor])
                if minor % 2:
                    kept.append(version)
                for producer in (array, tensor):
                    assert f'"{name}"' in repr(producer.__dlpack__(max_version=version))
        gc.collect()
    # A tuple subclass is read each time, never remembered.
    class Version(tuple):
        pass

    assert '"dltensor"' in repr(array.__dlpack__(max_version=Version((0, 9))))
    assert '"dltensor_versioned"' in repr(array.__dlpack__(max_version=Version((1, 9))))


def test_numpy_and_torch_consume_through_the_method():
    array, tensor, _ = producers()
    for _ in range(3):
        assert np.from_dlpack(array).tolist() == [1, 2, 3]
        assert not np.from_dlpack(array).flags.writeable
        assert np.from_dlpack(tensor).tolist() == [[0, 1, 2], [3, 4, 5]]
        assert torch.from_dlpack(array).tolist() == [1, 2, 3]
        assert np.from_dlpack(array, copy=True).flags.writeable


def test_dlpack_device_is_the_cpu_tuple_every_time():
    array, tensor, fixed = producers()
    for producer in (array, tensor, fixed) * 2:
        device = producer.__dlpack_device__()
        assert type(device) is tuple and device == (1, 0)
