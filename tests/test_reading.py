"""Discover and read: folders, globs, compression, CRLF/\\r, ANSI, NULs, overlong lines, truncation."""

from __future__ import annotations

import gzip
import io
import os

import pytest
import zstandard

from nccl_doctor.discover import InputError, discover
from nccl_doctor.reading import ReadIssue, clean_line, iter_chunks, looks_binary, open_binary


def _read_all(path: str, chunk: int = 1 << 20, max_line: int = 1 << 16) -> bytes:
    fp = open_binary(path)
    try:
        return b"".join(iter_chunks(fp, chunk, max_line))
    finally:
        fp.close()


def test_discover_folder_recursive_glob_and_duplicates(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "rank-0.log").write_text("x\n")
    (tmp_path / "a" / "b").mkdir()
    (tmp_path / "a" / "b" / "rank-1.log").write_text("y\n")
    (tmp_path / "a" / "meta.json").write_text("{}")
    os.symlink(tmp_path / "a", tmp_path / "a" / "b" / "loop")  # a symlink loop
    files, skipped = discover([str(tmp_path / "a"), str(tmp_path / "a" / "rank-0.log"), str(tmp_path / "*.nothing")])
    names = sorted(os.path.basename(f.path) for f in files)
    assert names == ["rank-0.log", "rank-1.log"]  # each file once, loop not followed twice
    reasons = {os.path.basename(s.path): s.reason for s in skipped}
    assert "meta.json" in reasons and "glob matched nothing" in reasons["*.nothing"]


def test_discover_missing_path_is_reported(tmp_path):
    files, skipped = discover([str(tmp_path / "nope")])
    assert files == [] and skipped[0].reason == "no such file or folder"
    with pytest.raises(InputError):
        discover([])


def test_gzip_and_zstd_are_transparent(tmp_path):
    body = b"".join(b"line %d\n" % i for i in range(1000))
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(body))
    zs = tmp_path / "x.log.zst"
    zs.write_bytes(zstandard.ZstdCompressor().compress(body))
    assert _read_all(str(gz)) == body
    assert _read_all(str(zs)) == body


def test_truncated_gzip_yields_what_it_can(tmp_path):
    body = b"".join(b"line %06d\n" % i for i in range(20000))
    data = gzip.compress(body)
    p = tmp_path / "cut.log.gz"
    p.write_bytes(data[: len(data) // 2])
    fp = open_binary(str(p))
    got = []
    with pytest.raises(ReadIssue):
        for chunk in iter_chunks(fp, 4096, 1 << 16):
            got.append(chunk)
    text = b"".join(got)
    assert text.startswith(b"line 000000\n") and 0 < len(text) < len(body)


def test_chunks_end_on_newlines_and_overlong_lines_are_capped(tmp_path):
    p = tmp_path / "long.log"
    p.write_bytes(b"a\n" + b"x" * 100_000 + b"\nb\n")
    chunks = list(iter_chunks(open(p, "rb"), 4096, 1000))
    assert all(c.endswith(b"\n") for c in chunks)
    lines = b"".join(chunks).split(b"\n")
    assert lines[0] == b"a" and len(lines[1]) == 1000 and lines[2] == b"b"


def test_clean_line_strips_escapes_and_keeps_carriage_returns():
    raw = b"\x1b[31mred\x1b[0m \x1b]52;c;aGk=\x07done\x00\rnext"
    assert clean_line(raw) == "red done\rnext"
    assert clean_line(b"caf\xff") == "caf\ufffd"


def test_binary_detection():
    assert looks_binary(bytes(range(256)) * 10)
    assert looks_binary(b"\x00" * 100 + b"abc")
    assert not looks_binary("gpu-1:2:3 [0] NCCL INFO café\n".encode() * 50)
    assert not looks_binary(b"")


def test_stdin_stream_is_readable(monkeypatch):
    data = b"hello\nworld\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert b"".join(iter_chunks(open_binary("-"))) == data
