"""Read-ahead against latency: the loader's Parquet workload from per-byte S3 servers on
loopback whose every answer waits 20 ms before its first byte, as a server in another region
would, beside the same file read locally. The servers: nginx (``nginx_s3.py``, the sleep in its
echo module, the bytes sent at disk speed), where it is installed, and the static server of
``loader_object_store.py`` (Python, about 1 GB/s); the targets are judged on nginx where it
runs, since the static server's own sending is slower than a local pass.

The workload is ``loader_methods``'s (16 float32 features, an int64 label, a float32[8]
embedding; Snappy Parquet) in two layouts: row groups of 131,072 rows (about 13 MB compressed
each here, projected) and of 8,192 rows (about 0.9 MB). A decoding thread fetches the row groups
after the one it decodes by a budget of bytes (docs/loader.md, "Requests"): one 13 MB row group
ahead, or dozens of small ones, so that the 20 ms of each request overlap.

Each pass makes every batch of 1,024 rows into torch tensors, as ``loader_object_store`` does;
methods alternate, the order rotated every repetition. ``bench_loader.py`` runs it too and appends
its section (``### Read-ahead against latency``, with the target: at least 0.7x the local file's
throughput) to the loader's.

    python loader_object_latency.py [--rows 2000000] [--repetitions 3] [--delay 0.02]
"""

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq
import torch

from loader_methods import count, make_table, ours_triple
from loader_object_store import BUCKET, KEY, StaticS3Server, ours
from nginx_s3 import NginxS3Server

# The profile of the section's misses, measured by hand and appended to its text.
NOTES = Path(__file__).resolve().parent / "latency_notes.md"


def run(rows: int, repetitions: int, delay: float, log: Callable[[str], None] = lambda line: None) -> str:
    """The section ``### Read-ahead against latency``: its table and its targets."""
    torch.set_num_threads(1)
    executable = NginxS3Server.find()
    nginx = executable is not None and NginxS3Server.echo_module(executable) is not None
    if not nginx:
        log("    nginx or its echo module was not found: the nginx rows are left out")
    ms = f"{delay * 1000:.0f} ms"
    lines = [
        f"| row groups | local file: s | static server, {ms} a request: s | local / static |"
        + (f" nginx, {ms} a request: s | local / nginx |" if nginx else ""),
        "|---|---|---|---|" + ("---|---|" if nginx else ""),
    ]
    targets = []
    for group in (131_072, 8_192):
        log(f"==> read-ahead against latency: row groups of {group:,} rows")
        with tempfile.TemporaryDirectory(prefix="bench-latency-") as directory:
            # Both servers serve `<root>/<bucket>/<key>` (the static one is given the bucket).
            root = Path(directory)
            (root / BUCKET).mkdir()
            path = root / BUCKET / KEY
            pq.write_table(make_table(rows), path, row_group_size=group, compression="snappy")
            groups = pq.ParquetFile(path).metadata.num_row_groups
            group_mb = path.stat().st_size / groups / 1e6
            static = StaticS3Server(root / BUCKET, delay=delay)
            threading.Thread(target=static.serve_forever, daemon=True).start()
            endpoints = {"static": static.endpoint}
            nginx_server = NginxS3Server(executable, root, delay=delay) if nginx else None
            if nginx_server is not None:
                endpoints["nginx"] = nginx_server.endpoint

            def over(endpoint: str) -> Callable[[], int]:
                options = {"endpoint": endpoint, "region": "us-east-1", "skip_signature": "true"}
                url = f"s3://{BUCKET}/{KEY}"
                return lambda: count(ours_triple(b) for b in ours(url, storage_options=options))

            methods = {"local": lambda: count(ours_triple(b) for b in ours(str(path)))}
            methods.update({name: over(endpoint) for name, endpoint in endpoints.items()})
            try:
                for method in methods.values():
                    method()  # warm-up
                times = {key: [] for key in methods}
                for repetition in range(repetitions):
                    keys = list(methods)
                    shift = repetition % len(keys)
                    for key in keys[shift:] + keys[:shift]:
                        start = time.perf_counter()
                        methods[key]()
                        times[key].append(time.perf_counter() - start)
            finally:
                static.shutdown()
                static.server_close()
                if nginx_server is not None:
                    nginx_server.stop()
        median = {key: statistics.median(values) for key, values in times.items()}
        cell = lambda key: f"{median[key]:.3f} ({min(times[key]):.3f}-{max(times[key]):.3f})"
        layout = f"{group:,} rows ({groups} row groups of about {group_mb:.1f} MB)"
        row = f"| {layout} | {cell('local')} | {cell('static')} | {median['local'] / median['static']:.2f}x |"
        if nginx:
            row += f" {cell('nginx')} | {median['local'] / median['nginx']:.2f}x |"
        lines.append(row)
        judged = "nginx" if nginx else "static"
        ratio = median["local"] / median[judged]
        server = "nginx" if nginx else "the static server"
        targets.append(
            f"| row groups of {layout}: throughput over S3 ({server}, {ms} a request) / "
            f"the local file (ours) | {ratio:.2f}x | >= 0.7x | {'met' if ratio >= 0.7 else '**missed**'} |"
        )
    return "\n".join(
        [
            "### Read-ahead against latency",
            "",
            f"`bench/loader_object_latency.py`: the workload, {rows:,} rows, from per-byte S3 "
            f"servers on loopback with every answer held {ms} before its first byte (as a server "
            "in another region would: nginx, the sleep in its echo module, and the static server "
            "of the object-storage rows), beside the same file read locally, in two layouts of "
            "row groups; the targets are judged on nginx where it runs (the static server's own "
            "sending is slower than a local pass); B = 1,024, wall-clock seconds per pass, the median of "
            f"{repetitions} alternating repetitions and the range. A decoding thread fetches "
            "ahead of the row group it decodes by a budget of bytes (at least one row group, "
            "more while they hold at most 48 MiB, at most 32, with at most 32 requests in flight; "
            "`crates/loader/src/parquet/fetch_ahead.rs`).",
            "",
            *lines,
            "",
            "| target | measured | target | |",
            "|---|---|---|---|",
            *targets,
            *(["", NOTES.read_text().strip()] if NOTES.is_file() else []),
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.02)
    args = parser.parse_args()
    print(run(args.rows, args.repetitions, args.delay, lambda line: print(line, file=sys.stderr, flush=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
