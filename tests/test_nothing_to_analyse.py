"""Nothing to analyse is never healthy: empty files and folders, a compressed file with no complete
line, or text in which no line is one nccl-doctor knows give exit status 2 and one line on stderr,
never "no failure found" with status 0."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from conftest import REAL

from nccl_doctor import analyze
from nccl_doctor.discover import InputError

GOOD = REAL / "077_other_nccl_errors.log"  # a real excerpt with an NC1 finding


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nccl_doctor", *args], capture_output=True, text=True, timeout=120)


def _one_line_exit_2(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, r.stdout
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("nccl-doctor: nothing to analyse")
    assert "Traceback" not in r.stderr
    for w in words:
        assert w in r.stderr


def test_empty_file(tmp_path):
    (tmp_path / "rank-0.log").write_bytes(b"")
    _one_line_exit_2(cli("analyze", str(tmp_path / "rank-0.log")), "no log line", "empty")


def test_empty_folder(tmp_path):
    _one_line_exit_2(cli("analyze", str(tmp_path)), "no file in")


def test_prose_only(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("we restarted the job at noon\nlooks fine now\n")
    _one_line_exit_2(cli("analyze", str(p)), "none of the 2 lines", "one nccl-doctor knows")


def test_compressed_file_with_no_complete_line(tmp_path):
    whole = gzip.compress(b"gpu-1:12:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" * 3)
    p = tmp_path / "rank-0.log.gz"
    p.write_bytes(whole[: len(whole) // 2])  # cut inside the compressed stream
    _one_line_exit_2(cli("analyze", str(p)), "cut short")


def test_library_report_says_so(tmp_path):
    (tmp_path / "a.log").write_bytes(b"")
    report = analyze(str(tmp_path / "a.log"))
    assert report.nothing_found.startswith("nothing to analyse: no log line")
    assert report.exit_status == 2 and report.verdict is None
    assert report.to_dict()["notes"][0] == report.nothing_found
    (tmp_path / "none").mkdir()
    with pytest.raises(InputError, match="no file in"):  # no file at all: nothing to report on
        analyze(str(tmp_path / "none"))


def test_empty_file_beside_a_real_log_is_listed(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "good.log").write_bytes(GOOD.read_bytes())
    report = analyze(str(tmp_path), jobs=1)
    assert "NC1" in {f.rule for f in report.findings}
    assert {"path": str(tmp_path / "empty.log"), "reason": "empty: no log line"} in report.inputs["skipped"]


def test_truncated_archive_with_content_is_partly_read(tmp_path):
    body = GOOD.read_bytes()
    data = gzip.compress(body)
    p = tmp_path / "good.log.gz"
    p.write_bytes(data[: len(data) - 8])  # the trailer (CRC, size) lost: every line is there
    report = analyze(str(p), jobs=1)
    assert "NC1" in {f.rule for f in report.findings}
    assert [s["path"] for s in report.inputs["skipped"] if s["reason"].startswith("partly read")] == [str(p)]
