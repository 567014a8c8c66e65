"""The verdict on the real flight-recorder jobs (fixtures/flightrec, see its README) and the facts
the rules read from dumps and gloo logs together."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor import analyze
from nccl_doctor.evidence import facts

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "flightrec"


def _report(case: str):
    return analyze([str(CASES / case)], jobs=1)


@pytest.mark.parametrize("case", ["skip_collective", "skip_collective_json"])
def test_skipped_collective_is_a_desync_of_rank_2(case):
    v = _report(case).verdict
    assert v is not None and v["rule"] == "DSY1" and v["ranks"] == [2], v
    assert "rank 2 skipped all_reduce #10" in v["summary"] and "broadcast #10" in v["summary"], v
    assert not v["summary"].startswith("ranks "), v  # one rank: "rank 2: ..."


def test_stalled_rank_lags_behind_the_collective_it_never_entered():
    v = _report("rank_stalls").verdict
    assert v is not None and v["rule"] == "RK3" and v["ranks"] == [2], v
    assert "never entered broadcast #11" in v["summary"], v


def test_killed_rank_failed_first_with_its_sigkill():
    report = _report("rank_dies")
    v = report.verdict
    assert v is not None and v["rule"] == "RK1" and v["ranks"] == [1], v
    assert "exit code -9 (SIGKILL" in v["summary"], v
    rk2 = [f for f in report.findings if f.rule == "RK2"]
    assert rk2 and rk2[0].ranks == [1] and "no flight-recorder dump" in rk2[0].summary


@pytest.mark.parametrize("case, timed_out", [("skip_collective", [0, 1, 2, 3]), ("rank_stalls", [0, 1, 3]),
                                             ("rank_dies", [])])
def test_gloo_timeouts_are_collective_timeouts(case, timed_out):
    job = _report(case).job
    groups = facts.timeouts_by_pg(job)
    assert sorted(r for pt in groups.values() for r in pt.ranks) == timed_out
    for pt in groups.values():
        assert pt.timeouts_ms == {5000: len(pt.reports)} and pt.seq is None  # gloo names no SeqNum


@pytest.mark.parametrize("case", ["skip_collective", "rank_stalls"])
def test_exit_1_after_an_echo_is_no_failure(case):
    """torchrun's Root Cause is rank 1's exit code 1, raised by its gloo timeout: a consequence."""
    job = _report(case).job
    assert facts.failures(job) == [] and facts.first_failure(job) is None
    assert facts.job_failed(job)


def test_the_sigkill_keeps_its_word_and_finds_its_rank_by_pid():
    job = _report("rank_dies").job
    fails = facts.failures(job)
    assert [f.rank for f in fails] == [1]  # ranks 0 and 2 exit 1 after "Connection reset by peer"
    assert {e.kind for e in fails[0].events} == {"elastic_failed", "elastic_cfe"}


def test_world_size_and_rank_source_from_dumps():
    job = _report("rank_dies").job
    assert job.ranks_expected == 4  # the dumps' default group; no log line gives the world size
    # rank 3 printed nothing with its global rank (only "[default3]:"), its dump names it
    assert job.known_ranks()[3].rank_source == "flight recorder"
    assert job.known_ranks()[0].rank_source == "launcher"


def test_statuses():
    status = {r.rank: r.status for r in _report("rank_stalls").job.ranks}
    assert status == {0: "timed_out", 1: "timed_out", 2: "lagging", 3: "timed_out"}


_GLOO_JOB = """\
[default0]:step 3/6 loss 84.0
[default1]:step 3/6 loss 84.0
[default1]:[rank1]: Traceback (most recent call last):
[default1]:[rank1]:   File "/job/train.py", line 88, in step
[default1]:[rank1]: ValueError: batch 4 has shape [7, 3], expected [8, 3]
[default0]:[rank0]: Traceback (most recent call last):
[default0]:[rank0]:   File "/job/train.py", line 89, in step
[default0]:[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation to complete
E1122 05:03:50.464000 22494 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 22510) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
/job/train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-22_05:03:50
  host      : node-a
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 22511)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_05:03:50
  host      : node-a
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 22510)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_exit_1_is_a_cause_when_the_rank_raised_its_own_error(tmp_path):
    """Rank 1's ValueError is a cause (its exit 1 with it); rank 0, torchrun's "Root Cause", only
    timed out in gloo waiting for rank 1: its exit 1 is an echo."""
    (tmp_path / "torchrun.log").write_text(_GLOO_JOB, encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    fails = facts.failures(report.job)
    assert [f.rank for f in fails] == [1] and "ValueError" in fails[0].what
    assert {e.kind for e in fails[0].events} == {"python_exception", "elastic_cfe"}
    assert report.verdict is not None and report.verdict["ranks"] == [1]
