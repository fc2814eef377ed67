"""The loader over object storage: the loader's Parquet workload read through ``s3://`` from a
real S3 server on loopback (moto's), beside the same file read locally and pyarrow's own S3
reading.

The workload is ``loader_methods``'s (16 float32 features, an int64 label, an
``arrow.fixed_shape_tensor`` float32[8] embedding; Snappy Parquet, row groups of 131,072 rows).
Each method makes every batch of 1,024 rows into torch tensors: features (B, 16) float32,
labels (B,), embeddings (B, 8):

- ours, local: ``ad.batches(path, ...)``;
- ours, S3: ``ad.batches("s3://bench/workload.parquet", ..., storage_options={"endpoint": ...})``;
- pyarrow, S3: ``pyarrow.fs.S3FileSystem(endpoint_override=...)``, ``ParquetFile.iter_batches``,
  rebatched, ``to_tensor`` and ``torch.from_dlpack``, as ``loader_methods.by_hand`` does;
- ours, S3 with ``cache_dir``: a later epoch, whose ranges the warm-up pass left in the cache
  (the footer from the per-byte server below).

moto's server reads the whole object for every request, whatever its range, so on it a pass
measures the number of requests. Both S3 methods therefore run a second time against a server
whose cost is per byte, as S3's and MinIO's are: a static file server written here
(``StaticS3Server``, Python's ``ThreadingHTTPServer``) that answers S3's path-style ``GET`` and
``HEAD`` of the file, ranges included, reading only the bytes asked for, without authentication
(``skip_signature`` for ours, ``anonymous=True`` for pyarrow). That server moves about 1 GB/s,
which is less than a pass reads locally, so both S3 methods run a third time against nginx
(``nginx_s3.py``: the same requests, answered with ``sendfile`` at disk speed), where nginx is
installed (``cargo xtask bench`` installs it); without it those rows are left out, and said so.

Methods alternate, the order rotated every repetition; the peak memory of one S3 pass is
measured in a fresh subprocess against docs/loader.md's bound with fetches in flight.

    python loader_object_store.py [--rows 2000000] [--repetitions 5] [--output FILE]

``bench_loader.py`` runs it too and appends its section (``### Object storage``) to the loader's.
"""

import argparse
import contextlib
import email.utils
import http.server
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pyarrow.parquet as pq
import torch

import arrow_dlpack as ad

from loader_methods import CHUNK, FEATURES, ROW_BYTES, by_hand, count, emit, log, make_table, ours_triple, rebatch
from nginx_s3 import NginxS3Server

BATCH = 1024
BUCKET = "bench"
KEY = "workload.parquet"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}

# The compressed bytes a decoding thread fetches ahead of the row group it decodes: at least one
# row group, and more while they hold at most this (crates/loader/src/parquet/fetch_ahead.rs).
FETCH_AHEAD_BYTES = 48 << 20
# The loader's fixed costs (docs/loader.md), plus the fetch runtime's two threads and its HTTP
# client (connection pool, TLS-free here).
FIXED_BYTES = 512 * 1024 + 4 * 1024 * 1024

# The profiles of the section's misses, measured by hand and appended to its text.
NOTES = Path(__file__).resolve().parent / "object_store_notes.md"


def _options(endpoint: str) -> Dict[str, str]:
    return {"endpoint": endpoint, "region": "us-east-1", **CREDENTIALS}


class StaticS3Server(http.server.ThreadingHTTPServer):
    """Answers ``GET`` and ``HEAD /<bucket>/<key>`` (S3's path style) with the file ``root/<key>``:
    ``Range`` (``a-b``, ``a-``, ``-n``) read from the file with ``os.pread``, ``ETag``,
    ``Last-Modified``; no listing, no authentication."""

    daemon_threads = True

    def __init__(self, root: Path, delay: float = 0.0):
        self.root = root
        #: Seconds every answer waits before its first byte, as a server far away would.
        self.delay = delay
        #: The ``Range`` header of every ``GET`` answered (None for a whole object), in order.
        self.ranges: List[Optional[str]] = []
        super().__init__(("127.0.0.1", 0), _StaticS3Handler)

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _StaticS3Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # one line per request would drown the bench's output
        pass

    def _answer(self, body: bool) -> None:
        if self.server.delay:
            time.sleep(self.server.delay)
        bucket, _, key = self.path.lstrip("/").partition("/")
        path = self.server.root / key.split("?")[0]
        if bucket != BUCKET or not path.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        stat = path.stat()
        size = stat.st_size
        start, end = 0, size
        ranged = self.headers.get("Range")
        if ranged and ranged.startswith("bytes="):
            first, _, last = ranged[len("bytes="):].partition("-")
            if first == "":
                start = max(0, size - int(last))
            else:
                start = int(first)
                end = min(size, int(last) + 1) if last else size
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{stat.st_size:x}-{stat.st_mtime_ns:x}"')
        self.send_header("Last-Modified", email.utils.formatdate(stat.st_mtime, usegmt=True))
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if not body:
            return
        self.server.ranges.append(ranged)
        with open(path, "rb") as handle:
            offset = start
            while offset < end:
                chunk = os.pread(handle.fileno(), min(1 << 22, end - offset), offset)
                self.wfile.write(chunk)
                offset += len(chunk)

    def do_GET(self):
        self._answer(body=True)

    def do_HEAD(self):
        self._answer(body=False)


def ours(source: str, **options: object):
    return ad.batches(source, BATCH, groups={"features": FEATURES}, columns=["label", "embedding"], **options)


def _methods(
    path: Path, endpoint: str, static: str, nginx: Optional[str], cache_dir: Path
) -> Dict[str, Callable[[], int]]:
    from pyarrow import fs

    url = f"s3://{BUCKET}/{KEY}"
    s3 = fs.S3FileSystem(
        endpoint_override=endpoint,
        scheme="http",
        region="us-east-1",
        access_key=CREDENTIALS["aws_access_key_id"],
        secret_key=CREDENTIALS["aws_secret_access_key"],
    )
    def s3_anonymous(server: str):
        return fs.S3FileSystem(endpoint_override=server, scheme="http", region="us-east-1", anonymous=True)

    def by_pyarrow(filesystem) -> Callable[[], int]:
        def read() -> int:
            with filesystem.open_input_file(f"{BUCKET}/{KEY}") as handle:
                reader = pq.ParquetFile(handle)
                return count(by_hand(b) for b in rebatch(reader.iter_batches(batch_size=BATCH), BATCH))

        return read

    def anonymous(server: str) -> Dict[str, str]:
        return {"endpoint": server, "region": "us-east-1", "skip_signature": "true"}

    methods = {
        "ours-local": lambda: count(ours_triple(b) for b in ours(str(path))),
        "ours-s3": lambda: count(ours_triple(b) for b in ours(url, storage_options=_options(endpoint))),
        # The warm-up pass fills the cache; every measured pass is a later epoch, which asks the
        # server (the per-byte one: moto's answer to any request costs a whole read of the
        # object) for the footer only.
        "ours-cached": lambda: count(
            ours_triple(b)
            for b in ours(url, storage_options=anonymous(static), cache_dir=str(cache_dir))
        ),
        "pyarrow-s3": by_pyarrow(s3),
        "ours-static": lambda: count(ours_triple(b) for b in ours(url, storage_options=anonymous(static))),
        "pyarrow-static": by_pyarrow(s3_anonymous(static)),
    }
    if nginx is not None:
        methods["ours-nginx"] = lambda: count(ours_triple(b) for b in ours(url, storage_options=anonymous(nginx)))
        methods["pyarrow-nginx"] = by_pyarrow(s3_anonymous(nginx))
    return methods


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_child(endpoint: str) -> None:
    """One S3 pass; prints the growth of the peak RSS and of anonymous memory."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    before = _status_kib("VmRSS")
    anon_before = _status_kib("RssAnon")
    peak_anon = anon_before
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_anon
        while not stop.is_set():
            peak_anon = max(peak_anon, _status_kib("RssAnon"))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rows = count(
        ours_triple(b) for b in ours(f"s3://{BUCKET}/{KEY}", storage_options=_options(endpoint))
    )
    stop.set()
    sampler.join()
    print(
        json.dumps(
            {
                "rows": rows,
                "hwm_growth": (_status_kib("VmHWM") - before) * 1024,
                "anon_growth": (peak_anon - anon_before) * 1024,
            }
        )
    )


def memory_bound(path: Path, rows: int) -> tuple:
    """docs/loader.md's bound for Parquet over object storage, with the defaults (prefetch 2,
    decode_threads = min(cores, 4))."""
    threads = min(os.cpu_count() or 1, 4)
    batch_bytes = BATCH * ROW_BYTES
    group_bytes = min(CHUNK, rows) * ROW_BYTES
    groups = -(-rows // CHUNK)
    # A fetched range of 1 MiB and more is held in a block of the warm-page pool, its size
    # rounded up to 2 MiB (crates/loader/src/remote/gather.rs); this workload coalesces a row
    # group's column chunks into one range.
    compressed = path.stat().st_size // groups
    if compressed >= 1 << 20:
        compressed = -(-compressed // (2 << 20)) * (2 << 20)
    pending = (-(-BATCH // CHUNK) + 1) * group_bytes
    bound = (2 + 2) * batch_bytes + FIXED_BYTES + pending
    ahead = max(compressed, FETCH_AHEAD_BYTES)
    bound += threads * (2 * group_bytes + compressed + ahead)
    text = (
        f"(2 + 2) × {_mb(batch_bytes)} batches + {_mb(FIXED_BYTES)} fixed + {_mb(pending)} pending "
        f"row groups + {threads} threads × (2 × {_mb(group_bytes)} decoded + "
        f"{_mb(compressed)} fetched row group in its pool block + {_mb(ahead)} fetched ahead)"
    )
    return bound, text


def _mb(count_bytes: float) -> str:
    return f"{count_bytes / 1e6:.1f} MB"


def run(rows: int, repetitions: int, log: Callable[[str], None]) -> str:
    import boto3
    from moto.server import ThreadedMotoServer

    torch.set_num_threads(1)
    # moto's server logs every request.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # moto keeps an object in memory up to this size and in a temporary file beyond it, and
    # reads the whole object for every range request: in memory, a request costs one copy.
    os.environ.setdefault("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(1 << 31))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        with contextlib.ExitStack() as stack:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-object-store-"))
            path = Path(directory) / KEY
            static = StaticS3Server(Path(directory))
            threading.Thread(target=static.serve_forever, daemon=True).start()
            nginx_executable = NginxS3Server.find()
            log(f"==> object storage: writing {rows:,} rows and uploading them to moto")
            pq.write_table(make_table(rows), path, row_group_size=CHUNK, compression="snappy")
            client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **CREDENTIALS)
            client.create_bucket(Bucket=BUCKET)
            client.upload_file(str(path), BUCKET, KEY)
            nginx = None
            if nginx_executable is not None:
                # nginx serves `<root>/<bucket>/<key>`: the same file, linked into a bucket.
                bucket = Path(directory) / "nginx-root" / BUCKET
                bucket.mkdir(parents=True)
                os.link(path, bucket / KEY)
                nginx = stack.enter_context(NginxS3Server(nginx_executable, bucket.parent))
            else:
                log("    nginx was not found: its rows are left out")
            methods = _methods(
                path, endpoint, static.endpoint, nginx.endpoint if nginx else None, Path(directory) / "cache"
            )
            keys = list(methods)
            for key in keys:
                methods[key]()  # warm-up
            times: Dict[str, List[float]] = {key: [] for key in keys}
            for repetition in range(repetitions):
                shift = repetition % len(keys)
                for key in keys[shift:] + keys[:shift]:
                    start = time.perf_counter()
                    seen = methods[key]()
                    times[key].append(time.perf_counter() - start)
                    assert abs(seen - rows) < BATCH, (key, seen)
                log(f"   object storage: repetition {repetition + 1}/{repetitions} done")
            # The profile of the server: the seconds moto takes to answer a 100-byte range of the
            # object (it reads the whole object for every request), against which a pass's
            # requests are counted.
            tiny = []
            for _ in range(5):
                start = time.perf_counter()
                client.get_object(Bucket=BUCKET, Key=KEY, Range="bytes=0-99")["Body"].read()
                tiny.append(time.perf_counter() - start)
            requests = 1 + pq.ParquetFile(path).metadata.num_row_groups
            output = subprocess.run(
                [sys.executable, __file__, "--rss-child", endpoint],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            memory = json.loads(output.strip().splitlines()[-1])
            bound, bound_text = memory_bound(path, rows)
            size = path.stat().st_size
            static.shutdown()
    finally:
        server.stop()
    return render(rows, size, times, memory, bound, bound_text, statistics.median(tiny), requests)


def render(rows, size, times, memory, bound, bound_text, tiny, requests) -> str:
    median = {key: statistics.median(values) for key, values in times.items()}

    def cell(key: str) -> str:
        values = times[key]
        return f"{median[key]:.3f} ({min(values):.3f}-{max(values):.3f})"

    local_ratio = median["ours-local"] / median["ours-s3"]
    pyarrow_ratio = median["pyarrow-s3"] / median["ours-s3"]
    static_local_ratio = median["ours-local"] / median["ours-static"]
    static_pyarrow_ratio = median["pyarrow-static"] / median["ours-static"]
    def met(ok: bool) -> str:
        return "met" if ok else "**missed**"

    cached_ratio = median["ours-local"] / median["ours-cached"]
    nginx = "ours-nginx" in times
    if nginx:
        nginx_local_ratio = median["ours-local"] / median["ours-nginx"]
        nginx_pyarrow_ratio = median["pyarrow-nginx"] / median["ours-nginx"]
        nginx_targets = [
            f"| the same from nginx: over S3 / the local file (ours) "
            f"| {nginx_local_ratio:.2f}x | >= 0.8x | {met(nginx_local_ratio >= 0.8)} |",
            f"| the same from nginx: ours / pyarrow's S3 reading "
            f"| {nginx_pyarrow_ratio:.2f}x | >= 2x | {met(nginx_pyarrow_ratio >= 2)} |",
        ]
    else:
        nginx_targets = [
            "| the same from nginx (a per-byte server at disk speed) | not run: nginx was not "
            "found | >= 0.8x, >= 2x | **not measured** |"
        ]
    measured = max(memory["hwm_growth"], memory["anon_growth"])

    def row(source: str, ours_key: str, pyarrow_key: Optional[str] = None) -> str:
        pyarrow = cell(pyarrow_key) if pyarrow_key else ""
        return f"| {source} | {cell(ours_key)} | {pyarrow} |"

    notes = NOTES.read_text().strip() if NOTES.is_file() else ""
    return "\n".join(
        [
            "### Object storage",
            "",
            f"The Parquet workload above ({rows:,} rows, {size / 1e6:.1f} MB, row groups of "
            f"{CHUNK:,} rows) read through `s3://` from three S3 servers on loopback, beside the "
            "same file read locally; ours is `ad.batches(\"s3://...\", storage_options=...)`, "
            "pyarrow's is its own S3 filesystem by hand (`pyarrow.fs.S3FileSystem(endpoint_override=...)`, "
            "`iter_batches`, `to_tensor`). The servers: moto's `ThreadedMotoServer` (S3's API with "
            "authentication; it reads the whole object for every request), the per-byte static "
            "server of `bench/loader_object_store.py` (`StaticS3Server`: path-style `GET` and `HEAD` "
            "with ranges, each read with `pread`, one Python thread per request, about 1 GB/s) and "
            "nginx (`bench/nginx_s3.py`: the file served with `sendfile`, at disk speed), where it "
            "is installed. "
            f"B = {BATCH:,}; wall-clock seconds per pass, the median of {len(times['ours-s3'])} "
            "alternating repetitions and the range.",
            "",
            # The chart is drawn from the table below by charts.py, which `cargo xtask bench` runs last.
            "![Bar chart of the seconds per pass over each S3 server and from the cache, ours beside "
            "pyarrow's S3 reading: lower is better](benchmarks-object-storage.svg)",
            "",
            "| source | **ours**: s | pyarrow by hand: s |",
            "|---|---|---|",
            row("the local file", "ours-local"),
            row("moto", "ours-s3", "pyarrow-s3"),
            row("the per-byte static server", "ours-static", "pyarrow-static"),
            row(
                "the per-byte static server, a later epoch with `cache_dir` (the ranges from the "
                "local cache, the footer from the server)",
                "ours-cached",
            ),
            *([row("nginx", "ours-nginx", "pyarrow-nginx")] if nginx else []),
            "",
            "| target | measured | target | |",
            "|---|---|---|---|",
            f"| throughput over S3 / throughput of the local file (ours) | {local_ratio:.2f}x | >= 0.8x "
            f"| {met(local_ratio >= 0.8)} |",
            f"| throughput over S3: ours / pyarrow's S3 reading | {pyarrow_ratio:.2f}x | >= 2x "
            f"| {met(pyarrow_ratio >= 2)} |",
            f"| the same from the per-byte static server: over S3 / the local file (ours) "
            f"| {static_local_ratio:.2f}x | >= 0.8x | {met(static_local_ratio >= 0.8)} |",
            f"| the same from the per-byte static server: ours / pyarrow's S3 reading "
            f"| {static_pyarrow_ratio:.2f}x | >= 2x | {met(static_pyarrow_ratio >= 2)} |",
            *nginx_targets,
            f"| a later epoch with `cache_dir`: throughput / throughput of the local file (ours) "
            f"| {cached_ratio:.2f}x | >= 0.9x | {met(cached_ratio >= 0.9)} |",
            f"| peak memory of an S3 pass (peak RSS growth {_mb(memory['hwm_growth'])}, anonymous "
            f"{_mb(memory['anon_growth'])}; the larger); bound {bound_text} | {_mb(measured)} "
            f"| <= {_mb(bound)} | {met(measured <= bound)} |",
            "",
            f"Profile of the pass from moto: moto answers a 100-byte range of this object in {tiny:.3f} s "
            "(the median of 5 `get_object` calls in this run): its S3 server reads the whole object "
            "for every request, whatever the range, and its work holds Python's GIL, so that "
            f"concurrent requests barely overlap. Our pass makes {requests} requests (the footer, "
            f"then one coalesced range per row group), {requests} × {tiny:.3f} = "
            f"{requests * tiny:.2f} s of the server's time, "
            f"{100 * requests * tiny / median['ours-s3']:.0f}% of the {median['ours-s3']:.2f} s "
            "measured; pyarrow's "
            f"{median['pyarrow-s3']:.2f} s is about {median['pyarrow-s3'] / tiny:.0f} such requests. "
            "So on moto neither of the first two targets can be read off the pass; the per-byte "
            "servers' rows measure what S3 itself or MinIO would give, and nginx keeps up with "
            "any reader on this machine.",
            *(["", notes] if notes else []),
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--rss-child", metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return 0
    page = run(args.rows, args.repetitions, log)
    emit(page, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
