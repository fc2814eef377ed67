"""The options of :func:`arrow_dlpack.batches`, :class:`arrow_dlpack.BatchDataset` and
:func:`arrow_dlpack.ray.collate_fn`, each declared once.

The loader's options are the fields of the Rust ``BatchSpec``, declared there with their types
and defaults; the native module lists them (``_Batches.OPTIONS``) and checks every value.
This module adds the options that only Python can act on (:data:`PYTHON`: the shard of a
``torch.distributed`` rank and a DataLoader worker, progress, storage options), with their checks
in :func:`check_python_options`, and says where Python works a spec option out itself
(:data:`PYTHON_DEFAULTS`, :data:`DERIVED`). The signatures of ``batches``, ``BatchDataset`` and
the stubs are written out for type checkers and held against these tables by
``tests/test_loader_options.py``; ``ad.ray``'s are made from them (:func:`signature`).
"""

import inspect
import operator
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional

from arrow_dlpack._arrow_dlpack import ArrowDLPackTypeError, ArrowDLPackValueError, _Batches


class Option(NamedTuple):
    """One option, as a signature shows it."""

    #: The keyword.
    name: str
    #: The default, as the signatures spell it.
    default: Any
    #: The annotation, as the signatures and stubs spell it (``typing`` names).
    annotation: str
    #: ``"batch"`` (what a batch holds), ``"stream"`` (how the source is cut, ordered, sharded
    #: and read) or ``"python"`` (acted on by Python only).
    scope: str
    #: One sentence on what it does.
    summary: str


#: The options of the Rust ``BatchSpec``, in declaration order.
RUST: Dict[str, Option] = {
    name: Option(name, entry["default"], entry["annotation"], entry["scope"], entry["summary"])
    for name, entry in _Batches.OPTIONS.items()
}

#: Options of the spec that Python works out from others: the shard and the number of ranks,
#: from ``rank``, ``world_size``, ``split_workers`` and the DataLoader worker the loader runs in.
DERIVED = ("shard_index", "num_shards", "num_ranks")

#: Options of the spec whose default in Python is ``None``, meaning "work it out": a seed drawn
#: (or shared by the process group, or taken from the ``state``), the ``state``'s epoch.
PYTHON_DEFAULTS: Dict[str, Option] = {
    "seed": RUST["seed"]._replace(default=None, annotation="Optional[int]"),
    "epoch": RUST["epoch"]._replace(default=None, annotation="Optional[int]"),
}

#: The options that only Python acts on, in the order the signatures take them: ``rank``,
#: ``world_size`` and ``split_workers`` where the spec has its shard, the others last.
PYTHON: Dict[str, Option] = {
    option.name: option
    for option in (
        Option(
            "rank",
            None,
            "Optional[int]",
            "python",
            "This process's rank (default: an initialised torch.distributed group's, else 0).",
        ),
        Option(
            "world_size",
            None,
            "Optional[int]",
            "python",
            "The number of ranks (default: an initialised torch.distributed group's, else 1).",
        ),
        Option(
            "split_workers",
            None,
            "Optional[bool]",
            "python",
            "Inside a DataLoader worker, True reads only this worker's share of the rank's "
            "data, False all of it; None (the default) is refused there.",
        ),
        Option(
            "format",
            "dlpack",
            "str",
            "python",
            "The kind of the tensors handed out: 'dlpack' (arrow_dlpack.Tensor), 'torch' "
            "(torch.Tensor, private memory) or 'numpy' (numpy.ndarray).",
        ),
        Option(
            "progress",
            False,
            "bool",
            "python",
            "Show rows per second on standard error while a terminal watches.",
        ),
        Option(
            "storage_options",
            None,
            "Optional[Mapping[str, Any]]",
            "python",
            "Options of object storage (endpoint, region, credentials, timeouts, retries).",
        ),
    )
}

#: The options that the signatures take by position too, after ``source``.
POSITIONAL = ("batch_size",)

#: Where ``rank``, ``world_size`` and ``split_workers`` go in the signatures: in place of the
#: spec's shard.
_SHARD_OPTIONS = ("rank", "world_size", "split_workers")


def batches_options() -> List[Option]:
    """The keyword-only options of :func:`arrow_dlpack.batches` (after ``source`` and the
    :data:`POSITIONAL` ones), in order: the spec's (with Python's defaults where Python works
    them out, and the Python options in place of the shard), then ``progress`` and
    ``storage_options``."""
    out: List[Option] = []
    for name, option in RUST.items():
        if name in POSITIONAL:
            continue
        if name == DERIVED[0]:
            out.extend(PYTHON[shard] for shard in _SHARD_OPTIONS)
        elif name not in DERIVED:
            out.append(PYTHON_DEFAULTS.get(name, option))
    out.extend(option for name, option in PYTHON.items() if name not in _SHARD_OPTIONS)
    return out


def dataset_options() -> List[Option]:
    """The options of :class:`arrow_dlpack.BatchDataset` after ``source``: those of
    :func:`batches_options` but ``progress`` (a DataLoader shows its own) and ``format`` (its
    batches are torch tensors)."""
    return [option for option in batches_options() if option.name not in ("progress", "format")]


def _torch_converter() -> Callable[[Any], Any]:
    from torch import from_dlpack

    return from_dlpack


def _numpy_converter() -> Callable[[Any], Any]:
    from numpy import from_dlpack

    return from_dlpack


#: Per ``format`` (of :func:`arrow_dlpack.batches` and :mod:`arrow_dlpack.ray`), what gives the
#: function that converts each :class:`arrow_dlpack.Tensor` of a batch (None: none); the
#: framework is imported when a converter is asked for, not before.
CONVERTERS: Dict[str, Callable[[], Optional[Callable[[Any], Any]]]] = {
    "torch": _torch_converter,
    "numpy": _numpy_converter,
    "dlpack": lambda: None,
}


def check_format(format: Any) -> str:
    """``format`` if it is one of :data:`CONVERTERS`; ``ValueError`` naming them otherwise."""
    if not isinstance(format, str) or format not in CONVERTERS:
        expected = ", ".join(map(repr, CONVERTERS))
        raise ArrowDLPackValueError(f"format is {format!r}; expected one of {expected}")
    return format


def converter(format: Any) -> Optional[Callable[[Any], Any]]:
    """The converter of ``format`` (checked by :func:`check_format`), its framework imported."""
    return CONVERTERS[check_format(format)]()


def collate_options() -> List[Option]:
    """The options of :func:`arrow_dlpack.ray.collate_fn`: the spec's that say what a batch
    holds (Ray cuts, orders and shards the batches itself)."""
    return [option for option in RUST.values() if option.scope == "batch"]


def signature(
    options: List[Option],
    first: Optional[List[inspect.Parameter]] = None,
    returns: Optional[str] = None,
) -> inspect.Signature:
    """A signature of ``first`` (positional parameters) and then ``options`` as keyword-only
    parameters, each annotated with its annotation's text, returning ``returns`` (a type's
    name)."""
    parameters = list(first or [])
    parameters.extend(
        inspect.Parameter(
            option.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=option.default,
            annotation=option.annotation,
        )
        for option in options
    )
    return_annotation = inspect.Signature.empty if returns is None else returns
    return inspect.Signature(parameters, return_annotation=return_annotation)


def _index(name: str, value: Any) -> int:
    """``value`` as an int: a Python ``int`` or anything with ``__index__`` (a numpy integer),
    not a bool."""
    if isinstance(value, bool):
        raise ArrowDLPackTypeError(f"{name} is bool; expected int")
    try:
        return operator.index(value)
    except TypeError:
        raise ArrowDLPackTypeError(f"{name} is {type(value).__name__}; expected int") from None


def _flag(name: str, value: Any) -> bool:
    """``value`` as a bool: a Python ``bool`` or numpy's."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise ArrowDLPackTypeError(f"{name} is {type(value).__name__}; expected bool")


def check_python_options(values: Mapping[str, Any]) -> Dict[str, Any]:
    """The Python options in ``values`` (the names of :data:`PYTHON` that it has), checked and
    converted: ``rank`` and ``world_size`` ints given together (``0 <= rank < world_size``),
    ``split_workers`` a bool or None, ``format`` one of :data:`CONVERTERS`, ``progress`` a bool,
    ``storage_options`` a mapping or None."""
    out = dict(values)
    rank, world_size = out.get("rank"), out.get("world_size")
    if (rank is None) != (world_size is None):
        raise ArrowDLPackValueError("rank and world_size go together; give both or neither")
    if rank is not None:
        rank, world_size = _index("rank", rank), _index("world_size", world_size)
        if world_size < 1 or not 0 <= rank < world_size:
            raise ArrowDLPackValueError(
                f"rank {rank} and world_size {world_size}; expected 0 <= rank < world_size"
            )
        out["rank"], out["world_size"] = rank, world_size
    for name in ("split_workers", "progress"):
        if name in out and not (name == "split_workers" and out[name] is None):
            out[name] = _flag(name, out[name])
    if "format" in out:
        out["format"] = check_format(out["format"])
    storage_options = out.get("storage_options")
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise ArrowDLPackTypeError(
            f"storage_options is {type(storage_options).__name__}; expected a dict from str to "
            "str"
        )
    return out
