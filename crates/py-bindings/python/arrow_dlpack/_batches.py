"""``batches`` and ``Batches``: exact-size batches of tensors from Arrow data,
for a training loop (``BatchDataset``, the same for ``torch.utils.data``, is in ``_dataset.py``).

The work happens in Rust (the ``arrow-dlpack-loader`` crate): files are decoded, record batches
cut and joined into batches of exactly ``batch_size`` rows, and columns promoted and copied, on
background threads, with the GIL released while ``next()`` waits; every option is checked there.
This module only works out which shard of the data this process reads, shows progress, and
carries the loader's state (``state_dict()``, ``state=``, ``merge_states``).
"""

import sys
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from arrow_dlpack import _exit
from arrow_dlpack._arrow_dlpack import ArrowDLPackValueError, Tensor, _Batches, _check_options
from arrow_dlpack._options import PYTHON, PYTHON_DEFAULTS, check_python_options, converter
from arrow_dlpack._read_only import maps_read_only, reads_unseen_buffers
from arrow_dlpack._shards import _layout, _shared_seed
from arrow_dlpack._sources import (
    ReaderFailures,
    as_source,
    files_only,
    read_once,
    refuse_read_again,
    remember_read,
)
from arrow_dlpack._states import _epoch, _saved_seed, loader_state
from arrow_dlpack._warn import (
    plans_anew,
    warn_no_batch,
    warn_rows_left_out,
    warn_uneven_ranks,
)

__all__ = ["Batches", "batches"]

# Storage options whose values are shown by a repr (userinfo of a URL redacted); every other
# value (keys, secrets, tokens, proxies) is shown as "***".
_SHOWN_STORAGE_OPTIONS = frozenset(
    {"region", "aws_region", "google_region", "endpoint", "aws_endpoint", "aws_endpoint_url"}
)


def _redact_url(text: str) -> str:
    """``text`` with the userinfo of a URL (``user:password@``) replaced by ``***@``."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    authority_end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found != -1:
            authority_end = min(authority_end, found)
    at = rest.rfind("@", 0, authority_end)
    if at == -1:
        return text
    return f"{scheme}://***@{rest[at + 1 :]}"


def _redacted_source(source: Any) -> str:
    """The repr of a source for a repr of its loader: URLs with their userinfo redacted."""
    if isinstance(source, str):
        return repr(_redact_url(source))
    if isinstance(source, (list, tuple)) and all(isinstance(item, str) for item in source):
        shown = ", ".join(repr(_redact_url(item)) for item in source)
        return f"[{shown}]" if isinstance(source, list) else f"({shown}{',' if len(source) == 1 else ''})"
    return repr(source)


def _redacted_options(options: Mapping[str, Any]) -> str:
    """The repr of a loader's options for a repr: the values of ``storage_options`` hidden,
    but for known harmless keys (the region, the endpoint with its userinfo redacted)."""
    shown = dict(options)
    storage = shown.get("storage_options")
    if isinstance(storage, Mapping):
        shown["storage_options"] = {
            key: (
                _redact_url(value)
                if str(key).lower() in _SHOWN_STORAGE_OPTIONS and isinstance(value, str)
                else "***"
            )
            for key, value in storage.items()
        }
    return repr(shown)


def _is_ray_dataset(source: Any) -> bool:
    """Whether ``source`` is a ``ray.data.Dataset`` or ``DataIterator``; Ray is imported only
    for an object of one of its classes."""
    if not type(source).__module__.startswith("ray.data"):
        return False
    from arrow_dlpack import ray

    return bool(ray.is_dataset(source))


def unknown_length_reason(source: Any, options: Mapping[str, Any]) -> str:
    """Why a dataset's number of batches is not known: the reasons that its source and options
    give, else every reason there is."""
    reasons = []
    if _is_ray_dataset(source):
        reasons.append("a Ray dataset is read only by a pass")
    elif read_once(source):
        reasons.append(f"the source, a {type(source).__name__}, does not say its rows")
    elif _hf_kind(source) == "IterableDataset":
        reasons.append(f"the source, a {type(source).__name__}, is read as it streams")
    if options.get("max_tokens") is not None:
        reasons.append("batches are cut by tokens (max_tokens) as the rows are read")
    sequences = options.get("sequences") or {}
    if any(spec == "concat" or (isinstance(spec, Mapping) and spec.get("mode") == "concat")
           for spec in sequences.values()):
        reasons.append('documents are packed whole (a sequence in mode "concat")')
    images = options.get("images") or {}
    if any(isinstance(spec, Mapping) and spec.get("on_error") == "skip" for spec in images.values()):
        reasons.append('skipped images are replaced by the next rows (on_error="skip")')
    if reasons:
        return "; ".join(reasons)
    return (
        "the source does not say its rows (a reader, a stream in object storage, a Ray "
        "dataset), or its record batches are dealt to several ranks as they come (a stream)"
    )


def _ray_blocks(source: Any, failures: ReaderFailures) -> Any:
    """A ``ray.data.Dataset`` or ``DataIterator`` as the Arrow stream of its blocks; a pandas
    DataFrame as a pyarrow Table (``_sources.as_source``, a reader's first exception kept in
    ``failures``); any other source as it is."""
    if _is_ray_dataset(source):
        from arrow_dlpack import ray

        return ray.arrow_stream(source)
    return as_source(source, failures)


def _hf_stream(source: Any) -> Any:
    """A Hugging Face ``datasets.Dataset`` or ``IterableDataset`` as an Arrow stream (a dict of
    splits is a ``TypeError``); any other source as it is. ``datasets`` is never imported: its
    objects are recognised by the module of their class, and only they load ``_hf``."""
    if _hf_kind(source) is None:
        return source
    from arrow_dlpack import _hf

    return _hf.hf_stream(source)


def _hf_kind(source: Any) -> Optional[str]:
    """The ``datasets`` class that ``source`` is (``Dataset``, ``IterableDataset`` or a dict of
    their splits), or None; ``datasets`` is never imported, and ``_hf`` only for its objects."""
    if not any(cls.__module__.startswith("datasets.") for cls in type(source).__mro__):
        return None
    from arrow_dlpack import _hf

    return _hf.kind(source)


class _ProgressLine:
    """Rows per second on standard error while a terminal watches a :class:`Batches`; a last
    line when the iteration ends."""

    def __init__(self, stream: Any = None):
        self._stream = stream if stream is not None else sys.stderr
        self._live = bool(getattr(self._stream, "isatty", lambda: False)())
        self._start = time.perf_counter()
        self._shown = self._start

    def _line(self, batches: "Batches") -> str:
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        rows, total = batches.rows_yielded, batches.num_rows
        of = f" of {total:,}" if total is not None else ""
        return f"{rows:,}{of} rows, {rows / elapsed:,.0f} rows/s"

    def batch(self, batches: "Batches") -> None:
        now = time.perf_counter()
        if self._live and now - self._shown >= 0.2:
            self._shown = now
            print(f"\r{self._line(batches)}", end="", file=self._stream, flush=True)

    def end(self, batches: "Batches") -> None:
        start = "\r" if self._live else ""
        print(f"{start}{self._line(batches)}, done", file=self._stream, flush=True)


class Batches:
    """The iterator :func:`batches` returns: exact-size batches, each a dict from name to
    :class:`Tensor`, made on background threads.

    A loader is iterated once: iterating it again after its last batch (or after an error, or
    :meth:`close`) raises ``ValueError``; make a new one with :func:`batches`, or use
    :class:`BatchDataset`, which makes a new loader each time it is iterated.
    ``len()`` is the number of batches left, where it is known (the files' metadata, or the rows
    an in-memory table says it holds, and batches cut by rows); ``tqdm`` takes it as its total.
    Made by :func:`batches`, not by hand.
    """

    __slots__ = ("_inner", "_progress", "_failures", "_convert")

    def __init__(
        self,
        inner: _Batches,
        progress: bool = False,
        stream: Any = None,
        failures: Optional[ReaderFailures] = None,
        format: str = "dlpack",
    ) -> None:
        self._inner = inner
        self._progress = _ProgressLine(stream) if progress else None
        self._failures = failures
        self._convert = converter(format)

    def __getitem__(self, index: Any) -> Any:
        """Refused: the batches are an iterator, and a ``torch.utils.data.DataLoader`` given
        one as a (map-style) dataset would index it."""
        raise TypeError(
            "ad.batches(...) is an iterator of batches, not indexed; for a "
            "torch.utils.data.DataLoader, pass ad.BatchDataset(source, batch_size, ...) with "
            "DataLoader(dataset, batch_size=None), or iterate the batches directly"
        )

    def __iter__(self) -> "Batches":
        iter(self._inner)  # refuses a loader that has ended
        return self

    def __next__(self) -> Dict[str, Any]:
        try:
            batch = next(self._inner)
        except StopIteration:
            if self._progress is not None:
                self._progress.end(self)
                self._progress = None
            raise
        except ArrowDLPackValueError as error:
            # A pyarrow reader's own exception (its generator's, or a batch of other types than
            # its schema) reached the loader as a message only: it is raised as it was, with
            # its traceback and a note of where the loader met it.
            if self._failures is None:
                raise
            self._failures.raise_instead(error)
        except BaseException:
            # A signal handler's exception (Ctrl-C, a timeout, SystemExit) as the call returned
            # its batch: the loader takes it back (nothing when the call itself raised) and
            # hands it out again on the next call.
            self._inner._give_back()
            raise
        try:
            if self._convert is not None:
                convert = self._convert
                converted = {name: convert(tensor) for name, tensor in batch.items()}
            else:
                converted = batch
            if self._progress is not None:
                self._progress.batch(self)
        except BaseException:
            # An exception on the batch's way out (a signal handler's, or the conversion's):
            # the loader takes the batch back (its counts and saved state as before it) and
            # hands it out again on the next call.
            self._inner._give_back()
            raise
        return converted

    def __len__(self) -> int:
        """The number of batches left; ``TypeError`` when it is not known (a stream that does
        not say its rows, batches cut by ``max_tokens``, images with ``on_error="skip"`` read in
        order by one rank)."""
        return len(self._inner)

    def __length_hint__(self) -> Any:
        return self._inner.__length_hint__()

    @property
    def num_batches(self) -> Optional[int]:
        """The batches this loader yields in all, or None when unknown."""
        return self._inner.num_batches

    @property
    def num_rows(self) -> Optional[int]:
        """The rows this loader yields in all (this shard's, before ``drop_last``), or None when
        the source does not say."""
        return self._inner.num_rows

    @property
    def rows_yielded(self) -> int:
        """The rows of the batches handed out so far."""
        return self._inner.rows_yielded

    @property
    def rows_left_out(self) -> int:
        """The epoch's last rows that no rank reads although ``drop_last`` is off: every rank
        gets as many batches of at least a row, so batches of one row leave out the rows past a
        multiple of the ranks, and fewer rows than ranks leave out every row (0 on one rank)."""
        return self._inner.rows_left_out

    def state_dict(self) -> Dict[str, Any]:
        """Where the stream stands after the batches handed out so far: a dict of ints,
        strings and lists (``json``- and ``torch.save``-able), for ``state=``."""
        return self._inner.state_dict()

    def close(self) -> None:
        """Stops the background threads and releases the source now."""
        self._inner.close()

    def __enter__(self) -> "Batches":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        left = self._inner.__length_hint__()
        left = "unknown" if left is NotImplemented else left
        return (
            f"<arrow_dlpack.Batches: {self.rows_yielded:,} rows yielded, batches left: {left}>"
        )


def batches(
    source: Any,
    batch_size: int = 1024,
    *,
    drop_last: bool = False,
    columns: Optional[Sequence[str]] = None,
    groups: Optional[Mapping[str, Union[Sequence[str], Mapping[str, Any]]]] = None,
    masks: Optional[Sequence[str]] = None,
    allow_nulls: bool = False,
    null_to_nan: Union[bool, Sequence[str]] = False,
    row_major: bool = True,
    shuffle: bool = False,
    seed: Optional[int] = None,
    buffer_size: int = 65536,
    rank: Optional[int] = None,
    world_size: Optional[int] = None,
    split_workers: Optional[bool] = None,
    prefetch: int = 2,
    decode_threads: int = 0,
    cache_dir: Optional[str] = None,
    cache_size: int = 10737418240,
    writable: bool = False,
    sequences: Optional[Mapping[str, Union[str, Mapping[str, Any]]]] = None,
    images: Optional[Mapping[str, Mapping[str, Any]]] = None,
    image_root: Optional[str] = None,
    max_tokens: Optional[int] = None,
    bucket_by_length: bool = False,
    epoch: Optional[int] = None,
    state: Optional[Mapping[str, Any]] = None,
    format: str = "dlpack",
    progress: bool = False,
    storage_options: Optional[Mapping[str, Any]] = None,
) -> Batches:
    r"""Batches of exactly ``batch_size`` rows from Arrow data, each a dict from name to
    :class:`Tensor`, made on background threads; returns a :class:`Batches`, iterated once.

    >>> for batch in ad.batches("train.parquet", 1024, groups={"x": features}, columns=["y"]):
    ...     x, y = torch.from_dlpack(batch["x"]), torch.from_dlpack(batch["y"])

    ``source`` is a path or a list of paths of Arrow IPC files (``.arrow``, ``.feather``,
    ``.ipc``: memory-mapped, zero-copy; LZ4 or ZSTD compressed ones decompressed), IPC streams
    (``.arrows``, or ``.arrow`` files that are streams: the first bytes tell) or Parquet files
    (``.parquet``, ``.pq``: projected, row groups decoded in parallel), directories (every such
    file under one) and globs (``data/**/*.parquet``), sorted, hidden and ``_`` names left out;
    any object with ``__arrow_c_stream__`` (a pyarrow Table, RecordBatch or RecordBatchReader, a
    polars DataFrame, a DuckDB result, nanoarrow), a pandas DataFrame (through pyarrow), or a
    list of such objects (read one after another),
    a ``ray.data.Dataset`` or ``DataIterator`` (its blocks, read as they come:
    :func:`arrow_dlpack.ray.arrow_stream`), or a Hugging Face ``datasets.Dataset`` (its Arrow
    table, in the order of its indices mapping) or ``IterableDataset`` (its batches).
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
      ``bool`` tensors. ``None`` (the default) means every column not in a group; ``[]`` means
      none, only what ``groups``, ``masks`` and ``sequences`` name.
    - ``groups``: name -> columns stacked into one ``(B, k)`` tensor, promoted as
      :meth:`Tensor.from_arrow` promotes (``row_major`` chooses the layout). With
      ``row_major=False``, same-typed columns of a memory-mapped IPC file come as a read-only
      strided view of the file (no copy) where the batch lies inside one record batch.
    - ``masks``: columns whose validity comes as an extra ``bool`` tensor ``"<name>_mask"``.
    - Nulls are refused (``ValueError``, at the batch that holds them) unless ``allow_nulls``
      (null slots hold unspecified values) or ``null_to_nan`` (floats with NaN).
      ``null_to_nan=True`` never changes a column without nulls: float columns keep their
      dtype, and an integer column becomes float only where the source's metadata says it may
      hold nulls (Parquet statistics, IPC headers, in-memory null counts; for a reader, its
      schema's nullability), the same dtype in every batch; ``null_to_nan=["a", "g"]`` writes
      NaN in (and promotes) the named columns and groups only.
    - ``drop_last`` drops a last batch shorter than ``batch_size``.
    - ``shuffle`` shuffles files and row groups (or record batches) and rows within windows of
      ``buffer_size`` rows; with a ``seed`` the order is the same on every run.
    - Shards: ``rank``/``world_size`` (default: an initialised ``torch.distributed`` group; none
      for a Ray source, which Ray shards itself) split the data between processes, and inside a
      ``torch.utils.data.DataLoader`` worker each worker reads its own share of its rank's, so
      that together they read every row exactly once. ``split_workers=False`` leaves the
      workers out (for sources already split per worker), ``split_workers=True`` splits; the
      default (``None``) is refused inside a worker, where only the caller knows which it is
      (``ad.BatchDataset`` splits between its workers on its own).
    - ``prefetch`` batches wait ready in a bounded queue; memory stays below ``prefetch`` times
      a batch's bytes plus the row groups being decoded.
    - ``cache_dir``: a local directory that keeps the byte ranges fetched from object storage,
      so that later epochs (and other ranks and workers of the machine) read them from disk;
      entries are keyed by URL, ETag and range, checked when read, and the least recently used
      go past ``cache_size`` bytes (10 GiB). Local sources ignore it, but image rows read by
      URL (``images=``) are kept too, and asked for again only if they changed.
    - ``prefetch`` is from 1 to 1,024 and ``decode_threads`` at most 64 (0 chooses); a
      ``seed`` is any int, taken modulo 2**64. Every integer option takes anything with
      ``__index__`` (a numpy integer), but not a bool.
    - ``writable=True`` hands out batches whose every tensor is private, writable memory (the
      views below are copied as each batch is handed out).
    - ``sequences``: variable-length list columns (``list``, ``large_list``) and how each
      becomes tensors: ``"pad"`` gives ``name`` ``(B, L)`` and ``name + "_lengths"`` ``(B,)``
      int64; ``"pack"`` gives ``name`` ``(N,)``, ``name + "_cu_seqlens"`` ``(B + 1,)`` int32,
      ``name + "_position_ids"`` ``(N,)`` int64 and ``name + "_max_seqlen"`` (0-d int64);
      ``"jagged"`` gives ``name`` ``(N,)`` and ``name + "_offsets"`` ``(B + 1,)``. A dict
      instead of a mode sets ``mode`` (default ``"pad"``) and, for ``"pad"``, ``pad_value``,
      ``max_length``, ``pad_to_multiple_of``, ``padding_side``, ``truncation_side``. A list
      column that is loaded must be named here. A text column (``string``, ``large_string``,
      ``string_view``) is loaded as its token ids with ``"tokenizer"`` (a path to a
      ``tokenizer.json``, a ``tokenizers.Tokenizer`` or a ``transformers`` fast tokenizer) and
      ``"add_special_tokens"`` (default True), tokenized on the loader's threads. Mode
      ``"concat"`` packs the documents into rows of exactly ``max_length`` tokens (required)
      for pretraining, with ``bos_token_id``, ``eos_token_id`` and ``split_documents``:
      ``name`` ``(B, max_length)``, ``name + "_position_ids"``, ``name + "_cu_seqlens"``,
      ``name + "_max_seqlen"``; ``batch_size`` then counts these rows.
    - ``images``: columns of encoded images (``binary``, or Hugging Face's ``Image`` structs),
      each with a spec dict of ``ad.decode_images``'s keys (``{"image": {"size": 224,
      "resize": 256}}``), decoded on the loader's threads into ``name`` ``(B, C, H, W)`` and
      ``name + "_sizes"`` ``(B, 2)`` int32; rows whose bytes are null are read from their path,
      under ``image_root`` (default: beside the file). With ``on_error="skip"`` a row that is
      not an image is dropped: read in order by one rank, the batch is filled from the next
      rows (and ``len()`` is unknown); shuffled, cut by tokens or over several ranks, the batch
      comes out shorter. See docs/images.md.
    - ``max_tokens`` cuts batches of whole rows by tokens instead of rows: a batch's largest
      sequence tensor holds at most ``max_tokens`` values (``B * L`` padded, ``N`` packed or
      jagged); ``batch_size`` then bounds the rows, and ``len()`` is unknown (but see below).
    - ``bucket_by_length`` sorts the rows of each ``buffer_size`` window by length before
      cutting batches (and, with ``shuffle``, shuffles the order of the batches), so that
      padded batches pad little.
    - With ``max_tokens`` or ``bucket_by_length`` over several shards (ranks, DataLoader
      workers) of files, the epoch's batches are planned from every row's length (one pass
      over the sequence columns, kept per process): every shard gets the same number of
      batches, which ``len()`` gives, so no rank waits for another at the end of an epoch.
    - ``epoch``: with ``shuffle``, epoch ``e`` is shuffled with ``seed + e``, so one seed gives a
      new reproducible order each epoch (default: the ``state``'s epoch, else 0).
    - ``state``: continue from a position saved with ``state_dict()`` of an earlier iterator
      with the same source and arguments; the batches that follow are those the earlier run
      would have given, batch for batch and byte for byte. A state from other arguments is
      refused (``ValueError`` naming what differs), as is a corrupt one. A state from
      :func:`merge_states` resumes with any number of ranks and workers.
    - ``format``: ``"dlpack"`` (the default) hands out :class:`Tensor`\ s, which
      ``torch.from_dlpack``, ``np.from_dlpack`` and ``jnp.from_dlpack`` take without a copy;
      ``"torch"`` hands out ``torch.Tensor``\ s, in private memory where the source is not files
      (as ``writable=True``: torch ignores the read-only flag, and an in-place step would
      otherwise rewrite a caller's table); ``"numpy"`` hands out ``numpy.ndarray``\ s of the
      same memory (read-only where they view the source).
    - ``progress`` shows rows per second on a terminal.

    A batch that lies inside one record batch is made of zero-copy views, flagged read-only, of
    the source's memory: for an in-memory source (a pyarrow Table, a polars DataFrame) that is
    the caller's memory, and ``torch.from_dlpack`` ignores the flag, so an in-place operation
    rewrites the caller's table unless ``writable=True``. Batches across record batches,
    groups, booleans, masks and shuffled batches are fresh, writable copies.
    Every argument is checked before any work, each error naming it.
    """
    options = dict(locals())
    return _open(options.pop("source"), options, direct=True)


def _open(source: Any, options: Dict[str, Any], direct: bool) -> Batches:
    """The loader of ``source`` with ``options`` (the keywords of :func:`batches`): the Python
    options checked and acted on, the shard, seed and epoch worked out, everything else checked
    by the native loader. ``direct`` when the caller's own code called ``ad.batches`` (not
    ``BatchDataset``, which splits between its workers on purpose).

    Counted as a loader being made from its first check to its registration, which the exit
    hook waits for; refused with ``RuntimeError`` once the interpreter exits (a daemon thread's
    loop starting its next epoch)."""
    with _exit.opening():
        return _make(source, options, direct)


def _make(source: Any, options: Dict[str, Any], direct: bool) -> Batches:
    """:func:`_open`'s work, counted by it."""
    python = check_python_options(
        {name: options.pop(name) for name in PYTHON if name in options}
    )
    if "state" in options:
        options["state"] = loader_state(options["state"])
    # Every value of the spec is checked first, so that a bad one is named before the shard,
    # seed and epoch are worked out from it; a seed or epoch of None is Python's to work out.
    spec = {
        name: value
        for name, value in options.items()
        if not (name in PYTHON_DEFAULTS and value is None)
    }
    _check_options(None, **spec)
    rank, world_size = python.get("rank"), python.get("world_size")
    refuse_read_again(source)
    given = source
    source = _hf_stream(source)
    if not spec.get("writable", False) and (
        maps_read_only(source) or reads_unseen_buffers(source)
    ):
        # Views of memory mapped read-only (a Hugging Face Dataset's cache files, a table read
        # through pyarrow's memory_map) would kill the process when torch writes through them:
        # its batches are private copies, and so are a reader's, whose buffers are seen only
        # as they are read.
        spec["writable"] = True
    failures = ReaderFailures()
    blocks = _ray_blocks(source, failures)
    if _is_ray_dataset(source):
        # Ray's blocks live in its object store, shared by every reader and immutable: a view
        # handed out and written in place (`torch.from_dlpack(b["x"]).mul_(-1)`) would change
        # the dataset for later readers and epochs. Batches of a Ray source are private copies.
        spec["writable"] = True
        if rank is None:
            # Ray shards its datasets itself (`streaming_split`, Ray Train's dataset shards),
            # and Ray Train's workers form a torch.distributed group: sharding by that group
            # again would drop rows.
            rank, world_size = 0, 1
    shard_index, num_shards, num_ranks = _layout(
        rank, world_size, python.get("split_workers"), direct=direct
    )
    format = python.get("format", "dlpack")
    if format == "torch" and not files_only(given):
        # torch tensors have no read-only flag: a view of a caller's table (or of memory mapped
        # read-only) would be rewritten (or crash) by an in-place step; files are the loader's.
        spec["writable"] = True
    state = spec.get("state")
    shuffle = bool(spec.get("shuffle", False))
    seed = _saved_seed(spec.get("seed"), shuffle, state)
    spec["seed"] = _shared_seed(seed, shuffle, num_shards)
    spec["epoch"] = _epoch(spec.get("epoch"), state)
    storage_options = python.get("storage_options")
    try:
        inner = _Batches(
            blocks,
            storage_options=dict(storage_options) if storage_options is not None else None,
            shard_index=shard_index,
            num_shards=num_shards,
            num_ranks=num_ranks,
            **spec,
        )
    except ArrowDLPackValueError as error:
        failures.raise_instead(error)
    _exit.register(inner)
    remember_read(given)
    ranks = num_ranks or num_shards
    # Said to a caller of ad.batches (BatchDataset says it once, when it is made).
    if direct and ranks > 1 and plans_anew(state):
        # A rank's last worker takes the most of its batches (the longer runs go last), so it
        # has none only when the rank has none.
        last_worker = shard_index // ranks == num_shards // ranks - 1
        try:
            if inner.num_batches is None:
                warn_uneven_ranks(ranks, spec.get("sequences"))
            elif inner.num_batches == 0 and last_worker:
                warn_no_batch(ranks)
            elif inner.rows_left_out and shard_index < ranks:
                warn_rows_left_out(inner.rows_left_out, ranks)
        except BaseException:
            # A warning raised as an error (`simplefilter("error")`) returns no loader: its
            # thread stops now rather than go on reading the source. A reader stays marked as
            # read, since the thread may have taken record batches from it already.
            inner.close()
            raise
    return Batches(
        inner, progress=python.get("progress", False), failures=failures, format=format
    )

