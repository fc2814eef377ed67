"""Even batches across ranks under token budgets and length buckets: with ``max_tokens`` or
``bucket_by_length`` over several shards of files, 2 and 3 simulated ranks (and ranks x 2
DataLoader workers) get the same number of batches in every epoch, shuffled and resumed, each
row once, every batch within its budget; a planned state merges only before its first batch.
Plain row batches over the same uneven row groups are planned by rows: every rank as many
batches, and their states merge at any point.

Without the plan, the round-robin deal of these uneven row groups gives one rank several times
the rows of another, and as many times the batches.
"""

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

import arrow_dlpack as ad

# Row groups (and IPC record batches) of very different sizes.
SIZES = [150, 4, 3, 12, 5, 2, 30, 3, 6, 40, 2, 5]
ROWS = sum(SIZES)
ID = ["id"]


def _length(i):
    """A skewed length from 1 to 40: many short rows, few long ones."""
    return min((i * 37 + 11) % 40, (i * 53 + 7) % 40) + 1


def _table():
    ids = np.arange(ROWS, dtype=np.int64)
    rows = [[i * 100 + p for p in range(_length(i))] for i in range(ROWS)]
    table = pa.table({"id": ids, "tokens": pa.array(rows, pa.list_(pa.int32()))})
    batches, start = [], 0
    for size in SIZES:
        batches.append(table.slice(start, size).combine_chunks().to_batches()[0])
        start += size
    return batches


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("balance")
    batches = _table()
    parquet = root / "t.parquet"
    with pq.ParquetWriter(parquet, batches[0].schema) as writer:
        for batch in batches:
            # One row group per record batch.
            writer.write_batch(batch, row_group_size=len(SIZES) * 1000)
    ipc = root / "t.arrow"
    # One record batch per row group.
    with pa.ipc.new_file(ipc, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    assert [pq.ParquetFile(parquet).metadata.row_group(g).num_rows
            for g in range(len(SIZES))] == SIZES
    return {"parquet": str(parquet), "ipc": str(ipc)}


CASES = {
    "budget": dict(sequences={"tokens": "pad"}, max_tokens=200),
    "budget-packed-shuffled": dict(sequences={"tokens": "pack"}, max_tokens=150, shuffle=True, seed=3),
    "buckets": dict(sequences={"tokens": "pad"}, bucket_by_length=True),
    "buckets-shuffled": dict(sequences={"tokens": "pad"}, bucket_by_length=True, shuffle=True, seed=5),
    "both": dict(sequences={"tokens": "jagged"}, bucket_by_length=True, max_tokens=120,
                 shuffle=True, seed=7),
}


def _ids(batch):
    return [int(i) for i in np.from_dlpack(batch["id"])]


def _tokens(batch, mode):
    shape = tuple(batch["tokens"].shape)
    return shape[0] * shape[1] if mode == "pad" else shape[0]


def _check(case, options, shards):
    """Equal counts, rows once (all of them without drop_last), budgets kept, lengths right."""
    counts = [len(batches) for batches in shards]
    assert len(set(counts)) == 1 and counts[0] > 0, (case, counts)
    mode = options["sequences"]["tokens"]
    seen = []
    for batch in (b for batches in shards for b in batches):
        ids = _ids(batch)
        assert len(ids) <= 16, case
        if "max_tokens" in options:
            assert _tokens(batch, mode) <= options["max_tokens"], case
        if mode == "pad":
            assert np.from_dlpack(batch["tokens_lengths"]).tolist() == [_length(i) for i in ids]
        seen += ids
    assert len(seen) == len(set(seen)), case
    if options.get("drop_last"):
        assert set(seen) <= set(range(ROWS)), case
    else:
        assert sorted(seen) == list(range(ROWS)), case


@pytest.mark.parametrize("kind", ["parquet", "ipc"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("drop_last", [False, True])
def test_two_and_three_ranks_get_equal_batches_in_every_epoch(sources, kind, case, drop_last):
    options = dict(CASES[case], drop_last=drop_last, buffer_size=48, columns=ID)
    for world_size in (2, 3):
        orders = []
        for epoch in range(3):
            shards = []
            for rank in range(world_size):
                loader = ad.batches(sources[kind], 16, rank=rank, world_size=world_size,
                                    epoch=epoch, **options)
                planned = len(loader)
                shards.append(list(loader))
                assert planned == len(shards[-1]), (case, rank)
            _check(f"{case} {kind} {world_size} ranks epoch {epoch}", options, shards)
            orders.append([_ids(b) for b in shards[0]])
        if options.get("shuffle"):
            assert orders[0] != orders[1] and orders[1] != orders[2], case


def _dataset(source, rank, world_size, case, **more):
    return ad.BatchDataset(source, 16, columns=ID, buffer_size=48, rank=rank,
                           world_size=world_size, **CASES[case], **more)


# torch warns that a pass gave more batches than len(): see the comment on len() below.
@pytest.mark.filterwarnings("ignore:Length of IterableDataset")
@pytest.mark.parametrize("case", ["budget-packed-shuffled", "buckets-shuffled"])
def test_ranks_of_two_dataloader_workers_get_equal_batches_every_epoch(sources, case):
    for world_size in (2, 3):
        datasets = [_dataset(sources["parquet"], rank, world_size, case) for rank in range(world_size)]
        loaders = [DataLoader(d, batch_size=None, num_workers=2) for d in datasets]
        orders = []
        for epoch in range(2):
            for dataset in datasets:
                dataset.set_epoch(epoch)
            shards = [list(loader) for loader in loaders]
            counts = [len(batches) for batches in shards]
            assert len(set(counts)) == 1, (case, world_size, epoch, counts)
            # len() counts a plan over the ranks; the workers' shares of the plan over
            # ranks x workers are at most one batch more each rank.
            assert 0 <= counts[0] - len(datasets[0]) <= 1, (counts, len(datasets[0]))
            seen = [i for batches in shards for b in batches for i in b["id"].tolist()]
            assert sorted(seen) == list(range(ROWS)), (case, world_size, epoch)
            orders.append([b["id"].tolist() for b in shards[0]])
        assert orders[0] != orders[1], case


@pytest.mark.parametrize("kind", ["parquet", "ipc"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_rank_resumes_its_planned_batches_exactly(sources, kind, case):
    options = dict(CASES[case], buffer_size=48, columns=ID, epoch=1)
    for world_size in (2, 3):
        for rank in range(world_size):
            full = [_ids(b) for b in ad.batches(sources[kind], 16, rank=rank,
                                                world_size=world_size, **options)]
            for k in (0, 1, len(full) // 2, len(full)):
                loader = ad.batches(sources[kind], 16, rank=rank, world_size=world_size, **options)
                for _ in range(k):
                    next(loader)
                state = loader.state_dict()
                loader.close()
                # Before the first batch a state has no position: the epoch's start.
                assert state["position"] == ({"kind": "plan", "batch": k} if k else None)
                resumed = ad.batches(sources[kind], 16, rank=rank, world_size=world_size,
                                     state=state, **options)
                assert len(resumed) == len(full) - k
                assert [_ids(b) for b in resumed] == full[k:], (case, world_size, rank, k)


def test_stateful_dataloaders_of_two_ranks_of_two_workers_resume_exactly(sources):
    case = "buckets-shuffled"
    make = lambda rank: StatefulDataLoader(  # noqa: E731
        _dataset(sources["ipc"], rank, 2, case), batch_size=None, num_workers=2)
    counts = []
    for rank in (0, 1):
        full = [b["id"].tolist() for b in make(rank)]
        counts.append(len(full))
        loader = make(rank)
        iterator = iter(loader)
        seen = [next(iterator)["id"].tolist() for _ in range(3)]
        buffer = io.BytesIO()
        torch.save(loader.state_dict(), buffer)
        del iterator, loader
        buffer.seek(0)
        resumed = make(rank)
        resumed.load_state_dict(torch.load(buffer, weights_only=False))
        assert seen + [b["id"].tolist() for b in resumed] == full, rank
    assert counts[0] == counts[1]


def test_a_planned_state_merges_only_before_its_first_batch(sources):
    options = dict(CASES["buckets-shuffled"], buffer_size=48, columns=ID)
    source = sources["parquet"]

    def state_after(rank, k):
        loader = ad.batches(source, 16, rank=rank, world_size=2, **options)
        for _ in range(k):
            next(loader)
        return loader.state_dict()

    merged = ad.merge_states([state_after(0, 0), state_after(1, 0)])
    shards = [list(ad.batches(source, 16, rank=rank, world_size=3, state=merged, **options))
              for rank in range(3)]
    _check("merged", options, shards)
    with pytest.raises(ValueError, match="epoch planned from its rows' lengths"):
        ad.merge_states([state_after(0, 2), state_after(1, 0)])
    # A planned position given to a loader that cuts as it reads (one rank) is refused.
    state = state_after(1, 2)
    with pytest.raises(ValueError, match="planned epoch"):
        ad.batches(source, 16, state={**state, "shard": [0, 1], "ranks": 1}, **options)


# Plain row batches: the same row groups, cut by rows alone.
@pytest.mark.filterwarnings("ignore:Length of IterableDataset")
@pytest.mark.parametrize("shuffle", [False, True])
def test_ranks_of_dataloader_workers_get_equal_row_batches_over_uneven_row_groups(sources, shuffle):
    for world_size in (2, 3):
        datasets = [ad.BatchDataset(sources["parquet"], 16, columns=ID, shuffle=shuffle, seed=3,
                                    rank=rank, world_size=world_size)
                    for rank in range(world_size)]
        loaders = [DataLoader(d, batch_size=None, num_workers=2) for d in datasets]
        for epoch in range(2):
            for dataset in datasets:
                dataset.set_epoch(epoch)
            shards = [list(loader) for loader in loaders]
            counts = [len(batches) for batches in shards]
            assert len(set(counts)) == 1, (world_size, epoch, counts)
            seen = sorted(i for batches in shards for b in batches for i in b["id"].tolist())
            assert seen == list(range(ROWS)), (world_size, epoch)
            assert all(len(b["id"]) <= 16 for batches in shards for b in batches)


def test_states_of_ranks_planned_by_rows_merge_for_another_number_of_ranks(sources):
    def state_after(rank, k):
        loader = ad.batches(sources["ipc"], 16, columns=ID, rank=rank, world_size=2,
                            shuffle=True, seed=8)
        seen = [i for _ in range(k) for i in _ids(next(loader))]
        return seen, loader.state_dict()

    (seen0, state0), (seen1, state1) = state_after(0, 3), state_after(1, 5)
    assert state0["position"]["kind"] == "plan" and len(state0["work"]["unit_rows"]) == 12
    merged = ad.merge_states([state0, state1])
    for world_size in (1, 3):
        rest = [i for rank in range(world_size)
                for b in ad.batches(sources["ipc"], 16, columns=ID, rank=rank,
                                    world_size=world_size, shuffle=True, seed=8, state=merged)
                for i in _ids(b)]
        assert sorted(seen0 + seen1 + rest) == list(range(ROWS)), world_size
    # A state whose units' rows were altered is refused when it is resumed.
    forged = {**state0, "work": {**state0["work"], "unit_rows": [1] * 12}}
    with pytest.raises(ValueError, match="planned by the rows of 12 units, which differ"):
        ad.batches(sources["ipc"], 16, columns=ID, rank=0, world_size=2, shuffle=True, seed=8,
                   state=forged)
    # States whose units' rows were taken out cannot be merged, and the error says what is
    # missing (not a token budget, which this epoch has not).
    bare = [{**state, "work": {**state["work"], "unit_rows": None}} for state in (state0, state1)]
    with pytest.raises(ValueError, match=r"planned by rows, and its work records no rows of its units \(work.unit_rows\)"):
        ad.merge_states(bare)


def _table_of(sizes):
    """The rows 0..sum(sizes) as a table of record batches of `sizes` rows."""
    out, start = [], 0
    for size in sizes:
        out.append(pa.record_batch({"id": pa.array(np.arange(start, start + size, dtype=np.int64))}))
        start += size
    return pa.Table.from_batches(out)


def _states_after(source, k, **options):
    seen, states = [], []
    for rank in range(2):
        loader = ad.batches(source, 8, rank=rank, world_size=2, columns=ID, **options)
        seen += [i for _ in range(k) for i in _ids(next(loader))]
        states.append(loader.state_dict())
    return seen, states


def test_a_merged_plan_state_resumes_as_dealt_and_refuses_other_units(tmp_path):
    # In memory: the merged work of a planned epoch resumes with one rank (dealt, not planned).
    seen, states = _states_after(_table_of([90, 11]), 2)
    merged = ad.merge_states(states)
    rest = [i for b in ad.batches(_table_of([90, 11]), 8, columns=ID, state=merged) for i in _ids(b)]
    assert sorted(seen + rest) == list(range(101))
    # The same rows in other record batches: the merged work's rows would be others, refused.
    with pytest.raises(ValueError, match="planned by the rows of 2 units, which differ"):
        ad.batches(_table_of([95, 6]), 8, columns=ID, state=merged)
    # A checkpoint whose plan states were both edited alike: refused when resumed.
    path = tmp_path / "t.parquet"
    pq.write_table(_table_of([101]), path, row_group_size=90)
    _, states = _states_after(str(path), 3, shuffle=True, seed=5, buffer_size=16)
    for state in states:
        state["work"]["unit_rows"] = [80, 21]
    merged = ad.merge_states(states)
    with pytest.raises(ValueError, match="which differ from this source's"):
        ad.batches(str(path), 8, columns=ID, rank=0, world_size=3, shuffle=True, seed=5,
                   buffer_size=16, state=merged)


def test_a_merged_state_of_a_table_read_by_one_rank_resumes_even_over_two():
    # A table of one record batch read by one rank (dealt), merged, resumed by two: the rest is
    # planned by rows, so that no rank waits for the other's batches.
    table = _table_of([1000])
    loader = ad.batches(table, 64, columns=ID)
    seen = [i for _ in range(3) for i in _ids(next(loader))]
    merged = ad.merge_states([loader.state_dict()])
    ranks = [[_ids(b) for b in ad.batches(table, 64, columns=ID, rank=r, world_size=2, state=merged)]
             for r in range(2)]
    assert len(ranks[0]) == len(ranks[1]) > 0
    assert sorted(seen + [i for rank in ranks for b in rank for i in b]) == list(range(1000))
    # The datasets of the two ranks count those batches before their pass; one rank resuming
    # the merged state of two counts its rows left.
    for rank in range(2):
        dataset = ad.BatchDataset(table, 64, columns=ID, rank=rank, world_size=2, state=merged)
        assert dataset.batches_left() == len(ranks[rank])
    states = []
    for rank in range(2):
        loader = ad.batches(table, 64, columns=ID, rank=rank, world_size=2)
        next(loader)
        states.append(loader.state_dict())
    one = ad.BatchDataset(table, 64, columns=ID, state=ad.merge_states(states))
    assert one.batches_left() == len(list(one))


def test_merged_states_of_a_shuffled_table_resume_with_other_ranks_exactly():
    # A table's record batches are units whose count a dealt state does not record: a merge
    # names the units that ended shards would have reached past the end, which hold no rows.
    table = _table_of([37] * 21)
    options = dict(columns=ID, shuffle=True, seed=11, buffer_size=1000, epoch=2)
    seen, states = [], []
    for rank in range(3):
        loader = ad.batches(table, 40, rank=rank, world_size=3, **options)
        seen += _ids(next(loader))
        states.append(loader.state_dict())
        loader.close()
    merged = ad.merge_states(states)
    ranks = [[_ids(b) for b in ad.batches(table, 40, rank=r, world_size=2, state=merged, **options)]
             for r in range(2)]
    assert len(ranks[0]) == len(ranks[1])
    assert sorted(seen + [i for rank in ranks for b in rank for i in b]) == list(range(777))


@pytest.mark.parametrize("kind", ["table", "ipc file"])
def test_a_merged_deal_resumed_by_uneven_ranks_is_planned_and_merges_again(tmp_path, kind):
    # Two ranks deal four record batches evenly; their merged work, resumed by three ranks
    # whose deal is uneven, is planned by rows and records its units' rows, so that the three
    # ranks' states merge in their turn.
    table = _table_of([16] * 4)
    if kind == "ipc file":
        path = tmp_path / "t.arrow"
        with pa.ipc.new_file(path, table.schema) as writer:
            for batch in table.to_batches():
                writer.write_batch(batch)
        table = str(path)
    options = dict(columns=ID, shuffle=True, seed=4)
    seen, states = [], []
    for rank in range(2):
        loader = ad.batches(table, 8, rank=rank, world_size=2, **options)
        seen += _ids(next(loader))
        states.append(loader.state_dict())
        assert states[-1]["position"]["kind"] != "plan"
    merged = ad.merge_states(states)
    states = []
    for rank in range(3):
        loader = ad.batches(table, 8, rank=rank, world_size=3, state=merged, **options)
        seen += _ids(next(loader))
        states.append(loader.state_dict())
        assert states[-1]["position"]["kind"] == "plan" and states[-1]["work"]["unit_rows"]
    again = ad.merge_states(states)
    rest = [i for b in ad.batches(table, 8, state=again, **options) for i in _ids(b)]
    assert sorted(seen + rest) == list(range(64))


@pytest.mark.parametrize("options", [{"max_tokens": 12}, {"bucket_by_length": True}])
def test_record_batches_in_memory_under_a_budget_over_ranks_resume_as_they_were_cut(options):
    # Record batches in memory under a budget or buckets are cut as they are read, not planned;
    # a resume read the state's position as a planned epoch's and refused it.
    table = pa.Table.from_batches([
        pa.record_batch({"id": list(range(s, s + n)),
                         "tok": pa.array([[1] * (1 + i % 5) for i in range(n)], pa.list_(pa.int32()))})
        for s, n in [(0, 40), (40, 3), (43, 16), (59, 7), (66, 40)]
    ])
    kwargs = dict(columns=["id"], sequences={"tok": "pad"}, rank=0, world_size=2, **options)
    whole = [np.from_dlpack(b["id"]).tolist() for b in ad.batches(table, 4, **kwargs)]
    loader = ad.batches(table, 4, **kwargs)
    for _ in range(3):
        next(loader)
    state = loader.state_dict()
    loader.close()
    rest = [np.from_dlpack(b["id"]).tolist() for b in ad.batches(table, 4, state=state, **kwargs)]
    assert rest == whole[3:]


def test_the_length_of_a_dataset_follows_set_epoch():
    # Record batches in memory under a token budget over two ranks: each epoch's plan packs
    # other rows together, so the count changes with the epoch (as every rank's), and len()
    # said epoch 0's.
    sizes = [100, 3, 40, 7, 1, 16, 100, 11]
    table = pa.Table.from_batches([
        pa.record_batch({"id": list(range(sum(sizes[:i]), sum(sizes[:i]) + n)),
                         "tok": pa.array([[1] * (1 + j % 7) for j in range(n)], pa.list_(pa.int32()))})
        for i, n in enumerate(sizes)
    ])
    counts = set()
    for epoch in (0, 1, 3):
        for rank in range(2):
            dataset = ad.BatchDataset(table, 8, columns=["id"], sequences={"tok": "pad"},
                                      bucket_by_length=True, shuffle=True, seed=155, buffer_size=16,
                                      max_tokens=40, rank=rank, world_size=2)
            dataset.set_epoch(epoch)
            loader = DataLoader(dataset, batch_size=None)
            given = sum(1 for _ in loader)
            assert len(loader) == len(dataset) == given, (epoch, rank, len(loader), given)
            counts.add(given)
    assert len(counts) > 1, "the case must change the count with the epoch"

