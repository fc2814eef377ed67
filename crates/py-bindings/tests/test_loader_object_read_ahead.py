"""The read-ahead of Parquet row groups in object storage: how many requests a loader keeps in
flight against a server that holds every answer, as one in another region would."""

import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import _object_servers as _servers
import arrow_dlpack as ad

#: Options that keep a failing test short.
QUICK = {"timeout": "2s", "max_retries": 2, "retry_timeout": "5s", "retry_backoff": "10ms"}


def _table(start, rows):
    return pa.table({"id": pa.array(np.arange(start, start + rows, dtype=np.int64))})


def _most_in_flight(tmp_path, rows, row_group_size, delay, decode_threads):
    """The most requests in flight at once while a loader reads `rows` ids in row groups of
    `row_group_size` from a server whose every answer waits `delay` seconds, as a server in
    another region would; the batches are checked against the ids written."""
    pq.write_table(_table(0, rows), tmp_path / "t.parquet", row_group_size=row_group_size)
    files = {"/t.parquet": (tmp_path / "t.parquet").read_bytes()}
    with _servers.range_server(files) as (server, base):
        state = {"now": 0, "most": 0}

        def slow(handler):
            with server.lock:
                state["now"] += 1
                state["most"] = max(state["most"], state["now"])
            time.sleep(delay)
            with server.lock:
                state["now"] -= 1
            return False

        server.handler = slow
        loader = ad.batches(f"{base}/t.parquet", 500, columns=["id"], decode_threads=decode_threads,
                            storage_options=QUICK)
        assert [i for b in loader for i in np.from_dlpack(b["id"]).tolist()] == list(range(rows))
    return state["most"]


def test_small_row_groups_are_fetched_many_ahead_and_large_ones_one_ahead(tmp_path):
    """A decoding thread fetches ahead by bytes: row groups of a few kilobytes keep many requests
    in flight (a round trip each would leave it waiting), row groups larger than the budget
    (48 MiB) one ahead, as before."""
    # 30 row groups of a few KB each: one thread kept more than its next row group in flight.
    assert _most_in_flight(tmp_path, 6000, 200, 0.05, decode_threads=1) > 4


def test_at_most_32_requests_are_in_flight_however_many_row_groups_are_wanted(tmp_path):
    """Two decoding threads over 120 small row groups each want up to 32 row groups fetched
    ahead; the loader keeps at most 32 requests in flight at once, over both threads (and more
    than the 16 it kept before, which left threads over small row groups waiting for a turn)."""
    assert 16 < _most_in_flight(tmp_path, 12_000, 100, 0.2, decode_threads=2) <= 32
