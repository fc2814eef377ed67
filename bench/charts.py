#!/usr/bin/env python3
"""Charts of docs/benchmarks.md, drawn from the page's own tables as plain SVG.

`cargo xtask bench` runs this last, after the loader's section is in the page, as

    python charts.py --page <root>/docs/benchmarks.md --out <root>/docs/

It measures nothing: it reads the Markdown tables that bench_exchange.py and bench_loader.py
wrote and draws three horizontal bar charts, which the page embeds as images.

- `benchmarks-exchange.svg`: the ratio column (ours / PyArrow, or the row's floor) of the
  zero-copy sections, one bar per row, with a reference line at 1.0 and each row's target.
- `benchmarks-loader.svg`: the loader's seconds per pass beside its anchors, per source format
  (IPC with the floor, Parquet) and batch size, as the section's first table gives them.
- `benchmarks-object-storage.svg`: the loader's seconds per pass over object storage, per S3
  server and from the local cache, ours beside pyarrow's S3 reading (the `### Object storage`
  table), and beside the local file with latency injected (`### Read-ahead against latency`).

The SVG is written by hand (rectangles, lines and text, no plotting library) in `chart_svg.py`,
so that the charts need nothing beyond the standard library and their text stays searchable.
The scale is linear, so that a bar twice as long took twice as long; a value far beyond the
others (Ray Data, say) would flatten every other bar, so bars past a chart's limit are cut at
the axis's end, marked with a break and labelled with their value.
"""

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from chart_svg import Bar, Chart, Group, Item, render_svg

# --------------------------------------------------------------------------------------------
# Reading the page


@dataclass
class Table:
    """One Markdown table, with the headings it sits under."""

    section: str  # the text of the last `## ` heading above it
    subsection: Optional[str]  # the last `### ` heading since that section began, if any
    header: list[str]
    rows: list[list[str]]


def split_row(line: str) -> list[str]:
    """The cells of one table line; a `\\|` inside a cell is a literal bar."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def parse_tables(markdown: str) -> list[Table]:
    """Every table of `markdown`, in order: a `|` line followed by a `|---|` separator line."""
    tables: list[Table] = []
    section, subsection = "", None
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section, subsection = line[3:].strip(), None
        elif line.startswith("### "):
            subsection = line[4:].strip()
        elif (
            line.lstrip().startswith("|")
            and index + 1 < len(lines)
            and re.fullmatch(r"\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*", lines[index + 1])
        ):
            header = split_row(line)
            index += 2
            rows = []
            while index < len(lines) and lines[index].lstrip().startswith("|"):
                rows.append(split_row(lines[index]))
                index += 1
            tables.append(Table(section, subsection, header, rows))
            continue
        index += 1
    return tables


def number_text(cell: str) -> Optional[str]:
    """The number a cell starts with, as written ("0.168 (0.168-0.173)" gives "0.168"), or None."""
    found = re.match(r"\s*(\d[\d,]*(?:\.\d+)?)", cell)
    return found.group(1) if found else None


def number(cell: str) -> Optional[float]:
    """The number a cell starts with, or None ("did not run", an empty cell)."""
    text = number_text(cell)
    return float(text.replace(",", "")) if text is not None else None


def plain(cell: str) -> str:
    """A cell's text without Markdown's code and emphasis marks."""
    return re.sub(r"\*+|`", "", cell).strip()


# --------------------------------------------------------------------------------------------
# The charts of the page

# The sections whose ratio column is ours / PyArrow's same call (or the row's floor).
EXCHANGE_SECTIONS = (
    "Python: `__dlpack__` called alone, ours beside PyArrow's",
    "Python: zero-copy exchanges, ours beside PyArrow's",
)
EXCHANGE_LIMIT = 3.0
LOADER_SECTION = "The loader"
# Loader bars run up to this many times the slowest pyarrow-by-hand pass of their format.
LOADER_LIMIT_OVER_BY_HAND = 3.0
OBJECT_STORAGE = "Object storage"
LATENCY = "Read-ahead against latency"
# Object-storage bars run up to this many times our pass over the local file.
OBJECT_LIMIT_OVER_LOCAL = 8.0


def find_tables(tables: list[Table], section: str, first_column: str) -> list[Table]:
    return [
        table
        for table in tables
        if table.section == section
        and table.subsection is None
        and table.header[0] == first_column
    ]


def find_subsection_table(tables: list[Table], subsection: str, first_column: str) -> Table:
    for table in tables:
        if table.section == LOADER_SECTION and table.subsection == subsection and table.header[0] == first_column:
            return table
    raise SystemExit(f"error: no table of `{first_column}` under `### {subsection}` of `## {LOADER_SECTION}`")


def target_of(cell: str) -> Optional[float]:
    """The bound of a target cell such as "<= 0.8" or "<= 2.5x floor"."""
    found = re.match(r"\s*<=\s*(\d+(?:\.\d+)?)", cell)
    return float(found.group(1)) if found else None


def exchange_chart(tables: list[Table]) -> Chart:
    groups = []
    for section in EXCHANGE_SECTIONS:
        found = find_tables(tables, section, "exchange")
        found = [table for table in found if "ratio" in table.header]
        if not found:
            raise SystemExit(f"error: no table with a ratio column under `## {section}`")
        table = found[0]
        ratio = table.header.index("ratio")
        elements = table.header.index("elements") if "elements" in table.header else None
        target = table.header.index("target") if "target" in table.header else None
        items: list[Item] = []
        for row in table.rows:
            label = plain(row[0])
            bar = Bar(
                label=row[elements] if elements is not None else "",
                value=number(row[ratio]),
                text=row[ratio],
                ours=True,
                target=target_of(row[target]) if target is not None else None,
                missed="missed" in row[-1],
            )
            if items and items[-1].label == label:
                items[-1].bars.append(bar)
            else:
                items.append(Item(label, [bar]))
        title = section.removeprefix("Python: ").split(", ours beside")[0]
        groups.append(Group(plain(title), items, limit=EXCHANGE_LIMIT))
    return Chart(
        title="Exchanges: our time / PyArrow's, per row (lower is better)",
        subtitle="Ratio of the medians, one bar per table row; left of the 1.0 line we are faster.",
        axis_label="ours / PyArrow (or the row's floor)",
        groups=groups,
        ours_legend="ours / PyArrow",
        reference=1.0,
        reference_label="PyArrow = 1.0",
        notes=[
            f"Each section has its own axis; bars beyond {EXCHANGE_LIMIT:g} are cut at the axis's "
            "end and labelled with their value."
        ],
    )


def format_of(header: list[str], row: list[str], by_hand_rows: list[list[str]]) -> str:
    """"IPC" or "Parquet": the format whose pyarrow-by-hand pass the row's "vs by hand" column
    divides by (the section compares the floor and the IPC methods with IPC, the Parquet methods
    with Parquet), or the format the label names when the row has no such ratio."""
    by_hand_format = {label_format(hand[0]): hand for hand in by_hand_rows}
    for index, name in enumerate(header):
        if name != "vs by hand" or not by_hand_format:
            continue
        # The pass time is the nearest `B = ...: s` column to the left of its ratio.
        times = [i for i in range(index - 1, -1, -1) if header[i].startswith("B = ")]
        if not times:
            continue
        time = times[0]
        value, ratio = number(row[time]), number(row[index])
        if not value or not ratio:
            continue
        implied = value / ratio

        def distance(kind: str) -> float:
            anchor = number(by_hand_format[kind][time])
            return abs(math.log(implied / anchor)) if anchor else math.inf

        return min(by_hand_format, key=distance)
    return label_format(row[0])


def label_format(cell: str) -> str:
    return "Parquet" if "parquet" in plain(cell).lower() else "IPC"


def seconds_text(cell: str) -> str:
    """The median of a loader cell, as the table writes it, with its unit: "0.168 s"."""
    text = number_text(cell)
    return f"{text} s" if text is not None else cell


def loader_chart(tables: list[Table]) -> Chart:
    found = find_tables(tables, LOADER_SECTION, "method")
    if not found:
        raise SystemExit(f"error: no table of methods under `## {LOADER_SECTION}`")
    table = found[0]
    sizes = [
        (index, f"B = {match.group(1)}")
        for index, cell in enumerate(table.header)
        if (match := re.fullmatch(r"B = ([\d,]+): s", cell))
    ]
    if not sizes:
        raise SystemExit(f"error: the table under `## {LOADER_SECTION}` has no `B = ...: s` column")
    by_hand_rows = [row for row in table.rows if plain(row[0]).startswith("pyarrow by hand")]
    formats = {
        "IPC": Group("Arrow IPC file (and the floor: numpy views of data in memory)", []),
        "Parquet": Group("Parquet file", []),
    }
    by_hand: dict[str, float] = {}
    for row in table.rows:
        label = plain(row[0])
        ours = row[0].startswith("**ours**")
        bars = [
            Bar(label=size, value=number(row[index]), text=seconds_text(row[index]), ours=ours)
            for index, size in sizes
        ]
        kind = format_of(table.header, row, by_hand_rows)
        formats[kind].items.append(Item(label, bars))
        if row in by_hand_rows:
            values = [bar.value for bar in bars if bar.value is not None]
            by_hand[kind] = max(values + [by_hand.get(kind, 0.0)])
    groups = []
    for kind, group in formats.items():
        if kind in by_hand:
            group.limit = LOADER_LIMIT_OVER_BY_HAND * by_hand[kind]
        if group.items:
            groups.append(group)
    return Chart(
        title="The loader beside its anchors: seconds per pass (lower is better)",
        subtitle="Median wall-clock seconds of one pass over the workload, per batch size B.",
        axis_label="seconds per pass",
        groups=groups,
        ours_legend="ours (ad.batches)",
        anchor_legend="anchors",
        notes=[
            f"Each format has its own axis, up to {LOADER_LIMIT_OVER_BY_HAND:g}x its slowest "
            "pyarrow-by-hand pass; longer bars are cut there and labelled with their value."
        ],
    )


def seconds_bar(label: str, cell: str, ours: bool) -> Bar:
    return Bar(label=label, value=number(cell), text=seconds_text(cell), ours=ours)


def object_storage_chart(tables: list[Table]) -> Chart:
    table = find_subsection_table(tables, OBJECT_STORAGE, "source")
    servers = Group("Parquet over S3 servers on loopback, and from the local cache", [])
    local: Optional[float] = None
    for row in table.rows:
        bars = [seconds_bar("ours", row[1], True)]
        if len(row) > 2 and number(row[2]) is not None:
            bars.append(seconds_bar("pyarrow", row[2], False))
        servers.items.append(Item(plain(row[0]), bars))
        if local is None and plain(row[0]).startswith("the local file"):
            local = number(row[1])
    if local:
        servers.limit = OBJECT_LIMIT_OVER_LOCAL * local
    latency_table = find_subsection_table(tables, LATENCY, "row groups")
    # The servers' columns are "<server>, <delay> a request: s", each followed by its ratio.
    servers_at = [
        (index, heading.removesuffix(": s").split(", ", 1))
        for index, heading in enumerate(latency_table.header)
        if index >= 2 and heading.endswith(": s")
    ]
    delay = servers_at[0][1][-1] if servers_at else ""
    latency = Group(f"S3 servers with {delay}, beside the local file", [])
    for row in latency_table.rows:
        bars = [seconds_bar("local file", row[1], True)]
        bars += [seconds_bar(name[0], row[index], True) for index, name in servers_at]
        latency.items.append(Item(plain(row[0]), bars))
    return Chart(
        title="The loader over object storage: seconds per pass (lower is better)",
        subtitle="Median wall-clock seconds of one pass, B = 1,024.",
        axis_label="seconds per pass",
        groups=[servers, latency],
        ours_legend="ours (ad.batches)",
        anchor_legend="pyarrow's S3 reading by hand",
        notes=[
            f"The servers' bars run up to {OBJECT_LIMIT_OVER_LOCAL:g}x our pass over the local "
            "file; longer bars (moto reads the whole object for every request) are cut there and "
            "labelled with their value."
        ],
    )


# --------------------------------------------------------------------------------------------
# The command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", type=Path, required=True, help="docs/benchmarks.md")
    parser.add_argument("--out", type=Path, required=True, help="the SVG files' folder (docs/)")
    args = parser.parse_args()
    try:
        tables = parse_tables(args.page.read_text(encoding="utf-8"))
    except OSError as error:
        raise SystemExit(f"error: could not read {args.page}: {error}") from error
    args.out.mkdir(parents=True, exist_ok=True)
    drawn = [
        ("benchmarks-exchange.svg", exchange_chart(tables)),
        ("benchmarks-loader.svg", loader_chart(tables)),
        ("benchmarks-object-storage.svg", object_storage_chart(tables)),
    ]
    for name, chart in drawn:
        path = args.out / name
        path.write_text(render_svg(chart), encoding="utf-8")
        print(f"==> wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
