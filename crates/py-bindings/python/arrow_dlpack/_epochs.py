"""The epoch a ``BatchDataset`` shares with its DataLoader workers, and the round of passes
that resumes its state: a few integers in shared memory, so that ``set_epoch`` and a resumed
state reach workers forked or spawned before or after them.
"""

import ctypes
import multiprocessing
import multiprocessing.context
from typing import Any, Dict

class _SharedEpoch:
    """An epoch that the copies of a dataset in DataLoader workers share with the dataset that
    made them, and whether ``set_epoch`` chose it: two 64-bit integers in shared memory, so
    that ``set_epoch`` in the main process reaches workers that persist between epochs
    (``persistent_workers=True``), and a worker that loads a checkpoint knows whether its epoch
    was chosen.

    The memory is inherited by forked workers and handed to spawned (and forkserver) workers
    when they start; a pickle made at any other time (``pickle.dumps(dataset)``) carries the
    values, and its copy gets memory of its own."""

    __slots__ = ("_shared",)

    def __init__(self, epoch: int, chosen: bool = False) -> None:
        # Three ctypes integers in shared memory: the epoch, 1 once set_epoch chose it, and the
        # round of the passes that resumed the dataset's state (0 before any).
        self._shared: Any = multiprocessing.Array(
            ctypes.c_uint64, [epoch, int(chosen), 0], lock=False
        )

    @property
    def value(self) -> int:
        return int(self._shared[0])

    @value.setter
    def value(self, epoch: int) -> None:
        self._shared[0] = epoch

    @property
    def chosen(self) -> bool:
        """Whether ``set_epoch`` set the epoch."""
        return bool(self._shared[1])

    def choose(self, epoch: int) -> None:
        self._shared[0] = epoch
        self._shared[1] = 1

    def resumes(self, round_id: int) -> bool:
        """Whether a pass of round ``round_id`` resumes the dataset's state: the passes of the
        first round that began (the DataLoader workers of one iterator, which share a round)
        do, those of later rounds do not."""
        taken = int(self._shared[2])
        return taken in (0, round_id)

    def resumed_by(self, round_id: int) -> None:
        if int(self._shared[2]) == 0:
            self._shared[2] = round_id

    def reset_round(self) -> None:
        """A state was loaded: the next round of passes resumes it."""
        self._shared[2] = 0

    def __getstate__(self) -> Dict[str, Any]:
        if multiprocessing.context.get_spawning_popen() is not None:
            # A worker process being started: it gets the shared memory itself.
            return {"shared": self._shared}
        return {"epoch": self.value, "chosen": self.chosen, "resumed": int(self._shared[2])}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        if "shared" in state:
            self._shared = state["shared"]
        else:
            chosen = int(bool(state.get("chosen", False)))
            resumed = int(state.get("resumed", 0))
            self._shared = multiprocessing.Array(
                ctypes.c_uint64, [state["epoch"], chosen, resumed], lock=False
            )



#: The round of passes in the process that made a dataset (no DataLoader worker).
_MAIN_ROUND = 2**64 - 1


def _round() -> int:
    """The round of the pass about to begin: the DataLoader workers of one iterator share it
    (their base seed, which torch draws anew for each iterator), a pass without workers is the
    main process's."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None:
        return _MAIN_ROUND
    return ((int(info.seed) - int(info.id)) % _MAIN_ROUND) or 1
