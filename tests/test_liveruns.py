"""Recorded real runs (fixtures/liveruns/, torch 2.13 gloo jobs with the default 30-minute timeout)
replayed into the live analyzer at their recorded pace: when the stall is reported, whom it names,
when it is resolved, and what a healthy job with slow checkpoints never raises.

Times come from the recordings (timing.json: when each byte arrived) and drive the analyzer's clock;
the expected ranks come from what each run injected (run.json, record.py) and its log text.
"""

from __future__ import annotations

import re
from functools import cache

import pytest
from liveruns.replay import HERE as LIVERUNS
from liveruns.replay import load, replay_run

from nccl_doctor.watch import alert_payload, alert_text

STEP = re.compile(rb"step (\d+)/(\d+)")
POLL = 1.0
SETTLE = 3.0


@cache
def _replay(name: str, stall_after: float | None = None, extra: float = 0.0):
    rec = load(LIVERUNS / name)
    kwargs = {} if stall_after is None else {"stall_after": stall_after}
    return replay_run(name, until=rec.ended_at + extra, poll=POLL, settle=SETTLE, **kwargs)


def _updates(polls, rule: str, status: str | None = None) -> list:
    return [(p.t, u) for p in polls for u in p.updates if u.finding.rule == rule and (status is None or u.status == status)]


def _step_arrivals(rec) -> list[tuple[float, int]]:
    """(arrival, step) of every step line of the recording, from its bytes."""
    out = []
    for t, _name, data in rec.chunks:
        out.extend((t, int(m.group(1))) for m in STEP.finditer(data))
    return out


def _last_step_before(rec, t: float) -> float:
    return max(a for a, _ in _step_arrivals(rec) if a <= t)


@pytest.mark.parametrize(("run", "ranks", "words"), [
    ("phase_stall", [2], ["rank 2 is in an evaluation", "ranks 0-1, 3 did not enter"]),
    ("all_stop", [], ["nothing singles a rank out", "all at step 50"]),
    ("stall_recovers", [3], ["rank 3 is in a checkpoint save"]),
])
def test_stall_is_reported_within_90_s_of_the_last_progress_line_naming_the_rank(run, ranks, words):
    rec, _, polls = _replay(run)
    new = _updates(polls, "ST1", "new")
    assert len(new) == 1, [(t, u.finding.summary) for t, u in new]
    t, u = new[0]
    last_step = _last_step_before(rec, t)
    assert t - last_step <= 90, (t, last_step)
    assert t - last_step >= 60  # not before the floor: the job's usual interval is about 0.5 s
    assert u.finding.ranks == ranks
    for w in words:
        assert w in u.finding.summary, u.finding.summary
    if rec.stopped_at is not None:
        assert t < rec.stopped_at  # reported while the processes were alive, long before the timeout
    if ranks:
        assert f"rank {ranks[0]}" in u.finding.remedy.split("\n")[0] and "py-spy dump" in u.finding.remedy
    assert not _updates(polls, "ST2")  # no rank was behind: they all reached the same step


def test_a_recovered_job_resolves_its_stall_when_progress_resumes():
    rec, _, polls = _replay("stall_recovers")
    (t_new, new), = _updates(polls, "ST1", "new")
    (t_done, done), = _updates(polls, "ST1", "resolved")
    resumed = min(a for a, _ in _step_arrivals(rec) if a > t_new)
    assert t_new < resumed <= t_done <= resumed + POLL + SETTLE + POLL
    assert done.note.startswith("progress resumed after 1") and "step 51/110" in done.note
    payload = alert_payload(done)
    assert payload["status"] == "resolved" and payload["note"] == done.note
    assert alert_text(done).startswith("nccl-doctor: RESOLVED ST1 Job stalled (live)\nprogress resumed after")


def test_healthy_job_with_slow_checkpoints_raises_nothing_even_long_after_it_ended():
    rec, _, polls = _replay("healthy_ckpt", extra=600.0)
    steps = _step_arrivals(rec)
    gaps = sorted(b[0] - a[0] for a, b in zip(steps, steps[1:], strict=False))
    assert gaps[-1] > 30 * gaps[len(gaps) // 2]  # the checkpoints take many times the usual step interval
    assert all(u.finding.rule not in ("ST1", "ST2") for p in polls for u in p.updates)


def test_a_low_floor_reports_the_first_checkpoint_only_then_learns_it():
    rec, analyzer, polls = _replay("healthy_ckpt", stall_after=10.0)
    new = _updates(polls, "ST1", "new")
    resolved = _updates(polls, "ST1", "resolved")
    assert len(new) == 1 and len(resolved) == 1, [(t, u.status) for t, u in new + resolved]
    steps = _step_arrivals(rec)
    pauses = [b[0] for a, b in zip(steps, steps[1:], strict=False) if b[0] - a[0] > 10]
    assert len(pauses) == 4  # the checkpoints after steps 40, 80, 120 and 160 (the one after 200 ends the job)
    assert new[0][0] < pauses[0] <= resolved[0][0]
    assert "checkpoint save" in new[0][1].finding.summary
    assert analyzer.progress.pauses.get(("checkpoint",), 0) > 10


def test_one_slow_rank_is_a_straggler_until_it_keeps_up_again():
    rec, _, polls = _replay("slow_recovers")
    assert not _updates(polls, "ST1")
    (t_new, new), = _updates(polls, "ST2", "new")
    (t_done, done), = _updates(polls, "ST2", "resolved")
    assert done.note.startswith("rank 1 keeps up again: slow_recovers/console.log:")
    assert new.finding.ranks == [1] and "rank 1 is at step 59: ranks 0, 2-3 went past it" in new.finding.summary
    slow = [(t, s) for t, s in _step_arrivals(rec) if 60 <= s <= 67]
    assert slow[0][0] < t_new < slow[-1][0]  # while it lagged (steps 60-67 took 12 s more on it)
    back = min(t for t, s in _step_arrivals(rec) if s == 68)
    assert back <= t_done <= back + 2 * (POLL + SETTLE)


def _last_line_before(rec, t: float) -> float:
    return max(a for a, _name, _data in rec.chunks if a <= t)


@pytest.mark.parametrize(("run", "ranks", "words"), [
    ("startup_stall", [1], ["rank 1 is in a data load that ranks 0, 2-3 did not enter", "loading training shard 0"]),
    ("startup_silent", [], ["nothing singles a rank out"]),
])
def test_a_job_that_hangs_before_its_first_step_is_reported_after_five_minutes(run, ranks, words):
    # No step line ever arrives: the job never shows a rhythm. The alert comes 5 x the 60-s floor
    # after its last line (start-up work may be silent for minutes), long before the 30-minute timeout.
    rec, _, polls = _replay(run)
    new = _updates(polls, "ST1", "new")
    assert len(new) == 1, [(t, u.finding.summary) for t, u in new]
    t, u = new[0]
    quiet = t - _last_line_before(rec, t)
    assert 300 <= quiet <= 300 + POLL + SETTLE, quiet
    assert u.finding.ranks == ranks
    assert "none since it started" in u.finding.summary
    for w in words:
        assert w in u.finding.summary, u.finding.summary


def test_batch_analysis_of_a_start_up_hang_stopped_from_outside_names_the_rank_in_its_data_load():
    import nccl_doctor

    # rank 1's last line is "loading training shard 0 ..." (it blocks reading it), the others' last
    # lines say they are ready; torchrun got SIGTERM 7 min later (the recorder's stop, as a scancel).
    report = nccl_doctor.analyze(str(LIVERUNS / "startup_stall"), jobs=1)
    assert report.verdict["ranks"] == [1], report.verdict
    fired = {f.rule for f in report.findings if f.severity.value == "error"}
    assert {"RK2", "TO1"} <= fired, fired
    (rk2,) = [f for f in report.findings if f.rule == "RK2"]
    assert "a data load that ranks 0, 2-3 did not enter" in rk2.summary


def test_batch_analysis_of_a_silent_start_up_hang_names_no_rank_and_says_no_step_was_made():
    import nccl_doctor

    # every rank's last line says it is ready; rank 3 then blocked without a word; no step line at all
    report = nccl_doctor.analyze(str(LIVERUNS / "startup_silent"), jobs=1)
    assert not report.verdict.get("ranks"), report.verdict
    assert "before any training step" in report.verdict["headline"]
    assert any(f.rule == "TO1" and f.severity.value == "error" for f in report.findings)


@pytest.mark.parametrize("run", ["phase_stall", "all_stop", "slow_recovers", "healthy_ckpt", "stall_recovers",
                                 "startup_stall", "startup_silent"])
def test_recordings_are_whole_and_batch_analysis_never_judges_arrival_times(run):
    import nccl_doctor

    rec = load(LIVERUNS / run)  # checks that timing.json accounts for every byte
    assert rec.run["torch"].startswith("2.13.0") and rec.run["case"] == run
    report = nccl_doctor.analyze(str(LIVERUNS / run), jobs=1)
    assert not [f for f in report.findings if f.rule in ("ST1", "ST2")]
