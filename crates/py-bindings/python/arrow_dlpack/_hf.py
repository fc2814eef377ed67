"""Hugging Face ``datasets`` objects as sources of the loader.

A ``datasets.Dataset`` becomes an Arrow stream over its table (memory-mapped cache files or in
memory), read without a copy unless the dataset has an indices mapping (``shuffle``,
``select``, ``filter``, ``train_test_split``), whose rows are taken in its order, one slice of the
mapping at a time.
A ``datasets.IterableDataset`` becomes the Arrow stream of its batches
(``with_format("arrow").iter``).
``Array2D`` ... ``Array5D`` columns (nested lists in storage) become ``arrow.fixed_shape_tensor``
columns over the same values, after their offsets are checked to be regular.

Nothing here imports ``datasets``: its objects are recognised by the names of their classes.
"""

from typing import Any, Dict, Iterator, List, Optional

import pyarrow as pa  # type: ignore[import-untyped]

from arrow_dlpack._arrow_dlpack import ArrowDLPackTypeError, ArrowDLPackValueError

__all__ = ["kind", "hf_stream"]

#: The rows of a dataset's table converted at once (its array columns viewed as tensors), or
#: taken through its indices mapping; and the rows per record batch asked of an
#: ``IterableDataset``.
SLICE_ROWS = 65_536
ITERABLE_ROWS = 1_000

#: The schema metadata key under which the stream of a ``Dataset`` carries its fingerprint, so
#: that a saved state (which digests the schema of a stream) identifies the dataset.
FINGERPRINT_KEY = b"arrow_dlpack.datasets_fingerprint"

_ARRAY_TYPES = {f"Array{n}DExtensionType" for n in range(2, 6)}


def kind(source: Any) -> Optional[str]:
    """The name of the ``datasets`` class that ``source`` is (or subclasses), or None."""
    for cls in type(source).__mro__:
        if cls.__module__.startswith("datasets.") and cls.__name__ in (
            "Dataset",
            "IterableDataset",
            "DatasetDict",
            "IterableDatasetDict",
        ):
            return str(cls.__name__)
    return None


def hf_stream(source: Any) -> Any:
    """``source`` as an object with ``__arrow_c_stream__`` (and ``num_rows`` for a Dataset);
    a ``TypeError`` for a dict of splits; any other source as it is."""
    found = kind(source)
    if found is None:
        return source
    if found in ("DatasetDict", "IterableDatasetDict"):
        splits = ", ".join(repr(str(name)) for name in source)
        first = next(iter(source), "train")
        raise ArrowDLPackTypeError(
            f"{'an' if found.startswith('I') else 'a'} {found} holds the splits "
            f"{splits or '(none)'}; pass one of them, "
            f"ds[{str(first)!r}]"
        )
    if found == "Dataset":
        _refuse_transform(source)
        return _DatasetStream(source)
    return _IterableStream(source)


def _refuse_transform(dataset: Any) -> None:
    """Refuses a ``Dataset`` with a transform (``set_transform``, ``with_transform``): it runs in
    Python on the rows that indexing returns, while the loader reads the Arrow table, which it
    leaves unchanged, so the batches would silently hold the untransformed values. (A format,
    ``with_format("torch")``, changes only what indexing returns, and is read through.)"""
    format_ = getattr(dataset, "format", None)
    if isinstance(format_, dict) and format_.get("type") == "custom":
        raise ArrowDLPackValueError(
            "the Dataset has a transform (set_transform or with_transform), which runs in "
            "Python on the rows that indexing returns; the loader reads the dataset's Arrow "
            "table, which the transform does not change: apply it with ds.map(fn, "
            "batched=True), which writes its output as Arrow, or remove it with "
            "ds.reset_format()"
        )


def _array_columns(schema: pa.Schema) -> List[int]:
    """The indices of the ``Array2D`` ... ``Array5D`` columns of ``schema``."""
    return [
        index
        for index, field in enumerate(schema)
        if type(field.type).__name__ in _ARRAY_TYPES
    ]


def _tensor_type(field: pa.Field) -> pa.DataType:
    """The ``arrow.fixed_shape_tensor`` type of an ``ArrayND`` field."""
    shape = tuple(field.type.shape)
    if any(dim is None for dim in shape):
        raise ArrowDLPackTypeError(
            f"column {field.name!r} is an array feature of shape {shape} with a variable "
            "dimension; expected a fixed shape (a variable one is a list column for sequences=)"
        )
    if any(dim == 0 for dim in shape):
        raise ArrowDLPackTypeError(
            f"column {field.name!r} is an array feature of shape {shape}, which holds no values; "
            "expected every dimension at least 1"
        )
    size = 1
    for dim in shape:
        size *= dim
    if size >= 2**31:
        raise ArrowDLPackTypeError(
            f"column {field.name!r} is an array feature of shape {shape}, of {size} values a "
            "row; expected fewer than 2**31 (an Arrow fixed-size list's limit)"
        )
    storage = field.type.storage_type
    for _ in shape:
        storage = storage.value_type
    return pa.fixed_shape_tensor(storage, list(shape))


def _first(mask: Any) -> int:
    """The index of the first true value of a (chunked) boolean array."""
    import numpy as np

    return int(np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False)))[0])


def _tensor_column(name: str, column: Any, tensor_type: Any, first_row: int) -> Any:
    """An ``ArrayND`` column (nested lists in storage, a chunked array) as an
    ``arrow.fixed_shape_tensor`` column over the same values, checked level by level with one
    pass of Arrow's kernels over every chunk: each list of each level holds exactly its
    dimension's items. A null or ragged row is a ``ValueError`` naming it (counted from
    ``first_row``, the column's first row in the source)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    shape = tuple(tensor_type.shape)
    try:
        # A cache file is not validated when datasets maps it; Arrow's kernels below trust
        # their input (a corrupt offset aborts the process), so the column is checked first.
        column.validate(full=True)
    except pa.ArrowException as error:
        raise ArrowDLPackValueError(
            f"column {name!r} (rows from {first_row}) is not valid Arrow data: {error}"
        ) from None
    level = column
    if isinstance(column.type, pa.ExtensionType):
        level = column.cast(column.type.storage_type)
    # Items of the current level that make one row of the column.
    per_row = 1
    for depth, dim in enumerate(shape):
        if level.null_count:
            what = "null" if depth == 0 else "holds a null"
            row = first_row + _first(pc.is_null(level)) // per_row
            raise ArrowDLPackValueError(
                f"row {row} of column {name!r} {what}; an array feature needs a value of shape "
                f"{shape} in every row"
            )
        lengths = pc.list_value_length(level)
        extremes = pc.min_max(lengths)
        if len(level) and (extremes["min"].as_py(), extremes["max"].as_py()) != (dim, dim):
            at = _first(pc.not_equal(lengths, dim))
            found = lengths[at].as_py()
            raise ArrowDLPackValueError(
                f"row {first_row + at // per_row} of column {name!r} is ragged: a list of "
                f"{found} items at depth {depth}; expected {dim} (shape {shape})"
            )
        level = pc.list_flatten(level)
        per_row *= dim
    # Flattened chunk by chunk, each chunk of values holds whole rows.
    chunks = [
        pa.ExtensionArray.from_storage(tensor_type, pa.FixedSizeListArray.from_arrays(values, per_row))
        for values in level.chunks
    ]
    return pa.chunked_array(chunks, tensor_type)


def _tensor_table(
    table: pa.Table, columns: List[int], types: Dict[int, Any], schema: Any, first_row: int
) -> pa.Table:
    """``table`` with its ``ArrayND`` columns as ``arrow.fixed_shape_tensor`` columns over the
    same values (no copy); ``types`` and ``schema`` are worked out once per stream, since each
    access to a ``datasets`` extension type deserialises it."""
    if not columns:
        return table
    arrays = list(table.columns)
    for index in columns:
        arrays[index] = _tensor_column(
            schema.field(index).name, arrays[index], types[index], first_row
        )
    return pa.Table.from_arrays(arrays, schema=schema)


def _tensor_schema(schema: pa.Schema, types: Dict[int, Any]) -> pa.Schema:
    """``schema`` with the ``ArrayND`` fields as tensor fields, metadata kept."""
    fields = [
        pa.field(field.name, types[index], field.nullable, field.metadata)
        if index in types
        else field
        for index, field in enumerate(schema)
    ]
    return pa.schema(fields, metadata=schema.metadata)


class _DatasetStream:
    """A ``datasets.Dataset`` as an Arrow stream: its table, or its rows taken through its
    indices mapping; the dataset's fingerprint in the schema's metadata."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        table = dataset.data.table
        indices = dataset._indices
        self.num_rows = int(indices.num_rows if indices is not None else table.num_rows)
        metadata = dict(table.schema.metadata or {})
        metadata[FINGERPRINT_KEY] = str(dataset._fingerprint).encode()
        self.table = table.replace_schema_metadata(metadata)
        self.columns = _array_columns(self.table.schema)
        self.types = {index: _tensor_type(self.table.schema.field(index)) for index in self.columns}
        self.schema = _tensor_schema(self.table.schema, self.types)

    def _batches(self) -> Iterator[pa.RecordBatch]:
        indices = self.dataset._indices
        row = 0
        # Converted a slice at a time: the checks of a slice's array columns are a few passes
        # of Arrow's kernels, rather than Python work per record batch (a dataset's cache
        # holds record batches of 1,000 rows).
        if indices is None:
            for start in range(0, self.table.num_rows, SLICE_ROWS):
                part = self.table.slice(start, SLICE_ROWS)
                converted = _tensor_table(part, self.columns, self.types, self.schema, start)
                yield from converted.to_batches()
            return
        mapping = indices.table.column(0) if hasattr(indices, "table") else indices.column(0)
        for start in range(0, len(mapping), SLICE_ROWS):
            taken = self.table.take(mapping.slice(start, SLICE_ROWS))
            yield from _tensor_table(taken, self.columns, self.types, self.schema, row).to_batches()
            row += taken.num_rows

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        if not self.columns and self.dataset._indices is None:
            return self.table.__arrow_c_stream__(requested_schema)
        reader = pa.RecordBatchReader.from_batches(self.schema, self._batches())
        return reader.__arrow_c_stream__(requested_schema)

    def __repr__(self) -> str:
        return f"<arrow stream of {type(self.dataset).__name__} of {self.num_rows} rows>"


class _IterableStream:
    """A ``datasets.IterableDataset`` as the Arrow stream of its batches, read as they come."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        tables = iter(self.dataset.with_format("arrow").iter(batch_size=ITERABLE_ROWS))
        first = next(tables, None)
        if first is None:
            features = getattr(self.dataset, "features", None)
            if features is None:
                raise ArrowDLPackValueError(
                    "the IterableDataset is empty and does not declare its features; "
                    "expected at least one row or known features"
                )
            schema = features.arrow_schema
            columns = _array_columns(schema)
            types = {index: _tensor_type(schema.field(index)) for index in columns}
            reader = pa.RecordBatchReader.from_batches(_tensor_schema(schema, types), [])
            return reader.__arrow_c_stream__(requested_schema)
        columns = _array_columns(first.schema)
        types = {index: _tensor_type(first.schema.field(index)) for index in columns}
        schema = _tensor_schema(first.schema, types)

        def batches() -> Iterator[pa.RecordBatch]:
            table, row = first, 0
            while table is not None:
                yield from _tensor_table(table, columns, types, schema, row).to_batches()
                row += table.num_rows
                table = next(tables, None)

        reader = pa.RecordBatchReader.from_batches(schema, batches())
        return reader.__arrow_c_stream__(requested_schema)

    def __repr__(self) -> str:
        return f"<arrow stream of {type(self.dataset).__name__}>"
