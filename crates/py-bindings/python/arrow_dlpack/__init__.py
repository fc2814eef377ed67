"""Apache Arrow <-> DLPack, zero-copy, for every Arrow producer.

``arrow_dlpack`` gives Arrow data from any library with the Arrow PyCapsule
interface (pyarrow, polars, nanoarrow, arro3, ...) PyArrow's DLPack surface:

>>> import numpy as np, pyarrow as pa, arrow_dlpack as ad
>>> np.from_dlpack(ad.array(pa.array([2, 0, 2, 4])))
array([2, 0, 2, 4])

- :func:`array` imports any ``__arrow_c_array__`` / ``__arrow_c_stream__``
  producer without copying; an ``arrow.fixed_shape_tensor`` column gives a
  :class:`FixedShapeTensorArray`.
- :class:`Array`, :class:`Tensor` and :class:`FixedShapeTensorArray` export
  through ``__dlpack__`` (to numpy, PyTorch, JAX, PyArrow, ...) and import any
  DLPack producer through ``from_dlpack``, JAX's legacy-only capsules included.
- :class:`Array` and :class:`FixedShapeTensorArray` export
  ``__arrow_c_schema__`` and ``__arrow_c_array__``, extension metadata
  included, so ``pa.array(ad_obj)`` gives the pyarrow equivalent zero-copy.

Exceptions
----------
Every exception raised by this package subclasses :class:`ArrowDLPackError`
and the builtin it stands for, so code written against PyArrow and numpy keeps
working:

- :class:`ArrowDLPackTypeError` (a ``TypeError``): export of data with nulls
  or of a type DLPack cannot carry; an object with no DLPack or Arrow protocol.
- :class:`ArrowDLPackValueError` (a ``ValueError``): an import that cannot
  become the requested object (not 1-D contiguous for ``Array``, not
  first-major or 0-d for ``FixedShapeTensorArray``, unsupported dtype, lanes
  other than 1, bad version, malformed tensor, a capsule already consumed);
  ``to_tensor()`` on data with nulls without ``allow_nulls=True``.
- :class:`ArrowDLPackBufferError` (a ``BufferError``): a device other than the
  CPU (``dl_device``, ``device``, a producer's data), a ``stream`` other than
  ``None``, or ``copy=False`` when a copy is needed.
- ``MemoryError`` when an allocation fails.
"""

from arrow_dlpack._arrow_dlpack import (
    Array,
    ArrowDLPackBufferError,
    ArrowDLPackError,
    ArrowDLPackTypeError,
    ArrowDLPackValueError,
    FixedShapeTensorArray,
    Tensor,
    __version__,
    array,
)

__all__ = [
    "Array",
    "ArrowDLPackBufferError",
    "ArrowDLPackError",
    "ArrowDLPackTypeError",
    "ArrowDLPackValueError",
    "FixedShapeTensorArray",
    "Tensor",
    "__version__",
    "array",
]
