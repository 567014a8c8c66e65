"""Shape runs (nccl_doctor.fastscan ``_run_after``): consecutive step lines of one digit shape are
taken in one go, only the ones the event cap can keep becoming events. The kept events follow the
cap's own description (eventcap's docstring) and equal the general per-line path's, line for line."""

from __future__ import annotations

import io

import pytest
from conftest import has_hyperscan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nccl_doctor import eventcap
from nccl_doctor.eventcap import DENSE, EventCap
from nccl_doctor.fastscan import FastScanner
from nccl_doctor.scanner import FileScan, Scanner

FIELDS = ("lines", "bytes", "parsed", "events", "last_lines", "modes", "skipped", "issue", "quiet", "repeats",
          "step_ts", "step_mmdd", "years")


pytestmark = pytest.mark.skipif(not has_hyperscan(), reason="the fast path needs Hyperscan's literal hits")


def _scan(scanner: Scanner, data: bytes) -> FileScan:
    """As a batch scan does it: with the per-file event cap."""
    out = FileScan(path="mem")
    out.capper = EventCap(out.events)
    scanner._scan_stream(io.BytesIO(data), out)
    return out


class _Counting(FastScanner):
    """Counts the lines that became events on the fast path."""

    def __init__(self):
        super().__init__(engine="hyperscan")
        self.plain = 0

    def _plain_line(self, *args):
        ev = super()._plain_line(*args)
        self.plain += ev is not None
        return ev


def _step(n: int) -> str:  # torchtitan's step line (its digit shape changes at 10, 100, 1000)
    return (f"[titan] 2025-06-10 09:{n // 60 % 60:02d}:{n % 60:02d},123 - root - INFO - step: {n}  loss:  "
            f"{(n * 37) % 100 / 10:.4f}  memory: 40.92GiB(56.34%)  tps: 3,{n % 1000:03d}  mfu: 38.20%")


#: A log's first lines.
HEAD = "> initializing torch distributed ...\nNCCL version 2.21.5+cuda12.4\nusing world size: 8\n"
HEAD_PARSED = 2  # the NCCL version and the world size


def _both(data: bytes) -> tuple[FileScan, _Counting]:
    data = HEAD.encode() + data
    general = _scan(Scanner(engine="hyperscan"), data)
    fast = _Counting()
    got = _scan(fast, data)
    for name in FIELDS:
        assert getattr(got, name) == getattr(general, name), name
    return got, fast


def _steps_kept(scan: FileScan) -> list[int]:
    return [e.fields["step"] for e in scan.events if e.kind == "train_step"]


def test_a_run_keeps_the_first_and_last_steps_and_makes_no_event_of_the_others():
    data = "".join(_step(n) + "\n" for n in range(1, 301)).encode()
    scan, fast = _both(data)
    assert scan.parsed - HEAD_PARSED == 300 and scan.lines == 303
    first, last = DENSE["train_step"]
    assert _steps_kept(scan) == list(range(1, first + 1)) + list(range(301 - last, 301))
    assert [e.line for e in scan.events][-1] == 303
    assert fast.plain < first + last + 36  # those kept, plus the first line of each digit shape (1-9, 10-99, 100-300)


def test_a_counter_going_down_inside_a_run_keeps_both_sides():
    data = "".join(_step(n) + "\n" for n in [*range(100, 201), *range(150, 251)]).encode()
    scan, _ = _both(data)
    first, last = DENSE["train_step"]
    # the first ones; the peak (200) and where it went down to (150); the last ones (..250)
    assert _steps_kept(scan) == [*range(100, 100 + first), 200, 150, *range(251 - last, 251)]


def test_another_event_inside_steps_keeps_the_step_before_and_after_it():
    warn = "gpu-node-7:123:456 [0] NCCL WARN NET/IB : Got async event : port error"
    lines = [_step(n) for n in range(100, 201)] + [warn] + [_step(n) for n in range(201, 301)]
    scan, _ = _both(("\n".join(lines)).encode())  # (no newline at the end of the file)
    kinds = [e.kind for e in scan.events]
    first, last = DENSE["train_step"]
    assert kinds.count("train_step") == first + 2 + last and kinds.count("nccl_ib_async") == 1
    assert _steps_kept(scan) == [*range(100, 100 + first), 200, 201, *range(301 - last, 301)]
    assert scan.parsed - HEAD_PARSED == 202


def test_timed_or_labelled_step_lines_take_no_run_and_lose_nothing():
    """A time makes every step line count (TO1's interval), a launcher label may name another rank:
    such lines are never taken as a run; the scans still equal the general path's."""
    timed = "".join(f" [2024-06-23 15:{n // 60:02d}:{n % 60:02d}] iteration {n:8d}/ 1000 | loss 1.0 |\n"
                    for n in range(100, 400)).encode()
    scan, _ = _both(timed)
    assert len(scan.step_ts) == 300
    labelled = "".join(f"[rank{n % 2}]:{_step(n)}\n" for n in range(100, 400)).encode()
    scan, _ = _both(labelled)
    ranks = [e.rank for e in scan.events if e.kind == "train_step"]
    assert ranks.count(0) == ranks.count(1) == sum(DENSE["train_step"])  # 150 steps each: first and last of each


STEP_FORMATS = [
    _step,
    lambda n: f"Step {n}/1000 | loss 2.31 | lr 1e-4",
    lambda n: f"epoch=0 global_step={n} loss=2.31",
    lambda n: f"Epoch {n % 7}/10: 240it [05:55,  1.47s/it]",
]
OTHERS = ["gpu-node-7:123:456 [0] NCCL WARN NET/IB : Got async event : port error", "plain text, no event",
          "[rank1]:" + _step(5), "{'loss': 1.2345, 'grad_norm': 3.21, 'learning_rate': 1.9e-05, 'epoch': 0.5}",
          "Traceback (most recent call last):"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.tuples(st.sampled_from(range(len(STEP_FORMATS))), st.integers(0, 3000), st.integers(1, 40),
              st.sampled_from([-3, -1, 0, 1, 1, 1, 7])),
    st.sampled_from(OTHERS)), min_size=1, max_size=12), st.booleans())
def test_same_scans_as_the_general_path_with_small_caps(parts, newline_at_end):
    """Runs of step lines (counters going up, down, standing) between other lines, with caps small
    enough that every rule of the cap is exercised: the fast scan equals the general path's."""
    lines = []
    for p in parts:
        if isinstance(p, str):
            lines.append(p)
        else:
            fmt, start, count, stride = p
            lines += [STEP_FORMATS[fmt](max(0, start + i * stride)) for i in range(count)]
    data = "\n".join(lines).encode() + (b"\n" if newline_at_end else b"")
    saved = eventcap.DENSE
    eventcap.DENSE = {"train_step": (2, 3), "train_epoch": (1, 1)}
    try:
        _both(data)
    finally:
        eventcap.DENSE = saved
