"""The loader's criterion estimates (``cargo bench -p arrow-dlpack-loader``, pure Rust, no Python)
as the loader section's Markdown: the passes over the workload, and the shuffled IPC passes beside
a bare gather of the same rows, with that target.

``cargo xtask bench`` runs criterion with ``CRITERION_HOME=target/criterion-loader`` and passes
that folder to ``bench_loader.py`` as ``--criterion-dir``; each bench's median and its confidence
interval are read from ``loader/<name>_<B>/new/estimates.json``.
"""

import json
import os
from pathlib import Path
from typing import List, Optional, Tuple

BATCH_SIZES = (1024, 8192)
# At most this many times the ordered pass; or, where the copy itself is the floor, at most this
# many times a bare gather of the same rows measured beside it.
SHUFFLED_OVER_ORDERED = 2.0
SHUFFLED_OVER_GATHER = 1.2


def estimate(directory: Path, name: str, size: int) -> Optional[Tuple[float, float, float]]:
    """The median of one bench and its confidence interval, in seconds, if criterion left it."""
    for path in (directory / "loader" / f"{name}_{size}", directory / "loader" / name / str(size)):
        estimates = path / "new" / "estimates.json"
        if estimates.is_file():
            median = json.loads(estimates.read_text())["median"]
            interval = median["confidence_interval"]
            return (
                median["point_estimate"] / 1e9,
                interval["lower_bound"] / 1e9,
                interval["upper_bound"] / 1e9,
            )
    return None


def rows(directory: Optional[Path]) -> List[str]:
    """The passes' table, then the shuffled IPC subsection; nothing without estimates."""
    if directory is None:
        return []
    lines = []
    for kind in ("ipc_mmap", "ipc_mmap_shuffled", "parquet", "parquet_shuffled", "gather_reference"):
        for size in BATCH_SIZES:
            found = estimate(directory, kind, size)
            if found is not None:
                median, low, high = found
                lines.append(f"| `loader/{kind}/{size}` | {median:.3f} | {low:.3f}-{high:.3f} |")
    if not lines:
        return []
    return [
        "",
        "The loader alone in Rust (`cargo bench -p arrow-dlpack-loader`, criterion, the same "
        f"workload written by the bench itself, {os.environ.get('LOADER_BENCH_ROWS', '2,000,000')} rows; "
        "seconds per pass, median and its confidence interval; `_shuffled` passes shuffle windows of "
        "65,536 rows, and `gather_reference` gathers the same rows with a plain loop):",
        "",
        "| bench | seconds | interval |",
        "|---|---|---|",
        *lines,
        *shuffled(directory),
    ]


def shuffled(directory: Path) -> List[str]:
    """The shuffled IPC passes against the ordered ones and a bare gather, with the target."""
    table, targets, profile = [], [], []
    for size in BATCH_SIZES:
        ordered, mixed, gather = (
            estimate(directory, name, size) for name in ("ipc_mmap", "ipc_mmap_shuffled", "gather_reference")
        )
        if ordered is None or mixed is None or gather is None:
            continue
        over_ordered, over_gather = mixed[0] / ordered[0], mixed[0] / gather[0]
        table.append(
            f"| {size:,} | {1e3 * ordered[0]:.1f} ms | {1e3 * mixed[0]:.1f} ms | {1e3 * gather[0]:.1f} ms "
            f"| {over_ordered:.1f}x | {over_gather:.2f}x |"
        )
        profile.append(
            f"at B = {size:,}, {1e3 * (mixed[0] - gather[0]):.1f} ms over the bare gather, against "
            f"{1e3 * ordered[0]:.1f} ms for the whole ordered pass"
        )
        met = over_ordered <= SHUFFLED_OVER_ORDERED or over_gather <= SHUFFLED_OVER_GATHER
        targets.append(
            f"| shuffled IPC, B = {size:,}: at most {SHUFFLED_OVER_ORDERED:g}x the ordered pass, or "
            f"{SHUFFLED_OVER_GATHER:g}x a bare gather of the same rows | {over_ordered:.1f}x, "
            f"{over_gather:.2f}x | <= {SHUFFLED_OVER_ORDERED:g}x or <= {SHUFFLED_OVER_GATHER:g}x "
            f"| {'met' if met else '**missed**'} |"
        )
    if not table:
        return []
    return [
        "",
        "### Shuffled IPC against a bare gather",
        "",
        "A shuffled batch cannot be a view: its rows are gathered from anywhere in the window, so "
        "every byte of it is copied, where the ordered pass over a memory-mapped IPC file hands out "
        "views. The floor of a shuffled pass is therefore the gather itself, which the criterion "
        "bench measures beside it: `loader/gather_reference/B` gathers the same rows (windows of "
        "65,536 rows, shuffled) with a plain loop from the columns in memory into fresh row-major "
        "buffers, one batch at a time on one thread, the bytes every shuffled batch writes (16 "
        "float32 features, the label and the 8 float32 of the embedding: 104 bytes a row). From "
        "the criterion table above:",
        "",
        "| B | ordered | shuffled | bare gather | shuffled / ordered | shuffled / bare gather |",
        "|---|---|---|---|---|---|",
        *table,
        "",
        "| target | measured | target | |",
        "|---|---|---|---|",
        *targets,
        "",
        "The shuffled pass beyond its copy: " + "; ".join(profile) + ". The ordered pass hands "
        "out views of the label and the embedding and copies the 16 feature columns into each "
        "batch's (B, 16) group (128 MB a pass); the shuffled pass writes those 128 MB once more, "
        "when it stages each window's group row-major so that a shuffled row is one run of bytes, "
        "where the bare gather reads the 16 columns of each row where they lie. So an excess near "
        "the ordered pass's time is that staging copy and the loader's own cost of its batches "
        "(its thread, the hand-over of each batch, the tensors made over the buffers), which a "
        "bare loop does not pay, and it weighs most where the batches are many and small.",
    ]
