"""Resuming the loader: the time from ``ad.batches(..., state=saved)`` to its first batch,
beside a full pass of the same file in the same run.

The workload is ``loader_methods``' (N rows of 16 float32 features, an int64 label and a
float32[8] embedding in a Snappy Parquet file of row groups of 131,072 rows). A state is saved
after 90% of a pass's batches (in order, and shuffled); the figure is the median time to make a
loader from that state and take its first batch, as a ratio to the median full pass. A resume
decodes only the row group it stopped inside (shuffled: the row groups of the current window), so
the ratio stays near one row group's share of the file whatever the position. Beside it, the
naive resume: a new pass that reads and drops the batches already given. The time to a first
batch stops at that batch: shutting the loader's threads down afterwards is not counted.

    python loader_resume.py [--rows 2000000] [--repetitions 5] [--output FILE]

``bench_loader.py`` runs it too and appends its section (``### Resuming``) to the loader's.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import arrow_dlpack as ad

from loader_methods import CHUNK, FEATURES, emit, log, write_workload

BATCH = 1024
#: The position of the saved state, as a share of the pass's batches.
AT = 0.9
#: The most a resume at 90% may take, as a share of a full pass, to its first batch.
TARGET = 0.15


def options(shuffle: bool) -> dict:
    return dict(
        groups={"features": FEATURES},
        columns=["label", "embedding"],
        shuffle=shuffle,
        seed=1 if shuffle else None,
    )


def full_pass(path: str, shuffle: bool) -> int:
    count = 0
    for _ in ad.batches(path, BATCH, **options(shuffle)):
        count += 1
    return count


def saved_state(path: str, shuffle: bool, batches: int) -> dict:
    iterator = ad.batches(path, BATCH, **options(shuffle))
    for _ in range(int(batches * AT)):
        next(iterator)
    state = iterator.state_dict()
    iterator.close()
    return state


def first_batch(path: str, shuffle: bool, state: dict) -> Callable[[], None]:
    """Makes a loader from ``state`` and takes its first batch; returns its ``close`` (the
    threads' shutdown is not part of the time to the first batch)."""
    iterator = ad.batches(path, BATCH, state=state, **options(shuffle))
    next(iterator)
    return iterator.close


def naive_resume(path: str, shuffle: bool, batches: int) -> Callable[[], None]:
    """A fresh pass that reads and drops the first 90% of the batches and takes the next."""
    iterator = ad.batches(path, BATCH, **options(shuffle))
    for _ in range(int(batches * AT) + 1):
        next(iterator)
    return iterator.close


def run(rows: int, repetitions: int, log: Callable[[str], None]) -> str:
    """Writes the workload, times full passes and resumes, and returns the section."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as directory:
        log(f"==> writing {rows:,} rows for the resume")
        path = str(write_workload(Path(directory), rows, 1).parquet)
        results: Dict[bool, Dict[str, List[float]]] = {}
        for shuffle in (False, True):
            batches = full_pass(path, shuffle)  # warm-up, and the count
            state = saved_state(path, shuffle, batches)
            times: Dict[str, List[float]] = {"full": [], "resume": [], "naive": []}
            calls: Dict[str, Callable[[], object]] = {
                "full": lambda: full_pass(path, shuffle),
                "resume": lambda: first_batch(path, shuffle, state),
                "naive": lambda: naive_resume(path, shuffle, batches),
            }
            for repetition in range(repetitions):
                log(f"==> resume, shuffle={shuffle}, repetition {repetition + 1} of {repetitions}")
                keys = list(calls)
                order = keys[repetition % len(keys):] + keys[: repetition % len(keys)]
                for key in order:
                    start = time.perf_counter()
                    close = calls[key]()
                    times[key].append(time.perf_counter() - start)
                    if callable(close):
                        close()
            results[shuffle] = times
    elapsed = time.perf_counter() - started
    return render(rows, repetitions, results, elapsed)


def render(rows: int, repetitions: int, results: Dict[bool, Dict[str, List[float]]], elapsed: float) -> str:
    out = [
        "### Resuming",
        "",
        f"The Parquet file of the workload ({rows:,} rows, row groups of {CHUNK:,}), batches of "
        f"{BATCH:,}; a state saved after {AT:.0%} of the batches, by "
        "`bench/loader_resume.py`. Median (and range) of "
        f"{repetitions} runs, alternating; the run took {elapsed:.0f} s. Target: a resume at 90% "
        f"takes at most {TARGET}x a full pass to its first batch.",
        "",
        "| order | full pass, s | resume to first batch, s | vs full pass | reading and dropping 90%, s | vs full pass |",
        "|---|---|---|---|---|---|",
    ]
    for shuffle, times in results.items():
        median = {key: statistics.median(values) for key, values in times.items()}
        ratio = median["resume"] / median["full"]
        mark = "met" if ratio <= TARGET or shuffle else "**missed**"
        span = {key: f"{median[key]:.3f} ({min(v):.3f}-{max(v):.3f})" for key, v in times.items()}
        out.append(
            f"| {'shuffled (window of 65,536 rows)' if shuffle else 'in order'} | {span['full']} | "
            f"{span['resume']} | {ratio:.3f}{'' if shuffle else f' ({mark})'} | {span['naive']} | "
            f"{median['naive'] / median['full']:.2f} |"
        )
    out += [
        "",
        "In order, a resume decodes the one row group it stopped inside; shuffled, it decodes the "
        "row groups of the shuffle window it stopped in (and those of the rows the window carried "
        "over), so its figure grows with `buffer_size`, not with the position.",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--output", type=Path, help="where to write the section (default: print)")
    args = parser.parse_args()

    page = run(args.rows, args.repetitions, log)
    emit(page, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
