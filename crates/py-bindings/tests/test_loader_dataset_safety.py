"""``ad.BatchDataset`` as a DDP training script uses it: ranks with DataLoader workers get the
same number of batches, and a training step that writes into its batch never reaches memory
that is not the loader's own."""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader

import arrow_dlpack as ad


def test_ranks_with_dataloader_workers_get_as_many_batches_as_len_says(tmp_path):
    # 6 row groups over 2 ranks of 2 workers: worker-major shards give each rank 3 units.
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"f0": np.arange(3000, dtype=np.float32)}), path, row_group_size=500)
    seen = []
    for rank in range(2):
        dataset = ad.BatchDataset(str(path), 128, columns=["f0"], shuffle=True, seed=3, rank=rank, world_size=2)
        rows = [batch["f0"] for batch in DataLoader(dataset, batch_size=None, num_workers=2)]
        assert len(rows) == len(dataset) == 12, (rank, len(rows), len(dataset))
        seen.append(torch.cat(rows))
    assert sorted(torch.cat(seen).tolist()) == list(range(3000))


def test_writes_into_batches_of_an_in_memory_table_leave_the_table_unchanged():
    table = pa.table({"x": np.arange(100, dtype=np.float32)})
    for _ in range(2):
        for batch in ad.BatchDataset(table, 10):
            batch["x"] -= 1000.0
    assert table.column("x").to_pylist() == list(range(100))


def test_writes_into_batches_of_a_dataset_loaded_from_disk_do_not_crash(tmp_path):
    # pyarrow maps a saved Hugging Face dataset's cache files read-only: a write through a view
    # of them was a segmentation fault. Run in a child, so that a regression fails one test.
    script = textwrap.dedent(
        f"""
        import numpy as np, datasets, arrow_dlpack as ad
        datasets.Dataset.from_dict({{"x": np.arange(1000, dtype=np.float32)}}).save_to_disk({str(tmp_path / "hf")!r})
        ds = datasets.load_from_disk({str(tmp_path / "hf")!r})
        total = 0.0
        for batch in ad.BatchDataset(ds, 100):
            batch["x"] -= 1.0
            total += float(batch["x"].sum())
        assert total == float(np.arange(1000).sum() - 1000), total
        assert ds["x"][:3] == [0.0, 1.0, 2.0], ds["x"][:3]
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_writes_through_batches_of_read_only_mapped_tables_do_not_crash(tmp_path):
    # ad.batches hands out views, and torch writes through them whatever their read-only flag:
    # over memory mapped read-only (a saved Hugging Face dataset's cache files, a table read
    # through pyarrow's memory_map) its batches are private copies; over a table in ordinary
    # memory they stay views. In a child, so that a regression fails one test.
    script = textwrap.dedent(
        f"""
        import numpy as np, pyarrow as pa, torch, datasets, arrow_dlpack as ad
        root = {str(tmp_path)!r}
        datasets.Dataset.from_dict({{"x": np.arange(1000, dtype=np.float32)}}).save_to_disk(root + "/hf")
        ds = datasets.load_from_disk(root + "/hf")
        for batch in ad.batches(ds, 100):
            torch.from_dlpack(batch["x"]).sub_(1.0)
        assert ds["x"][:3] == [0.0, 1.0, 2.0], ds["x"][:3]
        with pa.ipc.new_file(root + "/t.arrow", pa.schema([("x", pa.float64())])) as writer:
            writer.write_table(pa.table({{"x": np.arange(100.0)}}))
        mapped = pa.ipc.open_file(pa.memory_map(root + "/t.arrow")).read_all()
        for source in (mapped, mapped.to_batches(), mapped.to_batches()[0]):
            for batch in ad.batches(source, 10):
                torch.from_dlpack(batch["x"]).mul_(2.0)
        assert mapped.column("x").to_pylist() == list(np.arange(100.0))
        # Readers, whose buffers are seen only as they are read: a reader over the mapped
        # batches, and the IterableDataset of the dataset loaded from disk.
        readers = (
            pa.RecordBatchReader.from_batches(mapped.schema, mapped.to_batches()),
            ds.to_iterable_dataset(),
        )
        for source in readers:
            for batch in ad.batches(source, 10):
                torch.from_dlpack(batch["x"]).mul_(2.0)
        assert mapped.column("x").to_pylist() == list(np.arange(100.0))
        assert ds["x"][:3] == [0.0, 1.0, 2.0], ds["x"][:3]
        in_memory = pa.table({{"x": np.arange(100.0)}})
        batch = next(ad.batches(in_memory, 10))
        assert np.from_dlpack(batch["x"]).ctypes.data == in_memory.column("x").chunks[0].buffers()[1].address
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_a_dataloader_that_batches_the_batches_again_is_refused():

    from torchdata.stateful_dataloader import StatefulDataLoader

    table = pa.table({"x": np.arange(10, dtype=np.float32)})
    dataset = ad.BatchDataset(table, 4)
    for make in (DataLoader, StatefulDataLoader):
        # The default batch_size=1 would stack each batch alone, a leading dimension of 1 that a
        # model then trains on: the pass stops at its first batch instead.
        # (StatefulDataLoader's workers run the same check; its error from a worker takes 10 s
        # to reach the caller, torchdata's wait, so it is made without workers here.)
        for workers in (0, 2) if make is DataLoader else (0,):
            batched_again = make(dataset, num_workers=workers)
            with pytest.raises(TypeError, match=r"expected DataLoader\(dataset, batch_size=None\)"):
                next(iter(batched_again))
        # (StatefulDataLoader's constructor has a deprecation warning of its own.)
        right = make(dataset, batch_size=None)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            shapes = [batch["x"].shape for batch in right]
        assert shapes == [(4,), (4,), (2,)]
    # A collate_fn of one's own that unwraps the list is left alone.
    unwrapping = DataLoader(dataset, batch_size=1, collate_fn=lambda batches: batches[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [batch["x"].shape[0] for batch in unwrapping] == [4, 4, 2]
    # Iterated by hand, nothing is said.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [batch["x"].shape[0] for batch in dataset] == [4, 4, 2]


def test_a_dataset_over_a_table_checks_its_columns_when_it_is_made_not_in_a_worker():
    import polars as pl

    table = pa.table({"x": np.arange(10.0), "s": ["a"] * 10})
    for source in (table, table.to_batches()[0], pl.from_arrow(table), [table, table], table.to_reader()):
        with pytest.raises(ad.ArrowDLPackValueError, match=r'column "y" not found; expected one of \["x", "s"\]'):
            ad.BatchDataset(source, 4, columns=["y"])
        with pytest.raises(ad.ArrowDLPackTypeError, match='cannot load column "s" of type string'):
            ad.BatchDataset(source, 4)
    # Reading a reader's schema does not consume it: the dataset still reads every row.
    reader = table.to_reader()
    dataset = ad.BatchDataset(reader, 4, columns=["x"])
    assert torch.cat(list(batch["x"] for batch in dataset)).tolist() == list(range(10))


def test_shards_of_a_file_of_one_row_group_get_the_same_number_of_batches(tmp_path):
    """A file of one row group dealt by units would give every batch to rank 0, and a DDP run
    would wait forever for rank 1: the epoch is planned instead, every rank gets as many batches
    and every row is read once."""

    one = tmp_path / "one.parquet"
    pq.write_table(pa.table({"x": np.arange(3001.0)}), one)
    for shuffle in (False, True):
        passes = []
        for rank in range(2):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                dataset = ad.BatchDataset(
                    str(one), 100, rank=rank, world_size=2, shuffle=shuffle, seed=5
                )
            passes.append([batch["x"] for batch in dataset])
            assert len(dataset) == len(passes[-1])
        assert len(passes[0]) == len(passes[1]) == 16
        # Every step holds as many rows on both ranks (to within one): full batches, then each
        # rank's short last batch, as a DistributedSampler gives, without repeating a row (rank
        # 1's 1,500 rows make 16 batches only by giving its last batch a row of the one before).
        sizes = [[len(x) for x in batches] for batches in passes]
        assert sizes == [[100] * 15 + [1], [100] * 14 + [99, 1]], sizes
        rows = torch.cat([x for batches in passes for x in batches])
        assert sorted(rows.tolist()) == list(range(3001))
        if not shuffle:
            # In order, rank 0 takes the first half of the epoch's batches.
            assert torch.cat(passes[0]).tolist() == list(range(len(torch.cat(passes[0]))))
    # Tables and Hugging Face datasets in memory (one record batch here), and the folders of
    # save_to_disk (local IPC streams), are planned alike.
    import datasets

    table = pa.table({"x": np.arange(3001.0)})
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"x": np.arange(3001.0)}).save_to_disk(str(saved))
    for source in (table, datasets.Dataset.from_dict({"x": np.arange(3001.0)}), str(saved)):
        passes = [[b["x"] for b in ad.batches(source, 100, rank=r, world_size=2)] for r in range(2)]
        assert [len(p) for p in passes] == [16, 16]
        assert torch.cat([torch.from_dlpack(x) for p in passes for x in p]).tolist() == list(
            map(float, range(3001))
        )
    # The same through ad.batches, with drop_last: full batches only, as many per rank.
    counts = [
        [b["x"].shape[0] for b in ad.batches(str(one), 100, rank=r, world_size=2, drop_last=True)]
        for r in range(2)
    ]
    assert counts == [[100] * 15, [100] * 15]
    # Three ranks: 1,000 rows of one row group in batches of 100 give every rank three full
    # batches and a last one of 34 or 33 rows (not some ranks batches of 50).
    ten = tmp_path / "ten.parquet"
    pq.write_table(pa.table({"x": np.arange(1000)}), ten)
    counts = [
        [b["x"].shape[0] for b in ad.batches(str(ten), 100, rank=r, world_size=3)] for r in range(3)
    ]
    assert counts == [[100, 100, 100, 34], [100, 100, 100, 33], [100, 100, 100, 33]]


def test_a_source_whose_stated_schema_cannot_be_read_is_checked_when_it_is_read():
    table = pa.table({"x": np.arange(10.0)})

    class Raising:
        """A stream whose `schema` raises."""

        @property
        def schema(self):
            raise RuntimeError("no schema here")

        def __arrow_c_stream__(self, requested_schema=None):
            return table.__arrow_c_stream__(requested_schema)

    class Garbage(Raising):
        schema = 42

    for source in (Raising(), Garbage()):
        dataset = ad.BatchDataset(source, 4, columns=["x"])
        assert [batch["x"].shape[0] for batch in dataset] == [4, 4, 2]
        # A missing column is still refused, by the pass.
        with pytest.raises(ad.ArrowDLPackValueError, match='column "y" not found'):
            list(ad.BatchDataset(source, 4, columns=["y"]))


_SPAWNED_RANKS = '''
import json, os, sys
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader
import arrow_dlpack as ad

def run(rank, path, out, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    dataset = ad.BatchDataset(path, 10, columns=["x"])
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="spawn")
    rows = [int(i) for b in loader for i in b["x"].tolist()]
    with open(os.path.join(out, f"{rank}.json"), "w") as f:
        json.dump(rows, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    path, out, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mp.spawn(run, args=(path, out, port), nprocs=2)
'''


def test_spawned_dataloader_workers_of_a_process_group_read_their_ranks_share(tmp_path):
    """DataLoader workers started with spawn do not see the process group: they get its rank
    and world size from the dataset, so that each rank reads its own rows (they read every row,
    on every rank, before)."""
    import socket

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(100)}), path, row_group_size=10)
    script = tmp_path / "ranks.py"
    script.write_text(_SPAWNED_RANKS)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [sys.executable, str(script), str(path), str(tmp_path), str(port)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    ranks = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == list(range(100))


def test_ranks_of_a_table_dealt_evenly_know_their_length_and_a_reader_over_ranks_is_warned_about():
    table = pa.concat_tables([pa.table({"x": np.arange(50.0)}), pa.table({"x": np.arange(50.0, 100.0)})])
    assert table.column("x").num_chunks == 2
    for rank in range(2):
        dataset = ad.BatchDataset(table, 10, rank=rank, world_size=2)
        assert len(dataset) == len(list(dataset)) == 5
        assert len(ad.batches(table, 10, rank=rank, world_size=2)) == 5
    # A reader's record batches are dealt as they come: its ranks' counts are not known.
    for make in (ad.batches, ad.BatchDataset):
        with pytest.warns(UserWarning, match="the ranks may get different numbers") as said:
            make(table.to_reader(), 10, rank=0, world_size=2)
        assert said[0].filename == __file__
    # Raised as an error, the warning returns no loader; the reader, which its thread may have
    # started to read, is not read again.
    reader = table.to_reader()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="the ranks may get different numbers"):
            ad.batches(reader, 10, rank=0, world_size=2)
    with pytest.raises(ValueError, match="read by an earlier loader"):
        ad.batches(reader, 10)


def test_the_length_of_a_dataloader_with_workers_is_the_batches_its_workers_give(tmp_path):
    """len(loader) counts the batches the workers give, so that a schedule sized by it
    (OneCycleLR) is stepped exactly as often as there are batches."""

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(1000, dtype=np.float32)}), path, row_group_size=334)
    for options in ({}, {"drop_last": True}, {"shuffle": True, "seed": 0}):
        dataset = ad.BatchDataset(str(path), 128, **options)
        loader = DataLoader(dataset, batch_size=None, num_workers=2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch warns when a pass outruns len()
            sizes = [len(batch["x"]) for batch in loader]
        assert len(loader) == len(sizes), (options, sizes)
        # The rank's own count (without workers) is unchanged.
        assert len(dataset) == len(list(DataLoader(dataset, batch_size=None)))
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(ad.BatchDataset(str(path), 128), batch_size=None, num_workers=2)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=len(loader) * 2)
    for _ in range(2):
        for _ in loader:
            optimizer.step()
            schedule.step()


@pytest.mark.parametrize("shuffle", [False, True])
def test_dataloader_workers_give_the_batches_of_one_loader_of_the_rank(tmp_path, shuffle):
    """A rank's batches are dealt to its workers in runs: the DataLoader gives the batches the
    rank gives without workers, shuffled or not (interleaved), only the last one short, and
    drop_last drops only the rank's remainder."""
    path = tmp_path / "t.parquet"
    for rows, groups in ((1000, 250), (1003, 1003), (1003, 97)):
        pq.write_table(pa.table({"id": np.arange(rows)}), path, row_group_size=groups)
        for drop_last in (False, True):
            seen = []
            for rank in range(2):
                def passes(workers):
                    dataset = ad.BatchDataset(str(path), 100, rank=rank, world_size=2, shuffle=shuffle,
                                              seed=4, drop_last=drop_last)
                    loader = DataLoader(dataset, batch_size=None, num_workers=workers)
                    batches = [tuple(batch["id"].tolist()) for batch in loader]
                    assert len(loader) == len(batches), (workers, len(loader), len(batches))
                    return batches

                alone = passes(0)
                for workers in (2, 3):
                    batches = passes(workers)
                    case = (rows, groups, drop_last, rank, workers)
                    # The same batches, shuffled or not, in the DataLoader's interleaving.
                    assert sorted(batches) == sorted(alone), case
                    sizes = [len(batch) for batch in batches]
                    # Full batches, and only the DataLoader's last one short.
                    assert all(size == 100 for size in sizes[:-1]), (case, sizes)
                seen += [i for batch in alone for i in batch]
            # Each rank's remainder at most is dropped: 2 ranks of 2 workers at 100 rows a
            # batch keep every row of 1,000 (each worker dropping its own lost 200).
            kept = sorted(seen)
            assert len(set(kept)) == len(kept)
            dropped = rows - len(kept)
            assert dropped == 0 if not drop_last else dropped < 2 * 100, (rows, drop_last, dropped)


def test_ranks_that_get_no_batch_are_warned_and_workers_keep_tiny_files_whole(tmp_path):
    path = tmp_path / "three.parquet"
    pq.write_table(pa.table({"id": np.arange(3)}), path)
    # Fewer rows than ranks: every rank gets as many batches, so none; said, not silent.
    for rank in range(4):
        with pytest.warns(UserWarning, match=r"this rank gets no batch of the epoch: every one "
                          r"of the 4 ranks gets as many batches"):
            assert list(ad.batches(str(path), 2, rank=rank, world_size=4)) == []
    # One rank's DataLoader workers over a file of one row group too small to give each a
    # batch: the rank's batches, one worker taking them, nothing lost.
    for drop_last, expected in ((False, [0, 1, 2]), (True, [0, 1])):
        dataset = ad.BatchDataset(str(path), 2, drop_last=drop_last)
        loader = DataLoader(dataset, batch_size=None, num_workers=2)
        assert sorted(int(i) for batch in loader for i in batch["id"]) == expected


def test_batches_of_one_row_over_ranks_say_which_rows_no_rank_reads(tmp_path):
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"id": np.arange(1001)}), path)
    read = []
    for rank in range(2):
        with pytest.warns(UserWarning, match=r"the epoch's last 1 rows are read by no rank: "
                          r"every one of the 2 ranks gets as many batches") as said:
            loader = ad.batches(str(path), 1, rank=rank, world_size=2, format="numpy")
        assert said[0].filename == __file__  # the caller's line, not the package's
        assert loader.rows_left_out == 1
        read += [int(batch["id"][0]) for batch in loader]
    assert sorted(read) == list(range(1000))
    # A merged state plans what is left anew, over other ranks: said again.
    states = []
    for rank in range(2):
        with pytest.warns(UserWarning, match="the epoch's last 1 rows"):
            loader = ad.batches(str(path), 1, rank=rank, world_size=2)
        for _ in range(rank + 1):
            next(loader)
        states.append(loader.state_dict())
    merged = ad.merge_states(states)  # 998 rows left, over 3 ranks
    for rank in range(3):
        with pytest.warns(UserWarning, match="the epoch's last 2 rows are read by no rank"):
            loader = ad.batches(str(path), 1, rank=rank, world_size=3, state=merged)
        assert loader.rows_left_out == 2
    # Batches of two rows read every row (the last shorter), unwarned.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for rank in range(2):
            loader = ad.batches(str(path), 2, rank=rank, world_size=2)
            assert loader.rows_left_out == 0
    # A dataset says it once, where it is made (its DataLoader's workers, every epoch, do not).
    with pytest.warns(UserWarning, match="the epoch's last 2 rows are read") as said:
        dataset = ad.BatchDataset(str(path), 1, rank=1, world_size=3)
    assert said[0].filename == __file__ and dataset.rows_left_out == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for workers in (0, 2):
            for epoch in range(2):
                dataset.set_epoch(epoch)
                loader = DataLoader(dataset, batch_size=None, num_workers=workers)
                assert len([int(batch["id"][0]) for batch in loader]) == 333


@pytest.mark.parametrize("kind", ["table", "hf", "save_to_disk"])
@pytest.mark.parametrize("cut", ["max_tokens", "buckets"])
def test_ranks_over_tables_and_hf_datasets_get_as_many_batches_under_budgets_and_buckets(
    tmp_path, kind, cut
):
    """A token budget or length buckets over a table, a Hugging Face Dataset or its
    save_to_disk folder were cut by each rank from its own record batches: ranks of one record
    batch got [32, 0] batches, and a DDP run hung at the first collective."""
    import datasets

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, 997)
    table = pa.table({
        "label": np.arange(997),
        "tok": pa.array([np.full(n, i, np.int32) for i, n in enumerate(lengths)],
                        pa.list_(pa.int32())),
    })
    source = {
        "table": table,
        "hf": datasets.Dataset(table),
        "save_to_disk": str(tmp_path / "saved"),
    }[kind]
    if kind == "save_to_disk":
        datasets.Dataset(table).save_to_disk(source)
    options = (
        {"max_tokens": 300} if cut == "max_tokens"
        else {"bucket_by_length": True, "shuffle": True, "seed": 1}
    )
    for ranks in (2, 3):
        counts, labels = [], []
        for rank in range(ranks):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # planned: nothing to warn about
                dataset = ad.BatchDataset(source, 32, columns=["label"],
                                          sequences={"tok": "pad"}, rank=rank,
                                          world_size=ranks, **options)
            batches = list(DataLoader(dataset, batch_size=None))
            assert len(dataset) == len(batches)
            counts.append(len(batches))
            labels += [int(i) for batch in batches for i in batch["label"]]
        assert len(set(counts)) == 1 and counts[0] > 0, counts
        assert sorted(labels) == list(range(997))


def test_workers_that_do_not_split_are_counted_as_each_reading_everything(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": np.arange(100)}), path, row_group_size=10)
    dataset = ad.BatchDataset(str(path), 8, split_workers=False)
    for workers in (0, 2):
        loader = DataLoader(dataset, batch_size=None, num_workers=workers)
        given = sum(1 for _ in loader)
        assert len(loader) == dataset.batches_left(workers) == given == 13 * max(workers, 1)
