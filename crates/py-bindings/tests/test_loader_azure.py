"""Azure Blob Storage (`az://`, `abfs://`): `object_store`'s Azure client takes no suffix range,
so an object is opened with its metadata first and then its tail. A loopback server that answers
as Blob Storage does (HEAD with the size and validators, GET of byte ranges) serves a Parquet
file."""

import email.utils
import io
import re
import socketserver
import threading
import http.server

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrow_dlpack as ad

ROWS = 100_000


@pytest.fixture
def blob_server():
    """A Blob Storage stand-in on loopback serving one Parquet file at every path, and the
    requests it saw (method, range)."""
    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": np.arange(ROWS, dtype=np.int64)}), buffer, row_group_size=30_000)
    data = buffer.getvalue()
    modified = email.utils.formatdate(1_700_000_000, usegmt=True)
    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, status, length, extra=()):
            self.send_response(status)
            self.send_header("Content-Length", str(length))
            self.send_header("ETag", '"0x8DB1"')
            self.send_header("Last-Modified", modified)
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()

        def do_HEAD(self):  # noqa: N802 - the method's name is http.server's
            requests.append(("HEAD", None))
            self._answer(200, len(data))

        def do_GET(self):  # noqa: N802
            asked = self.headers.get("x-ms-range") or self.headers.get("Range")
            requests.append(("GET", asked))
            match = re.fullmatch(r"bytes=(\d+)-(\d+)", asked or "")
            if match is None:
                self._answer(200, len(data))
                self.wfile.write(data)
                return
            start, end = int(match.group(1)), int(match.group(2))
            body = data[start : end + 1]
            self._answer(206, len(body), [("Content-Range", f"bytes {start}-{end}/{len(data)}")])
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("scheme", ["az", "abfs"])
def test_an_azure_object_is_opened_by_its_metadata_then_read_whole(blob_server, scheme):
    port, requests = blob_server
    options = {
        "azure_storage_account_name": "devstoreaccount1",
        "skip_signature": "true",
        "azure_endpoint": f"http://127.0.0.1:{port}/devstoreaccount1",
        "allow_http": "true",
        "max_retries": "0",
    }
    values = [
        np.from_dlpack(batch["x"]).copy()
        for batch in ad.batches(f"{scheme}://container/a.parquet", 4096, storage_options=options)
    ]
    assert np.array_equal(np.concatenate(values), np.arange(ROWS))
    # The metadata first (no suffix range), then bounded ranges only.
    assert requests[0] == ("HEAD", None)
    assert all(method == "GET" and asked.startswith("bytes=") for method, asked in requests[1:])
