"""The charts of docs/benchmarks.md as plain SVG: what a chart holds (bars, items, groups) and
its drawing, by hand (rectangles, lines and text, no plotting library), so that the charts need
nothing beyond the standard library and their text stays searchable.

`charts.py` reads the page's tables and makes the charts; this module draws them. The scale is
linear, so that a bar twice as long took twice as long; bars past a group's limit are cut at the
axis's end, marked with a break and labelled with their value.
"""

import math
from dataclasses import dataclass, field
from typing import Optional
from xml.sax.saxutils import escape

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
