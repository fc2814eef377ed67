"""Type stubs of the native module ``arrow_dlpack._arrow_dlpack``.

Written by hand and checked against the built module by ``mypy.stubtest``.
"""

import builtins
import os
from typing import (
    Any,
    ClassVar,
    NamedTuple,
    Optional,
    Sequence,
    SupportsIndex,
    Tuple,
    Union,
    overload,
)

from typing_extensions import CapsuleType, Self, disjoint_base, final

__all__ = [
    "Array",
    "ArrowDLPackBufferError",
    "ArrowDLPackError",
    "ArrowDLPackTypeError",
    "ArrowDLPackValueError",
    "DecodedImages",
    "FixedShapeTensorArray",
    "ListArray",
    "Tensor",
    "VariableShapeTensorArray",
    "__version__",
    "_Batches",
    "_IMAGE_SPEC_DEFAULTS",
    "_array_from_ipc",
    "_check_options",
    "_collate",
    "_exchange_calls",
    "_merge_states",
    "_tensor_from_parts",
    "_testing_record_device_runtime",
    "_tokenize_column",
    "array",
    "column_tensors",
    "decode_images",
    "memory_pool_stats",
    "release_unused_memory",
    "set_memory_pool_decay_ms",
    "set_memory_pool_limit",
    "tokenize",
]
__version__: str

_Device = Union[None, str, Tuple[int, int]]

class ArrowDLPackError(Exception):
    """Base class of every exception raised by arrow_dlpack."""

class ArrowDLPackTypeError(ArrowDLPackError, TypeError):
    """Data that DLPack cannot carry (nulls, an unsupported type), or an object with no DLPack or
    Arrow protocol."""

class ArrowDLPackValueError(ArrowDLPackError, ValueError):
    """A tensor or array that cannot become the requested object, or nulls refused by
    to_tensor()."""

class ArrowDLPackBufferError(ArrowDLPackError, BufferError):
    """A device other than the CPU, a stream, or copy=False when a copy is needed."""

def array(obj: Any) -> Union[Array, FixedShapeTensorArray, VariableShapeTensorArray, ListArray, Tensor]:
    """Imports any object with ``__arrow_c_array__`` or ``__arrow_c_stream__`` (pyarrow Array and
    ChunkedArray, polars Series, nanoarrow, arro3, ...) without copying.

    An ``arrow.fixed_shape_tensor`` column gives a :class:`FixedShapeTensorArray`, an
    ``arrow.variable_shape_tensor`` column a :class:`VariableShapeTensorArray` (its rows checked
    against their shapes: ArrowDLPackValueError for storage that lies); a ``list``,
    ``large_list``, ``list_view`` or ``large_list_view`` column a :class:`ListArray`.
    A stream of several chunks keeps its chunks; they are concatenated only when an export needs
    one array and copying is allowed.

    ``__arrow_c_device_array__`` and ``__arrow_c_device_stream__`` are asked instead when the
    object has no CPU protocol or its ``__dlpack_device__`` is not the CPU. CPU data gives an
    :class:`Array`; a fixed-width numeric, fixed-size-list or ``arrow.fixed_shape_tensor``
    column on another device gives a device :class:`Tensor` (never read, the producer's sync
    event kept for ``__dlpack__(stream=...)``); other device columns, nulls that would have to be
    counted in device memory and several device chunks raise ArrowDLPackBufferError.

    Raises ArrowDLPackTypeError when ``obj`` has none of these methods.
    """

def column_tensors(
    obj: Any, /, *, allow_nulls: bool = False, copy: Optional[bool] = None
) -> dict[str, Tensor]:
    """One tensor per column of a table, record batch or struct array (anything with
    ``__arrow_c_stream__`` or ``__arrow_c_array__`` of struct type: pyarrow Table and
    RecordBatch, polars DataFrame, ...), keyed by column name in column order, zero-copy.

    Primitive columns give 1-D tensors, fixed-size list columns ``(num_rows, l1, ...)``,
    ``arrow.fixed_shape_tensor`` columns ``(num_rows, *shape)`` in their logical order.

    ``copy=None`` concatenates a stream of several record batches and unpacks boolean columns
    into ``bool`` tensors (the copies ``Array.__dlpack__`` makes too) and shares everything else;
    ``copy=False`` refuses those copies; ``copy=True`` gives every column as a fresh row-major
    copy.

    Raises ArrowDLPackValueError for nulls unless ``allow_nulls=True`` (null slots then hold
    unspecified values) and for duplicate column names; ArrowDLPackTypeError for a column type
    with no tensor layout (strings, timestamps, ...; booleans with ``copy=False``) or an object
    that is not a table; ArrowDLPackBufferError for several record batches with
    ``copy=False``.
    """

class DecodedImages(NamedTuple):
    """What :func:`decode_images` returns, whatever its options."""

    images: Tensor
    """``(B, C, H, W)`` (``layout="NCHW"``) or ``(B, H, W, C)`` (``"NHWC"``), ``uint8`` or
    ``float32``: one image per kept row, row-major, writable."""
    sizes: Tensor
    """``(B, 2)`` ``int32``: each kept image's height and width as decoded, after its EXIF
    orientation."""
    rows: Tensor
    """``(B,)`` ``int64``: the index of each kept row in the column, increasing (every row
    unless ``on_error="skip"`` dropped some)."""

_IMAGE_SPEC_DEFAULTS: dict[str, Any]

def decode_images(
    column: Any,
    size: Union[int, Tuple[int, int]],
    *,
    resize: Optional[int] = None,
    crop: str = "center",
    scale: Tuple[float, float] = (0.08, 1.0),
    ratio: Tuple[float, float] = (0.75, 1.3333333333333333),
    pad_value: int = 0,
    hflip: float = 0.0,
    mode: str = "RGB",
    layout: str = "NCHW",
    dtype: str = "uint8",
    mean: Optional[Sequence[float]] = None,
    std: Optional[Sequence[float]] = None,
    interpolation: str = "bilinear",
    exif_transpose: bool = True,
    on_error: str = "raise",
    max_pixels: Optional[int] = 89478485,
    seed: Optional[int] = None,
    threads: Optional[int] = None,
    image_root: Optional[str] = None,
    name: Optional[str] = None,
) -> DecodedImages:
    """Decodes a column of encoded images into one tensor, on Rust threads with the GIL released.

    ``column`` is anything with ``__arrow_c_stream__`` or ``__arrow_c_array__`` (a pyarrow
    Array or ChunkedArray, a polars Series, a column of a Hugging Face dataset's table, an
    :class:`Array`) of type ``binary``, ``large_binary`` or ``binary_view``, or a struct with a
    ``bytes`` field of one of these and an optional ``path`` string field (Hugging Face's
    ``Image``): a row whose bytes are null is read from its path, relative to ``image_root``
    (the current directory by default). JPEG (baseline, progressive, greyscale, CMYK), PNG
    (palette, greyscale, 16-bit, alpha), WebP (lossy, lossless), GIF and BMP (first frame).

    Each image is converted to ``mode`` (``"RGB"``, ``"L"``, ``"RGBA"``) as PIL's ``convert``
    does, turned upright by its EXIF orientation (``exif_transpose``), and resized and cropped
    to ``size`` (an int for a square, or ``(height, width)``): ``crop="center"`` scales the
    shorter side to ``resize`` (default: ``size``'s shorter side) and keeps the centre window,
    ``"random"`` a window at a random place, ``"random_resized"`` is torchvision's
    ``RandomResizedCrop`` (``scale``, ``ratio``), ``"none"`` scales straight to ``size``,
    ``"pad"`` fits the whole image inside ``size`` and fills the rest with ``pad_value``.
    ``interpolation`` is ``"bilinear"``, ``"bicubic"``, ``"lanczos"`` (antialiased when
    shrinking, as PIL) or ``"nearest"``; ``hflip`` is the probability of a horizontal flip.
    Random crops and flips draw from ``seed`` and the row's index, so a call is reproducible.
    ``dtype="float32"`` gives values / 255, then ``(x - mean) / std`` per channel when both are
    given. ``max_pixels`` (``None``: no limit) refuses larger images from their header, before
    any pixel is allocated. ``threads`` defaults to the machine's cores; ``name`` names the
    column in errors (default: the Arrow field's name).

    Raises ArrowDLPackValueError for a row that cannot become an image (null, malformed, too
    large, an unreadable file), naming the row and the column, unless ``on_error="skip"``,
    which drops such rows (``rows`` says which were kept); ArrowDLPackValueError for an option
    out of range; TypeError for an unknown option or a value of the wrong type; ArrowDLPackTypeError
    for a column of another type; MemoryError when an allocation fails.
    """

def memory_pool_stats() -> dict[str, int]:
    """The counters of the memory pool that large copy outputs (4 MiB and more) come from:
    ``cached_bytes`` and ``cached_blocks`` (freed blocks kept mapped for reuse), ``in_use_bytes``
    (blocks that arrays and tensors hold now), ``limit`` (the bound on cached bytes; 0 when the
    pool is off), ``decay_ms``, ``hits`` and ``misses`` (allocations served from a cached block or
    not), ``returns`` (blocks freed by their last owner, numpy and torch included) and
    ``released`` (blocks given back to the system). Like PyArrow's ``default_memory_pool()``, the
    pool keeps freed pages warm so that the next copy does not fault them in again."""

def set_memory_pool_limit(nbytes: int) -> None:
    """Bounds the bytes the memory pool keeps cached (default 256 MiB, or the environment variable
    ``ARROW_DLPACK_MEMORY_POOL_LIMIT`` read at the first large allocation), releasing the oldest
    blocks over it. ``0`` turns the pool off: large outputs are plain heap allocations again.
    Raises OverflowError for a negative number."""

def set_memory_pool_decay_ms(ms: int) -> None:
    """How long a freed block may stay cached unused (default 1000 ms, or
    ``ARROW_DLPACK_MEMORY_POOL_DECAY_MS``), as ``pyarrow.jemalloc_set_decay_ms``; older blocks are
    released at the next allocation or free. Raises OverflowError for a negative number."""

def release_unused_memory() -> int:
    """Gives every cached block of the memory pool back to the system now, as PyArrow's
    ``MemoryPool.release_unused()``; returns the number of bytes released."""

def _testing_record_device_runtime(
    enable: bool = True, current_device: int = 0
) -> list[Tuple[Any, ...]]:
    """Private, for tests: replaces the device runtimes with a recording fake (``enable=False``
    puts the real ones back) whose caller has ``current_device`` current, and returns the list to
    which each runtime call appends a tuple: ``("enter", device_type, device_id)``, ``("exit",
    device_type, device_id, device current afterwards)``, ``("wait", current device, stream,
    event)``, ``("synchronize", current device, event)``, ``("record", current device, stream,
    new event)`` or ``("destroy", current device, event)``."""

def _array_from_ipc(data: Any, /) -> Array:
    """The array that ``Array.__reduce__`` pickled (``data``: the bytes of an Arrow IPC stream
    of one column); ArrowDLPackValueError or ArrowDLPackTypeError naming what is wrong."""

def _tensor_from_parts(code: Any, bits: Any, shape: Any, dim_names: Any, data: Any, /) -> Tensor:
    """The tensor that ``Tensor.__reduce_ex__`` pickled: DLPack type ``code`` and ``bits``, a
    tuple ``shape``, ``dim_names`` (None or one str per dimension) and ``data``, the row-major
    elements (bytes, or any C-contiguous buffer handed to ``pickle.loads(buffers=...)``).
    Every field is checked: ArrowDLPackValueError or ArrowDLPackTypeError naming it."""

def _exchange_calls() -> dict[str, int]:
    """Private, for tests: ``{"exported": n, "imported": m}``, how many tensors went out through
    this package's DLPack C exchange tables and came in through producers' tables."""

@disjoint_base
class Array:
    """An Arrow array (one column, possibly in several chunks) that speaks DLPack and the Arrow
    PyCapsule interface."""

    __dlpack_c_exchange_api__: ClassVar[CapsuleType]
    """The DLPack 1.3 C exchange API: what ``__dlpack__(max_version=(1, 3))`` gives, without the
    Python call."""

    @staticmethod
    def from_dlpack(
        x: Any, /, *, device: _Device = None, copy: Optional[bool] = None
    ) -> Array:
        """Imports a 1-D contiguous DLPack tensor (any producer, or a capsule) without copying.

        ``device`` must be None, ``"cpu"`` or ``(1, 0)``. ``copy=True`` copies (and accepts
        strided tensors; the copy is made here, not by the producer); ``copy=False`` refuses a producer that copies. Bool tensors are packed
        into Arrow's bits, a copy that ``copy=None`` allows.

        Raises ArrowDLPackValueError for a tensor that is not 1-D contiguous or whose dtype Arrow
        cannot hold, ArrowDLPackBufferError for a device other than the CPU.
        """
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> CapsuleType:
        """Exports the array as a DLPack capsule: primitive arrays as 1-D tensors, (nested)
        fixed-size lists as n-D tensors.

        ``max_version`` None or below (1, 0) gives a legacy ``dltensor`` capsule, otherwise a
        ``dltensor_versioned`` capsule (DLPack 1.3, flagged READ_ONLY). ``copy=True`` always
        copies; booleans and several chunks are copied unless ``copy=False``.

        Raises ArrowDLPackTypeError for nulls or a type DLPack cannot carry,
        ArrowDLPackBufferError for a ``stream``, a ``dl_device`` other than (1, 0), or
        ``copy=False`` when a copy is needed.
        """
    def __reduce__(self) -> Tuple[Any, Tuple[bytes]]:
        """Pickles a copy: the column as an Arrow IPC stream (type, chunks, nulls and extension
        metadata kept), unpickled as the same class."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """The DLPack device of the data: always ``(1, 0)``, the CPU."""
    def __arrow_c_schema__(self) -> CapsuleType:
        """The array's Arrow schema as an ``arrow_schema`` capsule (extension metadata
        included)."""
    def __arrow_c_array__(
        self, requested_schema: Optional[object] = None
    ) -> Tuple[CapsuleType, CapsuleType]:
        """The array as (``arrow_schema``, ``arrow_array``) capsules; zero-copy for one chunk,
        several chunks concatenated (a copy: the interface asks for one array).
        ``requested_schema`` is ignored, as the interface allows."""
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> CapsuleType:
        """The array as an ``arrow_array_stream`` capsule that hands out its chunks one by one,
        zero-copy, extension metadata included: ``pa.chunked_array(obj)`` and nanoarrow keep the
        chunks. ``requested_schema`` is ignored, as the interface allows."""
    def __arrow_c_device_array__(
        self, requested_schema: Optional[object] = None, **kwargs: Any
    ) -> Tuple[CapsuleType, CapsuleType]:
        """The array as (``arrow_schema``, ``arrow_device_array``) capsules of CPU data (device id
        -1, no sync event, as in PyArrow), as ``__arrow_c_array__`` gives it. Keywords other
        than None raise NotImplementedError."""
    def __arrow_c_device_stream__(
        self, requested_schema: Optional[object] = None, **kwargs: Any
    ) -> CapsuleType:
        """The chunks as an ``arrow_device_array_stream`` capsule of CPU data, zero-copy.
        Keywords other than None raise NotImplementedError."""
    @property
    def num_chunks(self) -> int:
        """The number of chunks the producer gave (0 for an empty stream)."""
    @property
    def chunks(self) -> list[Array]:
        """The chunks, each an array of this class sharing its memory."""
    def validity(self) -> Tensor:
        """The validity of each element as a 1-D ``bool`` tensor: True where the element is
        valid, False where it is null (all True without nulls).

        A writable copy (Arrow validity is bit-packed), to send beside the values of
        ``to_tensor(allow_nulls=True)``; several chunks give one tensor. Only the array's own
        validity is given, not that of the child values of a fixed-size list.
        """
    def to_tensor(self, *, allow_nulls: bool = False) -> Tensor:
        """A tensor view: 1-D for primitive arrays, n-D for (nested) fixed-size lists.

        Raises ArrowDLPackValueError for nulls unless ``allow_nulls=True`` (null slots then hold
        unspecified values), ArrowDLPackTypeError for a type DLPack cannot carry.
        """
    @property
    def type(self) -> str:
        """The Arrow type, named as PyArrow names it (``int64``, ``float``,
        ``fixed_size_list<item: int32>[2]``, ...)."""
    @property
    def null_count(self) -> int:
        """The number of null elements."""
    def __len__(self) -> int: ...
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """numpy's array protocol (``np.asarray``, ``jnp.asarray``), as PyArrow's:
        ``to_numpy(zero_copy_only=False)`` cast to ``dtype`` (a read-only view of a numeric
        array without nulls in one chunk; nulls as NaN); ``copy=True`` always copies,
        ``copy=False`` raises ArrowDLPackValueError where a copy is needed."""
    def __eq__(self, value: object, /) -> Any:
        """``equals(other)`` for an array of this package or any Arrow producer (a bool, as
        PyArrow's ``==``); NotImplemented otherwise, so numpy compares element by element."""
    def __ne__(self, value: object, /) -> Any:
        """The negation of ``==``."""
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def to_pylist(self) -> list[Any]:
        """The elements as Python objects; nulls are None."""
    def to_numpy(self, zero_copy_only: bool = True, writable: bool = False) -> Any:
        """PyArrow's ``to_numpy``: a read-only zero-copy numpy view of an integer or float array
        without nulls in one chunk.

        With ``zero_copy_only=True`` (the default) what needs a copy raises
        ArrowDLPackValueError (PyArrow raises ``ArrowInvalid``, also a ValueError): nulls,
        booleans, several chunks, other types, and ``writable=True``. With
        ``zero_copy_only=False`` nulls become NaN (integers become ``float64``, floats keep their
        type), booleans give ``bool`` (``object`` with None where there are nulls), fixed-size
        lists an ``object`` array of one numpy array per element (None for nulls), other types
        an ``object`` array of Python values; ``writable=True`` copies a read-only result.

        numpy is imported by this method, not by the package; ImportError without it.
        """
    def slice(self, offset: int = 0, length: Optional[int] = None) -> Self:
        """The elements ``offset .. offset + length`` (to the end when ``length`` is None) as an
        array of this class, zero-copy across chunks; a range past the end is clamped.

        A negative offset raises IndexError, a negative length ArrowDLPackValueError, as in
        PyArrow.
        """
    @overload
    def __getitem__(self, key: SupportsIndex, /) -> Any:
        """The element as a Python value (None for a null); PyArrow returns a ``pa.Scalar``."""
    @overload
    def __getitem__(self, key: builtins.slice, /) -> Self:
        """A zero-copy slice for step 1; other steps copy the selected elements, as PyArrow's
        ``take``."""
    @property
    def nbytes(self) -> int:
        """The bytes that the elements reference (values, validity bitmaps, children), counted
        as PyArrow counts them for sliced arrays."""
    def equals(self, other: Any) -> bool:
        """Whether ``other`` (an array of this package or any Arrow producer) has the same type
        and values; chunk layout does not matter, nulls must match, NaN is unequal to itself
        and ``0.0 == -0.0``, as in PyArrow."""
    def is_null(self, *, nan_is_null: bool = False) -> Array:
        """A boolean array (no nulls), True where the element is null, or NaN with
        ``nan_is_null=True``; it exports through DLPack as a ``bool`` tensor."""
    def is_valid(self) -> Array:
        """A boolean array (no nulls), True where the element is not null."""

@final
class Tensor:
    """A strided n-dimensional tensor over Arrow memory, exchanged through DLPack without
    copying; PyArrow's ``pa.Tensor`` with any strides (zero and negative included)."""

    __dlpack_c_exchange_api__: ClassVar[CapsuleType]
    """The DLPack 1.3 C exchange API (see :attr:`Array.__dlpack_c_exchange_api__`)."""

    @staticmethod
    def from_dlpack(
        x: Any, /, *, device: _Device = None, copy: Optional[bool] = None
    ) -> Tensor:
        """Imports any DLPack producer (or capsule) without copying; any shape and strides.

        Device memory (CUDA, ROCm, ...) is kept on its device without being read: it can be
        exported again, but what would read it raises ArrowDLPackBufferError. ``device`` may be
        None (keep the producer's), ``"cpu"`` or a ``(device_type, device_id)`` pair, which the
        data must already be on. ``copy=True`` gives a row-major copy that no one else
        references: of CPU data made here (into the memory pool, without the GIL when large;
        the producer is not asked to copy), of device data by its producer.
        """
    @staticmethod
    def from_arrow(obj: Any, /, *, row_major: bool = True, null_to_nan: bool = False) -> Tensor:
        """Copies every column of a table, record batch or struct array (anything with
        ``__arrow_c_stream__`` or ``__arrow_c_array__`` of struct type: pyarrow Table and
        RecordBatch, polars DataFrame, ...) into one writable 2-D tensor of shape
        ``(num_rows, num_columns)``, as PyArrow's ``RecordBatch.to_tensor`` does (same type
        promotion; float16 mixes are converted where PyArrow refuses them, and boolean columns
        are 0 and 1 of the promoted dtype, as numpy stacks them, or a bool tensor alone).

        ``row_major=False`` lays the columns out one after another (Fortran order). The
        record batches of a stream are written into the tensor one after another, in one pass,
        without being concatenated first.

        Raises ArrowDLPackTypeError, as PyArrow does, for nulls unless ``null_to_nan=True`` (the
        dtype is then a float type), for a non-numeric column, for a table without columns, and
        for an object that is not a table.
        """
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> CapsuleType:
        """Exports the tensor as a DLPack capsule (see :meth:`Array.__dlpack__` for the
        rules).

        For a device tensor, ``stream`` follows the array API's table (CUDA: None or 1 the legacy
        default stream, 2 the per-thread default stream, a ``cudaStream_t``, -1 no
        synchronisation, 0 refused; ROCm: None or 0 the default stream, a ``hipStream_t``, -1; 1
        and 2 refused). A tensor that carries a producer's sync event (from
        ``__arrow_c_device_array__``) makes that stream wait on it first, through the CUDA or
        ROCm driver loaded at run time; ArrowDLPackBufferError for a refused stream, a stream
        that a tensor without an event cannot be ordered before, or no driver."""
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> Tuple[Any, Tuple[int, int, Tuple[int, ...], Optional[list[str]], Any]]:
        """Pickles a copy of a host tensor (type, shape, dimension names, row-major elements,
        written once into the bytes pickle stores; with protocol 5 a ``pickle.PickleBuffer``
        that a ``buffer_callback`` takes out of band), unpickled as a writable tensor that owns
        its memory; ArrowDLPackBufferError for a device tensor, MemoryError when the bytes
        cannot be allocated."""
    def __dlpack_device__(self) -> Tuple[int, int]:
        """The DLPack device of the data: ``(1, 0)`` for the CPU, or the device of the producer's
        tensor."""
    def __arrow_c_device_array__(
        self, requested_schema: Optional[object] = None, **kwargs: Any
    ) -> Tuple[CapsuleType, CapsuleType]:
        """The tensor as (``arrow_schema``, ``arrow_device_array``) capsules on its own device,
        zero-copy and never read: 1-D as a primitive array, n-D as ``arrow.fixed_shape_tensor``,
        with the producer's sync event. ArrowDLPackBufferError for a tensor that is not
        row-major or has no dimension; keywords other than None raise NotImplementedError."""
    @property
    def shape(self) -> Tuple[int, ...]:
        """The extent of each dimension."""
    @property
    def strides(self) -> Tuple[int, ...]:
        """The stride of each dimension in bytes (as numpy and PyArrow report them)."""
    @property
    def ndim(self) -> int:
        """The number of dimensions."""
    @property
    def size(self) -> int:
        """The number of elements."""
    @property
    def type(self) -> str:
        """The element type, named as PyArrow names it (``int32``, ``float``, ``double``, ...)."""
    @property
    def dtype(self) -> Any:
        """The element type as a numpy dtype (``dtype('float32')``), as array libraries read it
        beside ``__array__``; ``ml_dtypes``' for bfloat16 and float8 where it is installed, else
        their name. ``str(t.dtype)`` is torch's name too (``getattr(torch, str(t.dtype))``)."""
    def __len__(self) -> int:
        """The extent of the first dimension; TypeError for a 0-d tensor, as numpy's."""
    def tolist(self) -> Any:
        """The elements as nested Python lists (numpy's ``tolist()``)."""
    def __int__(self) -> int:
        """``int(t)`` of a tensor of one element (a packed sequence's ``max_seqlen``)."""
    def __float__(self) -> float:
        """``float(t)`` of a tensor of one element."""
    def __complex__(self) -> complex:
        """``complex(t)`` of a tensor of one element."""
    def __index__(self) -> int:
        """``operator.index(t)`` of a 0-d integer tensor."""
    def __bool__(self) -> bool:
        """``bool(t)`` as numpy's: the value of one element; ValueError for several."""
    @property
    def dim_names(self) -> Optional[list[str]]:
        """The dimension names, or None."""
    @property
    def is_contiguous(self) -> bool:
        """Whether the layout is row-major or column-major."""
    @property
    def is_row_major(self) -> bool:
        """Whether the layout is row-major (C order)."""
    @property
    def is_column_major(self) -> bool:
        """Whether the layout is column-major (Fortran order)."""
    @property
    def is_mutable(self) -> bool:
        """Whether DLPack consumers may write to the data (False for Arrow memory)."""
    def to_numpy(self) -> Any:
        """A zero-copy numpy view with the same shape and strides (PyArrow's ``to_numpy``),
        read-only when the tensor is. numpy is imported by this method, not by the package."""
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """numpy's array protocol (``np.asarray``, ``jnp.asarray``): a zero-copy view, read-only
        when the tensor is, cast to ``dtype``; ``copy=True`` always copies."""
    def __str__(self) -> str:
        """``print(t)``: the ``repr`` (PyArrow's: type, shape, strides) and then the values as
        numpy prints them, summarised when long; the ``repr`` alone for device memory or a type
        numpy lacks."""
    def __eq__(self, value: object, /) -> Any:
        """``equals(other)`` for a :class:`Tensor` or a ``pyarrow.Tensor`` (a bool, as PyArrow's
        ``==``); NotImplemented otherwise, so numpy compares element by element."""
    def __ne__(self, value: object, /) -> Any:
        """The negation of ``==``."""
    __hash__: ClassVar[None]  # type: ignore[assignment]
    @property
    def nbytes(self) -> int:
        """The bytes of the elements: ``size`` times the element size, as numpy's ``nbytes``
        (PyArrow's Tensor has none)."""
    def equals(self, other: Any) -> bool:
        """Whether ``other`` (a Tensor or any DLPack producer) has the same type, shape and
        values, whatever the strides and dimension names; NaN is unequal to itself, as in
        PyArrow."""
    def dim_name(self, i: int) -> str:
        """The name of dimension ``i``, ``""`` when the tensor has no names; IndexError out of
        range (where PyArrow aborts the process)."""

@final
class FixedShapeTensorArray(Array):
    """An array of tensors of one shape (the ``arrow.fixed_shape_tensor`` extension type)."""

    __dlpack_c_exchange_api__: ClassVar[CapsuleType]
    """The DLPack 1.3 C exchange API, exporting the whole ``(len, *cell_shape)`` tensor."""

    @staticmethod
    def from_dlpack(
        x: Any, /, *, device: _Device = None, copy: Optional[bool] = None
    ) -> FixedShapeTensorArray:
        """Imports a DLPack tensor whose outermost dimension (the largest stride) becomes the
        array length; the order of the other strides becomes the permutation.

        Gapped strides are copied unless ``copy=False`` (then ArrowDLPackBufferError); a tensor
        that is not first-major, or 0-d, raises ArrowDLPackValueError unless ``copy=True``.
        """
    @staticmethod
    def from_tensor(tensor: Any) -> FixedShapeTensorArray:
        """Builds an array from a :class:`Tensor` (or any DLPack producer); the outermost
        dimension becomes the array length."""
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> CapsuleType:
        """Exports the whole ``(len, *cell_shape)`` tensor as a DLPack capsule."""
    def to_tensor(self, *, allow_nulls: bool = False) -> Tensor:
        """The whole ``(len, *cell_shape)`` tensor, zero-copy."""
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """numpy's array protocol: the whole ``(len, *cell_shape)`` array, as
        :meth:`to_numpy_ndarray` (where PyArrow gives an ``object`` array of flat cells), cast
        to ``dtype``; ``copy=True`` always copies, ``copy=False`` raises ArrowDLPackValueError
        for several chunks; null cells raise ArrowDLPackValueError."""
    @overload  # type: ignore[override]
    def __getitem__(self, key: SupportsIndex, /) -> Optional[Tensor]:
        """Cell ``key`` as a read-only zero-copy :class:`Tensor` of the cell's shape, the
        permutation applied as strides, as a row of :meth:`to_tensor` (None for a null cell;
        IndexError past the end). ``to_pylist()`` gives each cell flat, as PyArrow's."""
    @overload
    def __getitem__(self, key: builtins.slice, /) -> Self:
        """A zero-copy slice for step 1; other steps copy the selected cells."""
    def to_numpy_ndarray(self) -> Any:
        """The whole ``(len, *cell_shape)`` array as numpy (PyArrow's ``to_numpy_ndarray``),
        zero-copy and read-only for one chunk, the permutation applied as in :meth:`to_tensor`.

        Nulls raise ArrowDLPackValueError, as in PyArrow. numpy is imported by this method, not
        by the package.
        """
    @staticmethod
    def from_numpy_ndarray(
        obj: Any, dim_names: Optional[Sequence[str]] = None
    ) -> FixedShapeTensorArray:
        """PyArrow's ``from_numpy_ndarray``: the first axis of ``obj`` (a numpy array or any
        DLPack producer with at least 2 dimensions) becomes the length, the others the cell
        shape, the order of their strides the permutation; ``dim_names`` name the cell
        dimensions.

        Zero-copy for densely packed data; gapped strides are copied. ArrowDLPackValueError,
        as PyArrow's ValueError, for a first axis without the largest stride (Fortran order),
        fewer than 2 dimensions or ``dim_names`` of the wrong length; also for booleans, which
        PyArrow packs. Empty arrays are accepted (PyArrow refuses them).
        """
    @property
    def shape(self) -> list[int]:
        """The shape of each tensor, as stored (physical order)."""
    @property
    def permutation(self) -> Optional[list[int]]:
        """The permutation from logical to physical dimensions, or None."""
    @property
    def dim_names(self) -> Optional[list[str]]:
        """The names of the (physical) dimensions, or None."""
    @property
    def value_type(self) -> str:
        """The element type, named as PyArrow names it."""

@final
class VariableShapeTensorArray(Array):
    """An array of tensors of one element type and rank, each of its own shape (the
    ``arrow.variable_shape_tensor`` extension type, which PyArrow reads but has no class for).

    The storage is ``struct<data: list<T>, shape: fixed_size_list<int32>[ndim]>``; ``pa.array(x)``
    gives PyArrow's extension type, the metadata written with the specification's keys.
    """

    @overload  # type: ignore[override]
    def __getitem__(self, key: SupportsIndex, /) -> Optional[Tensor]:
        """Row ``key`` as a read-only zero-copy :class:`Tensor` of its own shape, the
        permutation applied as strides (None for a null row); negative indexes count from the
        end, IndexError past it. Nulls among the row's elements raise ArrowDLPackValueError."""
    @overload
    def __getitem__(self, key: builtins.slice, /) -> Self:
        """A zero-copy slice for step 1; other steps copy the selected rows."""
    def to_numpy_ndarray(self) -> list[Any]:
        """Every row as a read-only zero-copy numpy array of its own shape (None for a null
        row). numpy is imported by this method, not by the package."""
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """numpy's array protocol: an ``object`` array of the rows as :meth:`to_numpy_ndarray`
        gives them; ``copy=False`` raises ArrowDLPackValueError."""
    @staticmethod
    def from_numpy_ndarray(
        arrays: Any,
        *,
        dim_names: Optional[Sequence[str]] = None,
        permutation: Optional[Sequence[int]] = None,
        uniform_shape: Optional[Sequence[Optional[int]]] = None,
    ) -> VariableShapeTensorArray:
        """Builds an array of ``arrays`` (an iterable of numpy arrays or any DLPack producers of
        one dtype and rank, None for a null row), copying their elements into one buffer.

        With ``permutation``, each array is the logical tensor and is stored in its physical
        order, so that ``array[i]`` gives it back; ``dim_names`` and ``uniform_shape`` describe
        the physical dimensions and are checked against every array. ArrowDLPackValueError for
        an empty iterable (the type would be unknown), mixed dtypes or ranks, and metadata that
        does not fit.
        """
    def to_padded(
        self, pad_value: Union[int, float, bool, None] = None, *, allow_nulls: bool = False
    ) -> tuple[Tensor, Tensor]:
        """Every row copied into one writable tensor ``(len, max_0, max_1, ...)`` padded with
        ``pad_value`` (0 when None), and the rows' shapes as a writable int32 tensor
        ``(len, ndim)``.

        Null rows (all padding, shape zeros) and nulls among the elements raise
        ArrowDLPackValueError unless ``allow_nulls=True``; so does a ``pad_value`` the dtype
        cannot hold exactly.
        """
    def to_ragged(
        self, *, allow_nulls: bool = False, copy: Optional[bool] = None
    ) -> tuple[Tensor, Tensor]:
        """The rows as ``(values, offsets)`` when they differ only in their first dimension:
        values ``(N, *inner)``, a zero-copy view of the data when there is no permutation, and
        offsets ``(B + 1,)`` (int32 when N fits), as
        ``torch.nested.nested_tensor_from_jagged(values, offsets)`` takes them.

        Rows that differ beyond their first dimension, null rows, nulls among the elements
        (unless ``allow_nulls=True``) and 0-d rows raise ArrowDLPackValueError; a permuted
        column is copied, or refused with ArrowDLPackBufferError when ``copy=False``.
        """
    @property
    def shapes(self) -> list[Optional[list[int]]]:
        """The shape of each row as ``array[i].shape`` gives it (the stored shape in logical
        order), None for a null row."""
    @property
    def ndim(self) -> int:
        """The number of dimensions of every tensor."""
    @property
    def permutation(self) -> Optional[list[int]]:
        """The permutation from logical to physical dimensions, or None."""
    @property
    def dim_names(self) -> Optional[list[str]]:
        """The names of the (physical) dimensions, or None."""
    @property
    def uniform_shape(self) -> Optional[list[Optional[int]]]:
        """Per physical dimension, the extent every row has (None where it varies), or None."""
    @property
    def value_type(self) -> str:
        """The element type, named as PyArrow names it."""

@final
class ListArray(Array):
    """A variable-length list column (``list``, ``large_list``, ``list_view``,
    ``large_list_view``) as a ragged tensor: ``values`` ``(N, *inner)`` holding the rows one after
    another and ``offsets`` ``(B + 1,)`` that delimit them.

    Elements may be numbers, booleans (unpacked, a copy), fixed-size lists (inner dimensions) or
    ``arrow.fixed_shape_tensor`` cells. One chunk is zero-copy (a list view whose rows are out of
    order is copied); several chunks are concatenated by ``values``, ``offsets`` and
    :meth:`to_jagged` (a copy) and padded or packed piece by piece by :meth:`to_padded` and
    :meth:`to_packed` without a concatenation. Null rows raise ArrowDLPackValueError unless
    ``allow_nulls=True``, which reads them as empty rows (dropping, by a copy, any elements their
    offsets still cover).
    """

    @property
    def values(self) -> Tensor:
        """The elements of all rows, ``(N, *inner)``: a zero-copy view of only the elements the
        rows refer to (a sliced column starts at its first row's first element)."""
    @property
    def offsets(self) -> Tensor:
        """The offsets ``(B + 1,)``, int32 (``list``, ``list_view``) or int64 (the large types),
        starting at 0: shared with the column when its offsets start at 0, else rebased."""
    def lengths(self, *, allow_nulls: bool = False) -> Tensor:
        """The length of every row, int64 ``(B,)``."""
    def to_padded(
        self,
        pad_value: Union[bool, int, float, None] = None,
        *,
        max_length: Optional[int] = None,
        pad_to_multiple_of: Optional[int] = None,
        padding_side: str = "right",
        truncation_side: str = "right",
        allow_nulls: bool = False,
    ) -> Tensor:
        """The rows padded into a fresh, writable tensor ``(B, L, *inner)``; ``L`` is the longest
        row after truncation to ``max_length``, rounded up to ``pad_to_multiple_of``.

        ``pad_value`` (0 when None) must fit the dtype: ``-100`` into uint8 or ``0.5`` into
        int32 raise ArrowDLPackValueError. ``padding_side`` and ``truncation_side`` are
        ``"left"`` or ``"right"``.
        """
    def to_packed(self, *, allow_nulls: bool = False) -> dict[str, Any]:
        """The rows packed for varlen attention (flash-attention's ``cu_seqlens``): a dict with
        ``"values"`` ``(N, *inner)`` (zero-copy for one chunk), ``"cu_seqlens"`` (int32,
        ``(B + 1,)``), ``"position_ids"`` (int64, ``(N,)``, restarting at 0 in every row) and
        ``"max_seqlen"`` (an int)."""
    def to_jagged(self, *, allow_nulls: bool = False) -> Tuple[Tensor, Tensor]:
        """``(values, offsets)`` with int64 offsets, for
        ``torch.nested.nested_tensor_from_jagged(torch.from_dlpack(values),
        torch.from_dlpack(offsets))``."""
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> Any:
        """numpy's array protocol, as PyArrow's for list arrays: an ``object`` array of the
        rows, each a read-only numpy view of its elements (None for a null row);
        ``copy=False`` raises ArrowDLPackValueError (the rows are ragged)."""
    @staticmethod
    def from_offsets(values: Any, offsets: Any) -> ListArray:
        """A list array from values ``(N, *inner)`` and offsets ``(B + 1,)`` (DLPack producers;
        int32 offsets give ``list``, int64 ``large_list``, inner dimensions fixed-size lists),
        sharing the values' memory when they are row-major; the offsets are copied (``B + 1``
        integers), so that writing into the caller's offsets afterwards changes no row.

        Offsets that do not start at 0, decrease, or do not end at ``N`` raise
        ArrowDLPackValueError.
        """
    @staticmethod
    def from_padded(tensor: Any, lengths: Any, *, padding_side: str = "right") -> ListArray:
        """A list array of the rows of a padded tensor ``(B, L, *inner)``: row ``b`` is its first
        ``lengths[b]`` elements (its last ones with ``padding_side="left"``). A copy."""
    @staticmethod
    def from_tensors(tensors: list[Any]) -> ListArray:
        """A list array with one row per tensor (DLPack producers of shape
        ``(length_i, *inner)`` sharing dtype and element shape). A copy."""

@final
class _Batches:
    """The batch iterator behind :class:`arrow_dlpack.Batches` (whose :func:`arrow_dlpack.batches`
    computes the shard and shows progress): exact-size batches of tensors, made on background
    threads."""

    OPTIONS: ClassVar[dict[str, dict[str, Any]]]
    """Every option (a field of the Rust ``BatchSpec``), in declaration order: a dict from its
    name to its ``default`` (as the Python signatures spell it), ``annotation``, ``scope``
    (``"batch"`` or ``"stream"``) and ``summary``."""

    def __new__(
        cls,
        source: Any,
        *,
        storage_options: Optional[Any] = None,
        **options: Any,
    ) -> _Batches:
        """The loader of ``source`` with the options of ``OPTIONS``, each a keyword; a keyword
        that names no option is a TypeError."""
    def __iter__(self) -> _Batches:
        """The iterator; ValueError once it has ended (a loader is iterated once)."""
    def __next__(self) -> dict[str, Tensor]:
        """The next batch, waited for with the GIL released."""
    def __len__(self) -> int:
        """The number of batches left, where it is known; TypeError otherwise."""
    def __length_hint__(self) -> Any:
        """The number of batches left, or NotImplemented when it is not known."""
    @property
    def num_batches(self) -> Optional[int]:
        """The batches in all, or None when unknown."""
    @property
    def num_rows(self) -> Optional[int]:
        """The rows of this shard, or None when the source does not say."""
    @property
    def rows_yielded(self) -> int:
        """The rows of the batches handed out so far."""
    @property
    def rows_left_out(self) -> int:
        """The epoch's last rows that no rank reads although ``drop_last`` is off."""
    def state_dict(self) -> dict[str, Any]:
        """Where the stream stands after the batches handed out so far: a dict of ints,
        strings and lists, for ``state=``."""
    def close(self) -> None:
        """Stops the background threads and releases the source now."""
    def _give_back(self) -> bool:
        """Takes back the last batch handed out, which an interrupt stopped on its way: it is
        handed out again by the next ``next()``."""
    def _stop_at_exit(self, timeout: float) -> bool:
        """At exit: stops the background thread and waits at most ``timeout`` seconds for it
        to end and for any thread inside ``next()`` to leave it; whether both happened."""

def _check_options(
    source: Any = None,
    *,
    storage_options: Optional[Any] = None,
    **options: Any,
) -> dict[str, Optional[int]]:
    """What ``_Batches(source, **options)`` checks before its first batch, without making a
    loader: every option, and for files the spec against their schema (no data is read, no
    thread started); a stream is not read. Returns ``{"num_rows": ..., "num_batches": ...,
    "rows_left_out": ...}``."""
def _collate(table: Any, **options: Any) -> dict[str, Tensor]:
    """One batch of every row of ``table`` (anything with ``__arrow_c_stream__``), made on the
    calling thread as :class:`_Batches` makes a batch of the same rows; the GIL is released for
    large batches only. Behind :func:`arrow_dlpack.ray.collate_fn`. The keywords are the options
    of ``_Batches.OPTIONS`` whose scope is ``"batch"``."""
def _merge_states(states: list[dict[str, Any]]) -> dict[str, Any]:
    """The states of every shard of a run joined into one, behind
    :func:`arrow_dlpack.merge_states`."""

def tokenize(
    source: Any,
    tokenizer: Any,
    out_path: Union[str, os.PathLike[str]],
    *,
    column: str = "text",
    output_column: str = "input_ids",
    keep_columns: Optional[list[str]] = None,
    add_special_tokens: bool = True,
    allow_nulls: bool = False,
    threads: Optional[int] = None,
    progress: bool = True,
    storage_options: Optional[dict[str, Any]] = None,
) -> dict[str, int]:
    """Tokenizes the text column of ``source`` once and writes the token ids, with the other
    columns, to ``out_path``.

    ``source`` is what :func:`batches` takes: a path or list of paths of Parquet or Arrow IPC
    files, URLs of such objects in object storage (with ``storage_options``), or any object
    with ``__arrow_c_stream__``. ``tokenizer`` is a path to a ``tokenizer.json``, a
    ``tokenizers.Tokenizer``, or a ``transformers`` fast tokenizer. The ids are those of
    ``tokenizer.encode_batch(texts, add_special_tokens=...)`` (padding set on the tokenizer is
    not applied), written as a ``list<int32>`` column named ``output_column`` after the columns
    of ``keep_columns`` (``None``: every column of the source, the text included). The format
    is told from the extension: ``.parquet``/``.pq`` (Snappy), ``.arrow``/``.feather``/``.ipc``
    (an IPC file), ``.arrows`` (an IPC stream). Tokenizes on ``threads`` threads (``None``: one
    per core) without the GIL, draws a progress line on standard error when it is a terminal
    and ``progress`` is true, and writes under a temporary name renamed at the end. Returns
    ``{"rows": ..., "tokens": ...}``.

    A null text raises ``ValueError`` naming its row unless ``allow_nulls`` (then its row is
    empty); a column that is not text ``TypeError``; a tokenizer file that does not parse
    ``ValueError``."""

def _tokenize_column(
    column: Any,
    tokenizer: Any,
    *,
    add_special_tokens: bool = True,
    allow_nulls: bool = False,
    threads: Optional[int] = None,
) -> ListArray:
    """The token ids of every text of ``column`` (any Arrow array or chunked array of
    ``string``, ``large_string`` or ``string_view``) as a ``list<int32>`` :class:`ListArray`,
    as :func:`tokenize` computes them."""
