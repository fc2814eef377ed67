"""``arrow_dlpack.ray``: Ray Data's Arrow blocks as the batches of tensors that
:func:`arrow_dlpack.batches` makes.

Ray Data hands a ``collate_fn`` of ``Dataset.iter_torch_batches`` a ``pyarrow.Table`` when the
function is an ``ArrowBatchCollateFn``; :func:`collate_fn` gives one that makes a batch of all
the table's rows with the loader's own assembly (the Rust ``arrow_dlpack_loader::collate``, on
the calling thread), so that Ray's batches become the tensors ``ad.batches`` makes from the same
rows (column groups, fixed-shape tensors, masks, sequences), without going through numpy:

>>> for batch in dataset.iter_torch_batches(batch_size=1024, collate_fn=ad.ray.collate_fn(
...         groups={"features": features}, columns=["label"])):
...     train_step(batch["features"], batch["label"])

The same object works in ``Dataset.map_batches(..., batch_format="pyarrow")`` with
``format="numpy"``. ``ad.batches(dataset, ...)`` over a ``ray.data.Dataset`` or a
``DataIterator`` reads its blocks through :func:`arrow_stream`.

This module imports Ray (and pyarrow, which Ray depends on); ``import arrow_dlpack`` does not
import it: ``ad.ray`` is loaded on first use.
"""

import inspect
from typing import Any, Dict, Iterator, Optional, Tuple

import pyarrow as pa
from ray.data.collate_fn import ArrowBatchCollateFn
from ray.data.extensions import ArrowTensorType, ArrowTensorTypeV2

from arrow_dlpack._arrow_dlpack import (
    ArrowDLPackTypeError,
    ArrowDLPackValueError,
    Tensor,
    _check_options,
    _collate,
)
from arrow_dlpack._options import CONVERTERS, PYTHON, check_format, collate_options, signature

__all__ = ["ArrowCollateFn", "arrow_stream", "collate_fn", "fixed_shape_tensors"]


class ArrowCollateFn(ArrowBatchCollateFn):
    """A Ray Data collate function (an ``ArrowBatchCollateFn``, so Ray hands it each batch as
    a ``pyarrow.Table``) that makes the batch's tensors with :func:`arrow_dlpack.batches`.

    The options are :func:`arrow_dlpack.batches`'s that say what a batch holds; cutting,
    shuffling and sharding are Ray's. ``format`` is ``"torch"`` (``torch.Tensor``s, what
    ``iter_torch_batches`` moves to its device), ``"numpy"`` (``numpy.ndarray``s, a batch that
    ``map_batches`` can return) or ``"dlpack"`` (:class:`arrow_dlpack.Tensor`s).
    """

    def __init__(self, *, format: str = "torch", **options: Any):
        # The keywords are the loader's options that say what a batch holds (see
        # `_SIGNATURE`, made from their declaration); binding them refuses any other.
        _SIGNATURE.bind(format=format, **options)
        super().__init__()
        self.format = check_format(format)
        # Every value is checked here, rather than at the first batch on one of Ray's threads;
        # the names need the batch's schema.
        _check_options(None, **options)
        #: The options given, as ``ad.batches`` hands them to the loader.
        self.options: Dict[str, Any] = dict(options)
        self._convert = CONVERTERS[self.format]
        self._last_schema: Optional[Tuple[pa.Schema, bool]] = None

    def tensors(self, table: Any) -> Dict[str, Tensor]:
        """The batch of every row of ``table`` (anything with ``__arrow_c_stream__``), as
        :class:`arrow_dlpack.Tensor`s: what :func:`arrow_dlpack.batches` makes of the same rows,
        made on the calling thread (the GIL released for large batches only). Every tensor is
        private memory (a copy of Ray's blocks, which torch would otherwise write through)."""
        if isinstance(table, pa.Table) and self._has_ray_tensors(table.schema):
            table = fixed_shape_tensors(table)
        # Ray's blocks live in its shared, immutable object store, and torch ignores the
        # read-only flag of a view: the batches are private copies, whatever `writable` says.
        return _collate(table, **{**self.options, "writable": True})

    def _has_ray_tensors(self, schema: pa.Schema) -> bool:
        """Whether ``schema`` has a column of one of Ray's tensor types; the answer for the
        last schema is kept, as every batch of a dataset usually has the same one."""
        last = self._last_schema
        if last is None or not schema.equals(last[0]):
            last = (schema, any(isinstance(t, _RAY_TENSOR_TYPES) for t in schema.types))
            # One assignment, so that Ray's threads calling at once see a consistent pair.
            self._last_schema = last
        return last[1]

    def __call__(self, batch: Any) -> Dict[str, Any]:
        tensors = self.tensors(batch)
        convert = self._convert()
        if convert is None:
            return tensors
        return {name: convert(tensor) for name, tensor in tensors.items()}

    def __getstate__(self) -> Dict[str, Any]:
        # Ray pickles the function into its workers; the converter is found again there.
        return {"format": self.format, "options": self.options}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._convert = CONVERTERS[self.format]
        self._last_schema = None

    def __repr__(self) -> str:
        shown = [f"{k}={v!r}" for k, v in self.options.items()]
        return f"ArrowCollateFn({', '.join(shown + [f'format={self.format!r}'])})"


#: The parameters of :class:`ArrowCollateFn` and :func:`collate_fn`: the loader's options that
#: say what a batch holds, then ``format``.
_SIGNATURE = signature(
    collate_options()
    + [PYTHON["format"]._replace(default="torch")],
    returns="ArrowCollateFn",
)

ArrowCollateFn.__init__.__signature__ = _SIGNATURE.replace(  # type: ignore[attr-defined]
    parameters=[
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *_SIGNATURE.parameters.values(),
    ],
    return_annotation="None",
)


#: Ray's fixed-shape tensor types, whose columns the loader reads as ``arrow.fixed_shape_tensor``.
_RAY_TENSOR_TYPES = (ArrowTensorType, ArrowTensorTypeV2)

def collate_fn(*, format: str = "torch", **options: Any) -> ArrowCollateFn:
    """A collate function for ``Dataset.iter_torch_batches(collate_fn=...)`` (and, with
    ``format="numpy"``, for ``map_batches(..., batch_format="pyarrow")``) that makes the tensors
    :func:`arrow_dlpack.batches` makes from the same rows. See :class:`ArrowCollateFn`; its
    keywords are those of ``ad.batches`` that say what a batch holds (``inspect.signature``
    lists them)."""
    return ArrowCollateFn(format=format, **options)


collate_fn.__signature__ = _SIGNATURE  # type: ignore[attr-defined]


def fixed_shape_tensors(table: Any) -> Any:
    """``table`` with Ray's own fixed-shape tensor columns (``ArrowTensorType``,
    ``ArrowTensorTypeV2``: what Ray makes of numpy columns of more than one dimension, each row
    a list of ``prod(shape)`` values) as ``arrow.fixed_shape_tensor`` columns, zero-copy; any
    other table or column as it is.

    A column with null rows, or rows of another length, is left as it is (and refused by the
    loader, naming it)."""
    if not isinstance(table, pa.Table):
        return table
    for index, field in enumerate(table.schema):
        if isinstance(field.type, _RAY_TENSOR_TYPES) and len(field.type.shape) > 0:
            tensor_type = pa.fixed_shape_tensor(
                field.type.storage_type.value_type, list(field.type.shape)
            )
            column = table.column(index)
            chunks = [_fixed_shape_chunk(chunk, tensor_type) for chunk in column.chunks]
            if all(chunk is not None for chunk in chunks):
                column = pa.chunked_array(chunks, type=tensor_type)
                table = table.set_column(index, field.with_type(tensor_type), column)
    return table


def _fixed_shape_chunk(chunk: Any, tensor_type: Any) -> Optional[pa.Array]:
    """One chunk of a Ray tensor column as an ``arrow.fixed_shape_tensor`` array sharing its
    values, or None when its rows are not all ``prod(shape)`` values."""
    storage = chunk.storage
    if storage.null_count:
        return None
    size = 1
    for extent in tensor_type.shape:
        size *= extent
    values = storage.flatten()  # the values the rows reference, a zero-copy slice
    if len(values) != len(storage) * size:
        return None
    cells = pa.FixedSizeListArray.from_arrays(values, size)
    return pa.ExtensionArray.from_storage(tensor_type, cells)


def is_dataset(source: Any) -> bool:
    """Whether ``source`` is a ``ray.data.Dataset`` or ``DataIterator``."""
    from ray.data import DataIterator, Dataset

    return isinstance(source, (Dataset, DataIterator))


def arrow_stream(
    dataset: Any, *, prefetch_blocks: int = 1, cast: bool = False
) -> pa.RecordBatchReader:
    """The blocks of a ``ray.data.Dataset`` or ``DataIterator`` as an Arrow stream (a
    ``pyarrow.RecordBatchReader``), read as the stream is read.

    Each block comes whole, as Ray stores it (``iter_batches(batch_size=None,
    batch_format="pyarrow")``: no re-batching and no copy; a block that Ray's object store holds
    is read in place), and at most ``prefetch_blocks`` blocks wait fetched ahead of the reader.
    Ray's fixed-shape tensor columns become ``arrow.fixed_shape_tensor`` columns
    (:func:`fixed_shape_tensors`).

    The stream declares the first block's schema, and every later block is checked against it
    as it comes (an Arrow stream carries one schema, and a reader reads each chunk with it): a
    block whose column names or types differ raises ``ValueError`` naming the block and the
    column. Ray infers each block's types from its own rows, so blocks of one dataset can differ
    (``int64`` in one, ``double`` in the next). With ``cast=True`` such a block is cast to the
    first block's types where the cast is exact (``int32`` to ``int64``; not ``3.5`` to an
    integer, which still raises); names must match either way.
    """
    blocks = iter(
        dataset.iter_batches(
            batch_size=None, batch_format="pyarrow", prefetch_batches=prefetch_blocks
        )
    )
    first = next(blocks, None)
    if first is None:
        # An empty dataset: its schema, if Ray knows one, and no rows.
        schema = dataset.schema() if hasattr(dataset, "schema") else None
        schema = getattr(schema, "base_schema", schema)
        return pa.RecordBatchReader.from_batches(schema or pa.schema([]), [])

    first = fixed_shape_tensors(first)
    schema = first.schema

    def record_batches() -> Iterator[pa.RecordBatch]:
        yield from first.to_batches()
        for index, block in enumerate(blocks, start=1):
            block = _as_first(fixed_shape_tensors(block), schema, index, cast)
            yield from block.to_batches()

    return pa.RecordBatchReader.from_batches(schema, record_batches())


def _as_first(block: Any, schema: pa.Schema, index: int, cast: bool) -> Any:
    """``block`` (block ``index`` of a dataset) checked against the first block's ``schema``:
    the same column names in the same order, and the same types, or with ``cast`` types that
    cast exactly; a ``ValueError`` naming the block and the column otherwise."""
    names, expected = block.schema.names, schema.names
    if names != expected:
        column = next(
            (f"column {b!r} where block 0 has {a!r}" for a, b in zip(expected, names) if a != b),
            None,
        )
        if column is None:
            extra = names[len(expected):] or expected[len(names):]
            which = "has" if len(names) > len(expected) else "lacks"
            column = f"{which} column {extra[0]!r}"
        raise ValueError(
            f"block {index} of the Ray dataset has {column}; expected the columns of block 0, "
            f"{expected}"
        )
    if block.schema.types == schema.types:
        return block
    for name, found, wanted in zip(names, block.schema.types, schema.types):
        if found == wanted:
            continue
        if not cast:
            raise ValueError(
                f"block {index} of the Ray dataset has column {name!r} of type {found}; "
                f"expected {wanted}, the type of block 0 (Ray infers each block's types from "
                f"its rows: give the dataset one schema, or pass cast=True to arrow_stream for "
                f"exact casts)"
            )
        original = block.column(name)
        try:
            column = original.cast(wanted, safe=True)
            # A safe cast still rounds floats (0.1, 1e300 to float32): exact only if casting
            # back gives every value again.
            exact = _same_values(column.cast(found, safe=False), original)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise ValueError(
                f"block {index} of the Ray dataset has column {name!r} of type {found}, which "
                f"does not cast exactly to {wanted}, the type of block 0: {error}"
            ) from error
        if not exact:
            raise ValueError(
                f"block {index} of the Ray dataset has column {name!r} of type {found}, which "
                f"does not cast exactly to {wanted}, the type of block 0: some values change"
            )
        block = block.set_column(names.index(name), schema.field(name), column)
    return block


def _same_values(back: Any, original: Any) -> bool:
    """Whether ``back`` holds ``original``'s values and nulls (NaN where it has NaN)."""
    if back.equals(original):
        return True
    if not pa.types.is_floating(original.type) or back.null_count != original.null_count:
        return False
    import pyarrow.compute as pc

    same = pc.or_kleene(pc.equal(back, original), pc.and_(pc.is_nan(back), pc.is_nan(original)))
    return pc.all(same).as_py() is not False
