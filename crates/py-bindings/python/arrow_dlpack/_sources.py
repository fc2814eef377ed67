"""The in-memory objects that ``ad.batches`` takes beside paths and Arrow streams: a pandas
DataFrame (as pyarrow converts it, which is what pandas' own ``__arrow_c_stream__`` does), a list
of them, and a polars LazyFrame refused with what to do instead.

A pandas DataFrame becomes a ``pyarrow.Table`` here rather than being read through its stream,
so that the loader knows its rows and the null counts of its columns when it is planned (a
stream says neither); nothing is imported for any other object.
"""

import importlib
from typing import Any


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
    converts them (float NaN become nulls), without the index: a filtered or sorted frame's
    index is the rows' old positions, not data to train on (``reset_index()`` makes it a
    column)."""
    try:
        pyarrow = importlib.import_module("pyarrow")
    except ImportError as error:
        raise ImportError(
            "a pandas DataFrame is read through pyarrow, which is not installed; install "
            "pyarrow, or pass a pyarrow Table or a polars DataFrame"
        ) from error
    return pyarrow.Table.from_pandas(frame, preserve_index=False)


def _refuse_lazy(obj: Any) -> None:
    """Raises ``TypeError`` for a polars LazyFrame, which holds a query, not data."""
    if _module(obj) == "polars" and type(obj).__name__ == "LazyFrame":
        if not hasattr(obj, "__arrow_c_stream__"):
            raise TypeError(
                "a polars LazyFrame is a query, not data; call .collect() on it and pass the "
                "DataFrame"
            )


def as_source(source: Any) -> Any:
    """``source`` as the native loader reads it: a pandas DataFrame (or a list or tuple of them,
    alone or among other objects) as pyarrow Tables; a polars LazyFrame refused; anything else
    as it is."""
    if isinstance(source, (list, tuple)):
        if not any(_is_pandas_frame(item) or _module(item) == "polars" for item in source):
            return source
        for item in source:
            _refuse_lazy(item)
        return [_from_pandas(item) if _is_pandas_frame(item) else item for item in source]
    _refuse_lazy(source)
    if _is_pandas_frame(source):
        return _from_pandas(source)
    return source
