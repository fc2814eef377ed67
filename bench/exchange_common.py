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


def measure(
    sides: list[Side],
    rounds: int,
    batch_s: float,
    clock: Callable[[], float],
    deadline: Optional[float] = None,
) -> None:
    """Times the sides alternately: every round runs one batch of each, in a rotated order.

    Past `deadline` (a `time.perf_counter` value) the row stops after at least `MIN_ROUNDS`
    rounds, so that a heavily loaded machine still finishes the suite in its time budget.
    """
    for side in sides:
        side.clock = clock
        side.prepare(batch_s)
    gc.collect()
    for round_index in range(rounds):
        if (
            deadline is not None
            and round_index >= MIN_ROUNDS
            and time.perf_counter() > deadline
        ):
            break
        shift = round_index % len(sides)
        order = sides[shift:] + sides[:shift]
        if round_index % 2:
            order.reverse()
        for side in order:
            side.run_batch()


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
