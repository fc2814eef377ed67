"""The in-memory objects that ``ad.batches`` takes beside paths and Arrow streams: a pandas
DataFrame (as pyarrow converts it, which is what pandas' own ``__arrow_c_stream__`` does), a list
of them, a pyarrow ``RecordBatchReader`` (its batches checked against its schema), and a polars
LazyFrame refused with what to do instead.

A pandas DataFrame becomes a ``pyarrow.Table`` here rather than being read through its stream,
so that the loader knows its rows and the null counts of its columns when it is planned (a
stream says neither); nothing is imported for any other object.
"""

import importlib
import os
import weakref
from typing import Any, NoReturn, Optional

from arrow_dlpack._arrow_dlpack import ArrowDLPackTypeError, ArrowDLPackValueError

#: The readers that a loader began to read: a reader is read once, and what an earlier loader
#: left of it is not the stream a new loader (or a state saved over the whole stream) expects.
_READ: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _module(obj: Any) -> str:
    """The top-level package of ``obj``'s class (``"pandas"``, ``"polars"``, ...)."""
    return type(obj).__module__.partition(".")[0]


def _is_pandas_frame(obj: Any) -> bool:
    if _module(obj) != "pandas":
        return False
    # Imported by name: pandas is optional and ships no type information of its own.
    pandas = importlib.import_module("pandas")
    return isinstance(obj, pandas.DataFrame)


def _from_pandas(frame: Any) -> Any:
    """``frame`` as a ``pyarrow.Table``, its columns as ``pandas.DataFrame.__arrow_c_stream__``
    converts them but for the NaN of numpy float columns, which stay NaN (pyarrow makes them
    nulls, which the loader refuses by default: a pandas user's NaN is a number, as
    ``frame.to_numpy()`` gives it; the missing values of pandas' nullable dtypes, ``pd.NA``,
    stay nulls), without the index: a filtered or sorted frame's index is the rows' old
    positions, not data to train on (``reset_index()`` makes it a column)."""
    try:
        pyarrow = importlib.import_module("pyarrow")
    except ImportError as error:
        raise ImportError(
            "a pandas DataFrame is read through pyarrow, which is not installed; install "
            "pyarrow, or pass a pyarrow Table or a polars DataFrame"
        ) from error
    try:
        table = pyarrow.Table.from_pandas(frame, preserve_index=False)
    except ValueError as error:
        # pyarrow's refusal (duplicate column names, say), as this package's class.
        raise ArrowDLPackValueError(f"cannot read the pandas DataFrame: {error}") from error
    numpy = importlib.import_module("numpy")
    for position, dtype in enumerate(frame.dtypes):
        float_column = isinstance(dtype, numpy.dtype) and dtype.kind == "f"
        if float_column and table.column(position).null_count:
            field = table.field(position)
            values = frame.iloc[:, position].to_numpy()
            table = table.set_column(
                position, field, pyarrow.array(values, type=field.type, from_pandas=False)
            )
    return table


def _refuse_lazy(obj: Any) -> None:
    """Raises ``TypeError`` for a polars LazyFrame, which holds a query, not data."""
    if _module(obj) == "polars" and type(obj).__name__ == "LazyFrame":
        if not hasattr(obj, "__arrow_c_stream__"):
            raise TypeError(
                "a polars LazyFrame is a query, not data; call .collect() on it and pass the "
                "DataFrame"
            )


def _is_pyarrow_reader(obj: Any) -> bool:
    return _module(obj) == "pyarrow" and type(obj).__name__ == "RecordBatchReader"


class ReaderFailures:
    """The first exception that a wrapped pyarrow ``RecordBatchReader`` of a source raised (its
    generator's, or a batch refused by its schema check), kept so that the loader can raise it
    as it was, where the Arrow C stream interface carries only its message."""

    __slots__ = ("error", "chunk")

    def __init__(self) -> None:
        self.error: Optional[BaseException] = None
        self.chunk = 0

    def raise_instead(self, error: BaseException) -> NoReturn:
        """Raises the exception kept, with a note that says where the loader met it, in place of
        ``error`` (the loader's, which carries only its message); ``error`` when none is kept."""
        kept = self.error
        if kept is None:
            raise error
        self.error = None  # raised once; the loader has ended with it
        try:
            kept.add_note(
                f"(raised while the loader read record batch {self.chunk} of a RecordBatchReader)"
            )
        except Exception:  # noqa: BLE001 - a `__notes__` that is not a list, or a frozen class
            pass  # the exception goes on as it was, without the note
        raise kept from None


def _checked_reader(reader: Any, failures: Optional[ReaderFailures] = None) -> Any:
    """``reader`` (a ``pyarrow.RecordBatchReader``) as a reader whose every record batch is
    checked against its schema before it is exported.

    The Arrow C stream interface exports a chunk without its type: the consumer reads it with
    the schema the stream declared. pyarrow's ``RecordBatchReader.from_batches(schema, batches)``
    does not check its batches against ``schema``, so a generator's batch of other types was
    read with the declared ones: a float column's bits as integers, and narrower values read
    past their buffer's end (a crash). ``reader.read_all()`` refuses such a batch; so does this
    reader, naming the batch and the column. The first exception raised while it is read is
    kept in ``failures``, for the loader to raise as it was."""
    pyarrow = importlib.import_module("pyarrow")
    schema = reader.schema

    def batches() -> Any:
        read = 0  # the batches given, and so the index of the one being read
        try:
            for batch in reader:
                if not batch.schema.equals(schema, check_metadata=False):
                    raise ArrowDLPackTypeError(_schema_difference(read, batch.schema, schema))
                yield batch
                read += 1
        except BaseException as error:
            if failures is not None and failures.error is None and not isinstance(
                error, GeneratorExit
            ):
                failures.error, failures.chunk = error, read
            raise

    return pyarrow.RecordBatchReader.from_batches(schema, batches())


def _schema_difference(index: int, got: Any, declared: Any) -> str:
    """What makes record batch ``index``'s schema ``got`` other than the reader's ``declared``."""
    where = f"record batch {index} of the RecordBatchReader"
    if got.names != declared.names:
        return f"{where} has the columns {got.names}; the reader's schema declares {declared.names}"
    for got_field, field in zip(got, declared):
        if not got_field.equals(field):
            return (
                f"{where} has column {field.name!r} of type {got_field.type}"
                f"{'' if got_field.nullable else ' not null'}; the reader's schema declares "
                f"{field.type}{'' if field.nullable else ' not null'} (a reader's chunks are read "
                "with its schema: make the batches of that schema, or declare theirs)"
            )
    return f"{where} has another schema than the reader declares"


def _as_read(item: Any, failures: Optional[ReaderFailures]) -> Any:
    """One object of a source as the native loader reads it (see :func:`as_source`)."""
    _refuse_lazy(item)
    if _is_pandas_frame(item):
        return _from_pandas(item)
    if _is_pyarrow_reader(item):
        return _checked_reader(item, failures)
    return item


def as_source(source: Any, failures: Optional[ReaderFailures] = None) -> Any:
    """``source`` as the native loader reads it: a pandas DataFrame (or a list or tuple of them,
    alone or among other objects) as pyarrow Tables; a pyarrow ``RecordBatchReader`` as one
    whose batches are checked against its schema, its first exception kept in ``failures``; a
    polars LazyFrame refused; anything else as it is."""
    if isinstance(source, (list, tuple)):
        if not any(
            _is_pandas_frame(item) or _module(item) in ("polars", "pyarrow") for item in source
        ):
            return source
        return [_as_read(item, failures) for item in source]
    return _as_read(source, failures)


def read_once(source: Any) -> bool:
    """Whether ``source`` is read once: a reader (pyarrow's ``RecordBatchReader``, or any object
    with ``read_next_batch``), which its first pass consumes."""
    return hasattr(source, "read_next_batch") or type(source).__name__ == "RecordBatchReader"


def _readers(source: Any) -> Any:
    items = source if isinstance(source, (list, tuple)) else (source,)
    return [item for item in items if read_once(item)]


def refuse_read_again(source: Any) -> None:
    """Raises ``ValueError`` for a reader (alone or in a list) that an earlier loader began to
    read, or that a list names twice: it would give what was left of it (nothing, once read to
    its end), silently. A reader that cannot be weakly referenced is not tracked."""
    readers = _readers(source)
    for index, reader in enumerate(readers):
        if any(other is reader for other in readers[:index]):
            raise ArrowDLPackValueError(
                f"the list names the same {type(reader).__name__} twice, and a reader is read "
                "once (its second place would read what the first left: nothing); pass each "
                "reader once"
            )
        try:
            seen = reader in _READ
        except TypeError:
            continue
        if seen:
            raise ArrowDLPackValueError(
                f"this {type(reader).__name__} was read by an earlier loader, and a reader is "
                "read once (what is left of it is not the stream): pass a new reader, or a "
                "table, a dataset or files, which are read again"
            )


def remember_read(source: Any) -> None:
    """Records that a loader began to read the readers of ``source``."""
    for reader in _readers(source):
        try:
            _READ.add(reader)
        except TypeError:
            pass


def files_only(source: Any) -> bool:
    """Whether ``source`` is a path or URL, or a list of them: files the loader maps privately
    (copy-on-write) or decodes into its own memory, so that a write through a view never reaches
    another owner's memory."""
    if isinstance(source, (str, os.PathLike)):
        return True
    return (
        isinstance(source, (list, tuple))
        and len(source) > 0
        and all(isinstance(item, (str, os.PathLike)) for item in source)
    )
