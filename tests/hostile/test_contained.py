"""No input ends the run: a folder 1500 levels deep is read, a file cut while it is read is reported
as partly read, and a failure inside one dump's reading costs that dump only."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pytest

import nccl_doctor
from nccl_doctor.discover import discover
from nccl_doctor.reading import ReadIssue, iter_chunks, open_binary

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "fixtures" / "real" / "019_mn3_timeout.log"
sys.path.insert(0, str(ROOT / "tests" / "flightrec"))


def _deep(base: Path, depth: int) -> str:
    """``base/d/d/.../d/rank0.log``, made with directory descriptors (os.makedirs recurses itself)."""
    base.mkdir()
    fd = os.open(base, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        out = os.open("rank0.log", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, GOOD.read_bytes())
        os.close(out)
    finally:
        os.close(fd)
    return str(base) + "/d" * depth + "/rank0.log"


def _remove_deep(path: str, depth: int) -> None:
    """Bottom-up (pytest's own clean-up recurses, and would fail on it at exit)."""
    os.remove(path)
    folder = os.path.dirname(path)
    for _ in range(depth):
        os.rmdir(folder)
        folder = os.path.dirname(folder)


def test_a_folder_1500_levels_deep_is_read(tmp_path):
    path = _deep(tmp_path / "deep", 1500)
    try:
        files, skipped = discover([str(tmp_path / "deep")])
        assert [f.path for f in files] == [path] and skipped == []
        report = nccl_doctor.analyze(str(tmp_path / "deep"))
        assert {f.rule for f in report.findings} == {f.rule for f in nccl_doctor.analyze(str(GOOD)).findings}
    finally:
        _remove_deep(path, 1500)


def test_folder_walk_keeps_name_order_across_levels(tmp_path):
    for rel in ("a.log", "b/x.log", "b/c/y.log", "c.log", "d/z.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    (tmp_path / "b" / "loop").symlink_to(tmp_path / "b")
    files, _ = discover([str(tmp_path)])
    assert [os.path.relpath(f.path, tmp_path) for f in files] == ["a.log", "b/c/y.log", "b/x.log", "c.log", "d/z.log"]


def test_a_file_cut_while_it_is_read_says_so(tmp_path):
    p = tmp_path / "rank0.log"
    p.write_bytes(b"line of a log\n" * 10_000)
    fp = open_binary(str(p))
    chunks = iter_chunks(fp, chunk_size=4096)
    first = next(chunks)
    os.truncate(p, 8192)  # the job's log rotation with copytruncate, while we read
    with pytest.raises(ReadIssue, match="the file shrank while it was read"):
        for _ in chunks:
            pass
    fp.close()
    assert first.endswith(b"\n")


def test_a_bug_in_one_dump_costs_that_dump_only(tmp_path, monkeypatch):
    import fr_builders

    import nccl_doctor.flightrec as fr

    (tmp_path / "train.log").write_bytes(GOOD.read_bytes())
    for rank in (0, 1):
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(
            pickle.dumps(fr_builders.build("2.10", rank, fr_builders.STEP), protocol=2))
    real = fr.dump_events

    def flaky(d):
        if d.rank == 1:
            raise KeyError("boom")
        return real(d)

    monkeypatch.setattr(fr, "dump_events", flaky)
    report = nccl_doctor.analyze(str(tmp_path))
    skipped = {Path(s["path"]).name: s["reason"] for s in report.inputs["skipped"]}
    assert skipped == {"nccl_trace_rank_1": "flight-recorder dump not read: internal error: KeyError: 'boom'"}
    assert {e.rank for e in report.job.events if e.kind == "fr_dump"} == {0}
    assert {f.rule for f in nccl_doctor.analyze(str(GOOD)).findings} <= {f.rule for f in report.findings}


def test_a_bug_while_following_one_file_costs_that_file_only(monkeypatch):
    """watch's incremental analyzer contains a failure to its source, as the batch scanner does."""
    from nccl_doctor import Analyzer, growing

    real = growing._ChunkScanner.scan_chunk

    def flaky(self, chunk, base_line, stripper, year, out):
        if out.path == "bad.log":
            raise ValueError("boom")
        return real(self, chunk, base_line, stripper, year, out)

    monkeypatch.setattr(growing._ChunkScanner, "scan_chunk", flaky)
    analyzer = Analyzer()
    analyzer.feed_bytes("good.log", GOOD.read_bytes())
    analyzer.feed_bytes("bad.log", GOOD.read_bytes())
    report = analyzer.report()
    assert {f.rule for f in nccl_doctor.analyze(str(GOOD)).findings} <= {f.rule for f in report.findings}
    assert report.inputs["skipped"] == [{"path": "bad.log", "reason": "scan failed: ValueError: boom"}]
