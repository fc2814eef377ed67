"""Hand-built Arrow C Data Interface producers for hostile-input tests, written with ctypes only.

Every field of an ``ArrowSchema``, ``ArrowArray`` or ``ArrowArrayStream`` can be set to anything,
so tests can hand ``arrow_dlpack`` the malformed structs that real libraries never produce, and
count how often each struct's release callback runs.

- :class:`Schema` and :class:`Array` build one struct (and its children and dictionary, which
  are :class:`Schema` / :class:`Array` objects too); keyword arguments override any field, and
  ``released`` counts the calls of the struct's release callback.
- :class:`Stream` builds an ``ArrowArrayStream`` whose ``get_schema`` and ``get_next`` hand out
  such structs (built on demand from factories, or prebuilt), with knobs for error codes,
  ``get_last_error`` text and NULL callbacks.
- :class:`ArrayProducer` and :class:`StreamProducer` speak the Arrow PyCapsule protocol
  (``__arrow_c_array__`` / ``__arrow_c_stream__``) with capsules made by ``PyCapsule_New``.

Ownership follows the C Data Interface:

- A struct's release callback is a ctypes callback that finds its :class:`Schema` / :class:`Array`
  through ``private_data`` (a key, never dereferenced), counts the call, releases the children
  and the dictionary that are still live (a parent owns them), and sets ``release`` to NULL in
  the struct it was given.
  A consumer may move a struct (copy it and mark the original released) before releasing it, so
  the callback trusts only the struct it is passed, never the address it was built at.
- A capsule's destructor calls the struct's release if it is not NULL (the producer-side
  behaviour of the Arrow PyCapsule interface): a consumer that moved the struct out left a
  released one behind, so the destructor then does nothing.
- Everything a struct points to (strings, pointer arrays, buffers, children) lives in a
  module-level registry for the rest of the process, so a late or repeated release, or a consumer
  that reads a struct after releasing it, still reads memory that exists.
- Pointer arrays are padded with NULL up to the count the struct claims (``n_buffers``,
  ``n_children``), so a consumer that trusts a lying count reads our memory, never past it.

One limit of callbacks written in Python: a capsule destructor must not run while an exception is
propagating (ctypes turns the pending exception into "error return without exception set").
So the producers keep every capsule they hand out (``capsules``) until the test drops the
producer, and tests hold producers in variables during calls that may raise.
Release calls for a key that no struct has are recorded in :data:`STRAY_RELEASES`, and exceptions
inside callbacks in :data:`CALLBACK_ERRORS`; both must stay empty.
"""

from __future__ import annotations

import ctypes
import struct as _struct
from typing import Any, Callable, Iterable, Optional, Sequence, Union

# The ABI, the C API and the registry, re-exported: tests reach them as `_arrow_c_ctypes.X`.
from _arrow_c_registry import *  # noqa: E402,F401,F403
from _arrow_c_registry import (  # noqa: E402,F401
    _CAPSULE_DESTRUCTOR,
    _NAMES,
    _PyCapsule_New,
    _Release,
    _registry,
)


_ALIGN = 64


class Storage:
    """Bytes a buffer pointer points at, 64-byte aligned, kept alive by whoever holds this."""

    def __init__(self, content: bytes):
        self.nbytes = len(content)
        self._raw = (ctypes.c_ubyte * (self.nbytes + _ALIGN))()
        raw = ctypes.addressof(self._raw)
        self.address = (raw + _ALIGN - 1) // _ALIGN * _ALIGN
        ctypes.memmove(self.address, content, self.nbytes)


def _address(value: Any, keep: list) -> Optional[int]:
    """The address a pointer field stores for ``value``, keeping what it points at alive.

    ``None`` is NULL; an ``int`` is stored as it is (garbage included); ``bytes`` are copied into
    fresh storage; a ctypes object gives its own address; an object with ``__array_interface__``
    (numpy) gives its data pointer.
    """
    if value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (bytes, bytearray)):
        storage = Storage(bytes(value))
        keep.append(storage)
        return storage.address
    if isinstance(value, Storage):
        keep.append(value)
        return value.address
    if isinstance(value, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure)):
        keep.append(value)
        return ctypes.addressof(value)
    interface = getattr(value, "__array_interface__", None)
    if interface is not None:
        keep.append(value)
        return interface["data"][0]
    raise TypeError(f"cannot store {type(value).__name__} in a pointer field")


def _string(value: Any, keep: list) -> Optional[int]:
    """A ``const char*`` field: ``str`` is UTF-8 encoded and NUL-terminated, ``bytes`` are
    NUL-terminated as they are (so non-UTF-8 bytes are possible), ``int`` is a raw address."""
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, (bytes, bytearray)):
        buffer = ctypes.create_string_buffer(bytes(value))
        keep.append(buffer)
        return ctypes.addressof(buffer)
    return _address(value, keep)


def _pointer_array(entries: Sequence[Optional[int]], claimed: int, keep: list) -> int:
    """A ``void*[]`` holding ``entries``, padded with NULL to ``claimed`` entries."""
    size = max(len(entries), claimed, 1)
    array = (ctypes.c_void_p * size)(*entries)
    keep.append(array)
    return ctypes.addressof(array)


def encode_metadata(pairs: Union[dict, Iterable[tuple[Any, Any]]]) -> bytes:
    """The C Data Interface metadata encoding: int32 count, then int32 length and bytes for each
    key and value (native byte order). ``str`` is UTF-8 encoded; ``bytes`` stay as they are."""
    items = list(pairs.items()) if isinstance(pairs, dict) else list(pairs)

    def encoded(value: Any) -> bytes:
        return value.encode() if isinstance(value, str) else bytes(value)

    out = _struct.pack("=i", len(items))
    for key, value in items:
        for part in (encoded(key), encoded(value)):
            out += _struct.pack("=i", len(part)) + part
    return out


_DEFAULT: Any = object()


class _Node:
    """What schemas and arrays share: the key, the release count and the capsule."""

    struct: Any
    capsule_name: bytes
    has_release: bool
    parent: Optional["_Node"] = None
    pending_in: Optional["Stream"] = None
    # Whether a consumer could ever see this struct: it was put in a capsule or a stream.
    exposed: bool = False

    @property
    def released(self) -> int:
        """How many times this struct's release callback has run."""
        with _registry.lock:
            return self._released

    @property
    def address(self) -> int:
        return ctypes.addressof(self.struct)

    def owned(self) -> list["_Node"]:
        raise NotImplementedError

    def expected_releases(self) -> int:
        """How many release calls this struct must see once everything holding it is gone:
        1, or 0 when it (or a parent that owns it) has no release callback, it is waiting in a
        stream that nobody can release, or no consumer ever saw it (built but never put in a
        capsule or a stream)."""
        if not self.has_release:
            return 0
        if self.parent is not None:
            return self.parent.expected_releases()
        if self.pending_in is not None:
            return self.pending_in.expected_releases()
        return 1 if self.exposed else 0

    def capsule(self) -> Any:
        """A new capsule over this struct, with the producer's destructor."""
        self.exposed = True
        return _PyCapsule_New(
            self.address, ctypes.addressof(_NAMES[self.capsule_name]), _CAPSULE_DESTRUCTOR
        )


class Schema(_Node):
    """One hand-built ``ArrowSchema``.

    ``format`` and ``name`` are ``str`` (UTF-8), ``bytes`` (as they are, NUL-terminated), an
    ``int`` (a raw address, such as garbage) or ``None`` (NULL). ``metadata`` is a dict, pairs,
    encoded ``bytes`` (see :func:`encode_metadata`) or ``None``. ``children`` are :class:`Schema`
    objects or ``None`` (a NULL child pointer); ``dictionary`` a :class:`Schema` or ``None``.

    Overrides: ``n_children`` (default: ``len(children)``), ``children_array`` (``None`` stores a
    NULL ``children``), ``release=False`` (a NULL release: an already released schema),
    ``dictionary_address`` (a raw ``dictionary`` pointer).
    """

    capsule_name = b"arrow_schema"
    struct_type = ArrowSchema

    def __init__(
        self,
        format: Any,
        *,
        name: Any = "",
        metadata: Any = None,
        flags: int = NULLABLE,
        children: Sequence[Optional["Schema"]] = (),
        dictionary: Optional["Schema"] = None,
        n_children: Optional[int] = None,
        children_array: Any = _DEFAULT,
        dictionary_address: Any = _DEFAULT,
        release: bool = True,
    ):
        self._released = 0
        self._keep: list = []
        self.children = list(children)
        self.dictionary = dictionary
        self.has_release = release
        for child in self.owned():
            child.parent = self
        if metadata is not None and not isinstance(metadata, (bytes, bytearray, int)):
            metadata = encode_metadata(metadata)
        n_children = len(self.children) if n_children is None else n_children
        if children_array is _DEFAULT:
            pointers = [None if child is None else child.address for child in self.children]
            children_address = _pointer_array(pointers, n_children, self._keep)
        else:
            children_address = _address(children_array, self._keep)
        if dictionary_address is _DEFAULT:
            dictionary_address = None if dictionary is None else dictionary.address
        self.key = _registry.register(self)
        self.struct = ArrowSchema(
            format=_string(format, self._keep),
            name=_string(name, self._keep),
            metadata=_address(metadata, self._keep),
            flags=flags,
            n_children=n_children,
            children=children_address,
            dictionary=dictionary_address,
            release=RELEASE_SCHEMA_ADDRESS if release else None,
            private_data=self.key,
        )

    def owned(self) -> list["Schema"]:
        return [node for node in [*self.children, self.dictionary] if node is not None]


class Array(_Node):
    """One hand-built ``ArrowArray``.

    ``buffers`` entries are ``None`` (NULL), ``bytes`` (copied into 64-byte aligned storage), an
    ``int`` (a raw address), a ctypes object or a numpy array (kept alive). ``children`` are
    :class:`Array` objects or ``None`` (a NULL child pointer); ``dictionary`` an :class:`Array`.

    Overrides: ``n_buffers`` / ``n_children`` (default: the list lengths; pointer arrays are
    padded with NULL up to a larger claim), ``buffers_array`` / ``children_array`` (``None``
    stores NULL), ``release=False`` (a NULL release: an already released or moved array),
    ``dictionary_address``.
    """

    capsule_name = b"arrow_array"
    struct_type = ArrowArray

    def __init__(
        self,
        length: int,
        buffers: Sequence[Any],
        *,
        null_count: int = 0,
        offset: int = 0,
        children: Sequence[Optional["Array"]] = (),
        dictionary: Optional["Array"] = None,
        n_buffers: Optional[int] = None,
        n_children: Optional[int] = None,
        buffers_array: Any = _DEFAULT,
        children_array: Any = _DEFAULT,
        dictionary_address: Any = _DEFAULT,
        release: bool = True,
    ):
        self._released = 0
        self._keep: list = []
        self.children = list(children)
        self.dictionary = dictionary
        self.has_release = release
        for child in self.owned():
            child.parent = self
        n_buffers = len(buffers) if n_buffers is None else n_buffers
        n_children = len(self.children) if n_children is None else n_children
        if buffers_array is _DEFAULT:
            pointers = [_address(buffer, self._keep) for buffer in buffers]
            buffers_address = _pointer_array(pointers, n_buffers, self._keep)
        else:
            buffers_address = _address(buffers_array, self._keep)
        if children_array is _DEFAULT:
            pointers = [None if child is None else child.address for child in self.children]
            children_address = _pointer_array(pointers, n_children, self._keep)
        else:
            children_address = _address(children_array, self._keep)
        if dictionary_address is _DEFAULT:
            dictionary_address = None if dictionary is None else dictionary.address
        self.key = _registry.register(self)
        self.struct = ArrowArray(
            length=length,
            null_count=null_count,
            offset=offset,
            n_buffers=n_buffers,
            n_children=n_children,
            buffers=buffers_address,
            children=children_address,
            dictionary=dictionary_address,
            release=RELEASE_ARRAY_ADDRESS if release else None,
            private_data=self.key,
        )

    def owned(self) -> list["Array"]:
        return [node for node in [*self.children, self.dictionary] if node is not None]


# --- Streams -------------------------------------------------------------------------------------


def _move(node: _Node, out: int) -> None:
    """Moves a struct into ``out`` (which the consumer then owns) and marks the original
    released, as the C Data Interface moves structs."""
    ctypes.memmove(out, node.address, ctypes.sizeof(node.struct))
    node.struct.release = None


SchemaSource = Union[Schema, Callable[[], Schema]]
ArraySource = Union[Array, Callable[[], Array]]


class Stream:
    """One hand-built ``ArrowArrayStream``.

    ``schema`` is a :class:`Schema` or a factory of one, called at each ``get_schema`` (a
    prebuilt schema can be handed out once); ``chunks`` are :class:`Array` objects or factories,
    handed out in order by ``get_next``, then the end of the stream (a released array).
    Prebuilt structs never handed out are released with the stream, as a producer frees its
    private data.

    Knobs: ``get_schema_error`` (an errno ``get_schema`` returns), ``get_next_error`` (an
    ``(index, errno)``: ``get_next`` fails instead of handing out chunk ``index``),
    ``last_error`` (what ``get_last_error`` returns after a failure; ``None`` for NULL),
    ``null_get_schema`` / ``null_get_next`` / ``null_get_last_error`` / ``null_release``.

    Counts: ``released`` (release calls), ``get_schema_calls``, ``get_next_calls``,
    ``get_last_error_calls``; ``schemas`` and ``arrays`` are the structs handed out.
    """

    capsule_name = b"arrow_array_stream"
    struct_type = ArrowArrayStream

    def __init__(
        self,
        schema: SchemaSource,
        chunks: Sequence[ArraySource] = (),
        *,
        get_schema_error: Optional[int] = None,
        get_next_error: Optional[tuple[int, int]] = None,
        last_error: Optional[bytes] = b"hostile producer failed on purpose",
        null_get_schema: bool = False,
        null_get_next: bool = False,
        null_get_last_error: bool = False,
        null_release: bool = False,
    ):
        self._released = 0
        self.schema_source = schema
        self.chunk_sources = list(chunks)
        self.get_schema_error = get_schema_error
        self.get_next_error = get_next_error
        self._last_error_text = (
            None if last_error is None else ctypes.create_string_buffer(last_error)
        )
        self._failed = False
        self.has_release = not null_release
        self.get_schema_calls = 0
        self.get_next_calls = 0
        self.get_last_error_calls = 0
        self.schemas: list[Schema] = []
        self.arrays: list[Array] = []
        self._next = 0
        self._registry = _registry
        self._prebuilt = [
            source for source in [schema, *self.chunk_sources] if isinstance(source, _Node)
        ]
        for source in self._prebuilt:
            source.pending_in = self
        self.key = _registry.register(self)
        self.struct = ArrowArrayStream(
            get_schema=None if null_get_schema else GET_SCHEMA_ADDRESS,
            get_next=None if null_get_next else GET_NEXT_ADDRESS,
            get_last_error=None if null_get_last_error else GET_LAST_ERROR_ADDRESS,
            release=None if null_release else RELEASE_STREAM_ADDRESS,
            private_data=self.key,
        )

    @property
    def released(self) -> int:
        with _registry.lock:
            return self._released

    @property
    def address(self) -> int:
        return ctypes.addressof(self.struct)

    def expected_releases(self) -> int:
        return 1 if self.has_release else 0

    def capsule(self) -> Any:
        return _PyCapsule_New(
            self.address, ctypes.addressof(_NAMES[self.capsule_name]), _CAPSULE_DESTRUCTOR
        )

    def _hand_out(self, source: Any, out: int) -> _Node:
        node = source() if callable(source) and not isinstance(source, _Node) else source
        if node.struct.release is None and node.has_release:
            raise RuntimeError("a prebuilt struct can be handed out only once")
        node.pending_in = None
        node.exposed = True
        _move(node, out)
        return node

    def get_schema(self, out: int) -> int:
        self.get_schema_calls += 1
        if self.get_schema_error is not None:
            self._failed = True
            return self.get_schema_error
        self.schemas.append(self._hand_out(self.schema_source, out))
        return 0

    def get_next(self, out: int) -> int:
        self.get_next_calls += 1
        if self.get_next_error is not None and self.get_next_error[0] == self._next:
            self._failed = True
            return self.get_next_error[1]
        if self._next >= len(self.chunk_sources):
            ctypes.memset(out, 0, ctypes.sizeof(ArrowArray))  # released: the end of the stream
            return 0
        source = self.chunk_sources[self._next]
        self._next += 1
        self.arrays.append(self._hand_out(source, out))
        return 0

    def get_last_error(self) -> Optional[int]:
        self.get_last_error_calls += 1
        if not self._failed or self._last_error_text is None:
            return None
        return ctypes.addressof(self._last_error_text)

    def release(self) -> None:
        """The stream's own release: counted, and prebuilt structs never handed out (the
        stream's private data) released with it. Reaches everything through ``self``, as the
        registry's callbacks do."""
        registry = self._registry
        with registry.lock:
            self._released += 1
        for source in self._prebuilt:
            if source.pending_in is self and source.struct.release:
                source.pending_in = None
                source.exposed = True
                registry.release(source.struct_type, registry.addressof(source.struct))


# --- Producers -----------------------------------------------------------------------------------


class ArrayProducer:
    """An object with ``__arrow_c_array__`` that hands out capsules over one schema and array.

    Every call returns new capsules over the same structs (a second call therefore hands out an
    array capsule whose struct a consumer has already moved out). ``capsules`` keeps every
    capsule handed out, so that none dies while an exception propagates.
    """

    def __init__(self, schema: Schema, array: Array):
        self.schema = schema
        self.array = array
        self.capsules: list[Any] = []
        self.calls: list[Any] = []

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        self.calls.append(requested_schema)
        capsules = (self.schema.capsule(), self.array.capsule())
        self.capsules.extend(capsules)
        return capsules

    def __arrow_c_schema__(self) -> Any:
        capsule = self.schema.capsule()
        self.capsules.append(capsule)
        return capsule


class StreamProducer:
    """An object with ``__arrow_c_stream__`` that hands out a capsule over one stream."""

    def __init__(self, stream: Stream):
        self.stream = stream
        self.capsules: list[Any] = []
        self.calls: list[Any] = []

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        self.calls.append(requested_schema)
        capsule = self.stream.capsule()
        self.capsules.append(capsule)
        return capsule


# --- Building blocks for valid data --------------------------------------------------------------


def validity(valid: Sequence[bool]) -> bytes:
    """A validity bitmap (least significant bit first), padded to whole bytes."""
    out = bytearray((len(valid) + 7) // 8)
    for index, bit in enumerate(valid):
        if bit:
            out[index // 8] |= 1 << (index % 8)
    return bytes(out)


def packed(code: str, values: Sequence[Any]) -> bytes:
    """``values`` packed little-endian with the :mod:`struct` code ``code`` (``"i"``, ``"q"``,
    ``"d"``, ...)."""
    return _struct.pack(f"<{len(values)}{code}", *values)


def int32_array(values: Sequence[Optional[int]], **overrides: Any) -> Array:
    """A valid int32 array (``None`` values are nulls), with ``overrides`` applied."""
    nulls = sum(value is None for value in values)
    bitmap = validity([value is not None for value in values]) if nulls else None
    data = packed("i", [0 if value is None else value for value in values])
    fields: dict[str, Any] = dict(null_count=nulls)
    fields.update(overrides)
    buffers = fields.pop("buffers", [bitmap, data])
    return Array(fields.pop("length", len(values)), buffers, **fields)


def utf8_array(values: Sequence[Optional[str]], **overrides: Any) -> Array:
    """A valid utf8 (``"u"``) array, with ``overrides`` applied."""
    nulls = sum(value is None for value in values)
    bitmap = validity([value is not None for value in values]) if nulls else None
    encoded = [b"" if value is None else value.encode() for value in values]
    offsets = [0]
    for item in encoded:
        offsets.append(offsets[-1] + len(item))
    fields: dict[str, Any] = dict(null_count=nulls)
    fields.update(overrides)
    buffers = fields.pop("buffers", [bitmap, packed("i", offsets), b"".join(encoded) or b"\0"])
    return Array(fields.pop("length", len(values)), buffers, **fields)


def string_view_buffers(values: Sequence[str]) -> list[Any]:
    """The buffers of a valid utf8 view (``"vu"``) array without nulls: no validity, the views
    (strings of up to 12 bytes inline, longer ones in one variadic data buffer), the variadic
    buffers and the buffer of their sizes."""
    views = b""
    data = b""
    for value in values:
        item = value.encode()
        if len(item) <= 12:
            views += _struct.pack("<i", len(item)) + item.ljust(12, b"\0")
        else:
            views += _struct.pack("<i4sii", len(item), item[:4], 0, len(data))
            data += item
    variadic = [data] if data else []
    return [None, views, *variadic, packed("q", [len(buffer) for buffer in variadic])]


def string_view_array(values: Sequence[str], **overrides: Any) -> Array:
    """A valid utf8 view (``"vu"``) array without nulls, with ``overrides`` applied."""
    fields: dict[str, Any] = dict(buffers=string_view_buffers(values))
    fields.update(overrides)
    return Array(fields.pop("length", len(values)), **fields)
