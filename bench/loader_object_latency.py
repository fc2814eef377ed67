"""Read-ahead against latency: the loader's Parquet workload from a per-byte S3 server on
loopback whose every answer waits 20 ms before its first byte, as a server in another region
would, beside the same file read locally.

The workload is ``loader_methods``'s (16 float32 features, an int64 label, a float32[8]
embedding; Snappy Parquet) in two layouts: row groups of 131,072 rows (about 13 MB compressed
each here, projected) and of 8,192 rows (about 0.9 MB). A decoding thread fetches the row groups
after the one it decodes by a budget of bytes (docs/loader.md, "Requests"): one 13 MB row group
ahead, or dozens of small ones, so that the 20 ms of each request overlap.

Each pass makes every batch of 1,024 rows into torch tensors, as ``loader_object_store`` does;
methods alternate, the order rotated every repetition.

    python loader_object_latency.py [--rows 2000000] [--repetitions 3] [--delay 0.02]
"""

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch

from loader_methods import count, make_table, ours_triple
from loader_object_store import BUCKET, KEY, StaticS3Server, ours


def run(rows: int, repetitions: int, delay: float) -> str:
    torch.set_num_threads(1)
    lines = [
        "| row group | local file: s | S3 with a delay of "
        f"{delay * 1000:.0f} ms a request: s | local / S3 throughput |",
        "|---|---|---|---|",
    ]
    for group in (131_072, 8_192):
        with tempfile.TemporaryDirectory(prefix="bench-latency-") as directory:
            path = Path(directory) / KEY
            pq.write_table(make_table(rows), path, row_group_size=group, compression="snappy")
            groups = pq.ParquetFile(path).metadata.num_row_groups
            server = StaticS3Server(Path(directory), delay=delay)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            options = {"endpoint": server.endpoint, "region": "us-east-1", "skip_signature": "true"}
            methods = {
                "local": lambda: count(ours_triple(b) for b in ours(str(path))),
                "s3": lambda: count(
                    ours_triple(b) for b in ours(f"s3://{BUCKET}/{KEY}", storage_options=options)
                ),
            }
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
            server.shutdown()
        local, remote = (statistics.median(times[key]) for key in ("local", "s3"))
        lines.append(
            f"| {group:,} rows ({groups} row groups) | {local:.3f} ({min(times['local']):.3f}-{max(times['local']):.3f}) "
            f"| {remote:.3f} ({min(times['s3']):.3f}-{max(times['s3']):.3f}) | {local / remote:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.02)
    args = parser.parse_args()
    print(run(args.rows, args.repetitions, args.delay))
    return 0


if __name__ == "__main__":
    sys.exit(main())
