"""Reading a rank's last lines back from its log (for the detail pane)."""

from __future__ import annotations

import gzip

from nccl_doctor.tui.tail import lines_before


def test_lines_before_a_line(tmp_path):
    log = tmp_path / "r.log"
    log.write_text("".join(f"line {i}\n" for i in range(1, 21)))
    assert lines_before(str(log), 10, n=3) == [(8, "line 8"), (9, "line 9"), (10, "line 10")]
    assert lines_before(str(log), 2, n=5) == [(1, "line 1"), (2, "line 2")]


def test_compressed_and_escapes(tmp_path):
    log = tmp_path / "r.log.gz"
    log.write_bytes(gzip.compress(b"a\nb \x1b]52;c;aGk=\x07[bold]x[/]\n"))
    assert lines_before(str(log), 2) == [(1, "a"), (2, "b [bold]x[/]")]


def test_shared_file_keeps_the_rank_own_lines(tmp_path):
    log = tmp_path / "slurm.out"
    log.write_text("0: h:1: a\n1: h:2: b\n0: h:1: c\n1: h:2: d\n0: h:1: e\n")
    assert lines_before(str(log), 4, needles=("h:2:",)) == [(2, "1: h:2: b"), (4, "1: h:2: d")]


def test_unreadable_gives_nothing(tmp_path):
    assert lines_before(str(tmp_path / "missing.log"), 3) == []
    assert lines_before("-", 3) == []
