"""Consoles saved by Windows PowerShell (t167, fixtures/realruns/collect167.py re-encodes the real
output as PowerShell 5.1 writes it: UTF-16LE or UTF-16BE with a byte-order mark, CRLF): read as the text
they hold, line for line. Expected values are the decoded files' own lines, read by hand."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor import analyze

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def test_a_utf16le_console_is_read_and_quoted_at_its_own_lines():
    # console.log:27 "[rank1]: ValueError: corrupt record in /data/corpus/café-fr/shard-00018.bin ..."
    report = analyze([str(RUNS / "t167_raise_r1_w3_ps5_utf16le_redirect")], jobs=1)
    assert report.verdict["ranks"] == [1]
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert any(e.line == 27 and "café-fr/shard-00018.bin" in e.text for e in rk1.evidence)


def test_tee_objects_utf16le_console_names_the_killed_rank():
    # console.log:27 "failed (exitcode: -9) local_rank: 2 (pid: 30535)"
    report = analyze([str(RUNS / "t167_kill_r2_w4_teeobject_utf16le_tee")], jobs=1)
    assert report.verdict["ranks"] == [2]
    skipped = [s["path"] for s in report.to_dict()["inputs"]["skipped"]]
    assert not any(p.endswith("console.log") for p in skipped)  # (not "binary data")
