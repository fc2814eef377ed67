"""Even batches across ranks: the balance of a planned epoch and the cost of its planning pass.

The workload is ``loader_sequences``' (N token sequences with log-normal lengths, clipped to
16..2,048, and an int64 label, in a Snappy Parquet file of row groups of 8,192 rows), also
written as an IPC file of the same record batches. Batches are padded, cut by a token budget
(``max_tokens``, 65,536 by default) within 1,024 rows, shuffled, with and without
``bucket_by_length``, over 2 and 3 ranks and over those ranks with 2 DataLoader workers each
(4 and 6 shards).

The balance figure: the batches per shard (equal when planned), and the largest batch's tokens
over the mean batch's (padded ``B x L``), per rank (the worst rank) and over every batch of the
epoch. The last batch of a window is not special in a plan (its rows are carried into the next
window), so the figure is the spread of full batches and of the parts split off to make the
count a multiple of the shards.

The cost: the planning pass (every row's length, read from the sequence column alone) against a
plain pass (one loader over the whole file, the same options, batches made and dropped),
medians of a few runs, alternating, in one run. The pass's lengths are kept per process by
the source's identity, so each timed planning pass is given a fresh modification time first.

    python loader_balance.py [--rows 100000] [--repetitions 3] [--output FILE]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pyarrow as pa
import pyarrow.parquet as pq

import arrow_dlpack as ad

from loader_methods import emit, log
from loader_sequences import ROW_GROUP, make_table

BATCH = 1_024
WINDOW = 65_536


def options(max_tokens: int, bucket: bool) -> dict:
    return dict(
        columns=["label"],
        sequences={"input_ids": "pad"},
        max_tokens=max_tokens,
        bucket_by_length=bucket,
        shuffle=True,
        seed=11,
        buffer_size=WINDOW,
    )


def write(directory: Path, rows: int) -> Dict[str, Path]:
    table = make_table(rows)
    parquet = directory / "sequences.parquet"
    pq.write_table(table, parquet, row_group_size=ROW_GROUP, compression="snappy")
    ipc = directory / "sequences.arrow"
    with pa.ipc.new_file(ipc, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=ROW_GROUP):
            writer.write_batch(batch)
    return {"parquet": parquet, "ipc": ipc}


def tokens_of(batch) -> int:
    shape = batch["input_ids"].shape
    return int(shape[0]) * int(shape[1])


def balance(path: Path, shards: int, opts: dict) -> Tuple[List[int], float, float]:
    """Batches per shard, the worst shard's max/mean tokens per batch, and the overall one."""
    counts, worst, every = [], 0.0, []
    for shard in range(shards):
        tokens = [tokens_of(b) for b in ad.batches(str(path), BATCH, rank=shard, world_size=shards, **opts)]
        counts.append(len(tokens))
        worst = max(worst, max(tokens) / statistics.mean(tokens))
        every += tokens
    return counts, worst, max(every) / statistics.mean(every)


def fresh(path: Path) -> None:
    """A new modification time: a new source identity, so the next plan makes its own pass."""
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def timed(function: Callable[[], None]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def made(path: Path, opts: dict) -> float:
    """The time to make the loader of rank 0 of 2: its plan, before its first batch."""
    start = time.perf_counter()
    loader = ad.batches(str(path), BATCH, rank=0, world_size=2, **opts)
    took = time.perf_counter() - start
    loader.close()
    return took


def run(rows: int, repetitions: int, log: Callable[[str], None], max_tokens: int = 65_536) -> str:
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write(Path(tmp), rows)
        out = [
            "### Balance",
            "",
            f"{rows:,} sequences (`loader_sequences`' workload) as a Snappy Parquet file of row "
            f"groups of {ROW_GROUP:,} and an IPC file of the same record batches; padded batches "
            f"within `max_tokens={max_tokens:,}` and {BATCH:,} rows, shuffled, windows of "
            f"{WINDOW:,}, by `bench/loader_balance.py`.",
            "",
            "| layout | `bucket_by_length` | batches per shard | max / mean tokens, worst shard | max / mean tokens, all |",
            "|---|---|---|---|---|",
        ]
        for bucket in (True, False):
            opts = options(max_tokens, bucket)
            for label, shards in (("2 ranks", 2), ("3 ranks", 3), ("2 ranks x 2 workers", 4),
                                  ("3 ranks x 2 workers", 6)):
                counts, worst, overall = balance(paths["parquet"], shards, opts)
                log(f"balance {label} bucket={bucket}: {counts} {worst:.3f} {overall:.3f}")
                shown = f"{counts[0]} (all equal)" if len(set(counts)) == 1 else f"{counts} **unequal**"
                out.append(f"| {label} | {bucket} | {shown} | {worst:.3f} | {overall:.3f} |")
        out += [
            "",
            "The cost of the planning pass against a plain pass of the same file (one loader, "
            "no plan, every batch made), median (and range) of "
            f"{repetitions} runs, alternating:",
            "",
            "| file | plain pass, s | planning pass, s | planning / plain | plan again from the kept lengths, s |",
            "|---|---|---|---|---|",
        ]
        opts = options(max_tokens, True)
        ratios = {}
        for kind, path in paths.items():
            plain, planning, cached = [], [], []
            for _ in range(repetitions):
                plain.append(timed(lambda: [None for _ in ad.batches(str(path), BATCH, **opts)]))
                # Planning a loader of one rank of two: the pass over every row's length and the
                # plan, then the plan again with the lengths kept.
                # The loader is closed outside the timing: its threads may be decoding a unit.
                fresh(path)
                planning.append(made(path, opts))
                cached.append(made(path, opts))
            p, q, c = (statistics.median(v) for v in (plain, planning, cached))
            log(f"cost {kind}: plain {p:.3f} planning {q:.3f} cached {c:.3f}")
            ratios[kind] = (q / p, c)
            out.append(
                f"| {kind} | {p:.3f} ({min(plain):.3f}-{max(plain):.3f}) | {q:.3f} "
                f"({min(planning):.3f}-{max(planning):.3f}) | {q / p:.2f} | {c:.3f} |"
            )
        out += [
            "",
            "Every shard gets as many batches as the others in every layout above (the table says "
            "**unequal** otherwise).",
            "With `bucket_by_length` the spread of tokens per batch is that of the rows' lengths "
            "against the budget, and of the few parts split off to make the count a multiple of "
            "the shards (lighter than the rest); without it a padded batch's tokens follow its "
            "longest row.",
            "The Parquet planning pass decodes the list column whole (its lengths are only in its "
            "repetition levels, which share pages with the values): "
            f"{ratios['parquet'][0]:.2f} of a plain pass.",
            "An IPC file's lengths are its offsets, read from the map, so its planning pass is "
            "mostly the plan itself (cutting the windows twice: "
            f"{ratios['ipc'][1]:.3f} s with the lengths kept): {ratios['ipc'][0]:.2f} of a plain "
            "pass.",
            "The lengths are kept per process, so the next epoch's loaders only plan again.",
            "",
            f"The run took {time.perf_counter() - began:.0f} s.",
        ]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--max-tokens", type=int, default=65_536)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--output", type=Path, help="where to write the section (default: print)")
    args = parser.parse_args()

    section = run(args.rows, args.repetitions, log, args.max_tokens)
    emit(section, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
