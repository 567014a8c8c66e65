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


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_legend_names_only_what_is_drawn():
    fig = figure(build(hang_report(n=16, per_host=8, culprit=5)))
    names = _legend(fig)
    assert {"failed", "timed_out", "last rank to report", "error", "watchdog timeout"} <= set(names)
    assert not {"silent", "lagging", "ok", "warning"} & set(names)  # no rank or mark of these in this job


def test_failures_before_any_init_stage_are_in_view(tmp_path):
    """043: four ranks fail with 'Duplicate GPU detected' before NCCL init completes; their marks
    (error at x = 0, before the first stage) must be inside the axis, not clipped."""
    from pathlib import Path

    from nccl_doctor import analyze

    real = Path(__file__).resolve().parent.parent / "fixtures" / "real"
    tl = build(analyze(str(real / "043_other_nccl_errors.log")))
    fig = figure(tl)
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    errors = tl.marks[tl.marks["mark"] == "error"]
    assert len(errors) >= 4 and errors["x"].min() >= lo and errors["x"].max() <= hi
    assert "before init" in [t.get_text() for t in ax.get_xticklabels()]


def test_header_wraps_at_words():
    from nccl_doctor.plot import HEADER_WIDTH, _header_lines

    rep = hang_report(n=16, per_host=8, culprit=5)
    rep.findings[1].summary = "word " * 200  # far longer than a line
    lines = _header_lines(build(rep))
    assert all(len(ln) <= HEADER_WIDTH for ln in lines)
    mn3 = [ln for ln in lines if ln.startswith("MN3") or (ln.startswith(" " * 9) and "word" in ln)]
    assert len(mn3) == 2 and mn3[-1].endswith("…") and all("wor…" not in ln for ln in lines)
    assert lines[1] == "VERDICT  " + rep.verdict["headline"]
