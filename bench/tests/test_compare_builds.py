"""``bench/compare_builds.py``: the table of two builds' times, medians and ratios.

The script is no part of the wheel, so it is loaded by path; the timing itself needs two built
wheels and runs only by hand (docs/benchmarks.md, "The wheel").
"""

from _scripts import load

compare = load("compare_builds.py")


def test_the_table_gives_each_builds_median_and_the_ratio_with_its_range():
    base = [{"pass": 2.0, "call": 1e-6}, {"pass": 4.0, "call": 3e-6}, {"pass": 3.0, "call": 2e-6}]
    other = [{"pass": 2.2, "call": 1e-6}, {"pass": 4.0, "call": 1.5e-6}, {"pass": 2.7, "call": 2e-6}]
    table = compare.render(["release", "dist"], base, other)
    lines = table.splitlines()
    assert lines[0] == "| case | release | dist | ratio (range over rounds) |"
    # Ratios per round: 1.1, 1.0, 0.9 -> median 1.00; 1.0, 0.5, 1.0 -> median 1.00.
    assert lines[2] == "| pass | 3.00 s | 2.70 s | 1.00 (0.90 to 1.10) |"
    assert lines[3] == "| call | 2.00 µs | 1.50 µs | 1.00 (0.50 to 1.00) |"


def test_times_are_written_in_the_unit_that_fits():
    assert compare.format_time(2.5e-7) == "0.25 µs"
    assert compare.format_time(0.0123) == "12.3 ms"
    assert compare.format_time(1.5) == "1.50 s"
