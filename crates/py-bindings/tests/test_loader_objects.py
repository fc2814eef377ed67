"""The loader objects a PyTorch user meets: ``ad.Batches`` (what ``ad.batches`` returns) and
``ad.BatchDataset``.

Lengths that tqdm and ``len(DataLoader)`` can use, a second pass over a spent loader refused
with a message that says what to do, ``columns=[]`` meaning no plain column, arguments of a
``BatchDataset`` checked when it is made, DataLoader workers that do not split again what the
caller split, epochs that reach persistent workers, and ``merge_states`` over hostile nesting.
"""

import io
import pickle
import warnings

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

import arrow_dlpack as ad

#: These tests fork on purpose (the children touch no JAX state), so JAX's warning that a fork of
#: its threads may deadlock, raised when another test imported it, is not theirs.
forks = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

ROWS = 1_000


def numbered(rows=ROWS, chunk=100):
    """A table of ``rows`` rows numbered from 0 in column ``id``, in record batches of
    ``chunk`` rows."""
    parts = [
        pa.record_batch({"id": pa.array(range(start, min(start + chunk, rows)), pa.int64())})
        for start in range(0, rows, chunk)
    ]
    return pa.Table.from_batches(parts)


@pytest.fixture
def parquet_file(tmp_path):
    """:func:`numbered` as a Parquet file of 10 row groups."""
    path = tmp_path / "numbered.parquet"
    pq.write_table(numbered(), path, row_group_size=100)
    return str(path)


def ids(batches):
    """Every ``id`` of ``batches`` (of ``ad.Tensor``s or torch tensors), in order."""
    return [int(value) for batch in batches for value in np.from_dlpack(batch["id"]).tolist()]


# --- Lengths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        numbered,
        lambda: pl.from_arrow(numbered()),
        lambda: numbered().to_batches(),
        lambda: pa.record_batch({"id": pa.array(range(ROWS), pa.int64())}),
    ],
    ids=["pyarrow-table", "polars-dataframe", "record-batch-list", "record-batch"],
)
def test_len_of_an_in_memory_table_counts_the_batches_left(source):
    loader = ad.batches(source(), 64)
    assert (loader.num_rows, loader.num_batches, len(loader)) == (ROWS, 16, 16)
    next(loader)
    next(loader)
    assert len(loader) == 14 and loader.__length_hint__() == 14
    rest = list(loader)
    assert len(rest) == 14 and len(loader) == 0
    assert loader.rows_yielded == ROWS
    assert ad.batches(source(), 64, drop_last=True).num_batches == 15


def test_len_of_a_parquet_file_decreases_as_batches_are_taken(parquet_file):
    loader = ad.batches(parquet_file, 300)
    assert len(loader) == 4
    for left in (3, 2, 1, 0):
        next(loader)
        assert len(loader) == left


def test_a_stream_that_does_not_say_its_rows_has_no_len():
    table = numbered()
    loader = ad.batches(pa.RecordBatchReader.from_batches(table.schema, table.to_batches()), 64)
    with pytest.raises(TypeError, match="not known in advance"):
        len(loader)
    assert loader.__length_hint__() is NotImplemented
    assert loader.num_rows is None


def test_a_table_whose_stream_gives_other_rows_than_it_says_is_refused():
    class Lying:
        """A table that says it has more rows than its stream gives."""

        num_rows = ROWS + 1

        def __arrow_c_stream__(self, requested_schema=None):
            return numbered().__arrow_c_stream__(requested_schema)

    # An object that says its rows is in memory: its record batches are taken when the loader
    # is made, so the lie is found there.
    with pytest.raises(ValueError, match=r"the stream gave 1000 rows; its source said it holds 1001"):
        ad.batches(Lying(), 64)


def test_tqdm_gets_a_total():
    from tqdm import tqdm

    with tqdm(ad.batches(numbered(), 64), file=io.StringIO()) as bar:
        assert bar.total == 16
        assert sum(1 for _ in bar) == 16


def test_a_list_of_record_batches_is_read_in_order():
    batches = numbered().to_batches()
    assert ids(ad.batches(batches, 64)) == list(range(ROWS))
    other = pa.record_batch({"other": pa.array([1, 2], pa.int64())})
    with pytest.raises(ValueError, match=r'source 1 of the list has columns \[other: int64\]; expected those of source 0, \[id: int64\]'):
        list(ad.batches([batches[0], other], 64))
    with pytest.raises(TypeError, match=r"a list of sources holds int at 1"):
        ad.batches([batches[0], 5], 64)


# --- A loader is iterated once --------------------------------------------------------------


def test_a_spent_loader_iterated_again_is_refused_with_what_to_do():
    loader = ad.batches(numbered(), 300)
    assert len(list(loader)) == 4
    with pytest.raises(ValueError, match=r"this loader has given all its batches, and a loader "
                       r"is iterated once; make a new one with ad\.batches\(\.\.\.\) for another "
                       r"pass, or use ad\.BatchDataset"):
        for _ in loader:
            pass
    # next() keeps the iterator protocol: the end stays the end.
    with pytest.raises(StopIteration):
        next(loader)


def test_a_loader_broken_off_continues_where_it_stopped():
    loader = ad.batches(numbered(), 100)
    for batch in loader:
        break
    assert ids(loader) == list(range(100, ROWS))


def test_a_batch_dataset_is_iterated_any_number_of_times():
    dataset = ad.BatchDataset(numbered(), 300)
    assert ids(dataset) == ids(dataset) == list(range(ROWS))


# --- Progress is a feature of the same object -----------------------------------------------


def test_progress_keeps_the_type_and_every_attribute():
    stream = io.StringIO()
    loader = ad.Batches(ad.batches(numbered(), 300)._inner, progress=True, stream=stream)
    assert len(loader) == 4 and loader.num_rows == ROWS
    assert ids(loader) == list(range(ROWS))
    assert loader.rows_yielded == ROWS
    assert stream.getvalue() == "1,000 of 1,000 rows, " + stream.getvalue().split(", ", 1)[1]
    assert stream.getvalue().endswith(", done\n")
    with_progress = ad.batches(numbered(), 300, progress=True)
    assert with_progress.rows_yielded == 0 and isinstance(with_progress.state_dict(), dict)


# --- columns=[] means no plain column -------------------------------------------------------


def test_empty_columns_load_only_what_groups_masks_and_sequences_name():
    table = pa.table({
        "a": [1.0, 2.0], "b": [3.0, 4.0], "label": [0, 1], "name": ["x", "y"],
        "tokens": pa.array([[1, 2], [3]], pa.list_(pa.int32())),
    })
    batch = next(ad.batches(table, 2, columns=[], groups={"ab": ["a", "b"]},
                            sequences={"tokens": "pad"}, masks=["label"]))
    assert sorted(batch) == ["ab", "label_mask", "tokens", "tokens_lengths"]
    # None (the default) loads every column not in a group: here the string column is refused,
    # and the message says which keyword chooses the columns.
    with pytest.raises(TypeError, match=r'cannot load column "name" of type string; .*it is loaded '
                       r"because columns=None \(the default\) loads every column not in a group: "
                       r"pass columns=\[\.\.\.\]"):
        ad.batches(table, 2, groups={"ab": ["a", "b"]}, sequences={"tokens": "pad"})
    everything = next(ad.batches(table.drop_columns(["name"]), 2, groups={"ab": ["a", "b"]},
                                 sequences={"tokens": "pad"}))
    assert sorted(everything) == ["ab", "label", "tokens", "tokens_lengths"]


# --- BatchDataset: a real class, checked when it is made ------------------------------------


def test_batch_dataset_is_an_iterable_dataset_class_with_the_real_signature():
    assert isinstance(ad.BatchDataset, type) and issubclass(ad.BatchDataset, IterableDataset)
    assert ad.BatchDataset.__module__ == "arrow_dlpack._dataset"
    import inspect

    assert "shuffle" in inspect.signature(ad.BatchDataset).parameters


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"shufle": True}, TypeError, r"unexpected keyword argument 'shufle'"),
        ({"batch_size": 0}, ValueError, r"batch_size is 0; expected at least 1"),
        ({"prefetch": 5000}, ValueError, r"prefetch is 5000; expected at most 1024"),
        ({"columns": "id"}, TypeError, r"columns is str; expected a list of str"),
        ({"columns": ["idd"]}, ValueError, r'"idd"'),
        ({"sequences": {"id": "padd"}}, ValueError, r'sequences\["id"\] is "padd"'),
        ({"rank": 3, "world_size": 2}, ValueError, r"rank 3 and world_size 2"),
    ],
)
def test_batch_dataset_checks_every_argument_when_it_is_made(parquet_file, options, error, message):
    with pytest.raises(error, match=message):
        ad.BatchDataset(parquet_file, **{"batch_size": 64, **options})


def test_len_of_a_batch_dataset_is_what_a_data_loader_gives(parquet_file):
    dataset = ad.BatchDataset(parquet_file, 64)
    assert len(dataset) == 16
    loader = DataLoader(dataset, batch_size=None)
    assert len(loader) == 16 == len(list(loader))
    assert len(ad.BatchDataset(numbered(), 64, drop_last=True)) == 15
    assert len(ad.BatchDataset(parquet_file, 64, rank=1, world_size=2)) == 8
    reader = pa.RecordBatchReader.from_batches(numbered().schema, [])
    with pytest.raises(TypeError, match="not known in advance: the source, a RecordBatchReader, does not say its rows$"):
        len(ad.BatchDataset(reader, 64))
    # The reason that applies, not every reason there is.
    table = pa.table({"ids": pa.array([[1, 2], [3]], pa.list_(pa.int32()))})
    with pytest.raises(TypeError, match=r"not known in advance: batches are cut by tokens \(max_tokens\) as the rows are read$"):
        len(ad.BatchDataset(table, 64, sequences={"ids": "jagged"}, max_tokens=8))


def test_a_batch_dataset_refuses_a_state_of_another_epoch(parquet_file):
    loader = ad.batches(parquet_file, 64, shuffle=True, seed=1, epoch=3)
    next(loader)
    state = loader.state_dict()
    with pytest.raises(ValueError, match=r"state was saved in epoch 3 and epoch is 4"):
        ad.BatchDataset(parquet_file, 64, shuffle=True, seed=1, epoch=4, state=state)
    # Its own epoch (given, or taken from the state) resumes.
    for epoch in (3, None):
        dataset = ad.BatchDataset(parquet_file, 64, shuffle=True, seed=1, epoch=epoch, state=state)
        assert len(ids(dataset)) == ROWS - 64


# --- DataLoader workers ---------------------------------------------------------------------


class FilesPerWorker(IterableDataset):
    """A user's own dataset that splits its files between DataLoader workers and reads each
    worker's files with ``ad.batches`` (as rank 0 of 1)."""

    def __init__(self, files, **options):
        self.files, self.options = files, options

    def __iter__(self):
        info = get_worker_info()
        mine = self.files[info.id :: info.num_workers]
        for batch in ad.batches(mine, 50, rank=0, world_size=1, **self.options):
            yield torch.from_dlpack(batch["id"])


@pytest.fixture
def four_files(tmp_path):
    """Four Parquet files of 250 rows each, numbered 0..1000 across them, row groups of 50."""
    paths = []
    for index in range(4):
        path = tmp_path / f"part-{index}.parquet"
        pq.write_table(numbered().slice(index * 250, 250), path, row_group_size=50)
        paths.append(str(path))
    return paths


def rows_of(loader):
    return sorted(int(value) for batch in loader for value in batch.tolist())


@forks
def test_split_workers_false_reads_what_each_worker_was_given(four_files):
    dataset = FilesPerWorker(four_files, split_workers=False)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="fork")
    assert rows_of(loader) == list(range(ROWS))


@forks
def test_the_default_split_workers_in_a_worker_is_refused_asking_which(four_files, monkeypatch):
    # A dataset that gave each worker its own files, left at the default, read half the rows
    # with a warning; now the worker's loader is refused, saying what each choice reads.
    loader = DataLoader(FilesPerWorker(four_files), batch_size=None, num_workers=2,
                        multiprocessing_context="fork")
    with pytest.raises(ad.ArrowDLPackValueError, match="needs split_workers"):
        rows_of(loader)
    # The message, seen in this process made to look like worker 0 of 2.
    import arrow_dlpack._shards as module

    monkeypatch.setattr(module, "_worker", lambda: (0, 2))
    for options, call in (
        (dict(rank=0, world_size=1), "ad.batches(rank=0, world_size=1) in DataLoader worker"),
        ({}, "ad.batches in DataLoader worker"),
    ):
        with pytest.raises(ad.ArrowDLPackValueError) as caught:
            ad.batches(four_files, 50, **options)
        message = str(caught.value)
        assert message.startswith(call + " 0 of 2 needs split_workers: pass split_workers=True")
        assert "split_workers=False if this worker was given its own sources" in message
        assert ("no torch.distributed group is visible" in message) == (not options)
        # Said either way, or split on purpose by BatchDataset: read.
        def count(batches):
            return sum(len(batch["id"]) for batch in batches)

        assert count(ad.batches(four_files, 50, split_workers=True, **options)) == ROWS // 2
        assert count(ad.batches(four_files, 50, split_workers=False, **options)) == ROWS
        assert count(ad.BatchDataset(four_files, 50, **options)) == ROWS // 2


def order(loader):
    """The ids of a DataLoader's batches, in the order it gives them."""
    return [int(value) for batch in loader for value in batch["id"].tolist()]


@forks
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_set_epoch_reaches_persistent_workers(parquet_file, context):
    def dataset(epoch=None):
        return ad.BatchDataset(parquet_file, 50, shuffle=True, seed=0, buffer_size=200,
                               epoch=epoch)

    persistent = dataset()
    loader = DataLoader(persistent, batch_size=None, num_workers=2, persistent_workers=True,
                        multiprocessing_context=context)
    orders = []
    for epoch in range(3):
        persistent.set_epoch(epoch)
        orders.append(order(loader))
    for each in orders:
        assert sorted(each) == list(range(ROWS))
    assert orders[0] != orders[1] and orders[1] != orders[2] and orders[0] != orders[2]
    # Epoch 2's order is that of a dataset made at epoch 2: the workers read the epoch set.
    fresh = DataLoader(dataset(2), batch_size=None, num_workers=2, multiprocessing_context=context)
    assert orders[2] == order(fresh)


def test_a_pickled_batch_dataset_keeps_its_epoch_and_owns_its_memory(parquet_file):
    dataset = ad.BatchDataset(parquet_file, 64)
    dataset.set_epoch(5)
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.epoch == 5
    copy.set_epoch(6)
    assert dataset.epoch == 5


# --- merge_states over hostile input --------------------------------------------------------


def test_merge_states_of_deep_nesting_is_a_value_error():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match=r"the states nest deeper than 64 levels"):
        ad.merge_states([deep])
    cycle = []
    cycle.append(cycle)
    cycle.append(cycle)
    with pytest.raises(ValueError, match="no loader state found"):
        ad.merge_states([cycle])


def test_merge_states_finds_states_inside_containers(parquet_file):
    loader = ad.batches(parquet_file, 64)
    next(loader)
    state = loader.state_dict()
    nested = {"rank0": [{"loader": {"deeper": (state,)}}]}
    assert ad.merge_states([nested]) == ad.merge_states([state])


def test_importing_arrow_dlpack_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, arrow_dlpack as ad; ad.batches; ad.Batches; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"



@forks
def test_the_workers_example_of_the_loader_guide_reads_every_row_once(four_files):
    import pathlib

    guide = pathlib.Path(__file__).resolve().parents[3] / "docs" / "loader.md"
    section = guide.read_text(encoding="utf-8").split("### DataLoader workers", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    scope = {}
    exec(compile(code, str(guide), "exec"), scope)
    loader = DataLoader(scope["MyFiles"](four_files), batch_size=None, num_workers=2,
                        multiprocessing_context="fork")
    assert sorted(int(v) for batch in loader for v in batch["id"].tolist()) == list(range(ROWS))
