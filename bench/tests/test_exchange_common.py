"""``bench/exchange_common.py``: the harness that times our call beside its anchor.

Loaded by path, as the bench scripts are no part of the wheel. The orders, the warm-up and the
ratio are checked on made-up sides; the timing itself runs in ``cargo xtask bench``.
"""

import time

from _scripts import load

common = load("exchange_common.py")


def test_every_round_runs_each_side_once_and_each_side_follows_each_other_equally_often():
    for count in range(2, 11):
        orders = common.balanced_orders(count, 101)
        assert all(sorted(order) == list(range(count)) for order in orders)
        sequence = [side for order in orders for side in order]
        follows = {}
        for before, after in zip(sequence, sequence[1:]):
            follows[before, after] = follows.get((before, after), 0) + 1
        counts = [follows.get((a, b), 0) for a in range(count) for b in range(count) if a != b]
        assert max(counts) - min(counts) <= 2, (count, min(counts), max(counts))
        firsts = [order[0] for order in orders]
        assert max(firsts.count(side) for side in range(count)) - min(
            firsts.count(side) for side in range(count)
        ) <= 5


def test_a_slow_first_call_does_not_size_the_batch():
    calls = []

    def consumer():
        calls.append(None)
        if len(calls) == 1:
            time.sleep(0.05)  # as JAX compiles its first import

    side = common.Side("ours", "f()", {"f": consumer}, clock=time.perf_counter)
    side.prepare(0.002)
    assert side.number > 10


def test_the_ratio_is_the_median_of_the_rounds_ratios():
    ours = common.Side("ours", "", {}, samples=[1.0, 1.0, 3.0, 3.0, 3.0])
    theirs = common.Side("theirs", "", {}, samples=[2.0, 2.0, 2.0, 4.0, 4.0])
    # Per round: 0.5, 0.5, 1.5, 0.75, 0.75; the medians' ratio would say 3.0 / 2.0.
    assert common.paired_ratio(ours, theirs) == 0.75
