"""The last part of the loader benchmark, "### Ray Data": the loader workload read by Ray Data
and iterated three ways, in order and with Ray's local shuffle.

- Ray's default ``iter_torch_batches`` (a tensor per column; the features stacked and the
  embedding reshaped by hand, as a training step needs them): the anchor;
- ``iter_torch_batches(collate_fn=ad.ray.collate_fn(...))``: Ray cuts and shuffles, ours makes
  the tensors from Ray's Arrow batch;
- ``ad.batches(dataset, ...)``: Ray's blocks as an Arrow stream, cut and shuffled by the loader.

The Parquet file is read into Ray's object store once (``read_parquet(...).materialize()``), so
that the passes time the iteration, which the collate function changes, and not the read, which
is the same for all; every pass checks that it saw every row. One more pass per collate function
times each of its calls: the profile of where the time goes.

    python bench_loader.py --ray-only [--ray-rows 2000000]
"""

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pyarrow.parquet as pq
import torch

import arrow_dlpack as ad

from loader_methods import CHUNK, FEATURES, make_table

BATCH_SIZES = (1024, 8192)
# How much faster than Ray's default `iter_torch_batches` ours with `collate_fn` is meant to be.
TARGET = 3.0
# Ray's local shuffle buffer and the loader's shuffle window, in rows.
SHUFFLE_ROWS = 65_536

def start_ray(object_store_bytes: int) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=os.cpu_count() or 2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            object_store_memory=object_store_bytes,
        )
    ray.data.DataContext.get_current().enable_progress_bars = False


def timed(inner: Callable[[object], object]) -> Tuple[object, List[float]]:
    """A collate function that calls ``inner`` and records the seconds of each call, and the
    list it records them in."""
    from ray.data.collate_fn import ArrowBatchCollateFn

    seconds: List[float] = []

    class Timed(ArrowBatchCollateFn):
        def __call__(self, batch: object) -> object:
            started = time.perf_counter()
            out = inner(batch)
            seconds.append(time.perf_counter() - started)
            return out

    return Timed(), seconds


def default_collate() -> Callable[[object], object]:
    """What ``iter_torch_batches`` collates with when given no ``collate_fn`` (on the CPU)."""
    from ray.data.collate_fn import DefaultCollateFn

    return DefaultCollateFn(combine_chunks=True)


def ours_collate_fn() -> Callable[[object], object]:
    return ad.ray.collate_fn(groups={"features": FEATURES}, columns=["label", "embedding"])


def iter_torch(dataset: object, size: int, shuffle: bool, collate_fn: object) -> int:
    """One pass of ``iter_torch_batches``; the rows seen. With Ray's default collation, the
    features are stacked and the embedding reshaped by hand, as a training step needs them."""
    rows = 0
    for batch in dataset.iter_torch_batches(  # type: ignore[attr-defined]
        batch_size=size,
        collate_fn=collate_fn,
        local_shuffle_buffer_size=SHUFFLE_ROWS if shuffle else None,
    ):
        if "features" not in batch:
            batch["features"] = torch.stack([batch[name] for name in FEATURES], dim=1)
            batch["embedding"].reshape(-1, 8)
        rows += batch["features"].shape[0]
    return rows


def ray_default(dataset: object, size: int, shuffle: bool) -> Callable[[], int]:
    return lambda: iter_torch(dataset, size, shuffle, None)


def ours_collate(dataset: object, size: int, shuffle: bool) -> Callable[[], int]:
    collate = ours_collate_fn()
    return lambda: iter_torch(dataset, size, shuffle, collate)


def ours_batches(dataset: object, size: int, shuffle: bool) -> Callable[[], int]:
    def run() -> int:
        rows = 0
        for batch in ad.batches(
            dataset,
            size,
            groups={"features": FEATURES},
            columns=["label", "embedding"],
            shuffle=shuffle,
            seed=1,
            buffer_size=SHUFFLE_ROWS,
        ):
            rows += torch.from_dlpack(batch["features"]).shape[0]
            torch.from_dlpack(batch["label"]), torch.from_dlpack(batch["embedding"])
        return rows

    return run


METHODS: List[Tuple[str, str, Callable[[object, int, bool], Callable[[], int]]]] = [
    ("ray", "Ray Data's default `iter_torch_batches` (the anchor)", ray_default),
    ("collate", "**ours**, `iter_torch_batches(collate_fn=ad.ray.collate_fn(...))`", ours_collate),
    ("batches", "**ours**, `ad.batches(dataset, ...)`", ours_batches),
]


def run(rows: int, repetitions: int, log: Callable[[str], None]) -> str:
    """Times every method at each batch size, in order and shuffled, methods alternating, and
    returns the section."""
    import ray

    table = make_table(rows)
    # The object store holds the dataset with room to spare.
    start_ray(max(256 << 20, 3 * table.nbytes))
    times: Dict[Tuple[str, int, bool], List[float]] = {}
    profile: Dict[Tuple[str, int, bool], Tuple[float, float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as directory:
        path = Path(directory) / "workload.parquet"
        pq.write_table(table, path, row_group_size=CHUNK, compression="snappy")
        del table
        log(f"==> Ray Data: reading {rows:,} rows into the object store")
        dataset = ray.data.read_parquet(str(path)).materialize()
        blocks = dataset.num_blocks()
        for shuffle in (False, True):
            for size in BATCH_SIZES:
                passes = {key: make(dataset, size, shuffle) for key, _, make in METHODS}
                for one in passes.values():
                    one()  # a warm-up pass
                for repetition in range(repetitions):
                    shift = repetition % len(METHODS)
                    for key, _, _ in METHODS[shift:] + METHODS[:shift]:
                        started = time.perf_counter()
                        seen = passes[key]()
                        elapsed = time.perf_counter() - started
                        assert seen == rows, (key, size, shuffle, seen)
                        times.setdefault((key, size, shuffle), []).append(elapsed)
                # One more pass of each collate function, timed call by call (apart from the
                # timed passes, which the wrapper would slow).
                for key, inner in (("ray", default_collate()), ("collate", ours_collate_fn())):
                    wrapper, seconds = timed(inner)
                    started = time.perf_counter()
                    iter_torch(dataset, size, shuffle, wrapper)
                    whole = time.perf_counter() - started
                    profile[(key, size, shuffle)] = (sum(seconds), whole, len(seconds))
                log(f"   Ray Data: batch {size}, shuffle {shuffle} done")
    return render(rows, blocks, repetitions, times, profile)


def render(
    rows: int,
    blocks: int,
    repetitions: int,
    times: Dict[Tuple[str, int, bool], List[float]],
    profile: Dict[Tuple[str, int, bool], Tuple[float, float, int]],
) -> str:
    def median(key: str, size: int, shuffle: bool) -> float:
        return statistics.median(times[(key, size, shuffle)])

    out = [
        "### Ray Data",
        "",
        f"The workload above ({rows:,} rows: 16 float32 features stacked into `features` (B, 16), "
        "an int64 `label`, an `arrow.fixed_shape_tensor` float32[8] `embedding`), written as "
        f"Parquet and read by `ray.data.read_parquet(...).materialize()` into {blocks} blocks "
        "in Ray's object store before the timing: the passes time the iteration only. "
        f"Shuffled: Ray's `local_shuffle_buffer_size={SHUFFLE_ROWS:,}` for the first two, "
        f"`ad.batches(..., shuffle=True, buffer_size={SHUFFLE_ROWS:,})` for the third. "
        f"Ray runs on a local instance with {os.cpu_count()} CPUs; {repetitions} repetitions, "
        "methods alternating, wall-clock seconds per pass (median, range in parentheses); each "
        "pass checks that it saw every row.",
        "",
        "| method | order | B = 1,024 | vs Ray | B = 8,192 | vs Ray |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for key, label, _ in METHODS:
        for shuffle in (False, True):
            cells = []
            for size in BATCH_SIZES:
                values = times[(key, size, shuffle)]
                spread = f"{min(values):.3f}-{max(values):.3f}"
                cells.append(f"{median(key, size, shuffle):.3f} ({spread})")
                ratio = median("ray", size, shuffle) / median(key, size, shuffle)
                cells.append("1.00" if key == "ray" else f"**{ratio:.2f}x**")
            order = "shuffled" if shuffle else "in order"
            out.append(f"| {label} | {order} | " + " | ".join(cells) + " |")
    out += [
        "",
        "| target | measured | target | |",
        "|---|---|---|---|",
    ]
    for shuffle in (False, True):
        for size in BATCH_SIZES:
            ratio = median("ray", size, shuffle) / median("collate", size, shuffle)
            order = "shuffled" if shuffle else "in order"
            verdict = "met" if ratio >= TARGET else "**missed**"
            out.append(
                f"| Ray's default `iter_torch_batches` / with `ad.ray.collate_fn`, {order}, "
                f"B = {size:,} | {ratio:.2f}x | >= {TARGET:g}x | {verdict} |"
            )
    out += [
        "",
        "Where the time goes: one more pass of each collate function with every call timed: "
        "milliseconds per batch inside the collate function and its share of that pass; the rest "
        "is Ray's own pipeline (fetching blocks, cutting and shuffling batches, handing them "
        "between its threads, the device step), the same for both.",
        "",
        "| collate function | order | B = 1,024: collate | of the pass | B = 8,192: collate "
        "| of the pass |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for key, label, _ in METHODS[:2]:
        for shuffle in (False, True):
            cells = []
            for size in BATCH_SIZES:
                inside, whole, calls = profile[(key, size, shuffle)]
                cells += [f"{1e3 * inside / max(calls, 1):.3f} ms", f"{100 * inside / whole:.0f} %"]
            order = "shuffled" if shuffle else "in order"
            name = "Ray's default" if key == "ray" else "ours"
            out.append(f"| {name} | {order} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
