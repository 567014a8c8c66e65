"""The TUI fits a small terminal: at 80x24 and 100x30 the verdict, the findings (their rule ids) and
at least 5 rank rows are on screen at once; the detail panel opens on Enter and closes on Escape."""

from __future__ import annotations

import pytest
from conftest import until_main
from fake_report import hang_report

from nccl_doctor.tui.app import DoctorApp
from nccl_doctor.tui.widgets import FindingsList, RankDetail, RankTimeline, VerdictPanel


def _rows(tv: RankTimeline) -> list[str]:
    """The text of the timeline's lines as drawn now (ruler, pinned last rank, then the list)."""
    h = tv.scrollable_content_region.height
    return ["".join(seg.text for seg in tv.render_line(y)) for y in range(h)]


def _visible(widget) -> bool:
    return widget.display and widget.region.height > 0 and widget.region.width > 0


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_verdict_findings_and_five_ranks_fit(size):
    app = DoctorApp(report=hang_report(n=64, per_host=8, culprit=37))
    async with app.run_test(size=size) as pilot:
        screen = await until_main(pilot)
        verdict, findings, tv = screen.query_one(VerdictPanel), screen.query_one(FindingsList), screen.query_one(RankTimeline)
        assert _visible(verdict) and "rank 37 (gpu-node-04) failed first" in verdict.build().plain
        assert _visible(findings) and findings.region.height - 2 >= len(findings.findings)  # every finding's line
        assert [f["rule"] for f in findings.findings][:2] == ["RK1", "MN3"]  # the verdict's order
        lines = _rows(tv)
        rank_rows = [ln for ln in lines[2:] if ln[1:2] == "r" and ln[2:3].isdigit()]
        assert len(rank_rows) >= 5, lines
        assert verdict.region.bottom <= findings.region.y and findings.region.bottom <= tv.region.y
        assert tv.region.bottom <= size[1]
        assert not _visible(screen.query_one(RankDetail))  # collapsed until asked for
        await pilot.press("enter")
        await pilot.pause()
        detail = screen.query_one(RankDetail)
        assert _visible(detail) and "rank 37" in detail.rank_text(detail.row).plain
        assert len([ln for ln in _rows(tv)[2:] if ln[1:2] == "r"]) >= 2  # the timeline shares the space
        await pilot.press("escape")
        await pilot.pause()
        assert not _visible(screen.query_one(RankDetail)) and _visible(findings)


async def test_a_rank_row_shows_how_far_it_got():
    """The culprit's row says where it stopped (SeqNum / opCount), not only its init stage."""
    app = DoctorApp(report=hang_report(n=16, per_host=8, culprit=5))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        lines = _rows(tv)
        assert "reached" in lines[0]
        waiting = [ln for ln in lines[2:] if "timed_out" in ln and not ln.startswith("▾")]
        assert waiting and all("#4521" in ln for ln in waiting)  # the SeqNum the others waited in


async def test_wide_screen_keeps_the_side_by_side_layout():
    app = DoctorApp(report=hang_report(n=64, per_host=8, culprit=37))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await until_main(pilot)
        findings, tv = screen.query_one(FindingsList), screen.query_one(RankTimeline)
        assert findings.region.y == tv.region.y and findings.region.right <= tv.region.x
        assert _visible(screen.query_one(RankDetail))


async def test_a_saved_json_report_opens_like_the_logs(tmp_path):
    """``analyze --format json -o r.json`` then ``tui r.json``: the same verdict, culprit and progress
    without reading the logs again."""
    import json
    from pathlib import Path

    from nccl_doctor import analyze
    from nccl_doctor.report.load import report_from_json

    hang = Path(__file__).resolve().parents[2] / "fixtures" / "generated" / "hang-mn3-16"  # rank 12 hangs before SeqNum 24 (expected.json)
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps(analyze(str(hang)).to_dict()))
    app = DoctorApp(report=report_from_json(str(saved)))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await until_main(pilot)
        assert "rank 12 (dgx-h100-44) went silent" in screen.query_one(VerdictPanel).build().plain
        tv = screen.query_one(RankTimeline)
        assert int(app.timeline.ranks.at[tv.current_row, "rank"]) == 12
        waiting = [ln for ln in _rows(tv)[2:] if "timed_out" in ln and not ln.startswith("▾")]
        assert waiting and all("#24" in ln for ln in waiting)
