"""Hostile Arrow C Data Interface producers: malformed schemas, arrays and streams, built by hand.

Every case of :data:`_arrow_c_cases.ARROW_C_CASES` checks, for every import entry point and both
transports (an ``__arrow_c_array__`` capsule pair, and the same structs served one chunk at a time
by ``__arrow_c_stream__``):

- the documented exception (``ValueError`` for a malformed struct, ``TypeError`` for a well-formed
  format arrow-rs does not support), from this package, with a message naming the field by its
  path (``ArrowArray.children[1].length``);
- release counts: what we took (an array moved out of its capsule, a stream, what a stream handed
  out) is released exactly once by the time the call has raised; a schema capsule is only
  borrowed, so its release runs once, when the capsule dies; a struct handed out with a NULL
  release is never released; nothing is released twice, children included;
- the process alive (the run goes on to the next case).

The contract is docs/contract.md (the Arrow C Data Interface defences), and docs/reliability.md
lists the review whose findings these cases keep fixed. The good cases prove the helper itself
right: pyarrow reads the same hand-built structs as the values they were built to hold.

Producers keep their capsules until the test drops them: the helper's capsule destructor is Python
code, which cannot run while an exception propagates (see the helper).
"""

import gc
import re

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad

# `conftest.py` loads the helpers by path and registers them (the tests are not a package).
import _arrow_c_ctypes as ac  # noqa: E402
from _arrow_c_cases import ARROW_C_CASES, CHUNK  # noqa: E402
from _arrow_c_good_cases import GOOD_ARROW_C_CASES  # noqa: E402

# The entry points that import Arrow C data; all go through the same import and its checks.
ENTRY_POINTS = {
    "array": ad.array,
    "column_tensors": ad.column_tensors,
    "Tensor.from_arrow": ad.Tensor.from_arrow,
}

TRANSPORT_CASES = [
    pytest.param(case, transport, id=f"{case.id}-{transport}")
    for case in ARROW_C_CASES
    for transport in case.transports
]


def producer_for(built, transport):
    """The producer serving a case's structs: a capsule pair, or a stream."""
    if isinstance(built, ac.Stream):
        assert transport == "stream"
        return ac.StreamProducer(built)
    schema, array = built
    if transport == "array":
        return ac.ArrayProducer(schema, array)
    return ac.StreamProducer(ac.Stream(schema, [array]))


def field_regex(case, transport):
    """The case's field-path regex; a chunk handed out by a stream may carry a qualifier
    (``ArrowArray (chunk 0).n_buffers``)."""
    if transport == "stream" and case.field.startswith(r"ArrowArray\."):
        return CHUNK + case.field[len("ArrowArray") :]
    return case.field


def roots(producer):
    """The structs of a producer by role: ``{"schema": [...], "array": [...], "stream": [...]}``
    (for a stream, the schemas and arrays it handed out or still holds)."""
    if isinstance(producer, ac.ArrayProducer):
        return {"schema": [producer.schema], "array": [producer.array], "stream": []}
    stream = producer.stream
    held = [source for source in stream.chunk_sources if isinstance(source, ac.Array)]
    arrays = stream.arrays + [array for array in held if array not in stream.arrays]
    schemas = list(stream.schemas)
    if isinstance(stream.schema_source, ac.Schema) and stream.schema_source not in schemas:
        schemas.append(stream.schema_source)
    return {"schema": schemas, "array": arrays, "stream": [stream]}


def run_case(case, transport, entry):
    """Runs one hostile case through ``entry``; returns the producer, the structs built and
    the exception raised."""
    mark = ac.mark()
    built = case.build()
    producer = producer_for(built, transport)
    with pytest.raises(case.exception, match=field_regex(case, transport)) as raised:
        ENTRY_POINTS[entry](producer)
    return producer, ac.built_since(mark), raised.value


def assert_released_when_raised(producer):
    """What we took is released exactly once by the time the call raised; what we borrowed is
    not released yet."""
    if isinstance(producer, ac.ArrayProducer):
        schema, array = producer.schema, producer.array
        assert schema.released == 0, "a schema capsule is borrowed: its capsule releases it"
        if array.has_release:
            taken = array.struct.release is None
            assert array.released == (1 if taken else 0), (
                f"the array was {'taken' if taken else 'left in its capsule'} and released "
                f"{array.released} times; expected {1 if taken else 0}"
            )
    else:
        for node in [producer.stream, *producer.stream.schemas, *producer.stream.arrays]:
            assert node.released == node.expected_releases(), (
                f"{type(node).__name__} taken from the stream released {node.released} times "
                f"before the error was raised; expected {node.expected_releases()}"
            )


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("case, transport", TRANSPORT_CASES)
def test_hostile_arrow_c_input_is_refused_and_released_once(case, transport, entry):
    stray, errors = len(ac.STRAY_RELEASES), len(ac.CALLBACK_ERRORS)
    producer, nodes, error = run_case(case, transport, entry)
    assert isinstance(error, ad.ArrowDLPackError), type(error).__mro__
    assert_released_when_raised(producer)
    if case.verify is not None:
        case.verify(producer.stream)
    by_role = roots(producer)
    del producer, error
    gc.collect()
    for role, expected in case.released._asdict().items():
        for node in by_role[role]:
            assert node.released == expected, (
                f"the {role} was released {node.released} times; expected {expected}"
            )
    for node in nodes:
        assert node.released == node.expected_releases(), (
            f"{type(node).__name__} {node.key} released {node.released} times; "
            f"expected {node.expected_releases()}"
        )
    assert ac.STRAY_RELEASES[stray:] == [], "a release callback ran for a struct already released"
    assert ac.CALLBACK_ERRORS[errors:] == []


def test_the_table_covers_at_least_40_malformed_inputs():
    assert len(ARROW_C_CASES) >= 40
    assert {case.exception for case in ARROW_C_CASES} == {ValueError, TypeError}


def test_a_refused_schema_leaves_the_array_capsule_to_release_it_once():
    # A schema refused before the array is read: whether or not the import moved the array out,
    # it is released exactly once, by the import or by its capsule.
    schema = ac.Schema(None)
    array = ac.int32_array([1, 2, 3])
    producer = ac.ArrayProducer(schema, array)
    with pytest.raises(ValueError, match=r"ArrowSchema\.format"):
        ad.array(producer)
    del producer
    gc.collect()
    assert (schema.released, array.released) == (1, 1)


def test_get_last_error_text_reaches_the_message():
    stream = ac.Stream(
        lambda: ac.Schema("i"),
        [lambda: ac.int32_array([1])],
        get_next_error=(1, ac.EIO),
        last_error=b"the disk is on fire",
    )
    producer = ac.StreamProducer(stream)
    with pytest.raises(ValueError, match=r"ArrowArrayStream\.get_next.*the disk is on fire"):
        ad.array(producer)
    assert stream.get_last_error_calls >= 1
    assert stream.released == 1
    assert [array.released for array in stream.arrays] == [1]


def test_an_array_capsule_cannot_be_imported_twice():
    # The second call hands out a capsule over the struct the first import moved out.
    producer = ac.ArrayProducer(ac.Schema("i"), ac.int32_array([1, 2, 3]))
    first = ad.array(producer)
    with pytest.raises(ValueError, match=r"ArrowArray\.release"):
        ad.array(producer)
    assert first.to_pylist() == [1, 2, 3]
    assert producer.array.released == 0
    del first
    gc.collect()
    assert producer.array.released == 1


# --- The helper proven against pyarrow ----------------------------------------------------------


@pytest.mark.parametrize("case", GOOD_ARROW_C_CASES, ids=[case.id for case in GOOD_ARROW_C_CASES])
def test_pyarrow_reads_the_hand_built_array_as_built(case):
    schema, array = case.build()
    producer = ac.ArrayProducer(schema, array)
    result = pa.array(producer)
    assert result.to_pylist() == case.values
    result.validate(full=True)
    del producer, result
    gc.collect()
    assert (schema.released, array.released) == (1, 1)


@pytest.mark.parametrize("case", GOOD_ARROW_C_CASES, ids=[case.id for case in GOOD_ARROW_C_CASES])
@pytest.mark.parametrize("transport", ["array", "stream"])
def test_good_hand_built_array_imports_as_pyarrow_reads_it(case, transport):
    mark = ac.mark()
    expected = pa.array(ac.ArrayProducer(*case.build()))
    producer = producer_for(case.build(), transport)
    imported = ad.array(producer)
    assert len(imported) == len(expected)
    assert imported.null_count == expected.null_count
    # Back to pyarrow through our export (`to_pylist` does not cover run-end encoded and
    # dictionary arrays): the same type and values as pyarrow read from the structs.
    roundtrip = pa.array(imported)
    assert roundtrip.equals(expected), (roundtrip, expected)
    assert roundtrip.to_pylist() == case.values
    del roundtrip
    del producer, imported, expected
    gc.collect()
    for node in ac.built_since(mark):
        assert node.released == node.expected_releases() == 1


def test_good_stream_of_several_chunks_imports_as_pyarrow_reads_it():
    def stream():
        return ac.Stream(
            lambda: ac.Schema("u", name="s"),
            [
                lambda: ac.utf8_array(["a", None]),
                lambda: ac.utf8_array([]),
                lambda: ac.utf8_array(["ccc"]),
            ],
        )

    expected = pa.chunked_array(ac.StreamProducer(stream()))
    source = stream()
    imported = ad.array(ac.StreamProducer(source))
    assert imported.to_pylist() == expected.to_pylist() == ["a", None, "ccc"]
    assert imported.num_chunks == expected.num_chunks == 3
    assert source.released == 1 and [schema.released for schema in source.schemas] == [1]
    assert [array.released for array in source.arrays] == [0, 0, 0]
    del imported
    gc.collect()
    assert [array.released for array in source.arrays] == [1, 1, 1]


def test_good_array_is_released_once_after_the_last_reference_dies():
    schema = ac.Schema("g")
    array = ac.Array(4, [None, ac.packed("d", [1.0, 2.0, 3.0, 4.0])])
    producer = ac.ArrayProducer(schema, array)
    imported = ad.array(producer)
    del producer
    gc.collect()
    assert schema.released == 1, "the schema capsule died with the producer"
    assert array.released == 0, "the imported array still holds the producer's memory"
    # More references to the same memory: an Array imported from ours, and a numpy view.
    again = ad.array(imported)
    view = np.from_dlpack(imported)
    np.testing.assert_array_equal(view, [1.0, 2.0, 3.0, 4.0])
    del imported
    gc.collect()
    assert array.released == 0
    del again
    gc.collect()
    assert array.released == 0, "the numpy view still reads the producer's memory"
    np.testing.assert_array_equal(view, [1.0, 2.0, 3.0, 4.0])
    del view
    gc.collect()
    assert array.released == 1
    assert schema.released == 1


def test_the_helper_counts_every_release_and_moves_like_a_consumer():
    """The oracle itself: a parent's release releases its live children once, a struct handed
    out by a stream is released through its moved copy, and a stray release is recorded."""
    child = ac.int32_array([1])
    parent = ac.Array(1, [None], children=[child])
    release = ac._Release(parent.struct.release)
    release(parent.address)
    assert (parent.released, child.released) == (1, 1)
    assert parent.struct.release is None and child.struct.release is None
    stray = len(ac.STRAY_RELEASES)
    orphan = ac.ArrowArray(private_data=2**40, release=ac.RELEASE_ARRAY_ADDRESS)
    ac._Release(ac.RELEASE_ARRAY_ADDRESS)(ac.ctypes.addressof(orphan))
    assert ac.STRAY_RELEASES[stray:] == [2**40]
    # The stray was made on purpose: forget it, so that the suites that assert that no stray
    # release ever happened (test_device_arrow.py's last test) pass in any order.
    del ac.STRAY_RELEASES[stray:]
    assert orphan.release is None
    unconsumed = ac.int32_array([1, 2])
    capsule = unconsumed.capsule()
    del capsule
    assert unconsumed.released == 1


def test_field_regexes_are_valid():
    for case in ARROW_C_CASES:
        for transport in case.transports:
            re.compile(field_regex(case, transport))
