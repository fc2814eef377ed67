"""Where a loader stands among the shards: the DataLoader worker it runs in, the
``torch.distributed`` group, its ``(shard_index, num_shards, num_ranks)``, and the seed every
shard shares. torch is asked only if something already imported it.
"""

import os
import sys
from typing import Optional, Tuple

from arrow_dlpack._arrow_dlpack import ArrowDLPackValueError

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


def _shard(
    rank: Optional[int], world_size: Optional[int], split_workers: Optional[bool] = True,
    direct: bool = False,
) -> Tuple[int, int]:
    """This process's ``(shard_index, num_shards)`` (see :func:`_layout`)."""
    shard_index, num_shards, _ = _layout(rank, world_size, split_workers, direct)
    return shard_index, num_shards


def _layout(
    rank: Optional[int], world_size: Optional[int], split_workers: Optional[bool] = True,
    direct: bool = False,
) -> Tuple[int, int, int]:
    """This process's ``(shard_index, num_shards, num_ranks)``: one shard per DataLoader worker
    of each rank (unless ``split_workers`` is False), so that workers and ranks together read
    every row exactly once, and the number of ranks, between which the batch counts must be
    even (0 when each shard is a rank). ``rank`` and ``world_size`` are checked (:func:`check_python_options`).

    When ``direct`` (``ad.batches`` called by the caller's own code), ``split_workers`` left at
    its default (None) inside a DataLoader worker is refused: a dataset of the caller's own
    that gave each worker its own sources would read a share of a share (half the rows with two
    workers), and one that did not would read everything in every worker if it were not split,
    so only the caller can tell."""
    explicit = rank is not None
    if rank is None or world_size is None:
        rank, world_size = _distributed()
    worker, workers = _worker() if split_workers is not False else (0, 1)
    if direct and split_workers is None and workers > 1:
        call = f"ad.batches(rank={rank}, world_size={world_size})" if explicit else "ad.batches"
        unseen = ""
        if not explicit and world_size == 1:
            unseen = (
                "; no torch.distributed group is visible in this worker (a spawned worker "
                "does not inherit one): under DDP, pass rank= and world_size= too, or use "
                "ad.BatchDataset, which hands them to its workers"
            )
        raise ArrowDLPackValueError(
            f"{call} in DataLoader worker {worker} of {workers} needs split_workers: pass "
            f"split_workers=True to read only this worker's share of rank {rank}'s data (1/{workers} "
            "of it, the workers together reading it once), or split_workers=False if this "
            f"worker was given its own sources (to read all of them){unseen}"
        )
    # Worker-major: shard `worker * world_size + rank` of `world_size * workers`. Units are dealt
    # round-robin to the shards, so a rank's workers together read exactly the units of shard
    # `rank` of `world_size` (what `len()` of a rank counts), and ranks get as many units as an
    # even deal gives them, whatever the number of workers.
    # Every shard is a rank of its own (`num_ranks` 0) unless the ranks have several workers.
    return worker * world_size + rank, world_size * workers, world_size if workers > 1 else 0


def refuse_another_layout(
    made: Tuple[int, int], rank: Optional[int], world_size: Optional[int]
) -> None:
    """Refuses a pass, or a count, as another ``(rank, world_size)`` than ``made``, the
    ``torch.distributed`` group's when a dataset was made: one made before
    ``init_process_group`` took rank 0 of 1, and its length, seed and plan are that layout's
    (read as rank 1 of 2 it counted the whole pass, and each rank drew its own seed: rows were
    read twice and never). ``rank`` and ``world_size`` are the group's as a spawned DataLoader
    worker received them, or None where the group is asked."""
    now = (rank, world_size) if rank is not None and world_size is not None else _distributed()
    if now != tuple(made):
        raise ArrowDLPackValueError(
            f"this BatchDataset was made as rank {made[0]} of {made[1]} (the torch.distributed "
            f"group when it was made) and is read as rank {now[0]} of {now[1]}; its length, seed "
            "and plan are those of the ranks it was made for: make it after "
            "torch.distributed.init_process_group, or pass rank= and world_size= (rank=0, "
            "world_size=1 reads every row in this process alone)"
        )


def _shared_seed(seed: Optional[int], shuffle: bool, num_shards: int) -> int:
    """The seed of the shuffle, the same in every shard so that the shards share one
    permutation of the units and never overlap.

    Without a ``seed``: one loader draws its own; shards of an initialised ``torch.distributed``
    group use seed 0, as ``DistributedSampler`` does (no collective call: a dataset made on one
    rank alone, or before the others reach it, must not wait for them); other shards (explicit
    ``rank``/``world_size`` without a group, DataLoader workers of ``ad.batches``) cannot agree
    on one and are refused.
    """
    if seed is not None:
        return seed
    if not shuffle:
        return 0
    if num_shards == 1:
        return _fresh_seed()
    if not _in_worker() and _distributed()[1] > 1:
        return GROUP_SEED
    raise ArrowDLPackValueError(
        f"shuffle=True over {num_shards} shards needs a seed: without one each shard would draw "
        "its own order and the shards would overlap; pass seed=... (the same in every process)"
    )


#: The seed of a shuffle over the ranks of a ``torch.distributed`` group that gave none,
#: ``DistributedSampler``'s default.
GROUP_SEED = 0


def _fresh_seed() -> int:
    """A seed from the operating system's randomness."""
    return int.from_bytes(os.urandom(8), "little")
