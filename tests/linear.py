"""Linearity without a clock on the wall: the CPU time of one input against four times that input.

The machine is shared, so wall time moves by 2x or more and says nothing about a regex. CPU time of
this thread (``time.thread_time``) does not count the neighbours; the best of a few runs drops the
odd interruption. Linear work grows about 4x when the input grows 4x, quadratic work 16x: a bound of
10x separates the two with a wide margin either way. Below ``FLOOR_S`` of CPU for the big input
there is nothing to compare (1 M characters in a few milliseconds cannot be quadratic).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: Growth factor of the input, and the CPU-time ratio above which the work is not linear.
SCALE = 4
MAX_RATIO = 10.0
#: CPU seconds under which the big input's cost is noise (the small input's is then floored to it).
FLOOR_S = 0.02


def cpu_seconds(fn: Callable[[], Any], repeat: int = 3) -> float:
    """The least CPU time of ``repeat`` runs of ``fn`` in this thread."""
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best


def growth(make: Callable[[int], Any], run: Callable[[Any], Any], n: int, repeat: int = 3) -> tuple[float, str]:
    """CPU-time ratio of ``run(make(SCALE * n))`` to ``run(make(n))``, and a message for asserts."""
    small, big = make(n), make(SCALE * n)
    # Alternated, so both sizes run beside the same neighbours: with all the small runs first and
    # all the big ones after, a load that came and went skewed the ratio by up to 2x (9 for 16).
    t_small = t_big = float("inf")
    for _ in range(repeat):
        t_small = min(t_small, cpu_seconds(lambda: run(small), 1))
        t_big = min(t_big, cpu_seconds(lambda: run(big), 1))
    ratio = t_big / max(t_small, FLOOR_S) if t_big > FLOOR_S else 1.0
    return ratio, f"CPU {t_small * 1e3:.1f} ms for n={n}, {t_big * 1e3:.1f} ms for n={SCALE * n} (x{ratio:.1f})"


def assert_linear(make: Callable[[int], Any], run: Callable[[Any], Any], n: int, repeat: int = 3) -> None:
    ratio, msg = growth(make, run, n, repeat)
    assert ratio < MAX_RATIO, f"not linear: {msg}"
