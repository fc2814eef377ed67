"""A cache shared by ranks and DataLoader workers: is it filled once?

The loader's Parquet workload (``loader_methods``: 16 float32 features, an int64 label, a
float32[8] embedding; Snappy, row groups of 32,768 rows here, so that a shuffled epoch deals
them differently) is served by the per-byte S3 server of ``loader_object_store``
(``StaticS3Server``), which records the range of every request. Two rank processes, each a
``torch.utils.data.DataLoader`` with 2 worker processes over
``ad.BatchDataset("s3://...", rank=r, world_size=2, shuffle=True, cache_dir=<one folder>)``,
read two epochs; the ranks wait for each other between the epochs, as a training job's
collective calls make them. The second epoch deals the row groups to other workers than the
first did, so each one a worker reads there was fetched by another process.

Measured: the requests for row groups' ranges (every request but the footers' suffix ranges)
against the distinct ranges asked for, and the bytes they moved against the file's size; and
the rows each epoch gave over the four workers, against the file's rows.

    python loader_object_cache.py [--rows 500000] [--output FILE]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable, Dict, List

import pyarrow.parquet as pq

from loader_methods import FEATURES, emit, log, make_table
from loader_object_store import BUCKET, KEY, StaticS3Server

ROW_GROUP = 32_768
BATCH = 1_024
RANKS = 2
WORKERS = 2
EPOCHS = 2


def rank_child(endpoint: str, cache: str, rank: int) -> None:
    """One rank: a DataLoader with its workers over the shared cache, an epoch at a time; after
    each epoch it prints the rows read and waits for a line on stdin before the next."""
    import torch
    from torch.utils.data import DataLoader

    import arrow_dlpack as ad

    dataset = ad.BatchDataset(
        f"s3://{BUCKET}/{KEY}",
        BATCH,
        groups={"features": FEATURES},
        columns=["label"],
        shuffle=True,
        seed=5,
        rank=rank,
        world_size=RANKS,
        cache_dir=cache,
        storage_options={"endpoint": endpoint, "region": "us-east-1", "skip_signature": "true"},
    )
    loader = DataLoader(dataset, batch_size=None, num_workers=WORKERS, multiprocessing_context="fork")
    torch.set_num_threads(1)
    for epoch in range(EPOCHS):
        dataset.set_epoch(epoch)
        rows = sum(int(batch["label"].shape[0]) for batch in loader)
        print(json.dumps({"epoch": epoch, "rows": rows}), flush=True)
        sys.stdin.readline()


def run(rows: int, log: Callable[[str], None]) -> str:
    with tempfile.TemporaryDirectory(prefix="bench-object-cache-") as directory:
        path = Path(directory) / KEY
        pq.write_table(make_table(rows), path, row_group_size=ROW_GROUP, compression="snappy")
        groups = pq.ParquetFile(path).metadata.num_row_groups
        size = path.stat().st_size
        server = StaticS3Server(Path(directory))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        cache = str(Path(directory) / "cache")
        log(f"==> a cache shared by {RANKS} ranks x {WORKERS} workers: {groups} row groups, {EPOCHS} epochs")
        children = [
            subprocess.Popen(
                [sys.executable, __file__, "--rank-child", server.endpoint, cache, str(rank)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for rank in range(RANKS)
        ]
        epochs: List[int] = []
        for _ in range(EPOCHS):
            read = [json.loads(child.stdout.readline()) for child in children]
            epochs.append(sum(line["rows"] for line in read))
            for child in children:  # every rank finished the epoch: the next may begin
                child.stdin.write("\n")
                child.stdin.flush()
        for child in children:
            if child.wait(timeout=600) != 0:
                raise SystemExit(f"a rank of the shared-cache bench failed ({child.returncode})")
        server.shutdown()
    fetched = [ranged for ranged in server.ranges if ranged and not ranged.startswith("bytes=-")]
    moved = 0
    for ranged in fetched:
        first, _, last = ranged[len("bytes="):].partition("-")
        moved += int(last) + 1 - int(first)
    distinct = len(set(fetched))
    once = len(fetched) == distinct and all(count == rows for count in epochs)
    given = ", ".join(f"{count:,}" for count in epochs)
    return "\n".join(
        [
            "### A cache shared by ranks and workers",
            "",
            f"`bench/loader_object_cache.py`: {rows:,} rows of the workload in {groups} row groups "
            f"({size / 1e6:.1f} MB), served by the per-byte static server, which records every "
            f"request's range; {RANKS} rank processes, each a `DataLoader` with {WORKERS} worker "
            f"processes over `ad.BatchDataset(\"s3://...\", rank=r, world_size={RANKS}, "
            f"shuffle=True, cache_dir=...)` with one `cache_dir`, read {EPOCHS} epochs, waiting "
            "for each other between them. The second epoch deals the row groups to other workers "
            "than the first, so what a worker reads there another process fetched.",
            "",
            "| target | measured | target | |",
            "|---|---|---|---|",
            f"| requests for row groups' ranges (the footers' suffix ranges aside) over "
            f"{EPOCHS} epochs of {RANKS} ranks x {WORKERS} workers sharing one `cache_dir`, "
            f"against the distinct ranges asked for ({moved / 1e6:.1f} MB moved, the file "
            f"{size / 1e6:.1f} MB; rows given per epoch: {given} of {rows:,}) "
            f"| {len(fetched)} requests, {distinct} distinct | each range once, every row given "
            f"| {'met' if once else '**missed**'} |",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--rank-child", nargs=3, metavar=("ENDPOINT", "CACHE", "RANK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_child:
        endpoint, cache, rank = args.rank_child
        rank_child(endpoint, cache, int(rank))
        return 0
    page = run(args.rows, log)
    emit(page, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
