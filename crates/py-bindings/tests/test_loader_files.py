"""``ad.batches`` against corrupt, edited and changing files.

Every corrupt file here is made by the test: pyarrow writes a small file, and ``_parquet_editor``
changes one count its footer or a page header declares. The loader must refuse each one with
``ArrowDLPackValueError`` (or ``OSError``) naming the file, never crash, hang, print to stderr or
yield rows other than the file's. Cases that crashed the process before they were fixed run in a
subprocess, so that a regression fails one test instead of ending the run.
"""

import os
import random
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import torch

import arrow_dlpack as ad


def _load_editor():
    """The helper ``_parquet_editor.py`` beside this file, loaded by path (the tests run with
    ``--import-mode=importlib`` and are not a package)."""
    import importlib.util

    location = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_parquet_editor.py")
    spec = importlib.util.spec_from_file_location("_parquet_editor", location)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_editor = _load_editor()
NUM_CHILDREN, NUM_ROWS, RG_NUM_ROWS, SCHEMA = (
    _editor.NUM_CHILDREN,
    _editor.NUM_ROWS,
    _editor.RG_NUM_ROWS,
    _editor.SCHEMA,
)
ParquetFile = _editor.ParquetFile

ROWS = 1000


def _table(rows=ROWS):
    return pa.table(
        {
            "x": pa.array(np.arange(rows, dtype=np.float64)),
            "y": pa.array(np.arange(rows, dtype=np.int32) % 7),
        }
    )


def _write(path, table, **options):
    pq.write_table(table, path, compression="none", **options)
    return str(path)


def _load(path, **options):
    """Every batch of `path`, concatenated per column."""
    got = {}
    for batch in ad.batches(str(path), 128, **options):
        for name, tensor in batch.items():
            got.setdefault(name, []).append(np.from_dlpack(tensor))
    return {name: np.concatenate(parts) for name, parts in got.items()}


def _refused(path, **options):
    """The loader's error for `path`, which must name it."""
    with pytest.raises((ad.ArrowDLPackValueError, OSError)) as caught:
        _load(path, **options)
    assert str(path) in str(caught.value)
    return str(caught.value)


def _run_isolated(code, timeout=60):
    """Runs `code` in a fresh interpreter; returns its stdout, asserting a clean exit and an
    empty stderr."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    return done.stdout


def test_a_dictionary_page_declaring_two_billion_values_is_refused_without_allocating(tmp_path):
    table = pa.table({"x": pa.array(np.arange(ROWS, dtype=np.float64))})
    path = _write(tmp_path / "dictionary.parquet", table)
    edited = ParquetFile.open(path)
    offset, header = edited.pages(0, 0)[0]
    assert header[1] == 2  # a dictionary page
    edited.set_page_values(0, 0, 0, 2**31 - 1)
    edited.save(path)
    out = _run_isolated(
        f"""
        import arrow_dlpack as ad
        try:
            list(ad.batches({path!r}, 100))
        except ad.ArrowDLPackValueError as error:
            print(error)
        """
    )
    assert path in out
    assert "dictionary page declares 2147483647 values in 8000 bytes" in out
    assert 'row group 0, column "x"' in out


def test_a_schema_root_declaring_two_billion_children_is_refused_at_planning(tmp_path):
    path = _write(tmp_path / "children.parquet", _table())
    edited = ParquetFile.open(path)
    edited.footer[SCHEMA][1][0][NUM_CHILDREN] = 2**31 - 1
    edited.save(path)
    out = _run_isolated(
        f"""
        import arrow_dlpack as ad
        try:
            ad.batches({path!r}, 100)
        except ad.ArrowDLPackValueError as error:
            print(error)
        """
    )
    assert path in out
    assert "schema element 0 declares 2147483647 children" in out


def test_a_panic_while_decoding_is_an_error_naming_the_file_and_row_group_in_silence(tmp_path):
    # One flipped byte in a zstd data page reaches an assertion inside the parquet crate
    # ("offset + len out of bounds"); the loader reports it as an error and prints nothing.
    path = str(tmp_path / "panic.parquet")
    pq.write_table(_table(300), path, row_group_size=100, compression="zstd")
    with open(path, "r+b") as file:
        file.seek(268)
        file.write(bytes([55]))
    out = _run_isolated(
        f"""
        import arrow_dlpack as ad
        try:
            list(ad.batches({path!r}, 64))
        except ad.ArrowDLPackValueError as error:
            print(error)
        """
    )
    assert out.startswith(f"decoding row group 0 of {path} failed with an internal error: ")
    assert "a loader thread panicked" not in out


def test_column_types_are_checked_before_any_column_is_decoded(tmp_path):
    table = pa.table({"x": np.arange(10.0), "s": [str(i) for i in range(10)]})
    path = _write(tmp_path / "strings.parquet", table)
    # The refusal comes from `ad.batches` itself, before an iteration could decode a page.
    with pytest.raises(ad.ArrowDLPackTypeError, match='column "s" of type string'):
        ad.batches(path, 4)


@pytest.mark.parametrize("declared", [999, 0, 1001])
def test_a_page_declaring_other_than_its_rows_is_refused(tmp_path, declared):
    table = pa.table({"x": pa.array(np.arange(ROWS, dtype=np.float64))})
    path = _write(tmp_path / "rows.parquet", table, use_dictionary=False)
    edited = ParquetFile.open(path)
    edited.set_page_values(0, 0, 0, declared)
    edited.save(path)
    message = _refused(path)
    assert 'row group 0, column "x"' in message
    if declared == 0:
        # No values cannot fill the page's bytes, which is found first.
        assert "declares 8007 uncompressed bytes for 0 values" in message
    else:
        assert f"the chunk declares {ROWS}" in message


def test_row_counts_that_overflow_64_bits_are_refused(tmp_path):
    table = _table(8)
    path = _write(tmp_path / "huge.parquet", table, row_group_size=2)
    edited = ParquetFile.open(path)
    for group in edited.row_groups():
        group[RG_NUM_ROWS] = 2**62
    edited.footer[NUM_ROWS] = 2**62
    edited.save(path)
    with pytest.raises(ad.ArrowDLPackValueError, match="more than 2\\*\\*64 rows"):
        ad.batches(path, 4)


def test_a_row_group_declaring_one_row_and_holding_many_is_refused(tmp_path):
    path = _write(tmp_path / "one.parquet", _table(200_000))
    edited = ParquetFile.open(path)
    edited.row_groups()[0][RG_NUM_ROWS] = 1
    edited.footer[NUM_ROWS] = 1
    edited.save(path)
    message = _refused(path)
    assert "declares 200000 values; expected one per row, 1" in message


def test_a_source_without_columns_is_refused(tmp_path):
    path = _write(tmp_path / "empty.parquet", _table(4).drop_columns(["x", "y"]))
    edited = ParquetFile.open(path)
    edited.row_groups()[0][RG_NUM_ROWS] = 2**62
    edited.footer[NUM_ROWS] = 2**62
    edited.save(path)
    with pytest.raises(ad.ArrowDLPackValueError, match="has no columns to load"):
        ad.batches(path, 4)


def test_a_parquet_file_replaced_after_planning_is_an_error_naming_it(tmp_path):
    # One decoder and a prefetch of one cannot read the forty row groups of the first file
    # ahead, so the second is opened for reading after it is replaced.
    first = str(tmp_path / "first.parquet")
    pq.write_table(_table(), first, row_group_size=25, compression="none")
    second = _write(tmp_path / "second.parquet", _table())
    loader = ad.batches([first, second], 25, prefetch=1, decode_threads=1)
    other = _write(tmp_path / "other.parquet", _table(ROWS * 2).slice(ROWS))
    os.replace(other, second)
    with pytest.raises(ad.ArrowDLPackValueError) as caught:
        list(loader)
    assert str(caught.value) == (
        f"{second} changed after the loader read its metadata: another file has replaced it; "
        "expected the file as planned"
    )


def test_a_parquet_file_rewritten_in_place_after_planning_is_an_error(tmp_path):
    first = str(tmp_path / "first.parquet")
    pq.write_table(_table(), first, row_group_size=25, compression="none")
    second = _write(tmp_path / "second.parquet", _table())
    loader = ad.batches([first, second], 25, prefetch=1, decode_threads=1)
    with open(second, "ab") as file:
        file.write(b"more")
    with pytest.raises(ad.ArrowDLPackValueError, match="changed after the loader read") as caught:
        list(loader)
    assert str(caught.value).startswith(f"{second} changed")


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
@pytest.mark.parametrize(
    "second",
    [
        {"shape": [3, 2]},
        {"shape": [2, 3], "permutation": [1, 0]},
        {"shape": [2, 3], "dim_names": ["h", "w"]},
    ],
)
def test_fixed_shape_tensors_of_other_shapes_across_files_are_refused(tmp_path, kind, second):
    paths = []
    for index, options in enumerate([{"shape": [2, 3]}, second]):
        tensor_type = pa.fixed_shape_tensor(pa.float32(), **options)
        storage = pa.array([[float(i)] * 6 for i in range(4)], pa.list_(pa.float32(), 6))
        table = pa.table({"t": pa.ExtensionArray.from_storage(tensor_type, storage)})
        path = str(tmp_path / f"{index}.{kind}")
        if kind == "parquet":
            pq.write_table(table, path)
        else:
            feather.write_feather(table, path, compression="uncompressed")
        paths.append(path)
    with pytest.raises(ad.ArrowDLPackValueError, match=f"file {paths[1]} has columns"):
        ad.batches(paths, 2)


def test_in_place_writes_to_an_ipc_batch_never_reach_the_file_or_the_next_pass(tmp_path):
    path = str(tmp_path / "data.arrow")
    feather.write_feather(_table(), path, compression="uncompressed", chunksize=ROWS)
    with open(path, "rb") as file:
        before = file.read()
    for _ in range(2):
        for batch in ad.batches(path, ROWS, columns=["x"]):
            x = torch.from_dlpack(batch["x"])
            np.testing.assert_array_equal(x.numpy(), np.arange(ROWS, dtype=np.float64))
            x.sub_(x.mean())
            assert x[0].item() == -(ROWS - 1) / 2
    with open(path, "rb") as file:
        assert file.read() == before


def _corrupt(data, rng):
    """`data` truncated, or with a few bytes replaced."""
    data = bytearray(data)
    if rng.random() < 0.25:
        return bytes(data[: rng.randrange(len(data))])
    # Half the edits fall in the last fifth of the file, where the footer lies.
    for _ in range(rng.randint(1, 4)):
        start = len(data) * 4 // 5 if rng.random() < 0.5 else 0
        data[rng.randrange(start, len(data))] = rng.randrange(256)
    return bytes(data)


def _first_difference(got, wanted):
    """The first row where `got` and `wanted` differ, and their lengths, for messages."""
    index = next((i for i, (a, b) in enumerate(zip(got, wanted)) if a != b), None)
    shown = None if index is None else (got[index], wanted[index])
    return {"row": index, "values": shown, "lengths": (len(got), len(wanted))}


def _read_with_pyarrow(path, kind):
    if kind == "parquet":
        return pq.read_table(path)
    return feather.read_table(path, memory_map=False)


SWEEP = """
import json, sys, time
import numpy as np
import arrow_dlpack as ad
results = []
for path in sys.argv[1:]:
    started = time.monotonic()
    try:
        got = {}
        for batch in ad.batches(path, 64):
            for name, tensor in batch.items():
                got.setdefault(name, []).append(np.from_dlpack(tensor).tolist())
        outcome = {"rows": {name: sum(parts, []) for name, parts in got.items()}}
    except (ad.ArrowDLPackValueError, ad.ArrowDLPackTypeError, OSError) as error:
        outcome = {"error": str(error), "named": path in str(error)}
    outcome["seconds"] = time.monotonic() - started
    results.append(outcome)
print(json.dumps(results))
"""


# The files the sweep corrupts: each codec and page layout the loader decodes differently.
SWEEP_SOURCES = {
    "parquet": [
        {"compression": "snappy"},
        {"compression": "zstd", "data_page_version": "2.0"},
        {"compression": "none", "use_dictionary": False},
        {"compression": "gzip", "data_page_size": 256},
    ],
    "arrow": [{"chunksize": 100}, {"chunksize": 30}],
}


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_seeded_corrupt_files_are_refused_or_read_as_pyarrow_reads_them(tmp_path, kind):
    import json

    table = _table(300)
    rng = random.Random(20261201)
    paths = []
    for number, options in enumerate(SWEEP_SOURCES[kind]):
        source = tmp_path / f"source{number}.{kind}"
        if kind == "parquet":
            pq.write_table(table, source, row_group_size=100, **options)
        else:
            feather.write_feather(table, source, compression="uncompressed", **options)
        data = source.read_bytes()
        for index in range(1200 // len(SWEEP_SOURCES[kind])):
            path = tmp_path / f"corrupt{number}-{index}.{kind}"
            path.write_bytes(_corrupt(data, rng))
            paths.append(str(path))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", SWEEP, *paths], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == ""
    results = json.loads(done.stdout)
    refused = equal = unchecked = 0
    for path, outcome in zip(paths, results):
        assert outcome["seconds"] < 10, path
        if "error" in outcome:
            assert outcome["named"], outcome["error"]
            refused += 1
            continue
        try:
            expected = _read_with_pyarrow(path, kind)
        except (pa.ArrowException, OSError):
            # pyarrow refuses a few files the loader reads: edits of bytes that carry no rows
            # (statistics, the stored Arrow schema's version) or that the parquet crate does not
            # check (definition levels above the column's maximum). Without an oracle, the
            # loader's rows must at least be the file's declared rows, and such files stay few.
            assert all(len(rows) == table.num_rows for rows in outcome["rows"].values()), path
            unchecked += 1
            continue
        for name, rows in outcome["rows"].items():
            wanted = expected[name].to_pylist()
            assert rows == wanted, (path, name, _first_difference(rows, wanted))
        equal += 1
    assert unchecked <= len(paths) // 50
    assert refused + equal + unchecked == len(paths)
    print(
        f"{kind}: {len(paths)} files, {refused} refused, {equal} equal to pyarrow, "
        f"{unchecked} refused by pyarrow only, "
        f"{time.monotonic() - started:.1f} s"
    )


def test_a_local_stream_cut_short_while_it_is_read_is_named_as_changed(tmp_path):
    path = tmp_path / "t.arrows"
    table = pa.table({"x": np.arange(200_000.0)})
    with pa.ipc.new_stream(path, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=10_000):
            writer.write_batch(batch)
    loader = ad.batches(str(path), 10_000, prefetch=1)
    next(loader)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    with pytest.raises(ad.ArrowDLPackValueError, match="changed after the loader read its metadata"):
        for _ in loader:
            pass


def test_streams_whose_rows_add_up_past_2_63_are_refused_naming_the_stream(tmp_path):
    """Each stream's record-batch headers may declare up to 2**63 - 1 rows; the folder's sum
    is checked too."""
    import struct

    paths = []
    for index in range(2):
        path = tmp_path / f"s{index}.arrows"
        with pa.ipc.new_stream(path, pa.schema([("x", pa.int64())])) as writer:
            writer.write_batch(pa.record_batch({"x": np.arange(333, dtype=np.int64)}))
        data = path.read_bytes()
        # The record batch's length and its field node's (333, int64s in its header; the
        # values are 0..332): declared 2**62 + 333.
        assert data.count(struct.pack("<q", 333)) == 2
        path.write_bytes(data.replace(struct.pack("<q", 333), struct.pack("<q", 2**62 + 333)))
        paths.append(str(path))
    assert ad.batches(paths[:1], 10).num_rows == 2**62 + 333
    with pytest.raises(ad.ArrowDLPackValueError, match=r"more than 2\*\*63 - 1 rows in all"):
        ad.batches(paths, 10)


def test_a_page_whose_checksum_does_not_match_is_refused(tmp_path):
    # A file written with page checksums, one byte of a data page changed (the footer intact):
    # pyarrow verifies the checksum when asked; the loader always does, where a page has one.
    path = tmp_path / "checked.parquet"
    values = np.arange(4096, dtype=np.int64)
    pq.write_table(pa.table({"x": values}), path, write_page_checksum=True,
                   compression="none", use_dictionary=False)
    data = bytearray(path.read_bytes())
    # The values lie after the first page header; flip a byte in the middle of them.
    at = data.index(np.int64(2000).tobytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(OSError, match="CRC checksum verification failed"):
        pq.read_table(path, page_checksum_verification=True)
    with pytest.raises(ValueError, match="checksum"):
        list(ad.batches(str(path), 1024))
    # Without checksums the file is read as pyarrow reads it (the format gives nothing to check).
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"x": values}), plain, compression="none", use_dictionary=False)
    got = np.concatenate([np.from_dlpack(b["x"]) for b in ad.batches(str(plain), 1024)])
    assert np.array_equal(got, values)
