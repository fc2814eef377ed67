#!/usr/bin/env python3
"""Side-by-side benchmark of arrow_dlpack against PyArrow's own DLPack, and the page that shows it.

`cargo xtask bench` runs criterion first and then this script as

    python bench_exchange.py --output <root>/docs/benchmarks.md --criterion-dir <root>/target/criterion

The rows are one table, `CASES`: each `Case` names a row, its kind (the producer call alone, a
zero-copy exchange, wrapping an Arrow object, a copy, a table to a tensor), the call of ours and
the anchor it is judged against (PyArrow's same call, its nearest equivalent, or a floor), built
for each size from the row's data, and the row's target. One loop (`run_case`) times every
row, and one renderer (`render_page`) writes the page.

The script is the entry point and the renderer; beside it, `exchange_common.py` holds the peers,
the clocks and the alternating timing loop, `exchange_cases.py` the rows (`CASES`),
`exchange_runs.py` the references and the loop over the rows, `exchange_criterion.py` the Rust
section, `exchange_notes.py` the targets, each target's ratio before the work (`BEFORE`) and
the hand-written text of the page (`REMAINS`), and `exchange_explanations.py` the `EXPLANATIONS`
of misses; the page's last section,
the measurements behind the copy kernels, is the hand-written `kernel_notes.md`, copied as it is.

Every row times our call and its anchor in the same process, alternating batch by batch and
swapping the order every round, so that the noise of a shared machine falls on both sides alike;
the row reports the medians and the median of the per-round ratios.
Zero-copy rows run at 10 and at 10 million elements, to show that the cost does not grow; copy
and table rows also time alloc+memcpy of the bytes they write, and report GB/s beside it.
The script then reads criterion's estimates and renders the Rust table too, and writes the whole
page (machine, versions, date, tables, targets met or missed, and why) to `--output`.

Only the standard library times anything (`timeit`, CPU time by default: see `Clocks`); numpy,
pyarrow, torch and JAX are the peers. The measurements fit in `--budget-s` (240 s by default): a
row on a heavily loaded machine cuts its rounds (to no fewer than `MIN_ROUNDS`) rather than
overrun. `--only SUBSTRING` runs the matching rows alone (to profile one row), `--quick` runs
every row briefly (a smoke run whose ratios are rough), and without `--output` nothing is
written.
"""


from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import arrow_dlpack as ad

from exchange_notes import (
    COPY_PYARROW_TARGET,
    COPY_TARGET,
    INTRO,
    REMAINS,
    SCALE_TARGET,
    before,
    explanation_for,
)
from exchange_common import (
    verdict,
    CLOCKS,
    COPY_ELEMENTS,
    LARGE,
    MIN_ROUNDS,
    ROOT,
    SMALL,
    fmt_gbs,
    fmt_time,
    jnp,
    log,
    torch,
)
from exchange_cases import CASES, COPY, EXCHANGE, PRODUCER, TABLE, WRAP
from exchange_runs import REMEASURED, Result, consumer_checks, run_cases
from exchange_criterion import fmt_count, read_criterion, render_criterion

# The hand-written section on the copy kernels' measurements, copied to the end of the page.
KERNEL_NOTES = Path(__file__).resolve().parent / "kernel_notes.md"


def machine_lines() -> list[str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = ", load average at start {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    return [f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.machine()}{load}"]


def command_output(arguments: list[str]) -> Optional[str]:
    try:
        result = subprocess.run(
            arguments, capture_output=True, text=True, check=True, cwd=ROOT, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip()


def versions() -> list[tuple[str, str]]:
    rustc = command_output([os.environ.get("RUSTC", "rustc"), "--version"]) or "unknown"
    commit = command_output(["git", "rev-parse", "--short", "HEAD"])
    dirty = command_output(["git", "status", "--porcelain", "--untracked-files=no"])
    arrow_dlpack = ad.__version__
    if commit:
        arrow_dlpack += f" (built from {commit}{', with uncommitted changes' if dirty else ''})"
    found = [
        ("python", platform.python_version()),
        ("numpy", np.__version__),
        ("pyarrow", pa.__version__),
        ("torch", torch.__version__ if torch is not None else "not installed"),
        ("arrow_dlpack", arrow_dlpack),
        ("rustc", rustc),
    ]
    return found


def stale_wheel_warning() -> Optional[str]:
    """A warning when a Rust source is newer than the installed extension module."""
    module = Path(ad._arrow_dlpack.__file__)
    built = module.stat().st_mtime
    crates = ROOT / "crates"
    if not crates.is_dir():
        return None
    newer = [
        path
        for path in crates.glob("*/src/**/*.rs")
        if path.stat().st_mtime > built
    ]
    if newer:
        return (
            f"the installed wheel ({module}) is older than {len(newer)} Rust source(s), "
            f"e.g. {newer[0].relative_to(ROOT)}: rebuild it (cargo xtask bench does)"
        )
    return None


def zero_copy_table(out: list[str], results: list[Result]) -> None:
    out.append("| exchange | elements | ours | PyArrow (or floor) | ratio | spread | target | |")
    out.append("|---|---|---|---|---|---|---|---|")
    for result in results:
        low, high = result.spread
        out.append(
            f"| {result.case.title} | {fmt_count(str(result.size))} | "
            f"{fmt_time(result.ours.median)} | {fmt_time(result.anchor.median)} | "
            f"{result.ratio:.2f} | {low:.2f}-{high:.2f} | {result.target_text} | "
            f"{verdict(result.met)} |"
        )
    out.append("")


def render_page(
    results: list[Result],
    scale: list[tuple[str, str, float, float]],
    consumer_notes: list[str],
    rust_lines: list[str],
    rust_targets: list[str],
    rust_missed: list[str],
    started: datetime.datetime,
    elapsed_s: float,
    rounds: int,
    batch_s: float,
) -> str:
    def of(*kinds: str) -> list[Result]:
        return [result for result in results if result.case.kind in kinds]

    out: list[str] = [INTRO]
    # The chart is drawn from this page's tables by charts.py, which `cargo xtask bench` runs last.
    out.append(
        "![Bar chart of our time / PyArrow's for the `__dlpack__` calls and zero-copy exchanges "
        "below, one bar per row: lower is better, 1.0 is PyArrow](benchmarks-exchange.svg)"
    )
    out.append("")
    out.append("## Machine and versions")
    out.append("")
    out.append(f"- Date: {started:%Y-%m-%d %H:%M} UTC; the Python part took {elapsed_s:.0f} s.")
    for line in machine_lines():
        out.append(f"- Machine: {line}")
    for name, version in versions():
        out.append(f"- {name}: {version}")
    out.append(
        f"- Method: `timeit`, {rounds} rounds of batches of about {batch_s * 1e3:g} ms per side "
        "(50 ms for copies), sides alternating in an order that has each side follow each other "
        "side equally often; medians of the per-call times, and as each row's ratio the median of "
        "the per-round ratios. "
        + (
            "Timed in CPU time (the calling thread's for calls, the process's for copies), so that "
            "preemption by other processes on the shared machine does not count."
            if CLOCKS.name == "cpu"
            else "Timed in wall-clock time."
        )
    )
    out.append("")

    out.append("## Python: `__dlpack__` called alone, ours beside PyArrow's")
    out.append("")
    zero_copy_table(out, of(PRODUCER))

    out.append("## Python: zero-copy exchanges, ours beside PyArrow's")
    out.append("")
    zero_copy_table(out, of(EXCHANGE, WRAP))
    if REMEASURED:
        out.append(
            "Measured twice, because in the first measurement one side cost more than 1.5 times "
            "as much at one size as at the other (the sizes run the same code; the cause of such "
            "runs is not known); the second measurement is the one shown: "
            + ", ".join(f"`{row_id}`" for row_id in REMEASURED)
            + "."
        )
        out.append("")
    out.append("Where the cost goes does not depend on the size: 10 million elements against 10.")
    out.append("")
    out.append("| exchange | ours, 10M / 10 | PyArrow, 10M / 10 | target | |")
    out.append("|---|---|---|---|---|")
    for title, _row_id, ours_growth, theirs_growth in scale:
        met = ours_growth <= SCALE_TARGET
        out.append(
            f"| {title} | {ours_growth:.2f} | {theirs_growth:.2f} | <= {SCALE_TARGET} | "
            f"{verdict(met)} |"
        )
    out.append("")
    if consumer_notes:
        out.append("What the consumers call:")
        out.append("")
        out.extend(f"- {note}" for note in consumer_notes)
        out.append("")

    out.append("## Python: copying paths, beside memcpy of the same bytes")
    out.append("")
    out.append(
        "`alloc+memcpy` is `ndarray.copy()` of the bytes the path handles (a fresh allocation, as "
        "a copying export needs; numpy asks for 2 MiB pages with `madvise(MADV_HUGEPAGE)`); "
        "`4 KiB pages` is the same copy with numpy's huge-page advice switched off, which is what "
        "an allocation without the advice gets on this kernel (transparent huge pages on "
        "`madvise`); `memcpy` is `np.copyto` into a buffer already written once, the bandwidth of "
        "the copy alone. The target is judged against `alloc+memcpy`, and against PyArrow's "
        f"nearest equivalent in time (ours / theirs <= {COPY_PYARROW_TARGET})."
    )
    out.append("")
    out.append(
        "| path | bytes | ours | alloc+memcpy | ours / alloc+memcpy | target | | "
        "4 KiB pages | memcpy | ours / memcpy | PyArrow's nearest |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for result in of(COPY):
        small = result.bps(result.small_pages)
        ours_bps = result.bps(result.ours) or 0.0
        memcpy_bps = result.bps(result.memcpy) or 0.0
        pyarrow_text = (
            f"{result.case.anchor_note}: {fmt_gbs(result.bps(result.anchor) or 0.0)}, "
            f"ours/theirs time {result.ratio:.2f}"
        )
        out.append(
            f"| {result.case.title} | {result.nbytes / 1e6:.0f} MB | {fmt_gbs(ours_bps)} | "
            f"{fmt_gbs(result.bps(result.alloc) or 0.0)} | {result.alloc_ratio:.2f} | "
            f">= {COPY_TARGET} | {verdict(result.alloc_met)} | "
            f"{fmt_gbs(small) if small else 'n/a'} | {fmt_gbs(memcpy_bps)} | "
            f"{ours_bps / memcpy_bps:.2f} | {pyarrow_text} |"
        )
    out.append("")

    out.append("## Python: table to 2-D tensor")
    out.append("")
    out.append(
        "| conversion | bytes written | ours | PyArrow's `to_tensor()` | ratio | target | | "
        "ours vs alloc+memcpy |"
    )
    out.append("|---|---|---|---|---|---|---|---|")
    for result in of(TABLE):
        out.append(
            f"| {result.case.title} | {result.nbytes / 1e6:.0f} MB | "
            f"{fmt_time(result.ours.median)} | {fmt_time(result.anchor.median)} | "
            f"{result.ratio:.2f} | {result.target_text} | {verdict(result.met)} | "
            f"{result.alloc_ratio:.2f} |"
        )
    out.append("")

    out.append("## Rust (criterion)")
    out.append("")
    out.append(
        "Median point estimates from `target/criterion`, release profile; throughput from the "
        "benchmark's declared bytes."
    )
    out.append("")
    out.extend(rust_lines)

    out.append("## Targets")
    out.append("")
    out.append(
        "The before column gives each ratio before the producer-call and copy-kernel work (the "
        "sources are listed with `BEFORE` in `exchange_notes.py`); a dash where no such row was "
        "measured then."
    )
    out.append("")
    out.append("| target | bound | before | measured | |")
    out.append("|---|---|---|---|---|")
    missed_ids: list[str] = []

    def target(
        text: str, bound: str, measured: float, met: bool, row_id: str, key: str = ""
    ) -> None:
        cell = before(key or row_id)
        out.append(f"| {text} | {bound} | {cell} | {measured:.2f} | {verdict(met)} |")
        if not met and row_id not in missed_ids:
            missed_ids.append(row_id)

    for result in of(PRODUCER, EXCHANGE, WRAP):
        target(
            f"{result.case.title}, {fmt_count(str(result.size))} elements",
            result.target_text,
            result.ratio,
            result.met,
            result.case.row_id,
        )
    for title, row_id, ours_growth, _ in scale:
        target(
            f"{title}: 10 million vs 10 elements",
            f"<= {SCALE_TARGET}",
            ours_growth,
            ours_growth <= SCALE_TARGET,
            f"scale:{row_id}",
        )
    for result in of(COPY, TABLE):
        anchor = (
            result.case.anchor_note or "PyArrow's `to_tensor()`"
            if result.case.kind == TABLE
            else result.case.anchor_note
        )
        target(
            f"{result.case.title} vs alloc+memcpy",
            f">= {COPY_TARGET}",
            result.alloc_ratio,
            result.alloc_met,
            result.case.row_id,
            f"{result.case.row_id}:alloc",
        )
        target(
            f"{result.case.title} vs {anchor}, in time",
            result.target_text,
            result.ratio,
            result.met,
            result.case.row_id,
        )
    out.extend(rust_targets)
    out.append("")
    missed_ids.extend(rust_missed)

    out.append("## Misses, and where the time goes")
    out.append("")
    if not missed_ids:
        out.append("No target was missed in this run.")
    for row_id in missed_ids:
        explanation = explanation_for(row_id)
        out.append(f"- `{row_id}`: " + (explanation or "no explanation recorded yet: profile it."))
    out.append("")
    out.append(REMAINS)
    out.append("")
    out.append(KERNEL_NOTES.read_text(encoding="utf-8").rstrip())
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# Main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, help="the page to write (docs/benchmarks.md)")
    parser.add_argument("--criterion-dir", type=Path, help="criterion's output (target/criterion)")
    parser.add_argument("--rounds", type=int, default=101, help="alternating rounds per row")
    parser.add_argument(
        "--batch-ms", type=float, default=2.0, help="milliseconds per timed batch (zero-copy rows)"
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="time CPU time of the thread/process (default) or wall-clock time",
    )
    parser.add_argument("--only", help="run only the rows whose id contains this")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=240.0,
        help="seconds the measurements may take in all; rows cut their rounds to fit",
    )
    parser.add_argument(
        "--sizes", default=f"{SMALL},{LARGE}", help="element counts of the zero-copy rows"
    )
    parser.add_argument(
        "--copy-elements",
        type=int,
        default=COPY_ELEMENTS,
        help="element count of the copy and table rows",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a smoke run: {MIN_ROUNDS} rounds of 0.5 ms batches, copies of 2 million elements, "
        "a 60 s budget (ratios are rough)",
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.batch_ms, args.budget_s = MIN_ROUNDS, 0.5, 60.0
        args.copy_elements = min(args.copy_elements, 2_000_000)

    if args.clock == "wall":
        CLOCKS.use_wall()
    started = datetime.datetime.now(datetime.timezone.utc)
    clock = time.perf_counter()
    sizes = tuple(int(size) for size in args.sizes.split(","))
    log(
        f"==> Python exchange benchmark: arrow_dlpack {ad.__version__}, pyarrow {pa.__version__}, "
        f"numpy {np.__version__}, torch {torch.__version__ if torch else 'missing'}, "
        f"jax {sys.modules['jax'].__version__ if jnp is not None else 'missing'}"
    )
    warning = stale_wheel_warning()
    if warning:
        log(f"    warning: {warning}")

    notes = consumer_checks(41, args.batch_ms / 1e3) if args.only is None else []
    cases = [case for case in CASES if args.only is None or args.only in case.row_id]
    for case in cases:
        if not case.available():
            log(f"    {case.row_id}: left out, {case.needs} is not installed")
            notes.append(f"`{case.row_id}` left out: {case.needs} is not installed.")
    results, scale = run_cases(
        [case for case in cases if case.available()],
        args.rounds,
        args.batch_ms / 1e3,
        sizes,
        args.copy_elements,
        args.budget_s - (time.perf_counter() - clock),
    )
    elapsed = time.perf_counter() - clock
    log(f"==> Python part done in {elapsed:.0f} s")

    if args.output is None:
        return 0
    rust_lines: list[str] = []
    rust_targets: list[str] = []
    rust_missed: list[str] = []
    if args.criterion_dir is not None:
        entries = read_criterion(args.criterion_dir)
        log(f"==> {len(entries)} criterion estimates read from {args.criterion_dir}")
        rust_lines, rust_targets, rust_missed = render_criterion(entries)
    page = render_page(
        results,
        scale,
        notes,
        rust_lines,
        rust_targets,
        rust_missed,
        started,
        elapsed,
        args.rounds,
        args.batch_ms / 1e3,
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(page)
    log(f"==> wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
