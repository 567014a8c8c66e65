"""Every regex of parsers/*.toml stays linear on adversarial 1 MB lines (bound measured generously)."""

from __future__ import annotations

import time

import pytest

from nccl_doctor.formats import load_formats
from nccl_doctor.launchers import load_launchers

FORMATS = load_formats()
PATTERNS = [pytest.param(p, id=f"{p.format}:{p.kind}:{i}") for i, p in enumerate(FORMATS.patterns)]


def adversarial_lines(pattern) -> list[str]:
    lines = []
    for sample in pattern.samples[:1]:
        line = sample["line"]
        half = line[: max(1, len(line) // 2)]
        lines.append(half * (1_000_000 // max(1, len(half))))  # repeated prefix of a real match
        lines.append(line[:-1] * (1_000_000 // max(1, len(line))))  # near-misses glued together
    for lit in pattern.contains:
        lines.append((lit + " ") * (1_000_000 // (len(lit) + 1)))
        lines.append(lit + "0" * 1_000_000)
        lines.append(lit + " " * 1_000_000 + "x")
    return lines


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pattern_is_linear(pattern):
    for line in adversarial_lines(pattern):
        t = time.perf_counter()
        pattern.regex.search(line)
        elapsed = time.perf_counter() - t
        assert elapsed < 1.0, f"{pattern.kind} took {elapsed:.2f}s on a {len(line)}-char line"


@pytest.mark.parametrize("launcher", load_launchers(), ids=lambda lc: lc.name)
def test_launcher_prefix_is_linear(launcher):
    for line in ["[" * 1_000_000, "1" * 1_000_000 + ": x", "(" + "a" * 1_000_000, " " * 1_000_000 + "3: x",
                 "2024-01-02T03:04:05" + "9" * 1_000_000]:
        t = time.perf_counter()
        launcher.regex.match(line)
        assert time.perf_counter() - t < 1.0
