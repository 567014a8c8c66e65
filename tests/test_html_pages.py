"""Consoles saved from a browser as HTML pages (nccl_doctor/htmlpage.py), read from t174's real recordings
(fixtures/realruns/collect174.py renders the real output as Jenkins, GitLab and nbconvert do). Expected
values are the pages' own lines, read by hand."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor import analyze
from nccl_doctor.htmlpage import looks_like, page_lines
from nccl_doctor.reading import clean_line

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def test_a_page_shows_its_text_line_by_line_at_its_own_lines():
    page = (b"<!DOCTYPE html>\n<html><head><style>\npre { x: 1 }\n</style></head>\n<body><pre>"
            b"<span class=\"timestamp\"><b>07:13:11</b> </span>[rank2]: ValueError: a &lt;b&gt; &amp; c\n"
            b"<div class=\"log-line\"><a class=\"gl-link line-number\" href=\"#L7\">7</a><span>step 1</span></div>"
            b"<div class=\"log-line\"><span>step 2</span></div>\n</pre></body></html>\n")
    text, line_map = page_lines(page)
    assert text.decode().splitlines() == ["07:13:11 [rank2]: ValueError: a <b> & c", "step 1", "step 2"]
    assert line_map == [5, 6, 6]


def test_a_log_that_quotes_an_html_error_body_is_no_page():
    assert looks_like(b"<!DOCTYPE html><html>")
    assert not looks_like(b"[rank1]: requests.exceptions.HTTPError: 503 <html><body>down</body></html>\n")


def test_jenkins_console_page_names_the_rank_that_raised():
    # consoleFull.html:69 "[rank2]: ValueError: truncated record ... shard-00002.rec"
    report = analyze([str(RUNS / "t174_raise_r2_w4_jenkins_ts_tee")], jobs=1)
    assert report.verdict["ranks"] == [2]
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert any(e.file.endswith("consoleFull.html") and e.line == 69 for e in rk1.evidence)


def test_a_gitlab_pages_line_numbers_are_not_log_text():
    report = analyze([str(RUNS / "t174_kill_r1_w3_gitlab_redirect")], jobs=1)
    assert report.verdict["ranks"] == [1]


def test_buildkites_apc_time_stamp_is_no_text():
    assert clean_line(b"\x1b_bk;t=1795847282000\x07[rank 1] step 20") == "[rank 1] step 20"
