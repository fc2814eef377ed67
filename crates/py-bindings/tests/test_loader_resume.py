"""Resuming ``ad.batches``: ``state_dict()`` after ``k`` batches, saved through json and
through ``torch.save``, resumed in a new process with ``state=``, gives the rest of the
uninterrupted run byte for byte; ``BatchDataset`` under torchdata's ``StatefulDataLoader``
resumes each worker exactly, and ``merge_states`` lets another number of ranks and workers read
each remaining row exactly once; states of other arguments and corrupt states are ValueError.

torchdata (``StatefulDataLoader``) is a test requirement (requirements-test.txt).
"""

import copy
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

import arrow_dlpack as ad

SIZES = [7, 5, 9, 3, 8, 6]
ID = ["id"]
ROWS = sum(SIZES)


def _table(sizes=SIZES):
    """Record batches of ``sizes`` rows: ``id``, two float columns for a group, a nullable
    column for a mask, a fixed-shape tensor column and a list column for sequences."""
    batches = []
    start = 0
    for size in sizes:
        ids = np.arange(start, start + size, dtype=np.int64)
        start += size
        emb_type = pa.fixed_shape_tensor(pa.float32(), (2, 2))
        emb = pa.ExtensionArray.from_storage(
            emb_type,
            pa.FixedSizeListArray.from_arrays(
                pa.array((np.repeat(ids, 4) + np.tile([0, 1, 2, 3], size)).astype(np.float32)), 4
            ),
        )
        batches.append(
            pa.record_batch(
                {
                    "id": ids,
                    "a": ids.astype(np.float32) * 0.5,
                    "b": ids.astype(np.float64) + 0.25,
                    "m": pa.array([None if i % 4 == 0 else float(i) for i in ids]),
                    "emb": emb,
                    "tokens": pa.array([list(range(int(i) % 5)) for i in ids], pa.list_(pa.int32())),
                }
            )
        )
    return pa.Table.from_batches(batches)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """The same rows as an IPC file, a Parquet file (row groups of 6 rows) and an IPC stream."""
    folder = tmp_path_factory.mktemp("resume")
    table = _table()
    ipc_path = str(folder / "t.arrow")
    feather.write_feather(table, ipc_path, compression="uncompressed")
    parquet_path = str(folder / "t.parquet")
    pq.write_table(table, parquet_path, row_group_size=6)
    stream_path = str(folder / "t.arrows")
    with ipc.new_stream(stream_path, table.schema) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    return {"ipc": ipc_path, "parquet": parquet_path, "stream": stream_path}


OPTIONS = {
    "in order": dict(columns=["id", "emb"], groups={"ab": ["a", "b"]}, masks=["m"], allow_nulls=True),
    "shuffled": dict(
        columns=["id", "emb"], groups={"ab": ["a", "b"]}, masks=["m"], allow_nulls=True,
        shuffle=True, seed=7, buffer_size=10,
    ),
    "padded, drop_last": dict(columns=["id"], sequences={"tokens": "pad"}, drop_last=True),
    "packed by tokens": dict(columns=["id"], sequences={"tokens": "pack"}, max_tokens=9),
    "buckets, shuffled": dict(
        columns=["id"], sequences={"tokens": "jagged"}, bucket_by_length=True, shuffle=True,
        seed=3, buffer_size=12,
    ),
}


def _digest(batch):
    """Every tensor of a batch as (name, dtype, shape, sha256 of its bytes)."""
    out = []
    for name in sorted(batch):
        array = np.from_dlpack(batch[name])
        out.append((name, str(array.dtype), list(array.shape),
                    hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()))
    return out


def _run(source, options, state=None, take=None):
    """The digests of the batches of ``source``, and the state after ``take`` of them."""
    iterator = ad.batches(source, 4, state=state, **options)
    out = []
    for batch in iterator:
        out.append(_digest(batch))
        if take is not None and len(out) == take:
            return out, iterator.state_dict()
    return out, iterator.state_dict()


CHILD = textwrap.dedent(
    """
    import hashlib, json, pickle, sys
    import numpy as np
    import torch
    import arrow_dlpack as ad

    cases = json.load(open(sys.argv[1]))
    out = []
    for case in cases:
        if case["saved"] == "torch":
            state = torch.load(case["state"], weights_only=True)
        else:
            state = json.load(open(case["state"]))
        digests = []
        for batch in ad.batches(case["source"], 4, state=state, **case["options"]):
            digests.append([
                (name, str(np.from_dlpack(batch[name]).dtype),
                 list(np.from_dlpack(batch[name]).shape),
                 hashlib.sha256(np.ascontiguousarray(np.from_dlpack(batch[name])).tobytes()).hexdigest())
                for name in sorted(batch)
            ])
        out.append(digests)
    json.dump(out, open(sys.argv[2], "w"))
    """
)


def test_a_new_process_resumes_every_stopping_point_to_the_same_batches(sources, tmp_path):
    cases = []
    expected = []
    for source_name, source in sources.items():
        for options_name, options in OPTIONS.items():
            full, _ = _run(source, options)
            assert len(full) > 4, (source_name, options_name)
            # 0, inside the first unit, at and around unit boundaries, inside a window, after
            # the last batch.
            for k in sorted({0, 1, 2, 3, len(full) // 2, len(full) - 1, len(full)}):
                _, state = _run(source, options, take=k) if k else (None, ad.batches(source, 4, **options).state_dict())
                json.dumps(state)  # plain data
                for saved in ("json", "torch"):
                    path = tmp_path / f"state{len(cases)}.{saved}"
                    if saved == "json":
                        path.write_text(json.dumps(state))
                    else:
                        torch.save(state, path)
                    cases.append({"source": source, "options": options, "state": str(path), "saved": saved})
                    expected.append(full[k:])
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "child.py").write_text(CHILD)
    subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
        check=True, timeout=600,
    )
    got = json.loads((tmp_path / "out.json").read_text())
    for case, rest, want in zip(cases, got, expected):
        assert [[tuple(t) for t in batch] for batch in rest] == [[tuple(t) for t in batch] for batch in want], case


def test_a_table_source_resumes_by_passing_over_the_rows_read(sources):
    table = _table()
    for options in OPTIONS.values():
        full, _ = _run(table, options)
        for k in range(len(full) + 1):
            _, state = _run(table, options, take=k) if k else (None, ad.batches(table, 4, **options).state_dict())
            rest, _ = _run(table, options, state=json.loads(json.dumps(state)))
            assert rest == full[k:]


def test_the_state_after_the_end_and_after_close_resumes_to_nothing(sources):
    iterator = ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=1)
    assert len(list(iterator)) == iterator.num_batches
    assert list(ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=1, state=iterator.state_dict())) == []
    iterator = ad.batches(sources["ipc"], 4, columns=ID)
    next(iterator)
    iterator.close()
    rest = ad.batches(sources["ipc"], 4, columns=ID, state=iterator.state_dict())
    assert len(rest) == len(list(rest)) == (ROWS + 3) // 4 - 1


def test_a_shuffled_resume_without_a_seed_takes_the_saved_one(sources):
    iterator = ad.batches(sources["ipc"], 4, columns=ID, shuffle=True)
    first = [_digest(next(iterator)) for _ in range(3)]
    state = iterator.state_dict()
    rest = [_digest(b) for b in iterator]
    assert [_digest(b) for b in ad.batches(sources["ipc"], 4, columns=ID, shuffle=True, state=state)] == rest
    assert first


def test_epochs_give_new_reproducible_orders_recorded_in_the_state(sources):
    def ids(epoch, **extra):
        return [int(i) for b in ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=5, epoch=epoch, **extra)
                for i in np.from_dlpack(b["id"])]

    assert ids(0) != ids(1)
    assert ids(1) == ids(1)
    assert sorted(ids(2)) == list(range(ROWS))
    iterator = ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=5, epoch=2)
    next(iterator)
    state = iterator.state_dict()
    assert state["epoch"] == 2
    # The epoch comes from the state when not given; another epoch is refused.
    assert ids(2)[4:] == [int(i) for b in ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=5, state=state)
                          for i in np.from_dlpack(b["id"])]
    with pytest.raises(ValueError, match="epoch 2; this loader reads epoch 3"):
        ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=5, epoch=3, state=state)
    with pytest.raises(ValueError, match="epoch is -1"):
        ad.batches(sources["parquet"], 4, columns=ID, epoch=-1)
    with pytest.raises(TypeError, match="epoch is str"):
        ad.batches(sources["parquet"], 4, columns=ID, epoch="1")


def _state_after(source, k=2, **options):
    iterator = ad.batches(source, 4, columns=ID, **options)
    for _ in range(k):
        next(iterator)
    return iterator.state_dict()


def test_states_of_other_arguments_are_refused_naming_what_differs(sources):
    state = _state_after(sources["parquet"], shuffle=True, seed=1, buffer_size=8)
    cases = [
        (dict(batch_size=5), "batch_size"),
        (dict(columns=["id", "a"]), "columns"),
        (dict(seed=2), "seed"),
        (dict(shuffle=False), "shuffle"),
        (dict(buffer_size=9), "buffer_size"),
        (dict(rank=1, world_size=2), "shard 0 of 1"),
    ]
    for change, name in cases:
        options = dict(shuffle=True, seed=1, buffer_size=8, columns=ID)
        batch_size = change.pop("batch_size", 4)
        options.update(change)
        with pytest.raises(ValueError, match=name):
            ad.batches(sources["parquet"], batch_size, state=state, **options)
    with pytest.raises(ValueError, match="source"):
        ad.batches(sources["ipc"], 4, columns=ID, shuffle=True, seed=1, buffer_size=8, state=state)
    with pytest.raises(ValueError, match="newer than this build"):
        ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=1, buffer_size=8,
                   state={**state, "version": 99})
    # Also when the newer format has fields this build does not know.
    with pytest.raises(ValueError, match="newer than this build"):
        ad.batches(sources["parquet"], 4, columns=ID, shuffle=True, seed=1, buffer_size=8,
                   state={**state, "version": 5, "checksum": "abc"})


def _hostile(state):
    """Corruptions of ``state``: each number huge, negative, a float, a bool, a string; each key
    missing; an extra key; wrong types for whole parts."""
    out = []

    def walk(value, path):
        if isinstance(value, dict):
            for key in list(value):
                walk(value[key], path + [key])
                broken = copy.deepcopy(state)
                parent = broken
                for step in path:
                    parent = parent[step]
                del parent[key]
                out.append(broken)
            broken = copy.deepcopy(state)
            parent = broken
            for step in path:
                parent = parent[step]
            parent["extra"] = 1
            out.append(broken)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, path + [index])
        else:
            for bad in (2**64, 2**63, 2**64 - 1, -1, -(2**70), 1.5, True, "3", None, [1], {"a": 1}):
                broken = copy.deepcopy(state)
                parent = broken
                for step in path[:-1]:
                    parent = parent[step]
                parent[path[-1]] = bad
                out.append(broken)

    walk(state, [])
    return out


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("kind", ["ipc", "parquet", "stream"])
def test_corrupt_states_are_value_errors_never_panics(sources, kind, shuffle):
    options = dict(shuffle=shuffle, seed=4, buffer_size=6)
    state = _state_after(sources[kind], 3, **options)
    for broken in _hostile(state):
        try:
            for _ in ad.batches(sources[kind], 4, columns=ID, state=broken, **options):
                pass
        except ValueError as error:
            assert "panicked" not in str(error), (broken, error)
        # Accepted: it ended cleanly (a number that changes nothing, or a position that is
        # still valid).
    for not_a_dict in ("state", 3, [state]):
        with pytest.raises(TypeError, match="state is"):
            ad.batches(sources[kind], 4, columns=ID, state=not_a_dict, **options)


def _ids(batch):
    return [int(i) for i in batch["id"].tolist()]


def _dataset(source, **options):
    return ad.BatchDataset(source, 4, columns=ID, shuffle=True, seed=9, buffer_size=8, **options)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stateful_data_loader_resumes_mid_epoch_exactly(sources, num_workers):
    source = sources["parquet"]
    full = [_ids(b) for b in StatefulDataLoader(_dataset(source), batch_size=None, num_workers=num_workers)]
    assert sorted(i for b in full for i in b) == list(range(ROWS))
    for k in (1, 3, len(full) - 1):
        loader = StatefulDataLoader(_dataset(source), batch_size=None, num_workers=num_workers)
        iterator = iter(loader)
        seen = [_ids(next(iterator)) for _ in range(k)]
        buffer = io.BytesIO()
        torch.save(loader.state_dict(), buffer)
        del iterator, loader
        buffer.seek(0)
        resumed = StatefulDataLoader(_dataset(source), batch_size=None, num_workers=num_workers)
        resumed.load_state_dict(torch.load(buffer, weights_only=False))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rest = [_ids(b) for b in resumed]
        # Resumed from the dataset's state, not by reading the batches again and dropping them.
        assert not [w for w in caught if "fast-forward" in str(w.message)]
        assert seen + rest == full, k
        # The loader counts the batches it gave before the checkpoint (as its own progress
        # does): its length is the whole pass's.
        assert len(resumed) == len(full)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_set_epoch_wins_over_a_checkpoint_of_another_epoch_with_and_without_workers(sources, num_workers):
    source = sources["parquet"]

    def epoch_of(epoch):
        dataset = _dataset(source)
        dataset.set_epoch(epoch)
        return [_ids(b) for b in StatefulDataLoader(dataset, batch_size=None, num_workers=num_workers)]

    loader = StatefulDataLoader(_dataset(source), batch_size=None, num_workers=num_workers)
    iterator = iter(loader)
    seen = [_ids(next(iterator)) for _ in range(2)]
    state = loader.state_dict()
    del iterator, loader
    # The checkpoint's epoch (0) set again, before or after loading it: the rest of epoch 0.
    for set_first in (True, False):
        dataset = _dataset(source)
        resumed = StatefulDataLoader(dataset, batch_size=None, num_workers=num_workers)
        if set_first:
            dataset.set_epoch(0)
        resumed.load_state_dict(state)
        if not set_first:
            dataset.set_epoch(0)
        assert seen + [_ids(b) for b in resumed] == epoch_of(0), set_first
    # Another epoch set, before or after loading it (a checkpoint at the end of epoch 0, and
    # the run goes on with epoch 1): epoch 1 whole, in every worker alike, with a warning.
    for set_first in (True, False):
        dataset = _dataset(source)
        resumed = StatefulDataLoader(dataset, batch_size=None, num_workers=num_workers)
        if set_first:
            dataset.set_epoch(1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            resumed.load_state_dict(state)
            if not set_first:
                dataset.set_epoch(1)
            rest = [_ids(b) for b in resumed]
        assert rest == epoch_of(1), set_first
        assert dataset.epoch == 1
        if num_workers == 0:
            assert any("is not resumed: set_epoch(1)" in str(w.message) for w in caught), caught


def test_each_rank_resumes_identically(sources):
    source = sources["ipc"]
    for rank in (0, 1):
        full = [_ids(b) for b in StatefulDataLoader(
            _dataset(source, rank=rank, world_size=2), batch_size=None, num_workers=2)]
        loader = StatefulDataLoader(_dataset(source, rank=rank, world_size=2), batch_size=None, num_workers=2)
        iterator = iter(loader)
        seen = [_ids(next(iterator)) for _ in range(2)]
        state = loader.state_dict()
        del iterator, loader
        resumed = StatefulDataLoader(_dataset(source, rank=rank, world_size=2), batch_size=None, num_workers=2)
        resumed.load_state_dict(state)
        assert seen + [_ids(b) for b in resumed] == full


@pytest.mark.parametrize("shuffle", [False, True])
def test_an_elastic_resume_reads_every_remaining_row_exactly_once(sources, shuffle):
    source = sources["parquet"]
    options = dict(shuffle=shuffle, seed=9, buffer_size=8)
    seen = []
    states = []
    # Two ranks of two workers each, stopped after a different number of batches.
    for rank, stop in ((0, 3), (1, 2)):
        loader = StatefulDataLoader(
            ad.BatchDataset(source, 3, columns=ID, rank=rank, world_size=2, **options), batch_size=None, num_workers=2)
        iterator = iter(loader)
        seen += [i for _ in range(stop) for i in _ids(next(iterator))]
        states.append(torch.load(_saved(loader.state_dict()), weights_only=False))
        del iterator, loader
    merged = ad.merge_states(states)
    json.dumps(merged)
    # One rank of three workers.
    resumed = StatefulDataLoader(
        ad.BatchDataset(source, 3, columns=ID, state=merged, rank=0, world_size=1, **options),
        batch_size=None, num_workers=3)
    left = resumed.dataset.batches_left(num_workers=3)
    batches = [_ids(b) for b in resumed]
    rest = [i for b in batches for i in b]
    assert seen and rest
    assert sorted(seen + rest) == list(range(ROWS))
    assert left == len(batches) < len(resumed)
    # The merged state resumes its own epoch; the next epoch is whole.
    resumed.dataset.set_epoch(1)
    assert sorted(i for b in resumed for i in _ids(b)) == list(range(ROWS))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batches_left_counts_what_a_resumed_pass_gives_and_len_a_whole_pass(sources, num_workers):
    source = sources["ipc"]
    whole = len(ad.BatchDataset(source, 4, columns=ID))
    states = [_state_after(source, 2, rank=r, world_size=2) for r in range(2)]
    for state in (_state_after(source, 3), ad.merge_states(states)):
        dataset = ad.BatchDataset(source, 4, columns=ID, state=state)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=num_workers)
        if num_workers and state.get("shard") is not None:
            # A state of one shard cannot be resumed by two workers: the count says so, as
            # the pass would.
            with pytest.raises(ad.ArrowDLPackValueError, match="merge the states"):
                dataset.batches_left(num_workers)
            continue
        left = dataset.batches_left(num_workers)
        assert left == len(list(loader)) < whole
        # len() is a whole pass, before and after the resumed one; the next epoch is whole.
        assert len(dataset) == whole
        dataset.set_epoch(1)
        assert dataset.batches_left(num_workers) == len(list(loader)) == len(loader)
    # A state loaded into a dataset is counted likewise, until its pass begins.
    dataset = ad.BatchDataset(source, 4, columns=ID)
    dataset.load_state_dict({"arrow_dlpack_batch_dataset": 1, "epoch": 0, "shard": None,
                             "loader": _state_after(source, 3)})
    assert dataset.batches_left() == whole - 3 == len(list(dataset))
    assert dataset.batches_left() == len(dataset) == whole
    for wrong, error in ((-1, ValueError), (True, TypeError), ("2", TypeError), (2**31, ValueError)):
        with pytest.raises(error, match="num_workers"):
            dataset.batches_left(wrong)


def test_a_state_of_other_settings_is_refused_when_the_dataset_is_made(sources):
    # In the process that makes the dataset, not first in a DataLoader worker.
    state = _state_after(sources["parquet"], 2, shuffle=True, seed=1)
    for other, named in ((dict(seed=2), "seed: saved 1, given 2"), (dict(seed=1, batch_size=8), "batch_size: saved 4, given 8")):
        batch_size = other.pop("batch_size", 4)
        with pytest.raises(ad.ArrowDLPackValueError, match=named):
            ad.BatchDataset(sources["parquet"], batch_size, columns=ID, shuffle=True, state=state, **other)
    assert len(ad.BatchDataset(sources["parquet"], 4, columns=ID, shuffle=True, seed=1, state=state)) > 0


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_given_to_a_dataset_resumes_its_first_pass_only(sources, num_workers):
    # Epochs without set_epoch repeat the same order: the state resumes the first pass (its
    # workers' shares), and every later pass is whole, with or without persistent workers.
    source = sources["parquet"]
    whole = [i for b in ad.BatchDataset(source, 4, columns=ID) for i in _ids(b)]
    # Merged, so that two workers can resume it.
    state = ad.merge_states([_state_after(source, 3)])
    for persistent in ([False, True] if num_workers else [False]):
        dataset = ad.BatchDataset(source, 4, columns=ID, state=state)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=None, num_workers=num_workers, persistent_workers=persistent)
        first = sorted(i for b in loader for i in _ids(b))
        assert first == sorted(whole[12:]), persistent
        for _ in range(2):
            assert dataset.batches_left(num_workers) == len(loader)
            assert sorted(i for b in loader for i in _ids(b)) == sorted(whole), persistent
    # A state loaded over the given one resumes the first pass instead; the next is whole.
    dataset = ad.BatchDataset(source, 4, columns=ID, state=state)
    dataset.load_state_dict({"arrow_dlpack_batch_dataset": 1, "epoch": 0, "shard": None,
                             "loader": ad.merge_states([_state_after(source, 5)])})
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=num_workers)
    assert sorted(i for b in loader for i in _ids(b)) == sorted(whole[20:])
    assert sorted(i for b in loader for i in _ids(b)) == sorted(whole)


def _saved(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer


def test_merge_states_joins_iterator_states_and_refuses_what_does_not_fit(sources):
    source = sources["ipc"]
    states = [_state_after(source, 1, rank=r, world_size=2) for r in range(2)]
    merged = ad.merge_states(states)
    rest = [i for r in range(3) for b in ad.batches(source, 4, columns=ID, rank=r, world_size=3, state=merged)
            for i in np.from_dlpack(b["id"]).tolist()]
    assert len(rest) == ROWS - 2 * 4 and len(set(rest)) == len(rest)
    with pytest.raises(ValueError, match="one state of each shard"):
        ad.merge_states(states[:1])
    with pytest.raises(ValueError, match="the same state is given twice"):
        ad.merge_states(states[:1] + states[:1])
    with pytest.raises(ValueError, match="different"):
        ad.merge_states([states[0], _state_after(source, 1, rank=1, world_size=2, shuffle=True, seed=1)])
    with pytest.raises(ValueError, match="no loader state"):
        ad.merge_states([{"something": 1}])


def test_the_example_of_the_guide_resumes_after_the_checkpoint(tmp_path, monkeypatch):
    guide = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "loader.md")
    with open(guide, encoding="utf-8") as handle:
        section = handle.read().split("## Resuming a run", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    # The example's 16 features and 10 classes; the row's number is kept as "row" to follow it.
    features = [f"f{i}" for i in range(16)]
    rows = np.arange(5000, dtype=np.int64)
    table = pa.table({"label": rows % 10, "row": rows, **{name: np.ones(5000, np.float32) for name in features}})
    pq.write_table(table, "train.parquet", row_group_size=1500)
    seen = []
    # The example as written, its training step also noting the rows of each batch.
    step = "def train_step(batch):\n"
    assert step in code
    code = code.replace("columns=[\"label\"]", "columns=[\"label\", \"row\"]")
    code = code.replace(step, step + "    seen.append(batch[\"row\"].tolist())\n")
    namespace = {"seen": seen}
    exec(compile(code, guide, "exec"), namespace)
    # The first pass gave every batch (5 of 1,024), checkpointing after the first; the resumed
    # loader gave the four after it again, the same rows.
    assert len(seen) == 9
    assert seen[5:] == seen[1:5]
    assert sorted(i for batch in seen[:5] for i in batch) == list(range(5000))


@pytest.mark.parametrize("kind", ["parquet", "stream"])
def test_corrupt_states_given_to_merge_states_are_value_errors(sources, kind):
    options = dict(shuffle=True, seed=4, buffer_size=6)
    states = [_state_after(sources[kind], 2, rank=r, world_size=2, **options) for r in range(2)]
    merged = ad.merge_states(states)
    assert merged["shard"] is None and merged["position"] is None
    for broken in _hostile(states[0]):
        try:
            ad.merge_states([broken, states[1]])
        except ValueError as error:
            assert "panicked" not in str(error), (broken, error)
    with pytest.raises(TypeError, match="expected a dict"):
        ad._arrow_dlpack._merge_states(["state"])


def test_a_batch_datasets_state_dict_is_taken_as_its_loaders_state(sources):
    source = sources["parquet"]
    dataset = ad.BatchDataset(source, 4, columns=ID)
    iterator = iter(dataset)
    seen = [i for _ in range(2) for i in _ids(next(iterator))]
    saved = dataset.state_dict()
    del iterator
    rest = [i for b in ad.BatchDataset(source, 4, columns=ID, state=saved) for i in _ids(b)]
    assert seen + rest == [i for b in ad.BatchDataset(source, 4, columns=ID) for i in _ids(b)]
    loader = ad.batches(source, 4, columns=ID, state=saved)
    assert len(loader) == len(rest) // 4 + (len(rest) % 4 > 0)
