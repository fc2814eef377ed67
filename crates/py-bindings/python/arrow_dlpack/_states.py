"""Saved states as Python sees them: the epoch and seed a state holds, a
``BatchDataset.state_dict()`` taken as its loader's state, and ``merge_states``, which finds the
loader states in whatever holds them (a list, a ``StatefulDataLoader``'s state_dict()) and joins
them.
"""

from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from arrow_dlpack._arrow_dlpack import ArrowDLPackTypeError, ArrowDLPackValueError, _merge_states

def _epoch(epoch: Any, state: Any) -> Any:
    """The epoch to read: ``epoch`` (checked by the loader), else the saved state's, else 0."""
    if epoch is not None:
        return epoch
    saved = state.get("epoch") if isinstance(state, Mapping) else None
    return saved if isinstance(saved, int) and not isinstance(saved, bool) and saved >= 0 else 0


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


#: The key that marks a ``BatchDataset`` state.
_DATASET_KEY = "arrow_dlpack_batch_dataset"


def check_dataset_state(state: Mapping[str, Any]) -> None:
    """Refuses a ``BatchDataset`` state (one that holds :data:`_DATASET_KEY`) whose own fields
    are not those ``state_dict()`` writes: the format 1, an ``epoch`` that is a non-negative
    int and, where its loader's state holds one, the same epoch, and a ``loader`` key that is a
    dict or None (a state without it would resume a whole pass, its batches given again)."""
    if state.get(_DATASET_KEY) != 1 or isinstance(state.get(_DATASET_KEY), bool):
        raise ArrowDLPackValueError(
            f"state[{_DATASET_KEY!r}] is {state.get(_DATASET_KEY)!r}; expected 1, as "
            "BatchDataset.state_dict() writes it"
        )
    epoch = state.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ArrowDLPackValueError(f"state['epoch'] is {epoch!r}; expected a non-negative int")
    if "loader" not in state:
        raise ArrowDLPackValueError(
            "state has no 'loader' key; expected a BatchDataset.state_dict() (its 'loader' is "
            "None before the first batch)"
        )
    loader = state["loader"]
    if loader is not None and not isinstance(loader, Mapping):
        raise ArrowDLPackValueError(f"state['loader'] is {type(loader).__name__}; expected a dict or None")
    seed = state.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64):
        raise ArrowDLPackValueError(f"state['seed'] is {seed!r}; expected None or an int from 0 to 2**64 - 1")
    saved = loader.get("epoch") if isinstance(loader, Mapping) else None
    if saved is not None and saved != epoch:
        raise ArrowDLPackValueError(
            f"state['epoch'] is {epoch!r} and its loader's state is of epoch {saved!r}; expected "
            "one epoch, as BatchDataset.state_dict() writes them"
        )


def pass_ended(state: Any) -> bool:
    """Whether ``state`` is a ``BatchDataset`` state saved after its pass ended (the checkpoint
    that torchdata's ``StatefulDataLoader`` takes at the end of an epoch), which resumes nothing:
    the next pass is whole. The state's own fields are checked (:func:`check_dataset_state`)."""
    if not isinstance(state, Mapping) or _DATASET_KEY not in state:
        return False
    check_dataset_state(state)
    ended = state.get("ended", False)
    if not isinstance(ended, bool):
        raise ArrowDLPackValueError(f"state['ended'] is {ended!r}; expected True or False")
    return ended


def loader_state(state: Any) -> Any:
    """``state`` as a loader's state: a ``BatchDataset.state_dict()`` gives its loader's (None
    before its first batch: the epoch from its start); anything else as it is."""
    if isinstance(state, Mapping) and _DATASET_KEY in state:
        pass_ended(state)  # its mark is checked, though a loader gives the pass's rest either way
        loader = state.get("loader")
        return dict(loader) if isinstance(loader, Mapping) else loader
    return state

#: The deepest nesting of dicts and lists that :func:`merge_states` looks into for states.
_MAX_STATE_DEPTH = 64


def _loader_states(
    found: Any,
    out: List[Dict[str, Any]],
    shards: List[Any],
    ended: Tuple[List[bool], List[bool]],
) -> None:
    """Collects the loader states in ``found``: a state from ``state_dict()``, a
    ``BatchDataset`` state, or any dict or list that holds them (a ``StatefulDataLoader``'s
    state dict); ``shards`` gets the shards of ``BatchDataset`` states that read nothing yet,
    and ``ended`` whether each ``StatefulDataLoader`` iterator found had run out, and whether
    each ``BatchDataset`` pass had ended.

    The walk is iterative and bounded: nesting deeper than :data:`_MAX_STATE_DEPTH` levels is a
    ``ValueError``, a dict or list met twice (a cycle) is looked into once, and a state met
    twice (the same object given twice) is a ``ValueError``."""
    seen = set()
    stack: List[Tuple[Any, int]] = [(found, 0)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (Mapping, list, tuple)):
            continue
        if depth > _MAX_STATE_DEPTH:
            raise ArrowDLPackValueError(
                f"the states nest deeper than {_MAX_STATE_DEPTH} levels of dicts and lists; "
                "expected the state_dict() of every shard, or dicts and lists that hold them"
            )
        if id(item) in seen:
            if isinstance(item, Mapping) and (
                _DATASET_KEY in item or {"version", "work"} <= set(item)
            ):
                # Not a cycle but one shard's state given twice: its rows would be counted once.
                raise ArrowDLPackValueError(
                    "the same state is given twice; expected the state_dict() of every shard "
                    "once"
                )
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            if isinstance(item.get("_iterator_finished"), bool):
                ended[0].append(item["_iterator_finished"])
            if _DATASET_KEY in item:
                ended[1].append(pass_ended(item))
                if item.get("loader") is not None:
                    out.append(dict(item["loader"]))
                elif item.get("shard") is not None:
                    shards.append(item)
                continue
            # A loader state of any format version (``merge_states`` refuses another format
            # with its own message).
            if {"version", "work"} <= set(item):
                out.append(dict(item))
                continue
            children = list(item.values())
        else:
            children = list(item)
        # Reversed, so that the states come out in the order they are held.
        stack.extend((child, depth + 1) for child in reversed(children))


def merge_states(states: Iterable[Any]) -> Optional[Dict[str, Any]]:
    """One state from the states of every shard of a run, for a resume with another number of
    ranks or workers: pass it as ``state=`` to ``batches`` (or ``BatchDataset``) in every new
    rank and worker, and together they read each row the old run had not given exactly once
    (in an order of their own).

    ``states`` holds, for every shard (rank and DataLoader worker) of the old run, its
    ``state_dict()``, or anything that holds them: ``BatchDataset`` states, the state dicts of
    every rank's ``StatefulDataLoader``. None when no shard had read anything (start afresh).

    When every ``StatefulDataLoader`` state says that its iterator ran out (a checkpoint at the
    end of an epoch), or, without them, every ``BatchDataset`` state that its pass ended, the
    merge is a ``BatchDataset`` state whose pass ended:
    ``BatchDataset(state=...)`` then begins a whole pass of that epoch, as the checkpoint
    loaded as it is would (``batches(state=...)`` gives the epoch's rest, nothing).
    """
    found: List[Dict[str, Any]] = []
    idle: List[Any] = []
    # Whether each StatefulDataLoader iterator had run out, and each BatchDataset pass ended.
    ended: Tuple[List[bool], List[bool]] = ([], [])
    try:
        walk = iter(states)
    except TypeError:
        raise ArrowDLPackTypeError(
            f"states is {type(states).__name__}; expected an iterable of the state_dict() of "
            "every shard"
        ) from None
    _loader_states(list(walk), found, idle, ended)
    if not found:
        if idle:
            return None
        raise ArrowDLPackValueError("no loader state found; expected the state_dict() of every shard")
    for placeholder in idle:
        # A worker that gave no batch: the work of the run, from its start.
        shard = placeholder["shard"]
        if not (isinstance(shard, (list, tuple)) and len(shard) == 2):
            raise ArrowDLPackValueError(f"a dataset state has shard {shard!r}; expected [index, count]")
        found.append({**found[0], "shard": list(shard), "position": None})
    merged = _merge_states(found)
    # A worker's pass may end before the others' (its flag is then True mid-epoch), and a
    # worker's last state is sent with its last batch, before its pass ends: where
    # StatefulDataLoader states say whether their iterators ran out, they decide.
    iterators, passes = ended
    decisive = iterators or passes
    if decisive and all(decisive):
        return {_DATASET_KEY: 1, "epoch": merged.get("epoch"), "shard": None, "loader": merged,
                "ended": True}
    return merged
