"""The timeline model: rows per rank grouped by host, statuses, marks on two axes, the last rank."""

from __future__ import annotations

import pytest
from fake_report import hang_report, rank_state

from nccl_doctor.events import Event
from nccl_doctor.model.job import JobModel
from nccl_doctor.timeline import KEEP, RUNNING_X, STATUSES, build, fmt_duration, natural_key, nice_step


def _rank(tl, rank: int):
    return tl.info(tl.rows_of([rank])[0])


def test_one_row_per_rank_grouped_by_host():
    tl = build(hang_report(n=16, per_host=4, culprit=5))
    assert tl.n == 16
    assert list(tl.ranks["rank"]) == list(range(16))
    assert list(tl.ranks["host"].unique()) == [f"gpu-node-{i:02d}" for i in range(4)]
    assert tl.status_counts() == {"failed": 1, "timed_out": 15, "silent": 0, "lagging": 0, "echo": 0, "ok": 0}


def test_hosts_in_natural_order():
    rep = hang_report(n=24, per_host=2)
    for st in rep.job.ranks:
        st.host = f"node-{st.rank // 2}"
    tl = build(rep)
    assert list(tl.ranks["host"].unique())[:3] == ["node-0", "node-1", "node-2"]
    assert natural_key("node-9") < natural_key("node-10")


def test_wall_clock_axis_when_lines_carry_time():
    tl = build(hang_report(timed=True))
    assert tl.axis == "time" and tl.t0 is not None
    waiter = tl.marks_of(tl.rows_of([0])[0])
    culprit = tl.marks_of(tl.rows_of([5])[0])
    assert waiter.loc[waiter["mark"] == "timeout", "t"].iloc[0] == pytest.approx(1820)
    assert culprit.loc[culprit["mark"] == "error", "t"].iloc[0] == pytest.approx(20)
    assert _rank(tl, 5)["last_t"] == pytest.approx(21)


def test_no_wall_clock_when_timestamps_disagree():
    rep = hang_report(timed=True)
    for st in rep.job.ranks:  # as when MMDD lines get another year than the launcher's timestamps
        for e in st.events:
            if e.kind == "torch_wd_timeout":
                e.ts += 2 * 365 * 86400
    assert build(rep).axis == "progress"


def test_progress_axis_without_timestamps():
    tl = build(hang_report(timed=False))
    assert tl.axis == "progress" and tl.t0 is None
    assert tl.counter == "pg:default" and tl.counter_base == 4520
    waiter, culprit = _rank(tl, 0), _rank(tl, 5)
    assert waiter["counter_value"] == 4521 and culprit["counter_value"] == 4520
    assert culprit["progress"] < waiter["progress"]
    assert tl.progress_label(waiter["progress"]) == "SeqNum 4521 (default)"
    assert tl.progress_label(3.0) == "communicator init started" and tl.progress_label(RUNNING_X) == "running"
    marks = tl.marks_of(tl.rows_of([0])[0])
    stages = marks[marks["mark"] == "stage"]
    assert list(stages["label"]) == ["started", "init_start", "init_complete", "running"]
    assert list(stages["x"]) == sorted(stages["x"])
    assert marks.loc[marks["mark"] == "timeout", "x"].iloc[0] == waiter["progress"]


def test_last_rank_comes_from_the_report_when_present():
    tl = build(hang_report(n=16, culprit=9, verdict=True))
    assert tl.last["source"] == "verdict" and tl.last["ranks"] == [9]
    assert tl.ranks.loc[tl.ranks["is_last"], "rank"].tolist() == [9]
    assert tl.last["label"].startswith("rank 9 on gpu-node-02")
    # the verdict already says why: not twice
    assert tl.last["label"] == "rank 9 on gpu-node-02, stopped at SeqNum 4520 (default): named by RK1"
    rep = hang_report(n=16, culprit=9, verdict=True)
    rep.last_rank_to_report["why"] = "RK1: something the verdict does not say"
    assert build(rep).last["label"].endswith("(default): RK1: something the verdict does not say")


def test_last_rank_is_the_one_furthest_behind_otherwise():
    tl = build(hang_report(n=16, culprit=9, verdict=False, timed=False))
    assert tl.last["source"] == "timeline" and tl.last["ranks"] == [9]
    assert "fell furthest behind: SeqNum 4520" in tl.last["why"]
    assert "15 ranks reached SeqNum 4521" in tl.last["why"]


def test_no_last_rank_when_nobody_stands_out():
    rep = hang_report(n=8, culprit=99, verdict=False)  # no culprit: everyone timed out together
    tl = build(rep)
    assert tl.last is None
    assert set(tl.ranks["status"]) == {"timed_out"}


def test_missing_ranks_are_silent_rows():
    tl = build(hang_report(n=8, culprit=5, missing=(3,), verdict=False))
    r = _rank(tl, 3)
    assert r["missing"] and r["status"] == "silent" and r["host"] is None
    assert len(tl.marks_of(tl.rows_of([3])[0])) == 0
    assert tl.ranks.iloc[-1]["rank"] == 3  # ranks with no host come last


def test_silent_and_lagging_are_derived_across_ranks():
    rep = hang_report(n=8, culprit=99, verdict=False, timed=True)
    quiet = rank_state(6, "gpu-node-01", culprit=False, seq=4521, timed=True)
    quiet.timeouts.clear()
    quiet.events = [e for e in quiet.events if e.kind != "torch_wd_timeout"]
    quiet.last_line.ts = quiet.events[-1].ts  # stopped writing 30 min before the others
    slow = rank_state(7, "gpu-node-01", culprit=False, seq=4521, timed=False)
    slow.timeouts.clear()
    slow.events = [e for e in slow.events if e.kind not in ("torch_wd_timeout", "torch_work_update")]
    slow.last_line.ts = rep.job.ranks[0].last_line.ts
    rep.job.ranks[6:8] = [quiet, slow]
    tl = build(rep)
    assert _rank(tl, 6)["status"] == "silent"
    assert _rank(tl, 7)["status"] == "lagging"
    assert tl.last["ranks"] == [7] and "behind" in tl.last["why"]


def test_statuses_given_by_the_model_are_used_as_they_are():
    rep = hang_report(n=4, per_host=2, culprit=1)
    rep.job.ranks[0].status = "lagging"
    tl = build(rep)
    assert list(tl.ranks["status"]) == ["lagging", "ok", "ok", "ok"]


def test_healthy_job_stays_ok():
    rep = hang_report(n=8, culprit=99, verdict=False)
    for st in rep.job.ranks:
        st.events = [e for e in st.events if e.kind != "torch_wd_timeout"]
        st.timeouts.clear()
    rep.job.ranks[3].events = rep.job.ranks[3].events[:2]  # fewer INFO lines: not a reason to lag
    tl = build(rep)
    assert set(tl.ranks["status"]) == {"ok"} and tl.last is None


def test_marks_are_capped_per_rank():
    rep = hang_report(n=4, per_host=2, culprit=1)
    st = rep.job.ranks[1]
    for i in range(50):
        st.events.append(Event("nccl_warn", st.files[0], 100 + i, text=f"NCCL WARN {i}"))
    marks = build(rep).marks_of(1)
    assert (marks["mark"] == "warning").sum() == 2 * KEEP


def test_rows_of_findings():
    tl = build(hang_report(n=16, per_host=4, culprit=5))
    rk1 = next(f for f in tl.findings if f["rule"] == "RK1")
    assert rk1["rows"] == tl.rows_of([5])  # ranks named: the hosts do not widen it
    assert len(tl.rows_of(hosts=["gpu-node-01"])) == 4


def test_untrusted_text_is_kept_raw_in_the_model():
    tl = build(hang_report(n=4, per_host=2, culprit=1, hostile_rank=2))
    assert "\x1b]52" in _rank(tl, 2)["last_text"]  # renderers neutralise it, the model does not alter data


def test_empty_job():
    job = JobModel(ranks=[], events=[], ranks_expected=None, hosts=[], files=[], last_lines={})
    rep = hang_report(n=1)
    rep.job, rep.findings, rep.verdict, rep.last_rank_to_report = job, [], None, None
    tl = build(rep)
    assert tl.n == 0 and tl.last is None and tl.axis == "progress"
    assert tl.status_counts() == dict.fromkeys(STATUSES, 0)


def test_helpers():
    assert nice_step(7) == 10 and nice_step(100) == 120 and nice_step(200000) == 259200
    assert fmt_duration(42) == "42s" and fmt_duration(1800) == "30m" and fmt_duration(7500) == "2h05"


def test_16k_ranks_build():  # how long it takes is measured by benchmarks/tui_paint.py, not here
    rep = hang_report(n=16384, per_host=8, culprit=12345)
    tl = build(rep)
    assert tl.n == 16384 and tl.last["ranks"] == [12345]


def test_a_missing_rank_sits_under_the_host_the_report_names_for_it():
    # The rank wrote nothing; the verdict names it on one host (its neighbours' node): the timeline
    # lists it there, not under "(no host)"; another missing rank nobody placed stays hostless.
    rep = hang_report(n=8, culprit=5, missing=(3, 5), verdict=False)
    rep.verdict = {"summary": "rank 5 went silent", "rule": "RK2", "ranks": [5], "hosts": ["gpu-node-01"],
                   "headline": "rank 5 (gpu-node-01) went silent [RK2]", "rules": ["RK2"]}
    tl = build(rep)
    assert _rank(tl, 5)["host"] == "gpu-node-01"
    assert _rank(tl, 3)["host"] is None


def test_a_rank_whose_lines_name_no_host_sits_under_the_host_the_report_names_for_it():
    # The rank wrote lines, none naming its host; the verdict places it (a file named after its node): the
    # timeline says the same, not "(no host)"; another rank whose lines name no host stays hostless.
    rep = hang_report(n=8, culprit=5, verdict=False)
    for st in rep.job.ranks:
        if st.rank in (2, 5):
            st.host = None
    rep.verdict = {"summary": "rank 5 went silent", "rule": "RK2", "ranks": [5], "hosts": ["gpu-node-07"],
                   "headline": "rank 5 (gpu-node-07) went silent [RK2]", "rules": ["RK2"]}
    tl = build(rep)
    assert _rank(tl, 5)["host"] == "gpu-node-07"
    assert _rank(tl, 2)["host"] is None


def test_ranks_of_a_node_the_report_names_sit_under_it():
    # A node lost whole: the verdict names ranks 0-1 on one host (read from its console's file name), their
    # lines name none: the timeline lists both there; rank 2, not named, stays hostless.
    rep = hang_report(n=4, culprit=0, verdict=False)
    for st in rep.job.ranks:
        if st.rank in (0, 1, 2):
            st.host = None
    rep.verdict = {"summary": "the node gpu-r7-n01 (ranks 0-1) went away", "rule": "RK2", "ranks": [0, 1],
                   "hosts": ["gpu-r7-n01"], "headline": "ranks 0-1 (gpu-r7-n01) went away [RK2]", "rules": ["RK2"]}
    tl = build(rep)
    assert _rank(tl, 0)["host"] == "gpu-r7-n01" and _rank(tl, 1)["host"] == "gpu-r7-n01"
    assert _rank(tl, 2)["host"] is None
