"""``batches`` and ``BatchDataset``: exact-size batches of tensors from Arrow data, for a
training loop.

The work happens in Rust (the ``arrow-dlpack-loader`` crate): files are decoded, record batches
cut and joined into batches of exactly ``batch_size`` rows, and columns promoted and copied, on
background threads, with the GIL released while ``next()`` waits. This module only works out
which shard of the data this process reads, shows progress, and carries the loader's state
(``state_dict()``, ``state=``, ``merge_states``) through ``BatchDataset`` and torchdata's
``StatefulDataLoader``.
"""

import os
import sys
import time
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from arrow_dlpack._arrow_dlpack import Tensor, _Batches, _merge_states
from arrow_dlpack._options import Groups, Sequences, _names

# `BatchDataset` is made on first use (see `_batch_dataset_class`), so it is not listed here.
__all__ = ["batches", "merge_states"]

def _worker() -> Tuple[int, int]:
    """``(id, num_workers)`` of the ``torch.utils.data.DataLoader`` worker this runs in, or
    ``(0, 1)`` outside one. torch is asked only if something already imported it."""
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is None:
        return 0, 1
    return int(info.id), int(info.num_workers)


def _in_worker() -> bool:
    """Whether this runs in a ``torch.utils.data.DataLoader`` worker process."""
    data = sys.modules.get("torch.utils.data")
    return data is not None and data.get_worker_info() is not None


def _distributed() -> Tuple[int, int]:
    """``(rank, world_size)`` of an initialised ``torch.distributed`` process group, else
    ``(0, 1)``."""
    distributed = sys.modules.get("torch.distributed")
    if (
        distributed is not None
        and distributed.is_available()
        and distributed.is_initialized()
    ):
        return int(distributed.get_rank()), int(distributed.get_world_size())
    return 0, 1


def _shard(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    """This process's ``(shard_index, num_shards)``: one shard per DataLoader worker of each
    rank, so that workers and ranks together read every row exactly once."""
    if (rank is None) != (world_size is None):
        raise ValueError("rank and world_size go together; give both or neither")
    if rank is None or world_size is None:
        rank, world_size = _distributed()
    for name, value in (("rank", rank), ("world_size", world_size)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is {type(value).__name__}; expected int")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} and world_size {world_size}; expected 0 <= rank < world_size")
    worker, workers = _worker()
    return rank * workers + worker, world_size * workers


def _shared_seed(seed: Optional[int], shuffle: bool, num_shards: int) -> int:
    """The seed of the shuffle, the same in every shard so that the shards share one
    permutation of the units and never overlap.

    Without a ``seed``: one loader draws its own; shards of an initialised ``torch.distributed``
    group take rank 0's, broadcast; other shards (explicit ``rank``/``world_size`` without a
    group, DataLoader workers of ``ad.batches``) cannot agree on one and are refused.
    """
    if seed is not None:
        return seed
    if not shuffle:
        return 0
    if num_shards == 1:
        return _fresh_seed()
    # A DataLoader worker is outside the process group even when it inherited it by fork: a
    # collective call there would wait for ever.
    if not _in_worker() and _distributed()[1] > 1:
        return _broadcast_seed()
    raise ValueError(
        f"shuffle=True over {num_shards} shards needs a seed: without one each shard would draw "
        "its own order and the shards would overlap; pass seed=... (the same in every process)"
    )


def _fresh_seed() -> int:
    """A seed from the operating system's randomness."""
    return int.from_bytes(os.urandom(8), "little")


def _broadcast_seed() -> int:
    """Rank 0's fresh seed, received by every rank of the ``torch.distributed`` group."""
    distributed = sys.modules["torch.distributed"]
    # Every rank sends a placeholder of the same type; rank 0's value replaces the others'.
    box: List[int] = [_fresh_seed() if distributed.get_rank() == 0 else 0]
    distributed.broadcast_object_list(box, src=0)
    return int(box[0])


def _ray_blocks(source: Any) -> Any:
    """A ``ray.data.Dataset`` or ``DataIterator`` as the Arrow stream of its blocks; any other
    source as it is. Ray is imported only for an object of one of its classes."""
    if type(source).__module__.startswith("ray.data"):
        from arrow_dlpack import ray

        if ray.is_dataset(source):
            return ray.arrow_stream(source)
    return source


class _Progress:
    """Wraps a batch iterator and shows rows per second on standard error while a terminal
    watches it; a last line when the iteration ends."""

    def __init__(self, inner: _Batches, stream: Any = None):
        self._inner = inner
        self._stream = stream if stream is not None else sys.stderr
        self._live = bool(getattr(self._stream, "isatty", lambda: False)())
        self._rows = 0
        self._start = time.perf_counter()
        self._shown = self._start

    def __iter__(self) -> "_Progress":
        return self

    def __len__(self) -> int:
        return len(self._inner)

    @property
    def num_rows(self) -> Optional[int]:
        return self._inner.num_rows

    def state_dict(self) -> Dict[str, Any]:
        return self._inner.state_dict()

    def close(self) -> None:
        self._inner.close()

    def _line(self) -> str:
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        total = self._inner.num_rows
        of = f" of {total:,}" if total is not None else ""
        return f"{self._rows:,}{of} rows, {self._rows / elapsed:,.0f} rows/s"

    def __next__(self) -> Dict[str, Tensor]:
        try:
            batch = next(self._inner)
        except StopIteration:
            end = "\r" if self._live else ""
            print(f"{end}{self._line()}, done", file=self._stream, flush=True)
            raise
        self._rows = self._inner.rows_yielded
        now = time.perf_counter()
        if self._live and now - self._shown >= 0.2:
            self._shown = now
            print(f"\r{self._line()}", end="", file=self._stream, flush=True)
        return batch


def batches(
    source: Any,
    batch_size: int = 1024,
    *,
    columns: Optional[Sequence[str]] = None,
    groups: Optional[Groups] = None,
    masks: Iterable[str] = (),
    drop_last: bool = False,
    allow_nulls: bool = False,
    null_to_nan: bool = False,
    row_major: bool = True,
    shuffle: bool = False,
    seed: Optional[int] = None,
    buffer_size: int = 65_536,
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
    prefetch: int = 2,
    decode_threads: int = 0,
    writable: bool = False,
    sequences: Optional[Sequences] = None,
    max_tokens: Optional[int] = None,
    bucket_by_length: bool = False,
    epoch: Optional[int] = None,
    state: Optional[Mapping[str, Any]] = None,
    progress: bool = False,
    storage_options: Optional[Mapping[str, Any]] = None,
) -> Union[_Batches, _Progress]:
    """Batches of exactly ``batch_size`` rows from Arrow data, each a dict from name to
    :class:`Tensor`, made on background threads.

    >>> for batch in ad.batches("train.parquet", 1024, groups={"x": features}, columns=["y"]):
    ...     x, y = torch.from_dlpack(batch["x"]), torch.from_dlpack(batch["y"])

    ``source`` is a path or a list of paths of Arrow IPC files (``.arrow``, ``.feather``,
    ``.ipc``: memory-mapped, zero-copy), IPC streams (``.arrows``) or Parquet files
    (``.parquet``, ``.pq``: projected, row groups decoded in parallel), any object with
    ``__arrow_c_stream__`` (a pyarrow Table or RecordBatchReader, a polars DataFrame, a DuckDB
    result, nanoarrow), or a ``ray.data.Dataset`` or ``DataIterator`` (its blocks, read as
    they come: :func:`arrow_dlpack.ray.arrow_stream`).
    It may also be a URL, or a list of URLs, of such files in object storage: ``s3://``,
    ``gs://``, ``az://``/``abfs(s)://`` or ``http(s)://``; an object, a prefix (every object under
    it) or a glob (``s3://bucket/train/*.parquet``), listed and sorted by key. Credentials and
    endpoints come from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...) and
    from ``storage_options`` (``{"endpoint": ..., "region": ..., "timeout": "30s",
    "max_retries": 10}``), as pyarrow, polars and Lance take them. Missing objects raise
    ``FileNotFoundError``, refused credentials ``PermissionError``, timeouts after the retries
    ``OSError``.

    - ``columns``: the columns that become one tensor each: primitive columns ``(B,)``,
      fixed-size lists and ``arrow.fixed_shape_tensor`` columns ``(B, *shape)``, booleans
      ``bool`` tensors. ``None`` means every column not in a group.
    - ``groups``: name -> columns stacked into one ``(B, k)`` tensor, promoted as
      :meth:`Tensor.from_arrow` promotes (``row_major`` chooses the layout). With
      ``row_major=False``, same-typed columns of a memory-mapped IPC file come as a read-only
      strided view of the file (no copy) where the batch lies inside one record batch.
    - ``masks``: columns whose validity comes as an extra ``bool`` tensor ``"<name>_mask"``.
    - Nulls are refused (``ValueError``, at the batch that holds them) unless ``allow_nulls``
      (null slots hold unspecified values) or ``null_to_nan`` (floats with NaN).
    - ``drop_last`` drops a last batch shorter than ``batch_size``.
    - ``shuffle`` shuffles files and row groups (or record batches) and rows within windows of
      ``buffer_size`` rows; with a ``seed`` the order is the same on every run.
    - Shards: inside a ``torch.utils.data.DataLoader`` worker each worker reads its own share,
      and ``rank``/``world_size`` (default: an initialised ``torch.distributed`` group; none
      for a Ray source, which Ray shards itself) split the data between processes, so that
      together they read every row exactly once.
    - ``prefetch`` batches wait ready in a bounded queue; memory stays below ``prefetch`` times
      a batch's bytes plus the row groups being decoded.
    - ``prefetch`` is from 1 to 1,024 and ``decode_threads`` at most 64 (0 chooses); a
      ``seed`` is any int, taken modulo 2**64.
    - ``writable=True`` hands out batches whose every tensor is private, writable memory (the
      views below are copied as each batch is handed out).
    - ``sequences``: variable-length list columns (``list``, ``large_list``) and how each
      becomes tensors: ``"pad"`` gives ``name`` ``(B, L)`` and ``name + "_lengths"`` ``(B,)``
      int64; ``"pack"`` gives ``name`` ``(N,)``, ``name + "_cu_seqlens"`` ``(B + 1,)`` int32,
      ``name + "_position_ids"`` ``(N,)`` int64 and ``name + "_max_seqlen"`` (0-d int64);
      ``"jagged"`` gives ``name`` ``(N,)`` and ``name + "_offsets"`` ``(B + 1,)``. A dict
      instead of a mode sets ``mode`` (default ``"pad"``) and, for ``"pad"``, ``pad_value``,
      ``max_length``, ``pad_to_multiple_of``, ``padding_side``, ``truncation_side``. A list
      column that is loaded must be named here.
    - ``max_tokens`` cuts batches of whole rows by tokens instead of rows: a batch's largest
      sequence tensor holds at most ``max_tokens`` values (``B * L`` padded, ``N`` packed or
      jagged); ``batch_size`` then bounds the rows, and ``len()`` is unknown.
    - ``bucket_by_length`` sorts the rows of each ``buffer_size`` window by length before
      cutting batches (and, with ``shuffle``, shuffles the order of the batches), so that
      padded batches pad little.
    - ``epoch``: with ``shuffle``, epoch ``e`` is shuffled with ``seed + e``, so one seed gives a
      new reproducible order each epoch (default: the ``state``'s epoch, else 0).
    - ``state``: continue from a position saved with ``state_dict()`` of an earlier iterator
      with the same source and arguments; the batches that follow are those the earlier run
      would have given, batch for batch and byte for byte. A state from other arguments is
      refused (``ValueError`` naming what differs), as is a corrupt one. A state from
      :func:`merge_states` resumes with any number of ranks and workers.
    - ``progress`` shows rows per second on a terminal.

    A batch that lies inside one record batch is made of zero-copy views, flagged read-only, of
    the source's memory: for an in-memory source (a pyarrow Table, a polars DataFrame) that is
    the caller's memory, and ``torch.from_dlpack`` ignores the flag, so an in-place operation
    rewrites the caller's table unless ``writable=True``. Batches across record batches,
    groups, booleans, masks and shuffled batches are fresh, writable copies.
    The result has ``len()`` (the number of batches) when the files' metadata gives the row
    count and batches are cut by rows (not by ``max_tokens``), and ``close()`` stops its threads at once; breaking out of the loop and dropping it
    does the same.
    """
    blocks = _ray_blocks(source)
    if blocks is not source and rank is None and world_size is None:
        # Ray shards its datasets itself (`streaming_split`, Ray Train's dataset shards), and
        # Ray Train's workers form a torch.distributed group: sharding by that group again would
        # drop rows.
        rank, world_size = 0, 1
    source = blocks
    shard_index, num_shards = _shard(rank, world_size)
    seed = _saved_seed(seed, shuffle, state)
    seed = _shared_seed(seed, shuffle, num_shards)
    epoch = _epoch(epoch, state)
    if groups is not None and not isinstance(groups, Mapping):
        raise TypeError(f"groups is {type(groups).__name__}; expected a dict from name to columns")
    if sequences is not None and not isinstance(sequences, Mapping):
        raise TypeError(
            f"sequences is {type(sequences).__name__}; expected a dict from column to a mode"
        )
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise TypeError(
            f"storage_options is {type(storage_options).__name__}; expected a dict from str to str"
        )
    remote = {} if storage_options is None else {"storage_options": dict(storage_options)}
    inner = _Batches(
        source,
        **remote,
        batch_size=batch_size,
        columns=_names("columns", columns) if columns is not None else [],
        groups=[(name, _names(f"groups[{name!r}]", group)) for name, group in (groups or {}).items()],
        masks=_names("masks", masks),
        drop_last=drop_last,
        allow_nulls=allow_nulls,
        null_to_nan=null_to_nan,
        row_major=row_major,
        shuffle=shuffle,
        seed=seed,
        buffer_size=buffer_size,
        shard_index=shard_index,
        num_shards=num_shards,
        prefetch=prefetch,
        decode_threads=decode_threads,
        writable=writable,
        sequences={
            name: dict(how) if isinstance(how, Mapping) else how
            for name, how in (sequences or {}).items()
        },
        max_tokens=max_tokens,
        bucket_by_length=bucket_by_length,
        epoch=epoch,
        state=dict(state) if isinstance(state, Mapping) else state,
    )
    return _Progress(inner) if progress else inner


def _epoch(epoch: Optional[int], state: Any) -> int:
    """The epoch to read: ``epoch``, else the saved state's, else 0."""
    if epoch is None:
        saved = state.get("epoch") if isinstance(state, Mapping) else None
        return saved if isinstance(saved, int) and not isinstance(saved, bool) and saved >= 0 else 0
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise TypeError(f"epoch is {type(epoch).__name__}; expected int")
    if epoch < 0:
        raise ValueError(f"epoch is {epoch}; expected a non-negative int")
    return epoch


def _saved_seed(seed: Optional[int], shuffle: bool, state: Any) -> Optional[int]:
    """Without a ``seed``, a shuffled run resumed from ``state`` takes the seed it was saved
    with (the state records it), so that the seed drawn by the first run need not be kept."""
    if seed is not None or not shuffle or not isinstance(state, Mapping):
        return seed
    settings = state.get("settings")
    saved = settings.get("seed") if isinstance(settings, Mapping) else None
    if isinstance(saved, int) and not isinstance(saved, bool) and saved >= 0:
        return saved
    return seed


#: How deep ``merge_states`` looks for loader states inside the dicts and lists it is given (a
#: ``StatefulDataLoader`` state dict nests them four levels deep).
_MAX_STATE_DEPTH = 32


def _loader_states(found: Any, out: List[Dict[str, Any]], shards: List[Any]) -> None:
    """Collects the loader states in ``found``: a state from ``state_dict()``, a
    ``BatchDataset`` state, or any dict or list that holds them (a ``StatefulDataLoader``'s
    state dict); ``shards`` gets the shards of ``BatchDataset`` states that read nothing yet.
    Walked without recursion, in order, at most ``_MAX_STATE_DEPTH`` levels deep."""
    pending: List[Any] = [(found, 0)]
    while pending:
        value, depth = pending.pop()
        if depth > _MAX_STATE_DEPTH:
            raise ValueError(
                f"states nest dicts and lists more than {_MAX_STATE_DEPTH} levels deep; expected "
                "state_dict()s, BatchDataset states or StatefulDataLoader state dicts"
            )
        if isinstance(value, Mapping):
            if _DATASET_KEY in value:
                if value.get("loader") is not None:
                    out.append(dict(value["loader"]))
                elif value.get("shard") is not None:
                    shards.append(value)
                continue
            # A loader state of any format version (``merge_states`` refuses another format
            # with its own message).
            if {"version", "work"} <= set(value):
                out.append(dict(value))
                continue
            children = list(value.values())
        elif isinstance(value, (list, tuple)):
            children = list(value)
        else:
            continue
        pending.extend((child, depth + 1) for child in reversed(children))


def merge_states(states: Iterable[Any]) -> Optional[Dict[str, Any]]:
    """One state from the states of every shard of a run, for a resume with another number of
    ranks or workers: pass it as ``state=`` to ``batches`` (or ``BatchDataset``) in every new
    rank and worker, and together they read each row the old run had not given exactly once
    (in an order of their own).

    ``states`` holds, for every shard (rank and DataLoader worker) of the old run, its
    ``state_dict()``, or anything that holds them: ``BatchDataset`` states, the state dicts of
    every rank's ``StatefulDataLoader``. None when no shard had read anything (start afresh).
    """
    found: List[Dict[str, Any]] = []
    idle: List[Any] = []
    _loader_states(list(states), found, idle)
    if not found:
        if idle:
            return None
        raise ValueError("no loader state found; expected the state_dict() of every shard")
    for placeholder in idle:
        # A worker that gave no batch: the work of the run, from its start.
        shard = placeholder["shard"]
        if not (isinstance(shard, (list, tuple)) and len(shard) == 2):
            raise ValueError(f"a dataset state has shard {shard!r}; expected [index, count]")
        found.append({**found[0], "shard": list(shard), "position": None})
    return _merge_states(found)


_BATCH_DATASET_DOC = """A ``torch.utils.data.IterableDataset`` of :func:`batches`, as torch tensors.

``DataLoader(BatchDataset(source, 1024, ...), batch_size=None, num_workers=2)``: the dataset
batches itself (hence ``batch_size=None``), and each worker reads its own shard. Every other
argument is :func:`batches`'s.

With ``shuffle=True`` and no ``seed``, the dataset draws one seed when it is made (rank 0's,
broadcast, in an initialised ``torch.distributed`` group), which its DataLoader workers share.
``set_epoch(n)`` before each epoch shuffles it anew: epoch ``n`` uses ``seed + n``, as
``DistributedSampler.set_epoch`` does.

``state_dict()`` and ``load_state_dict()`` save and restore where the dataset's current pass
stands (and its epoch), in the process (DataLoader worker) that iterates it: torchdata's
``StatefulDataLoader`` calls them in each worker, so its ``state_dict()`` checkpoints every
worker's position and ``load_state_dict()`` resumes each worker exactly. To resume with other
ranks or workers, make the dataset with ``state=merge_states([...every rank's loader state...])``.
"""

#: The key that marks a ``BatchDataset`` state.
_DATASET_KEY = "arrow_dlpack_batch_dataset"


def _dataset_init(self: Any, source: Any, batch_size: int = 1024, **options: Any) -> None:
    if "progress" in options:
        raise TypeError("BatchDataset has no progress option; wrap the DataLoader instead")
    if options.get("shuffle") and options.get("seed") is None:
        # Drawn here, in the process that makes the DataLoader, so that its workers (forked or
        # spawned with a copy of the dataset) share one permutation.
        _, ranks = _shard(options.get("rank"), options.get("world_size"))
        options["seed"] = _shared_seed(None, True, ranks)
    self.source = source
    self.batch_size = batch_size
    self.epoch = options.pop("epoch", None)
    if self.epoch is None:
        self.epoch = _epoch(None, options.get("state"))
    else:
        self.epoch = _epoch(self.epoch, None)
    self.options = options
    # The loader of the pass in progress (in the process that iterates), and a state to
    # resume the next pass from.
    self._live = None
    self._resume = None


def _dataset_set_epoch(self: Any, epoch: int) -> None:
    """Shuffle epoch ``epoch`` anew: its seed is the dataset's plus ``epoch``."""
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        raise TypeError(f"epoch is {type(epoch).__name__}; expected int")
    self.epoch = epoch


def _dataset_iter(self: Any) -> Iterator[Dict[str, Any]]:
    from torch import from_dlpack

    options = dict(self.options)
    saved = options.get("state")
    if isinstance(saved, Mapping) and saved.get("epoch") != self.epoch:
        # A state given when the dataset was made resumes its own epoch; later epochs (after
        # set_epoch) start afresh.
        del options["state"]
    if self._resume is not None:
        options["state"] = self._resume
        self._resume = None
    iterator = batches(self.source, self.batch_size, epoch=self.epoch, **options)
    self._live = iterator
    try:
        for batch in iterator:
            yield {name: from_dlpack(tensor) for name, tensor in batch.items()}
    finally:
        iterator.close()


def _dataset_state_dict(self: Any) -> Dict[str, Any]:
    """Where this process's pass stands: ``{"arrow_dlpack_batch_dataset": 1, "epoch": ...,
    "shard": [index, count], "loader": <the loader's state_dict(), or None before the first
    batch>}``."""
    loader = self._live.state_dict() if self._live is not None else self._resume
    shard = None
    if loader is None:
        shard = list(_shard(self.options.get("rank"), self.options.get("world_size")))
    return {_DATASET_KEY: 1, "epoch": self.epoch, "shard": shard, "loader": loader}


def _dataset_load_state_dict(self: Any, state: Mapping[str, Any]) -> None:
    """Resume the next pass from ``state``, as :meth:`state_dict` gave it."""
    if not isinstance(state, Mapping) or _DATASET_KEY not in state:
        raise ValueError(
            f"state is {type(state).__name__} without {_DATASET_KEY!r}; expected a "
            "BatchDataset.state_dict()"
        )
    self.epoch = _epoch(state.get("epoch"), None)
    loader = state.get("loader")
    if loader is not None and not isinstance(loader, Mapping):
        raise ValueError(f"state['loader'] is {type(loader).__name__}; expected a dict or None")
    self._resume = dict(loader) if loader is not None else None
    self._live = None


def _dataset_getstate(self: Any) -> Dict[str, Any]:
    # A live loader stays in the process that made it.
    return {**self.__dict__, "_live": None}


def _batch_dataset_class() -> type:
    """``BatchDataset``, made on first use so that importing ``arrow_dlpack`` never imports
    torch."""
    from torch.utils.data import IterableDataset

    return type(
        "BatchDataset",
        (IterableDataset,),
        {
            "__init__": _dataset_init,
            "__iter__": _dataset_iter,
            "set_epoch": _dataset_set_epoch,
            "state_dict": _dataset_state_dict,
            "load_state_dict": _dataset_load_state_dict,
            "__getstate__": _dataset_getstate,
            "__doc__": _BATCH_DATASET_DOC,
            "__module__": "arrow_dlpack",
        },
    )
