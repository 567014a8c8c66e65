"""Log text is shown literally: Rich/Textual markup stays characters, escape sequences are dropped."""

from __future__ import annotations

import html
import re

from conftest import SIZE, until_main

from nccl_doctor.tui.widgets import RankDetail, RankTimeline


def _screen_text(app) -> str:
    svg = app.export_screenshot()
    text = html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")
    return text


async def test_markup_and_escapes_in_log_lines_show_literally(make_app):
    app = make_app(n=16, per_host=4, culprit=5, hostile_rank=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = await until_main(pilot)
        tv = screen.query_one(RankTimeline)
        assert tv.goto_row(app.timeline.rows_of([2])[0])
        await pilot.pause()
        detail = screen.query_one(RankDetail)
        plain = detail.rank_text(detail.row).plain
        assert "boom [bold red]x[/] and [link=http://e]y[/link]  end" in plain
        assert "\x1b" not in plain and "\x07" not in plain and "aGk=" not in plain
        shown = _screen_text(app)
        assert "[bold red]x[/] and [link=http://e]y[/link]" in shown  # in the detail pane
        assert "evidence with markup boom [bold" in shown  # in the findings list
        assert "aGk=" not in shown and "52;c;" not in shown and "\x1b" not in shown
        text = detail.rank_text(detail.row)  # and no style or link comes from the log text
        start = text.plain.index("boom")
        for span in text.spans:
            if span.start <= start < span.end:
                assert "link" not in str(span.style) and "red" not in str(span.style)
