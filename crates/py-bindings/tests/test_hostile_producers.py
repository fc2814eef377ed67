"""Hostile DLPack producers: malformed tensors and misbehaving protocol objects, built by hand.

Every case checks three things: the documented exception type with a message naming the field,
the producer's deleter called exactly once (or never, where the capsule was not ours to consume),
and the process alive (the run goes on to the next case).
The contract is docs/contract.md and the exception list of ``arrow_dlpack.__init__``: malformed
imports raise ``ValueError``, devices ``BufferError``, non-DLPack objects ``TypeError``.

Capsules are always held in a variable while a call that may raise runs: the helper's capsule
destructor is Python code, which cannot run while an exception propagates (see the helper).
"""

import sys

import numpy as np
import pytest

import arrow_dlpack as ad


# `conftest.py` loads the helper by path and registers it (the tests are not a package).
import _dlpack_ctypes as dl  # noqa: E402

# The case tables live in a helper module, shared with `test_no_panics.py`.
from _dlpack_cases import BAD_VERSIONS, ENTRY_POINTS, MALFORMED  # noqa: E402
from _dlpack_cases import dlpack_f32 as f32  # noqa: E402


def _ids(cases):
    return [case[0] for case in cases]


def _refuse(entry, capsule_or_producer, exception, pattern):
    """Runs one import that must fail; returns the exception."""
    with pytest.raises(exception, match=pattern) as raised:
        entry(capsule_or_producer)
    assert isinstance(raised.value, ad.ArrowDLPackError), type(raised.value).__mro__
    return raised.value


@pytest.mark.parametrize("entry", list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
@pytest.mark.parametrize("abi", ["versioned", "legacy"])
@pytest.mark.parametrize("name, spec, exception, pattern", MALFORMED, ids=_ids(MALFORMED))
def test_malformed_capsule_is_refused_and_released_once(name, spec, exception, pattern, abi, entry):
    managed = dl.ManagedTensor(spec.replace(versioned=abi == "versioned"))
    capsule = managed.capsule()
    _refuse(ENTRY_POINTS[entry], capsule, exception, pattern)
    assert managed.deleted == 1, "the deleter must run exactly once, before the error is raised"
    assert dl.capsule_name(capsule) == f"used_{managed.default_name.decode()}"
    del capsule
    assert managed.deleted == 1, "a consumed capsule must not release the tensor again"
    assert not managed.is_live


@pytest.mark.parametrize("entry", list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
@pytest.mark.parametrize("name, spec, exception, pattern", BAD_VERSIONS, ids=_ids(BAD_VERSIONS))
def test_other_major_versions_are_refused_and_released_once(name, spec, exception, pattern, entry):
    managed = dl.ManagedTensor(spec)
    capsule = managed.capsule()
    _refuse(ENTRY_POINTS[entry], capsule, exception, pattern)
    assert managed.deleted == 1
    del capsule
    assert managed.deleted == 1


@pytest.mark.parametrize(
    "name, spec, exception, pattern", MALFORMED + BAD_VERSIONS, ids=_ids(MALFORMED + BAD_VERSIONS)
)
def test_malformed_tensor_from_a_producer_is_refused_and_released_once(
    name, spec, exception, pattern
):
    # `__dlpack_device__` tells the truth about the CPU so that the capsule itself is checked.
    producer = dl.Producer(spec, device=(dl.CPU, 0))
    _refuse(ad.Tensor.from_dlpack, producer, exception, pattern)
    assert producer.calls == [{"max_version": (1, 3)}]
    assert len(producer.tensors) == 1
    assert producer.deleted == 1


def test_malformed_legacy_tensor_with_null_strides_is_refused():
    managed = dl.ManagedTensor(f32(shape=(2, -3), strides=None, versioned=False))
    _refuse(ad.Tensor.from_dlpack, managed.capsule(), ValueError, r"shape\[1\] is -3")
    assert managed.deleted == 1


def test_the_helper_counts_every_deleter_call_and_releases_unconsumed_capsules():
    """The oracle itself: a second deleter call is counted (so a double free would show), and a
    capsule nobody consumed is released by its destructor exactly once."""
    managed = dl.ManagedTensor(f32())
    deleter = dl._DeleterVersioned(dl.DELETER_VERSIONED_ADDRESS)
    pointer = dl.ctypes.pointer(managed.struct)
    deleter(pointer)
    deleter(pointer)
    assert managed.deleted == 2
    unconsumed = dl.ManagedTensor(f32(versioned=False))
    capsule = unconsumed.capsule()
    assert dl.capsule_name(capsule) == "dltensor"
    del capsule
    assert unconsumed.deleted == 1 and not unconsumed.is_live


# --- capsules that are not ours to consume -------------------------------------------------------


@pytest.mark.parametrize("name", [b"dltensor_wrong", b"DLTENSOR"])
@pytest.mark.parametrize("entry", list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
def test_wrong_capsule_name_is_a_type_error_and_the_capsule_is_left_alone(name, entry):
    managed = dl.ManagedTensor(f32())
    capsule = managed.capsule(name)
    # The name is quoted as written, not as Rust's debug form of an optional string.
    pattern = rf'^the capsule is named "{name.decode()}"; expected a DLPack capsule named'
    with pytest.raises(TypeError, match=pattern):
        ENTRY_POINTS[entry](capsule)
    assert dl.capsule_name(capsule) == name.decode(), "a foreign capsule must not be renamed"
    assert managed.deleted == 0
    del capsule
    assert managed.deleted == 0, "the capsule's own destructor does not know this name"
    managed.reclaim()


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
def test_an_already_consumed_capsule_is_refused(versioned):
    managed = dl.ManagedTensor(f32(versioned=versioned))
    capsule = managed.capsule()
    tensor = ad.Tensor.from_dlpack(capsule)
    with pytest.raises(ValueError, match=r"already been consumed"):
        ad.Tensor.from_dlpack(capsule)
    with pytest.raises(ValueError, match=r"already been consumed"):
        ad.Array.from_dlpack(capsule)
    assert managed.deleted == 0, "the first import still holds the tensor"
    np.testing.assert_array_equal(np.from_dlpack(tensor), np.arange(6, dtype=np.float32))
    del capsule
    assert managed.deleted == 0
    del tensor
    assert managed.deleted == 1


@pytest.mark.parametrize("name", [b"used_dltensor", b"used_dltensor_versioned"])
def test_a_capsule_handed_out_already_used_is_refused_and_never_released(name):
    managed = dl.ManagedTensor(f32(versioned=name == b"used_dltensor_versioned"))
    capsule = managed.capsule(name)
    with pytest.raises(ValueError, match=r"already been consumed"):
        ad.Tensor.from_dlpack(capsule)
    del capsule
    assert managed.deleted == 0
    managed.reclaim()


def test_a_producer_that_hands_out_the_same_capsule_twice_is_refused_the_second_time():
    producer = dl.Producer(f32(), mode="reuse")
    first = ad.Tensor.from_dlpack(producer)
    with pytest.raises(ValueError, match=r"already been consumed"):
        ad.Tensor.from_dlpack(producer)
    assert len(producer.tensors) == 1 and producer.deleted == 0
    del first
    assert producer.deleted == 1
    producer._reused = None
    assert producer.deleted == 1


# --- `__dlpack__` misbehaving --------------------------------------------------------------------


@pytest.mark.parametrize(
    "returned, pattern",
    [
        (lambda p: 42, r"__dlpack__\(\) returned int; expected a PyCapsule"),
        (lambda p: None, r"__dlpack__\(\) returned NoneType; expected a PyCapsule"),
        (lambda p: b"dltensor", r"__dlpack__\(\) returned bytes; expected a PyCapsule"),
        (lambda p: np.arange(3), r"__dlpack__\(\) returned numpy.ndarray; expected a PyCapsule"),
    ],
    ids=["int", "None", "bytes", "ndarray"],
)
def test_dlpack_returning_a_non_capsule_is_a_type_error(returned, pattern):
    producer = dl.Producer(f32(), mode="return", returns=returned)
    with pytest.raises(TypeError, match=pattern) as raised:
        ad.Tensor.from_dlpack(producer)
    assert isinstance(raised.value, ad.ArrowDLPackError)
    assert producer.calls == [{"max_version": (1, 3)}]


def test_dlpack_returning_a_capsule_inside_a_list_is_refused_and_the_producer_cleans_up():
    producer = dl.Producer(f32(), mode="return", returns=lambda p: [p.export()])
    with pytest.raises(TypeError, match=r"__dlpack__\(\) returned list; expected a PyCapsule"):
        ad.Tensor.from_dlpack(producer)
    # The capsule was never consumed: its own destructor released the tensor when the list died.
    assert len(producer.tensors) == 1
    assert producer.deleted == 1


@pytest.mark.parametrize(
    "exception",
    [RuntimeError("producer exploded"), BufferError("producer cannot export to the CPU")],
    ids=["RuntimeError", "BufferError"],
)
def test_dlpack_raising_propagates_the_producer_exception_unchanged(exception):
    producer = dl.Producer(f32(), mode="raise", exception=exception)
    with pytest.raises(type(exception)) as raised:
        ad.Tensor.from_dlpack(producer)
    assert raised.value is exception
    assert producer.calls == [{"max_version": (1, 3)}], "only TypeError is retried"
    assert producer.tensors == []


def test_dlpack_raising_type_error_is_retried_once_without_keywords_then_propagated():
    exception = TypeError("this producer refuses everything")
    producer = dl.Producer(f32(), mode="raise", exception=exception)
    with pytest.raises(TypeError, match=r"refuses everything") as raised:
        ad.Tensor.from_dlpack(producer)
    assert raised.value is exception
    assert producer.calls == [{"max_version": (1, 3)}, {}]


def test_legacy_signature_producer_is_retried_without_keywords():
    producer = dl.Producer(f32(), mode="legacy_signature")
    tensor = ad.Tensor.from_dlpack(producer)
    assert producer.calls == [{}]
    result = np.from_dlpack(tensor)
    np.testing.assert_array_equal(result, np.arange(6, dtype=np.float32))
    assert result.ctypes.data == producer.data_address
    assert len(producer.tensors) == 1 and not producer.tensors[0].spec.versioned
    del tensor, result
    assert producer.deleted == 1


def test_producer_without_dlpack_device_is_accepted():
    producer = dl.LegacyProducer(f32())
    assert not hasattr(producer, "__dlpack_device__")
    tensor = ad.Tensor.from_dlpack(producer)
    np.testing.assert_array_equal(np.from_dlpack(tensor), np.arange(6, dtype=np.float32))
    del tensor
    assert producer.deleted == 1


def test_producer_ignoring_max_version_with_a_legacy_capsule_is_accepted():
    producer = dl.Producer(f32(versioned=False), mode="ignore")
    tensor = ad.Tensor.from_dlpack(producer)
    assert producer.calls == [{"max_version": (1, 3)}]
    result = np.from_dlpack(tensor)
    assert result.ctypes.data == producer.data_address
    np.testing.assert_array_equal(result, np.arange(6, dtype=np.float32))
    del tensor, result
    assert producer.deleted == 1


def test_copy_true_of_cpu_data_is_made_by_the_consumer():
    producer = dl.Producer(f32(), mode="ignore")
    tensor = ad.Tensor.from_dlpack(producer, copy=True)
    # CPU data is not copied by its producer but here, into the memory pool.
    assert producer.calls == [{"max_version": (1, 3)}]
    # The producer shared its memory: the consumer copied and let go at once.
    assert producer.deleted == 1
    result = np.from_dlpack(tensor)
    assert result.ctypes.data != producer.data_address
    np.testing.assert_array_equal(result, np.arange(6, dtype=np.float32))


def test_producer_ignoring_copy_false_is_refused():
    producer = dl.Producer(f32(flags=dl.IS_COPIED), mode="ignore")
    with pytest.raises(BufferError, match=r"copied its data although copy=False"):
        ad.Tensor.from_dlpack(producer, copy=False)
    assert producer.calls == [{"max_version": (1, 3), "copy": False}]
    assert producer.deleted == 1


def test_producer_ignoring_the_version_with_another_minor_is_accepted():
    producer = dl.Producer(f32(version=(1, 99)), mode="ignore")
    tensor = ad.Tensor.from_dlpack(producer)
    np.testing.assert_array_equal(np.from_dlpack(tensor), np.arange(6, dtype=np.float32))
    del tensor
    assert producer.deleted == 1


@pytest.mark.parametrize("entry", list(ENTRY_POINTS), ids=list(ENTRY_POINTS))
def test_object_without_dlpack_is_a_type_error(entry):
    pattern = r"object does not support the DLPack protocol: it has no __dlpack__"
    with pytest.raises(TypeError, match=pattern):
        ENTRY_POINTS[entry](object())


# --- NULL deleters -------------------------------------------------------------------------------


def test_null_deleter_on_a_valid_tensor_imports_and_is_never_called():
    managed = dl.ManagedTensor(f32(null_deleter=True))
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    result = np.from_dlpack(tensor)
    np.testing.assert_array_equal(result, np.arange(6, dtype=np.float32))
    assert result.ctypes.data == managed.data_address
    del tensor, result
    assert managed.deleted == 0
    managed.reclaim()


@pytest.mark.parametrize(
    "spec, exception, pattern",
    [
        (f32(shape=(-1,)), ValueError, r"shape\[0\] is -1"),
        (f32(version=(2, 0)), ValueError, r"unsupported DLPack version 2\.0"),
        (f32(device=(99, 0)), BufferError, r"device_type 99"),
        (f32(versioned=False, dtype=(dl.FLOAT, 32, 2)), ValueError, r"lanes is 2"),
    ],
    ids=["negative_extent", "major_version_2", "unknown_device", "legacy_lanes_2"],
)
def test_null_deleter_on_a_refused_tensor_is_not_called(spec, exception, pattern):
    managed = dl.ManagedTensor(spec.replace(null_deleter=True))
    capsule = managed.capsule()
    _refuse(ad.Tensor.from_dlpack, capsule, exception, pattern)
    del capsule
    assert managed.deleted == 0
    managed.reclaim()


# --- deleters misbehaving ------------------------------------------------------------------------


def test_deleter_that_reenters_arrow_dlpack_is_served():
    inner = dl.Producer(f32())
    seen = []

    def reenter(tensor):
        # Runs inside arrow_dlpack's release of the outer tensor.
        imported = ad.Tensor.from_dlpack(inner)
        seen.append(np.from_dlpack(imported).tolist())

    outer = dl.Producer(f32(), on_delete=reenter)
    tensor = ad.Tensor.from_dlpack(outer)
    del tensor
    assert outer.deleted == 1
    assert seen == [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]]
    assert inner.deleted == 1


def test_deleter_that_raises_is_reported_and_counted_once(monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)

    def explode(tensor):
        raise RuntimeError("deleter exploded")

    producer = dl.Producer(f32(), on_delete=explode)
    tensor = ad.Tensor.from_dlpack(producer)
    del tensor
    assert producer.deleted == 1
    assert [type(report.exc_value) for report in reported] == [RuntimeError]
    # arrow_dlpack goes on working.
    again = dl.Producer(f32())
    assert np.from_dlpack(ad.Tensor.from_dlpack(again))[5] == 5.0
    assert again.deleted == 1
