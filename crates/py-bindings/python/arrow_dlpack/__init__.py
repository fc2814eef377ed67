"""Apache Arrow <-> DLPack, zero-copy, for every Arrow producer.

``arrow_dlpack`` gives Arrow data from any library with the Arrow PyCapsule
interface (pyarrow, polars, nanoarrow, arro3, ...) PyArrow's DLPack surface:

>>> import numpy as np, pyarrow as pa, arrow_dlpack as ad
>>> np.from_dlpack(ad.array(pa.array([2, 0, 2, 4])))
array([2, 0, 2, 4])

- :func:`array` imports any ``__arrow_c_array__`` / ``__arrow_c_stream__``
  producer without copying; an ``arrow.fixed_shape_tensor`` column gives a
  :class:`FixedShapeTensorArray`, an ``arrow.variable_shape_tensor`` column a
  :class:`VariableShapeTensorArray` whose rows are zero-copy tensors of their
  own shapes (PyArrow reads that type but has no class for it), a
  variable-length list column a :class:`ListArray` (a ragged tensor: zero-copy
  values and offsets, padded, packed for varlen attention, or jagged for
  ``torch.nested``).
- :class:`Array`, :class:`Tensor` and :class:`FixedShapeTensorArray` export
  through ``__dlpack__`` (to numpy, PyTorch, JAX, PyArrow, ...) and import any
  DLPack producer through ``from_dlpack``, JAX's legacy-only capsules included.
- :class:`Array` and :class:`FixedShapeTensorArray` export
  ``__arrow_c_schema__``, ``__arrow_c_array__`` and ``__arrow_c_stream__``,
  extension metadata included, so ``pa.array(ad_obj)`` and
  ``pa.chunked_array(ad_obj)`` give the pyarrow equivalent zero-copy.
- The Arrow C Device Data Interface both ways: :func:`array` takes
  ``__arrow_c_device_array__`` / ``__arrow_c_device_stream__`` producers (a
  column on a GPU becomes a device :class:`Tensor`, never read, handed on
  zero-copy through DLPack), our arrays publish both device protocols (CPU),
  and a :class:`Tensor` publishes ``__arrow_c_device_array__`` on its device;
  ``__dlpack__(stream=...)`` makes the consumer's stream wait on the
  producer's sync event.

Beyond PyArrow:

- chunked columns keep their chunks (``num_chunks``, ``chunks``); DLPack
  concatenates them only when ``copy`` allows;
- boolean arrays export as ``bool`` tensors (an unpacking copy) and ``bool``
  tensors import as boolean arrays (a packing copy);
- :meth:`Array.validity` gives the nulls as a ``bool`` tensor (True = valid);
- :meth:`Tensor.from_arrow` copies a table, record batch or polars DataFrame
  into one 2-D tensor (PyArrow's ``RecordBatch.to_tensor``), and
  :func:`column_tensors` gives one zero-copy tensor per column;
- PyArrow's conveniences: ``to_numpy`` (and ``to_numpy_ndarray`` /
  ``from_numpy_ndarray``), zero-copy ``slice`` and ``[]``, ``nbytes``,
  ``equals``, ``is_null``/``is_valid`` (boolean arrays that export as ``bool``
  tensors) and ``Tensor.dim_name``; numpy is imported only when a ``to_numpy``
  method runs (``docs/compatibility.md`` lists the differences);
- every class publishes the DLPack 1.3 C exchange API
  (``__dlpack_c_exchange_api__``), and ``from_dlpack`` uses a producer's;
- :func:`batches` turns Arrow data (IPC and Parquet files, any Arrow stream)
  into exact-size batches of tensors for a training loop, made on background
  threads (a :class:`Batches` iterator), and :class:`BatchDataset` is the same
  for ``torch.utils.data``;
  their ``state_dict()`` and ``state=`` resume a run exactly, and
  :func:`merge_states` resumes it with another number of ranks and workers;
  :func:`tokenize` tokenizes a text column once (Hugging Face ``tokenizers``, ids
  identical to its Python package's) into a Parquet or Arrow IPC file that
  ``sequences=`` reads.
- :func:`decode_images` turns a column of encoded images (JPEG, PNG, WebP,
  GIF, BMP; ``binary`` or Hugging Face ``Image`` structs, from any Arrow
  producer) into one ``(B, C, H, W)`` tensor, decoded, resized and cropped on
  Rust threads with the GIL released; it returns a :class:`DecodedImages`
  ``(images, sizes, rows)`` whatever the options.
- :mod:`arrow_dlpack.ray` (loaded on first use, as ``ad.ray``) makes the same tensors from
  Ray Data's Arrow blocks: a ``collate_fn`` for ``iter_torch_batches``, and ``ad.batches``
  takes a ``ray.data.Dataset`` as its source.

Exceptions
----------
Every exception raised by this package subclasses :class:`ArrowDLPackError`
and the builtin it stands for, so code written against PyArrow and numpy keeps
working:

- :class:`ArrowDLPackTypeError` (a ``TypeError``): export of data with nulls
  or of a type DLPack cannot carry; an object with no DLPack or Arrow protocol;
  a table that :meth:`Tensor.from_arrow` cannot convert (nulls without
  ``null_to_nan``, a non-numeric column, no columns: as PyArrow's
  ``to_tensor``); a non-numeric column in :func:`column_tensors`.
- :class:`ArrowDLPackValueError` (a ``ValueError``): an import that cannot
  become the requested object (not 1-D contiguous for ``Array``, not
  first-major or 0-d for ``FixedShapeTensorArray``, unsupported dtype, lanes
  other than 1, bad version, malformed tensor, a capsule already consumed);
  ``to_tensor()`` and :func:`column_tensors` on data with nulls without
  ``allow_nulls=True``; duplicate column names in :func:`column_tensors`.
- :class:`ArrowDLPackBufferError` (a ``BufferError``): a device other than the
  data's (``dl_device``, ``device``; Arrow arrays hold CPU data only, while a
  :class:`Tensor` keeps a producer's device memory without reading it), a
  ``stream`` other than ``None`` for CPU data (or one the array API's table
  refuses, one a device tensor without a sync event is not ordered before, or
  no device driver to wait with), reading device memory (a device column that
  is not fixed-width numeric, several device chunks, an unknown null count),
  or ``copy=False`` when a copy is needed.
- ``MemoryError`` when an allocation fails.
- ``NotImplementedError`` (not an :class:`ArrowDLPackError`, as the Arrow
  PyCapsule interface prescribes it) for a keyword other than ``None`` passed
  to ``__arrow_c_device_array__`` or ``__arrow_c_device_stream__``.
"""

from typing import TYPE_CHECKING

from arrow_dlpack._arrow_dlpack import (
    Array,
    ArrowDLPackBufferError,
    ArrowDLPackError,
    ArrowDLPackTypeError,
    ArrowDLPackValueError,
    DecodedImages,
    FixedShapeTensorArray,
    ListArray,
    Tensor,
    VariableShapeTensorArray,
    __version__,
    array,
    column_tensors,
    decode_images,
    memory_pool_stats,
    release_unused_memory,
    set_memory_pool_decay_ms,
    set_memory_pool_limit,
    tokenize,
)
from arrow_dlpack._batches import Batches, batches
from arrow_dlpack._states import merge_states

if TYPE_CHECKING:
    from arrow_dlpack._dataset import BatchDataset

__all__ = [
    "Array",
    "ArrowDLPackBufferError",
    "ArrowDLPackError",
    "ArrowDLPackTypeError",
    "ArrowDLPackValueError",
    "Batches",
    "DecodedImages",
    "FixedShapeTensorArray",
    "ListArray",
    "Tensor",
    "VariableShapeTensorArray",
    "__version__",
    "array",
    "batches",
    "column_tensors",
    "decode_images",
    "memory_pool_stats",
    "merge_states",
    "release_unused_memory",
    "set_memory_pool_decay_ms",
    "set_memory_pool_limit",
    "tokenize",
]


def __getattr__(name: str) -> object:
    # `BatchDataset` subclasses torch's `IterableDataset`, so its module is imported on first use:
    # importing arrow_dlpack never imports torch. (Not in `__all__`: a star import would import
    # torch.)
    if name == "BatchDataset":
        from arrow_dlpack._dataset import BatchDataset

        globals()["BatchDataset"] = BatchDataset
        return BatchDataset
    # `arrow_dlpack.ray` imports Ray: loaded on first use, as `ad.ray` or as a submodule.
    if name == "ray":
        import importlib

        return importlib.import_module("arrow_dlpack.ray")
    raise AttributeError(f"module 'arrow_dlpack' has no attribute {name!r}")
