"""The live progress model (evidence.progress), the stall/straggler judgement (evidence.stall, ST1 and
ST2) and the alert life cycle (alerts: new, changed, resolved), on timed synthetic lines.

Every clock here is injected: lines arrive at the times the test gives.
"""

from __future__ import annotations

import os
import subprocess
import sys

from liveruns.replay import Clock, replay, timed_lines

from nccl_doctor import Analyzer
from nccl_doctor.alerts import Alerts
from nccl_doctor.findings import Finding, Severity
from nccl_doctor.growing import MAX_MARKS
from nccl_doctor.watch import Watcher


def _steps(ranks: int, until: int, *, stop: dict | None = None, every: float = 1.0, file: str = "rank-{r}.log",
           text: str = "step {i}/{total} | loss 0.5", total: int = 1000) -> list[tuple[float, str, str]]:
    """Step lines of ``ranks`` ranks, one per ``every`` seconds up to step ``until``; rank r stops
    after step ``stop[r]``."""
    stop = stop or {}
    rows = []
    for i in range(1, until + 1):
        for r in range(ranks):
            if i <= stop.get(r, until):
                rows.append((i * every + 0.01 * r, file.format(r=r), text.format(i=i, total=total)))
    return rows


def _run(rows, until: float, **kwargs):
    return replay(timed_lines(rows), until=until, **kwargs)


def _rule_updates(polls, rule: str) -> list:
    return [(p.t, u) for p in polls for u in p.updates if u.finding.rule == rule]


# ---- the model -------------------------------------------------------------------------------------

def test_usual_interval_is_the_median_gap_between_progress_arrivals():
    rows = _steps(1, 30, every=2.0) + [(61.0 + 10 * i, "rank-0.log", f"step {30 + i}/100") for i in range(1, 4)]
    analyzer, _ = _run(rows, until=95, poll=0.5)
    assert analyzer.progress.usual == 2.0  # three 10-s gaps among 29 of 2 s
    assert analyzer.progress.strong  # step lines seen: plain output no longer counts as progress


def test_backlog_gives_positions_but_no_interval():
    clock = Clock()
    analyzer = Analyzer(clock=clock)
    for i in range(1, 21):  # already in the file when watching started
        analyzer.feed_bytes("rank-0.log", f"step {i}/100 | loss 0.5\n".encode(), backlog=True)
    clock.now = 100.0
    analyzer.report()
    tr = analyzer.progress
    assert tr.usual is None and not tr.gaps
    (w,) = [w for w in tr.writers.values() if w.positions]
    assert w.positions[("step",)][0] == 20
    clock.now = 101.0  # the first line seen arriving: the time before it was not watched
    analyzer.feed_bytes("rank-0.log", b"step 21/100 | loss 0.5\n")
    analyzer.report()
    assert not tr.gaps
    clock.now = 102.0
    analyzer.feed_bytes("rank-0.log", b"step 22/100 | loss 0.5\n")
    analyzer.report()
    assert list(tr.gaps) == [1.0]


def _st1(analyzer) -> list:
    return [f for f in analyzer.findings() if f.rule == "ST1"]


def test_a_job_that_never_showed_a_rhythm_is_stalled_after_five_floors_only_if_seen_running():
    # Two ranks print their start-up lines, then nothing: no interval was ever learned.
    def start(backlog: bool) -> tuple[Clock, Analyzer]:
        clock = Clock()
        analyzer = Analyzer(clock=clock)
        clock.now = 1.0
        for r in (0, 1):
            analyzer.feed_bytes(f"rank-{r}.log", f"rank {r} of 2 ready: backend gloo\n".encode(), backlog=backlog)
        analyzer.updates()
        return clock, analyzer

    clock, live = start(backlog=False)
    clock.now = 1.0 + 299.0  # under 5 x the 60-s floor
    assert _st1(live) == []
    clock.now = 1.0 + 301.0
    (f,) = _st1(live)
    assert "none since it started" in f.summary and "nothing singles a rank out" in f.summary, f.summary
    # The same lines already in the files when watching began: a job that may have ended long ago.
    clock, old = start(backlog=True)
    clock.now = 10_000.0
    assert _st1(old) == []


def test_watcher_reads_what_files_held_at_start_as_backlog(tmp_path):
    log = tmp_path / "rank-0.log"
    log.write_text("".join(f"step {i}/100 | loss 0.5\n" for i in range(1, 30)))
    analyzer = Analyzer()
    watcher = Watcher([str(tmp_path)], analyzer)
    watcher.poll()
    analyzer.report()
    assert analyzer.progress._after_backlog and not analyzer.progress.gaps
    with log.open("a") as fh:
        fh.write("step 30/100 | loss 0.5\n")
    watcher.poll()
    assert analyzer._sources[str(log)].marks[-1][2] is False  # a line seen arriving
    new = tmp_path / "rank-1.log"  # a file the job creates later: live
    new.write_text("step 1/100 | loss 0.5\n")
    rotated = tmp_path / "rank-0.log.1"  # a file renamed into the folder, last written long ago: backlog
    rotated.write_text("step 1/100 | loss 0.5\n")
    os.utime(rotated, (1_000_000_000, 1_000_000_000))
    watcher.poll()
    assert analyzer._sources[str(new)].marks[-1][2] is False
    assert analyzer._sources[str(rotated)].marks[-1][2] is True


def test_arrival_marks_stay_bounded_when_nobody_asks():
    clock = Clock()
    analyzer = Analyzer(clock=clock)
    for i in range(3 * MAX_MARKS):
        clock.now = float(i)
        analyzer.feed("a.log", f"tick {i}")
    marks = analyzer._sources["a.log"].marks
    assert len(marks) <= MAX_MARKS
    assert marks[-1][0] == 3 * MAX_MARKS and marks[-1][1] == 3 * MAX_MARKS - 1
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(marks, marks[1:], strict=False))
    analyzer.report()
    assert len(marks) <= 1  # read by the progress model: dropped


# ---- the stall -------------------------------------------------------------------------------------

def test_stall_is_judged_again_as_time_passes_without_new_lines():
    rows = _steps(4, 20)
    analyzer, polls = _run(rows, until=100)
    t_new = [t for t, u in _rule_updates(polls, "ST1") if u.status == "new"]
    # last step line at 20.03 (poll 21), floor 60 s, settle 3 s
    assert t_new == [84.0]


def test_a_rank_that_failed_after_its_last_progress_is_named_first():
    rows = _steps(3, 10)
    rows += [(10.5, "rank-1.log", "Traceback (most recent call last):"),
             (10.6, "rank-1.log", "RuntimeError: CUDA error: an illegal memory access was encountered")]
    _, polls = _run(rows, until=90, select=["ST1"])
    (t, u), = _rule_updates(polls, "ST1")
    assert u.finding.ranks == [1] and "rank 1 reported an error after its last progress" in u.finding.summary
    assert "illegal memory access" in u.finding.summary


def test_a_finished_job_is_not_stalled():
    rows = _steps(2, 10, total=10)  # step 10/10: the last step
    _, polls = _run(rows, until=300)
    assert not _rule_updates(polls, "ST1")
    rows = _steps(2, 10) + [(10.5, "rank-0.log", "training done after 10 steps"),
                             (10.6, "rank-1.log", "training done after 10 steps")]
    _, polls = _run(rows, until=300)
    assert not _rule_updates(polls, "ST1")


def test_the_remedy_names_the_pid_from_nccl_lines():
    rows = []
    for i in range(1, 12):
        for r, (host, pid) in enumerate((("gpu-a", 4100), ("gpu-b", 5200))):
            if r == 1 and i == 11:
                continue
            rows.append((i + 0.1 * r, f"rank-{r}.log", f"{host}:{pid}:{pid} [0] NCCL INFO AllReduce: opCount {i:x} "
                         "sendbuff 0x7f00 recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x5500 [nranks=2] stream 0x5600"))
    _, polls = _run(rows, until=90, select=["ST1"])
    (t, u), = _rule_updates(polls, "ST1")
    assert u.finding.ranks == [1] and u.finding.hosts == ["gpu-b"]
    assert u.finding.remedy.startswith("First rank 1 on gpu-b (`py-spy dump --native --pid 5200`); then rank 0")


def test_a_pause_learned_in_one_phase_does_not_hide_a_stall_in_another():
    rows = _steps(2, 10)
    rows += [(10.5, "rank-0.log", "saving checkpoint to /ckpt/step_10.pt"), (60.0, "rank-0.log", "checkpoint saved in 49.5 s")]
    rows += [(60 + t, name, text.replace("step ", "step 1", 1)) for t, name, text in _steps(2, 20)]
    # the 50-s checkpoint pause is learned for the checkpoint phase; then a silent stop after step 1020
    analyzer, polls = _run(rows, until=160, stall_after=20.0)
    assert analyzer.progress.pauses.get(("checkpoint",), 0) >= 49
    stalls = [(t, u.status) for t, u in _rule_updates(polls, "ST1")]
    # the first checkpoint: reported at 10.5 + 20 + settle and resolved once steps resume; the stop
    # after step 1020 (at 80.01): 20 s later, not 2 x 50 s later
    assert [s for _, s in stalls] == ["new", "resolved", "new"]
    assert stalls[2][0] <= 81 + 20 + 3 + 1


# ---- alerts ----------------------------------------------------------------------------------------

def _finding(rule: str, ranks: list[int]) -> Finding:
    return Finding(rule=rule, title="t", severity=Severity.ERROR, confidence="high", summary=f"{rule} {ranks}",
                   ranks=ranks)


def test_alerts_refined_finding_is_a_change_and_one_resolution_closes_it():
    alerts = Alerts(settle=2.0)
    assert alerts.step([_finding("ST1", [])], 0.0) == []
    (u,) = alerts.step([_finding("ST1", [])], 2.0)
    assert u.status == "new"
    alerts.step([_finding("ST1", [2])], 3.0)
    (u,) = alerts.step([_finding("ST1", [2])], 5.0)
    assert u.status == "changed" and u.finding.ranks == [2]
    assert alerts.step([], 6.0) == []  # gone, not for long enough yet
    assert alerts.step([_finding("ST1", [2])], 7.0) == []  # back: nothing to say
    assert alerts.step([], 8.0) == []
    (u,) = alerts.step([], 10.0, why_resolved=lambda f: "progress resumed")
    assert (u.status, u.finding.ranks, u.note) == ("resolved", [2], "progress resumed")
    assert alerts.step([], 20.0) == []


def test_alerts_final_resolves_at_once_and_other_rules_do_not_cover():
    alerts = Alerts(settle=5.0)
    alerts.step([_finding("RK1", [3]), _finding("MN3", [])], 0.0, final=True)
    (u,) = alerts.step([_finding("MN3", [])], 1.0, final=True)
    assert u.status == "resolved" and u.finding.rule == "RK1"


def test_watch_rejects_a_non_positive_stall_floor(tmp_path):
    (tmp_path / "a.log").write_text("hello\n")
    out = subprocess.run([sys.executable, "-m", "nccl_doctor", "watch", str(tmp_path), "--once", "--stall-after", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--stall-after" in out.stderr


def test_megatron_validation_loss_ends_an_evaluation_and_is_not_a_step():
    from nccl_doctor.evidence.progress import phase_of, position_of
    from nccl_doctor.incremental import parse_lines

    (valid,) = parse_lines(["valid loss at iteration 45000 | lm loss value: 2.327091E+00 |"])
    (step,) = parse_lines([" iteration    45000/  115311 | consumed samples:     76002224 |"])
    assert position_of(valid) is None and phase_of(valid) == ("eval", False)
    assert position_of(step) == (("step",), 45000) and phase_of(step) is None
