"""Run every rule case file (tests/rules/cases/<ID>.toml), sqlfluff-style.

A case names a log (a fixture path, inline text, or a generated scenario) and what the rule must
conclude on it: fire or not, at which severity, naming which ranks and hosts. Expected values come
from the log text and the catalogue, written by hand in the case files. Live rules (ST1, ST2) are
judged on arrival times: their cases replay a recorded run of ``fixtures/liveruns/`` (``replay``)
or timed lines (``timed``) poll by poll, and look at every finding seen at any poll.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from nccl_doctor import analyze
from nccl_doctor.findings import Severity

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases"


def _load() -> list:
    params = []
    for path in sorted(CASES.glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        rule = data["rule"]
        for case in data.get("case", []):
            params.append(pytest.param(rule, case, id=f"{rule}:{case['name']}"))
    return params


def _materialise(case: dict, tmp_path: Path) -> list[str]:
    if "path" in case:
        paths = case["path"] if isinstance(case["path"], list) else [case["path"]]
        return [str(ROOT / p) for p in paths]
    if "log" in case:
        target = tmp_path / case.get("file", "rank-0.log")
        target.write_text(case["log"], encoding="utf-8")
        return [str(target)]
    if "logs" in case:  # several inline files: {name = text}
        for name, text in case["logs"].items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        return [str(tmp_path)]
    if "generated" in case:
        from generator import generate_job

        g = dict(case["generated"])
        generate_job(tmp_path / "job", g.pop("scenario"), g.pop("ranks", 16), **g)
        return [str(tmp_path / "job")]
    raise AssertionError(f"case {case['name']} has no path, log, logs or generated")


def _live(rule: str, case: dict) -> list:
    """A live case (rules judged on arrival times): a recorded run of fixtures/liveruns/ replayed at
    its recorded pace, or timed lines ("SECONDS FILE TEXT" per line); every finding of the rule
    seen at any poll."""
    from liveruns.replay import replay, replay_run, timed_lines

    kwargs = {"select": [rule]}
    if "stall_after" in case:
        kwargs["stall_after"] = case["stall_after"]
    if "replay" in case:
        if "until" in case:
            kwargs["until"] = case["until"]
        _, _, polls = replay_run(case["replay"], **kwargs)
    else:
        rows = [ln.split(" ", 2) for ln in case["timed"].strip().splitlines()]
        _, polls = replay(timed_lines((float(t), name, text) for t, name, text in rows), until=case["until"],
                          **kwargs)
    return [f for p in polls for f in p.findings if f.rule == rule]


@pytest.mark.parametrize(("rule", "case"), _load())
def test_rule_case(rule: str, case: dict, tmp_path: Path) -> None:
    if "replay" in case or "timed" in case:
        mine = _live(rule, case)
    else:
        report = analyze(_materialise(case, tmp_path), select=[rule], jobs=1)
        mine = [f for f in report.findings if f.rule == rule]
    floor = Severity.parse(case.get("severity", "warning"))
    firing = [f for f in mine if f.severity.level >= floor.level]
    if not case["fires"]:
        assert not firing, f"{rule} fired: {[f.summary for f in firing]}"
        return
    assert firing, f"{rule} did not fire at {floor.value} or above (got {[(f.severity.value, f.summary) for f in mine]})"
    ranks = sorted({r for f in firing for r in f.ranks})
    hosts = sorted({h for f in firing for h in f.hosts})
    if "ranks" in case:
        assert ranks == sorted(case["ranks"]), f"ranks {ranks} != {case['ranks']}"
    for r in case.get("ranks_include", []):
        assert r in ranks, f"rank {r} not in {ranks}"
    if "hosts" in case:
        assert hosts == sorted(case["hosts"]), f"hosts {hosts} != {case['hosts']}"
    for text in case.get("summary_contains", []):
        assert any(text in f.summary for f in firing), f"{text!r} not in {[f.summary for f in firing]}"
    for text in case.get("summary_not", []):
        assert not any(text in f.summary for f in firing), f"{text!r} in {[f.summary for f in firing]}"
