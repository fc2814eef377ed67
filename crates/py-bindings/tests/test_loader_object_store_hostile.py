"""``ad.batches`` over HTTP against hostile servers and careless callers, on loopback.

A password in a URL is sent as HTTP basic auth and never shown; an answer longer than the range
asked is cut off at the range (the bytes the server managed to send are counted); an object
whose server sends no ETag and no Last-Modified time is refused unless the caller opts in; and
Ctrl-C interrupts a loader whose planning waits for a server that stopped answering.
"""

import pickle
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import _object_servers as _servers
import _parquet_editor as _editor
import arrow_dlpack as ad



#: Options that keep a failing test short.
QUICK = {"timeout": "5s", "max_retries": 0, "retry_timeout": "5s", "retry_backoff": "10ms"}

#: The most body bytes a server can write before a client that stopped reading makes its writes
#: fail: what loopback's socket buffers hold, and more.
BUFFERED = 16 << 20


def _parquet(tmp_path):
    """A Parquet file of 2,000 rows in row groups of 500: its path and bytes."""
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": np.arange(2000, dtype=np.int64)}), path, row_group_size=500)
    return path, path.read_bytes()


def _ids(source, **options):
    return np.concatenate(
        [np.from_dlpack(batch["id"]).copy() for batch in ad.batches(source, 300, **options)]
    ).tolist()


def test_a_password_in_an_http_url_is_sent_as_basic_auth_and_never_shown(tmp_path):
    path, data = _parquet(tmp_path)
    expected = "Basic YWxpY2U6czNjcmV0"  # alice:s3cret

    def require_auth(request):
        if request.headers.get("Authorization") == expected:
            return False
        request.send_response(401)
        request.send_header("Content-Length", "0")
        request.end_headers()
        return True

    with _servers.range_server({"/a.parquet": data}) as (server, base):
        server.handler = require_auth
        secret_base = base.replace("http://", "http://alice:s3cret@")
        loader = ad.batches(f"{secret_base}/a.parquet", 300, storage_options=QUICK)
        ids = np.concatenate([np.from_dlpack(b["id"]).copy() for b in loader]).tolist()
        assert ids == list(range(2000))
        state = loader.state_dict()
        assert "s3cret" not in repr(state) and "alice" not in repr(state)
        assert "s3cret" not in repr(pickle.dumps(state))
        with pytest.raises(FileNotFoundError) as raised:
            ad.batches(f"{secret_base}/missing.parquet", storage_options=QUICK)
        message = str(raised.value)
        assert "s3cret" not in message and "alice" not in message
        assert base.replace("http://", "http://***@") + "/missing.parquet" in message
        assert {headers.get("authorization") for _, _, headers in server.seen} == {expected}


def test_an_answer_longer_than_its_range_is_cut_off_at_the_range(tmp_path):
    def flood(request):
        request.stream_zeros(
            206,
            {
                "Content-Length": str(10**12),
                "Content-Range": "bytes 0-65535/65536",
                "ETag": '"e"',
            },
            256 << 20,
        )
        return True

    with _servers.range_server({}) as (server, base):
        server.handler = flood
        with pytest.raises(OSError, match="announces 1000000000000 bytes") as raised:
            ad.batches(f"{base}/a.parquet", storage_options=QUICK)
        assert f"{base}/a.parquet" in str(raised.value)
        deadline = time.monotonic() + 30
        while server.streaming and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.streamed < BUFFERED


@pytest.mark.parametrize("field, value", [("size", -100), ("offset", -5)])
def test_a_column_chunk_of_negative_size_or_offset_is_refused_as_corrupt(tmp_path, field, value):
    """A footer whose column chunk declares a negative size or offset is refused as corrupt,
    naming the row group and the column, as a local file is: the ranges to fetch were computed
    with the parquet crate's `byte_range`, which panics on a negative value, and a decoding
    thread died ("a loader thread panicked")."""
    path, _ = _parquet(tmp_path)
    edited = _editor.ParquetFile.open(path)
    meta = edited.column_meta(0, 0)
    if field == "size":
        meta[_editor.CM_COMPRESSED] = value
    else:
        meta[_editor.CM_DATA_PAGE] = value
        if meta.get(_editor.CM_DICTIONARY_PAGE) is not None:
            meta[_editor.CM_DICTIONARY_PAGE] = value
    data = edited.to_bytes()
    (tmp_path / "edited.parquet").write_bytes(data)
    with _servers.range_server({"/a.parquet": data}) as (server, base):
        for source, options in [(f"{base}/a.parquet", {"storage_options": QUICK}), (str(tmp_path / "edited.parquet"), {})]:
            with pytest.raises(ad.ArrowDLPackValueError, match=r'corrupt in row group 0, column "id"') as raised:
                _ids(source, **options)
            assert "panicked" not in str(raised.value)


def test_an_object_without_validators_is_refused_unless_allowed(tmp_path):
    path, data = _parquet(tmp_path)
    with _servers.range_server({"/a.parquet": data}) as (server, base):
        server.validators = False
        url = f"{base}/a.parquet"
        with pytest.raises(ValueError, match="neither an ETag nor a Last-Modified") as raised:
            ad.batches(url, storage_options=QUICK)
        assert url in str(raised.value)
        assert "allow_objects_without_validators" in str(raised.value)
        # Only the tail was asked for: nothing of the object was loaded.
        assert server.requests == 1
        options = {**QUICK, "allow_objects_without_validators": True}
        assert _ids(url, storage_options=options) == _ids(str(path))


def test_ctrl_c_interrupts_a_loader_waiting_for_a_server_that_stopped_answering():
    with _servers.range_server({"/a.parquet": b"PAR1" * 100}) as (server, base):
        server.stall.set()
        script = (
            # Ctrl-C raises KeyboardInterrupt even where the suite was started with SIGINT
            # ignored (in the background of a shell), which the child would inherit.
            "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "import arrow_dlpack as ad\n"
            "try:\n"
            f"    ad.batches({base + '/a.parquet'!r}, "
            "storage_options={'timeout': '1h', 'max_retries': 0})\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', flush=True)\n"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while server.requests == 0:
                assert child.poll() is None, child.communicate()
                assert time.monotonic() < deadline, "the child sent no request"
                time.sleep(0.01)
            child.send_signal(signal.SIGINT)
            # The server stalls for 30 s: a child that only sees the signal once its request
            # ends does not finish within this bound.
            out, err = child.communicate(timeout=20)
        finally:
            child.kill()
        assert out.strip() == "interrupted", err
        assert child.returncode == 0, err


def test_the_repr_of_a_dataset_hides_passwords_and_storage_option_values(tmp_path):
    _, data = _parquet(tmp_path)
    with _servers.range_server({"/a.parquet": data}) as (server, base):
        url = base.replace("http://", "http://alice:s3cr3tpw@") + "/a.parquet"
        options = {**QUICK, "timeout": "7s"}
        shown = repr(ad.BatchDataset(url, 64, storage_options=options))
        assert "s3cr3tpw" not in shown and "alice" not in shown
        assert repr(base.replace("http://", "http://***@") + "/a.parquet") in shown
        # Every value hidden, but for known harmless keys.
        assert "'timeout': '***'" in shown and "7s" not in shown
        listed = repr(ad.BatchDataset([url, url], 64, storage_options=QUICK))
        assert "s3cr3tpw" not in listed
    # The keys shown with their values: the region, and the endpoint without its userinfo.
    from arrow_dlpack._batches import _redacted_options

    shown = _redacted_options(
        {
            "storage_options": {
                "region": "eu-west-1",
                "endpoint": "http://bob:endpointpw@127.0.0.1:9",
                "aws_access_key_id": "AKIAFAKE",
                "aws_secret_access_key": "SUPERSECRETKEY123",
                "proxy_url": "http://u:PROXYPASS@127.0.0.1:9",
            }
        }
    )
    assert shown == repr(
        {
            "storage_options": {
                "region": "eu-west-1",
                "endpoint": "http://***@127.0.0.1:9",
                "aws_access_key_id": "***",
                "aws_secret_access_key": "***",
                "proxy_url": "***",
            }
        }
    )


def test_an_object_replaced_after_planning_is_named_with_its_etags_as_the_server_sent_them(tmp_path):
    _, data = _parquet(tmp_path)
    # The same size, other bytes: only the ETag tells.
    replaced = data[:4] + bytes(b ^ 0xFF for b in data[4:104]) + data[104:]
    with _servers.range_server({"/a.parquet": data}) as (server, base):
        was = f'"{len(data)}-{hash(data) & 0xFFFF}"'
        now = f'"{len(replaced)}-{hash(replaced) & 0xFFFF}"'
        assert was != now
        loader = ad.batches(f"{base}/a.parquet", 100, storage_options=QUICK)
        # The loader's threads may ask for the data as soon as the plan is made: every request
        # after planning waits until the object is replaced, so that none sees the old bytes.
        replaced_now = threading.Event()
        server.handler = lambda _request: not replaced_now.wait(30)
        server.files["/a.parquet"] = replaced
        replaced_now.set()
        with pytest.raises(ValueError) as raised:
            list(loader)
    message = str(raised.value)
    assert f"its ETag is {now}, was {was}" in message, message
    assert "Some(" not in message
