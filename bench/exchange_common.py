"""What every part of the exchange benchmark shares: the peers, the sizes, the clocks, the
alternating timing loop and the number formats."""

from __future__ import annotations

import gc
import statistics
import time
import timeit
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

# The peers that may be missing, imported (and JAX configured) once for every module.
try:
    import torch
except ImportError:  # torch is a test requirement; the torch rows say so when it is missing.
    torch = None  # type: ignore[assignment]
try:
    import jax

    # 64-bit integers stay 64-bit (and zero-copy) in JAX, as in the tests.
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
except ImportError:  # JAX is a test requirement; the JAX rows say so when it is missing.
    jnp = None  # type: ignore[assignment]


SMALL = 10
LARGE = 10_000_000
COPY_ELEMENTS = 10_000_000

# The repository, for the commit and for telling whether the installed wheel is older than the
# sources; the script lives in bench/.
ROOT = Path(__file__).resolve().parents[1]


class Clocks:
    """What the rows are timed with.

    By default CPU time, not wall time: on a shared 2-core machine with compilers running beside
    us, a batch of a few milliseconds is often preempted, and wall time then measures the other
    processes. Calls are timed with the calling thread's CPU time (every side is single-threaded);
    copies with the whole process's CPU time, so that a copy spread over threads cannot hide work.
    `--clock wall` times everything with `time.perf_counter` instead.
    """

    calls: Callable[[], float] = time.thread_time
    copies: Callable[[], float] = time.process_time
    name: str = "cpu"

    def use_wall(self) -> None:
        self.calls = self.copies = time.perf_counter
        self.name = "wall"


CLOCKS = Clocks()


def log(message: str) -> None:
    print(message, flush=True)


# --------------------------------------------------------------------------------------------
# Timing


@dataclass
class Side:
    """One callable of a row: `stmt` run by timeit in `namespace`."""

    label: str
    stmt: str
    namespace: dict[str, Any]
    timer: Optional[timeit.Timer] = None
    clock: Callable[[], float] = time.thread_time
    number: int = 1
    samples: list[float] = field(default_factory=list)  # seconds per call, one per round

    def prepare(self, batch_s: float) -> None:
        """Checks that the statement runs, warms it up and picks a batch of about `batch_s`."""
        self.timer = timeit.Timer(self.stmt, timer=self.clock, globals=self.namespace)
        # The first calls are not timed: a consumer's first call can be thousands of times its
        # next ones (JAX compiles its import then), and sizing the batch from it gave batches of
        # one call, whose time per call then held the timer's own overhead (about 1 µs): the
        # side measured first in a process came out several per cent slower than its anchor.
        self.timer.timeit(3)
        number = 1
        while True:
            elapsed = self.timer.timeit(number)
            if elapsed >= batch_s / 4 or number >= 1 << 24:
                break
            number *= 4 if elapsed < batch_s / 40 else 2
        self.number = max(1, round(number * batch_s / max(elapsed, 1e-9)))

    def run_batch(self) -> None:
        assert self.timer is not None
        self.samples.append(self.timer.timeit(self.number) / self.number)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


MIN_ROUNDS = 11


def balanced_orders(count: int, rounds: int) -> list[list[int]]:
    """The order of the sides in each round: every round runs each of `count` sides once, and
    over the rounds each side follows each other side about equally often.

    What ran just before a batch changes its time (a 10-million-element side leaves the caches
    and the allocator in another state than a 10-element one), so an order in which one side
    follows the large sides more often than its anchor does biases their ratio. Rotating a fixed
    order did that: of the four sides of a zero-copy row (ours and the anchor at two sizes), our
    small side followed a large side in three rounds of four and the anchor's in two. Each next
    side is the one that has followed the side before it least often so far, the last side of
    the previous round included (ties in an order rotated every round): over 101 rounds the
    counts of the ordered pairs then differ by at most two for up to ten sides.
    """
    follows = [[0] * count for _ in range(count)]
    last: Optional[int] = None
    orders = []
    for round_index in range(rounds):
        left = list(range(count))
        order: list[int] = []
        before = last
        while left:
            # Ties go to the sides in an order rotated every round, so that no side is always
            # first.
            chosen = min(
                left,
                key=lambda side: (
                    0 if before is None else follows[before][side],
                    (side - round_index) % count,
                ),
            )
            if before is not None:
                follows[before][chosen] += 1
            left.remove(chosen)
            order.append(chosen)
            before = chosen
        last = order[-1]
        orders.append(order)
    return orders


def measure(
    sides: list[Side],
    rounds: int,
    batch_s: float,
    clock: Callable[[], float],
    deadline: Optional[float] = None,
) -> None:
    """Times the sides alternately: every round runs one batch of each, in the order of
    `balanced_orders`.

    Past `deadline` (a `time.perf_counter` value) the row stops after at least `MIN_ROUNDS`
    rounds, so that a heavily loaded machine still finishes the suite in its time budget.
    """
    for side in sides:
        side.clock = clock
        side.prepare(batch_s)
    gc.collect()
    for round_index, order in enumerate(balanced_orders(len(sides), rounds)):
        if (
            deadline is not None
            and round_index >= MIN_ROUNDS
            and time.perf_counter() > deadline
        ):
            break
        for index in order:
            sides[index].run_batch()


def paired_ratio(ours: Side, theirs: Side) -> float:
    """The median of the per-round ratios ours/theirs: the row's ratio.

    Each round times both sides within a few milliseconds of each other, so a round's ratio
    cancels what changed the machine's speed between rounds (another tenant's load, the clock
    frequency); the ratio of the two sides' medians does not, when the speed drifts during the
    row: each median may then come from another phase of the run. One run of
    `jnp.from_dlpack` had ours faster in three rounds of four (per-round quartiles 0.90-0.98)
    and a ratio of medians of 1.08.
    """
    return statistics.median(a / b for a, b in zip(ours.samples, theirs.samples))


def paired_ratio_spread(ours: Side, theirs: Side) -> tuple[float, float]:
    """The quartiles of the per-round ratios ours/theirs: how much the noise moved the ratio."""
    ratios = sorted(a / b for a, b in zip(ours.samples, theirs.samples))
    if len(ratios) < 4:
        return ratios[0], ratios[-1]
    quartiles = statistics.quantiles(ratios, n=4)
    return quartiles[0], quartiles[2]


def fmt_time(seconds: float) -> str:
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    return f"{seconds * 1e3:.2f} ms"


def fmt_gbs(bytes_per_second: float) -> str:
    return f"{bytes_per_second / 1e9:.2f} GB/s"

def verdict(met: Optional[bool]) -> str:
    if met is None:
        return "n/a"
    return "met" if met else "**missed**"
