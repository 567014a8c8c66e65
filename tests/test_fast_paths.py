"""The shortcuts taken for speed give the answers of the plain paths they replace."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nccl_doctor.formats import load_formats
from nccl_doctor.launchers import detect_modes, head_lines

ROOT = Path(__file__).resolve().parent.parent
HANG = ROOT / "fixtures" / "generated" / "hang-mn3-16"
FORMATS = load_formats()


def _detection_sample(lines: list[str]) -> list[str]:
    """What detect_modes reads: the first 200 non-blank lines among the first 600."""
    return [ln for ln in lines[:600] if ln.strip()][:200]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["", "   ", "x" * 10, "y" * 300, "[rank3]: NCCL INFO a", "0: srun line", "z" * 5000]),
                min_size=0, max_size=900))
def test_head_window_gives_detection_the_same_lines(lines):
    chunk = "\n".join(lines).encode() + b"\n"
    full = chunk[: 256 << 10].decode("utf-8", "replace").splitlines()  # the whole-head decode it replaced
    assert _detection_sample(head_lines(chunk)) == _detection_sample(full)


def test_head_window_keeps_detection_of_srun_labels():
    body = "".join(f"{i % 4}: step {i} loss 1.0\n" for i in range(2000)).encode()
    assert detect_modes(head_lines(body)) == detect_modes(body[: 256 << 10].decode().splitlines())
    assert "srun_label" in detect_modes(head_lines(body))


def test_candidates_from_line_literals_equal_candidates_from_shape():
    """Every format sample matched with the literals the prefilter would report for its line gives
    the same kind and fields as the shape-based candidate search."""
    checked = 0
    for pattern in FORMATS.patterns:
        for sample in pattern.samples:
            line = sample["line"]
            hits = frozenset(lit for lit in FORMATS.literals if lit in line)
            assert FORMATS.match(line, hits) == FORMATS.match(line), line
            checked += 1
    assert checked > 300


def test_candidates_from_literals_of_a_longer_line_still_check_the_record():
    """A record cut from a longer line (a glued record, a stripped prefix) gets the line's literals;
    a pattern whose literal is only in the other part must not match the record."""
    line = "gpu-1:11:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"
    hits = frozenset(lit for lit in FORMATS.literals if lit in line + " Watchdog caught collective operation timeout")
    assert FORMATS.match(line, hits) == FORMATS.match(line)
    assert FORMATS.match(line)[0] == "nccl_version"


def test_analysis_restores_the_garbage_collector():
    from nccl_doctor import analyze

    assert gc.isenabled()
    analyze(str(HANG))
    assert gc.isenabled()
    gc.disable()
    try:
        analyze(str(HANG))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cli_output_is_complete_through_a_pipe():
    """The CLI leaves with os._exit after flushing: a pipe reader still gets the whole report and
    the exit status (1: findings at warning or above)."""
    r = subprocess.run([sys.executable, "-m", "nccl_doctor", "analyze", "--format", "json", str(HANG)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["verdict"]["ranks"] == [12]  # the fixture's hung rank (its expected.json)
