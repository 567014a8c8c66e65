"""Several runs of one job in one folder (model/runs.py): the latest is analysed, never nodes or reports."""

from __future__ import annotations

from nccl_doctor.analysis import analyze


def _run(tmp_path, name: str, start: int, rank_lines: list[str]) -> None:
    (tmp_path / name).write_text("\n".join(f"2026-11-27 15:{start // 60:02d}:{start % 60:02d},000 INFO {ln}"
                                           for ln in rank_lines) + "\n", encoding="utf-8")


STEPS = [f"[rank {r}] starting on vm pid {100 + r}, world size 2" for r in (0, 1)]


def test_an_earlier_run_that_crashed_is_left_out_of_a_healthy_latest_run(tmp_path):
    # run 1 (15:10-15:12): rank 1 logs an error and aborts; run 2 (15:30-15:32) is healthy
    _run(tmp_path, "train.20261127-151000.log", 600,
         STEPS + ["[rank 1] step 3/10 loss 2.1", "[rank 0] step 3/10 loss 2.1"])
    with (tmp_path / "train.20261127-151000.log").open("a") as fh:
        fh.write("2026-11-27 15:10:02,000 ERROR [rank 1] shard 3 is truncated; aborting\n")
    _run(tmp_path, "train.20261127-153000.log", 1800,
         STEPS + ["[rank 0] step 10/10 loss 0.4", "[rank 1] step 10/10 loss 0.4"])
    report = analyze([str(tmp_path)])
    assert not [f for f in report.findings if f.severity.value == "error"]
    assert any("more than one run" in n and "train.20261127-151000.log" in n for n in report.notes)


def test_nodes_whose_clocks_differ_are_one_run(tmp_path):
    # node A (ranks 0-1) and node B (ranks 2-3) an hour apart: other ranks, so not a rerun
    _run(tmp_path, "node-a.log", 600, ["[rank 0] step 3/10 loss 2.1", "[rank 1] step 3/10 loss 2.1"])
    _run(tmp_path, "node-b.log", 3000, ["[rank 2] step 3/10 loss 2.1", "[rank 3] step 3/10 loss 2.1"])
    report = analyze([str(tmp_path)])
    assert not any("more than one run" in n for n in report.notes)
    assert {st.rank for st in report.job.ranks} == {0, 1, 2, 3}


def test_overlapping_files_are_one_run(tmp_path):
    _run(tmp_path, "rank0.log", 600, ["[rank 0] step 3/10 loss 2.1", "[rank 0] step 4/10 loss 2.0"])
    _run(tmp_path, "rank1.log", 601, ["[rank 1] step 3/10 loss 2.1", "[rank 1] step 4/10 loss 2.0"])
    report = analyze([str(tmp_path)])
    assert not any("more than one run" in n for n in report.notes)
