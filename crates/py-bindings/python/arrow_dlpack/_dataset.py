"""``BatchDataset``: the batches of :func:`arrow_dlpack.batches` as a
``torch.utils.data.IterableDataset`` of torch tensors.

This module imports torch; ``import arrow_dlpack`` does not import it: ``ad.BatchDataset`` loads
this module on first use.
"""

import multiprocessing
import multiprocessing.context
import operator
import os
import sys
import warnings
from types import FrameType
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from torch.utils.data import IterableDataset

from arrow_dlpack._arrow_dlpack import ArrowDLPackTypeError, ArrowDLPackValueError, _check_options
from arrow_dlpack._batches import (
    Batches,
    _hf_stream,
    _is_ray_dataset,
    _open,
    _redacted_options,
    _redacted_source,
    unknown_length_reason,
)
from arrow_dlpack._shards import _distributed, _shard, _shared_seed, refuse_another_layout
from arrow_dlpack._epochs import _round, _SharedEpoch
from arrow_dlpack._states import _DATASET_KEY, _saved_seed, loader_state, pass_ended
from arrow_dlpack._options import PYTHON, PYTHON_DEFAULTS, check_python_options
from arrow_dlpack._sources import as_source, read_once
from arrow_dlpack._warn import (
    plans_anew,
    warn_no_batch,
    warn_rows_left_out,
    warn_uneven_ranks,
)

__all__ = ["BatchDataset"]


def _refuse_if_batched_again(caller: Any) -> None:
    """Refuses (``TypeError``) a DataLoader that batches the dataset's batches again: with ``batch_size`` other
    than ``None``, its fetcher takes that many of our batches and stacks them, which adds a
    leading dimension (``(1, B, ...)`` with the default ``batch_size=1``): a model trained on
    those shapes trains wrongly, so the pass stops at its first batch.
    The fetcher is recognised by its class name and ``auto_collation`` flag (torch's, and
    torchdata's ``StatefulDataLoader``'s); anything else is left alone."""
    try:
        fetcher = caller.f_locals.get("self") if caller is not None else None
        batched_again = (
            type(fetcher).__name__.endswith("IterableDatasetFetcher")
            and bool(getattr(fetcher, "auto_collation", False))
            # A collate_fn of the user's own (one that unwraps the list, say) is theirs to judge.
            and getattr(getattr(fetcher, "collate_fn", None), "__name__", None) == "default_collate"
        )
    except Exception:
        # Whatever the caller is, a failure to recognise it is no reason to fail the pass.
        batched_again = False
    if batched_again:
        raise ArrowDLPackTypeError(
            "a DataLoader batches the batches of this BatchDataset again: with batch_size=k it "
            "stacks k of them, which adds a leading dimension to every tensor ((k, B, ...); "
            "(1, B, ...) with its default batch_size=1); expected DataLoader(dataset, "
            "batch_size=None), since the dataset makes the batches (a collate_fn of your own "
            "is left to you)"
        )


def _dataloader_workers(caller: Any) -> int:
    """The worker processes of the DataLoader whose ``__len__`` is ``caller`` (the frame that
    called ``len(dataset)``), or 0 when the caller is not a DataLoader's ``__len__``."""
    try:
        loader = caller.f_locals.get("self") if caller is not None else None
        if caller.f_code.co_name != "__len__" or type(loader).__module__.split(".")[0] not in (
            "torch",
            "torchdata",
        ):
            return 0
        workers = getattr(loader, "num_workers", 0)
        return workers if isinstance(workers, int) and workers > 0 else 0
    except Exception:
        # Whatever the caller is, a failure to recognise it leaves the rank's count as it is.
        return 0


def _warn_not_resumed(saved: Any, chosen: int) -> None:
    """Warns that a state saved in epoch ``saved`` is not resumed in epoch ``chosen``."""
    warnings.warn(
        f"the state saved in epoch {saved} is not resumed: set_epoch({chosen}) chose another "
        f"epoch, which starts from its beginning (call set_epoch({saved}) to resume the saved "
        "one, or none)",
        UserWarning,
        stacklevel=3,
    )


#: The most DataLoader workers whose shares ``batches_left`` counts (each is planned).
_MAX_COUNTED_WORKERS = 1024


class BatchDataset(IterableDataset):
    """A ``torch.utils.data.IterableDataset`` of :func:`arrow_dlpack.batches`, as torch
    tensors.

    ``DataLoader(BatchDataset(source, 1024, ...), batch_size=None, num_workers=2)``: the dataset
    batches itself (hence ``batch_size=None``), and each worker reads its own shard. Every
    argument is :func:`arrow_dlpack.batches`'s (but ``progress``), and every one is checked
    when the dataset is made, in the process that makes it: a misspelt keyword is a
    ``TypeError``, a bad value a ``ValueError`` or ``TypeError`` naming it, and the columns are
    checked against the source's schema: for files (local or in object storage) their footers
    are read (no data is); in-memory tables and readers (pyarrow's, polars') state theirs.

    Unlike the iterator of :func:`arrow_dlpack.batches`, the dataset is iterated any number of
    times: each ``iter()`` makes a new loader. ``len(dataset)`` is the number of batches of this
    rank's pass where it is known (files, and in-memory tables that say their rows, with batches
    cut by rows). DataLoader workers do not change the batches: the rank's batches are planned
    and each worker takes a run of them, so the DataLoader gives the batches of one loader of
    the rank (in an interleaved order), with only the rank's last batch short.

    With ``shuffle=True`` and no ``seed``, the dataset draws one seed when it is made (seed 0 in
    an initialised ``torch.distributed`` group of several ranks, as ``DistributedSampler``),
    which its DataLoader workers share; a state loaded or given brings the seed it was saved
    with. The rank and world size are the group's when the dataset is made (or ``rank=`` and
    ``world_size=``): a dataset made before ``init_process_group`` and read as one of several
    ranks is refused. ``set_epoch(n)`` before each epoch shuffles it anew: epoch ``n`` uses
    ``seed + n``, as ``DistributedSampler.set_epoch`` does; the epoch lives in shared memory, so
    it reaches workers that persist between epochs (``persistent_workers=True``).

    ``state_dict()`` and ``load_state_dict()`` save and restore where the dataset's current pass
    stands (and its epoch), in the process (DataLoader worker) that iterates it: torchdata's
    ``StatefulDataLoader`` calls them in each worker, so its ``state_dict()`` checkpoints every
    worker's position and ``load_state_dict()`` resumes each worker exactly. To resume with other
    ranks or workers, make the dataset with ``state=merge_states([...every rank's loader
    state...])``; a ``state`` resumes the epoch it was saved in, in the first pass only (later
    passes are whole), and is refused with another ``epoch``.
    """

    def __init__(
        self,
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
        storage_options: Optional[Mapping[str, Any]] = None,
    ) -> None:
        options = dict(locals())
        del options["self"], options["source"]
        options.pop("__class__", None)
        # A BatchDataset.state_dict() is taken as the loader's state it holds; one saved after
        # its pass ended resumes nothing (the first pass is whole), in the epoch it was saved in.
        ended = pass_ended(state)
        ended_epoch = state.get("epoch") if ended and isinstance(state, Mapping) else None
        state = options["state"] = None if ended else loader_state(state)
        python = check_python_options({name: options[name] for name in PYTHON if name in options})
        options.update(python)
        spec = {
            name: value
            for name, value in options.items()
            if name not in PYTHON and not (name in PYTHON_DEFAULTS and value is None)
        }
        # Every value is checked here, in the process that makes the dataset, rather than in
        # a DataLoader worker; the state is checked against the files when a pass starts.
        _check_options(None, **spec)
        saved_epoch = state.get("epoch") if isinstance(state, Mapping) else ended_epoch
        if epoch is not None and state is not None and saved_epoch != operator.index(epoch):
            raise ArrowDLPackValueError(
                f"state was saved in epoch {saved_epoch!r} and epoch is {epoch}; a state "
                "resumes the epoch it was saved in: pass its epoch (or none), or no state"
            )
        first_epoch = 0
        if epoch is not None:
            first_epoch = operator.index(epoch)
        elif isinstance(saved_epoch, int) and not isinstance(saved_epoch, bool) and saved_epoch >= 0:
            first_epoch = saved_epoch
        rank_shard = _shard(python.get("rank"), python.get("world_size"), split_workers=False)
        # Whether the caller chose the rank and world size (else they are the process group's
        # when the dataset is made, and a pass in another layout is refused: _check_layout).
        self._layout_given = python.get("rank") is not None and python.get("world_size") is not None
        #: Whether the seed is the caller's (else a loaded state's seed replaces it).
        self._seed_given = seed is not None
        if shuffle and seed is None:
            # A state resumes with the seed it was saved with; else one is drawn here, in the
            # process that makes the DataLoader, so that its workers (forked or spawned with a
            # copy of the dataset) share one permutation (over a process group, seed 0).
            saved = _saved_seed(None, True, state)
            options["seed"] = saved if saved is not None else _shared_seed(None, True, rank_shard[1])
        found = self._outline(source, options, rank_shard)
        self._num_batches = None if found is None else found["num_batches"]
        #: The epoch's rows that no rank reads although drop_last is off.
        self._rows_left_out = 0 if found is None else found["rows_left_out"]
        if rank_shard[1] > 1 and plans_anew(state):
            # Said here, at the caller's line and once, rather than by the DataLoader's
            # workers at every epoch.
            if self._num_batches == 0:
                warn_no_batch(rank_shard[1])
            elif self._rows_left_out:
                warn_rows_left_out(self._rows_left_out, rank_shard[1])
        if isinstance(state, Mapping) and not read_once(source):
            # The state is checked against the source and the settings here, in the process
            # that makes the dataset, rather than first in every DataLoader worker.
            self._outline(source, {**options, "epoch": first_epoch}, rank_shard, state=state)
        self._rank_shard = rank_shard
        # The batches of a rank's pass by its DataLoader's workers, by their number, the epoch
        # and the state it resumes (held, so that its id is not another's): see _counted.
        self._counts: Dict[Any, Tuple[Any, int]] = {}
        if rank_shard[1] > 1 and self._num_batches is None and not _is_ray_dataset(source):
            warn_uneven_ranks(rank_shard[1], options.get("sequences"))
        del options["epoch"]
        self.source = source
        self.batch_size = batch_size
        #: The keywords of every pass, but the epoch.
        self.options: Dict[str, Any] = options
        self._epoch = _SharedEpoch(first_epoch)
        # The loader of the pass in progress (in the process that iterates) and its epoch, and a
        # state to resume the next pass from.
        self._live: Optional[Batches] = None
        self._live_pid: Optional[int] = None
        # Whether a pass began, for a source that is read once (a RecordBatchReader).
        self._passes_begun = False
        self._pass_epoch: Optional[int] = None
        self._resume: Optional[Dict[str, Any]] = None
        self._resume_epoch: Optional[int] = None
        # Whether a pass of this copy resumed the dataset's state (a persistent worker's next
        # pass does not).
        self._state_taken = False
        # Whether the pass of _live ran to its end (its state then resumes nothing).
        self._live_ended = False

    @staticmethod
    def _outline(
        source: Any,
        options: Dict[str, Any],
        shard: Any,
        num_ranks: int = 0,
        state: Optional[Mapping[str, Any]] = None,
    ) -> Optional[Dict[str, Any]]:
        """What shard ``shard`` (``(index, count)``, of ``num_ranks`` ranks) gives, where the
        source tells: ``num_rows``, ``num_batches`` (of a whole pass, or what is left of it after
        ``state``, checked against the source as a pass checks it) and ``rows_left_out``. The
        files' schemas are checked (their footers read) on the way. None for a Ray source, which
        is read only by a pass."""
        if _is_ray_dataset(source):
            return None
        spec = {
            name: value
            for name, value in options.items()
            if name not in PYTHON and name != "state" and value is not None
        }
        if state is not None:
            spec["state"] = state
        storage_options = options.get("storage_options")
        found = _check_options(
            as_source(_hf_stream(source)),
            storage_options=dict(storage_options) if storage_options is not None else None,
            shard_index=shard[0],
            num_shards=shard[1],
            num_ranks=num_ranks,
            **spec,
        )
        return found

    @property
    def epoch(self) -> int:
        """The epoch of the next pass."""
        return self._epoch.value

    @property
    def rows_left_out(self) -> int:
        """The epoch's last rows that no rank reads although ``drop_last`` is off: every rank
        gets as many batches of at least a row, so batches of one row leave out the rows past a
        multiple of the ranks (0 on one rank, and where the rows are not known in advance)."""
        return self._rows_left_out

    def set_epoch(self, epoch: int) -> None:
        """Shuffle epoch ``epoch`` anew: its seed is the dataset's plus ``epoch``. Reaches the
        DataLoader's workers, persistent ones too, at their next pass.

        The epoch chosen so wins over a checkpoint's: a state saved in another epoch, loaded
        before or after, is not resumed (the epoch starts from its beginning, with a warning)."""
        if isinstance(epoch, bool):
            raise ArrowDLPackTypeError("epoch is bool; expected int")
        try:
            epoch = operator.index(epoch)
        except TypeError:
            raise ArrowDLPackTypeError(f"epoch is {type(epoch).__name__}; expected int") from None
        if not 0 <= epoch < 2**64:
            raise ArrowDLPackValueError(f"epoch is {epoch}; expected an int from 0 to 2**64 - 1")
        # The dataset's own state (state=), not yet resumed by any pass, of another epoch: it
        # is not resumed either, and is said so as a loaded one is.
        saved = self.options.get("state")
        pending = (
            self._resume is None
            and not self._state_taken
            and isinstance(saved, Mapping)
            and self._epoch.resumes(0)
        )
        self._epoch.choose(epoch)
        if self._resume is not None and self._resume_epoch != epoch:
            _warn_not_resumed(self._resume_epoch, epoch)
            self._resume = None
        elif pending and isinstance(saved, Mapping) and saved.get("epoch") not in (None, epoch):
            _warn_not_resumed(saved.get("epoch"), epoch)
            # As the warning says: not resumed by a later pass either (a set_epoch back to the
            # saved epoch begins it whole, as for a loaded state).
            self._state_taken = True

    def _check_layout(self) -> None:
        """Refuses a pass, or a count, as another rank than the dataset was made as (see
        :func:`refuse_another_layout`), unless the caller chose the rank and world size."""
        if not self._layout_given:
            options = self.options
            refuse_another_layout(self._rank_shard, options.get("rank"), options.get("world_size"))

    def __len__(self) -> int:
        """The number of batches of a whole pass of this rank; ``TypeError`` when it is not
        known. A pass resumed from a state gives fewer: :meth:`batches_left` counts them.

        Asked by a DataLoader with worker processes (``len(loader)``), it is the number that
        those workers give together: the rank's batches, each worker taking a run of them (with
        ``split_workers=False``, each reads the whole of the rank's data)."""
        self._check_layout()
        whole = self._whole_pass()
        workers = _dataloader_workers(sys._getframe(1))
        if workers > 1 and self._splits():
            counted = self._counted(workers)
            return whole if counted is None else counted
        return whole * max(workers, 1)

    def _splits(self) -> bool:
        """Whether DataLoader workers each read a share of the rank's data (``split_workers``
        True or None), rather than the whole of it."""
        return self.options.get("split_workers") is not False

    def _whole_pass(self) -> int:
        """The batches of a whole pass of this rank in the current epoch (``set_epoch`` may
        deal other units to the rank, whose rows differ), or ``TypeError``."""
        if self._num_batches is None:
            raise ArrowDLPackTypeError(
                "the number of batches of this dataset is not known in advance: "
                + unknown_length_reason(self.source, self.options)
            )
        counted = self._counted(1)
        return self._num_batches if counted is None else counted

    def batches_left(self, num_workers: int = 0) -> int:
        """The batches that the next pass gives, read by ``num_workers`` DataLoader workers:
        after a ``state`` (given when the dataset was made, or loaded with
        :meth:`load_state_dict`) what is left of its epoch, else a whole pass (``len()``);
        ``TypeError`` when it is not known, and the error the pass would raise when the state
        cannot resume (a state of one shard resumed by several workers).

        ``len()`` stays the batches of a whole pass, as torch's samplers count an epoch: a
        schedule sized by it, and the progress that a ``StatefulDataLoader`` restores from its
        checkpoint, count the batches given before the checkpoint too."""
        if isinstance(num_workers, bool):
            raise ArrowDLPackTypeError("num_workers is bool; expected int")
        try:
            num_workers = operator.index(num_workers)
        except TypeError:
            raise ArrowDLPackTypeError(
                f"num_workers is {type(num_workers).__name__}; expected int"
            ) from None
        if not 0 <= num_workers <= _MAX_COUNTED_WORKERS:
            raise ArrowDLPackValueError(
                f"num_workers is {num_workers}; expected an int from 0 to {_MAX_COUNTED_WORKERS}"
            )
        self._check_layout()
        whole = self._whole_pass()
        split = self._splits()
        workers = num_workers if num_workers > 1 and split else 1
        # Workers that do not split each read what one reader would.
        copies = 1 if split else max(num_workers, 1)
        state = self._next_state(self._epoch.value)
        if state is None and workers == 1:
            return whole * copies
        counted = self._counted(workers, state)
        if counted is not None:
            return counted * copies
        if state is None:
            return whole * copies
        raise ArrowDLPackTypeError(
            "the number of batches left of this dataset's pass is not known in advance"
        )

    def _next_state(self, epoch: int, round_id: Optional[int] = None) -> Optional[Mapping[str, Any]]:
        """The state that the next pass, of epoch ``epoch`` (and of round ``round_id``, where a
        pass begins), resumes from: one loaded with :meth:`load_state_dict`, else the dataset's
        ``state`` for the first pass of its epoch only (the passes of one DataLoader iterator's
        workers); later passes are whole."""
        # Asked before a pass (batches_left), without a round: whether any pass began since.
        if not self._epoch.resumes(0 if round_id is None else round_id):
            return None
        if self._resume is not None:
            return self._resume
        saved = self.options.get("state")
        if not isinstance(saved, Mapping) or saved.get("epoch") != epoch or self._state_taken:
            return None
        return saved

    def _counted(self, workers: int, state: Optional[Mapping[str, Any]] = None) -> Optional[int]:
        """The batches that ``workers`` DataLoader workers of this rank give together in a pass
        of the current epoch (each planning its own run of the rank's batches), resumed
        from ``state`` where one is given (each worker resumes it for its shard: a merged state;
        another is refused, as the pass would refuse it); None where a count is not known.
        Counted once per number of workers, epoch and state."""
        epoch = self._epoch.value
        key = (workers, epoch, id(state))
        found = self._counts.get(key)
        if found is not None and found[0] is state:
            return found[1]
        rank, world_size = self._rank_shard
        options = {**self.options, "batch_size": self.batch_size, "epoch": epoch}
        total = 0
        for worker in range(workers):
            shard = (worker * world_size + rank, workers * world_size)
            num_ranks = world_size if workers > 1 else 0
            outline = self._outline(self.source, options, shard, num_ranks=num_ranks, state=state)
            if outline is None or outline["num_batches"] is None:
                return None
            total += outline["num_batches"]
        self._counts[key] = (state, total)
        return total

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        # The body runs at the first next(): called by a DataLoader's fetcher, the frame above
        # is its fetch().
        _refuse_if_batched_again(sys._getframe(1))
        self._check_layout()
        options = dict(self.options)
        epoch = self._epoch.value
        # A state given when the dataset was made resumes the first pass of its own epoch;
        # later passes, and later epochs (after set_epoch), start afresh.
        round_id = _round()
        state = self._next_state(epoch, round_id)
        # The first round of passes (this one and its fellow workers') takes the dataset's
        # state, or a state loaded over it; later rounds, and later passes of this copy (a
        # persistent worker's), are whole.
        self._state_taken = True
        self._epoch.resumed_by(round_id)
        options["state"] = state
        self._resume = None
        options["epoch"] = epoch
        # torch tensors, private copies over anything but files (`ad.batches`' format="torch").
        options["format"] = "torch"
        if read_once(self.source):
            if self._passes_begun:
                raise ArrowDLPackValueError(
                    f"the {type(self.source).__name__} of this dataset was read by its first "
                    "pass, and a reader is read once; pass a table, a dataset or files for a "
                    "dataset iterated more than once"
                )
            self._passes_begun = True
        self._pass_epoch = epoch
        loader = _open(self.source, {"batch_size": self.batch_size, **options}, direct=False)
        self._live = loader
        self._live_pid = os.getpid()
        self._live_ended = False
        try:
            yield from loader
            self._live_ended = True
        finally:
            loader.close()

    def state_dict(self) -> Dict[str, Any]:
        """Where this process's pass stands: ``{"arrow_dlpack_batch_dataset": 1, "epoch": ...,
        "shard": [index, count], "loader": <the loader's state_dict(), or None before the first
        batch>, "ended": <whether the pass ran to its end>, "seed": <the shuffle's seed, or None
        unshuffled>}``; a dataset made without a ``seed`` takes the state's. A state whose pass
        ended resumes nothing: the next pass is whole, as torchdata's ``StatefulDataLoader``
        begins a new epoch after a checkpoint taken at the end of one."""
        # A pass of another process (the parent of a forked DataLoader worker) is not this
        # process's: its loader is the parent's.
        live = self._live if self._live_pid == os.getpid() else None
        loader = live.state_dict() if live is not None else self._resume
        epoch = self._pass_epoch if live is not None else None
        shard = None
        if loader is None:
            shard = list(
                _shard(
                    self.options.get("rank"),
                    self.options.get("world_size"),
                    self._splits(),
                )
            )
        return {
            _DATASET_KEY: 1,
            "epoch": epoch if epoch is not None else self._epoch.value,
            "shard": shard,
            "loader": loader,
            "ended": live is not None and self._live_ended,
            # The shuffle's seed, also where no batch was given yet (a DataLoader worker that
            # has not begun): a dataset made again without a seed takes it from here.
            "seed": self.options.get("seed") if self.options.get("shuffle") else None,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume the next pass from ``state``, as :meth:`state_dict` gave it."""
        if not isinstance(state, Mapping) or _DATASET_KEY not in state:
            if isinstance(state, Mapping) and {"version", "work"} <= set(state):
                raise ArrowDLPackValueError(
                    "state is a loader's state (from merge_states or batches().state_dict()), "
                    f"without {_DATASET_KEY!r}; pass it as BatchDataset(..., state=state) to "
                    "resume from it (load_state_dict takes a BatchDataset.state_dict())"
                )
            raise ArrowDLPackValueError(
                f"state is {type(state).__name__} without {_DATASET_KEY!r}; expected a "
                "BatchDataset.state_dict()"
            )
        # Its fields are checked here (an epoch, a loader state or None, one epoch in both).
        ended = pass_ended(state) and _in_main_process()
        epoch, loader = state["epoch"], state["loader"]
        # A seed the dataset drew itself gives way to the one the state was saved with (a
        # dataset made again draws another), so that a checkpoint resumes without seed=, for
        # this epoch and the next ones, whatever epoch set_epoch chose meanwhile.
        saved_seed = state.get("seed")
        if saved_seed is None:
            saved_seed = _saved_seed(None, True, loader)
        if (
            not self._seed_given
            and self.options.get("shuffle")
            and saved_seed is not None
            and saved_seed != self.options.get("seed")
        ):
            self.options = {**self.options, "seed": saved_seed}
            self._counts = {}
        # A pass that ended resumes nothing where it was the whole loader's (no DataLoader
        # workers: torchdata begins the next epoch after an iterator that ran out). A worker's
        # pass may end while the others' go on (a checkpoint mid-epoch): it resumes its end.
        self._live = None
        if self._epoch.chosen and epoch != self._epoch.value:
            # set_epoch chose another epoch (in this process, or in the main process before
            # the DataLoader's workers loaded the checkpoint): it wins, in every process alike.
            _warn_not_resumed(epoch, self._epoch.value)
            self._resume = None
            return
        # The epoch is the dataset's, shared with the workers (which load the same checkpoint).
        self._epoch.value = epoch
        # A state saved after its pass ended resumes nothing: the next pass is whole.
        self._resume = dict(loader) if loader is not None and not ended else None
        self._resume_epoch = epoch
        # The next round of passes resumes this state (the dataset's own is superseded).
        self._state_taken = True
        self._epoch.reset_round()

    def __getstate__(self) -> Dict[str, Any]:
        # A live loader stays in the process that made it.
        state = {**self.__dict__, "_live": None}
        options = self.options
        if multiprocessing.context.get_spawning_popen() is not None and (
            options.get("rank") is None or options.get("world_size") is None
        ):
            # A DataLoader worker being spawned (or forkserved) does not see this process's
            # torch.distributed group: it gets the group's rank and world size, as this process
            # sees them, so that it reads its rank's share rather than the whole source. (A
            # forked worker inherits the group itself.)
            rank, world_size = _distributed()
            state["options"] = {**options, "rank": rank, "world_size": world_size}
        return state

    def __repr__(self) -> str:
        return (
            f"BatchDataset({_redacted_source(self.source)}, {self.batch_size}, "
            f"epoch={self.epoch}, options={_redacted_options(self.options)})"
        )


def _in_main_process() -> bool:
    """Whether this process is no DataLoader worker."""
    from torch.utils.data import get_worker_info

    return get_worker_info() is None
