"""The object-storage bench's S3 servers on loopback, started as the bench starts them, and a
short read through each: ours (``ad.batches("s3://...")``) and pyarrow's ``S3FileSystem``, the
two readers the bench times, give the rows of the local file; with a delay, every answer waits
before its first byte.

The servers: ``loader_object_store.StaticS3Server`` (Python's ``ThreadingHTTPServer``) and
``nginx_s3.NginxS3Server`` (nginx with its echo module, which ``cargo xtask test`` installs,
as ``cargo xtask bench`` does; where it is missing these tests fail, saying what to install)."""

import contextlib
import threading
import time

import numpy as np
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from _scripts import load

store = load("loader_object_store.py")
methods = load("loader_methods.py")
nginx_s3 = load("nginx_s3.py")

ROWS = 20_000
ROW_GROUP = 8_192
DELAY = 0.05


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    """A folder holding ``<bucket>/<key>``: the bench's workload, 20,000 rows in 3 row groups."""
    root = tmp_path_factory.mktemp("s3-root")
    (root / store.BUCKET).mkdir()
    pq.write_table(
        methods.make_table(ROWS), root / store.BUCKET / store.KEY, row_group_size=ROW_GROUP, compression="snappy"
    )
    return root


@contextlib.contextmanager
def static_server(root, delay=0.0):
    server = store.StaticS3Server(root / store.BUCKET, delay=delay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.endpoint
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


#: What to do where nginx is missing: the tests need it, as the bench does.
MISSING = (
    "nginx with its echo module is not installed: cargo xtask test installs it (Debian's "
    "nginx-light) where apt-get may run; elsewhere install nginx and libnginx-mod-http-echo"
)


def _nginx():
    """The nginx executable; a failure naming what to install where there is none."""
    executable = nginx_s3.NginxS3Server.find()
    assert executable is not None, MISSING
    return executable


@contextlib.contextmanager
def nginx_server(root, delay=0.0):
    executable = _nginx()
    with nginx_s3.NginxS3Server(executable, root, delay=delay) as server:
        yield server.endpoint


SERVERS = {"static": static_server, "nginx": nginx_server}


def _labels_of_ours(source, **options):
    labels = [np.from_dlpack(batch["label"]) for batch in store.ours(source, **options)]
    return np.concatenate(labels)


def _anonymous(endpoint):
    return {"endpoint": endpoint, "region": "us-east-1", "skip_signature": "true"}


@pytest.mark.parametrize("server", SERVERS)
def test_both_readers_get_the_local_rows_through_the_server(bucket, server):
    path = bucket / store.BUCKET / store.KEY
    local = pq.read_table(path)
    with SERVERS[server](bucket) as endpoint:
        url = f"s3://{store.BUCKET}/{store.KEY}"
        ours = _labels_of_ours(url, storage_options=_anonymous(endpoint))
        filesystem = fs.S3FileSystem(endpoint_override=endpoint, scheme="http", region="us-east-1", anonymous=True)
        with filesystem.open_input_file(f"{store.BUCKET}/{store.KEY}") as handle:
            theirs = pq.ParquetFile(handle).read()
    assert len(ours) == ROWS
    np.testing.assert_array_equal(ours, local.column("label").to_numpy())
    assert theirs.equals(local)


@pytest.mark.parametrize("server", SERVERS)
def test_a_delayed_server_holds_every_answer(bucket, server):
    # A pass asks for the footer, then for the row groups the footer names: two answers one
    # after the other, each held for the delay.
    with SERVERS[server](bucket, delay=DELAY) as endpoint:
        start = time.perf_counter()
        labels = _labels_of_ours(f"s3://{store.BUCKET}/{store.KEY}", storage_options=_anonymous(endpoint))
        elapsed = time.perf_counter() - start
    assert len(labels) == ROWS
    assert elapsed >= 2 * DELAY


def test_a_missing_key_is_not_found_on_both_servers(bucket):
    for server in SERVERS.values():
        with server(bucket) as endpoint:
            with pytest.raises(FileNotFoundError):
                store.ours(f"s3://{store.BUCKET}/missing.parquet", storage_options=_anonymous(endpoint))


def test_the_echo_module_is_found_beside_nginx():
    executable = _nginx()
    # Debian's nginx-light, which xtask installs, depends on the echo module.
    module = nginx_s3.NginxS3Server.echo_module(executable)
    assert module is not None and module.name == "ngx_http_echo_module.so"
    # An executable that cannot be run has no module.
    assert nginx_s3.NginxS3Server.echo_module("/nonexistent/nginx") is None
