"""Hugging Face ``datasets`` objects as sources of ``ad.batches`` and ``BatchDataset``: a
``Dataset`` read from its Arrow table (zero-copy without an indices mapping, in the mapping's
order with one: ``shuffle``, ``select``, ``filter``, ``train_test_split``), an
``IterableDataset`` as the stream of its batches, ``Array2D`` ... ``Array5D`` columns as
``(B, *shape)`` tensors, ``ClassLabel`` as its integer, ``Sequence`` columns for ``sequences=``;
a dict of splits refused naming them; resuming identified by the dataset's fingerprint. The
oracle is the dataset itself (its rows, read through ``datasets``)."""

import math
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch

import datasets
from datasets.features.features import Array2DExtensionType

import arrow_dlpack as ad

datasets.disable_progress_bars()

ROWS = 50


def _dataset(rows=ROWS):
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 7, rows)
    return datasets.Dataset.from_dict(
        {
            "id": list(range(rows)),
            "x": rng.standard_normal(rows).astype("float32").tolist(),
            "label": [i % 3 for i in range(rows)],
            "tokens": [list(range(i, i + n)) for i, n in enumerate(lengths)],
            "grid": [np.full((2, 3), i, dtype="float32") + np.arange(6).reshape(2, 3) for i in range(rows)],
        },
        features=datasets.Features(
            {
                "id": datasets.Value("int64"),
                "x": datasets.Value("float32"),
                "label": datasets.ClassLabel(names=["a", "b", "c"]),
                "tokens": datasets.Sequence(datasets.Value("int32")),
                "grid": datasets.Array2D((2, 3), "float32"),
            }
        ),
    )


@pytest.fixture(scope="module")
def ds():
    return _dataset()


def _column(batches, name):
    return np.concatenate([np.from_dlpack(batch[name]) for batch in batches])


def _ids(source, **options):
    return _column(ad.batches(source, 8, columns=["id"], **options), "id").tolist()


def test_a_dataset_gives_every_column_in_order(ds):
    batches = list(ad.batches(ds, 8, sequences={"tokens": "pad"}))
    rows = ds[:]
    np.testing.assert_array_equal(_column(batches, "id"), rows["id"])
    np.testing.assert_array_equal(_column(batches, "x"), np.array(rows["x"], dtype="float32"))
    # A ClassLabel is its integer.
    np.testing.assert_array_equal(_column(batches, "label"), rows["label"])
    # An Array2D column is a (B, 2, 3) tensor.
    grid = _column(batches, "grid")
    assert grid.shape == (ROWS, 2, 3) and grid.dtype == np.float32
    np.testing.assert_array_equal(grid, np.array(rows["grid"], dtype="float32"))
    # A Sequence column is a list column for sequences=.
    got = []
    for batch in batches:
        lengths = np.from_dlpack(batch["tokens_lengths"])
        got += [row[:n].tolist() for row, n in zip(np.from_dlpack(batch["tokens"]), lengths)]
    assert got == rows["tokens"]


def test_a_dataset_without_indices_is_read_without_a_copy(ds):
    batch = next(iter(ad.batches(ds, ROWS, columns=["id", "grid"])))
    column = ds.data.table.column("id").chunk(0)
    address = column.buffers()[1].address + column.offset * 8
    assert np.from_dlpack(batch["id"]).ctypes.data == address
    grid = ds.data.table.column("grid").chunk(0).storage.values.values
    assert np.from_dlpack(batch["grid"]).ctypes.data == grid.buffers()[1].address + grid.offset * 4


def test_len_is_known_with_and_without_an_indices_mapping(ds):
    assert len(ad.batches(ds, 8, columns=["id"])) == math.ceil(ROWS / 8)
    assert len(ad.batches(ds.select(range(0, ROWS, 3)), 4, columns=["id"])) == math.ceil(17 / 4)


@pytest.mark.parametrize(
    "make",
    [
        lambda ds: ds.shuffle(seed=0),
        lambda ds: ds.select([7, 3, 3, 49, 0, 12]),
        lambda ds: ds.filter(lambda row: row["id"] % 4 == 1),
        lambda ds: ds.train_test_split(test_size=0.3, seed=1)["train"],
        lambda ds: ds.train_test_split(test_size=0.3, seed=1)["test"],
        lambda ds: ds.shuffle(seed=2).select(range(10, 30)),
    ],
    ids=["shuffle", "select", "filter", "split-train", "split-test", "shuffle-select"],
)
def test_an_indices_mapping_gives_the_dataset_rows_in_its_order(ds, make, monkeypatch):
    derived = make(ds)
    assert derived._indices is not None
    # Small slices of the mapping, so that several record batches are taken.
    from arrow_dlpack import _hf

    monkeypatch.setattr(_hf, "SLICE_ROWS", 7)
    batches = list(ad.batches(derived, 4, columns=["id", "grid", "label"]))
    rows = derived[:]
    assert _column(batches, "id").tolist() == rows["id"]
    assert _column(batches, "label").tolist() == rows["label"]
    np.testing.assert_array_equal(_column(batches, "grid"), np.array(rows["grid"], dtype="float32"))
    assert len(ad.batches(derived, 4, columns=["id"])) == math.ceil(len(derived) / 4)


def test_our_shuffle_shuffles_on_top_of_the_dataset_order(ds):
    derived = ds.shuffle(seed=0)
    ours = _ids(derived, shuffle=True, seed=5, buffer_size=ROWS)
    assert sorted(ours) == list(range(ROWS))
    assert ours != derived["id"][:]
    assert ours == _ids(derived, shuffle=True, seed=5, buffer_size=ROWS)


def test_a_dataset_after_map_is_packed_as_the_dataset_says(ds):
    mapped = ds.map(
        lambda batch: {"input_ids": [[t * 2 for t in row] + [1] for row in batch["tokens"]]},
        batched=True,
    ).shuffle(seed=3)
    batches = list(ad.batches(mapped, 8, columns=[], sequences={"input_ids": "pack"}))
    expected = mapped["input_ids"][:]
    assert _column(batches, "input_ids").tolist() == [t for row in expected for t in row]
    first = batches[0]
    lengths = np.diff(np.from_dlpack(first["input_ids_cu_seqlens"]))
    assert lengths.tolist() == [len(row) for row in expected[:8]]


def test_a_cached_dataset_is_read_from_its_memory_map(ds, tmp_path):
    ds.save_to_disk(str(tmp_path / "saved"))
    loaded = datasets.load_from_disk(str(tmp_path / "saved"))
    assert loaded.cache_files
    batches = list(ad.batches(loaded, 16, columns=["id", "grid"]))
    assert _column(batches, "id").tolist() == list(range(ROWS))
    np.testing.assert_array_equal(_column(batches, "grid"), np.array(ds["grid"][:], dtype="float32"))
    assert _ids(loaded.shuffle(seed=4)) == loaded.shuffle(seed=4)["id"][:]


@pytest.mark.parametrize("ndim", [2, 3, 4, 5])
def test_array_features_of_every_rank_are_tensors_of_their_shape(ndim):
    shape = (2, 3, 1, 2, 2)[:ndim]
    feature = getattr(datasets, f"Array{ndim}D")(shape, "int16")
    values = [np.arange(np.prod(shape), dtype="int16").reshape(shape) + i for i in range(9)]
    dataset = datasets.Dataset.from_dict({"a": values}, features=datasets.Features({"a": feature}))
    for source in (dataset, dataset.select([8, 1, 4]), dataset.to_iterable_dataset()):
        got = _column(ad.batches(source, 4), "a")
        expected = np.array(source.with_format("numpy")["a"][:] if hasattr(source, "_indices") else values)
        assert got.shape == (len(expected), *shape) and got.dtype == np.int16
        np.testing.assert_array_equal(got, expected)


def _raw_array2d(rows):
    kind = Array2DExtensionType((2, 3), "float32")
    storage = pa.array(rows, type=kind.storage_type)
    table = pa.table({"m": pa.ExtensionArray.from_storage(kind, storage)})
    return datasets.Dataset(datasets.table.InMemoryTable(table))


def test_a_ragged_array_row_is_an_error_naming_it():
    good = [[1, 2, 3], [4, 5, 6]]
    dataset = _raw_array2d([good, good, [[1, 2], [3, 4, 5]], good])
    with pytest.raises(ValueError, match=r"row 2 of column 'm' is ragged.*expected 3 \(shape \(2, 3\)\)"):
        list(ad.batches(dataset, 2))
    dataset = _raw_array2d([good, [[1, 2, 3]], good])
    with pytest.raises(ValueError, match=r"row 1 of column 'm' is ragged.*1 items at depth 0; expected 2"):
        list(ad.batches(dataset, 2))
    # Rows are counted in the dataset, across its record batches and through its mapping.
    rows = [good] * 5 + [[[1, 2, 3], [4, 5]]] + [good] * 4
    dataset = datasets.concatenate_datasets([_raw_array2d(rows[:4]), _raw_array2d(rows[4:])])
    assert len(dataset.data.table.to_batches()) == 2
    with pytest.raises(ValueError, match=r"row 5 of column 'm' is ragged"):
        list(ad.batches(dataset, 2))
    with pytest.raises(ValueError, match=r"row 1 of column 'm' is ragged"):
        list(ad.batches(dataset.select([0, 5, 1]), 2))


@pytest.mark.parametrize("slice_rows", [1, 3, 4, 65_536])
def test_array_rows_are_checked_and_counted_across_the_slices_converted_at_once(monkeypatch, slice_rows):
    # The table is converted a slice at a time, whatever its record batches: rows are named
    # in the dataset, and the values are the same, in every slicing.
    from arrow_dlpack import _hf

    monkeypatch.setattr(_hf, "SLICE_ROWS", slice_rows)
    good = [[1, 2, 3], [4, 5, 6]]
    rows = [[[i, 2, 3], [4, 5, 6]] for i in range(5)] + [[[1, 2, 3], [4, 5]]] + [good] * 4
    dataset = datasets.concatenate_datasets([_raw_array2d(rows[:4]), _raw_array2d(rows[4:])])
    with pytest.raises(ValueError, match=r"row 5 of column 'm' is ragged: a list of 2 items at depth 1"):
        list(ad.batches(dataset, 2))
    nulls = datasets.concatenate_datasets(
        [_raw_array2d(rows[:4]), _raw_array2d([good, good, None, good])])
    with pytest.raises(ValueError, match=r"row 6 of column 'm' null"):
        list(ad.batches(nulls, 2))
    inner = datasets.concatenate_datasets(
        [_raw_array2d(rows[:4]), _raw_array2d([good, [[1, 2, 3], None]])])
    with pytest.raises(ValueError, match=r"row 5 of column 'm' holds a null"):
        list(ad.batches(inner, 2))
    fine = datasets.concatenate_datasets([_raw_array2d(rows[:5]), _raw_array2d([good] * 6)])
    got = np.concatenate([np.from_dlpack(b["m"]) for b in ad.batches(fine, 3)])
    np.testing.assert_array_equal(got, np.array(rows[:5] + [good] * 6, dtype="float32"))


def test_a_null_array_row_is_an_error_naming_it():
    dataset = datasets.Dataset.from_dict(
        {"m": [np.zeros((2, 3)), np.ones((2, 3)), None]},
        features=datasets.Features({"m": datasets.Array2D((2, 3), "float32")}),
    )
    with pytest.raises(ValueError, match=r"row 2 of column 'm' null"):
        list(ad.batches(dataset, 2))


def test_an_iterable_dataset_is_read_as_the_stream_of_its_batches(ds):
    iterable = ds.to_iterable_dataset(num_shards=3)
    batches = list(ad.batches(iterable, 8, sequences={"tokens": "jagged"}))
    rows = ds[:]
    assert _column(batches, "id").tolist() == rows["id"]
    np.testing.assert_array_equal(_column(batches, "grid"), np.array(rows["grid"], dtype="float32"))
    assert _column(batches, "tokens").tolist() == [t for row in rows["tokens"] for t in row]
    # Its length is not known: it is a stream.
    with pytest.raises(TypeError):
        len(ad.batches(iterable, 8, columns=["id"]))
    # A generator-backed IterableDataset, mapped.
    def rows_of():
        for i in range(11):
            yield {"id": i, "text": "x" * i}

    generated = datasets.IterableDataset.from_generator(rows_of).map(lambda r: {"n": len(r["text"])})
    got = list(ad.batches(generated, 4, columns=["id", "n"]))
    assert _column(got, "n").tolist() == list(range(11))


@pytest.mark.parametrize("iterable", [False, True])
def test_a_dict_of_splits_is_refused_naming_them(ds, iterable):
    splits = datasets.DatasetDict({"train": ds, "validation": ds.select([0])})
    if iterable:
        splits = datasets.IterableDatasetDict({k: v.to_iterable_dataset() for k, v in splits.items()})
    kind = "IterableDatasetDict" if iterable else "DatasetDict"
    article = "an" if kind.startswith("I") else "a"
    message = rf"{article} {kind} holds the splits 'train', 'validation'; pass one of them, ds\['train'\]"
    with pytest.raises(TypeError, match=message):
        ad.batches(splits, 8, columns=["id"])
    with pytest.raises(TypeError, match=message):
        ad.BatchDataset(splits, 8, columns=["id"])


def test_a_variable_array_dimension_is_refused():
    dataset = datasets.Dataset.from_dict(
        {"m": [np.zeros((1, 3)), np.zeros((2, 3))]},
        features=datasets.Features({"m": datasets.Array2D((None, 3), "float32")}),
    )
    with pytest.raises(TypeError, match=r"column 'm' is an array feature of shape \(None, 3\)"):
        ad.batches(dataset, 2)


def test_a_dataset_resumes_and_a_state_of_another_dataset_is_refused(ds):
    derived = ds.shuffle(seed=0)
    whole = _ids(derived)
    loader = ad.batches(derived, 8, columns=["id"])
    first = [np.from_dlpack(next(loader)["id"]).tolist() for _ in range(3)]
    state = loader.state_dict()
    rest = _column(ad.batches(derived, 8, columns=["id"], state=state), "id").tolist()
    assert sum(first, []) + rest == whole
    # The fingerprint of another order is part of the stream's schema, which the state records.
    with pytest.raises(ValueError, match="source.schema"):
        ad.batches(ds.shuffle(seed=1), 8, columns=["id"], state=state)


def test_batch_dataset_takes_a_dataset(ds):
    derived = ds.filter(lambda row: row["id"] % 2 == 0)
    dataset = ad.BatchDataset(derived, 4, columns=["id", "grid"])
    assert len(dataset) == math.ceil(len(derived) / 4)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None)
    got = [batch for batch in loader]
    assert torch.cat([b["id"] for b in got]).tolist() == derived["id"][:]
    assert got[0]["grid"].shape == (4, 2, 3)


def test_datasets_is_not_imported_unless_a_dataset_is_passed():
    code = (
        "import sys, pyarrow as pa, arrow_dlpack as ad\n"
        "list(ad.batches(pa.table({'x': [1, 2, 3]}), 2))\n"
        "assert 'datasets' not in sys.modules, 'datasets imported'\n"
        "assert 'arrow_dlpack._hf' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


CORRUPT_CHILD = """
import sys, numpy as np, pyarrow as pa, datasets
import arrow_dlpack as ad
from datasets.features.features import Array2DExtensionType
shift, path = int(sys.argv[1]), sys.argv[2]
inner_offsets = np.arange(0, 25, 3).astype(np.int32)
inner = pa.ListArray.from_arrays(pa.array(inner_offsets), pa.array(np.arange(24, dtype=np.float32)))
outer = pa.ListArray.from_arrays(pa.array(np.arange(0, 9, 2).astype(np.int32)), inner)
table = pa.table({"a": pa.ExtensionArray.from_storage(Array2DExtensionType((2, 3), "float32"), outer)})
with pa.ipc.new_stream(path, table.schema) as writer:
    writer.write_table(table)
raw = bytearray(open(path, "rb").read())
at = raw.find(inner_offsets.tobytes())
raw[at:at + inner_offsets.nbytes] = (inner_offsets + shift).tobytes()
open(path, "wb").write(bytes(raw))
dataset = datasets.Dataset.from_file(path)
for source in (dataset, dataset.to_iterable_dataset()):
    try:
        list(ad.batches(source, 2))
        print("accepted")
    except ValueError as error:
        print("refused:", str(error).replace("\\n", " "))
"""


@pytest.mark.parametrize("shift", [6, 10**8])
def test_a_cache_file_with_corrupt_offsets_is_a_value_error_not_an_abort(tmp_path, shift):
    # datasets maps its cache files without validating them, and Arrow's kernels trust their
    # input: the column is validated before they run (a child process, in case it aborts).
    done = subprocess.run(
        [sys.executable, "-c", CORRUPT_CHILD, str(shift), str(tmp_path / "data-00000-of-00001.arrow")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("refused:") and "column 'a'" in line for line in lines), lines


def test_an_array_feature_of_a_zero_size_dimension_is_refused_not_read_as_no_rows():
    feature = datasets.Array2D((0, 3), "float32")
    dataset = datasets.Dataset.from_dict(
        {"a": [np.zeros((0, 3), "float32")] * 5}, features=datasets.Features({"a": feature}))
    for source in (dataset, dataset.to_iterable_dataset()):
        with pytest.raises(TypeError, match=r"shape \(0, 3\), which holds no values"):
            list(ad.batches(source, 2))


def test_a_dataset_with_a_transform_is_refused_and_one_with_a_format_is_read():
    # The transform runs on what indexing returns; the loader read the table beneath it and
    # gave the untransformed values, silently.
    ds = datasets.Dataset.from_dict({"x": [1.0, 2.0, 3.0, 4.0], "label": [0, 1, 0, 1]})
    transformed = ds.with_transform(lambda rows: {"x": [v * 10 for v in rows["x"]], "label": rows["label"]})
    assert transformed[:4]["x"] == [10.0, 20.0, 30.0, 40.0]
    for make in (ad.batches, ad.BatchDataset):
        with pytest.raises(ValueError, match=r"the Dataset has a transform .* ds\.map\(fn, batched=True\)"):
            make(transformed, 4)
    # Its remedies: the transform written by map(), or the format reset.
    mapped = ds.map(lambda rows: {"x": [v * 10 for v in rows["x"]]}, batched=True)
    assert next(iter(ad.BatchDataset(mapped, 4, columns=["x"])))["x"].tolist() == [10.0, 20.0, 30.0, 40.0]
    assert next(iter(ad.BatchDataset(transformed.with_format(None), 4, columns=["x"])))["x"].tolist() == [1.0, 2.0, 3.0, 4.0]
    # A format changes only what indexing returns: read through.
    assert next(iter(ad.BatchDataset(ds.with_format("torch"), 4, columns=["x"])))["x"].tolist() == [1.0, 2.0, 3.0, 4.0]
