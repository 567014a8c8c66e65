"""Navigation, search, status filters, finding → ranks, rank → evidence, help and quit."""

from __future__ import annotations

from conftest import SIZE, until_main

from nccl_doctor.tui.screens import HelpScreen
from nccl_doctor.tui.widgets import FindingsList, RankDetail, RankTimeline, SearchBox


def _detail_text(screen) -> str:
    detail = screen.query_one(RankDetail)
    return detail.rank_text(detail.row).plain if detail.row is not None else detail.host_text(detail.host).plain


async def test_opens_on_the_last_rank_to_report(make_app):
    app = make_app(n=64, per_host=8, culprit=37)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        assert tv.has_focus
        row = tv.current_row
        assert int(app.timeline.ranks.at[row, "rank"]) == 37
        assert app.timeline.last["ranks"] == [37]
        # kept in view: the cursor line is inside the visible window
        top = round(tv.scroll_offset.y)
        assert top <= tv.cursor < top + tv.scrollable_content_region.height - tv.HEADER
        assert "rank 37" in _detail_text(screen)


async def test_navigation_moves_the_cursor_and_the_detail(make_app):
    app = make_app(n=64, per_host=8, culprit=37)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        await pilot.press("down")
        assert int(app.timeline.ranks.at[tv.current_row, "rank"]) == 38
        assert "rank 38" in _detail_text(screen)
        await pilot.press("home")
        assert tv.cursor == 0 and tv.current_row is None  # a host line
        assert "host gpu-node-00" in _detail_text(screen)
        await pilot.press("end")
        assert int(app.timeline.ranks.at[tv.current_row, "rank"]) == 63
        assert round(tv.scroll_offset.y) > 0
        await pilot.press("pageup")
        assert int(app.timeline.ranks.at[tv.current_row, "rank"]) < 63
        await pilot.press("l")
        assert int(app.timeline.ranks.at[tv.current_row, "rank"]) == 37


async def test_search_ranks_and_hosts(make_app):
    app = make_app(n=64, per_host=8)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        await pilot.press("slash")
        box = screen.query_one(SearchBox)
        assert box.has_focus
        await pilot.press(*"node-03")
        hosts = set(app.timeline.ranks.loc[tv.visible_rows, "host"])
        assert hosts == {"gpu-node-03"} and len(tv.visible_rows) == 8
        await pilot.press("escape")
        assert len(tv.visible_rows) == 64 and tv.has_focus
        await pilot.press("slash", "r", "1", "2", "enter")
        assert [int(app.timeline.ranks.at[r, "rank"]) for r in tv.visible_rows] == [12]
        assert tv.has_focus and not box.has_class("-open")
        assert tv.current_row == tv.visible_rows[0]
        await pilot.press("escape")
        assert len(tv.visible_rows) == 64


async def test_typing_q_in_search_does_not_quit(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_main(pilot)
        await pilot.press("slash", "q", "1")
        assert app.is_running
        assert app.screen.query_one(SearchBox).value == "q1"


async def test_status_filters(make_app):
    app = make_app(n=32, per_host=8, culprit=5)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        await pilot.press("2")  # hide timed_out
        assert set(app.timeline.ranks.loc[tv.visible_rows, "status"]) == {"failed"}
        await pilot.press("1")  # hide failed too: nothing left
        assert tv.visible_rows == []
        await pilot.press("0")
        assert len(tv.visible_rows) == 32
        await pilot.press("1")
        assert set(app.timeline.ranks.loc[tv.visible_rows, "status"]) == {"timed_out"}


async def test_finding_highlights_its_ranks(make_app):
    app = make_app(n=32, per_host=8, culprit=5)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        assert tv.marked == set()
        await pilot.press("f")
        assert screen.query_one(FindingsList).has_focus
        assert tv.marked == set(app.timeline.rows_of([5]))  # RK1 names the culprit
        await pilot.press("down")  # MN3: the 31 ranks that waited
        waited = {int(app.timeline.ranks.at[r, "rank"]) for r in tv.marked}
        assert waited == set(range(32)) - {5}
        await pilot.press("m")
        assert set(tv.visible_rows) == tv.marked
        await pilot.press("escape")
        assert tv.marked == set() and len(tv.visible_rows) == 32 and tv.has_focus


async def test_rank_shows_last_lines_and_evidence(make_app):
    app = make_app(n=16, per_host=4, culprit=5)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        text = _detail_text(screen)
        assert "LAST LINE  logs/rank-00005.log:6  Traceback ends here" in text
        assert "✖ logs/rank-00005.log:5  torch.OutOfMemoryError: CUDA out of memory." in text
        assert "EVIDENCE" in text and "RK1" in text
        await pilot.press("enter")
        assert screen.query_one(RankDetail).has_focus


async def test_click_selects_a_rank(make_app):
    app = make_app(n=16, per_host=4, culprit=5)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        await pilot.click(RankTimeline, offset=(6, tv.HEADER + 1 + 1))  # border, ruler, pinned, host line
        assert tv.current_row is not None


async def test_help_and_quit(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await until_main(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code in (0, None)


async def test_tail_lines_are_read_from_the_log(tmp_path, make_app):
    from fake_report import hang_report

    from nccl_doctor.tui.app import DoctorApp

    rep = hang_report(n=8, per_host=4, culprit=5)
    log = tmp_path / "rank-00005.log"
    log.write_text("".join(f"line {i} [b]x[/b]\x1b[31m\n" for i in range(1, 7)))
    for st in rep.job.ranks:
        if st.rank == 5:
            st.last_line.file = str(log)
    app = DoctorApp([str(tmp_path)], report=rep)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        for _ in range(50):
            await pilot.pause(0.05)
            if "LAST LINES" in _detail_text(screen):
                break
        text = _detail_text(screen)
        assert "LAST LINES" in text and "line 6 [b]x[/b]" in text and "\x1b" not in text


async def test_unreadable_input_says_so_and_exits_2(tmp_path):
    from nccl_doctor.tui.app import DoctorApp

    app = DoctorApp([str(tmp_path / "nothing-here")])
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if app.exit_status == 2:
                break
        assert app.exit_status == 2
        assert "nothing to show" in app.screen.query_one("#file").render().plain
        await pilot.press("q")
    assert app.return_code == 2


async def test_16k_ranks_stay_responsive(make_app):
    """Each key draws a screenful of rows, not 16k of them (work counted, not timed: time is in
    benchmarks/tui_paint.py)."""
    app = make_app(n=16384, per_host=8, culprit=12345)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot, timeout=60)
        tv = screen.query_one(RankTimeline)
        assert int(app.timeline.ranks.at[tv.current_row, "rank"]) == 12345
        drawn = []
        rank_line = tv._rank_line
        tv._rank_line = lambda row, *a, **k: drawn.append(row) or rank_line(row, *a, **k)
        keys = ("end", "home", "pagedown", "pagedown", "down", "up", "2", "0", "l")
        for key in keys:
            await pilot.press(key)
        for _ in range(50):  # (a loaded machine may paint after the first pause: wait for it, by count)
            await pilot.pause()
            if drawn:
                break
        assert 0 < len(drawn) <= len(keys) * 2 * SIZE[1], f"{len(drawn)} rank rows drawn for {len(keys)} keys"
        assert int(app.timeline.ranks.at[tv.current_row, "rank"]) == 12345
        await pilot.press("slash", *"r16000", "enter")
        assert [int(app.timeline.ranks.at[r, "rank"]) for r in tv.visible_rows] == [16000]
