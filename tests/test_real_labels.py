"""The real excerpts' sidecar labels (fixtures/real/*.json `rules`) are the expectation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_doctor import analyze

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _cases(tier: str) -> list:
    out = []
    for sidecar in sorted(REAL.glob("*.json")):
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        labels = meta.get("rules")
        if labels and labels.get("tier") == tier:
            out.append(pytest.param(sidecar.with_suffix(".log"), labels, id=sidecar.stem))
    return out


def _check(log: Path, labels: dict) -> None:
    report = analyze([str(log)], jobs=1)
    firing = {f.rule for f in report.findings if f.severity.value in ("warning", "error")}
    errors = [f"{f.rule}: {f.summary}" for f in report.findings if f.severity.value == "error"]
    for rid in labels.get("must_all", []):
        assert rid in firing, f"{rid} must fire; fired {sorted(firing)}"
    if labels.get("must_any"):
        assert firing & set(labels["must_any"]), f"one of {labels['must_any']} must fire; fired {sorted(firing)}"
    for rid in labels.get("must_not", []):
        assert rid not in firing, f"{rid} must not fire"
    if labels.get("no_error_findings"):
        assert not errors, f"no error finding expected, got {errors}"


@pytest.mark.parametrize(("log", "labels"), _cases("core"))
def test_core_excerpt(log: Path, labels: dict) -> None:
    _check(log, labels)


@pytest.mark.parametrize(("log", "labels"), _cases("stretch"))
def test_stretch_excerpt(log: Path, labels: dict) -> None:
    _check(log, labels)
