"""The real excerpts' sidecar labels (fixtures/real/*.json `rules`) are the expectation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nccl_doctor import analyze

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
sys.path.insert(0, str(REAL.parent / "realruns"))

from judge import judge_labels  # noqa: E402


def _cases(tier: str) -> list:
    out = []
    for sidecar in sorted(REAL.glob("*.json")):
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        labels = meta.get("rules")
        if labels and labels.get("tier") == tier:
            out.append(pytest.param(sidecar.with_suffix(".log"), labels, id=sidecar.stem))
    return out


def _check(log: Path, labels: dict) -> None:
    ok, why = judge_labels(analyze([str(log)], jobs=1), labels)
    assert ok, why


@pytest.mark.parametrize(("log", "labels"), _cases("core"))
def test_core_excerpt(log: Path, labels: dict) -> None:
    _check(log, labels)


@pytest.mark.parametrize(("log", "labels"), _cases("stretch"))
def test_stretch_excerpt(log: Path, labels: dict) -> None:
    _check(log, labels)
