"""The loader's warnings to its caller: rows no rank reads, ranks without batches, ranks whose
batches are not counted in advance. Each points at the first frame outside the package and
follows Python's warning filters."""

import os
import sys
import warnings
from typing import Any, Mapping


def warn_user(message: str) -> None:
    """Warns ``message``, a ``UserWarning`` at the first caller outside the package, under the
    caller's warning filters (by default once per place in the code: a loader made every epoch
    warns at its first)."""
    # The first frame outside the package: the user's call, from whichever entry point.
    frame, level = sys._getframe(0), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


#: The package's folder, whose frames a warning skips.
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_no_batch(ranks: int) -> None:
    """Warns that this rank's share of an epoch of ``ranks`` ranks holds no batch."""
    warn_user(
        f"this rank gets no batch of the epoch: every one of the {ranks} ranks gets as many "
        "batches (a rank never waits at a collective for another's extra batch), and this "
        f"source's rows give fewer batches than {ranks} (fewer rows than ranks, or, with "
        "drop_last, fewer than batch_size x ranks), so each gets none; rows are never repeated "
        "to fill the ranks, as DistributedSampler's padding does: evaluate a small split on "
        "one rank",
    )


def warn_rows_left_out(rows: int, ranks: int) -> None:
    """Warns that ``rows`` rows of the epoch are read by none of ``ranks`` ranks although
    ``drop_last`` is off."""
    warn_user(
        f"the epoch's last {rows} rows are read by no rank: every one of the {ranks} ranks gets "
        "as many batches (a rank never waits at a collective for another's extra batch) and a "
        "batch holds at least a row, so batches of one row leave out the rows past a multiple "
        "of the ranks (rows are never repeated to fill the ranks, as DistributedSampler's "
        "padding does); with batch_size of 2 or more every row is read (the last batches are "
        "shorter), or evaluate on one rank",
    )


def warn_uneven_ranks(ranks: int, sequences: Any) -> None:
    """Warns that the ``ranks`` ranks of a source whose batches are not counted in advance may
    get different numbers of batches: documents packed whole (``sequences`` in mode
    ``"concat"``), or a source read once."""
    if packs_documents(sequences):
        warn_user(
            f"the number of batches of each of the {ranks} ranks is not known in advance: "
            "sequences in mode \"concat\" pack each rank's documents into rows as they come, "
            "so the ranks' counts may differ by a few batches (over files too), and a "
            "distributed run waits forever at the first collective after the shortest rank "
            "ends; train for a fixed number of steps below an epoch's, or end the epoch on "
            "every rank when the first runs out (an all_reduce of a flag each step)",
        )
        return
    warn_user(
        f"the number of batches of each of the {ranks} ranks is not known in advance (a reader "
        "or a stream in object storage is dealt as it comes), so the ranks may get different "
        "numbers of batches, and a distributed run waits forever at the first collective "
        "after the shortest rank ends; pass files, a table or a Hugging Face Dataset, whose "
        "epochs are planned so that every rank gets as many",
    )


def packs_documents(sequences: Any) -> bool:
    """Whether the ``sequences`` option asks for a sequence in mode ``"concat"``."""
    if not isinstance(sequences, Mapping):
        return False
    return any(
        mode == "concat" or (isinstance(mode, Mapping) and mode.get("mode") == "concat")
        for mode in sequences.values()
    )


def plans_anew(state: Any) -> bool:
    """Whether a loader resuming ``state`` plans its epoch anew, so that what its plan leaves out
    is news to the caller: no state, or a merged one (``ad.merge_states``), which a shard's own
    saved state is not (its epoch was planned, and warned about, when it started)."""
    return state is None or (isinstance(state, Mapping) and state.get("shard") is None)
