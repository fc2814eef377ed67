"""The images benchmark: encoded JPEGs in Parquet to uint8 (64, 3, 224, 224) torch batches
(decode, shorter side to 256 bilinear antialiased, centre crop 224), ours beside the ways people
do it today, in one run.

Methods (each in a fresh subprocess, so that its peak memory is its own):

- ``pil``: PIL by hand in one process (``Image.open``, ``convert("RGB")``, ``resize``,
  ``crop``, ``np.stack``);
- ``torchvision``: ``torchvision.io.decode_jpeg`` and ``transforms.v2`` ``Resize(256,
  antialias=True)`` + ``CenterCrop(224)`` in one process;
- ``hf-datasets``: a Hugging Face ``Dataset`` read from the Parquet file, PIL in
  ``set_transform``, a ``DataLoader`` without workers;
- ``dataloader-2-workers``: a map-style dataset over the rows, PIL in ``__getitem__``, a
  ``DataLoader`` with 2 worker processes;
- ``ours``: ``ad.batches(path, 64, images={"image": {"size": 224, "resize": 256}})`` over the
  Parquet file, the decoding on the loader's threads, pipelined with the consumer;
- ``decode-images``: ``ad.decode_images`` over each record batch's column (pyarrow's
  ``iter_batches(64)``), on the calling thread's pool.

The loop-wait check runs ``ours`` with 2 ms of work per batch in the loop (a sleep, as a loop
that hands its batches to a GPU leaves the CPU free) and reports the share of the loop's time
spent waiting in ``next()``.

Each reports images per second (wall clock of one full pass after a short warm-up), CPU seconds
per image (user + system of the process and its reaped workers) and peak resident memory. A
second workload of larger photos (1,024 to 2,048 pixels on the long side, as COCO and OpenImages
hold) times torchvision, PIL and ours, where decode-time downscaling would pay.

Run alone against the installed (release) wheel: ``python bench/images.py`` prints the section;
``--output docs/benchmarks.md`` splices it into the page in place of its "## Images" section.
"""

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BATCH = 64
RESIZE, CROP = 256, 224
METHODS = ["pil", "torchvision", "hf-datasets", "dataloader-2-workers", "decode-images", "ours"]
# The work per batch of the loop-wait check, and the target share of the loop spent in next().
LOOP_WORK_S = 0.002
LOOP_WAIT_TARGET = 0.10
LARGE_METHODS = ["pil", "pil-draft", "torchvision", "ours"]
# Targets: ours at least this many times the images per second of each anchor, and at most
# this fraction of torchvision's CPU seconds per image.
SPEED_TARGETS = {"torchvision": 2.0, "pil": 3.0, "hf-datasets": 3.0, "dataloader-2-workers": 3.0}
CPU_TARGETS = {"small": 0.9, "large": 0.5}


# --- the workloads ------------------------------------------------------------------------------


def photo(width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """A photograph-like image: smooth gradients, a few shapes of flat colour with soft
    edges, fine texture and sensor noise."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = rng.uniform(40, 200, 3).astype(np.float32)
    slope = rng.uniform(-0.3, 0.3, (2, 3)).astype(np.float32)
    image = base + x[..., None] * slope[0] * 256 / width + y[..., None] * slope[1] * 256 / height
    for _ in range(int(rng.integers(4, 9))):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        rx, ry = rng.uniform(0.05, 0.3) * width, rng.uniform(0.05, 0.3) * height
        inside = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2
        weight = np.clip(1.5 - inside, 0, 1)[..., None]
        image = image * (1 - weight) + rng.uniform(0, 255, 3).astype(np.float32) * weight
    texture = np.sin(x * rng.uniform(0.05, 0.4)) * np.cos(y * rng.uniform(0.05, 0.4))
    image += texture[..., None] * rng.uniform(4, 12)
    image += rng.normal(0, 8.5, image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def write_workload(path: Path, count: int, long_side: tuple, short_side: tuple, seed: int) -> dict:
    """``count`` JPEGs (PIL, quality 90) of random sizes, with labels, in one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = []
    for _ in range(count):
        width = int(rng.integers(long_side[0], long_side[1] + 1))
        height = int(rng.integers(short_side[0], short_side[1] + 1))
        if rng.random() < 0.2:
            width, height = height, width
        out = io.BytesIO()
        Image.fromarray(photo(width, height, rng)).save(out, "JPEG", quality=90)
        images.append(out.getvalue())
    table = pa.table({"image": pa.array(images, pa.binary()), "label": np.arange(count) % 1000})
    pq.write_table(table, path, row_group_size=256)
    sizes = [len(data) for data in images]
    return {"count": count, "mean_bytes": float(np.mean(sizes))}


# --- the methods (run in a child process) -------------------------------------------------------


def pil_transform(data: bytes) -> np.ndarray:
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    width, height = image.size
    if width <= height:
        size = (RESIZE, int(RESIZE * height / width))
    else:
        size = (int(RESIZE * width / height), RESIZE)
    image = image.resize(size, Image.Resampling.BILINEAR)
    left = int(round((size[0] - CROP) / 2.0))
    top = int(round((size[1] - CROP) / 2.0))
    return np.asarray(image.crop((left, top, left + CROP, top + CROP))).transpose(2, 0, 1)


def pil_draft_transform(data: bytes) -> np.ndarray:
    """PIL with ``Image.draft``: libjpeg-turbo decodes at the smallest of 1/2, 1/4, 1/8 scale
    that keeps the shorter side at least 256, then the same resize and crop (what decode-time
    downscaling gives)."""
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    width, height = image.size
    scale = RESIZE / min(width, height)
    image.draft("RGB", (int(width * scale) + 1, int(height * scale) + 1))
    image = image.convert("RGB")
    width, height = image.size
    if width <= height:
        size = (RESIZE, int(RESIZE * height / width))
    else:
        size = (int(RESIZE * width / height), RESIZE)
    image = image.resize(size, Image.Resampling.BILINEAR)
    left = int(round((size[0] - CROP) / 2.0))
    top = int(round((size[1] - CROP) / 2.0))
    return np.asarray(image.crop((left, top, left + CROP, top + CROP))).transpose(2, 0, 1)


def batches_of(path: Path):
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).iter_batches(batch_size=BATCH, columns=["image", "label"])


def run_pil(path: Path):
    import torch

    for batch in batches_of(path):
        images = [pil_transform(data) for data in batch.column("image").to_pylist()]
        yield torch.from_numpy(np.stack(images))


def run_pil_draft(path: Path):
    import torch

    for batch in batches_of(path):
        images = [pil_draft_transform(data) for data in batch.column("image").to_pylist()]
        yield torch.from_numpy(np.stack(images))


def run_torchvision(path: Path):
    import torch
    from torchvision.io import decode_jpeg
    from torchvision.transforms import v2

    transform = v2.Compose([v2.Resize(RESIZE, antialias=True), v2.CenterCrop(CROP)])
    for batch in batches_of(path):
        encoded = [
            torch.frombuffer(bytearray(data), dtype=torch.uint8)
            for data in batch.column("image").to_pylist()
        ]
        yield torch.stack([transform(image) for image in decode_jpeg(encoded)])


def run_hf_datasets(path: Path):
    import datasets
    import torch

    datasets.disable_progress_bars()
    dataset = datasets.Dataset.from_parquet(str(path), cache_dir=str(path.parent / "hf-cache"))

    def transform(rows):
        rows["image"] = [torch.from_numpy(pil_transform(data)) for data in rows["image"]]
        return rows

    dataset.set_transform(transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=0)
    for batch in loader:
        yield batch["image"]


class _PilRows:
    """A map-style dataset over the rows of an in-memory table, decoded with PIL."""

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self.table = pq.read_table(path, columns=["image", "label"])

    def __len__(self):
        return self.table.num_rows

    def __getitem__(self, index):
        import torch

        data = self.table.column("image")[index].as_py()
        return torch.from_numpy(pil_transform(data)), self.table.column("label")[index].as_py()


def run_dataloader_2_workers(path: Path):
    import torch

    loader = torch.utils.data.DataLoader(_PilRows(path), batch_size=BATCH, num_workers=2)
    for images, _ in loader:
        yield images


def run_decode_images(path: Path):
    import torch

    import arrow_dlpack as ad

    for batch in batches_of(path):
        decoded = ad.decode_images(batch.column("image"), CROP, resize=RESIZE)
        yield torch.from_dlpack(decoded.images)


def run_ours(path: Path):
    import torch

    import arrow_dlpack as ad

    spec = {"image": {"size": CROP, "resize": RESIZE}}
    for batch in ad.batches(str(path), BATCH, images=spec, columns=["label"]):
        yield torch.from_dlpack(batch["image"])


def loop_wait(path: Path) -> dict:
    """``ours`` in a loop that works ``LOOP_WORK_S`` per batch: the time spent in ``next()``."""
    import torch

    import arrow_dlpack as ad

    spec = {"image": {"size": CROP, "resize": RESIZE}}
    loader = iter(ad.batches(str(path), BATCH, images=spec, columns=["label"]))
    waited, count, start = 0.0, 0, time.perf_counter()
    while True:
        before = time.perf_counter()
        batch = next(loader, None)
        waited += time.perf_counter() - before
        if batch is None:
            break
        count += torch.from_dlpack(batch["image"]).shape[0]
        time.sleep(LOOP_WORK_S)
    wall = time.perf_counter() - start
    return {"images": count, "wall": wall, "waited": waited}


RUNNERS = {
    "pil": run_pil,
    "pil-draft": run_pil_draft,
    "torchvision": run_torchvision,
    "hf-datasets": run_hf_datasets,
    "dataloader-2-workers": run_dataloader_2_workers,
    "decode-images": run_decode_images,
    "ours": run_ours,
}


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def child(method: str, path: Path, warmup: int) -> None:
    """One method over the workload: a warm-up pass over ``warmup`` batches, then a timed pass;
    prints one JSON line."""
    if method == "loop-wait":
        print(json.dumps(loop_wait(path)))
        return
    runner = RUNNERS[method]
    for index, images in enumerate(runner(path)):
        assert images.shape[1:] == (3, CROP, CROP) and images.dtype.is_floating_point is False
        if index + 1 >= warmup:
            break
    cpu, wall = cpu_seconds(), time.perf_counter()
    count = 0
    for images in runner(path):
        count += images.shape[0]
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"images": count, "wall": wall, "cpu": cpu, "rss_kib": own, "workers_rss_kib": workers}))


def run_child(method: str, path: Path, warmup: int) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", method, str(path), str(warmup)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{method} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- the page -----------------------------------------------------------------------------------


def summarise(runs: list) -> dict:
    """The median run by images per second."""
    runs = sorted(runs, key=lambda run: run["images"] / run["wall"])
    run = runs[len(runs) // 2]
    return {
        "per_second": run["images"] / run["wall"],
        "cpu_per_image": run["cpu"] / run["images"],
        "peak_mib": (run["rss_kib"] + run["workers_rss_kib"]) / 1024,
        "workers_mib": run["workers_rss_kib"] / 1024,
    }


def render(small: dict, large: dict, workloads: dict, seconds: float, loop: dict) -> str:
    names = {
        "pil": "PIL by hand, one process",
        "pil-draft": "PIL with `Image.draft` (libjpeg-turbo's decode-time downscaling), one process",
        "torchvision": "`torchvision.io.decode_jpeg` + `transforms.v2`, one process",
        "hf-datasets": "Hugging Face `datasets`, `set_transform` + `DataLoader`",
        "dataloader-2-workers": "`DataLoader`, 2 worker processes + PIL",
        "decode-images": "`ad.decode_images` per record batch",
        "ours": "`ad.batches(..., images=...)` over the Parquet file",
    }
    out = [
        "## Images",
        "",
        "`python bench/images.py` against the installed wheel (under `cargo xtask bench`, the "
        "profiling build: the dist wheel with line tables), on the 2-core machine described above "
        f"({seconds:.0f} s); each method in a fresh process, one warm-up pass over a few batches, "
        "then one full pass (the median of the repetitions).",
        f"The workload: {workloads['small']['count']:,} JPEGs of 400 to 640 x 300 to 500 pixels "
        f"({workloads['small']['mean_bytes'] / 1000:.0f} KB on average, written by PIL at quality "
        "90 into Parquet), decoded, the shorter side resized to 256 (bilinear, antialiased) and "
        "centre-cropped to 224, as uint8 `(64, 3, 224, 224)` torch batches.",
        "",
        "| method | images/s | CPU ms per image | peak memory (MiB) |",
        "|---|---:|---:|---:|",
    ]
    for method in METHODS:
        row = small[method]
        memory = f"{row['peak_mib']:.0f}"
        if row["workers_mib"]:
            memory += f" (workers {row['workers_mib']:.0f})"
        out.append(
            f"| {names[method]} | {row['per_second']:.0f} | {row['cpu_per_image'] * 1000:.2f} | {memory} |"
        )
    out += [
        "",
        f"Larger photos: {workloads['large']['count']:,} JPEGs of 1,024 to 2,048 pixels on the long "
        f"side ({workloads['large']['mean_bytes'] / 1000:.0f} KB on average), the same transform.",
        "",
        "| method | images/s | CPU ms per image | peak memory (MiB) |",
        "|---|---:|---:|---:|",
    ]
    for method in LARGE_METHODS:
        row = large[method]
        out.append(
            f"| {names[method]} | {row['per_second']:.0f} | {row['cpu_per_image'] * 1000:.2f} | {row['peak_mib']:.0f} |"
        )
    ours = small["ours"]
    out += ["", "| target | measured | |", "|---|---:|---|"]
    for method, target in SPEED_TARGETS.items():
        ratio = ours["per_second"] / small[method]["per_second"]
        verdict = "met" if ratio >= target else "missed"
        out.append(f"| images/s at least {target:g}x {names[method]} | {ratio:.2f}x | {verdict} |")
    for key, rows in (("small", small), ("large", large)):
        ratio = rows["ours"]["cpu_per_image"] / rows["torchvision"]["cpu_per_image"]
        target = CPU_TARGETS[key]
        verdict = "met" if ratio <= target else "missed"
        label = "this workload" if key == "small" else "the larger photos"
        out.append(
            f"| CPU per image at most {target:g}x torchvision's, {label} | {ratio:.2f}x | {verdict} |"
        )
    share = loop["waited"] / loop["wall"]
    verdict = "met" if share < LOOP_WAIT_TARGET else "missed"
    decode_bound = loop["images"] / max(loop["wall"] - loop["images"] / BATCH * LOOP_WORK_S, 1e-9)
    out.append(
        f"| a loop of {LOOP_WORK_S * 1000:g} ms of work per batch of {BATCH} waits in `next()` under "
        f"{LOOP_WAIT_TARGET:.0%} of its time | {share:.0%} ({loop['images'] / loop['wall']:.0f} images/s; "
        f"decode-bound rate {decode_bound:.0f} images/s) | {verdict} |"
    )
    notes = Path(__file__).with_name("images_notes.md")
    if notes.exists():
        out += ["", notes.read_text().strip()]
    return "\n".join(out) + "\n"


def splice(page: str, section: str) -> str:
    """``page`` with its "## Images" section replaced by ``section`` (or ``section`` inserted
    before "## The wheel", or appended)."""
    start = page.find("\n## Images\n")
    if start >= 0:
        end = page.find("\n## ", start + 1)
        end = len(page) if end < 0 else end
        return page[: start + 1] + section + page[end:]
    wheel = page.find("\n## The wheel\n")
    if wheel >= 0:
        return page[: wheel + 1] + section + "\n" + page[wheel + 1 :]
    return page.rstrip("\n") + "\n\n" + section


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, help="the page to splice the section into")
    parser.add_argument("--count", type=int, default=2000, help="JPEGs of the main workload")
    parser.add_argument("--large-count", type=int, default=200, help="JPEGs of larger photos")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--only", help="comma-separated methods")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), int(args.child[2]))
        return 0
    started = time.perf_counter()
    methods = [m for m in METHODS + ["pil-draft"] if not args.only or m in args.only.split(",")]

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-images-") as directory:
        small_path, large_path = Path(directory, "small.parquet"), Path(directory, "large.parquet")
        log(f"==> writing {args.count:,} JPEGs and {args.large_count:,} larger ones to {directory}")
        workloads = {
            "small": write_workload(small_path, args.count, (400, 640), (300, 500), 1),
            "large": write_workload(large_path, args.large_count, (1024, 2048), (768, 1536), 2),
        }
        log(f"    {workloads}")
        small = {m: [] for m in methods if m in METHODS}
        large = {m: [] for m in LARGE_METHODS if m in methods}
        for repetition in range(args.repetitions):
            for method in small:
                run = run_child(method, small_path, 4)
                small[method].append(run)
                log(f"    {repetition} small {method}: {run['images'] / run['wall']:.0f} images/s")
            for method in large:
                run = run_child(method, large_path, 1)
                large[method].append(run)
                log(f"    {repetition} large {method}: {run['images'] / run['wall']:.1f} images/s")
        loop = run_child("loop-wait", small_path, 0) if "ours" in small else None
        if loop:
            log(f"    loop-wait: {loop['waited'] / loop['wall']:.0%} of {loop['wall']:.1f} s in next()")
    small = {m: summarise(runs) for m, runs in small.items()}
    large = {m: summarise(runs) for m, runs in large.items()}
    if set(small) != set(METHODS) or set(large) != set(LARGE_METHODS):
        print(json.dumps({"small": small, "large": large}, indent=1))
        return 0
    section = render(small, large, workloads, time.perf_counter() - started, loop)
    if args.output:
        args.output.write_text(splice(args.output.read_text(), section))
        log(f"==> wrote {args.output}")
    else:
        print(section)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
