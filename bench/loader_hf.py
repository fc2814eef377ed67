"""A Hugging Face ``datasets.Dataset`` as a source: ``ad.batches(ds, 1024)`` beside
``ds.with_format("torch").iter(1024)`` and beside ours over the same data as an Arrow IPC file.

The workload (the loader's): N rows (2,000,000 by default) of 16 float32 features, an int64
label and an 8-float embedding stored as ``Array2D((2, 4), "float32")``, written to Parquet and
loaded with ``Dataset.from_parquet`` (a memory-mapped cache file); the same table as an IPC file.
Each method reads every row once into torch tensors (features as one ``(B, 16)`` group for
ours, the 16 columns stacked for ``datasets``'s, which gives one tensor per column), methods
alternating, ``--repetitions`` times; the first batch of every method is compared first.

    python loader_hf.py [--rows 2000000] [--repetitions 3] [--output FILE]

It prints the section ``## Hugging Face datasets`` of docs/benchmarks.md.
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import torch

import arrow_dlpack as ad

BATCH = 1024
FEATURES = [f"f{i}" for i in range(16)]


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(0)
    columns = {name: rng.standard_normal(rows, dtype=np.float32) for name in FEATURES}
    columns["label"] = rng.integers(0, 10, rows)
    return pa.table(columns)


def make_dataset(table: pa.Table, tmp: Path):
    import datasets

    datasets.disable_progress_bars()
    features = datasets.Features(
        {
            **{name: datasets.Value("float32") for name in FEATURES},
            "label": datasets.Value("int64"),
            "embedding": datasets.Array2D((2, 4), "float32"),
        }
    )
    rng = np.random.default_rng(1)
    embedding = rng.standard_normal((table.num_rows, 2, 4), dtype=np.float32)
    path = tmp / "hf.parquet"
    # Written in slices, so that the nested lists of millions of rows are not made at once.
    writer = None
    for start in range(0, table.num_rows, 50_000):
        part = embedding[start : start + 50_000]
        rows = {**table.slice(start, len(part)).to_pydict(), "embedding": part}
        piece = datasets.Dataset.from_dict(rows, features=features).data.table
        writer = writer or pq.ParquetWriter(path, piece.schema)
        writer.write_table(piece)
    writer.close()
    ds = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp / "cache"), features=features)
    return ds, embedding


def ours(source) -> Callable[[], int]:
    def run() -> int:
        rows = 0
        for batch in ad.batches(
            source, BATCH, groups={"features": FEATURES}, columns=["label", "embedding"]
        ):
            features = torch.from_dlpack(batch["features"])
            torch.from_dlpack(batch["embedding"])
            rows += features.shape[0]
        return rows

    return run


def theirs(ds) -> Callable[[], int]:
    def run() -> int:
        rows = 0
        for batch in ds.with_format("torch").iter(BATCH):
            features = torch.stack([batch[name] for name in FEATURES], dim=1)
            rows += features.shape[0]
        return rows

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    began = time.monotonic()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        table = make_table(args.rows)
        ds, embedding = make_dataset(table, tmp)
        ipc = tmp / "same.arrow"
        # The same data with the embedding as the fixed-shape tensor column ours reads it as.
        from arrow_dlpack._hf import hf_stream

        same = pa.RecordBatchReader.from_stream(hf_stream(ds)).read_all()
        feather.write_feather(same, ipc, compression="uncompressed")
        # The first batch of every method holds the same values.
        first = next(iter(ad.batches(ds, BATCH, groups={"features": FEATURES}, columns=["label", "embedding"])))
        reference = next(iter(ds.with_format("torch").iter(BATCH)))
        np.testing.assert_array_equal(
            np.from_dlpack(first["features"]),
            torch.stack([reference[name] for name in FEATURES], dim=1).numpy(),
        )
        np.testing.assert_array_equal(np.from_dlpack(first["embedding"]), embedding[:BATCH])
        np.testing.assert_array_equal(np.from_dlpack(first["embedding"]), reference["embedding"].numpy())
        methods: Dict[str, Callable[[], int]] = {
            "ours, Dataset": ours(ds),
            "ours, IPC file": ours(str(ipc)),
            "datasets torch iter": theirs(ds),
        }
        times: Dict[str, List[float]] = {name: [] for name in methods}
        for _ in range(args.repetitions):
            for name, run in methods.items():
                start = time.perf_counter()
                assert run() == args.rows
                times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    took = time.monotonic() - began
    import datasets

    speedup = median["datasets torch iter"] / median["ours, Dataset"]
    versus_ipc = median["ours, Dataset"] / median["ours, IPC file"]
    verdict = lambda ok: "met" if ok else "**missed**"  # noqa: E731
    lines = [
        "## Hugging Face datasets",
        "",
        f"{args.rows:,} rows of 16 float32 features, an int64 label and an `Array2D((2, 4))` "
        f"embedding, in a `Dataset` made with `Dataset.from_parquet` (a memory-mapped cache file) "
        f"and the same table as an IPC file; batches of {BATCH:,} to torch tensors; by "
        f"`bench/loader_hf.py`. Median (and range) of {args.repetitions} passes, methods "
        f"alternating; the run took {took:.0f} s, load average {load[0]:.1f} at its start. "
        f"datasets {datasets.__version__}, torch {torch.__version__}, Python "
        f"{platform.python_version()}.",
        "",
        "| method | s per pass | M rows/s |",
        "|---|---|---|",
    ]
    for name in methods:
        t = times[name]
        lines.append(
            f"| {name} | {median[name]:.3f} ({min(t):.3f}-{max(t):.3f}) | "
            f"{args.rows / median[name] / 1e6:.2f} |"
        )
    lines += [
        "",
        "| target | measured | target | |",
        "|---|---|---|---|",
        f"| `with_format(\"torch\").iter` time / ours over the Dataset | {speedup:.1f}x | >= 10x | "
        f"{verdict(speedup >= 10)} |",
        f"| ours over the Dataset / ours over the IPC file (time) | {versus_ipc:.2f}x | <= 1.5x | "
        f"{verdict(versus_ipc <= 1.5)} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
