"""Property-based: arbitrary bytes and mutated real excerpts never make the reader, the record
splitter, the launcher stripper or the parser raise."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nccl_doctor.formats import load_formats
from nccl_doctor.launchers import LauncherStripper
from nccl_doctor.reading import clean_line, iter_chunks
from nccl_doctor.records import split_glued
from nccl_doctor.scanner import FileScan, Scanner

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
EXCERPTS = [p.read_bytes() for p in sorted(REAL.glob("*.log"))]
SCANNER = Scanner()
FORMATS = load_formats()
STRIP = LauncherStripper(frozenset({"srun_label", "pdsh_host", "mpich_rank"}))


def _scan_bytes(data: bytes) -> FileScan:
    out = FileScan(path="mem")
    SCANNER._scan_stream(io.BytesIO(data), out)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000), st.integers(1, 64), st.integers(1, 200))
def test_reader_never_raises_and_keeps_lines(data, chunk, max_line):
    out = b"".join(iter_chunks(io.BytesIO(data), chunk, max_line))
    assert out.count(b"\n") <= data.count(b"\n") + 1 + len(data) // max_line


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_records_launchers_and_parser_never_raise(text):
    for rec in split_glued(clean_line(text.encode("utf-8", "surrogatepass"))):
        _fields, rest = STRIP.strip(rec)
        FORMATS.match(rest)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(EXCERPTS), st.lists(st.tuples(st.integers(0, 10_000), st.binary(min_size=0, max_size=8)), max_size=12),
       st.integers(0, 2000))
def test_mutated_excerpts_never_raise(excerpt, edits, cut):
    data = bytearray(excerpt)
    for pos, junk in edits:
        pos %= max(1, len(data))
        data[pos:pos + len(junk)] = junk
    data = bytes(data[: max(0, len(data) - cut)])
    scan = _scan_bytes(data)
    assert scan.lines >= data.count(b"\n")
