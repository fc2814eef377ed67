"""Saved states of ``ad.batches`` tried as a careless user and a forger would: the state is
typed plain data (the seed an int, no setting written as text); a changed setting is named with
both values; a state over other data of the same name is refused naming the file, while a file
moved with its modification time resumes; forged numbers (a row carried three times, a position
past its unit, a merge sized by a forged window or stream position) are ``ValueError``s, the
merges in a child process whose exit status and peak memory are checked.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import arrow_dlpack as ad


def _table(start, rows):
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({
        "id": ids,
        "x": ids.astype(np.float32),
        "tokens": pa.array([list(range(int(i) % 5)) for i in ids], pa.list_(pa.int32())),
    })


def _ids(batches):
    return [int(i) for batch in batches for i in np.from_dlpack(batch["id"])]


def _state_after(source, k, batch_size=8, **options):
    iterator = ad.batches(source, batch_size, **options)
    for _ in range(k):
        next(iterator)
    return iterator.state_dict()


def test_a_state_is_typed_plain_data_that_names_what_differs(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(_table(0, 100), path, row_group_size=50)
    options = dict(columns=["id"], sequences={"tokens": {"mode": "pad", "max_length": 3}},
                   shuffle=True, seed=1, buffer_size=16)
    state = _state_after(path, 2, **options)
    assert json.loads(json.dumps(state)) == state
    settings = dict(state["settings"])
    source = settings.pop("source")
    assert settings == {
        "batch_size": 8, "drop_last": False, "columns": ["id"], "groups": {}, "masks": [],
        "sequences": {"tokens": {"mode": "pad", "max_length": 3, "pad_to_multiple_of": None}},
        "shuffle": True, "seed": 1, "buffer_size": 16, "max_tokens": None,
        "bucket_by_length": False,
    }
    assert source["kind"] == "parquet_files" and source["schema"] is None
    [file] = source["files"]
    assert file["name"] == "t.parquet"
    assert file["size"] == os.path.getsize(path)
    assert file["modified_ns"] == os.stat(path).st_mtime_ns
    assert file["e_tag"] is None and file["last_modified_ms"] is None
    assert file["digest"].startswith("xxh3-128:") and len(file["digest"]) == 9 + 32
    with pytest.raises(ValueError, match=r"^cannot resume from the state: seed: saved 1, given 2$"):
        ad.batches(path, 8, state=state, **{**options, "seed": 2})
    plain = {**options, "sequences": {"tokens": "pad"}}
    with pytest.raises(ValueError, match=r'sequences\["tokens"\]\.mode: saved "pad", given "pack"'):
        ad.batches(path, 8, state=_state_after(path, 2, **plain), **{**plain, "sequences": {"tokens": "pack"}})
    with pytest.raises(ValueError, match=r'sequences\["tokens"\]\.max_length: saved 3, given 4'):
        ad.batches(path, 8, state=state,
                   **{**options, "sequences": {"tokens": {"mode": "pad", "max_length": 4}}})
    # Options that change only how the same rows are laid out may change.
    padded_left = {"tokens": {"mode": "pad", "max_length": 3, "padding_side": "left", "pad_value": -1}}
    assert len(list(ad.batches(path, 8, state=state, **{**options, "sequences": padded_left}))) == 11


def test_a_shuffled_resume_without_a_seed_reads_the_int_seed_of_the_state(tmp_path):
    path = str(tmp_path / "t.arrow")
    feather.write_feather(_table(0, 60), path, compression="uncompressed", chunksize=10)
    iterator = ad.batches(path, 4, columns=["id"], shuffle=True)
    first = _ids([next(iterator) for _ in range(3)])
    state = iterator.state_dict()
    seed = state["settings"]["seed"]
    assert isinstance(seed, int) and not isinstance(seed, bool)
    rest = _ids(iterator)
    assert _ids(ad.batches(path, 4, columns=["id"], shuffle=True, state=state)) == rest
    assert _ids(ad.batches(path, 4, columns=["id"], shuffle=True, seed=seed))[12:] == rest
    assert sorted(first + rest) == list(range(60))


def test_a_state_of_an_older_format_is_refused_saying_what_to_do(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(_table(0, 20), path)
    state = _state_after(path, 1, columns=["id"])
    older = {key: value for key, value in state.items() if key != "settings"}
    older.update(version=1, config={"batch_size": "8", "seed": "0"})
    with pytest.raises(ValueError, match="saved by an older version of arrow-dlpack.*start the epoch again"):
        ad.batches(path, 8, columns=["id"], state=older)
    with pytest.raises(ValueError, match="older version"):
        ad.merge_states([older])


def test_a_state_over_other_data_of_the_same_name_is_refused_naming_the_file(tmp_path):
    for folder in ("v1", "v2", "a", "b"):
        (tmp_path / folder).mkdir()
    # Other rows, the same number of row groups.
    v1, v2 = str(tmp_path / "v1" / "train.parquet"), str(tmp_path / "v2" / "train.parquet")
    pq.write_table(_table(0, 100), v1, row_group_size=50)
    pq.write_table(_table(1000, 100), v2, row_group_size=50)
    state = _state_after(v1, 2, columns=["id"])
    with pytest.raises(ValueError, match=r"^cannot resume from the state: train\.parquet: "):
        ad.batches(v2, 8, columns=["id"], state=state)
    # A 100-row file and a 99-row file of the same name in another folder.
    a, b = str(tmp_path / "a" / "t.parquet"), str(tmp_path / "b" / "t.parquet")
    pq.write_table(_table(0, 100), a)
    pq.write_table(_table(0, 99), b)
    state = _state_after(a, 2, columns=["id"])
    expected = f"t.parquet: size saved {os.path.getsize(a)}, given {os.path.getsize(b)}"
    with pytest.raises(ValueError, match=expected):
        ad.batches(b, 8, columns=["id"], state=state)
    # IPC files of the same shape have the same size and footer: the modification time tells.
    v1, v2 = str(tmp_path / "v1" / "train.arrow"), str(tmp_path / "v2" / "train.arrow")
    feather.write_feather(_table(0, 100).select(["id", "x"]), v1, compression="uncompressed")
    feather.write_feather(_table(1000, 100).select(["id", "x"]), v2, compression="uncompressed")
    assert os.path.getsize(v1) == os.path.getsize(v2)
    mtime = os.stat(v1).st_mtime_ns
    os.utime(v2, ns=(mtime + 10**9, mtime + 10**9))
    state = _state_after(v1, 2, columns=["id"])
    with pytest.raises(ValueError, match=r"train\.arrow: modified_ns saved"):
        ad.batches(v2, 8, columns=["id"], state=state)


def test_a_file_moved_with_its_modification_time_resumes_and_a_fresh_copy_is_refused(tmp_path):
    for folder in ("old", "new", "copy"):
        (tmp_path / folder).mkdir()
    original = str(tmp_path / "old" / "train.parquet")
    pq.write_table(_table(0, 100), original, row_group_size=30)
    options = dict(columns=["id"], shuffle=True, seed=4, buffer_size=20)
    full = _ids(ad.batches(original, 8, **options))
    state = _state_after(original, 3, **options)
    moved = str(tmp_path / "new" / "renamed.parquet")
    shutil.copy2(original, moved)  # keeps the modification time, as `mv` does
    assert _ids(ad.batches(moved, 8, state=state, **options)) == full[24:]
    copied = str(tmp_path / "copy" / "train.parquet")
    shutil.copy(original, copied)
    mtime = os.stat(original).st_mtime_ns + 10**9
    os.utime(copied, ns=(mtime, mtime))
    with pytest.raises(ValueError, match=r"train\.parquet: modified_ns saved \d+, given \d+"):
        ad.batches(copied, 8, state=state, **options)


def test_forged_windows_and_positions_are_refused_naming_the_real_counts(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(_table(0, 100), path, row_group_size=50)
    shuffled = dict(columns=["id"], shuffle=True, seed=1, buffer_size=16)
    state = _state_after(path, 1, **shuffled)
    thrice = {**state, "position": {"kind": "window", "rng": 7, "carried": [[0, 5], [0, 5], [0, 5]],
                                    "start": 1, "sizes": [], "emitted": 0}}
    with pytest.raises(ValueError, match="carries row 5 of item 0 more than once"):
        ad.batches(path, 8, state=thrice, **shuffled)
    state = _state_after(path, 1, columns=["id"])
    past = {**state, "position": {"kind": "rows", "item": 0, "row": 2**64 - 1}}
    with pytest.raises(ValueError, match=f"row {2**64 - 1} of item 0, which has 50 rows"):
        ad.batches(path, 8, columns=["id"], state=past)


CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import arrow_dlpack as ad

    states = json.load(open(sys.argv[1]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        merged = ad.merge_states(states)
        outcome = f"merged {len(merged['work']['items'])} items"
    except ValueError as error:
        outcome = str(error)
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    json.dump([outcome, growth], open(sys.argv[2], "w"))
    """
)


def _merge_in_child(tmp_path, states):
    """``ad.merge_states(states)`` in a child process: its outcome and peak memory growth (KiB),
    or the child's exit status when it died."""
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "states.json").write_text(json.dumps(states))
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "states.json"), str(out)],
        capture_output=True, timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return json.loads(out.read_text())


def test_merge_states_refuses_forged_counts_before_allocating_for_them(tmp_path):
    path = str(tmp_path / "t.arrows")
    table = _table(0, 160).select(["id"])
    with ipc.new_stream(path, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=4):
            writer.write_batch(batch)

    def states(**options):
        return [_state_after(path, 1, batch_size=4, columns=["id"], rank=rank, world_size=2, **options)
                for rank in range(2)]

    legit = states()
    outcome, _ = _merge_in_child(tmp_path, legit)
    assert outcome.startswith("merged "), outcome
    # Stream positions of 2**40 and 2**22 record batches: the other shard's items up to there
    # would be listed one by one.
    for item in (2**40, 2**22):
        forged = [{**legit[0], "position": {"kind": "rows", "item": item, "row": 0}}, legit[1]]
        outcome, growth = _merge_in_child(tmp_path, forged)
        assert f"a merged state lists at most {2**20}" in outcome, (item, outcome)
        assert growth < 64 * 1024, (item, growth)
    # A window of 2**32 rows given in part: its replay would hold 2**32 indices.
    shuffled = states(shuffle=True, seed=5, buffer_size=8)
    window = {"kind": "window", "rng": 7, "carried": [], "start": 3, "sizes": [2**32], "emitted": 1}
    outcome, growth = _merge_in_child(tmp_path, [{**shuffled[0], "position": window}, shuffled[1]])
    assert "holds 4294967296 rows; a merge replays at most 16777216" in outcome, outcome
    assert growth < 64 * 1024, growth




def _reader_of_50_row_units():
    table = pa.table({"id": np.arange(200, dtype=np.int64)})
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=50))


def test_a_stream_state_with_a_row_past_its_unit_is_refused_when_the_unit_is_read():
    loader = ad.batches(_reader_of_50_row_units(), 16)
    for _ in range(4):
        next(loader)
    state = loader.state_dict()
    loader.close()
    item = state["position"]["item"]
    state["position"]["row"] = 2**64 - 1
    with pytest.raises(
        ValueError, match=rf"row {2**64 - 1} of item {item}, which has 50 rows"
    ):
        list(ad.batches(_reader_of_50_row_units(), 16, state=state))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("settings", "seed"), 1.5, "state['settings']['seed'] is 1.5 (a float); expected a non-negative int"),
        (("settings",), 5, "state['settings'] is 5 (an int); expected a dict"),
        (("epoch",), "3", "state['epoch'] is '3' (a str); expected a non-negative int"),
        (("shard",), [0], "state['shard'] has length 1; expected a list of 2 items"),
        # A position is a dict told apart by its "kind": the key inside it is named too.
        (("position", "emitted"), "1", "state['position']['emitted'] is '1' (a str); expected a non-negative int"),
        (("position", "start"), 0.5, "state['position']['start'] is 0.5 (a float); expected a non-negative int"),
        (("position", "sizes"), {"a": 1}, "state['position']['sizes'] is a dict; expected a list"),
        (("position", "sizes"), ["a"], "state['position']['sizes'][0] is 'a' (a str); expected a non-negative int"),
        (("position", "carried"), [[0, 1, 2]], "state['position']['carried'][0] has length 3; expected a list of 2 items"),
        (("shard",), [1, 2, 3], "state['shard'] has length 3; expected a list of fewer items"),
        (("position", "emitted"), -1, "state['position']['emitted'] is -1 (an int); expected a non-negative int"),
        (("settings", "source", "kind"), 5, "state['settings']['source']['kind'] is 5 (an int); expected a str or a dict"),
        (("ranks",), -1, "state['ranks'] is -1 (an int); expected a non-negative int"),
        (("ranks",), "2", "state['ranks'] is '2' (a str); expected a non-negative int"),
        (("ranks",), 2.0, "state['ranks'] is 2.0 (a float); expected a non-negative int"),
        (("ranks",), None, "state is not a loader state: the state of a shard lacks the key \"ranks\""),
        (("ranks",), 0, "cannot resume from the state: the state's ranks is 0; expected a divisor of its 1 shards"),
    ],
)
def test_a_forged_state_is_named_by_its_key_in_python_words(path, value, message):
    table = pa.table({"id": np.arange(200, dtype=np.int64)})
    options = {"shuffle": True, "seed": 0, "buffer_size": 30}
    loader = ad.batches(table, 16, **options)
    next(loader)
    state = loader.state_dict()
    loader.close()
    at = state
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    with pytest.raises(ad.ArrowDLPackValueError) as raised:
        ad.batches(table, 16, state=state, **options)
    assert str(raised.value).startswith(message), str(raised.value)
    for rust in ("u64", "struct ", "floating point", "`"):
        assert rust not in str(raised.value)


def _two_ranks_after_a_batch():
    """A table of 200 rows, and the states of its 2 ranks after one batch of 16 each."""
    table = pa.Table.from_batches(_reader_of_50_row_units())
    states = []
    for rank in range(2):
        loader = ad.batches(table, 16, rank=rank, world_size=2)
        next(loader)
        states.append(loader.state_dict())
        loader.close()
    return table, states


def test_merge_states_names_the_shards_of_the_states_given():
    table, states = _two_ranks_after_a_batch()
    # Copies: the same dict given twice is looked into once.
    again = json.loads(json.dumps(states[1]))
    with pytest.raises(
        ValueError,
        match=r"3 states were given, and one is of shard 0 of 2; expected one state of "
        r"each shard 0 to 1",
    ):
        ad.merge_states(states + [again])
    with pytest.raises(ValueError, match=r"two states are of shard 1 of 2"):
        ad.merge_states([states[1], again])
    # The same object twice is not a cycle to look into once but a shard given twice.
    with pytest.raises(ValueError, match=r"^the same state is given twice; expected the state_dict"):
        ad.merge_states([states[0], states[0]])
    with pytest.raises(ValueError, match=r"^the same state is given twice"):
        ad.merge_states([{"rank0": states[0]}, [states[0]]])


def test_a_merged_state_given_to_load_state_dict_says_to_pass_it_as_state():
    table, states = _two_ranks_after_a_batch()
    merged = ad.merge_states(states)
    dataset = ad.BatchDataset(table, 16)
    with pytest.raises(ad.ArrowDLPackValueError, match=r"pass it as BatchDataset\(\.\.\., state=state\)"):
        dataset.load_state_dict(merged)
    resumed = ad.BatchDataset(table, 16, state=merged)
    assert sum(len(batch["id"]) for batch in resumed) == table.num_rows - 32


@pytest.mark.parametrize("key", ["position", "shard"])
def test_a_state_without_its_position_or_shard_is_refused_not_restarted(key):
    # Either may be None (a merged state, a state before its first batch), but a state with
    # the key deleted would otherwise resume from the start of the epoch.
    table = pa.table({"id": np.arange(200, dtype=np.int64)})
    loader = ad.batches(table, 16)
    next(loader)
    state = loader.state_dict()
    loader.close()
    del state[key]
    with pytest.raises(ad.ArrowDLPackValueError, match=f"^state lacks the key '{key}'$"):
        ad.batches(table, 16, state=state)


def test_a_forged_batch_dataset_state_is_refused_by_every_taker(tmp_path):
    """A BatchDataset state without its 'loader' key resumed a whole pass (batches given twice);
    an 'epoch' other than its loader's, or a marker other than 1, was taken by state=."""
    path = str(tmp_path / "t.parquet")
    pq.write_table(_table(0, 40), path)
    dataset = ad.BatchDataset(path, 10, columns=["id"])
    iterator = iter(dataset)
    next(iterator)
    saved = dataset.state_dict()
    forged = [
        ({k: v for k, v in saved.items() if k != "loader"}, "no 'loader' key"),
        ({**saved, "epoch": 7}, "its loader's state is of epoch 0"),
        ({**saved, "epoch": -1}, "expected a non-negative int"),
        ({**saved, "arrow_dlpack_batch_dataset": "x"}, "expected 1"),
    ]
    for state, match in forged:
        with pytest.raises(ad.ArrowDLPackValueError, match=match):
            ad.BatchDataset(path, 10, columns=["id"], state=state)
        with pytest.raises(ad.ArrowDLPackValueError, match=match):
            ad.BatchDataset(path, 10, columns=["id"]).load_state_dict(state)
        with pytest.raises(ad.ArrowDLPackValueError, match=match):
            ad.batches(path, 10, columns=["id"], state=state)
    assert len(list(ad.BatchDataset(path, 10, columns=["id"], state=saved))) == 3
    # An int beyond 64 bits reaches the state's reading as a float: said so.
    with pytest.raises(ad.ArrowDLPackValueError, match=r"state\['version'\] is .* \(an int beyond 64 bits"):
        ad.batches(path, 10, columns=["id"], state={**saved["loader"], "version": 2**64})


def test_edited_states_are_refused_by_merge_states_as_by_a_resume(tmp_path):
    # A table of 4 record batches of 30 rows, stopped inside the second (item 1, row 10).
    table = pa.Table.from_batches(_table(0, 100).select(["id"]).to_batches(max_chunksize=30))
    stream = str(tmp_path / "t.arrows")
    with ipc.new_stream(stream, table.schema) as writer:
        writer.write_table(table)
    for source in (table, stream):
        state = json.loads(json.dumps(_state_after(source, 5)))
        assert state["position"] == {"kind": "rows", "item": 1, "row": 10}
        # Merged, a position past the units was read as a unit with nothing left (0 rows
        # resumed), and one past any unit's rows as a unit read to its end (40 rows): refused,
        # as the same state resumed directly is.
        for key, value, message in (
            ("item", 10, "the merged state reads part of unit 10; the source has 4 units"),
            ("row", 2**64 - 1, "past the rows any unit has"),
        ):
            edited = json.loads(json.dumps(state))
            edited["position"][key] = value
            with pytest.raises(ValueError, match="cannot resume from the state"):
                ad.batches(source, 8, state=edited)
            with pytest.raises(ValueError, match=message):
                list(ad.batches(source, 8, state=ad.merge_states([edited])))
    # Counts at the top of u64 overflowed the merge's arithmetic (a debug build's panic, and
    # its backtrace on stderr): refused, naming what.
    script = textwrap.dedent("""
        import json, numpy as np, pyarrow as pa, arrow_dlpack as ad
        table = pa.Table.from_batches(pa.table({"x": np.arange(100)}).to_batches(max_chunksize=30))
        for (part, key), options in [(("position", "item"), {}),
                                     (("position", "start"), dict(shuffle=True, seed=1, buffer_size=20))]:
            loader = ad.batches(table, 8, **options)
            next(loader); next(loader)
            state = json.loads(json.dumps(loader.state_dict()))
            loader.close()
            state[part][key] = 2**64 - 1
            try:
                ad.merge_states([state])
            except ValueError as error:
                print(error)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all("past the items any source has" in line for line in lines), lines


def test_a_state_without_its_sources_identity_is_refused_not_checked_less(tmp_path):
    table = pa.Table.from_batches(_table(0, 100).select(["id"]).to_batches(max_chunksize=30))
    other = pa.table({"id": np.arange(100, 200, dtype=np.int32)})
    state = json.loads(json.dumps(_state_after(table, 3, batch_size=10)))
    for removed in (lambda s: s["settings"]["source"].pop("schema"),
                    lambda s: s["settings"]["source"].__setitem__("schema", None)):
        edited = json.loads(json.dumps(state))
        removed(edited)
        with pytest.raises(ValueError, match="cannot resume from the state"):
            ad.batches(other, 10, state=edited)
    stream = str(tmp_path / "ids.arrows")
    with ipc.new_stream(stream, table.schema) as writer:
        writer.write_table(table)
    saved = json.loads(json.dumps(_state_after(stream, 3, batch_size=10)))
    del saved["settings"]["source"]["files"][0]["modified_ns"]
    with pytest.raises(ValueError, match="modified_ns"):
        ad.batches(stream, 10, state=saved)


def test_a_local_files_time_is_compared_whatever_object_keys_a_state_adds(tmp_path):
    # An e_tag or last_modified_ms added to a local file's entry made it compared as an object,
    # by size and footer alone: a file rewritten with other values of the same shape resumed.
    import copy
    import time

    path = str(tmp_path / "ident.arrow")

    def write(offset):
        table = pa.table({"id": np.arange(1000) + offset})
        with ipc.new_file(path, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=200):
                writer.write_batch(batch)

    write(0)
    state = _state_after(path, 1, batch_size=64)
    time.sleep(0.01)
    write(5000)
    for edit in ({}, {"e_tag": "x"}, {"last_modified_ms": 5}):
        edited = copy.deepcopy(state)
        edited["settings"]["source"]["files"][0].update(edit)
        with pytest.raises(ValueError, match="modified_ns saved"):
            ad.batches(path, 64, state=edited)


def test_another_ranks_state_is_refused_naming_the_remedy_that_helps():
    # Rank 0's state given to rank 1 (a checkpoint saved on rank 0 alone): the message sent the
    # user to merge_states, which needs every rank's state.
    table = pa.Table.from_batches(_table(0, 100).select(["id"]).to_batches(max_chunksize=25))
    state = _state_after(table, 1, batch_size=10, rank=0, world_size=2)
    with pytest.raises(ValueError, match=r"shard 0 of 2; this loader is shard 1 of 2 \(each shard resumes from its own state: give shard 1 the state it saved \(under DDP, save the loader's state on every rank\)\)"):
        ad.batches(table, 10, rank=1, world_size=2, state=state)
    with pytest.raises(ValueError, match=r"shard 0 of 2; this loader is shard 0 of 3 \(to resume with another number of shards, merge"):
        ad.batches(table, 10, rank=0, world_size=3, state=state)
