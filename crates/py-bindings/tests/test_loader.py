"""``ad.batches`` and ``ad.BatchDataset``: Arrow data to exact-size batches of tensors.

pyarrow decides what the rows are (the oracle is always the concatenated table), and the batches
are read back through the real consumers: ``np.from_dlpack``, ``torch.from_dlpack`` and
``jnp.from_dlpack``.
"""

import errno
import gc
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import torch

import arrow_dlpack as ad

# Record batches of odd sizes, so that batches of 4 rows straddle their boundaries.
CHUNK_SIZES = [7, 3, 11, 1, 13]
ROWS = sum(CHUNK_SIZES)


def _table(nulls=False):
    batches = []
    start = 0
    for size in CHUNK_SIZES:
        ids = np.arange(start, start + size, dtype=np.int64)
        x = pa.array(ids.astype(np.float32) / 2)
        if nulls and start == 7:
            x = pa.array([None] + list(ids[1:].astype(np.float32) / 2), type=pa.float32())
        cells = pa.array(
            [[float(i), -float(i)] for i in ids], type=pa.list_(pa.float32(), 2)
        )
        image = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [2]), cells)
        batches.append(
            pa.record_batch(
                {
                    "id": pa.array(ids),
                    "x": x,
                    "small": pa.array((ids % 100).astype(np.int16)),
                    "flag": pa.array(ids % 3 == 0),
                    "image": image,
                }
            )
        )
        start += size
    return pa.Table.from_batches(batches)


def _ids(batches):
    return [int(i) for batch in batches for i in np.from_dlpack(batch["id"])]


@pytest.fixture(scope="module")
def table():
    return _table()


@pytest.fixture(scope="module")
def files(tmp_path_factory, table):
    root = tmp_path_factory.mktemp("loader")
    paths = {}
    paths["ipc"] = root / "table.arrow"
    feather.write_feather(table, paths["ipc"], compression="uncompressed", chunksize=7)
    paths["parquet"] = root / "table.parquet"
    pq.write_table(table, paths["parquet"], row_group_size=6)
    return paths


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4, 7, ROWS, ROWS + 5])
def test_batches_have_exactly_batch_size_rows_across_record_batches(table, batch_size, drop_last):
    got = list(ad.batches(table, batch_size, columns=["id", "x"], drop_last=drop_last))
    sizes = [batch["id"].shape[0] for batch in got]
    full, rest = divmod(ROWS, batch_size)
    assert sizes == [batch_size] * full + ([rest] if rest and not drop_last else [])
    expected = table.column("id").to_pylist()[: sum(sizes)]
    assert _ids(got) == expected
    np.testing.assert_array_equal(
        np.concatenate([np.from_dlpack(batch["x"]) for batch in got]) if got else [],
        table.column("x").to_numpy()[: sum(sizes)],
    )


@pytest.mark.parametrize("kind", ["table", "ipc", "parquet"])
def test_every_source_gives_the_same_rows(table, files, kind):
    source = table if kind == "table" else files[kind]
    got = list(ad.batches(source, 5, columns=["id", "x", "flag", "image"]))
    assert _ids(got) == list(range(ROWS))
    flags = np.concatenate([np.from_dlpack(batch["flag"]) for batch in got])
    np.testing.assert_array_equal(flags, table.column("flag").to_numpy())
    images = np.concatenate([np.from_dlpack(batch["image"]) for batch in got])
    assert images.shape == (ROWS, 2)
    np.testing.assert_array_equal(images, table.column("image").combine_chunks().to_numpy_ndarray())


def test_a_batch_inside_one_record_batch_is_a_zero_copy_view(table):
    first = next(iter(ad.batches(table, 4, columns=["id", "image"])))
    chunk = table.column("id").chunks[0]
    assert np.from_dlpack(first["id"]).ctypes.data == chunk.buffers()[1].address
    assert not first["id"].is_mutable
    image_chunk = table.column("image").chunks[0].storage.values
    assert np.from_dlpack(first["image"]).ctypes.data == image_chunk.buffers()[1].address


def test_a_batch_across_record_batches_is_one_fresh_writable_copy(table):
    iterator = ad.batches(table, 4, columns=["id"])
    next(iterator)
    second = next(iterator)  # rows 4..7: three from the first record batch, one from the second
    assert second["id"].is_mutable
    ranges = [
        (c.buffers()[1].address, c.buffers()[1].address + c.buffers()[1].size)
        for c in table.column("id").chunks
    ]
    address = np.from_dlpack(second["id"]).ctypes.data
    assert not any(start <= address < end for start, end in ranges)
    assert np.from_dlpack(second["id"]).tolist() == [4, 5, 6, 7]


def test_the_ipc_file_is_memory_mapped_and_viewed_zero_copy(files):
    size = os.path.getsize(files["ipc"])
    first = next(iter(ad.batches(files["ipc"], 4, columns=["id"])))
    address = np.from_dlpack(first["id"]).ctypes.data
    with open("/proc/self/maps") as maps:
        mapped = [line for line in maps if str(files["ipc"]) in line]
    spans = [tuple(int(part, 16) for part in line.split()[0].split("-")) for line in mapped]
    assert any(start <= address < end and end - start >= size - 4096 for start, end in spans)


def test_groups_are_promoted_as_from_arrow_promotes(table):
    group = {"features": ["x", "small"]}
    for row_major in [True, False]:
        got = list(ad.batches(table, 6, groups=group, columns=[], row_major=row_major))
        features = np.concatenate([np.from_dlpack(batch["features"]) for batch in got])
        expected = np.from_dlpack(
            ad.Tensor.from_arrow(table.select(["x", "small"]), row_major=row_major)
        )
        assert features.dtype == expected.dtype == np.float32
        np.testing.assert_array_equal(features, expected)
        layout = np.from_dlpack(got[0]["features"])
        assert layout.flags.c_contiguous is row_major
        assert layout.flags.f_contiguous is not row_major


def test_a_column_major_group_in_a_memory_mapped_file_is_a_strided_view(tmp_path):
    # Three float32 columns in record batches of 8 rows: in the IPC file each column's values
    # follow the previous one's at one distance, so a column-major group is a view of the map.
    rows = 24
    columns = {name: np.arange(rows, dtype=np.float32) + 100 * k for k, name in enumerate("abc")}
    table = pa.table({"id": np.arange(rows), **columns})
    path = tmp_path / "spaced.arrow"
    feather.write_feather(table, path, compression="uncompressed", chunksize=8)
    loader = ad.batches(path, 4, groups={"g": ["a", "b", "c"]}, columns=["a", "b"], row_major=False)
    batches = list(loader)
    expected = np.stack([columns[name] for name in "abc"], axis=1)
    np.testing.assert_array_equal(np.concatenate([np.from_dlpack(b["g"]) for b in batches]), expected)
    for batch in batches:
        group = np.from_dlpack(batch["g"])
        assert not batch["g"].is_mutable
        assert not group.flags.writeable
        assert group.shape == (4, 3) and group.strides[0] == 4
        # The first two columns of the group are the single columns' own memory.
        assert group[:, 0].ctypes.data == np.from_dlpack(batch["a"]).ctypes.data
        assert group[:, 1].ctypes.data == np.from_dlpack(batch["b"]).ctypes.data
        assert group.strides[1] == np.from_dlpack(batch["b"]).ctypes.data - group.ctypes.data
        # torch takes the strided view as it is.
        assert torch.from_dlpack(batch["g"]).data_ptr() == group.ctypes.data
    # A batch across record batches, a mixed group or row-major output is a fresh copy.
    across = list(ad.batches(path, 6, groups={"g": ["a", "b", "c"]}, columns=[], row_major=False))
    assert across[1]["g"].is_mutable and np.from_dlpack(across[1]["g"]).flags.f_contiguous
    mixed = next(iter(ad.batches(path, 4, groups={"g": ["a", "id"]}, columns=[], row_major=False)))
    assert mixed["g"].is_mutable
    row_major = next(iter(ad.batches(path, 4, groups={"g": ["a", "b", "c"]}, columns=[])))
    assert row_major["g"].is_mutable and np.from_dlpack(row_major["g"]).flags.c_contiguous


def test_all_columns_are_loaded_when_none_are_named(table):
    first = next(iter(ad.batches(table, 2)))
    assert list(first) == ["id", "x", "small", "flag", "image"]


def test_nulls_are_refused_at_the_batch_that_holds_them():
    # A reader says nothing of its nulls before it is read (a table's are refused when the
    # loader is made: test_loader_messages.py).
    table = _table(nulls=True)
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    iterator = ad.batches(reader, 7, columns=["x"])
    first = next(iterator)  # rows 0..6: no nulls
    assert first["x"].shape == (7,)
    with pytest.raises(ValueError, match="null"):
        next(iterator)
    # The iteration ended with the error: next() ends it, and a new pass is refused.
    with pytest.raises(StopIteration):
        next(iterator)
    with pytest.raises(ValueError, match="this loader ended with an error, and a loader is iterated once"):
        list(iterator)


def test_nulls_allowed_with_masks_or_as_nan():
    table = _table(nulls=True)
    batch = next(iter(ad.batches(table, ROWS, columns=["x"], masks=["x"], allow_nulls=True)))
    mask = np.from_dlpack(batch["x_mask"])
    np.testing.assert_array_equal(mask, table.column("x").is_valid().to_numpy())
    nan = next(iter(ad.batches(table, ROWS, groups={"x": ["x"]}, columns=[], null_to_nan=True)))
    values = np.from_dlpack(nan["x"])[:, 0]
    assert np.isnan(values[7]) and np.count_nonzero(np.isnan(values)) == 1


def test_consumers_take_the_batches(table, jax_x64):
    batch = next(iter(ad.batches(table, 8, columns=["id", "image"])))
    assert torch.from_dlpack(batch["image"]).shape == (8, 2)
    assert jnp.from_dlpack(batch["id"]).tolist() == list(range(8))
    assert np.from_dlpack(batch["id"]).tolist() == list(range(8))


def test_len_counts_batches_of_files_and_streams_have_none(table, files):
    assert len(ad.batches(files["parquet"], 4)) == -(-ROWS // 4)
    assert len(ad.batches(files["ipc"], 4, drop_last=True)) == ROWS // 4
    assert ad.batches(files["ipc"], 4).num_rows == ROWS
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    stream = ad.batches(reader, 4)
    with pytest.raises(TypeError, match="not known in advance"):
        len(stream)
    assert stream.num_rows is None and stream.num_batches is None


@pytest.mark.parametrize("kind", ["table", "ipc", "parquet"])
def test_shuffle_is_reproducible_with_a_seed_and_complete(table, files, kind):
    source = table if kind == "table" else files[kind]

    def order(seed):
        return _ids(ad.batches(source, 4, columns=["id", "x"], shuffle=True, seed=seed, buffer_size=8))

    first, again, other = order(7), order(7), order(8)
    assert first == again
    assert first != other
    assert sorted(first) == list(range(ROWS))
    assert first != list(range(ROWS))
    # The other columns stay with their rows.
    for batch in ad.batches(source, 4, columns=["id", "x"], shuffle=True, seed=3, buffer_size=8):
        np.testing.assert_array_equal(
            np.from_dlpack(batch["x"]), np.from_dlpack(batch["id"]).astype(np.float32) / 2
        )


@pytest.mark.parametrize("kind", ["ipc", "parquet"])
def test_ranks_read_disjoint_shares_that_cover_every_row(files, kind):
    shares = [
        _ids(ad.batches(files[kind], 3, columns=["id"], rank=rank, world_size=2))
        for rank in range(2)
    ]
    assert shares[0] and shares[1]
    assert not set(shares[0]) & set(shares[1])
    assert sorted(shares[0] + shares[1]) == list(range(ROWS))


def test_rank_without_world_size_is_refused(table):
    with pytest.raises(ValueError, match="rank and world_size"):
        ad.batches(table, 4, rank=0)
    with pytest.raises(ValueError, match="world_size"):
        ad.batches(table, 4, rank=2, world_size=2)


_DATALOADER = """
import sys
import torch
from torch.utils.data import DataLoader
import arrow_dlpack as ad

path, rank, world_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dataset = ad.BatchDataset(path, 3, columns=["id"], rank=rank, world_size=world_size)
ids = []
for batch in DataLoader(dataset, batch_size=None, num_workers=2):
    assert isinstance(batch["id"], torch.Tensor)
    ids.extend(batch["id"].tolist())
print(" ".join(map(str, ids)))
"""


@pytest.mark.parametrize("kind", ["ipc", "parquet"])
def test_dataloader_workers_and_ranks_read_every_row_exactly_once(files, kind):
    # Two ranks, each a DataLoader with two worker processes: four shards in all.
    ids = []
    for rank in range(2):
        result = subprocess.run(
            [sys.executable, "-c", _DATALOADER, str(files[kind]), str(rank), "2"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        ids.extend(int(i) for i in result.stdout.split())
    assert sorted(ids) == list(range(ROWS))


def _threads():
    return len(os.listdir("/proc/self/task"))


def test_breaking_out_stops_the_threads_and_releases_the_source(files):
    gc.collect()
    before = _threads()
    for _ in range(5):
        for batch in ad.batches(files["parquet"], 2, prefetch=1):
            break
        del batch
    gc.collect()
    assert _threads() == before


def test_close_releases_a_stream_source_exactly_once():
    import _arrow_c_ctypes as ac

    def chunk(start):
        return ac.Array(5, [None], children=[ac.int32_array(list(range(start, start + 5)))])

    strays = len(ac.STRAY_RELEASES)
    schema = ac.Schema("+s", children=[ac.Schema("i", name="id")])
    stream = ac.Stream(schema, [chunk(0), chunk(5)])
    producer = ac.StreamProducer(stream)
    iterator = ad.batches(producer, 2)
    assert np.from_dlpack(next(iterator)["id"]).tolist() == [0, 1]
    iterator.close()
    with pytest.raises(ValueError, match="this loader was closed"):
        list(iterator)
    # next() of a loader closed before its last batch is an error too (a loop over it, closed
    # from another thread, must not end as if the epoch were whole); an ended one stops.
    with pytest.raises(ad.ArrowDLPackValueError, match="closed .* before its last batch"):
        next(iterator)
    fresh = ac.Schema("+s", children=[ac.Schema("i", name="id")])
    ended = ad.batches(ac.StreamProducer(ac.Stream(fresh, [chunk(0)])), 5)
    assert len(list(ended)) == 1
    ended.close()
    with pytest.raises(StopIteration):
        next(ended)
    assert stream.released == 1
    del iterator, producer
    gc.collect()
    assert stream.released == 1
    assert len(ac.STRAY_RELEASES) == strays


def test_a_truncated_parquet_file_is_a_clear_error(tmp_path, files):
    data = files["parquet"].read_bytes()
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated.parquet") as caught:
        list(ad.batches(truncated, 4))
    # The Rust error names the file and keeps the reader's reason as its cause; Python shows
    # both, each once.
    message = str(caught.value)
    assert message.startswith(f"cannot read parquet file {truncated}: "), message
    assert len(message) > len(f"cannot read parquet file {truncated}: ")


def test_a_missing_file_keeps_the_operating_systems_reason(tmp_path):
    missing = tmp_path / "missing.parquet"
    with pytest.raises(FileNotFoundError) as caught:
        ad.batches(missing, 4)
    # As open() raises it: errno, strerror and filename set, the reason in the system's words.
    error = caught.value
    assert (error.errno, error.filename) == (errno.ENOENT, str(missing))
    assert error.strerror == f"cannot read {missing}: No such file or directory"
    assert str(error) == f"[Errno 2] cannot read {missing}: No such file or directory: '{missing}'"


def test_a_corrupt_ipc_file_is_a_clear_error(tmp_path, files):
    data = bytearray(files["ipc"].read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    corrupt = tmp_path / "corrupt.arrow"
    corrupt.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt.arrow"):
        list(ad.batches(corrupt, 4))


def test_missing_files_and_unknown_formats(tmp_path):
    # Not there: not found, whatever the extension (a missing directory has none).
    for missing in ("missing.parquet", "table.csv", "no_such_dir", "no_such_dir/"):
        with pytest.raises(FileNotFoundError):
            ad.batches(str(tmp_path / missing), 4)
    # A Parquet file named .arrow is read by its first bytes.
    pq.write_table(pa.table({"x": [1, 2, 3]}), tmp_path / "misnamed.arrow")
    assert [b["x"].tolist() for b in ad.batches(str(tmp_path / "misnamed.arrow"), 3)] == [[1, 2, 3]]
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="extension"):
        ad.batches(tmp_path / "table.csv", 4)
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        ad.batches(42, 4)


def test_a_non_numeric_column_is_a_type_error(tmp_path):
    table = pa.table({"name": ["a", "b"], "id": [1, 2]})
    with pytest.raises(TypeError, match="name"):
        list(ad.batches(table, 2, columns=["name"]))
    with pytest.raises(ValueError, match="nope"):
        list(ad.batches(table, 2, columns=["nope"]))


def test_progress_prints_rows_per_second(table, capsys):
    batches = list(ad.batches(table, 4, columns=["id"], progress=True))
    assert len(batches) == -(-ROWS // 4)
    err = capsys.readouterr().err
    assert f"{ROWS:,} rows" in err and "rows/s, done" in err


def test_duckdb_and_nanoarrow_streams_are_sources(table):
    import duckdb
    import nanoarrow

    ids = table.select(["id", "x"])
    relation = duckdb.sql("select * from ids order by id")
    assert _ids(ad.batches(relation, 6)) == list(range(ROWS))
    stream = nanoarrow.ArrayStream(ids)
    assert _ids(ad.batches(stream, 6)) == list(range(ROWS))


def test_polars_and_record_batch_readers_are_sources(table):
    import polars as pl

    frame = pl.from_arrow(table.select(["id", "x"]))
    assert _ids(ad.batches(frame, 6)) == list(range(ROWS))
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    assert _ids(ad.batches(reader, 6, columns=["id"])) == list(range(ROWS))


_RAY = """
import numpy as np
import pyarrow as pa
import ray
import arrow_dlpack as ad

ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
table = pa.table({"id": np.arange(100), "x": np.arange(100, dtype=np.float32)})
dataset = ray.data.from_arrow(table)
ids = []
# The user's loop is unchanged: Ray Data hands out pyarrow tables, ad.batches cuts them.
for block in dataset.iter_batches(batch_size=32, batch_format="pyarrow"):
    for batch in ad.batches(block, 8, groups={"features": ["x"]}, columns=["id"]):
        assert batch["features"].shape[1] == 1
        ids.extend(np.from_dlpack(batch["id"]).tolist())
ray.shutdown()
print(sorted(ids) == list(range(100)))
"""


def test_the_same_batching_runs_inside_ray_data():
    result = subprocess.run(
        [sys.executable, "-c", _RAY], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().splitlines()[-1] == "True"
