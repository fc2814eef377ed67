"""The loader beside its anchors: its workload, one pass per method, methods alternating.

The workload: N rows (2,000,000 by default) of 16 float32 features f0..f15, an int64 label and an
``arrow.fixed_shape_tensor`` float32[8] embedding, written into a temporary directory as an
uncompressed Arrow IPC file and as a Snappy Parquet file (record batches and row groups of
131,072 rows, as in ``crates/loader/benches/loader.rs``). Each method makes every batch of B rows
into three torch tensors: features (B, 16) float32, labels (B,) int64, embeddings (B, 8) float32.

Every repetition runs each method once, in an order rotated every repetition, so that a slow
spell of the shared machine falls on all methods alike; the tables give the median and the range
of wall-clock seconds per pass. Ray Data and Hugging Face datasets run on fewer rows
(``--slow-rows``) and are scaled to N.

Besides the pass times it measures a training loop that does its own work (the time spent
waiting in ``next()``), and the peak memory of one pass of ours in a fresh subprocess.

    python bench_loader.py [--rows 2000000] [--repetitions 5] [--output target/bench/loader.md]
        [--criterion-dir target/criterion]

The output is a Markdown section headed "## The loader", which ``cargo xtask bench`` splices
into docs/benchmarks.md. The workload and the methods are in ``loader_methods.py``; this script
times them, measures the training loop and the memory, and writes the section. Its last part,
"### Sequences" (token sequences padded and packed beside numpy, datasets and transformers), comes
from ``loader_sequences.py`` (``--sequences-rows``, ``--sequences-only``), before it "### Ray Data"
(Ray's ``iter_torch_batches`` with its default collation and with ``ad.ray.collate_fn``, and
``ad.batches`` over the dataset) from ``loader_ray.py`` (``--ray-rows``, ``--ray-only``), and
after it "### Resuming" (the time to the first batch of a loader resumed at 90% of the Parquet
file, as a share of a full pass) from ``loader_resume.py``, then "### Balance" (batches per
shard and tokens per batch of planned epochs over 2 and 3 ranks, and the planning pass's cost)
from ``loader_balance.py``, then
"### Object storage" (the Parquet workload through ``s3://`` from moto, a per-byte static server
and nginx on loopback, and from ``cache_dir``) from ``loader_object_store.py``, "### A cache
shared by ranks and workers" (2 ranks x 2 DataLoader workers: is each range fetched once?) from
``loader_object_cache.py`` (``--shared-cache-rows``), and last "### Read-ahead against latency"
(20 ms injected per request) from ``loader_object_latency.py`` (``--latency-rows``).
"""

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

import arrow_dlpack as ad

import loader_balance
import loader_criterion
import loader_object_cache
import loader_object_latency
import loader_object_store
import loader_ray
import loader_resume
import loader_sequences
from loader_methods import (
    BATCH_SIZES,
    CHUNK,
    METHODS,
    ROW_BYTES,
    Method,
    Workload,
    by_hand,
    emit,
    log,
    ours,
    ours_triple,
    write_workload,
)

ROOT = Path(__file__).resolve().parents[1]

# The hand-written explanation of the misses, kept beside the script so that a new run keeps it
# (update it when the figures it quotes change).
NOTES = Path(__file__).resolve().parent / "loader_notes.md"

# The consumer of the training loop runs on one thread, as a GPU step would leave the CPU's
# cores to the loader; the anchors do not use torch's threads.
torch.set_num_threads(1)


# --- timing -----------------------------------------------------------------------------------


def time_methods(
    work: Workload, methods: Sequence[Method], repetitions: int, log: Callable[[str], None]
) -> Dict[Tuple[str, int], List[float]]:
    """Seconds per pass (scaled to work.rows for the slow methods), methods alternating."""
    times: Dict[Tuple[str, int], List[float]] = {}
    for size in BATCH_SIZES:
        passes = {}
        for method in methods:
            try:
                passes[method.key] = method.make(work, size)
                passes[method.key]()  # a warm-up pass: imports, page cache, Ray's workers
            except Exception as error:  # an anchor that cannot run is reported, not fatal
                log(f"   {method.key} at {size}: {type(error).__name__}: {error}")
                passes.pop(method.key, None)
        for repetition in range(repetitions):
            order = [m for m in methods if m.key in passes]
            shift = repetition % len(order)
            for method in order[shift:] + order[:shift]:
                gc.collect()
                start = time.perf_counter()
                rows = passes[method.key]()
                elapsed = time.perf_counter() - start
                expected = work.slow_rows if method.slow else work.rows
                assert rows >= expected - size and rows <= expected + size, (method.key, rows)
                scale = work.rows / work.slow_rows if method.slow else 1.0
                times.setdefault((method.key, size), []).append(elapsed * scale)
            log(f"   batch {size}, repetition {repetition + 1}/{repetitions} done")
    return times


# --- the training loop that does its own work ---------------------------------------------------


def calibrate_work(size: int, target_s: float) -> Tuple[Callable[[torch.Tensor], None], float]:
    """A consumer that multiplies the (B, 16) features by a (16, 256) matrix, repeated so that a
    batch of 1,024 rows takes about ``target_s``; larger batches take proportionally longer."""
    weights = torch.randn(16, 256)
    probe = torch.randn(1024, 16)
    for _ in range(200):
        probe @ weights  # warm-up
    per_matmul = min(timed(lambda: probe @ weights, 200) for _ in range(5))
    repeat = max(1, round(target_s / per_matmul))

    def consume(features: torch.Tensor) -> None:
        for _ in range(repeat):
            features @ weights

    x = torch.randn(size, 16)
    return consume, statistics.median(timed(lambda: consume(x), 20) for _ in range(5))


def timed(call: Callable[[], object], times: int) -> float:
    start = time.perf_counter()
    for _ in range(times):
        call()
    return (time.perf_counter() - start) / times


def training_loop(path: Path, size: int, consume: Callable[[torch.Tensor], None]) -> Tuple[float, float]:
    """(seconds waiting in next(), total seconds) of one pass with the consumer."""
    waiting = 0.0
    start = time.perf_counter()
    iterator = ours(path, size)
    while True:
        before = time.perf_counter()
        batch = next(iterator, None)
        waiting += time.perf_counter() - before
        if batch is None:
            break
        features, label, embedding = ours_triple(batch)
        consume(features)
    return waiting, time.perf_counter() - start


# --- peak memory, in a fresh subprocess --------------------------------------------------------


def status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_child(path: str, size: int) -> None:
    """One pass of ours; prints the growth of ru_maxrss and the peak of anonymous memory."""
    gc.collect()
    # Writing 5 to clear_refs resets the peak (VmHWM) to the current RSS, so that the peak of
    # the imports does not hide the pass's.
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    before_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm_before = status_kib("VmRSS")
    anon_before = status_kib("RssAnon")
    peak_anon = anon_before
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_anon
        while not stop.is_set():
            peak_anon = max(peak_anon, status_kib("RssAnon"))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rows = 0
    for batch in ours(Path(path), size):
        features, label, embedding = ours_triple(batch)
        rows += features.shape[0]
        peak_anon = max(peak_anon, status_kib("RssAnon"))
    stop.set()
    sampler.join()
    after_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hwm_after = status_kib("VmHWM")
    print(
        json.dumps(
            {
                "rows": rows,
                "maxrss_growth": (after_max - before_max) * 1024,
                "anon_growth": (peak_anon - anon_before) * 1024,
                "maxrss_before": before_max * 1024,
                "hwm_growth": (hwm_after - hwm_before) * 1024,
            }
        )
    )


def measure_rss(path: Path, size: int) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(path), str(size)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


# The loader's fixed costs whatever the batch size (its threads, the Python objects of a batch in
# flight): docs/loader.md's "a few hundred KB".
FIXED_BYTES = 512 * 1024


def memory_bound(work: Workload, kind: str, size: int) -> Tuple[int, str]:
    """docs/loader.md's bound, with the defaults prefetch=2 and decode_threads = min(cores, 4)."""
    prefetch = 2
    batch_bytes = size * ROW_BYTES
    bound = (prefetch + 2) * batch_bytes + FIXED_BYTES
    text = f"(2 + 2) × {mb(batch_bytes)} batches + {mb(FIXED_BYTES)} fixed"
    if kind == "parquet":
        threads = min(os.cpu_count() or 1, 4)
        group_bytes = min(CHUNK, work.rows) * ROW_BYTES
        groups = -(-work.rows // CHUNK)
        compressed = work.parquet.stat().st_size // groups
        pending = (-(-size // CHUNK) + 1) * group_bytes
        bound += pending + threads * (2 * group_bytes + compressed)
        text += (
            f" + {mb(pending)} pending row groups + {threads} threads × (2 × {mb(group_bytes)} "
            f"decoded + {mb(compressed)} compressed row group)"
        )
    return bound, text


# --- the page -----------------------------------------------------------------------------------


def mb(count_bytes: float) -> str:
    return f"{count_bytes / 1e6:.1f} MB"


def seconds(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def versions() -> List[Tuple[str, str]]:
    found = [("python", platform.python_version())]
    for name in ("numpy", "pyarrow", "torch", "polars", "duckdb", "ray", "datasets"):
        try:
            module = __import__(name)
            found.append((name, getattr(module, "__version__", "?")))
        except Exception:
            found.append((name, "not installed"))
    commit = ""
    with contextlib.suppress(Exception):
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    found.append(("arrow_dlpack", ad.__version__ + (f" (installed wheel; tree at {commit})" if commit else "")))
    return found


def render(
    work: Workload,
    times: Dict[Tuple[str, int], List[float]],
    loops: Dict[Tuple[str, int], Tuple[float, float, float]],
    rss: Dict[Tuple[str, int], Tuple[dict, int, str]],
    args: argparse.Namespace,
    elapsed: float,
) -> str:
    def median(key: str, size: int) -> Optional[float]:
        values = times.get((key, size))
        return statistics.median(values) if values else None

    reference = {"memory": "pyarrow-ipc", "ipc": "pyarrow-ipc", "parquet": "pyarrow-parquet"}
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out = [
        "## The loader",
        "",
        "The loader's workload, written by `bench/bench_loader.py` (run by "
        "`cargo xtask bench`, which puts this section here): "
        f"{work.rows:,} rows of 16 float32 features, an int64 label and an "
        "`arrow.fixed_shape_tensor` float32[8] embedding, as an uncompressed Arrow IPC file and a "
        f"Snappy Parquet file (record batches and row groups of {CHUNK:,} rows). "
        "One pass makes every batch into torch tensors: features (B, 16) float32, labels (B,), "
        "embeddings (B, 8).",
        "",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; the run took "
        f"{elapsed:.0f} s.",
        f"- Machine: {os.cpu_count()} shared cores, Linux {platform.machine()}, load average at the "
        f"end {load}; other builds may have been running.",
        "- Versions: " + ", ".join(f"{name} {version}" for name, version in versions()) + ".",
        f"- Method: {args.repetitions} repetitions; each runs every method once, the order rotated "
        "every repetition, after one warm-up pass each. Wall-clock seconds per pass: the median, "
        "and the range in parentheses. Ray Data and Hugging Face datasets run on the first "
        f"{work.slow_rows:,} rows and their times are multiplied by {work.rows / work.slow_rows:g} "
        "(marked *scaled*). torch runs on one thread (`torch.set_num_threads(1)`).",
        "- \"vs by hand\" divides by pyarrow by hand over the same format (IPC for the floor and the "
        "IPC methods, Parquet for the Parquet methods).",
        "",
        # The chart is drawn from the table below by charts.py, which `cargo xtask bench` runs last.
        "![Bar chart of the loader's seconds per pass beside its anchors, per source format and batch "
        "size: lower is better](benchmarks-loader.svg)",
        "",
        "| method | B = 1,024: s | vs floor | vs by hand | B = 8,192: s | vs floor | vs by hand |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        if method.detail:
            continue
        label = method.label
        if method.slow and median(method.key, BATCH_SIZES[0]) is not None:
            raw = ", ".join(
                seconds(median(method.key, size) * work.slow_rows / work.rows)
                for size in BATCH_SIZES
                if median(method.key, size) is not None
            )
            label += f" (*scaled*: {raw} s for {work.slow_rows:,} rows)"
        cells = [label + (f"; {method.note}" if method.note else "")]
        for size in BATCH_SIZES:
            value = median(method.key, size)
            if value is None:
                cells += ["did not run", "", ""]
                continue
            values = times[(method.key, size)]
            floor = median("floor", size)
            by_hand = median(reference[method.format], size)
            cells.append(f"{seconds(value)} ({seconds(min(values))}-{seconds(max(values))})")
            cells.append(f"{value / floor:.1f}" if floor else "")
            cells.append(f"{value / by_hand:.2f}" if by_hand else "")
        out.append("| " + " | ".join(cells) + " |")

    targets = []

    def ratio(key: str, against: str, size: int) -> Optional[float]:
        a, b = median(key, size), median(against, size)
        return a / b if a is not None and b else None

    def target(text: str, value: Optional[float], limit: float, unit: str = "x") -> None:
        if value is None:
            targets.append(f"| {text} | did not run | <= {limit:g}{unit} | **missed** |")
        else:
            targets.append(f"| {text} | {value:.2f}{unit} | <= {limit:g}{unit} | {met(value <= limit)} |")

    target("IPC, B = 1,024: ours / pyarrow by hand", ratio("ours-ipc", "pyarrow-ipc", 1024), 0.7)
    target("IPC, B = 8,192: ours / the floor", ratio("ours-ipc", "floor", 8192), 2)
    target(
        "IPC, B = 8,192: ours with `row_major=False` (features a strided view) / the floor",
        ratio("ours-ipc-column-major", "floor", 8192),
        2,
    )
    for size in BATCH_SIZES:
        target(
            f"Parquet, B = {size:,}: ours / pyarrow by hand",
            ratio("ours-parquet", "pyarrow-parquet", size),
            0.8,
        )
    small, large = (median("ours-parquet", size) for size in BATCH_SIZES)
    target(
        f"Parquet: ours per pass at B = {BATCH_SIZES[1]:,} / at B = {BATCH_SIZES[0]:,} (larger batches "
        "never cost more)",
        large / small if small and large else None,
        1.0,
    )
    for (kind, size), (waiting, total, consumer) in loops.items():
        targets.append(
            f"| training loop, {kind}, B = {size:,}: waiting in `next()` / total "
            f"({seconds(waiting)} s of {seconds(total)} s; the consumer alone {seconds(consumer)} s) "
            f"| {100 * waiting / total:.1f}% | <= 10% | {met(waiting <= 0.1 * total)} |"
        )
    for (kind, size), (result, bound, text) in rss.items():
        peak = f"peak RSS grew {mb(result['hwm_growth'])} (ru_maxrss {mb(result['maxrss_growth'])})"
        if kind == "ipc":
            measured = result["anon_growth"]
            what = (
                f"anonymous memory; the {peak} includes the {mb(work.ipc.stat().st_size)} file "
                "map paged in, the source's own"
            )
        else:
            measured = max(result["anon_growth"], result["hwm_growth"])
            what = f"{peak}, anonymous memory {mb(result['anon_growth'])}; the larger"
        targets.append(
            f"| peak memory over a pass, {kind}, B = {size:,}: {what}; bound {text} "
            f"| {mb(measured)} | <= {mb(bound)} | {met(measured <= bound)} |"
        )
    out += [
        "",
        "### Targets",
        "",
        "| target | measured | target | |",
        "|---|---|---|---|",
        *targets,
        "",
        "The training loop: a consumer multiplies each batch's features by a (16, 256) matrix, "
        "repeated to about 0.5 ms per batch of 1,024 rows (proportionally longer for 8,192), on one "
        "torch thread; the time spent in `next()` is summed over the pass. Peak memory: one pass "
        "in a fresh subprocess: the peak RSS (`VmHWM`, reset with /proc/self/clear_refs before the "
        "pass so that the imports' peak does not hide it; `resource.getrusage(RUSAGE_SELF).ru_maxrss` "
        "before and after beside it) and `RssAnon` of /proc/self/status sampled every millisecond; the bound is docs/loader.md's "
        "with the defaults (`prefetch=2`, `decode_threads` = min(cores, 4)).",
        "",
        "### Where our time goes",
        "",
        "| pass | B = 1,024: s | B = 8,192: s |",
        "|---|---|---|",
    ]
    for key, label in (
        ("ours-ipc", "ours over IPC, as in the table"),
        ("ours-ipc-bare", "ours over IPC, `ad.batches` iterated without `torch.from_dlpack`"),
        ("ours-parquet", "ours over Parquet, as in the table"),
        ("ours-parquet-bare", "ours over Parquet, `ad.batches` iterated without `torch.from_dlpack`"),
    ):
        cells = [seconds(median(key, size)) if median(key, size) is not None else "" for size in BATCH_SIZES]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out += loader_criterion.rows(args.criterion_dir)
    if args.notes and args.notes.is_file():
        out += ["", args.notes.read_text().strip()]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--slow-rows", type=int, default=200_000, help="rows for Ray and datasets")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--output", type=Path, help="where to write the section (default: print)")
    parser.add_argument("--criterion-dir", type=Path, help="criterion's output (target/criterion)")
    parser.add_argument("--only", help="comma-separated method keys (and the floor)")
    parser.add_argument(
        "--notes",
        type=Path,
        default=NOTES,
        help="a Markdown file appended to the section (default: the misses explained, loader_notes.md)",
    )
    parser.add_argument("--sequences-rows", type=int, default=100_000, help="sequences of the last part")
    parser.add_argument("--sequences-only", action="store_true", help="run the sequences part only")
    parser.add_argument("--ray-rows", type=int, default=2_000_000, help="rows of the Ray Data part")
    parser.add_argument("--ray-only", action="store_true", help="run the Ray Data part only")
    parser.add_argument("--shared-cache-rows", type=int, default=500_000, help="rows of the shared-cache part")
    parser.add_argument("--latency-rows", type=int, default=2_000_000, help="rows of the latency part")
    parser.add_argument("--rss-child", nargs=2, metavar=("PATH", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child[0], int(args.rss_child[1]))
        return 0

    if args.sequences_only or args.ray_only:
        if args.ray_only:
            page = loader_ray.run(args.ray_rows, 3, log)
        else:
            page = loader_sequences.run(args.sequences_rows, args.sequences_rows // 5, 3, log)
        emit(page, args.output)
        return 0
    started = time.perf_counter()
    methods = METHODS
    if args.only:
        keys = set(args.only.split(",")) | {"floor", "pyarrow-ipc", "pyarrow-parquet"}
        methods = [m for m in METHODS if m.key in keys]
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as directory:
        log(f"==> writing {args.rows:,} rows to {directory}")
        work = write_workload(Path(directory), args.rows, args.slow_rows)
        log("==> timing one pass per method, alternating")
        times = time_methods(work, methods, args.repetitions, log)
        log("==> the training loop")
        loops = {}
        for size in BATCH_SIZES:
            consume, per_batch = calibrate_work(size, 0.0005)
            for kind, path in (("IPC", work.ipc), ("Parquet", work.parquet)):
                runs = [training_loop(path, size, consume) for _ in range(3)]
                waiting, total = sorted(runs, key=lambda r: r[0] / r[1])[1]
                consumer = per_batch * -(-work.rows // size)
                loops[(kind, size)] = (waiting, total, consumer)
        log("==> peak memory, in fresh subprocesses")
        rss = {}
        for kind, path in (("ipc", work.ipc), ("parquet", work.parquet)):
            for size in BATCH_SIZES:
                bound, text = memory_bound(work, kind, size)
                rss[(kind, size)] = (measure_rss(path, size), bound, text)
        page = render(work, times, loops, rss, args, time.perf_counter() - started)
    log("==> Ray Data")
    ray_section = loader_ray.run(args.ray_rows, 3, log)
    log("==> sequences")
    sequences = loader_sequences.run(args.sequences_rows, args.sequences_rows // 5, 3, log)
    page = page.rstrip("\n") + "\n\n" + ray_section + "\n" + sequences
    log("==> resuming")
    resume = loader_resume.run(args.rows, args.repetitions, log)
    page = page.rstrip("\n") + "\n\n" + resume
    log("==> balance across ranks")
    balance = loader_balance.run(args.sequences_rows, 3, log)
    page = page.rstrip("\n") + "\n\n" + balance
    log("==> object storage")
    remote = loader_object_store.run(args.rows, args.repetitions, log)
    page = page.rstrip("\n") + "\n\n" + remote
    log("==> a cache shared by ranks and workers")
    shared = loader_object_cache.run(args.shared_cache_rows, log)
    page = page.rstrip("\n") + "\n\n" + shared
    log("==> read-ahead against latency")
    latency = loader_object_latency.run(args.latency_rows, 3, 0.02, log)
    page = page.rstrip("\n") + "\n\n" + latency
    emit(page, args.output)
    with contextlib.suppress(Exception):
        import ray

        if ray.is_initialized():
            ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
