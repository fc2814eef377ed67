"""``bench/charts.py``: the benchmark page's tables read back, and drawn as SVG.

The script is no part of the wheel, so it is loaded by path. The samples are small pages in the
shape that bench_exchange.py and bench_loader.py write; the numbers the charts must show are the
numbers written in them.
"""

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _scripts import load

SCRIPT = Path(__file__).resolve().parents[1] / "charts.py"
SVG = "{http://www.w3.org/2000/svg}"


charts = load("charts.py")
chart_svg = load("chart_svg.py")

PAGE = """\
# Benchmarks

Intro text.

## Python: `__dlpack__` called alone, ours beside PyArrow's

| exchange | elements | ours | PyArrow (or floor) | ratio | spread | target | |
|---|---|---|---|---|---|---|---|
| `x.__dlpack__()`, x an int64 array | 10 | 129 ns | 193 ns | 0.67 | 0.66-0.68 | <= 0.8 | met |
| `x.__dlpack__()`, x an int64 array | 10 million | 129 ns | 186 ns | 0.70 | 0.68-0.71 | <= 0.8 | met |
| `y.__dlpack__()`, y a tensor \\| view | 10 | 105 ns | 211 ns | 0.50 | 0.49-0.50 | <= 0.8 | met |

## Python: zero-copy exchanges, ours beside PyArrow's

| exchange | elements | ours | PyArrow (or floor) | ratio | spread | target | |
|---|---|---|---|---|---|---|---|
| `np.from_dlpack(x)`, x an int64 array | 10 | 256 ns | 320 ns | 0.80 | 0.79-0.81 | <= 1.0 | met |
| `jnp.from_dlpack(x)`, x an int64 array | 10 million | 14.27 ms | 185.82 µs | 76.78 | 37-107 | <= 1.0 | **missed** |
| `ad.array(pa_arr)`, beside `pa_arr.__arrow_c_array__()` alone | 10 | 1.06 µs | 413 ns | 2.55 | 2.52-2.60 | <= 2.5x floor | **missed** |

Where the cost goes does not depend on the size.

| exchange | ours, 10M / 10 | PyArrow, 10M / 10 | target | |
|---|---|---|---|---|
| `np.from_dlpack(x)`, x an int64 array | 1.00 | 1.00 | <= 1.3 | met |

## The loader

- "vs by hand" divides by pyarrow by hand over the same format.

| method | B = 1,024: s | vs floor | vs by hand | B = 8,192: s | vs floor | vs by hand |
|---|---|---|---|---|---|---|
| numpy views of data already in memory (the floor) | 0.006 (0.006-0.006) | 1.0 | 0.04 | 0.001 (0.001-0.001) | 1.0 | 0.01 |
| pyarrow by hand, memory-mapped IPC | 0.168 (0.168-0.173) | 26.6 | 1.00 | 0.067 (0.061-0.076) | 74.9 | 1.00 |
| **ours**, `ad.batches` over the IPC file | 0.056 (0.033-0.059) | 8.9 | 0.34 | 0.021 (0.020-0.022) | 23.4 | 0.31 |
| pyarrow by hand, Parquet | 1.688 (1.439-1.791) | 266.6 | 1.00 | 0.844 (0.768-1.019) | 945.5 | 1.00 |
| Hugging Face datasets `.iter(batch_size)` | 9.992 (9.851-10.6) | 1578.1 | 5.92 | did not run | | |
| **ours**, `ad.batches` over the Parquet file | 0.171 (0.150-0.191) | 26.9 | 0.10 | 0.143 (0.137-0.154) | 159.8 | 0.17 |

### Targets

| target | measured | target | |
|---|---|---|---|
| IPC, B = 1,024: ours / pyarrow by hand | 0.34x | <= 0.7x | met |

### Object storage

| source | **ours**: s | pyarrow by hand: s |
|---|---|---|
| the local file | 0.132 (0.121-0.149) | |
| moto | 2.512 (2.502-2.517) | 2.071 (2.063-2.164) |
| the per-byte static server, a later epoch with `cache_dir` | 0.227 (0.141-0.245) | |
| nginx | 0.243 (0.238-0.261) | 0.755 (0.736-0.896) |

### Read-ahead against latency

| row groups | local file: s | static server, 20 ms a request: s | local / static | nginx, 20 ms a request: s | local / nginx |
|---|---|---|---|---|---|
| 8,192 rows (123 row groups of about 0.9 MB) | 0.236 (0.154-0.275) | 0.345 (0.323-0.385) | 0.68x | 0.301 (0.290-0.320) | 0.78x |
"""


def _bars(root):
    return [rect for rect in root.iter(f"{SVG}rect") if "bar" in rect.get("class", "").split()]


def _texts(root):
    return [text.text for text in root.iter(f"{SVG}text")]


def test_parse_tables_reads_cells_headings_and_escaped_bars():
    tables = charts.parse_tables(PAGE)
    assert [(table.section, table.subsection, len(table.rows)) for table in tables] == [
        ("Python: `__dlpack__` called alone, ours beside PyArrow's", None, 3),
        ("Python: zero-copy exchanges, ours beside PyArrow's", None, 3),
        ("Python: zero-copy exchanges, ours beside PyArrow's", None, 1),
        ("The loader", None, 6),
        ("The loader", "Targets", 1),
        ("The loader", "Object storage", 4),
        ("The loader", "Read-ahead against latency", 1),
    ]
    first = tables[0]
    assert first.header == ["exchange", "elements", "ours", "PyArrow (or floor)", "ratio", "spread", "target", ""]
    assert first.rows[1] == [
        "`x.__dlpack__()`, x an int64 array", "10 million", "129 ns", "186 ns", "0.70", "0.68-0.71", "<= 0.8", "met"
    ]
    # An escaped bar stays inside its cell.
    assert first.rows[2][0] == "`y.__dlpack__()`, y a tensor | view"
    assert len(first.rows[2]) == len(first.header)


@pytest.mark.parametrize(
    ("cell", "expected"),
    [("0.67", 0.67), ("0.168 (0.168-0.173)", 0.168), ("17.3 (16.3-18.3)", 17.3), ("1,578.1", 1578.1),
     ("76.78", 76.78), ("did not run", None), ("", None), ("**missed**", None)],
)
def test_number_reads_the_leading_number(cell, expected):
    assert charts.number(cell) == expected


def test_exchange_chart_takes_the_ratio_column_one_bar_per_row():
    chart = charts.exchange_chart(charts.parse_tables(PAGE))
    assert [group.title for group in chart.groups] == [
        "__dlpack__ called alone", "zero-copy exchanges"
    ]
    first, second = chart.groups
    # Rows with the same exchange share one label; each row keeps its own bar.
    assert [(item.label, [(bar.label, bar.value) for bar in item.bars]) for item in first.items] == [
        ("x.__dlpack__(), x an int64 array", [("10", 0.67), ("10 million", 0.70)]),
        ("y.__dlpack__(), y a tensor | view", [("10", 0.50)]),
    ]
    bars = [bar for item in second.items for bar in item.bars]
    assert [(bar.value, bar.target, bar.missed) for bar in bars] == [
        (0.80, 1.0, False), (76.78, 1.0, True), (2.55, 2.5, True)
    ]
    assert chart.reference == 1.0
    assert "lower is better" in chart.title


def test_loader_chart_groups_by_format_through_the_by_hand_ratio():
    chart = charts.loader_chart(charts.parse_tables(PAGE))
    ipc, parquet = chart.groups
    assert [item.label for item in ipc.items] == [
        "numpy views of data already in memory (the floor)",
        "pyarrow by hand, memory-mapped IPC",
        "ours, ad.batches over the IPC file",
    ]
    # The datasets row names no format: 9.992 s / 5.92 is Parquet's by-hand pass, not IPC's.
    assert [item.label for item in parquet.items] == [
        "pyarrow by hand, Parquet",
        "Hugging Face datasets .iter(batch_size)",
        "ours, ad.batches over the Parquet file",
    ]
    datasets = parquet.items[1]
    assert [(bar.label, bar.value, bar.text, bar.ours) for bar in datasets.bars] == [
        ("B = 1,024", 9.992, "9.992 s", False),
        ("B = 8,192", None, "did not run", False),
    ]
    assert [bar.ours for bar in parquet.items[2].bars] == [True, True]
    assert ipc.limit == pytest.approx(3 * 0.168)
    assert parquet.limit == pytest.approx(3 * 1.688)


def test_object_storage_chart_has_a_bar_per_measured_cell_and_the_latency_layouts():
    chart = charts.object_storage_chart(charts.parse_tables(PAGE))
    servers, latency = chart.groups
    assert [item.label for item in servers.items] == [
        "the local file",
        "moto",
        "the per-byte static server, a later epoch with cache_dir",
        "nginx",
    ]
    assert [[(bar.label, bar.value, bar.ours) for bar in item.bars] for item in servers.items] == [
        [("ours", 0.132, True)],
        [("ours", 2.512, True), ("pyarrow", 2.071, False)],
        [("ours", 0.227, True)],
        [("ours", 0.243, True), ("pyarrow", 0.755, False)],
    ]
    assert servers.limit == pytest.approx(8 * 0.132)
    assert latency.title == "S3 servers with 20 ms a request, beside the local file"
    assert [(bar.label, bar.value) for bar in latency.items[0].bars] == [
        ("local file", 0.236),
        ("static server", 0.345),
        ("nginx", 0.301),
    ]


def test_missing_section_fails_with_its_heading():
    with pytest.raises(SystemExit, match="## The loader"):
        charts.loader_chart(charts.parse_tables(PAGE.split("## The loader")[0]))


def _check_group_widths(group, values):
    """The bars of one group are as long as their values on one scale, except those past the
    axis's end, which run to it."""
    rects = _bars(group)
    assert len(rects) == len(values)
    widths = [float(rect.get("width")) for rect in rects]
    full = max(widths)
    inside = [(width, value) for width, value in zip(widths, values) if width < full]
    scale = inside[0][0] / inside[0][1]
    for width, value in inside:
        assert width == pytest.approx(value * scale, abs=0.01)
    return widths, scale


def test_exchange_svg_is_well_formed_with_a_bar_per_row_to_scale():
    svg = chart_svg.render_svg(charts.exchange_chart(charts.parse_tables(PAGE)))
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert int(root.get("width")) == 780
    groups = list(root.iter(f"{SVG}g"))
    assert [group.get("aria-label") for group in groups] == ["__dlpack__ called alone", "zero-copy exchanges"]

    widths, scale = _check_group_widths(groups[0], [0.67, 0.70, 0.50])
    assert max(widths) < chart_svg.PLOT_WIDTH
    # The reference line sits at 1.0 on the same scale as the bars.
    reference = groups[0].find(f"{SVG}line[@class='reference']")
    assert float(reference.get("x1")) - chart_svg.PLOT_X == pytest.approx(scale, abs=0.01)

    widths, scale = _check_group_widths(groups[1], [0.80, 76.78, 2.55])
    # 76.78 runs past the axis: its bar is cut at the axis's end and says so.
    assert widths[1] == pytest.approx(chart_svg.PLOT_WIDTH)
    assert widths[2] == pytest.approx(2.55 * scale, abs=0.01)
    texts = _texts(root)
    assert "76.78, off the axis" in texts
    assert texts.count("missed") == 2
    assert "x.__dlpack__(), x an int64 array" in texts
    assert "ad.array(pa_arr), beside pa_arr.__arrow_c_array__() alone" in texts
    assert "10 million" in texts
    assert "Exchanges: our time / PyArrow's, per row (lower is better)" in texts
    assert all(rect.get("class") == "bar ours" for rect in _bars(root))


def test_loader_svg_colours_ours_apart_and_labels_every_bar():
    svg = chart_svg.render_svg(charts.loader_chart(charts.parse_tables(PAGE)))
    root = ET.fromstring(svg)
    ipc, parquet = root.iter(f"{SVG}g")
    _check_group_widths(ipc, [0.006, 0.001, 0.168, 0.067, 0.056, 0.021])
    # "did not run" has no bar, only its words.
    widths, _ = _check_group_widths(parquet, [1.688, 0.844, 9.992, 0.171, 0.143])
    assert widths[2] == pytest.approx(chart_svg.PLOT_WIDTH)
    kinds = [rect.get("class") for rect in _bars(root)]
    assert kinds == ["bar anchor"] * 4 + ["bar ours"] * 2 + ["bar anchor"] * 3 + ["bar ours"] * 2
    fills = {rect.get("class"): rect.get("fill") for rect in _bars(root)}
    assert fills["bar ours"] != fills["bar anchor"]
    texts = _texts(root)
    for words in ["0.168 s", "9.992 s, off the axis", "did not run", "B = 8,192", "Parquet file", "seconds per pass"]:
        assert words in texts
    assert "ours, ad.batches over the Parquet file" in texts


def test_long_labels_wrap_within_the_width():
    label = " ".join(["word"] * 60)
    lines = chart_svg.wrap(label, 200)
    assert " ".join(lines) == label
    assert all(len(line) * chart_svg.CHAR_WIDTH <= 200 for line in lines)


def test_text_is_escaped():
    item = chart_svg.Item("a < b & c", [chart_svg.Bar("10", 0.5, "0.5", ours=True)])
    chart = chart_svg.Chart("t", "s", "x", [chart_svg.Group("g <1>", [item])], ours_legend="ours")
    root = ET.fromstring(chart_svg.render_svg(chart))
    assert "a < b & c" in _texts(root)
    assert next(root.iter(f"{SVG}g")).get("aria-label") == "g <1>"


def test_command_writes_every_chart(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE, encoding="utf-8")
    out = tmp_path / "docs"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--page", str(page), "--out", str(out)], check=True, capture_output=True
    )
    for name, title in [
        ("benchmarks-exchange.svg", "Exchanges: our time / PyArrow's, per row (lower is better)"),
        ("benchmarks-loader.svg", "The loader beside its anchors: seconds per pass (lower is better)"),
        ("benchmarks-object-storage.svg", "The loader over object storage: seconds per pass (lower is better)"),
    ]:
        root = ET.parse(out / name).getroot()
        assert root.find(f"{SVG}title").text == title
