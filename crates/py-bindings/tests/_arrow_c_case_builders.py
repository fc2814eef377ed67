"""The building blocks of the hostile Arrow C Data Interface cases in `_arrow_c_cases.py`: the
case and release-count records, and builders of valid schema and array pairs that a case then
spoils one field of.

The tests are not a package, so `conftest.py` loads this module by path, after `_arrow_c_ctypes`
and before `_arrow_c_cases`.
"""

from typing import Any, Callable, NamedTuple, Optional, Sequence

import _arrow_c_ctypes as ac

I64_MAX = 2**63 - 1

I32_MAX = 2**31 - 1
#: A pointer that would crash whoever follows it (the first page is never mapped).
GARBAGE = 0x10

#: How an Arrow chunk handed out by a stream may be named in a message: ``ArrowArray``, possibly
#: followed by a qualifier such as ``(chunk 2)`` or ``[2]``.
CHUNK = r"ArrowArray(?:\s*\([^)]*\)|\[\d+\])?"


class Releases(NamedTuple):
    """The release calls each struct of a case must have seen once the call has raised and the
    producer is gone: the schema (the capsule's, or each one ``get_schema`` handed out), the
    array (the capsule's, or each one ``get_next`` handed out or still held) and the stream."""

    schema: int = 1
    array: int = 1
    stream: int = 1


class ArrowCase(NamedTuple):
    """One hostile Arrow C input.

    ``build()`` gives a ``(Schema, Array)`` pair (served as an ``__arrow_c_array__`` capsule pair
    and, unless ``transports`` says otherwise, as a one-chunk ``__arrow_c_stream__``) or a
    :class:`Stream`. ``field`` is a regex on the field path the message must name (``ArrowArray``
    at its start also matches a stream's chunk qualifier, see :data:`CHUNK`).
    ``verify(built)``, when given, checks what the producer saw (calls made, structs handed out).
    """

    id: str
    build: Callable[[], Any]
    exception: type
    field: str
    released: Releases = Releases()
    transports: tuple[str, ...] = ("array", "stream")
    verify: Optional[Callable[[Any], None]] = None


def i32(values: Sequence[Optional[int]] = (1, None, 3), **overrides: Any) -> ac.Array:
    return ac.int32_array(values, **overrides)


def int32_pair(**overrides: Any) -> tuple[ac.Schema, ac.Array]:
    """A valid int32 schema with ``overrides`` applied to the array."""
    return ac.Schema("i"), i32(**overrides)


def int32_schema_with(**overrides: Any) -> tuple[ac.Schema, ac.Array]:
    """``overrides`` applied to an int32 schema over a valid array."""
    return ac.Schema("i", **overrides), i32()


def struct_pair(
    schema: Optional[dict] = None, array: Optional[dict] = None, b: Optional[dict] = None
) -> tuple[ac.Schema, ac.Array]:
    """``struct<a: int32, b: utf8>`` of 3 rows, with overrides for the schema, the array and
    the array's child ``b``."""
    fields = dict(children=[ac.Schema("i", name="a"), ac.Schema("u", name="b")])
    fields.update(schema or {})
    children = [i32(), ac.utf8_array(["x", "yy", None], **(b or {}))]
    arrays = dict(children=children)
    arrays.update(array or {})
    return ac.Schema("+s", **fields), ac.Array(3, [None], **arrays)


def fixed_size_list_pair(
    schema: Optional[dict] = None, array: Optional[dict] = None, size: int = 2
) -> tuple[ac.Schema, ac.Array]:
    """``fixed_size_list<item: int32>[2]`` of 3 rows ([1, 2], [3, 4], [5, 6]), with overrides."""
    fields = dict(children=[ac.Schema("i", name="item")])
    fields.update(schema or {})
    arrays = dict(children=[i32(list(range(1, 3 * size + 1)))])
    arrays.update(array or {})
    return ac.Schema(f"+w:{size}", **fields), ac.Array(3, [None], **arrays)


def list_pair(
    schema: Optional[dict] = None, array: Optional[dict] = None
) -> tuple[ac.Schema, ac.Array]:
    """``list<item: int64>`` of 2 rows ([1, 2], [3]), with overrides."""
    fields = dict(children=[ac.Schema("l", name="item")])
    fields.update(schema or {})
    values = ac.Array(3, [None, ac.packed("q", [1, 2, 3])])
    buffers = [None, ac.packed("i", [0, 2, 3])]
    arrays = dict(children=[values])
    arrays.update(array or {})
    return ac.Schema("+l", **fields), ac.Array(2, arrays.pop("buffers", buffers), **arrays)


def run_end_encoded_pair(
    schema: Optional[dict] = None, array: Optional[dict] = None
) -> tuple[ac.Schema, ac.Array]:
    """``run_end_encoded<run_ends: int32, values: double>`` of 3 rows ([1.5, 1.5, 2.5])."""
    fields = dict(
        children=[ac.Schema("i", name="run_ends", flags=0), ac.Schema("g", name="values")]
    )
    fields.update(schema or {})
    run_ends = ac.Array(2, [None, ac.packed("i", [2, 3])])
    values = ac.Array(2, [None, ac.packed("d", [1.5, 2.5])])
    arrays = dict(children=[run_ends, values])
    arrays.update(array or {})
    return ac.Schema("+r", flags=0, **fields), ac.Array(3, [], **arrays)


def dictionary_pair(
    schema: Optional[dict] = None, array: Optional[dict] = None, values: Optional[dict] = None
) -> tuple[ac.Schema, ac.Array]:
    """``dictionary<values=utf8, indices=int8>`` of 3 rows (["b", "a", "b"]), with overrides."""
    fields = dict(dictionary=ac.Schema("u"))
    fields.update(schema or {})
    arrays = dict(dictionary=ac.utf8_array(["a", "b"], **(values or {})))
    arrays.update(array or {})
    return ac.Schema("c", **fields), ac.Array(3, [None, ac.packed("b", [1, 0, 1])], **arrays)


def int32_stream(chunks: Sequence[Any] = (), **knobs: Any) -> ac.Stream:
    """A stream of int32 chunks built on demand (default: two good ones)."""
    chunks = chunks or [lambda: i32([1, 2]), lambda: i32([3, None])]
    return ac.Stream(lambda: ac.Schema("i"), chunks, **knobs)


def released_garbage_schema() -> ac.Schema:
    """An already released schema whose every pointer would crash whoever followed it."""
    return ac.Schema(
        GARBAGE,
        name=GARBAGE,
        metadata=GARBAGE,
        n_children=5,
        children_array=GARBAGE,
        dictionary_address=GARBAGE,
        release=False,
    )


def released_garbage_array(length: int = 3) -> ac.Array:
    """An already released (or moved) array whose every pointer would crash whoever followed
    it."""
    return ac.Array(
        length,
        [],
        n_buffers=7,
        n_children=5,
        buffers_array=GARBAGE,
        children_array=GARBAGE,
        dictionary_address=GARBAGE,
        release=False,
    )


def expect_releases(**counts: int) -> Callable[[Any], None]:
    """A ``verify`` that compares a stream's call counts (``get_schema_calls``, ...)."""

    def verify(stream: ac.Stream) -> None:
        found = {name: getattr(stream, name) for name in counts}
        assert found == counts, f"the stream saw {found}; expected {counts}"

    return verify


def metadata_with_lengths(*lengths: int) -> bytes:
    """Metadata whose header says ``lengths[0]`` entries and then key and value lengths."""
    return ac.packed("i", lengths) + b"\0" * 64


NO_SCHEMA = Releases(schema=0)
NO_ARRAY = Releases(array=0)
STREAM_ONLY = ("stream",)
