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

The SVG is written by hand (rectangles, lines and text, no plotting library), so that the charts
need nothing beyond the standard library and their text stays searchable.
The scale is linear, so that a bar twice as long took twice as long; a value far beyond the
others (Ray Data, say) would flatten every other bar, so bars past a chart's limit are cut at
the axis's end, marked with a break and labelled with their value.
"""

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional
from xml.sax.saxutils import escape

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
# What a chart holds


@dataclass
class Bar:
    """One bar: one table row's value (or one of its columns)."""

    label: str  # beside the bar, left of the axis: "10 million", "B = 1,024"
    value: Optional[float]  # None when the row has no value ("did not run")
    text: str  # after the bar's end: the value as the table writes it
    ours: bool
    target: Optional[float] = None
    missed: bool = False


@dataclass
class Item:
    """A table row's label with its bars under it."""

    label: str
    bars: list[Bar]


@dataclass
class Group:
    """A heading and its items, drawn on an axis of their own."""

    title: str
    items: list[Item]
    limit: Optional[float] = None  # bars beyond it are cut at the axis's end


@dataclass
class Chart:
    """What one SVG file shows: its words and its groups of bars."""

    title: str
    subtitle: str
    axis_label: str
    groups: list[Group]
    ours_legend: str
    anchor_legend: Optional[str] = None  # the anchors' bars, when the chart has any
    reference: Optional[float] = None  # a vertical line, at 1.0 for ratios
    reference_label: str = ""
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# The two charts of the page

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
    latency = Group(f"{latency_table.header[2].removesuffix(': s')}, beside the local file", [])
    for row in latency_table.rows:
        bars = [seconds_bar("local file", row[1], True), seconds_bar("S3", row[2], True)]
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
# Drawing

WIDTH = 780
MARGIN = 16
BAR_LABEL_WIDTH = 84  # left of the axis: "10 million", "B = 8,192"
VALUE_WIDTH = 180  # right of the axis: the value, "off the axis", "missed"
PLOT_X = MARGIN + BAR_LABEL_WIDTH
PLOT_WIDTH = WIDTH - PLOT_X - VALUE_WIDTH - MARGIN
FONT = 12
LINE = 15
BAR = 12
BAR_GAP = 4
ITEM_GAP = 8
# An estimate of the width of one character at FONT px in a sans-serif face, to wrap labels.
CHAR_WIDTH = 6.6
OURS = "#1f6fb4"
ANCHOR = "#a0a0a0"
REFERENCE = "#333333"
TARGET = "#000000"
MISSED = "#c0392b"
GRID = "#e4e4e4"
MUTED = "#555555"


def nice_axis(largest: float) -> tuple[float, float]:
    """The end of an axis that holds `largest`, and its tick step: 1, 2, 2.5 or 5 times a power
    of 10, for at most 8 steps."""
    if largest <= 0:
        return 1.0, 0.25
    magnitude = 10 ** math.floor(math.log10(largest))
    for factor in (0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0):
        step = factor * magnitude
        if largest / step <= 8:
            return math.ceil(largest / step - 1e-9) * step, step
    return 10 * magnitude, magnitude


def wrap(text: str, width: float) -> list[str]:
    """`text` in lines of at most `width` pixels (estimated), broken between words."""
    most = max(10, int(width / CHAR_WIDTH))
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= most:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def attribute_text(attributes: dict[str, object]) -> str:
    """SVG attributes from Python names: `class_` is `class`, `font_size` is `font-size`; floats
    are written with two decimals."""
    parts = []
    for name, value in attributes.items():
        name = name.rstrip("_").replace("_", "-")
        value = f"{value:.2f}" if isinstance(value, float) else str(value)
        parts.append(f' {name}="{escape(value, {chr(34): "&quot;"})}"')
    return "".join(parts)


def element(tag: str, **attributes: object) -> str:
    return f"<{tag}{attribute_text(attributes)}/>"


def text_element(x: float, y: float, content: str, **attributes: object) -> str:
    position = attribute_text({"x": float(x), "y": float(y), **attributes})
    return f"<text{position}>{escape(content)}</text>"


def axis_end(chart: Chart, group: Group) -> tuple[float, float]:
    """The end of `group`'s axis and its tick step: room for its bars up to its limit, the
    reference line, and the targets near them."""
    bars = [bar for item in group.items for bar in item.bars]
    largest = max((bar.value for bar in bars if bar.value is not None), default=1.0)
    if group.limit is not None:
        largest = min(largest, group.limit)
    if chart.reference is not None:
        largest = max(largest, chart.reference)
    targets = [bar.target for bar in bars if bar.target and bar.target <= largest * 1.5]
    largest = max([largest] + targets)
    # A little room past the longest bar, so that no bar ends exactly on the axis's end.
    return nice_axis(largest * 1.05)


def draw_axis(out: list[str], top: float, bottom: float, end: float, step: float) -> None:
    """Grid lines from `top` to `bottom` and the tick labels under them."""
    ticks = int(round(end / step))
    for tick in range(ticks + 1):
        x = PLOT_X + PLOT_WIDTH * tick / ticks
        out.append(element("line", class_="grid", x1=x, y1=top, x2=x, y2=bottom, stroke=GRID))
        label = f"{round(tick * step, 9):g}"
        out.append(text_element(x, bottom + LINE, label, text_anchor="middle", fill=MUTED))


def draw_legend(chart: Chart, y: float) -> list[str]:
    """One swatch per kind of mark the chart has, in a row whose text sits on `y`."""
    out = []
    x = float(MARGIN)
    swatches = [(OURS, chart.ours_legend)]
    if chart.anchor_legend:
        swatches.append((ANCHOR, chart.anchor_legend))
    for colour, words in swatches:
        top = y - BAR + 2.0
        swatch = element("rect", class_="legend", x=x, y=top, width=BAR, height=BAR, fill=colour)
        out.append(swatch)
        out.append(text_element(x + BAR + 4, y, words))
        x += BAR + 16 + len(words) * CHAR_WIDTH
    if chart.reference is not None:
        out.append(
            element(
                "line", x1=x, y1=y - BAR + 2.0, x2=x, y2=y + 2.0,
                stroke=REFERENCE, stroke_dasharray="4,3",
            )
        )
        out.append(text_element(x + 6, y, chart.reference_label))
        x += 20 + len(chart.reference_label) * CHAR_WIDTH
    if any(bar.target for group in chart.groups for item in group.items for bar in item.bars):
        tick = element("line", x1=x, y1=y - BAR, x2=x, y2=y + 4.0, stroke=TARGET, stroke_width=2)
        out.append(tick)
        out.append(text_element(x + 6, y, "the row's target"))
    return out


def render_svg(chart: Chart) -> str:
    """The chart as one SVG document: title, legend, then each group with its own axis."""
    body: list[str] = []
    y = float(MARGIN + FONT)
    body.append(text_element(MARGIN, y, chart.title, font_size=16, font_weight="bold"))
    y += LINE + 4
    body.append(text_element(MARGIN, y, chart.subtitle, fill=MUTED))
    y += LINE + 2
    body.extend(draw_legend(chart, y))
    y += LINE
    for group in chart.groups:
        end, step = axis_end(chart, group)
        y += ITEM_GAP
        body.append(f"<g{attribute_text({'class_': 'group', 'aria_label': group.title})}>")
        body.append(text_element(MARGIN, y + FONT, group.title, font_size=14, font_weight="bold"))
        y += LINE + 6
        top = y - 4
        marks: list[str] = []
        for item in group.items:
            for line in wrap(item.label, WIDTH - 2 * MARGIN):
                marks.append(text_element(MARGIN, y + FONT - 1, line))
                y += LINE
            for bar in item.bars:
                marks.extend(draw_bar(bar, item.label, y, end))
                y += BAR + BAR_GAP
            y += ITEM_GAP
        bottom = y - ITEM_GAP
        # The grid and the reference line go first, so that the bars and their values cover them.
        draw_axis(body, top, bottom, end, step)
        if chart.reference is not None and chart.reference <= end:
            x = PLOT_X + PLOT_WIDTH * chart.reference / end
            body.append(
                element(
                    "line", class_="reference", x1=x, y1=top, x2=x, y2=bottom,
                    stroke=REFERENCE, stroke_dasharray="4,3",
                )
            )
        body.extend(marks)
        body.append("</g>")
        y += LINE + 4
    axis_x = PLOT_X + PLOT_WIDTH / 2
    body.append(
        text_element(axis_x, y + 4, chart.axis_label, text_anchor="middle", font_weight="bold")
    )
    y += LINE
    for note in chart.notes:
        for line in wrap(note, WIDTH - 2 * MARGIN):
            y += LINE
            body.append(text_element(MARGIN, y, line, fill=MUTED))
    height = int(math.ceil(y + MARGIN))
    head = "<svg" + attribute_text(
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "width": WIDTH,
            "height": height,
            "viewBox": f"0 0 {WIDTH} {height}",
            "font_family": "Helvetica, Arial, sans-serif",
            "font_size": FONT,
        }
    ) + ">"
    background = element("rect", class_="background", width=WIDTH, height=height, fill="#ffffff")
    title = f"<title>{escape(chart.title)}</title>"
    return "\n".join([head, title, background] + body + ["</svg>", ""])


def draw_bar(bar: Bar, item_label: str, y: float, end: float) -> list[str]:
    """The elements of one bar whose top is at `y`, on an axis from 0 to `end`."""
    marks = [text_element(PLOT_X - 6, y + BAR - 2, bar.label, text_anchor="end", fill=MUTED)]
    if bar.value is None:
        marks.append(text_element(PLOT_X + 4, y + BAR - 2, bar.text, fill=MUTED))
        return marks
    cut = bar.value > end
    width = float(PLOT_WIDTH) if cut else PLOT_WIDTH * bar.value / end
    kind, colour = ("ours", OURS) if bar.ours else ("anchor", ANCHOR)
    tooltip = f"{item_label}, {bar.label}: {bar.text}" if bar.label else f"{item_label}: {bar.text}"
    rect = attribute_text(
        {"class_": f"bar {kind}", "x": PLOT_X, "y": y, "width": width, "height": BAR}
    )
    marks.append(f'<rect{rect} fill="{colour}"><title>{escape(tooltip)}</title></rect>')
    if cut:
        # Two white slanted strokes near the end say that the bar goes on past the axis.
        for offset in (14, 9):
            middle = float(PLOT_X + PLOT_WIDTH - offset)
            marks.append(
                element(
                    "line", class_="cut", x1=middle - 3, y1=y + BAR + 1, x2=middle + 3, y2=y - 1,
                    stroke="#ffffff", stroke_width=2,
                )
            )
    if bar.target is not None and bar.target <= end:
        x = PLOT_X + PLOT_WIDTH * bar.target / end
        marks.append(
            element(
                "line", class_="target", x1=x, y1=y - 2, x2=x, y2=y + BAR + 2,
                stroke=TARGET, stroke_width=2,
            )
        )
    # The value's words get a white outline, so that a grid or reference line under them does not
    # cross them out.
    halo = {"stroke": "#ffffff", "stroke_width": 3, "paint_order": "stroke"}
    words = bar.text + (", off the axis" if cut else "")
    marks.append(text_element(PLOT_X + width + 5, y + BAR - 2, words, **halo))
    if bar.missed:
        x = PLOT_X + width + 5 + (len(words) + 1) * CHAR_WIDTH
        marks.append(
            text_element(x, y + BAR - 2, "missed", fill=MISSED, font_weight="bold", **halo)
        )
    return marks


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
