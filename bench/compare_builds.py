"""Two builds of the wheel side by side: the same exchange and loader work timed on each, in
alternating rounds, so that a slow spell of the shared machine falls on both alike.

    python bench/compare_builds.py BASE.whl OTHER.whl [--rounds 9] [--rows 1000000]

Each wheel is unpacked into a temporary folder and imported from there by a fresh interpreter
(one per round and build), which times every case and prints its times as JSON. The table gives,
per case, the median time of each build and their ratio (OTHER / BASE) with the range of the
per-round ratios: the noise to hold a difference against. Used to check that the `dist` profile
(what `pip install` builds) is no slower than `release` (docs/benchmarks.md, "The wheel").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List

# The work, run in a child interpreter whose `sys.path` starts with one unpacked wheel: each case
# is timed as the best of a few repeats (a per-call time for the exchanges), in seconds.
CHILD = r"""
import json, sys, time, timeit
sys.path.insert(0, sys.argv[1])
import numpy as np
import pyarrow as pa
import arrow_dlpack as ad

work = sys.argv[2]
times = {}

def best(function, number, repeat=5):
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number

small = pa.array(np.arange(10, dtype=np.int64))
times["np.from_dlpack(ad.array(pa.array)), 10 values"] = best(
    lambda: np.from_dlpack(ad.array(small)), 20_000)
matrix = np.ones((100, 100))
times["ad.Tensor.from_dlpack(ndarray)"] = best(lambda: ad.Tensor.from_dlpack(matrix), 20_000)
column = ad.array(pa.array(np.arange(10_000_000, dtype=np.float64)))
times["__dlpack__(copy=True), 80 MB"] = best(lambda: column.__dlpack__(copy=True), 5)
table = pa.table({f"f{i}": np.random.default_rng(i).random(1_000_000, dtype=np.float32)
                  for i in range(16)})
times["Tensor.from_arrow(16 float32 columns x 1M rows)"] = best(
    lambda: ad.Tensor.from_arrow(table), 5)
features = [f"f{i}" for i in range(16)]

def one_pass(path):
    count = 0
    for batch in ad.batches(path, 1024, groups={"x": features}, columns=["label"]):
        count += 1
    return count

for name, path in [("ad.batches pass, Parquet", work + "/data.parquet"),
                   ("ad.batches pass, IPC file", work + "/data.arrow")]:
    times[name] = best(lambda: one_pass(path), 1, repeat=3)
print(json.dumps(times))
"""


def write_workload(folder: Path, rows: int) -> None:
    """The loader's workload: 16 float32 features and an int64 label, as Parquet and IPC."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    columns = {f"f{i}": rng.random(rows, dtype=np.float32) for i in range(16)}
    columns["label"] = rng.integers(0, 10, rows)
    table = pa.table(columns)
    pq.write_table(table, folder / "data.parquet", row_group_size=131_072)
    with pa.OSFile(str(folder / "data.arrow"), "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=131_072):
                writer.write_batch(batch)


def run_child(unpacked: Path, work: Path) -> Dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(unpacked), str(work)],
        check=True,
        capture_output=True,
        text=True,
        cwd=work,
    )
    return json.loads(out.stdout)


def render(names: List[str], base: List[Dict[str, float]], other: List[Dict[str, float]]) -> str:
    """The Markdown table: per case, each build's median and the ratio with its range."""
    lines = [
        f"| case | {names[0]} | {names[1]} | ratio (range over rounds) |",
        "|---|---|---|---|",
    ]
    for case in base[0]:
        first = [run[case] for run in base]
        second = [run[case] for run in other]
        ratios = sorted(b / a for a, b in zip(first, second))
        lines.append(
            f"| {case} | {format_time(statistics.median(first))} "
            f"| {format_time(statistics.median(second))} "
            f"| {statistics.median(ratios):.2f} ({ratios[0]:.2f} to {ratios[-1]:.2f}) |"
        )
    return "\n".join(lines) + "\n"


def format_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="the wheel to compare against (release)")
    parser.add_argument("other", type=Path, help="the wheel compared (dist)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the loader's files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        unpacked = []
        for index, wheel in enumerate([args.base, args.other]):
            folder = work / f"build{index}"
            zipfile.ZipFile(wheel).extractall(folder)
            unpacked.append(folder)
        write_workload(work, args.rows)
        runs: List[List[Dict[str, float]]] = [[], []]
        for round_ in range(args.rounds):
            # Alternate which build goes first, so that neither always runs on a warmer machine.
            order = [0, 1] if round_ % 2 == 0 else [1, 0]
            for build in order:
                runs[build].append(run_child(unpacked[build], work))
            print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    names = [args.base.parent.name or "base", args.other.parent.name or "other"]
    print(render(names, runs[0], runs[1]), end="")


if __name__ == "__main__":
    main()
