"""The loader beside its anchors: issue 13's workload, one pass per method, methods alternating.

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
into docs/benchmarks.md.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import torch

import arrow_dlpack as ad

FEATURES = [f"f{i}" for i in range(16)]
CHUNK = 131_072  # rows per IPC record batch and per Parquet row group
BATCH_SIZES = (1024, 8192)
ROW_BYTES = 16 * 4 + 8 + 8 * 4  # the bytes of one row of the three tensors
ROOT = Path(__file__).resolve().parents[3]

# The hand-written explanation of the misses, kept beside the script so that a new run keeps it
# (update it when the figures it quotes change).
NOTES = Path(__file__).resolve().parent / "loader_notes.md"

# The consumer of the training loop runs on one thread, as a GPU step would leave the CPU's
# cores to the loader; the anchors do not use torch's threads.
torch.set_num_threads(1)

Triple = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


# --- the workload ---------------------------------------------------------------------------


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(13)
    columns = {name: pa.array(rng.standard_normal(rows, dtype=np.float32)) for name in FEATURES}
    columns["label"] = pa.array(rng.integers(0, 10, rows, dtype=np.int64))
    values = rng.standard_normal(rows * 8, dtype=np.float32)
    storage = pa.FixedSizeListArray.from_arrays(pa.array(values), 8)
    columns["embedding"] = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), [8]), storage
    )
    return pa.table(columns)


@dataclass
class Workload:
    rows: int
    ipc: Path
    parquet: Path
    slow_rows: int
    slow_parquet: Path
    table: pa.Table


def write_workload(directory: Path, rows: int, slow_rows: int) -> Workload:
    table = make_table(rows)
    ipc_path = directory / "workload.arrow"
    with pa.OSFile(str(ipc_path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=CHUNK):
            writer.write_batch(batch)
    parquet_path = directory / "workload.parquet"
    pq.write_table(table, parquet_path, row_group_size=CHUNK, compression="snappy")
    slow_rows = min(slow_rows, rows)
    slow_path = directory / "workload-small.parquet"
    pq.write_table(table.slice(0, slow_rows), slow_path, row_group_size=CHUNK, compression="snappy")
    return Workload(rows, ipc_path, parquet_path, slow_rows, slow_path, table)


# --- the methods: each returns a callable that makes one pass and returns the rows seen -----


def rebatch(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """Record batches of exactly ``size`` rows (the last shorter), cut with ``slice`` and joined
    with ``pa.concat_batches`` where a batch spans record batches: what one writes by hand."""
    pending: List[pa.RecordBatch] = []
    have = 0
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            take = min(size - have, batch.num_rows - offset)
            pending.append(batch.slice(offset, take))
            have += take
            offset += take
            if have == size:
                yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
                pending, have = [], 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def embedding_storage(array: pa.Array) -> pa.Array:
    return array.storage if isinstance(array, pa.ExtensionArray) else array


def by_hand(batch: pa.RecordBatch) -> Triple:
    """PyArrow by hand: ``to_tensor`` of the features' record batch, DLPack for the rest."""
    features = torch.from_dlpack(batch.select(FEATURES).to_tensor())
    label = torch.from_dlpack(batch.column("label"))
    embedding = torch.from_dlpack(embedding_storage(batch.column("embedding")).flatten()).view(-1, 8)
    return features, label, embedding


def count(triples: Iterator[Triple]) -> int:
    rows = 0
    for features, label, embedding in triples:
        rows += features.shape[0]
    return rows


def floor_pass(work: Workload, size: int) -> Callable[[], int]:
    features = np.ascontiguousarray(
        np.stack([work.table.column(name).to_numpy() for name in FEATURES], axis=1)
    )
    label = work.table.column("label").to_numpy()
    embedding = np.asarray(
        embedding_storage(work.table.column("embedding").combine_chunks()).flatten()
    ).reshape(-1, 8)

    def run() -> int:
        return count(
            (
                torch.from_numpy(features[start : start + size]),
                torch.from_numpy(label[start : start + size]),
                torch.from_numpy(embedding[start : start + size]),
            )
            for start in range(0, work.rows, size)
        )

    return run


def ipc_batches(path: Path) -> Iterator[pa.RecordBatch]:
    with pa.memory_map(str(path)) as source:
        reader = ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def pyarrow_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(by_hand(batch) for batch in rebatch(ipc_batches(work.ipc), size))


def to_numpy_triple(batch: pa.RecordBatch) -> Triple:
    features = np.stack([batch.column(name).to_numpy() for name in FEATURES], axis=1)
    label = batch.column("label").to_numpy()
    embedding = np.asarray(embedding_storage(batch.column("embedding")).flatten()).reshape(-1, 8)
    return torch.from_numpy(features), torch.from_numpy(label), torch.from_numpy(embedding)


def numpy_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(to_numpy_triple(batch) for batch in rebatch(ipc_batches(work.ipc), size))


def pyarrow_parquet_pass(work: Workload, size: int) -> Callable[[], int]:
    def run() -> int:
        reader = pq.ParquetFile(work.parquet)
        return count(by_hand(batch) for batch in rebatch(reader.iter_batches(batch_size=size), size))

    return run


def polars_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    import polars as pl

    def triples() -> Iterator[Triple]:
        frame = pl.read_ipc(work.ipc)  # polars 2 maps an uncompressed local file itself
        for start in range(0, frame.height, size):
            part = frame.slice(start, size)
            yield (
                part.select(FEATURES).to_torch(),
                part.get_column("label").to_torch(),
                part.get_column("embedding").to_torch(),
            )

    return lambda: count(triples())


def duckdb_pass(work: Workload, size: int) -> Callable[[], int]:
    import duckdb

    def run() -> int:
        connection = duckdb.connect()
        relation = connection.sql(f"select * from '{work.parquet}'")
        # duckdb 2 renamed fetch_record_batch(rows) to to_arrow_reader(rows).
        fetch = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
        reader = fetch(size)
        rows = count(by_hand(batch) for batch in rebatch(iter(reader), size))
        connection.close()
        return rows

    return run


def ray_pass(work: Workload, size: int) -> Callable[[], int]:
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=os.cpu_count() or 2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            object_store_memory=1 << 30,
        )
    ray.data.DataContext.get_current().enable_progress_bars = False
    def triples() -> Iterator[Triple]:
        dataset = ray.data.read_parquet(str(work.slow_parquet))
        for batch in dataset.iter_torch_batches(batch_size=size):
            features = torch.stack([batch[name] for name in FEATURES], dim=1)
            yield features, batch["label"], batch["embedding"].reshape(-1, 8)

    return lambda: count(triples())


def hf_pass(work: Workload, size: int) -> Callable[[], int]:
    import datasets

    datasets.disable_progress_bars()
    # datasets refuses arrow.fixed_shape_tensor ("does not have a datasets dtype equivalent"):
    # the other columns only.
    table = pq.read_table(work.slow_parquet, columns=FEATURES + ["label"])
    dataset = datasets.Dataset(datasets.table.InMemoryTable(table)).with_format("torch")

    def triples() -> Iterator[Tuple[torch.Tensor, torch.Tensor, None]]:
        for batch in dataset.iter(batch_size=size):
            yield torch.stack([batch[name] for name in FEATURES], dim=1), batch["label"], None

    return lambda: count(triples())  # type: ignore[arg-type]


def ours_triple(batch: Dict[str, ad.Tensor]) -> Triple:
    return (
        torch.from_dlpack(batch["features"]),
        torch.from_dlpack(batch["label"]),
        torch.from_dlpack(batch["embedding"]),
    )


def ours(path: Path, size: int, **options: object) -> Iterator[Dict[str, ad.Tensor]]:
    return iter(
        ad.batches(
            str(path), size, groups={"features": FEATURES}, columns=["label", "embedding"], **options
        )
    )


def ours_ipc_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(ours_triple(batch) for batch in ours(work.ipc, size))


def ours_ipc_column_major_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(ours_triple(batch) for batch in ours(work.ipc, size, row_major=False))


def ours_parquet_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: count(ours_triple(batch) for batch in ours(work.parquet, size))


def ours_ipc_no_torch_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: sum(1 for _ in ours(work.ipc, size)) * size


def ours_parquet_no_torch_pass(work: Workload, size: int) -> Callable[[], int]:
    return lambda: sum(1 for _ in ours(work.parquet, size)) * size


@dataclass
class Method:
    key: str
    label: str
    make: Callable[[Workload, int], Callable[[], int]]
    format: str  # "memory", "ipc" or "parquet": which pyarrow-by-hand row it is compared with
    slow: bool = False  # runs on work.slow_rows and is scaled
    note: str = ""
    detail: bool = False  # a "where the time goes" row, not a method of the main table


METHODS: List[Method] = [
    Method("floor", "numpy views of data already in memory (the floor)", floor_pass, "memory"),
    Method(
        "pyarrow-ipc",
        "pyarrow by hand, memory-mapped IPC (`to_tensor` plus `from_dlpack`)",
        pyarrow_ipc_pass,
        "ipc",
    ),
    Method("numpy-ipc", "pyarrow → numpy → torch, IPC", numpy_ipc_pass, "ipc"),
    Method("polars-ipc", "polars, IPC (`read_ipc`, sliced, `to_torch`)", polars_ipc_pass, "ipc"),
    Method("ours-ipc", "**ours**, `ad.batches` over the IPC file", ours_ipc_pass, "ipc"),
    Method(
        "ours-ipc-column-major",
        "**ours**, `ad.batches(..., row_major=False)` over the IPC file (features a strided view "
        "of the map)",
        ours_ipc_column_major_pass,
        "ipc",
    ),
    Method(
        "pyarrow-parquet",
        "pyarrow by hand, Parquet (`iter_batches` plus `to_tensor`)",
        pyarrow_parquet_pass,
        "parquet",
    ),
    Method("duckdb", "duckdb (`to_arrow_reader(B)`, formerly `fetch_record_batch`), Parquet", duckdb_pass, "parquet"),
    Method(
        "ray",
        "Ray Data `iter_torch_batches`, Parquet",
        ray_pass,
        "parquet",
        slow=True,
    ),
    Method(
        "hf",
        "Hugging Face datasets `.iter(batch_size)`, format \"torch\"",
        hf_pass,
        "parquet",
        slow=True,
        note="without the embedding: datasets refuses `arrow.fixed_shape_tensor`",
    ),
    Method("ours-parquet", "**ours**, `ad.batches` over the Parquet file", ours_parquet_pass, "parquet"),
    Method(
        "ours-ipc-bare",
        "ours over IPC, iterating `ad.batches` without `torch.from_dlpack`",
        ours_ipc_no_torch_pass,
        "ipc",
        detail=True,
    ),
    Method(
        "ours-parquet-bare",
        "ours over Parquet, iterating `ad.batches` without `torch.from_dlpack`",
        ours_parquet_no_torch_pass,
        "parquet",
        detail=True,
    ),
]


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


def criterion_rows(directory: Optional[Path], rows: int) -> List[str]:
    """The loader's criterion estimates (pure Rust, no Python), if they are there."""
    if directory is None:
        return []
    lines = []
    for kind in ("ipc_mmap", "parquet"):
        for size in BATCH_SIZES:
            estimates = directory / "loader" / f"{kind}_{size}" / "new" / "estimates.json"
            if not estimates.is_file():
                estimates = directory / "loader" / kind / str(size) / "new" / "estimates.json"
            if not estimates.is_file():
                continue
            data = json.loads(estimates.read_text())
            median = data["median"]["point_estimate"] / 1e9
            low = data["median"]["confidence_interval"]["lower_bound"] / 1e9
            high = data["median"]["confidence_interval"]["upper_bound"] / 1e9
            lines.append(f"| `loader/{kind}/{size}` | {seconds(median)} | {seconds(low)}-{seconds(high)} |")
    if not lines:
        return []
    return [
        "",
        "The loader alone in Rust (`cargo bench -p arrow-dlpack-loader`, criterion, the same "
        f"workload written by the bench itself, {os.environ.get('LOADER_BENCH_ROWS', '2,000,000')} rows; "
        "seconds per pass, median and its confidence interval):",
        "",
        "| bench | seconds | interval |",
        "|---|---|---|",
        *lines,
    ]


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
        "Issue 13's workload, written by `crates/py-bindings/bench/bench_loader.py` (run by "
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
        "### Targets (issue 13)",
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
    out += criterion_rows(args.criterion_dir, work.rows)
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
    parser.add_argument("--rss-child", nargs=2, metavar=("PATH", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child[0], int(args.rss_child[1]))
        return 0

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

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
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(page)
        log(f"==> wrote {args.output}")
    else:
        print(page)
    with contextlib.suppress(Exception):
        import ray

        if ray.is_initialized():
            ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
