"""Criterion's estimates, read from `target/criterion`, as the Rust section of the page."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from exchange_notes import COPY_TARGET, SCALE_TARGET, before
from exchange_common import fmt_gbs, fmt_time, log, verdict


# --------------------------------------------------------------------------------------------
# Criterion


@dataclass
class CriterionEntry:
    group: str
    function: str
    value: Optional[str]
    median_ns: float
    throughput_bytes: Optional[int]
    throughput_elements: Optional[int]
    measured: float  # mtime of the estimates

    @property
    def bytes_per_second(self) -> Optional[float]:
        if self.throughput_bytes is None:
            return None
        return self.throughput_bytes / (self.median_ns * 1e-9)


def read_criterion(directory: Path) -> list[CriterionEntry]:
    entries: list[CriterionEntry] = []
    if not directory.is_dir():
        return entries
    for estimates_path in sorted(directory.glob("**/new/estimates.json")):
        new = estimates_path.parent
        try:
            estimates = json.loads(estimates_path.read_text())
            benchmark_path = new / "benchmark.json"
            benchmark = json.loads(benchmark_path.read_text()) if benchmark_path.is_file() else {}
        except (OSError, ValueError) as error:
            log(f"    skipping {estimates_path}: {error}")
            continue
        relative = new.parent.relative_to(directory).parts
        group = benchmark.get("group_id") or relative[0]
        function = benchmark.get("function_id") or "/".join(relative[1:2]) or group
        value = benchmark.get("value_str") or ("/".join(relative[2:]) or None)
        throughput = benchmark.get("throughput") or {}
        throughput_bytes = throughput.get("Bytes", throughput.get("BytesDecimal"))
        entries.append(
            CriterionEntry(
                group=group,
                function=function,
                value=value,
                median_ns=float(estimates["median"]["point_estimate"]),
                throughput_bytes=throughput_bytes,
                throughput_elements=throughput.get("Elements"),
                measured=estimates_path.stat().st_mtime,
            )
        )
    return entries


def size_key(value: Optional[str]) -> tuple[int, str]:
    if value is not None and value.isdigit():
        return (int(value), "")
    return (-1, value or "")


def fmt_ns(ns: float) -> str:
    return fmt_time(ns * 1e-9)


def fmt_count(value: str) -> str:
    if value.isdigit():
        number = int(value)
        for scale, word in ((1_000_000, " million"), (1_000, " thousand")):
            if number >= scale and number % scale == 0:
                return f"{number // scale}{word}"
    return value


STALE_S = 1800


def is_reference(entry: CriterionEntry) -> bool:
    """Whether a benchmark is a reference rather than a path of ours: a memcpy, or another
    plain loop named `reference/...` (such as the read-20-write-10 loop beside the gapped copy)."""
    return (
        entry.function == "memcpy"
        or entry.function.startswith("memcpy/")
        or entry.function.startswith("reference/")
    )


def memcpy_reference(
    entry: CriterionEntry, references: list[CriterionEntry]
) -> Optional[CriterionEntry]:
    """The memcpy a copy path is judged against: one into a fresh allocation of the same bytes
    (a copying path allocates its output), else any memcpy of the same bytes, else the plain one."""
    same_bytes = [r for r in references if r.throughput_bytes == entry.throughput_bytes]
    for candidates in (
        [r for r in same_bytes if "alloc" in r.function],
        same_bytes,
        [r for r in references if r.function == "memcpy"],
    ):
        if candidates:
            return candidates[0]
    return None


def render_criterion(
    entries: list[CriterionEntry],
) -> tuple[list[str], list[str], list[str]]:
    """The Rust section of the page, its lines of the targets table, and the missed ids."""
    lines: list[str] = []
    targets: list[str] = []
    missed: list[str] = []
    if not entries:
        lines.append("No criterion estimates were found: run `cargo xtask bench`.")
        lines.append("")
        return lines, targets, missed
    # A renamed benchmark leaves its old directory behind: keep the newest estimate of each name.
    newest_by_name: dict[tuple[str, str], CriterionEntry] = {}
    for entry in entries:
        key = (entry.group, entry.function + (f"/{entry.value}" if entry.value else ""))
        if key not in newest_by_name or newest_by_name[key].measured < entry.measured:
            newest_by_name[key] = entry
    entries = list(newest_by_name.values())
    newest = max(entry.measured for entry in entries)
    stale = {id(e) for e in entries if newest - e.measured > STALE_S}

    def when(entry: CriterionEntry) -> str:
        if id(entry) not in stale:
            return ""
        measured = datetime.datetime.fromtimestamp(entry.measured)
        return f" (stale: {measured:%H:%M})"

    groups: dict[str, list[CriterionEntry]] = {}
    for entry in entries:
        groups.setdefault(entry.group, []).append(entry)

    for group, members in sorted(groups.items()):
        lines.append(f"### `{group}`")
        lines.append("")
        values = sorted({e.value for e in members if e.value is not None}, key=size_key)
        references = [e for e in members if is_reference(e) and e.bytes_per_second]
        if values and all(v.isdigit() for v in values) and not references:
            # A size sweep: one column per size, and the growth from the smallest to the largest.
            functions: dict[str, list[CriterionEntry]] = {}
            for entry in members:
                functions.setdefault(entry.function, []).append(entry)
            lines.append(
                "| benchmark | "
                + " | ".join(fmt_count(v) for v in values)
                + f" | {fmt_count(values[-1])} / {fmt_count(values[0])} |"
            )
            lines.append("|---" * (len(values) + 2) + "|")
            for function, runs in sorted(functions.items()):
                by_value = {e.value: e for e in runs}
                cells = [
                    fmt_ns(by_value[v].median_ns) + when(by_value[v]) if v in by_value else ""
                    for v in values
                ]
                growth = ""
                small, large = by_value.get(values[0]), by_value.get(values[-1])
                if small is not None and large is not None and len(values) > 1:
                    ratio = large.median_ns / small.median_ns
                    growth = f"{ratio:.2f}"
                    if id(small) not in stale and id(large) not in stale:
                        met = ratio <= SCALE_TARGET
                        targets.append(
                            f"| Rust `{group}/{function}`: {fmt_count(values[-1])} vs "
                            f"{fmt_count(values[0])} elements | <= {SCALE_TARGET} | "
                            f"{before(f'rust:{group}/{function}')} | {ratio:.2f} | "
                            f"{verdict(met)} |"
                        )
                        if not met:
                            missed.append(f"rust:{group}/{function}")
                lines.append(f"| `{function}` | " + " | ".join(cells) + f" | {growth} |")
        else:
            lines.append(
                "| benchmark | bytes | median | throughput | reference | vs reference |"
            )
            lines.append("|---|---|---|---|---|---|")
            ordered = sorted(
                members,
                key=lambda e: (not is_reference(e), e.function, size_key(e.value)),
            )
            for entry in ordered:
                name = entry.function + (f"/{entry.value}" if entry.value else "")
                nbytes = (
                    f"{entry.throughput_bytes / 1e6:g} MB" if entry.throughput_bytes else ""
                )
                throughput = ""
                reference_name = ""
                versus = ""
                if entry.bytes_per_second:
                    throughput = fmt_gbs(entry.bytes_per_second)
                    reference = None if is_reference(entry) else memcpy_reference(entry, references)
                    if reference is not None and reference.bytes_per_second:
                        reference_name = f"`{reference.function}" + (
                            f"/{reference.value}`" if reference.value else "`"
                        )
                        ratio = entry.bytes_per_second / reference.bytes_per_second
                        versus = f"{ratio:.2f}"
                        if id(entry) not in stale and id(reference) not in stale:
                            met = ratio >= COPY_TARGET
                            targets.append(
                                f"| Rust `{group}/{name}` vs {reference_name} | "
                                f">= {COPY_TARGET} | {before(f'rust:{group}/{name}')} | "
                                f"{ratio:.2f} | {verdict(met)} |"
                            )
                            if not met:
                                missed.append(f"rust:{group}/{entry.function}")
                elif entry.throughput_elements:
                    rate = entry.throughput_elements / (entry.median_ns * 1e-9)
                    throughput = f"{rate / 1e6:.1f} M elements/s"
                lines.append(
                    f"| `{name}`{when(entry)} | {nbytes} | {fmt_ns(entry.median_ns)} | "
                    f"{throughput} | {reference_name} | {versus} |"
                )
        lines.append("")
    if stale:
        lines.append(
            f"{len(stale)} estimates marked stale are older than the newest by more than "
            f"{STALE_S // 60} minutes (criterion was run with a filter since); they are shown but "
            "not judged."
        )
        lines.append("")
    lines.append(
        "Criterion measures one benchmark after another, not alternately, so on this shared "
        "machine a ratio between two rows (a size against another, a path against memcpy) "
        "carries the drift of the load between them; the Python rows above are alternated."
    )
    lines.append("")
    return lines, targets, list(dict.fromkeys(missed))
