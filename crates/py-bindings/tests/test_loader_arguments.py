"""Careless calls of the loader: arguments refused at the door with errors naming them, shards
that cannot overlap, and loaders that survive ``os.fork()``.

Every refusal is an ``Exception`` (``TypeError`` or ``ValueError``), never a crash, an
``OverflowError`` naming nothing, or a ``PanicException``.
"""

import multiprocessing
import os
import pickle

import numpy as np
import pyarrow as pa
import pytest

import _forked
import arrow_dlpack as ad
from arrow_dlpack._arrow_dlpack import _Batches

#: These tests fork on purpose (the children touch no JAX state), so JAX's warning that a fork of
#: its threads may deadlock, raised when another test imported it, is not theirs.
forks = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

#: Rows of the sharding tests, in record batches of 100 (the units that shards are dealt).
ROWS = 2_000


def chunked(rows=ROWS, chunk=100):
    """A table of ``rows`` rows numbered from 0 in column ``id``, in record batches of
    ``chunk`` rows."""
    parts = [
        pa.record_batch({"id": pa.array(range(start, min(start + chunk, rows)), pa.int64())})
        for start in range(0, rows, chunk)
    ]
    return pa.Table.from_batches(parts)


@pytest.fixture
def units_file(tmp_path):
    """:func:`chunked` as an IPC file of 20 record batches: a file's units are permuted by the
    seed before they are dealt to shards (a stream's are dealt in the order they come), so
    shards that disagree on the seed overlap."""
    import pyarrow.feather as feather

    path = tmp_path / "units.arrow"
    feather.write_feather(chunked(), path, compression="uncompressed", chunksize=100)
    return str(path)


def ids(loader):
    """Every ``id`` the loader yields, in order."""
    return [value for batch in loader for value in np.from_dlpack(batch["id"]).tolist()]


# --- Bounds and types, each error naming the argument ---------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "error", "message"),
    [
        # A channel that reserves a slot per batch: 10**9 slots aborted the process, 10**7
        # touched 1.3 GB before the first batch.
        ("prefetch", 10**9, ValueError, r"prefetch is 1000000000; expected at most 1024"),
        ("prefetch", 10**7, ValueError, r"prefetch is 10000000; expected at most 1024"),
        ("prefetch", 1025, ValueError, r"prefetch is 1025; expected at most 1024"),
        ("prefetch", 0, ValueError, r"prefetch is 0; expected at least 1"),
        ("decode_threads", 5000, ValueError, r"decode_threads is 5000; expected at most 64"),
        ("batch_size", 0, ValueError, r"batch_size is 0; expected at least 1"),
        ("buffer_size", 0, ValueError, r"buffer_size is 0; expected at least 1"),
        # Negative ints, which pyo3 refused with a bare OverflowError.
        ("batch_size", -1, ValueError, r"batch_size is -1; expected at least 1"),
        ("prefetch", -2, ValueError, r"prefetch is -2; expected at least 1"),
        ("buffer_size", -3, ValueError, r"buffer_size is -3; expected at least 1"),
        ("decode_threads", -4, ValueError, r"decode_threads is -4; expected a non-negative int"),
        ("batch_size", 2**70, ValueError, r"batch_size is 1180591620717411303424; expected at most"),
        ("batch_size", 2.5, TypeError, r"batch_size is float; expected int"),
        ("prefetch", "2", TypeError, r"prefetch is str; expected int"),
        ("seed", 1.0, TypeError, r"seed is float; expected int"),
        ("shuffle", "yes", TypeError, r"shuffle is str; expected bool"),
        ("drop_last", None, TypeError, r"drop_last is NoneType; expected bool"),
        # A str is a sequence of characters: refused rather than read as one column a letter.
        ("columns", "id", TypeError, r"columns is str; expected a list of str"),
        ("masks", "id", TypeError, r"masks is str; expected a list of str"),
        ("columns", ["id", 3], TypeError, r"columns\[1\] is int; expected str"),
        ("columns", [b"id"], TypeError, r"columns\[0\] is bytes; expected str"),
        ("groups", {"g": "id"}, TypeError, r'groups\["g"\] is str; expected a list of str'),
        ("groups", [("g", ["id"])], TypeError, r"groups is list; expected a dict"),
        ("groups", {"g": {"columns": ["id"], "dtype": "float128"}}, ValueError,
         r'groups\["g"\]\["dtype"\] is "float128"; expected one of int8, .*, float64, bool$'),
        ("groups", {"g": {"columns": ["id"], "dtype": 4}}, TypeError,
         r'groups\["g"\]\["dtype"\] is int; expected a dtype name'),
        ("groups", {"g": {"cols": ["id"]}}, TypeError,
         r"""groups\["g"\] has the key "cols"; expected the keys 'columns' and 'dtype'"""),
        ("groups", {"g": {"dtype": "float32"}}, TypeError, r"""groups\["g"\] has no key 'columns'"""),
    ],
)
def test_a_bad_argument_is_refused_naming_it(option, value, error, message):
    with pytest.raises(error, match=message):
        ad.batches(chunked(10), **{"batch_size": 4, option: value})


def test_the_native_class_names_the_argument_too():
    table = chunked(10)
    with pytest.raises(ValueError, match=r"num_shards is 0; expected at least 1"):
        _Batches(table, num_shards=0)
    with pytest.raises(ValueError, match=r"shard_index is 3; expected less than num_shards \(2\)"):
        _Batches(table, shard_index=3, num_shards=2)
    with pytest.raises(ValueError, match=r"shard_index is -1; expected a non-negative int"):
        _Batches(table, shard_index=-1, num_shards=2)
    with pytest.raises(TypeError, match=r"groups is list; expected a dict from group name to its"):
        _Batches(table, groups=["g"])
    with pytest.raises(TypeError, match=r"a key of groups is int; expected str"):
        _Batches(table, groups={0: ["id"]})
    with pytest.raises(TypeError, match=r"columns is str; expected a list of str"):
        _Batches(table, columns="id")


def test_the_bounds_themselves_are_accepted():
    loader = ad.batches(chunked(10), 4, prefetch=1024, decode_threads=64, buffer_size=1)
    assert ids(loader) == list(range(10))


@pytest.mark.parametrize(
    ("rank", "world_size", "message"),
    [
        (2, 2, r"rank 2 and world_size 2; expected 0 <= rank < world_size"),
        (-1, 2, r"rank -1 and world_size 2"),
        (0, 0, r"rank 0 and world_size 0"),
        (0, None, r"rank and world_size go together"),
    ],
)
def test_inconsistent_rank_and_world_size_are_refused(rank, world_size, message):
    with pytest.raises(ValueError, match=message):
        ad.batches(chunked(10), 4, rank=rank, world_size=world_size)


def test_a_rank_that_is_not_an_int_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"rank is str; expected int"):
        ad.batches(chunked(10), 4, rank="0", world_size=2)


# --- Seeds of any Python int ----------------------------------------------------------------


def shuffled(seed):
    return ids(ad.batches(chunked(500, 50), 50, shuffle=True, seed=seed, buffer_size=100))


def test_a_negative_seed_is_taken_modulo_two_to_the_64():
    assert shuffled(-1) == shuffled(2**64 - 1)
    assert shuffled(2**64 + 7) == shuffled(7)
    assert shuffled(-(2**64) + 7) == shuffled(7)
    assert shuffled(-1) != shuffled(1)
    # A negative `hash()`, the usual source of a negative seed, is accepted.
    assert sorted(shuffled(hash("a negative hash") | -(2**40))) == list(range(500))


# --- Output names and source columns -------------------------------------------------------


def test_a_mask_that_takes_a_column_name_is_refused_naming_both():
    table = pa.table({"label": [1, 2], "label_mask": [3, 4]})
    with pytest.raises(ValueError, match=r'"label_mask" is claimed twice, by column "label_mask" '
                       r'and by the mask of "label" \(masks\)'):
        ad.batches(table, 2, columns=["label", "label_mask"], masks=["label"])
    with pytest.raises(ValueError, match=r'"label_mask" is claimed twice, by group "label_mask"'):
        ad.batches(table, 2, groups={"label_mask": ["label"]}, columns=[], masks=["label"])
    # Loading every column not in a group, the clash is found against the source's schema,
    # before any batch: a source column of the group's name.
    with pytest.raises(ValueError, match=r'"label_mask" is claimed twice, by column '
                       r'"label_mask" \(every column not in a group is loaded\) and by group'):
        ad.batches(table, 2, groups={"label_mask": ["label"]}, masks=["label"])
    with pytest.raises(ValueError, match=r'"label_mask" is claimed twice, by column '
                       r'"label_mask" \(every column not in a group is loaded\)'):
        ad.batches(table, 2, masks=["label"])


def test_a_column_and_a_group_of_one_name_are_refused():
    table = pa.table({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    with pytest.raises(ValueError, match=r'"x" is claimed twice, by column "x" and by group "x"'):
        ad.batches(table, 2, columns=["x"], groups={"x": ["x", "y"]})


def test_duplicate_source_columns_are_refused_naming_the_duplicate():
    table = pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4]), pa.array([5.0, 6.0])],
                                 names=["a", "a", "b"])
    for columns in (["a"], None):
        with pytest.raises(ValueError, match=r'the source has 2 columns named "a"'):
            ad.batches(table, 2, columns=columns)
    # A duplicate that is not read is no ambiguity.
    batches = ad.batches(table, 2, columns=["b"])
    assert [np.from_dlpack(batch["b"]).tolist() for batch in batches] == [[5.0, 6.0]]


# --- Shards that cannot overlap --------------------------------------------------------------


def test_shuffled_shards_without_a_seed_are_refused():
    # Each shard drew its own seed: with 2 ranks, a fifth of the rows were read twice and a
    # fifth never.
    with pytest.raises(ValueError, match=r"shuffle=True over 2 shards needs a seed"):
        ad.batches(chunked(), 100, shuffle=True, rank=1, world_size=2)


@pytest.mark.parametrize("world_size", [2, 3])
def test_shuffled_shards_with_a_seed_read_every_row_exactly_once(world_size, units_file):
    shards = [
        ids(ad.batches(units_file, 64, shuffle=True, seed=-5, rank=rank, world_size=world_size,
                       buffer_size=300))
        for rank in range(world_size)
    ]
    union = [row for shard in shards for row in shard]
    assert sorted(union) == list(range(ROWS))
    assert union != list(range(ROWS))  # shuffled indeed


def in_two_forked_ranks(target, init_file, source):
    """What ``target(rank, init_file, source, queue)`` puts in the queue in each of two forked
    processes (ranks 0 and 1), once both have ended well."""
    return _forked.in_forked_processes(target, [(rank, init_file, source) for rank in range(2)])


def read_as_rank(rank, init_file, source, queue):
    """Joins a two-rank gloo group and reads its shard with shuffle=True and no seed."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        queue.put((rank, ids(ad.batches(source, 64, shuffle=True, buffer_size=300))))
    finally:
        dist.destroy_process_group()


@forks
def test_ranks_of_a_process_group_without_a_seed_share_seed_0(tmp_path, units_file):
    import torch.distributed  # noqa: F401 - `ad.batches` asks torch only if it was imported

    shards = dict(in_two_forked_ranks(read_as_rank, tmp_path / "init", units_file))
    union = shards[0] + shards[1]
    assert sorted(union) == list(range(ROWS))
    assert union != list(range(ROWS))


def datasets_of_a_rank(rank, init_file, source, queue):
    """Makes shuffled datasets without a seed before and after joining a two-rank gloo group,
    and one on rank 0 alone while rank 1 waits at a barrier."""
    import torch.distributed as dist

    made_before = ad.BatchDataset(source, 64, shuffle=True, buffer_size=300)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        refused = {}
        for what, call in (("iter", lambda: next(iter(made_before))), ("len", lambda: len(made_before))):
            try:
                call()
            except ValueError as error:
                refused[what] = str(error)
        # No collective call inside the dataset: rank 1 is at the barrier meanwhile.
        alone = ids(ad.BatchDataset(source, 64, shuffle=True, buffer_size=300)) if rank == 0 else []
        dist.barrier()
        after = ad.BatchDataset(source, 64, shuffle=True, buffer_size=300)
        queue.put((rank, refused, len(alone), len(after), ids(after)))
    finally:
        dist.destroy_process_group()


@forks
def test_datasets_of_a_process_group_need_no_seed_and_no_collective_and_refuse_another_layout(
    tmp_path, units_file
):
    # Made before init_process_group, a dataset counted and seeded the pass of one process, and
    # read as one of two ranks each rank drew its own seed: rows were read twice and never.
    # Made on rank 0 alone, its seed's broadcast met rank 1's barrier and the group failed.
    import torch.distributed  # noqa: F401 - the package asks torch only if it was imported

    found = {rank: rest for rank, *rest in in_two_forked_ranks(datasets_of_a_rank, tmp_path / "init", units_file)}
    for rank, (refused, _, length, rows) in found.items():
        assert set(refused) == {"iter", "len"}
        for message in refused.values():
            assert f"made as rank 0 of 1 (the torch.distributed group when it was made) and is read as rank {rank} of 2" in message
            assert "make it after torch.distributed.init_process_group" in message
        assert length * 64 >= len(rows) > (length - 1) * 64
    assert found[0][1] == ROWS // 2
    union = found[0][3] + found[1][3]
    # Seed 0 on every rank, as DistributedSampler's default: every row once, shuffled.
    assert sorted(union) == list(range(ROWS))
    assert union != list(range(ROWS))


def rows_through_data_loader(dataset, workers):
    from torch.utils.data import DataLoader

    context = {"multiprocessing_context": "fork"} if workers else {}
    loader = DataLoader(dataset, batch_size=None, num_workers=workers, **context)
    return [value for batch in loader for value in batch["id"].tolist()]


@forks
def test_batch_dataset_workers_without_a_seed_read_every_row_exactly_once(units_file):
    dataset = ad.BatchDataset(units_file, 64, shuffle=True, buffer_size=300)
    rows = rows_through_data_loader(dataset, 2)
    assert sorted(rows) == list(range(ROWS))
    assert rows != list(range(ROWS))


def test_batch_dataset_set_epoch_adds_the_epoch_to_the_seed():
    def epoch_rows(seed, epoch):
        dataset = ad.BatchDataset(chunked(500, 50), 50, shuffle=True, seed=seed, buffer_size=100)
        dataset.set_epoch(epoch)
        return rows_through_data_loader(dataset, 0)

    assert epoch_rows(10, 0) != epoch_rows(10, 1)
    assert epoch_rows(10, 1) == epoch_rows(11, 0)
    assert sorted(epoch_rows(10, 3)) == list(range(500))
    with pytest.raises(TypeError, match=r"epoch is str; expected int"):
        ad.BatchDataset(chunked(10), 4).set_epoch("1")


def test_batch_dataset_of_two_ranks_without_a_seed_or_group_is_refused():
    with pytest.raises(ValueError, match=r"shuffle=True over 2 shards needs a seed"):
        ad.BatchDataset(chunked(), 64, shuffle=True, rank=0, world_size=2)


# --- Fork ------------------------------------------------------------------------------------

FORKED = r"this loader was made in process \d+ and is used in process \d+, a fork of it"


def use_in_child(loader):
    """What each call of the parent's ``loader`` does in this (forked) process, and the rows of
    a loader made here."""
    outcome = {}
    for name, call in (("next", lambda: next(loader)), ("len", lambda: len(loader)),
                       ("close", loader.close)):
        try:
            call()
            outcome[name] = "returned"
        except BaseException as error:  # noqa: BLE001 - a PanicException must be seen too
            outcome[name] = f"{type(error).__name__}: {error}"
    outcome["own"] = ids(ad.batches(chunked(10), 4))
    return outcome


def assert_refused_in_child(outcome):
    for name in ("next", "len", "close"):
        assert outcome[name].startswith("ArrowDLPackValueError: this loader was made in process")
    import re

    assert re.search(FORKED, outcome["next"])
    assert outcome["own"] == list(range(10))


@forks
def test_a_loader_made_before_os_fork_is_refused_in_the_child_and_works_in_the_parent():
    loader = ad.batches(chunked(), 100, prefetch=4)
    first = np.from_dlpack(next(loader)["id"]).tolist()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe and leave without pytest's teardown
        code = 0
        try:
            os.write(write, pickle.dumps(use_in_child(loader)))
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert_refused_in_child(pickle.loads(report))
    # The parent's loader goes on where it was.
    assert first + ids(loader) == list(range(ROWS))


def child_of_multiprocessing(loader, queue):
    queue.put(use_in_child(loader))


@forks
def test_a_loader_passed_to_a_multiprocessing_fork_child_is_refused_there():
    context = multiprocessing.get_context("fork")
    loader = ad.batches(chunked(), 100)
    queue = context.Queue()
    child = context.Process(target=child_of_multiprocessing, args=(loader, queue))
    child.start()
    outcome = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert_refused_in_child(outcome)
    assert ids(loader) == list(range(ROWS))


# --- writable: private copies instead of views of the caller's memory -----------------------


def test_views_of_a_callers_table_are_read_only_and_writable_makes_private_copies():
    import torch

    table = chunked(12, 6)
    expected = table.column("id").to_pylist()
    views = list(ad.batches(table, 3))
    # numpy honours the READ_ONLY flag of the views; torch ignores it (hence `writable`).
    assert not any(np.from_dlpack(batch["id"]).flags.writeable for batch in views)
    copies = list(ad.batches(table, 3, writable=True))
    assert all(np.from_dlpack(batch["id"]).flags.writeable for batch in copies)
    for batch in copies:
        torch.from_dlpack(batch["id"]).mul_(-1)
    assert table.column("id").to_pylist() == expected
    assert [v for batch in copies for v in np.from_dlpack(batch["id"]).tolist()] == [
        -v for v in expected
    ]


def test_format_hands_out_torch_tensors_in_private_memory_or_read_only_numpy_arrays(tmp_path):
    import torch

    table = chunked(12, 6)
    expected = table.column("id").to_pylist()
    # torch: tensors of their own over a caller's table (torch ignores the read-only flag, so an
    # in-place step would otherwise rewrite the table).
    tensors = list(ad.batches(table, 3, format="torch"))
    assert all(isinstance(batch["id"], torch.Tensor) for batch in tensors)
    for batch in tensors:
        batch["id"].mul_(-1)
    assert table.column("id").to_pylist() == expected
    assert [v for batch in tensors for v in batch["id"].tolist()] == [-v for v in expected]
    # numpy: the same views, read-only (batches the loader made are its own, writable).
    arrays = list(ad.batches(table, 3, format="numpy"))
    assert all(isinstance(batch["id"], np.ndarray) for batch in arrays)
    assert not any(batch["id"].flags.writeable for batch in arrays)
    assert [v for batch in arrays for v in batch["id"].tolist()] == expected
    # Over files the loader's views are its own pages: torch tensors of them, no copy asked.
    path = tmp_path / "t.arrow"
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
    from_file = [batch["id"].tolist() for batch in ad.batches(str(path), 3, format="torch")]
    assert [v for ids in from_file for v in ids] == expected
    # The default is the package's own tensors.
    assert all(isinstance(batch["id"], ad.Tensor) for batch in ad.batches(table, 3))
    for wrong in ("pytorch", None, 1):
        with pytest.raises(ValueError, match=r"^format is .*; expected one of 'torch', 'numpy', 'dlpack'$"):
            ad.batches(table, 3, format=wrong)


def test_writable_keeps_the_layout_of_a_column_major_group_view(tmp_path):
    import pyarrow.feather as feather

    path = tmp_path / "group.arrow"
    table = pa.table({"a": np.arange(8, dtype=np.float32), "b": np.arange(8, 16, dtype=np.float32)})
    feather.write_feather(table, path, compression="uncompressed", chunksize=8)
    oracle = np.stack([table["a"].to_numpy(), table["b"].to_numpy()], axis=1)
    for writable in (False, True):
        batches = list(ad.batches(str(path), 4, groups={"g": ["a", "b"]}, row_major=False,
                                  writable=writable))
        arrays = [np.from_dlpack(batch["g"]) for batch in batches]
        # Column-major either way: the view with strides (1, distance), the copy dense.
        assert all(array.strides[0] == 4 for array in arrays)
        assert all(array.flags.f_contiguous for array in arrays) or not writable
        assert all(array.flags.writeable == writable for array in arrays)
        np.testing.assert_array_equal(np.concatenate(arrays), oracle)
    # A write into a private copy leaves the memory-mapped file as it was.
    arrays[0][:] = -1
    np.testing.assert_array_equal(feather.read_table(path)["a"].to_numpy(), oracle[:, 0])


# --- No call of the loader panics -----------------------------------------------------------

#: Values that no option takes, or takes only at a bound.
HOSTILE = [-1, -(2**63), 2**64, 2**200, 0, 1.5, "x", b"x", None, [], [None], [("g",)], {}, object()]


@pytest.mark.parametrize("option", list(_Batches.OPTIONS))
def test_no_hostile_value_of_an_option_panics(option):
    table = chunked(10)
    for value in HOSTILE:
        try:
            loader = _Batches(table, **{option: value})
            list(loader)
        except BaseException as error:  # noqa: BLE001 - a PanicException must be caught here
            assert isinstance(error, (TypeError, ValueError)), (option, value, repr(error))


def test_no_hostile_source_or_call_panics(tmp_path):
    class Raising:
        def __arrow_c_stream__(self, requested_schema=None):
            raise RuntimeError("no stream today")

    for source in (5, [], [5], [str(tmp_path / "missing.parquet")], str(tmp_path), Raising()):
        try:
            _Batches(source)
        except BaseException as error:  # noqa: BLE001
            assert isinstance(error, (TypeError, ValueError, OSError, RuntimeError)), repr(error)
    loader = _Batches(chunked(10), batch_size=4)
    loader.close()
    loader.close()
    with pytest.raises(ValueError, match="this loader was closed"):
        list(loader)
    # Closed before its last batch: next() says so rather than end the loop as if it were whole.
    with pytest.raises(ValueError, match="closed .* before its last batch"):
        next(loader)
    assert len(loader) == 0


@pytest.mark.parametrize(
    ("call", "kind", "match"),
    [
        (lambda path: ad.batches(path, 10, rank=0), ad.ArrowDLPackValueError, "rank and world_size"),
        (lambda path: ad.batches(path, 10, rank=2, world_size=2), ad.ArrowDLPackValueError, "rank"),
        (
            lambda path: ad.batches(path, 10, shuffle=True, rank=0, world_size=2),
            ad.ArrowDLPackValueError,
            "seed",
        ),
        (lambda path: ad.merge_states([]), ad.ArrowDLPackValueError, "no loader state found"),
        (
            lambda path: ad.merge_states(eval("[" * 100 + "]" * 100)),
            ad.ArrowDLPackValueError,
            "nest deeper",
        ),
        (lambda path: ad.merge_states(5), ad.ArrowDLPackTypeError, "states is int"),
        (
            lambda path: ad.BatchDataset(path, 10).set_epoch(-1),
            ad.ArrowDLPackValueError,
            "epoch is -1",
        ),
        (
            lambda path: ad.VariableShapeTensorArray.from_numpy_ndarray(
                [np.ones((2, 3))], permutation=[2**64, 0]
            ),
            ad.ArrowDLPackValueError,
            "permutation has entry 18446744073709551616",
        ),
        (
            lambda path: ad.VariableShapeTensorArray.from_numpy_ndarray(
                [np.ones((2, 3))], permutation=["0", 1]
            ),
            ad.ArrowDLPackTypeError,
            "permutation has an entry of type str",
        ),
    ],
)
def test_refusals_of_the_python_layer_are_the_package_classes(units_file, call, kind, match):
    with pytest.raises(kind, match=match):
        call(str(units_file))
