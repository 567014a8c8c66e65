"""The fast scan path (nccl_doctor.fastscan) gives the scans of the general per-line path, on every
fixture, on every generated layout and on lines built to hit its edges (launcher prefixes, glued
records, blocks, non-ASCII, control characters, memoised shapes with other digits)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from conftest import has_hyperscan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nccl_doctor.discover import discover
from nccl_doctor.fastscan import FastScanner
from nccl_doctor.formats import load_formats
from nccl_doctor.launchers import load_launchers
from nccl_doctor.regex_facts import digit_blind
from nccl_doctor.scanner import FileScan, Scanner

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("lines", "bytes", "parsed", "events", "last_lines", "modes", "skipped", "issue", "quiet", "repeats")


pytestmark = pytest.mark.skipif(not has_hyperscan(), reason="the fast path needs Hyperscan's literal hits")
GENERAL = Scanner(engine="hyperscan") if has_hyperscan() else None
FAST = FastScanner(engine="hyperscan") if has_hyperscan() else None


def _same(paths: list[str]) -> int:
    files, _ = discover(paths)
    for f in files:
        a, b = GENERAL.scan(f), FAST.scan(f)
        for name in FIELDS:
            assert getattr(a, name) == getattr(b, name), (f.path, name)
    return len(files)


def test_same_scans_on_every_fixture():
    folders = [ROOT / "fixtures" / d for d in ("generated", "real", "flightrec", "realruns")]
    assert _same([str(d) for d in folders if d.is_dir()]) > 50


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    from generator import LAYOUTS, generate_job

    out = tmp_path_factory.mktemp("layouts")
    for i, layout in enumerate(LAYOUTS):
        for scenario in ("MN3", "RK1", "MN5", "NET1"):
            generate_job(out / f"{layout}-{scenario}", scenario, 16, layout=layout, seed=20 + i)
    generate_job(out / "steps", "MN3", 16, steps=40, step_lines="all", info_lines=False, seed=3)
    generate_job(out / "old", "RK1", 16, nccl_era="2.7", torch_era="1.13", seed=4)
    return out


def test_same_scans_on_every_generated_layout(layouts):
    assert _same([str(layouts)]) > 100


def _scan_bytes(scanner: Scanner, data: bytes) -> FileScan:
    out = FileScan(path="mem")
    scanner._scan_stream(io.BytesIO(data), out)
    return out


SAMPLES = sorted({s["line"] for p in load_formats().patterns for s in p.samples})
LAUNCHER_SAMPLES = sorted({s["line"] for lc in load_launchers() for s in lc.samples if "line" in s})
PREFIXES = ["", "[rank3]:", "[rank12]: ", "3: ", "[default1]:", "2024-05-01T10:00:00.123456789Z ",
            "[1,7]<stdout>:", "(RayTrainWorker pid=4242, ip=10.0.0.7) ", "node-7: "]


def _redigit(line: str, seed: int) -> str:
    """The same line with other digits in the same places (the fast path's memo is keyed on that shape)."""
    return re.sub(r"\d", lambda m: str((int(m.group()) + seed) % 10), line)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SAMPLES + LAUNCHER_SAMPLES), st.sampled_from(PREFIXES), st.integers(0, 9),
                          st.sampled_from(["", "", "", "é", "\x1b[0m", "\r", " NCCL INFO x", "\t"])),
                min_size=1, max_size=40))
def test_same_scans_on_built_lines(parts):
    lines = [f"{pre}{_redigit(line, k)}{tail}" for line, pre, k, tail in parts]
    data = "\n".join(lines).encode() + b"\n"
    a, b = _scan_bytes(GENERAL, data), _scan_bytes(FAST, data)
    for name in FIELDS:
        assert getattr(a, name) == getattr(b, name), name


def test_both_repetitive_families_keep_line_order():
    """A per-collective line before an inter-node channel line, other candidates around them: the
    two families are found apart (one after the other), yet the lines are taken in file order, so
    every event keeps its own line number (the fast path once took them family by family)."""
    coll = next(x for x in SAMPLES if ": opCount " in x)
    net = next(x for x in SAMPLES if "via NET/" in x)
    other = next(x for x in SAMPLES if "Init COMPLETE" in x)
    data = "\n".join([other, coll, other, net, other, coll, other]).encode() + b"\n"
    a, b = _scan_bytes(GENERAL, data), _scan_bytes(FAST, data)
    assert [e.line for e in b.events] == [e.line for e in a.events]
    assert sorted({e.line for e in b.events}) == list(range(1, 8))  # every line is a record of its own


def test_memo_reads_each_line_s_own_digits():
    """Two step lines of one digit shape: the second is answered from the memo, with its own values."""
    data = b"step: 10  loss:  7.1234  mfu: 40.10%\nstep: 11  loss:  6.9876  mfu: 41.20%\n"
    fast = FastScanner(engine="hyperscan")
    got = [(e.kind, e.fields.get("step")) for e in _scan_bytes(fast, data).events]
    assert got == [("train_step", 10), ("train_step", 11)]
    assert len(fast._memo) == 1


@pytest.mark.parametrize(("rx", "blind"), [
    (r"step:? (?P<step>\d{1,12})", True), (r"[^\s:]{1,256}:(?P<pid>\d+)", True), (r"\w+ \S+ .", True),
    (r"NCCL version 2\.", False), (r"0x[0-9a-f]+", False), (r"[0-5]", False), (r"[^0]", False),
    (r"(?P<a>\d)(?P=a)", False), (r"(?<![\w-])x(?=\d)", True),
])
def test_digit_blind(rx, blind):
    assert digit_blind(re.compile(rx)) is blind


def test_fast_path_without_hyperscan_hits_is_the_general_path():
    """With the pure-re prefilter (no literal sets) every line takes the general path."""
    data = (ROOT / "fixtures" / "real" / "005_mn3_timeout.log").read_bytes()
    a = _scan_bytes(Scanner(engine="re"), data)
    b = _scan_bytes(FastScanner(engine="re"), data)
    assert a.events == b.events and a.events


def test_records_matched_from_their_literals_as_from_their_shape():
    """A record the scan joins or looks at whole (a block, a wrapped record, a head line) is matched
    with the literals Hyperscan finds in it instead of a literal scan of its digit shape: the same
    answer on every line of the real excerpts and real runs, and on every two lines joined."""
    shape_match = FAST.formats.match
    assert FAST.match_record != shape_match  # (the fast scanner's own: else this tests nothing)
    n = 0
    for folder in ("real", "realruns"):
        for path in sorted((ROOT / "fixtures" / folder).rglob("*")):
            if not path.is_file() or path.suffix in (".json", ".md", ".py") or path.stat().st_size > 4 << 20:
                continue
            lines = path.read_bytes().decode("utf-8", "replace").splitlines()[:4000]
            for a, b in zip(lines, [*lines[1:], ""], strict=False):
                for rec in (a, a + " " + b.strip()):
                    assert FAST.match_record(rec) == shape_match(rec), (path.name, rec)
                    n += 1
    assert n > 20_000
