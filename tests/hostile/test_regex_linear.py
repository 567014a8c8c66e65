"""Every regex of parsers/*.toml stays linear on adversarial lines of up to 400 k characters.

Linearity is shown by CPU time (tests/linear.py): the same adversarial line 4x longer may cost at
most 10x the CPU (quadratic backtracking costs 16x), never by a wall-clock bound.
"""

from __future__ import annotations

import pytest
from linear import assert_linear

from nccl_doctor.formats import load_formats
from nccl_doctor.launchers import load_launchers

FORMATS = load_formats()
PATTERNS = [pytest.param(p, id=f"{p.format}:{p.kind}:{i}") for i, p in enumerate(FORMATS.patterns)]
N = 100_000  # characters of the smaller line; the larger one has 400 k


def adversarial_lines(pattern):
    """Makers of adversarial lines of about ``n`` characters for this pattern."""
    makers = []
    for sample in pattern.samples[:1]:
        line = sample["line"]
        half = line[: max(1, len(line) // 2)]
        makers.append(lambda n, half=half: half * (n // max(1, len(half))))  # repeated prefix of a real match
        makers.append(lambda n, line=line: line[:-1] * (n // max(1, len(line))))  # near-misses glued together
    for lit in pattern.contains:
        makers.append(lambda n, lit=lit: (lit + " ") * (n // (len(lit) + 1)))
        makers.append(lambda n, lit=lit: lit + "0" * n)
        makers.append(lambda n, lit=lit: lit + " " * n + "x")
    return makers


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_is_linear(pattern):
    for make in adversarial_lines(pattern):
        assert_linear(make, pattern.regex.search, N, repeat=2)


LAUNCHER_LINES = [lambda n: "[" * n, lambda n: "1" * n + ": x", lambda n: "(" + "a" * n,
                  lambda n: " " * n + "3: x", lambda n: "2024-01-02T03:04:05" + "9" * n]


@pytest.mark.parametrize("launcher", load_launchers(), ids=lambda lc: lc.name)
def test_launcher_prefix_is_linear(launcher):
    for make in LAUNCHER_LINES:
        assert_linear(make, launcher.regex.match, N, repeat=2)


def test_the_check_catches_quadratic_work():
    """The ratio check itself can fail: ``a*b`` searched in a run of ``a`` rescans from every start."""
    import re

    from linear import growth

    ratio, msg = growth(lambda n: "a" * n, re.compile(r"a*b").search, 8000, repeat=2)
    assert ratio > 10, msg
