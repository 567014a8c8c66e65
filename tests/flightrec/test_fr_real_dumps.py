"""Real dumps of torch 2.13 (gloo, 4 ranks) made by fixtures/flightrec/make_dumps.py, with the job's logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor import analyze
from nccl_doctor.discover import discover
from nccl_doctor.evidence.dumps import dump_facts, facts_from_events
from nccl_doctor.flightrec import split_dumps

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "flightrec"


def _facts(case: str):
    files, _ = discover([str(CASES / case)])
    events, logs, skipped = split_dumps(files)
    assert [Path(f.path).name for f in logs] == ["torchrun.log"] and not skipped
    return facts_from_events(events)


@pytest.mark.parametrize("case", ["skip_collective", "skip_collective_json"])
def test_skip_collective(case):
    f = _facts(case)
    assert sorted(f.dumps) == [0, 1, 2, 3] and f.world == 4
    assert f.culprits == [2]
    m = f.mismatches[0]
    assert (m.what, m.majority, m.skipped, m.expected_op, m.seq) == ("op", [0, 1, 3], True, "all_reduce", 10)
    assert f.summary.startswith("rank 2 skipped all_reduce #10 ([1024] Float")
    assert "rank 2 issued broadcast #10 ([256] Float" in f.summary
    if case == "skip_collective":  # the pickle has stacks: where the application issued each collective
        assert "at make_dumps.py:" in f.summary


def test_rank_stalls():
    f = _facts("rank_stalls")
    assert f.culprits == [2] and not f.mismatches and f.missing is None
    lag = f.lags[0]
    assert (lag.behind, lag.seq, lag.op, lag.confidence) == ([2], 11, "broadcast", "high")
    assert f.position(2).what == "all_reduce #10"


def test_rank_dies():
    f = _facts("rank_dies")
    assert sorted(f.dumps) == [0, 2, 3] and f.missing.ranks == [1] and f.culprits == [1]
    assert f.waiting() == {"all_reduce #10": [0, 2, 3]}


@pytest.mark.parametrize("case, culprit", [("skip_collective", 2), ("rank_stalls", 2), ("rank_dies", 1),
                                           ("skip_collective_json", 2)])
def test_analyze_reads_dumps_and_logs_together(case, culprit):
    report = analyze([str(CASES / case)], jobs=1)
    assert not [s for s in report.inputs["skipped"] if "flight-recorder" in s["reason"]]
    assert report.job.by_kind("fr_dump") and report.inputs["files"] == 1  # the log; dumps are not scanned
    assert dump_facts(report.job).culprits == [culprit]


def test_verdict_names_the_skipping_rank_and_collective():
    report = analyze([str(CASES / "skip_collective")], jobs=1)
    from_dumps = [f for f in report.findings if any("nccl_trace_rank_" in e.file for e in f.evidence)]
    assert from_dumps
    v = report.verdict
    assert v is not None and v["ranks"] == [2] and "all_reduce #10" in v["summary"], v
