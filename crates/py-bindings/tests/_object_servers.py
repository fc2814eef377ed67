"""An HTTP file server on loopback for the object-storage tests, loaded by path by them.

``RangeServer`` serves bytes by path with byte ranges, ETags and last-modified times (and
"304 Not Modified" to an ``If-None-Match`` naming the ETag), and has
switches that a test flips: fail the next requests with 503, stop answering, leave out the
validators. A test may also answer requests itself (``server.handler``), as a hostile server
would, and read every request received (``server.seen``: method, path and lowercase headers).
"""

import contextlib
import http.server
import ssl
import threading


class RangeServer(http.server.ThreadingHTTPServer):
    """An HTTP file server with byte ranges, ETags and last-modified times, and switches."""

    daemon_threads = True

    def __init__(self, files):
        self.files = files
        self.fail_next = 0
        self.stall = threading.Event()
        self.stopping = threading.Event()
        self.requests = 0
        #: Answers "304 Not Modified" sent (to an ``If-None-Match`` naming the file's ETag).
        self.not_modified = 0
        self.validators = True
        #: Send weak ETags (``W/"..."``), which may stay the same when the bytes change.
        self.weak_etags = False
        #: Called with the request handler before anything else; returns True when it answered.
        self.handler = None
        #: Every request: (method, path, {lowercase header: value}).
        self.seen = []
        #: Bytes written by ``stream_zeros``, and the streams still being written.
        self.streamed = 0
        self.streaming = 0
        self.lock = threading.Lock()
        #: "https" once the socket is wrapped in TLS (``range_server(..., tls=...)``).
        self.scheme = "http"
        super().__init__(("127.0.0.1", 0), RangeHandler)

    @property
    def base(self):
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"


class RangeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def stream_zeros(self, status, headers, total):
        """Answers ``status`` with ``headers``, then zeros in 64 KiB writes until ``total`` bytes
        were sent or the client went away; then closes the connection."""
        server = self.server
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = bytes(64 * 1024)
        sent = 0
        with server.lock:
            server.streaming += 1
        try:
            while sent < total and not server.stopping.is_set():
                size = min(len(chunk), total - sent)
                self.wfile.write(chunk[:size])
                sent += size
                with server.lock:
                    server.streamed += size
        except OSError:
            pass
        finally:
            with server.lock:
                server.streaming -= 1

    def _answer(self, body):
        server = self.server
        server.requests += 1
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        server.seen.append(
            (self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        )
        if server.handler is not None and server.handler(self):
            return
        if server.stall.is_set():
            server.stopping.wait(30)
            self.close_connection = True
            return
        if server.fail_next > 0:
            server.fail_next -= 1
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = server.files.get(self.path)
        if data is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        weak = "W/" if server.weak_etags else ""
        etag = f'{weak}"{len(data)}-{hash(data) & 0xFFFF}"'
        if server.validators and self.headers.get("If-None-Match") == etag:
            server.not_modified += 1
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        start, end = 0, len(data)
        ranged = self.headers.get("Range")
        if ranged:
            first, last = ranged.removeprefix("bytes=").split("-")
            if first:
                start, end = int(first), min(int(last) + 1 if last else len(data), len(data))
            else:
                start = max(len(data) - int(last), 0)
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(end - start))
        if server.validators:
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", "Tue, 01 Dec 2026 00:00:00 GMT")
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if body:
            self.wfile.write(data[start:end])

    def do_GET(self):
        self._answer(True)

    def do_HEAD(self):
        self._answer(False)

    def do_PUT(self):
        self._answer(True)


@contextlib.contextmanager
def range_server(files, tls=None):
    """A started ``RangeServer`` of ``files`` (path -> bytes) and its base URL; with ``tls``, a
    ``(certificate file, key file)`` pair, it answers HTTPS with that certificate."""
    server = RangeServer(files)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.scheme = "https"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, server.base
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(30)
