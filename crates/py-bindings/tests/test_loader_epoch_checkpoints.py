"""Checkpoints at the end of an epoch: torchdata's ``StatefulDataLoader`` begins a new epoch
after a checkpoint taken once its iterator ran out, with or without DataLoader workers, and a
``BatchDataset`` whose saved pass ended resumes nothing, so that a training loop resumed at its
next epoch gets a whole pass (not an empty one) however many workers it has. A checkpoint taken
after the last batch, before the iterator ran out, still resumes the rest of its epoch (nothing).
"""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

import arrow_dlpack as ad

ROWS = 60


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    path = tmp_path_factory.mktemp("epochs") / "t.parquet"
    pq.write_table(pa.table({"id": np.arange(ROWS)}), path, row_group_size=10)
    return str(path)


def _dataset(path, **options):
    return ad.BatchDataset(path, 8, shuffle=True, seed=4, buffer_size=16, **options)


def _ids(loader):
    return [[int(i) for i in batch["id"]] for batch in loader]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_checkpoint_at_the_end_of_an_epoch_resumes_to_a_whole_next_pass(path, num_workers):
    loader = StatefulDataLoader(_dataset(path), batch_size=None, num_workers=num_workers)
    first = _ids(loader)
    assert sorted(i for batch in first for i in batch) == list(range(ROWS))
    checkpoint = loader.state_dict()

    resumed = StatefulDataLoader(_dataset(path), batch_size=None, num_workers=num_workers)
    resumed.load_state_dict(checkpoint)
    # The epoch of the checkpoint ended: the next iterator is a whole pass (of the same epoch,
    # since set_epoch was not called), and so is the one after it.
    assert _ids(resumed) == first
    assert _ids(resumed) == first


def test_a_checkpoint_after_the_last_batch_before_the_end_resumes_the_empty_rest(path):
    full = _ids(StatefulDataLoader(_dataset(path), batch_size=None))
    loader = StatefulDataLoader(_dataset(path), batch_size=None)
    iterator = iter(loader)
    seen = [[int(i) for i in next(iterator)["id"]] for _ in full]
    # Every batch was taken, but the iterator has not said that it ran out: the training loop
    # is still in this epoch, whose rest is empty.
    checkpoint = loader.state_dict()
    resumed = StatefulDataLoader(_dataset(path), batch_size=None)
    resumed.load_state_dict(checkpoint)
    assert seen == full
    assert _ids(resumed) == []
    assert _ids(resumed) == full


def test_a_dataset_state_whose_pass_ended_gives_a_whole_pass_of_its_epoch(path):
    dataset = _dataset(path)
    dataset.set_epoch(3)
    third = _ids(dataset)
    state = dataset.state_dict()
    assert state["ended"] is True and state["epoch"] == 3

    made = _dataset(path, state=state)
    assert made.epoch == 3 and made.batches_left() == len(made)
    assert _ids(made) == third

    loaded = _dataset(path)
    loaded.load_state_dict(state)
    assert loaded.epoch == 3 and loaded.batches_left() == len(loaded)
    assert _ids(loaded) == third

    # A state of a pass that has not ended says so; a forged mark is refused.
    partial = _dataset(path)
    next(iter(partial))
    assert partial.state_dict()["ended"] is False
    with pytest.raises(ad.ArrowDLPackValueError, match=r"state\['ended'\] is 'yes'"):
        _dataset(path).load_state_dict({**state, "ended": "yes"})
    with pytest.raises(ad.ArrowDLPackValueError, match=r"state\['ended'\] is 1"):
        _dataset(path, state={**state, "ended": 1})


def test_a_worker_whose_share_ended_before_a_mid_epoch_checkpoint_resumes_nothing(tmp_path):
    # Two row groups of 8 and 32 rows: the rank's 5 batches, dealt to two workers in runs of 2
    # and 3 (the longer last); the DataLoader gives worker 0's, 1's, 0's, 1's, then worker 0
    # ends and worker 1 gives its last.
    path = tmp_path / "uneven.parquet"
    with pq.ParquetWriter(path, pa.schema([("id", pa.int64())])) as writer:
        writer.write_table(pa.table({"id": np.arange(0, 8)}))
        writer.write_table(pa.table({"id": np.arange(8, 40)}))

    def make():
        return StatefulDataLoader(ad.BatchDataset(str(path), 8), batch_size=None, num_workers=2)

    loader = make()
    given = []
    for index, batch in enumerate(loader):
        given += [int(i) for i in batch["id"]]
        if index == 4:
            # Worker 0 gave its two batches and ended; worker 1 gave its last one and has not.
            checkpoint = loader.state_dict()
            break
    snapshots = checkpoint["_snapshot"]["_worker_snapshots"].values()
    assert sorted(s["dataset_state"]["ended"] for s in snapshots) == [False, True]
    resumed = make()
    resumed.load_state_dict(checkpoint)
    rest = [i for batch in _ids(resumed) for i in batch]
    assert rest == []
    assert sorted(given) == list(range(40))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_merged_checkpoints_of_an_ended_epoch_begin_a_whole_pass_with_other_workers(path, num_workers):
    loader = StatefulDataLoader(_dataset(path), batch_size=None, num_workers=num_workers)
    first = _ids(loader)
    merged = ad.merge_states([loader.state_dict()])
    assert merged["ended"] is True and merged["loader"] is not None
    for workers in (0, 3):
        dataset = _dataset(path, state=merged)
        assert dataset.batches_left(workers) == len(DataLoader(dataset, batch_size=None, num_workers=workers))
        again = _ids(StatefulDataLoader(dataset, batch_size=None, num_workers=workers))
        assert sorted(i for batch in again for i in batch) == list(range(ROWS))
        if workers == num_workers == 0:
            assert again == first
    # The loader's own state of the rest of that epoch: nothing.
    assert list(ad.batches(path, 8, shuffle=True, seed=4, buffer_size=16, state=merged)) == []


def test_a_forged_ended_mark_is_refused_by_every_taker(path):
    dataset = _dataset(path)
    next(iter(dataset))
    state = {**dataset.state_dict(), "ended": "yes"}
    for take in (
        lambda: ad.batches(path, 8, shuffle=True, seed=4, buffer_size=16, state=state),
        lambda: ad.merge_states([state]),
        lambda: _dataset(path, state=state),
    ):
        with pytest.raises(ad.ArrowDLPackValueError, match=r"state\['ended'\] is 'yes'"):
            take()


def test_a_state_given_when_the_dataset_is_made_and_another_epoch_chosen_is_said_not_resumed(path):
    import warnings

    dataset = _dataset(path)
    dataset.set_epoch(0)
    passing = iter(dataset)
    next(passing)
    state = dataset.state_dict()
    # set_epoch of another epoch before any pass: the state is not resumed, and it is said, as
    # for a state loaded with load_state_dict.
    other = _dataset(path, state=state)
    with pytest.warns(UserWarning, match=r"the state saved in epoch 0 is not resumed: set_epoch\(1\)"):
        other.set_epoch(1)
    assert sum(len(batch) for batch in _ids(other)) == ROWS
    # Back to the saved epoch after the warning: the state stays dropped, as the warning said.
    back = _dataset(path, state=state)
    with pytest.warns(UserWarning, match="is not resumed"):
        back.set_epoch(1)
    back.set_epoch(0)
    assert sum(len(batch) for batch in _ids(back)) == ROWS
    # The same epoch resumes it; a later epoch, after its pass, says nothing.
    same = _dataset(path, state=state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same.set_epoch(0)
        assert sum(len(batch) for batch in _ids(same)) == ROWS - 8
        same.set_epoch(1)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_dataset_shuffled_without_a_seed_resumes_with_the_seed_its_checkpoint_was_saved_with(
    path, num_workers
):
    # Each dataset draws its own seed when it is made: the resumed one was refused ("seed: saved
    # ..., given ...") where the user had given no seed to keep.
    def seedless():
        return ad.BatchDataset(path, 8, shuffle=True, buffer_size=16)

    # At step 0 with workers, the second worker has given no batch: its state holds no loader
    # state, and so no seed of its own (the dataset's state carries it).
    for stop in (0, 2):
        original = seedless()
        loader = StatefulDataLoader(original, batch_size=None, num_workers=num_workers)
        whole, checkpoint = [], None
        for step, batch in enumerate(loader):
            whole.append([int(i) for i in batch["id"]])
            if step == stop:
                checkpoint = loader.state_dict()
        original.set_epoch(1)
        next_epoch = _ids(loader)
        again = seedless()
        resumed = StatefulDataLoader(again, batch_size=None, num_workers=num_workers)
        resumed.load_state_dict(checkpoint)
        assert sorted(_ids(resumed)) == sorted(whole[stop + 1:])
        # The next epoch is the uninterrupted run's too (without workers, where this process's
        # dataset took the seed; a worker's copy takes it in the worker).
        if num_workers == 0:
            again.set_epoch(1)
            assert _ids(resumed) == next_epoch
    # As a loader's state given when the dataset is made (no DataLoader workers to share).
    if num_workers == 0:
        stopped = ad.batches(path, 8, shuffle=True, buffer_size=16)
        for _ in range(3):
            next(stopped)
        state = stopped.state_dict()
        rest = [[int(i) for i in np.from_dlpack(batch["id"])] for batch in stopped]
        assert _ids(ad.BatchDataset(path, 8, shuffle=True, buffer_size=16, state=state)) == rest
