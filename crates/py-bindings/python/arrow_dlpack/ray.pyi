"""Type stubs of ``arrow_dlpack.ray``: Ray Data's Arrow blocks as batches of tensors, made by
:func:`arrow_dlpack.batches`.

Written by hand and checked against the module by ``mypy.stubtest``.
"""

from typing import Any, Dict, Mapping, Optional, Sequence, Union

from ray.data.collate_fn import ArrowBatchCollateFn

from arrow_dlpack._arrow_dlpack import Tensor

__all__ = ["ArrowCollateFn", "arrow_stream", "collate_fn", "fixed_shape_tensors"]

class ArrowCollateFn(ArrowBatchCollateFn):
    """A Ray Data collate function (an ``ArrowBatchCollateFn``, so Ray hands it each batch as
    a ``pyarrow.Table``) that makes the batch's tensors as :func:`arrow_dlpack.batches` makes
    them from the same rows.

    ``format`` is ``"torch"`` (``torch.Tensor``s, for ``iter_torch_batches``), ``"numpy"``
    (``numpy.ndarray``s, a batch ``map_batches`` can return) or ``"dlpack"``
    (:class:`arrow_dlpack.Tensor`s)."""

    format: str
    options: Dict[str, Any]
    """The options given, as ``ad.batches`` hands them to the loader."""

    def __init__(
        self,
        *,
        columns: Optional[Sequence[str]] = None,
        groups: Optional[Mapping[str, Union[Sequence[str], Mapping[str, Any]]]] = None,
        masks: Optional[Sequence[str]] = None,
        allow_nulls: bool = False,
        null_to_nan: Union[bool, Sequence[str]] = False,
        row_major: bool = True,
        writable: bool = False,
        sequences: Optional[Mapping[str, Union[str, Mapping[str, Any]]]] = None,
        images: Optional[Mapping[str, Mapping[str, Any]]] = None,
        image_root: Optional[str] = None,
        format: str = "torch",
    ) -> None: ...
    def tensors(self, table: Any) -> Dict[str, Tensor]:
        """The batch of every row of ``table`` (anything with ``__arrow_c_stream__``), as
        :class:`arrow_dlpack.Tensor`s, made on the calling thread."""
    def __call__(self, batch: Any) -> Any:
        """The batch of ``batch``'s rows in this function's ``format``: a dict from name to
        tensor (or array)."""
    def __getstate__(self) -> Dict[str, Any]: ...
    def __setstate__(self, state: Dict[str, Any]) -> None: ...

def collate_fn(
    *,
    columns: Optional[Sequence[str]] = None,
    groups: Optional[Mapping[str, Union[Sequence[str], Mapping[str, Any]]]] = None,
    masks: Optional[Sequence[str]] = None,
    allow_nulls: bool = False,
    null_to_nan: Union[bool, Sequence[str]] = False,
    row_major: bool = True,
    writable: bool = False,
    sequences: Optional[Mapping[str, Union[str, Mapping[str, Any]]]] = None,
    images: Optional[Mapping[str, Mapping[str, Any]]] = None,
    image_root: Optional[str] = None,
    format: str = "torch",
) -> ArrowCollateFn:
    """A collate function for ``Dataset.iter_torch_batches(collate_fn=...)`` (and, with
    ``format="numpy"``, for ``map_batches(..., batch_format="pyarrow")``) that makes the tensors
    :func:`arrow_dlpack.batches` makes from the same rows."""

def fixed_shape_tensors(table: Any) -> Any:
    """``table`` with Ray's own fixed-shape tensor columns as ``arrow.fixed_shape_tensor``
    columns, zero-copy; any other table or column as it is."""

def is_dataset(source: Any) -> bool:
    """Whether ``source`` is a ``ray.data.Dataset`` or ``DataIterator``."""

def arrow_stream(dataset: Any, *, prefetch_blocks: int = 1, cast: bool = False) -> Any:
    """The blocks of a ``ray.data.Dataset`` or ``DataIterator`` as an Arrow stream (a
    ``pyarrow.RecordBatchReader``), read as the stream is read, at most ``prefetch_blocks``
    blocks fetched ahead; each block checked against the first (``cast``: exact casts)."""
