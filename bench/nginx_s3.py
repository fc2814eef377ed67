"""nginx on loopback as a per-byte S3 server at disk speed, for the object-storage benchmark.

nginx serves a directory's files as they are: a path-style S3 ``GET /<bucket>/<key>`` (what
``object_store`` and pyarrow's ``S3FileSystem`` send to an ``endpoint`` without a virtual host)
is the file ``<root>/<bucket>/<key>``, a ``Range`` is answered from the file with ``sendfile``,
and every answer carries ``ETag``, ``Last-Modified`` and ``Content-Length``: what an S3 client
needs of ``GetObject`` and ``HeadObject`` without authentication (``skip_signature`` for ours,
``anonymous=True`` for pyarrow). A request costs what its bytes cost, as S3's and MinIO's do, and
the server is not the bottleneck of a reader on the same machine, which Python's
``ThreadingHTTPServer`` (``loader_object_store.StaticS3Server``) was at about 1 GB/s.

Other servers were tried and not kept: moto reads the whole object for every request (a pass
measures its number of requests), and ``s3s-fs`` (the ``s3s`` crate's file-system server) hashes
the whole object with MD5 for the ``ETag`` of every ``GetObject``, whatever its range.

With ``delay``, every answer waits that long before its first byte, as a server in another region
would (the read-ahead rows of ``loader_object_latency.py``): the request goes through the echo
module's ``echo_sleep`` (a timer of nginx's event loop, no thread held) and then to the file. The
module is Debian's ``libnginx-mod-http-echo``, which ``nginx-light`` depends on;
`NginxS3Server.echo_module()` finds it.

`cargo xtask bench` installs nginx (Debian's ``nginx-light``) when it is missing and it may; where
it is not installed, `NginxS3Server.find()` gives ``None`` and the benchmark says the rows are
left out.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

CONFIG = """\
{modules}{user}
worker_processes 2;
pid {state}/nginx.pid;
error_log {state}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    default_type application/octet-stream;
    client_body_temp_path {state}/body;
    proxy_temp_path {state}/proxy;
    fastcgi_temp_path {state}/fastcgi;
    uwsgi_temp_path {state}/uwsgi;
    scgi_temp_path {state}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        {location}
    }}
}}
"""


class NginxS3Server:
    """nginx serving ``root`` on a free loopback port until `stop` (or the ``with`` block ends)."""

    def __init__(self, executable: str, root: Path, delay: float = 0.0):
        self.root = root
        self.delay = delay
        if delay > 0:
            module = self.echo_module(executable)
            if module is None:
                raise RuntimeError("nginx's echo module (libnginx-mod-http-echo) is not installed")
            modules = f"load_module {module};\n"
            # The sleep runs in the location of every request, then hands it to the files.
            location = f"location / {{ echo_sleep {delay:.3f}; echo_exec @file; }} location @file {{ }}"
        else:
            modules, location = "", "location / { }"
        self._state = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = self._state / "nginx.conf"
        # As root, nginx's workers become `nobody`, who may not read a private temporary folder.
        user = "user root;" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
        config.write_text(
            CONFIG.format(
                modules=modules, user=user, state=self._state, port=self.port, root=root, location=location
            )
        )
        self._process = subprocess.Popen(
            [executable, "-c", str(config), "-p", str(self._state), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while True:
            if self._process.poll() is not None:
                error = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                raise RuntimeError(f"nginx exited with {self._process.returncode}: {error.strip()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("nginx did not listen within 10 s")
                time.sleep(0.05)

    @staticmethod
    def find() -> Optional[str]:
        """The nginx executable, or None."""
        return shutil.which("nginx") or next(
            (path for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(path, os.X_OK)),
            None,
        )

    @staticmethod
    def echo_module(executable: str) -> Optional[Path]:
        """The echo module's file for ``executable`` (under its ``--modules-path``), or None."""
        try:
            built = subprocess.run([executable, "-V"], capture_output=True, text=True, timeout=10).stderr
        except (OSError, subprocess.SubprocessError):
            return None
        folders = [word.split("=", 1)[1] for word in built.split() if word.startswith("--modules-path=")]
        for folder in folders + ["/usr/lib/nginx/modules"]:
            module = Path(folder) / "ngx_http_echo_module.so"
            if module.is_file():
                return module
        return None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._state, ignore_errors=True)

    def __enter__(self) -> "NginxS3Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
