"""``ad.batches(..., sequences=...)``: list columns as padded, packed and jagged batches, token
budgets and length buckets, checked against numpy, torch and transformers' collator."""

import pathlib

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import torch

import arrow_dlpack as ad


def _rows(count, seed=0, longest=9):
    """``count`` token rows of 0..longest tokens, some empty."""
    rng = np.random.default_rng(seed)
    return [
        rng.integers(1, 30_000, size=int(n), dtype=np.int32).tolist()
        for n in rng.integers(0, longest + 1, size=count)
    ]


def _table(rows, large=False, chunk=None):
    kind = pa.large_list(pa.int32()) if large else pa.list_(pa.int32())
    table = pa.table(
        {"id": pa.array(np.arange(len(rows)), pa.int64()), "input_ids": pa.array(rows, kind)}
    )
    if chunk is not None:
        table = pa.Table.from_batches(table.to_batches(max_chunksize=chunk))
    return table


@pytest.fixture(params=["memory", "parquet", "ipc"])
def source_of(request, tmp_path):
    """A function from a table to a source of its kind: the table, a Parquet file of row groups of
    7, an IPC file of record batches of 7."""

    def make(table):
        if request.param == "memory":
            return table
        if request.param == "parquet":
            path = tmp_path / "t.parquet"
            pq.write_table(table, path, row_group_size=7)
            return str(path)
        path = tmp_path / "t.arrow"
        feather.write_feather(table, path, compression="uncompressed", chunksize=7)
        return str(path)

    return make


def _unpad(batch, name="input_ids"):
    padded = np.from_dlpack(batch[name])
    lengths = np.from_dlpack(batch[name + "_lengths"])
    return [padded[i, : lengths[i]].tolist() for i in range(len(lengths))]


def _unpack(batch, name="input_ids", offsets="_cu_seqlens"):
    values = np.from_dlpack(batch[name])
    cu = np.from_dlpack(batch[name + offsets])
    return [values[a:b].tolist() for a, b in zip(cu[:-1], cu[1:])]


READ = {
    "pad": _unpad,
    "pack": _unpack,
    "jagged": lambda batch: _unpack(batch, offsets="_offsets"),
}


@pytest.mark.parametrize("mode", ["pad", "pack", "jagged"])
@pytest.mark.parametrize("large", [False, True])
def test_every_mode_gives_every_row_in_order(source_of, mode, large):
    rows = _rows(40)
    source = source_of(_table(rows, large))
    got_ids, got_rows = [], []
    for batch in ad.batches(source, 6, sequences={"input_ids": mode}):
        got_ids += np.from_dlpack(batch["id"]).tolist()
        got_rows += READ[mode](batch)
    assert got_ids == list(range(40))
    assert got_rows == rows


@pytest.mark.parametrize("mode", ["pad", "pack", "jagged"])
@pytest.mark.parametrize("kind", [pa.list_view(pa.int32()), pa.large_list_view(pa.int32())], ids=str)
def test_list_views_are_sequences_too(mode, kind):
    rows = _rows(30, seed=4)
    # pyarrow lays the views out in order; reversing the table's rows through `take` keeps the
    # values and moves the offsets, so rows no longer follow one another (the copying path).
    views = pa.array(rows, kind).take(pa.array(np.arange(29, -1, -1)))
    table = pa.table({"id": pa.array(np.arange(29, -1, -1), pa.int64()), "input_ids": views})
    got_ids, got_rows = [], []
    for batch in ad.batches(table, 7, sequences={"input_ids": mode}):
        got_ids += np.from_dlpack(batch["id"]).tolist()
        got_rows += READ[mode](batch)
    assert got_ids == list(range(29, -1, -1))
    assert got_rows == rows[::-1]


def test_padded_batches_match_numpy_and_lengths_are_int64():
    rows = _rows(10)
    (batch,) = ad.batches(
        _table(rows), 10, sequences={"input_ids": {"mode": "pad", "pad_value": -100}}
    )
    width = max(len(r) for r in rows)
    expected = np.full((10, width), -100, np.int32)
    for i, row in enumerate(rows):
        expected[i, : len(row)] = row
    np.testing.assert_array_equal(np.from_dlpack(batch["input_ids"]), expected)
    lengths = np.from_dlpack(batch["input_ids_lengths"])
    assert lengths.dtype == np.int64
    assert lengths.tolist() == [len(r) for r in rows]


def test_truncation_padding_side_and_multiple():
    rows = [[1, 2, 3, 4, 5], [6], []]
    options = {
        "mode": "pad",
        "max_length": 3,
        "pad_to_multiple_of": 4,
        "padding_side": "left",
        "truncation_side": "left",
    }
    (batch,) = ad.batches(_table(rows), 3, sequences={"input_ids": options})
    assert np.from_dlpack(batch["input_ids"]).tolist() == [
        [0, 3, 4, 5],
        [0, 0, 0, 6],
        [0, 0, 0, 0],
    ]
    assert np.from_dlpack(batch["input_ids_lengths"]).tolist() == [3, 1, 0]


@pytest.mark.parametrize("mode", ["pack", "jagged"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_packed_and_jagged_rows_are_cut_to_max_length(source_of, mode, side):
    # As a tokenizer's truncation=True: each row keeps at most max_length tokens, from the end
    # that truncation_side does not name, across record batches (chunks of 7) and shuffled.
    rows = _rows(30, seed=4, longest=12)
    source = source_of(_table(rows))
    options = {"mode": mode, "max_length": 4, "truncation_side": side}

    def cut(row):
        return row[:4] if side == "right" else row[max(len(row) - 4, 0) :]

    ordered = ad.batches(source, 8, sequences={"input_ids": options})
    got = [row for batch in ordered for row in READ[mode](batch)]
    assert got == [cut(row) for row in rows]
    shuffled = ad.batches(source, 8, shuffle=True, seed=1, columns=["id"], sequences={"input_ids": options})
    for batch in shuffled:
        ids = np.from_dlpack(batch["id"]).tolist()
        assert READ[mode](batch) == [cut(rows[i]) for i in ids]
        if mode == "pack":
            kept = [len(cut(rows[i])) for i in ids]
            assert int(np.from_dlpack(batch["input_ids_max_seqlen"])) == max(kept)


def test_packed_and_jagged_values_inside_one_record_batch_are_views():
    rows = _rows(20)
    table = _table(rows)
    child = table.column("input_ids").chunk(0).values
    start = child.buffers()[1].address
    for mode in ("pack", "jagged"):
        batches = list(ad.batches(table, 5, sequences={"input_ids": mode}))
        first_of_second = sum(len(r) for r in rows[:5])
        view = torch.from_dlpack(batches[1]["input_ids"])
        assert view.data_ptr() == start + 4 * first_of_second


def test_packed_batches_equal_transformers_collator():
    from transformers import DataCollatorWithFlattening

    rows = [row for row in _rows(64, seed=5) if row]
    collator = DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_tensors="pt")
    loader = ad.BatchDataset(_table(rows), 8, sequences={"input_ids": "pack"})
    for index, batch in enumerate(loader):
        expected = collator([{"input_ids": row} for row in rows[8 * index : 8 * index + 8]])
        assert torch.equal(batch["input_ids"].long(), expected["input_ids"][0])
        assert torch.equal(batch["input_ids_position_ids"], expected["position_ids"][0])
        assert torch.equal(batch["input_ids_cu_seqlens"], expected["cu_seq_lens_q"])
        assert int(batch["input_ids_max_seqlen"]) == expected["max_length_q"]


def test_jagged_batches_make_nested_tensors_of_the_rows():
    rows = [row for row in _rows(12, seed=2) if row]
    (batch,) = ad.BatchDataset(_table(rows), len(rows), sequences={"input_ids": "jagged"})
    nested = torch.nested.nested_tensor_from_jagged(
        batch["input_ids"], batch["input_ids_offsets"].long()
    )
    assert [t.tolist() for t in nested.unbind()] == rows


def test_batches_across_record_batches_and_shuffled_batches_hold_every_row(source_of):
    rows = _rows(50, seed=1)
    source = source_of(_table(rows, chunk=7))
    for mode in ("pad", "pack", "jagged"):
        seen = {}
        for batch in ad.batches(
            source, 8, shuffle=True, seed=4, buffer_size=16, sequences={"input_ids": mode}
        ):
            for row_id, row in zip(np.from_dlpack(batch["id"]).tolist(), READ[mode](batch)):
                assert row_id not in seen
                seen[row_id] = row
        assert seen == dict(enumerate(rows))


def test_null_rows_are_refused_unless_allowed_then_empty():
    table = pa.table({"input_ids": pa.array([[1, 2], None, [3]], pa.list_(pa.int32()))})
    with pytest.raises(ValueError, match="input_ids"):
        list(ad.batches(table, 3, sequences={"input_ids": "pad"}))
    (batch,) = ad.batches(table, 3, sequences={"input_ids": "pad"}, allow_nulls=True)
    assert _unpad(batch) == [[1, 2], [], [3]]


@pytest.mark.parametrize("mode", ["pad", "pack", "jagged"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_max_tokens_is_never_exceeded_and_no_row_is_lost(source_of, mode, shuffle):
    rows = _rows(200, seed=3, longest=30)
    source = source_of(_table(rows, chunk=7))
    seen = []
    loader = ad.batches(
        source,
        1000,
        sequences={"input_ids": mode},
        max_tokens=64,
        shuffle=shuffle,
        seed=1,
        buffer_size=50,
    )
    with pytest.raises(TypeError):
        len(loader)
    sizes = []
    for batch in loader:
        values = batch["input_ids"]
        tokens = values.shape[0] * values.shape[1] if mode == "pad" else values.shape[0]
        assert tokens <= 64
        sizes.append(len(np.from_dlpack(batch["id"])))
        seen += np.from_dlpack(batch["id"]).tolist()
    assert sorted(seen) == list(range(200))
    assert len(set(sizes)) > 1


def test_a_row_over_the_budget_is_an_error_unless_max_length_cuts_it():
    table = _table([[1] * 10, [2] * 3])
    with pytest.raises(ValueError, match="needs 10 tokens alone, more than max_tokens"):
        list(ad.batches(table, 8, sequences={"input_ids": "pack"}, max_tokens=5))
    got = list(
        ad.batches(
            table, 8, sequences={"input_ids": {"mode": "pad", "max_length": 5}}, max_tokens=5
        )
    )
    assert [len(np.from_dlpack(b["id"])) for b in got] == [1, 1]


def test_length_buckets_are_reproducible_exhaustive_and_pad_less():
    rows = _rows(2_000, seed=8, longest=200)
    table = _table(rows, chunk=100)

    def run(bucket, seed=6):
        ids, padding = [], 0
        for batch in ad.batches(
            table,
            32,
            shuffle=True,
            seed=seed,
            buffer_size=1_000,
            bucket_by_length=bucket,
            sequences={"input_ids": "pad"},
        ):
            ids.append(np.from_dlpack(batch["id"]).tolist())
            padded = batch["input_ids"]
            padding += padded.shape[0] * padded.shape[1] - int(
                np.from_dlpack(batch["input_ids_lengths"]).sum()
            )
        return ids, padding

    bucketed, bucketed_padding = run(True)
    assert run(True)[0] == bucketed
    assert run(True, seed=7)[0] != bucketed
    assert sorted(i for batch in bucketed for i in batch) == list(range(2_000))
    _, plain_padding = run(False)
    assert bucketed_padding * 4 <= plain_padding


def test_a_list_column_not_in_sequences_is_refused_with_a_hint():
    with pytest.raises(TypeError, match=r"sequences=\{\"input_ids\": \"pad\"\}"):
        list(ad.batches(_table(_rows(3)), 2))


def test_names_that_a_sequence_adds_may_not_clash():
    table = _table(_rows(3)).append_column("input_ids_lengths", pa.array([1, 2, 3]))
    with pytest.raises(ValueError, match="claimed twice"):
        list(ad.batches(table, 2, sequences={"input_ids": "pad"}))
    with pytest.raises(ValueError, match="claimed twice"):
        ad.batches(
            table, 2, columns=["input_ids_offsets"], sequences={"input_ids": "jagged"}
        )


@pytest.mark.parametrize(
    ("sequences", "error", "match"),
    [
        ("input_ids", TypeError, "sequences is str"),
        ({"input_ids": "padded"}, ValueError, "expected \"pad\", \"pack\", \"jagged\" or \"concat\""),
        ({"input_ids": {"mode": "pad", "pad": 1}}, TypeError, "unknown sequence key \"pad\""),
        ({"input_ids": {"pad_value": "x"}}, TypeError, "expected int, float or bool"),
        ({"input_ids": {"max_length": 0}}, ValueError, "max_length of sequence"),
        ({"input_ids": {"padding_side": "top"}}, ValueError, "expected \"left\" or \"right\""),
        ({"input_ids": {"mode": "pack", "pad_value": 1}}, ValueError, "mode \"pad\" only"),
        ({"input_ids": {"mode": "jagged", "pad_to_multiple_of": 8}}, ValueError, "mode \"pad\" only"),
        # Refused when given, even at its default value.
        ({"input_ids": {"mode": "pack", "pad_value": 0}}, ValueError, "is in mode \"pack\" and sets pad_value"),
        ({"input_ids": 3}, TypeError, "expected a mode"),
    ],
)
def test_bad_sequence_options_are_refused(sequences, error, match):
    with pytest.raises(error, match=match):
        ad.batches(_table(_rows(3)), 2, sequences=sequences)


def test_budgets_and_buckets_need_sequences():
    with pytest.raises(ValueError, match="sequences is empty"):
        ad.batches(pa.table({"x": [1.0]}), 2, max_tokens=4)
    with pytest.raises(ValueError, match="sequences is empty"):
        ad.batches(pa.table({"x": [1.0]}), 2, bucket_by_length=True)


def test_batch_dataset_gives_torch_tensors_for_every_mode():
    rows = _rows(20, seed=9)
    table = _table(rows).append_column("labels", pa.array(rows, pa.list_(pa.int32())))
    dataset = ad.BatchDataset(
        table,
        5,
        sequences={
            "input_ids": "pad",
            "labels": {"mode": "pad", "pad_value": -100},
        },
        shuffle=True,
        seed=2,
    )
    for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
        assert all(isinstance(t, torch.Tensor) for t in batch.values())
        assert batch["input_ids"].shape == batch["labels"].shape
        mask = batch["labels"] == -100
        lengths = batch["input_ids_lengths"]
        assert torch.equal((~mask).sum(1), lengths)


def test_the_example_of_the_loader_guide_prints_what_the_guide_says(tmp_path, monkeypatch, capsys):
    guide = pathlib.Path(__file__).resolve().parents[3] / "docs" / "loader.md"
    section = guide.read_text(encoding="utf-8").split("## Sequences", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    printed = section.split("```text\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(guide), "exec"), {})
    assert capsys.readouterr().out == printed


@pytest.mark.parametrize("sequences", [None, {"input_ids": "pack"}])
def test_a_shuffled_shard_without_record_batches_gives_no_batches(sequences):
    # One record batch and two shards: read from a reader, shard 1 gets nothing, and ends
    # without a batch (it used to panic looking up the columns of a record batch it never saw).
    # A table in memory is planned by rows instead, so that both ranks get as many batches: of
    # the one full batch, which two ranks cannot share, none (drop_last).
    table = pa.table({"input_ids": pa.array([[1, 2], [3], [4, 5, 6]], pa.list_(pa.int64()))})
    columns = ["input_ids"] if sequences else None
    if sequences is None:
        table = table.append_column("y", pa.array([0, 1, 2], pa.int64())).drop_columns(["input_ids"])
    for source, expected in ((table.to_reader, [1, 0]), (lambda: table, [0, 0])):
        seen = []
        for rank in range(2):
            batches = list(
                ad.batches(
                    source(),
                    batch_size=2,
                    columns=columns,
                    sequences=sequences,
                    shuffle=True,
                    seed=3,
                    rank=rank,
                    world_size=2,
                    drop_last=True,
                )
            )
            seen.append(len(batches))
        assert seen == expected
