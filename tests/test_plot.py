"""The PNG timeline: the data it plots (rows, marks, annotations), not its pixels."""

from __future__ import annotations

import numpy as np
import pytest
from fake_report import hang_report

from nccl_doctor.plot import GROUP_ROWS, OUTLIERS, RANK_ROWS, figure, plot_rows, write_png
from nccl_doctor.timeline import build


def _artist(ax, kind: str, gid: str):
    items = ax.collections if kind == "collection" else ax.lines
    return next(a for a in items if a.get_gid() == gid)


def test_small_job_one_row_per_rank():
    tl = build(hang_report(n=64, per_host=8, culprit=37))
    rows = plot_rows(tl)
    assert len(rows) == 64 and set(rows["kind"]) == {"rank"}
    assert rows["rows"].map(len).sum() == 64
    last = rows[rows["is_last"]]
    assert last["label"].tolist() == ["r37"] and last["status"].tolist() == ["failed"]
    assert set(rows.loc[~rows["is_last"], "status"]) == {"timed_out"}


def test_large_job_aggregates_by_host_and_keeps_outliers():
    tl = build(hang_report(n=4096, per_host=8, culprit=1037))
    rows = plot_rows(tl)
    assert tl.n > RANK_ROWS
    assert len(rows) <= GROUP_ROWS + OUTLIERS
    assert rows.iloc[0]["kind"] == "rank" and rows.iloc[0]["is_last"] and rows.iloc[0]["label"] == "r1037"
    groups = rows[rows["kind"] == "group"]
    assert len(groups) >= 8 and (groups["status"] == "timed_out").all()
    every = [r for rs in rows["rows"] for r in rs]
    assert sorted(every) == list(range(4096))  # each rank drawn exactly once
    assert groups["counts"].map(lambda c: c.get("timed_out", 0)).sum() == 4095


def test_figure_plots_the_rows_marks_and_annotations():
    tl = build(hang_report(n=64, per_host=8, culprit=37))
    fig = figure(tl)
    ax = fig.axes[0]
    rows = plot_rows(tl)
    y = int(np.flatnonzero(rows["is_last"])[0])
    row = tl.rows_of([37])[0]
    line = _artist(ax, "line", f"rank:{row}")
    info = tl.info(row)
    assert list(line.get_ydata()) == [y, y]
    marks = tl.marks_of(row)
    assert list(line.get_xdata()) == [marks["t"].min(), marks["t"].max()]
    errors = _artist(ax, "collection", "mark:error").get_offsets()
    assert [tuple(p) for p in errors] == [(marks.loc[marks["mark"] == "error", "t"].iloc[0], y)]
    timeouts = _artist(ax, "collection", "mark:timeout").get_offsets()
    assert len(timeouts) == 63 and y not in set(timeouts[:, 1])
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("last to report: rank 37 on gpu-node-04") for t in texts)
    assert "RK1" in texts  # the finding that names one rank is written beside it
    assert any(t.startswith("gpu-node-04") for t in texts)  # host labels
    header = fig.texts[0].get_text()
    assert "VERDICT  rank 37 (gpu-node-04) failed first" in header and "MN3" in header
    assert info["status"] == "failed"


def test_large_figure_draws_group_bands():
    tl = build(hang_report(n=4096, per_host=8, culprit=1037))
    fig = figure(tl)
    ax = fig.axes[0]
    bands = [p for p in ax.patches if str(p.get_gid()).startswith("group:")]
    assert len(bands) == (plot_rows(tl)["kind"] == "group").sum()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "r1037 gpu-node-129"


def test_progress_axis_ticks_name_stages_and_seqnums():
    fig = figure(build(hang_report(n=16, timed=False, verdict=False)))
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert "init" in ticks and "running" in ticks
    assert "SeqNum 4521\n(default)" in ticks


def test_log_text_is_not_mathtext(tmp_path):
    rep = hang_report(n=8, per_host=4, culprit=5)
    rep.findings[0].summary = r"cost $\frac{a}{b}$ and $x^2 \unknowncommand$"
    out = tmp_path / "t.png"
    write_png(rep, str(out))  # mathtext would raise on the unknown command
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_jobs(tmp_path, n):
    out = tmp_path / "t.png"
    write_png(hang_report(n=n, per_host=1, culprit=0), str(out))
    assert out.stat().st_size > 1000
