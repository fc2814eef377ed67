"""``ad.batches`` over the files and objects users have: IPC files and streams compressed as
pyarrow and polars write them (LZ4, pyarrow's Feather default, and ZSTD), ``.arrow`` streams (what
Hugging Face ``datasets`` saves), local directories and globs, lists of record batches or tables,
pandas DataFrames; and ``null_to_nan``, which changes no column without nulls.

Every file is written here by the library named; every batch is compared with the rows pyarrow
reads back from the same file.
"""

import errno
import os

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import arrow_dlpack as ad

ROWS = 1000


def _table(start=0, rows=ROWS):
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "x": (ids * 0.5).astype(np.float32),
            # Long runs, so that compression shrinks the buffers.
            "label": (ids // 100).astype(np.int64),
        }
    )


def _ids(source, batch_size=128, **options):
    """Every `id` the loader gives, and the dtypes of the tensors of its first batch."""
    ids, dtypes = [], None
    for batch in ad.batches(source, batch_size, columns=["id", "x", "label"], **options):
        arrays = {name: np.from_dlpack(tensor) for name, tensor in batch.items()}
        dtypes = dtypes or {name: array.dtype for name, array in arrays.items()}
        np.testing.assert_array_equal(arrays["x"], (arrays["id"] * 0.5).astype(np.float32))
        np.testing.assert_array_equal(arrays["label"], arrays["id"] // 100)
        ids.extend(arrays["id"].tolist())
    return ids, dtypes


def _write_ipc(path, table, compression, stream=False, chunk=300):
    options = pa.ipc.IpcWriteOptions(compression=compression)
    open_writer = pa.ipc.new_stream if stream else pa.ipc.new_file
    with open_writer(path, table.schema, options=options) as writer:
        for batch in table.to_batches(max_chunksize=chunk):
            writer.write_batch(batch)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_compressed_ipc_written_by_pyarrow_loads(tmp_path, compression, stream):
    path = tmp_path / ("t.arrows" if stream else "t.arrow")
    _write_ipc(path, _table(), compression, stream)
    # The file's buffers are compressed: it is smaller than the same rows uncompressed.
    plain = tmp_path / "plain.arrow"
    _write_ipc(plain, _table(), None, stream)
    assert path.stat().st_size < plain.stat().st_size
    ids, dtypes = _ids(path)
    assert ids == list(range(ROWS))
    assert dtypes == {"id": np.int64, "x": np.float32, "label": np.int64}
    shuffled, _ = _ids(path, shuffle=True, seed=1)
    assert sorted(shuffled) == list(range(ROWS)) and shuffled != list(range(ROWS))


def test_feather_with_pyarrows_default_compression_loads(tmp_path):
    path = tmp_path / "t.feather"
    feather.write_feather(_table(), path, chunksize=250)
    with pa.ipc.open_file(path) as reader:
        # pyarrow's default: LZ4 frames, which the loader decompresses into fresh memory.
        assert reader.get_batch(0).num_rows == 250
    assert _ids(path)[0] == list(range(ROWS))
    # The batches of a compressed file are fresh memory, not views of the file.
    batch = next(iter(ad.batches(path, 100, columns=["id"])))
    assert np.from_dlpack(batch["id"]).tolist() == list(range(100))


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compressed_ipc_written_by_polars_loads(tmp_path, compression):
    frame = pl.from_arrow(_table())
    file_path, stream_path = tmp_path / "p.arrow", tmp_path / "p.arrows"
    frame.write_ipc(file_path, compression=compression)
    frame.write_ipc_stream(stream_path, compression=compression)
    assert _ids(file_path)[0] == list(range(ROWS))
    assert _ids(stream_path)[0] == list(range(ROWS))


def test_the_first_bytes_tell_a_stream_from_a_file_whatever_the_extension(tmp_path):
    stream = tmp_path / "named-as-a-file.arrow"
    _write_ipc(stream, _table(), "zstd", stream=True)
    file = tmp_path / "named-as-a-stream.arrows"
    _write_ipc(file, _table(ROWS), None)
    assert _ids(stream)[0] == list(range(ROWS))
    assert _ids(file)[0] == list(range(ROWS, 2 * ROWS))
    with pytest.raises(ValueError, match="expected files of one format"):
        ad.batches([stream, file], 10)


def test_a_file_named_without_a_known_extension_is_told_by_its_first_bytes(tmp_path):
    parquet = tmp_path / "train-data"
    pq.write_table(_table(), parquet)
    stream = tmp_path / "cache.bin"
    _write_ipc(stream, _table(ROWS), None, stream=True)
    assert _ids(parquet)[0] == list(range(ROWS))
    assert _ids(stream)[0] == list(range(ROWS, 2 * ROWS))
    text = tmp_path / "notes.txt"
    text.write_text("id,value\n1,2\n")
    with pytest.raises(ad.ArrowDLPackValueError, match="from its extension or its first bytes"):
        ad.batches(text, 10)


def test_a_fifo_is_refused_not_opened(tmp_path):
    # Opening a FIFO blocks until a writer comes; the loader reads a file's first bytes (and a
    # Parquet file's footer) when it is made.
    for name in ("data", "x.arrow", "x.parquet"):
        os.mkfifo(tmp_path / name)
        with pytest.raises(OSError, match="not a regular file") as raised:
            ad.batches(tmp_path / name, 10)
        # Its attributes as open() sets them: an errno (EINVAL) and the path.
        assert raised.value.errno == errno.EINVAL
        assert raised.value.filename == str(tmp_path / name)
    # An error of the operating system keeps its errno: a symbolic-link loop's ELOOP.
    os.symlink("loop.parquet", tmp_path / "loop.parquet")
    with pytest.raises(OSError) as raised:
        ad.batches(tmp_path / "loop.parquet", 10)
    assert raised.value.errno == errno.ELOOP
    assert raised.value.filename == str(tmp_path / "loop.parquet")


def test_a_truncated_ipc_file_says_so(tmp_path):
    path = tmp_path / "cut"
    path.write_bytes(b"ARROW1\0\0")
    with pytest.raises(ad.ArrowDLPackValueError, match="starts with ARROW1 but is too short"):
        ad.batches(path, 10)


def test_a_dataset_saved_by_hugging_face_datasets_loads_from_its_folder(tmp_path):
    import datasets

    table = _table()
    saved = datasets.Dataset(table)
    saved.save_to_disk(str(tmp_path / "saved"), num_shards=2)
    files = sorted(p.name for p in (tmp_path / "saved").iterdir())
    # Two `.arrow` streams beside JSON files that the loader leaves out.
    assert [name for name in files if name.endswith(".arrow")] == [
        "data-00000-of-00002.arrow",
        "data-00001-of-00002.arrow",
    ]
    assert any(name.endswith(".json") for name in files)
    assert _ids(tmp_path / "saved")[0] == list(range(ROWS))
    # The streams' record-batch headers say their rows: len() is known, as for files, and
    # counts down; BatchDataset (so a DataLoader, tqdm) has a length too.
    loader = ad.batches(str(tmp_path / "saved"), 64)
    assert (len(loader), loader.num_rows) == (-(-ROWS // 64), ROWS)
    next(loader)
    assert len(loader) == -(-ROWS // 64) - 1
    assert len(ad.BatchDataset(str(tmp_path / "saved"), 64, drop_last=True)) == ROWS // 64


def test_a_saved_folder_reads_the_files_its_state_lists_not_the_caches_written_beside_them(tmp_path):
    import datasets

    datasets.disable_progress_bars()
    folder = tmp_path / "saved"
    datasets.Dataset(_table()).save_to_disk(str(folder))
    # A usual script: the saved dataset loaded and mapped, which caches the result in the
    # saved folder (as cache-<fingerprint>.arrow).
    loaded = datasets.load_from_disk(str(folder))
    mapped = loaded.map(lambda row: {"id": row["id"] + 10_000})
    loaded.filter(lambda row: row["id"] < 10)
    caches = [name for name in os.listdir(folder) if name.startswith("cache-")]
    assert caches and all(str(folder) in f["filename"] for f in mapped.cache_files)
    loader = ad.batches(str(folder), 64)
    assert len(loader) == -(-ROWS // 64)
    assert [i for b in loader for i in np.from_dlpack(b["id"]).tolist()] == list(range(ROWS))
    # A DatasetDict's folder holds one folder per split, which are not mixed: refused, naming
    # the splits; one split's folder reads.
    splits = datasets.DatasetDict({"train": datasets.Dataset(_table()), "test": datasets.Dataset(_table(0, 10))})
    splits.save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(ValueError, match=r"DatasetDict .*\(train, test\).*expected one split's folder"):
        ad.batches(str(tmp_path / "dict"), 64)
    assert _ids(tmp_path / "dict" / "test")[0] == list(range(10))
    # A state that names a file outside its folder is refused.
    state = folder / "state.json"
    state.write_text(state.read_text().replace("data-00000-of-00001.arrow", "../elsewhere.arrow"))
    with pytest.raises(ValueError, match="expected a file name in the folder"):
        ad.batches(str(folder), 64)


def _parts(root):
    """Parquet parts under `root` as Spark writes them, with files that a listing skips."""
    (root / "data" / "sub").mkdir(parents=True)
    for index, start in enumerate(range(0, ROWS, 250)):
        folder = root / "data" / ("sub" if index == 3 else "")
        pq.write_table(_table(start, 250), folder / f"part-{index}.parquet")
    (root / "data" / "_SUCCESS").write_bytes(b"")
    (root / "data" / ".part-0.parquet.crc").write_bytes(b"crc")
    (root / "data" / "README.md").write_text("not data")
    (root / "data" / "_temporary").mkdir()
    pq.write_table(_table(5000, 10), root / "data" / "_temporary" / "part-9.parquet")


def test_local_directories_and_globs_name_their_files_sorted(tmp_path):
    _parts(tmp_path)
    assert _ids(tmp_path / "data")[0] == list(range(ROWS))
    assert _ids(str(tmp_path / "data" / "**" / "*.parquet"))[0] == list(range(ROWS))
    assert _ids(str(tmp_path / "data" / "part-*.parquet"))[0] == list(range(750))
    assert _ids([str(tmp_path / "data" / "sub"), str(tmp_path / "data" / "part-[01].parquet")])[
        0
    ] == list(range(750, 1000)) + list(range(500))


def test_a_glob_or_directory_that_names_nothing_is_an_error_naming_it(tmp_path):
    _parts(tmp_path)
    pattern = str(tmp_path / "data" / "*.arrow")
    with pytest.raises(FileNotFoundError, match=r"\*\.arrow"):
        ad.batches(pattern, 10)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        ad.batches(tmp_path / "empty", 10)
    # Said of the list, not of paths: it may have been a list of record batches.
    with pytest.raises(ValueError, match="the source is an empty list; expected paths, record batches"):
        ad.batches([], 10)


def test_lists_of_record_batches_and_tables_load(tmp_path):
    table = _table()
    batches = table.to_batches(max_chunksize=300)
    assert len(batches) == 4
    assert _ids(batches)[0] == list(range(ROWS))
    assert _ids([table.slice(0, 500), table.slice(500)])[0] == list(range(ROWS))
    assert _ids(tuple(batches))[0] == list(range(ROWS))


def test_pandas_data_frames_load_alone_and_in_lists():
    frame = _table().to_pandas()
    assert hasattr(frame, "__arrow_c_stream__")
    ids, dtypes = _ids(frame)
    assert ids == list(range(ROWS))
    assert dtypes == {"id": np.int64, "x": np.float32, "label": np.int64}
    halves = [frame.iloc[:600].reset_index(drop=True), frame.iloc[600:].reset_index(drop=True)]
    assert _ids(halves)[0] == list(range(ROWS))
    # A filtered frame's index (the rows' old positions) is not a column of the batches.
    filtered = frame[frame["id"] % 2 == 1]
    batch = next(iter(ad.batches(filtered, 10)))
    assert sorted(batch) == ["id", "label", "x"]
    assert np.from_dlpack(batch["id"]).tolist() == list(range(1, 20, 2))


def test_a_pandas_nan_stays_nan_and_pandas_na_stays_null():
    frame = pd.DataFrame({
        "x": np.array([1.0, np.nan, 3.0], np.float32),
        "y": pd.array([1.5, None, 2.5], dtype="Float64"),
        "n": pd.array([1, None, 3], dtype="Int64"),
    })
    # numpy's NaN is a value: loaded as it is, without null_to_nan.
    [batch] = ad.batches(frame, 3, columns=["x"])
    x = np.from_dlpack(batch["x"])
    assert x.dtype == np.float32 and np.array_equal(x, [1.0, np.nan, 3.0], equal_nan=True)
    # pandas' missing values are nulls: refused, or NaN with null_to_nan.
    with pytest.raises(ValueError, match="null"):
        list(ad.batches(frame, 3, columns=["y"]))
    [batch] = ad.batches(frame, 3, columns=["y", "n"], null_to_nan=True)
    assert np.array_equal(np.from_dlpack(batch["y"]), [1.5, np.nan, 2.5], equal_nan=True)
    assert np.array_equal(np.from_dlpack(batch["n"]), [1.0, np.nan, 3.0], equal_nan=True)


def test_a_pandas_frame_pyarrow_cannot_convert_is_this_packages_value_error():
    frame = pd.DataFrame([[1.0, 2.0, 3.0]], columns=["a", "a", "b"])
    with pytest.raises(ad.ArrowDLPackValueError, match=r"cannot read the pandas DataFrame: .*[Dd]uplicate"):
        ad.batches(frame, 1, columns=["b"])


def test_a_polars_lazy_frame_is_refused_with_what_to_do():
    lazy = pl.from_arrow(_table()).lazy()
    with pytest.raises(TypeError, match=r"\.collect\(\)"):
        ad.batches(lazy, 10)
    with pytest.raises(TypeError, match=r"\.collect\(\)"):
        ad.batches([lazy], 10)
    assert _ids(lazy.collect())[0] == list(range(ROWS))


def _with_nulls(start=0, rows=ROWS):
    """`label` without nulls, `count` (int32) with one null in its second half, `x` (float)
    with nulls, all nullable fields."""
    ids = np.arange(start, start + rows, dtype=np.int64)
    count = pa.array([None if i == start + rows - 1 else int(i) for i in ids], pa.int32())
    x = pa.array([None if i % 10 == 3 else float(i) for i in ids], pa.float32())
    return pa.table({"label": ids, "count": count, "x": x})


def _nan_sources(tmp_path):
    table = _with_nulls()
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=100)
    _write_ipc(tmp_path / "t.arrow", table, None, chunk=100)
    _write_ipc(tmp_path / "s.arrows", table, "lz4", stream=True, chunk=100)
    return {
        "parquet": tmp_path / "t.parquet",
        "ipc file": tmp_path / "t.arrow",
        "ipc stream": tmp_path / "s.arrows",
        "table": table,
        "record batches": table.to_batches(max_chunksize=100),
        "pandas": table.to_pandas(),
    }


@pytest.mark.parametrize(
    "kind", ["parquet", "ipc file", "ipc stream", "table", "record batches", "pandas"]
)
def test_null_to_nan_changes_no_column_without_nulls(tmp_path, kind):
    source = _nan_sources(tmp_path)[kind]
    dtypes = set()
    labels, counts = [], []
    for batch in ad.batches(source, 64, null_to_nan=True, columns=["label", "count", "x"]):
        arrays = {name: np.from_dlpack(tensor) for name, tensor in batch.items()}
        dtypes.add(tuple((name, array.dtype.name) for name, array in sorted(arrays.items())))
        labels.extend(arrays["label"].tolist())
        counts.extend(arrays["count"].tolist())
        x = arrays["x"]
        expected = np.where(arrays["label"] % 10 == 3, np.nan, arrays["label"]).astype(np.float32)
        np.testing.assert_array_equal(x, expected)
    # One dtype per column in every batch: `label` (no nulls) stays int64, `count` (one null, in
    # the last batch only) is float64 from the first batch on, `x` stays float32.
    assert dtypes == {(("count", "float64"), ("label", "int64"), ("x", "float32"))}
    assert labels == list(range(ROWS))
    assert counts[:-1] == list(range(ROWS - 1)) and np.isnan(counts[-1])


def test_null_to_nan_takes_column_names(tmp_path):
    table = _with_nulls()
    batch = next(
        iter(ad.batches(table, ROWS, null_to_nan=["label", "count"], columns=["label", "count"]))
    )
    assert np.from_dlpack(batch["label"]).dtype == np.float64
    assert np.isnan(np.from_dlpack(batch["count"])[-1])
    # A column not named keeps its nulls refused.
    with pytest.raises(ValueError, match="null"):
        list(ad.batches(table, ROWS, null_to_nan=["label"], columns=["label", "count"]))
    with pytest.raises(ValueError, match="nope"):
        ad.batches(table, ROWS, null_to_nan=["nope"], columns=["label"])
    with pytest.raises(TypeError, match="null_to_nan"):
        ad.batches(table, ROWS, null_to_nan="label")


def test_a_batch_dataset_takes_a_pandas_frame_and_refuses_a_lazy_frame():
    frame = _table().to_pandas()
    dataset = ad.BatchDataset(frame, 100, columns=["id"])
    ids = [i for batch in dataset for i in np.from_dlpack(batch["id"]).tolist()]
    assert ids == list(range(ROWS))
    with pytest.raises(TypeError, match=r"\.collect\(\)"):
        ad.BatchDataset(pl.from_arrow(_table()).lazy(), 100)


def _stream_of(path, *batches):
    schema = pa.schema([("x", pa.int64())])
    with pa.ipc.new_stream(str(path), schema) as writer:
        for values in batches:
            writer.write_batch(pa.record_batch([pa.array(values, pa.int64())], schema=schema))


def test_a_stream_with_a_record_batch_of_no_rows_is_read(tmp_path):
    # A record batch without body bytes: arrow-rs's decoder would take the next message's bytes.
    path = tmp_path / "empty-batch.arrows"
    _stream_of(path, [1, 2, 3], [], [4, 5])
    loader = ad.batches(str(path), 2)
    assert len(loader) == 3
    assert [np.from_dlpack(b["x"]).tolist() for b in loader] == [[1, 2], [3, 4], [5]]


def test_a_local_stream_replaced_after_the_loader_read_its_headers_is_refused(tmp_path):
    # The second of two streams is replaced while the loader reads the first (with a prefetch
    # of one batch it cannot have opened the second yet): its rows were counted as they were.
    (tmp_path / "data").mkdir()
    first, second = tmp_path / "data" / "a.arrows", tmp_path / "data" / "b.arrows"
    _stream_of(first, list(range(5000)))
    _stream_of(second, list(range(300)))
    loader = ad.batches(str(tmp_path / "data"), 50, prefetch=1)
    assert len(loader) == 106
    next(loader)
    other = tmp_path / "other.arrows"
    _stream_of(other, list(range(500)))
    os.replace(other, second)
    with pytest.raises(ValueError, match="b.arrows changed after the loader read its metadata: another file has replaced it"):
        list(loader)


def test_two_streams_joined_into_one_file_are_refused_when_the_loader_is_made(tmp_path):
    first, second = tmp_path / "a.arrows", tmp_path / "b.arrows"
    _stream_of(first, [1, 2])
    _stream_of(second, [3])
    joined = tmp_path / "joined.arrows"
    # Each stream's end-of-stream marker dropped, as a careless `cat` of two streams keeps them.
    joined.write_bytes(first.read_bytes()[:-8] + second.read_bytes())
    with pytest.raises(ValueError, match="is a second schema message; expected one schema, first"):
        ad.batches(str(joined), 2)


def test_a_reader_read_by_an_earlier_loader_is_refused_not_read_as_empty():
    table = pa.table({"x": np.arange(10, dtype=np.int64)})

    def reader():
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=3))

    # Read to its end, or only begun (one batch taken, the loader closed): a second loader
    # would get what is left (nothing, or the rest), so it is refused, alone or in a list.
    whole, begun = reader(), reader()
    assert sum(b["x"].shape[0] for b in ad.batches(whole, 4)) == 10
    loader = ad.batches(begun, 4, prefetch=1)
    next(loader)
    state = loader.state_dict()
    loader.close()
    for used in (whole, [whole], begun):
        with pytest.raises(ad.ArrowDLPackValueError, match="was read by an earlier loader"):
            ad.batches(used, 4)
    # Nor twice in one list, whose second place would read what the first left.
    twice = reader()
    with pytest.raises(ad.ArrowDLPackValueError, match="names the same RecordBatchReader twice"):
        ad.batches([twice, twice], 4)
    assert sum(b["x"].shape[0] for b in ad.batches([twice, reader()], 4)) == 20
    # Not even to resume: the state counts rows from the start of the stream.
    with pytest.raises(ad.ArrowDLPackValueError, match="read once"):
        ad.batches(begun, 4, state=state)
    # A new reader resumes; tables are read again.
    rest = [int(i) for b in ad.batches(reader(), 4, state=state) for i in np.from_dlpack(b["x"])]
    assert rest == list(range(4, 10))
    for _ in range(2):
        assert sum(b["x"].shape[0] for b in ad.batches(table, 4)) == 10
    # A loader refused before it read (a bad option) leaves the reader to the next one.
    fresh = reader()
    with pytest.raises(ad.ArrowDLPackValueError):
        ad.batches(fresh, 0)
    assert sum(b["x"].shape[0] for b in ad.batches(fresh, 4)) == 10


def test_an_error_raised_by_a_readers_generator_is_raised_as_it_was():
    schema = pa.schema([("x", pa.int64())])

    def rows():
        yield pa.record_batch([pa.array(np.arange(5))], schema=schema)
        raise KeyError("boom in my generator")

    # A pyarrow reader's exception is the loader's: its type, its traceback, and a note.
    loader = ad.batches(pa.RecordBatchReader.from_batches(schema, rows()), 2)
    with pytest.raises(KeyError, match="boom in my generator") as raised:
        list(loader)
    assert raised.value.__notes__ == [
        "(raised while the loader read record batch 1 of a RecordBatchReader)"
    ]
    assert any(entry.name == "rows" for entry in raised.traceback), "the generator's own frame"
    with pytest.raises(ValueError, match="is iterated once"):
        list(loader)

    # An exception that takes no note (its __notes__ is not a list) is raised as it was too.
    class Odd(Exception):
        pass

    def odd_rows():
        yield pa.record_batch([pa.array(np.arange(5))], schema=schema)
        error = Odd("odd")
        error.__notes__ = "not a list"
        raise error

    with pytest.raises(Odd, match="odd"):
        list(ad.batches(pa.RecordBatchReader.from_batches(schema, odd_rows()), 2))

    # Another producer's stream carries only the message: the exception is named in it, as the
    # traceback's last line says it, without the traceback's header.
    class Stream:
        def __init__(self, reader):
            self.reader = reader

        def __arrow_c_stream__(self, requested_schema=None):
            return self.reader.__arrow_c_stream__(requested_schema)

    with pytest.raises(ad.ArrowDLPackValueError) as raised:
        list(ad.batches(Stream(pa.RecordBatchReader.from_batches(schema, rows())), 2))
    message = str(raised.value)
    assert "the producer of the Arrow stream failed in ArrowArrayStream.get_next at chunk 1" in message
    assert "boom in my generator" in message and "malformed" not in message
    assert message.endswith("(error 22): the Python exception KeyError: 'boom in my generator'"), message
    assert "Traceback" not in message and "Detail:" not in message


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float64, np.uint64])
def test_a_readers_batch_of_other_types_than_its_schema_is_refused_not_misread(dtype):
    # pyarrow's from_batches does not check its batches against the schema, and a stream's
    # chunk is read with the stream's schema: an int8 batch read as int64 read past its buffer
    # (a crash), a float64 one gave its bits as integers. Each batch is checked before export.
    schema = pa.schema([("x", pa.int64())])

    def rows():
        yield pa.record_batch({"x": np.arange(5, dtype=np.int64)})
        yield pa.record_batch({"x": np.arange(1_000_000, dtype=dtype)})

    for source in (lambda r: r, lambda r: [r]):
        reader = pa.RecordBatchReader.from_batches(schema, rows())
        with pytest.raises(ad.ArrowDLPackTypeError) as raised:
            list(ad.batches(source(reader), 4096))
        message = str(raised.value)
        assert "record batch 1 of the RecordBatchReader has column 'x' of type" in message, message
        assert "the reader's schema declares int64" in message, message
    # A reader whose batches are of its schema reads as before.
    reader = pa.RecordBatchReader.from_batches(schema, (pa.record_batch({"x": np.arange(10)}) for _ in range(3)))
    assert sum(len(b["x"]) for b in ad.batches(reader, 4)) == 30


def test_a_shuffled_table_reads_its_record_batches_in_a_shuffled_order(tmp_path):
    # Record batches in memory are units, as a file's record batches are: shuffled, a sorted
    # table's first batches are not drawn from its first rows only.
    table = pa.Table.from_batches(_table(0, 3000).to_batches(max_chunksize=100))
    firsts = []
    for seed in range(4):
        ids = [i for b in ad.batches(table, 50, shuffle=True, seed=seed, buffer_size=200, columns=["id"])
               for i in np.from_dlpack(b["id"]).tolist()]
        assert sorted(ids) == list(range(3000))
        firsts.append(max(ids[:200]))
    assert max(firsts) > 1000, firsts
    # The same record batches in an IPC file are shuffled alike: the same batches.
    path = str(tmp_path / "t.arrow")
    feather.write_feather(table, path, compression="uncompressed", chunksize=100)
    options = dict(shuffle=True, seed=1, buffer_size=200, columns=["id"])
    in_memory = [np.from_dlpack(b["id"]).tolist() for b in ad.batches(table, 50, **options)]
    in_file = [np.from_dlpack(b["id"]).tolist() for b in ad.batches(path, 50, **options)]
    assert in_memory == in_file


def test_a_categorical_column_is_refused_saying_how_to_load_its_codes():
    frame = pd.DataFrame({"c": pd.Categorical(["a", "b", "a"]), "x": [1, 2, 3]})
    with pytest.raises(ad.ArrowDLPackTypeError, match=r'of type dictionary<.*df\["c"\]\.cat\.codes in pandas'):
        ad.batches(frame, 2, columns=["c"])
    coded = frame.assign(c=frame["c"].cat.codes)
    codes = [int(i) for b in ad.batches(coded, 2, columns=["c"]) for i in np.from_dlpack(b["c"])]
    assert codes == [0, 1, 0]
    polars_frame = pl.DataFrame({"c": ["a", "b", "a"]}, schema={"c": pl.Categorical})
    with pytest.raises(ad.ArrowDLPackTypeError, match=r'pl\.col\("c"\)\.to_physical\(\) in polars'):
        ad.batches(polars_frame, 2)
