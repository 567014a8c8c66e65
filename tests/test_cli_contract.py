"""The error contract: closed stdout or stderr, an unwritable or full output, an output path that is
a folder: one line on stderr (when it is open), exit status 2, never a traceback, never a file
written where the user did not ask; -o writes a temporary file and renames it."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor import output
from nccl_doctor.output import OutputError, write_file

ROOT = Path(__file__).resolve().parents[1]
LOG = str(ROOT / "fixtures" / "real" / "019_mn3_timeout.log")  # one MN3 finding: exit status 1


def _run(*args: str, close: tuple[int, ...] = ()) -> subprocess.CompletedProcess:
    def closer() -> None:
        for fd in close:
            os.close(fd)

    return subprocess.run([sys.executable, "-m", "nccl_doctor", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, preexec_fn=closer if close else None)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_closed_stdout_is_one_line_and_status_2():
    r = _run("analyze", LOG, close=(1,))
    assert r.returncode == 2
    assert _one_line(r.stderr) == "nccl-doctor: cannot write the report: standard output is closed"


def test_closed_stdout_does_not_matter_with_an_output_file(tmp_path):
    r = _run("analyze", LOG, "-o", str(tmp_path / "r.txt"), close=(1,))
    assert r.returncode == 1 and r.stderr == ""
    assert (tmp_path / "r.txt").read_text().startswith("VERDICT")


def test_closed_stderr_keeps_the_exit_status():
    assert _run("analyze", "/nonexistent", close=(2,)).returncode == 2
    assert _run("analyze", LOG, close=(1, 2)).returncode == 2
    r = _run("analyze", LOG, close=(2,))
    assert r.returncode == 1 and r.stdout.startswith("VERDICT")


def test_full_output_file_and_full_stdout():
    r = _run("analyze", LOG, "-o", "/dev/full")
    assert r.returncode == 2 and _one_line(r.stderr) == "nccl-doctor: cannot write /dev/full: No space left on device"
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "nccl_doctor", "analyze", LOG], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2 and "No space left on device" in _one_line(r.stderr)


def test_output_paths_that_are_folders_are_refused_before_any_work(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    for args in (("analyze", LOG, "-o", str(folder)), ("analyze", LOG, "--plot", str(folder)),
                 ("plot", LOG, "-o", str(folder))):
        r = _run(*args)
        assert r.returncode == 2 and r.stdout == "", args
        assert _one_line(r.stderr) == f"nccl-doctor: cannot write {folder}: it is a folder (give a file name)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and list(folder.iterdir()) == []


def test_plot_writes_exactly_the_path_given(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "timeline"  # no extension: matplotlib alone would write timeline.png
    r = _run("plot", LOG, "-o", str(target))
    assert r.returncode in (0, 1), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["timeline"]
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = _run("plot", LOG, "-o", "/dev/full")
    assert r.returncode == 2 and _one_line(r.stderr) == "nccl-doctor: cannot write /dev/full: No space left on device"
    assert not os.path.exists("/dev/full.png")


def test_a_missing_output_folder_is_refused(tmp_path):
    r = _run("analyze", LOG, "-o", str(tmp_path / "no" / "r.txt"))
    assert r.returncode == 2
    assert _one_line(r.stderr) == f"nccl-doctor: cannot write {tmp_path / 'no' / 'r.txt'}: no such folder {tmp_path / 'no'}"


def test_output_file_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "report.txt"
    target.write_text("the previous report\n")
    os.chmod(target, 0o640)
    write_file(str(target), "a new report\n")
    assert target.read_text() == "a new report\n" and stat.S_IMODE(target.stat().st_mode) == 0o640

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(output.os, "fsync", full)  # the disk fills up while the report is written
    with pytest.raises(OutputError, match=r"cannot write .*report\.txt: No space left on device"):
        write_file(str(target), "x" * 100_000)
    assert target.read_text() == "a new report\n"  # the last good report, not a truncated one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]  # no temporary file left
