"""``cache_dir``: byte ranges fetched from object storage kept on local disk, so that a second
epoch reads them from there.

Against the HTTP server with byte ranges of ``_object_servers.py``, whose requests are counted:
a second loader over the same objects asks the server only for each object's tail (the footer
that pins its ETag) and gives the same batches; a replaced object is fetched again; an altered
entry is a miss, never data; the directory stays within ``cache_size``; DataLoader workers in
other processes share it, and processes that miss one range at once fetch it once; an unusable
directory is refused when the loader is made.
"""

import os
import pathlib

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from torch.utils.data import DataLoader

import _forked
import _object_servers
import arrow_dlpack as ad

#: Keeps a failing test short.
QUICK = {"timeout": "5s", "max_retries": 1, "retry_timeout": "5s", "retry_backoff": "10ms"}


def _table(start, rows):
    ids = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({"id": ids, "x": (ids * 0.25).astype(np.float32), "tag": ids.astype(str)})


def _parquet_bytes(tmp_path, name, start, rows):
    path = tmp_path / name
    pq.write_table(_table(start, rows), path, row_group_size=500)
    return path.read_bytes()


def _read(url, cache_dir, **options):
    """Every batch of ``url`` as ``{name: list}``."""
    loader = ad.batches(
        url, 256, columns=["id", "x"], cache_dir=cache_dir, storage_options=QUICK, **options
    )
    return [{name: np.from_dlpack(t).tolist() for name, t in batch.items()} for batch in loader]


def _ranges(server):
    """The ranged GETs the server answered, as ``(path, range)``, and forgets them."""
    seen = [(path, headers.get("range")) for method, path, headers in server.seen if method == "GET"]
    server.seen.clear()
    return seen


def _entries(cache_dir):
    """The cache's entry files."""
    return [p for p in pathlib.Path(cache_dir, "v1").rglob("*") if p.is_file() and p.parent.name != "tmp"]


def test_a_second_epoch_reads_the_ranges_from_the_cache_and_gives_the_same_batches(tmp_path):
    files = {
        "/d/a.parquet": _parquet_bytes(tmp_path, "a.parquet", 0, 2000),
        "/d/b.parquet": _parquet_bytes(tmp_path, "b.parquet", 2000, 1500),
    }
    cache = tmp_path / "cache"
    with _object_servers.range_server(files) as (server, base):
        urls = [f"{base}/d/a.parquet", f"{base}/d/b.parquet"]
        first = _read(urls, str(cache), shuffle=True, seed=4)
        fetched = _ranges(server)
        assert len(fetched) > 2, fetched  # the tails, then the row groups' column chunks
        assert _entries(cache)

        # A second loader (the next epoch, shuffled otherwise) asks only for the tails.
        second = _read(urls, str(cache), shuffle=True, seed=4)
        assert second == first
        tails = _ranges(server)
        assert sorted(path for path, _ in tails) == ["/d/a.parquet", "/d/b.parquet"], tails
        assert all(ranged.startswith("bytes=-") for _, ranged in tails), tails
        other_epoch = _read(urls, pathlib.Path(cache), shuffle=True, seed=4, epoch=1)
        assert len(_ranges(server)) == 2
        ids = sorted(i for batch in other_epoch for i in batch["id"])
        assert ids == list(range(3500))

        # Without the cache, everything is fetched again; the batches are the same.
        assert _read(urls, None, shuffle=True, seed=4) == first
        assert len(_ranges(server)) == len(fetched)


def test_ipc_files_are_cached_too(tmp_path):
    feather.write_feather(_table(0, 3000), tmp_path / "a.arrow", compression="uncompressed",
                          chunksize=700)
    files = {"/a.arrow": (tmp_path / "a.arrow").read_bytes()}
    cache = str(tmp_path / "cache")
    with _object_servers.range_server(files) as (server, base):
        first = _read(f"{base}/a.arrow", cache)
        assert len(_ranges(server)) > 1
        assert _read(f"{base}/a.arrow", cache) == first
        assert len(_ranges(server)) == 1
    assert [i for batch in first for i in batch["id"]] == list(range(3000))


def test_a_replaced_object_is_fetched_again_and_never_read_from_its_old_entries(tmp_path):
    def plain(start):
        # Fixed-width values, uncompressed, without statistics: two files of one size.
        path = tmp_path / f"{start}.parquet"
        table = _table(start, 2000).select(["id", "x"])
        pq.write_table(table, path, row_group_size=500, compression="none", use_dictionary=False,
                       write_statistics=False)
        return path.read_bytes()

    old, new = plain(0), plain(10_000)
    assert len(old) == len(new)  # the same size: only the ETag tells them apart
    files = {"/a.parquet": old}
    cache = str(tmp_path / "cache")
    with _object_servers.range_server(files) as (server, base):
        before = _read(f"{base}/a.parquet", cache)
        files["/a.parquet"] = new
        after = _read(f"{base}/a.parquet", cache)
        assert len(_ranges(server)) > 2
    assert [i for b in before for i in b["id"]] == list(range(2000))
    assert [i for b in after for i in b["id"]] == list(range(10_000, 12_000))


def test_an_altered_or_cut_entry_is_a_miss_fetched_again(tmp_path):
    files = {"/a.parquet": _parquet_bytes(tmp_path, "a.parquet", 0, 3000)}
    cache = str(tmp_path / "cache")
    with _object_servers.range_server(files) as (server, base):
        first = _read(f"{base}/a.parquet", cache)
        fetched = len(_ranges(server))
        entries = _entries(cache)
        for number, entry in enumerate(entries):
            data = bytearray(entry.read_bytes())
            if number % 2:
                data[-1] ^= 0x40  # a flipped bit in the bytes
                entry.write_bytes(bytes(data))
            else:
                entry.write_bytes(bytes(data[: len(data) // 2]))  # a torn write
        assert _read(f"{base}/a.parquet", cache) == first
        assert len(_ranges(server)) == fetched
        # Written again whole: the next loader reads them.
        assert _read(f"{base}/a.parquet", cache) == first
        assert len(_ranges(server)) == 1


def test_the_cache_stays_within_its_size(tmp_path):
    files = {
        f"/p{i}.parquet": _parquet_bytes(tmp_path, f"p{i}.parquet", i * 4000, 4000) for i in range(4)
    }
    cache = str(tmp_path / "cache")
    limit = 40_000
    with _object_servers.range_server(files) as (server, base):
        urls = [f"{base}/p{i}.parquet" for i in range(4)]
        loader = ad.batches(urls, 512, columns=["id", "x"], cache_dir=cache,
                            cache_size=limit, storage_options=QUICK)
        ids = [i for batch in loader for i in np.from_dlpack(batch["id"]).tolist()]
    assert ids == list(range(16_000))
    stored = sum(entry.stat().st_size for entry in _entries(cache))
    assert 0 < stored <= limit


def test_loaders_of_one_process_at_once_keep_a_shared_cache_within_its_size(tmp_path):
    # Each loader counted the directory on its own: six at once held 2 to 3 times cache_size.
    import threading

    files = {
        f"/q{i}.parquet": _parquet_bytes(tmp_path, f"q{i}.parquet", i * 4000, 4000) for i in range(6)
    }
    cache = str(tmp_path / "cache")
    limit = 40_000
    peak = [0]
    done = threading.Event()

    def watch():
        while not done.is_set():
            held = 0
            for entry in _entries(cache):
                try:
                    held += entry.stat().st_size
                except FileNotFoundError:
                    pass  # evicted meanwhile
            peak[0] = max(peak[0], held)

    with _object_servers.range_server(files) as (server, base):
        results = {}

        def read(i):
            loader = ad.batches(f"{base}/q{i}.parquet", 256, columns=["id", "x"], cache_dir=cache,
                                cache_size=limit, storage_options=QUICK)
            results[i] = [v for batch in loader for v in np.from_dlpack(batch["id"]).tolist()]

        watcher = threading.Thread(target=watch)
        watcher.start()
        readers = [threading.Thread(target=read, args=(i,)) for i in range(6)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        done.set()
        watcher.join()
    assert all(results[i] == list(range(i * 4000, (i + 1) * 4000)) for i in range(6))
    largest = max((entry.stat().st_size for entry in _entries(cache)), default=0)
    # Within the limit but for entries being put in place at the moment of a listing.
    assert peak[0] <= limit + 2 * largest, (peak[0], limit, largest)


def test_dataloader_workers_share_one_cache(tmp_path):
    files = {f"/w{i}.parquet": _parquet_bytes(tmp_path, f"w{i}.parquet", i * 1000, 1000) for i in range(4)}
    cache = str(tmp_path / "cache")
    with _object_servers.range_server(files) as (server, base):
        urls = [f"{base}/w{i}.parquet" for i in range(4)]

        def epoch():
            dataset = ad.BatchDataset(urls, 250, columns=["id"], cache_dir=cache,
                                      storage_options=QUICK)
            loader = DataLoader(dataset, batch_size=None, num_workers=2,
                                multiprocessing_context="fork")
            return sorted(int(i) for batch in loader for i in batch["id"].tolist())

        assert epoch() == list(range(4000))
        _ranges(server)
        assert epoch() == list(range(4000))
        # Each process opened the objects (their tails); no row group was fetched again.
        tails = _ranges(server)
        assert tails and all(ranged.startswith("bytes=-") for _, ranged in tails), tails


def _ids_of(url, cache, out):
    out.put(sorted(i for batch in _read(url, cache) for i in batch["id"]))


def test_processes_that_miss_one_range_at_once_fetch_it_once(tmp_path):
    """Four processes read one object at once from a slow server: each range is fetched by one
    of them, and the others wait for it and read it from the cache."""
    import time

    files = {"/s.parquet": _parquet_bytes(tmp_path, "s.parquet", 0, 2000)}
    cache = str(tmp_path / "cache")
    with _object_servers.range_server(files) as (server, base):

        def slow(handler):
            # Every range but the tail waits, so that the processes miss it together.
            if handler.command == "GET" and not handler.headers.get("Range", "").startswith("bytes=-"):
                time.sleep(0.3)
            return False

        server.handler = slow
        read = _forked.in_forked_processes(_ids_of, [(f"{base}/s.parquet", cache)] * 4)
        assert read == [list(range(2000))] * 4
        ranges = [ranged for _, ranged in _ranges(server) if not ranged.startswith("bytes=-")]
        assert ranges and len(ranges) == len(set(ranges)), ranges
    # Each right to fill was given back, its lock file with it.
    assert list(pathlib.Path(cache, "v1", "tmp").iterdir()) == []


def test_an_unusable_cache_dir_is_refused_when_the_loader_is_made(tmp_path):
    a_file = tmp_path / "not-a-directory"
    a_file.write_bytes(b"x")
    files = {"/a.parquet": _parquet_bytes(tmp_path, "a.parquet", 0, 100)}
    with _object_servers.range_server(files) as (server, base):
        with pytest.raises(ValueError, match=r"cache_dir .*not-a-directory.* cannot be used"):
            ad.batches(f"{base}/a.parquet", columns=["id"], cache_dir=str(a_file),
                       storage_options=QUICK)
        with pytest.raises(ValueError, match=r"^cache_size is 0; expected at least 1$"):
            ad.batches(f"{base}/a.parquet", cache_dir=str(tmp_path / "c"), cache_size=0)
        with pytest.raises(TypeError, match=r"cache_dir"):
            ad.batches(f"{base}/a.parquet", cache_dir=3)
        with pytest.raises(ValueError, match=r"^cache_dir is empty"):
            ad.batches(f"{base}/a.parquet", columns=["id"], cache_dir="")
        undecodable = os.fsdecode(b"/tmp/cache-\xff")
        with pytest.raises(ValueError, match=r"^cache_dir is not valid UTF-8"):
            ad.batches(f"{base}/a.parquet", columns=["id"], cache_dir=undecodable)
    # A local source reads its files directly: the directory is not even made.
    local = tmp_path / "a.parquet"
    loader = ad.batches(str(local), 100, columns=["id"], cache_dir=str(tmp_path / "unused"))
    assert [len(batch["id"]) for batch in loader] == [100]
    assert not (tmp_path / "unused").exists()
    assert os.path.exists(local)


@pytest.mark.parametrize("validators", ["none", "weak etag"])
def test_objects_without_a_strong_etag_are_never_cached(tmp_path, validators):
    # Pinned by their size alone, or by a weak ETag, which may stay the same when the bytes
    # change, a replacement could not be told apart across loaders.
    files = {"/a.parquet": _parquet_bytes(tmp_path, "a.parquet", 0, 2000)}
    cache = str(tmp_path / "cache")
    options = {**QUICK, "allow_objects_without_validators": True}
    with _object_servers.range_server(files) as (server, base):
        server.validators = validators != "none"
        server.weak_etags = validators == "weak etag"
        url = f"{base}/a.parquet"
        for _ in range(2):
            loader = ad.batches(url, 256, columns=["id"], cache_dir=cache, storage_options=options)
            assert [i for b in loader for i in np.from_dlpack(b["id"]).tolist()] == list(range(2000))
            assert len(_ranges(server)) > 1
    assert _entries(cache) == []
