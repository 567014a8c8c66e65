"""Dense kinds are capped per stream (nccl_doctor.eventcap) and the reports stay those of the
uncapped events; what the cap keeps is what the rules read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nccl_doctor.eventcap as eventcap
from nccl_doctor import analyze
from nccl_doctor.eventcap import EventCap
from nccl_doctor.events import Event


def _step(line: int, step: int, ts: float | None = None, rank: int = 0) -> Event:
    return Event("train_step", "f.log", line, rank=rank, ts=ts, fields={"step": step})


def _other(line: int, kind: str = "python_exception") -> Event:
    return Event(kind, "f.log", line, rank=0, fields={})


def _capped(events: list[Event]) -> tuple[list[Event], EventCap]:
    kept: list[Event] = []
    cap = EventCap(kept)
    for ev in events:
        cap.add(ev)
    cap.done()
    return kept, cap


def test_short_streams_are_untouched():
    events = [_step(i, i) for i in range(1, sum(eventcap.DENSE["train_step"]) + 1)] + [_other(100)]
    kept, _ = _capped(events)
    assert kept == events


def test_long_stream_keeps_first_last_and_both_sides_of_other_events():
    first, last = eventcap.DENSE["train_step"]
    events = [_step(i, i) for i in range(1, 501)] + [_other(501)] + [_step(i, i) for i in range(502, 1001)]
    kept, _ = _capped(events)
    lines = [e.line for e in kept]
    assert lines == sorted(lines), "kept events stay in line order"
    assert lines[:first] == list(range(1, first + 1))
    assert 500 in lines and 501 in lines and 502 in lines  # last step before the error, the error, first after
    assert lines[-last:] == list(range(1001 - last, 1001))
    assert len(kept) == first + 1 + 1 + 1 + last


def test_streams_are_per_writer():
    """Interleaved writers: each rank keeps its own first and last steps."""
    events = [_step(2 * i + r, i, rank=r) for i in range(200) for r in (0, 1)]
    kept, _ = _capped(events)
    for r in (0, 1):
        steps = [e.fields["step"] for e in kept if e.rank == r]
        first, last = eventcap.DENSE["train_step"]
        assert steps[:first] == list(range(first)) and steps[-last:] == list(range(200 - last, 200))


def test_every_step_time_is_counted_and_the_latest_lines_kept():
    events = [_step(i, i, ts=1000.0 + i // 10) for i in range(1, 301)]  # ten lines per second
    kept, cap = _capped(events)
    assert list(cap.step_ts) == [e.ts for e in events]
    latest = [e.line for e in events if e.ts == events[-1].ts]
    assert latest[0] in [e.line for e in kept] and latest[-1] in [e.line for e in kept]


def test_years_count_every_dated_event():
    events = [_step(i, i, ts=1_700_000_000.0 + i) for i in range(1, 301)]  # 2023
    _, cap = _capped(events)
    assert cap.years == {2023: 300}


@pytest.fixture(scope="module")
def dense_jobs(tmp_path_factory):
    """Jobs whose ranks print about 100 step lines each: over the cap per stream."""
    from generator import generate_job

    out = tmp_path_factory.mktemp("dense")
    for scenario in ("MN3", "MN5", "RK3", "healthy", "TO1"):
        generate_job(out / f"{scenario}-all", scenario, 16, steps=150, step_lines="all", info_lines=False, seed=8)
        generate_job(out / f"{scenario}-rank0", scenario, 16, steps=150, seed=9)  # Megatron lines, timed
    return out


def test_capped_reports_equal_uncapped_reports(dense_jobs, monkeypatch):
    jobs = sorted(p for p in dense_jobs.iterdir() if p.is_dir())
    capped = [analyze([str(p)], jobs=1).to_dict() for p in jobs]
    monkeypatch.setattr(eventcap, "DENSE", {k: (10**9, 10**9) for k in eventcap.DENSE})
    uncapped = [analyze([str(p)], jobs=1).to_dict() for p in jobs]
    for p, a, b in zip(jobs, capped, uncapped, strict=True):
        assert a == b, p.name
    assert any(f["rule"] == "MN5" for r in capped for f in r["findings"]), "a restart case is among them"


def test_both_sides_of_a_counter_going_down_are_kept():
    """The peak before a restart (MN5 compares it with the first step after) and the value it fell to."""
    events = [_step(i, i) for i in range(1, 201)] + [_step(201, 150)] + [_step(i, i - 200) for i in range(202, 400)]
    kept, _ = _capped(events)
    lines = [e.line for e in kept]
    assert 200 in lines and 201 in lines


def _reference(events: list[Event]) -> list[Event]:
    """What the cap keeps, written the slow way from its description (module docstring)."""
    streams: dict[tuple, list[int]] = {}
    for i, e in enumerate(events):
        f = e.fields
        streams.setdefault((e.kind, e.host, e.pid, e.rank, e.local_rank, f.get("launcher_pid"),
                            f.get("launcher_ip")), []).append(i)
    keep: set[int] = set()
    other = [i for i, e in enumerate(events) if e.kind not in eventcap.DENSE]
    for (kind, *_), idx in streams.items():
        first, last = eventcap.DENSE.get(kind, eventcap.OTHER)
        keep |= set(idx[:first]) | set(idx[-last:])
        timed = [i for i in idx if events[i].ts is not None]
        if timed:
            top = max(events[i].ts for i in timed)
            at_top = [i for i in timed if events[i].ts == top]
            keep |= {at_top[0], at_top[-1]}
        if kind not in eventcap.DENSE:
            continue
        value = None
        for n, (a, b) in enumerate(zip([-1] + idx, idx + [len(events)], strict=True)):
            between = any(a < o < b for o in other)
            if between and n < len(idx):
                keep.add(b)  # first after another event
            if between and a >= 0:
                keep.add(a)  # last before it
            if n < len(idx):
                v = events[b].fields.get(eventcap._COUNTER[kind])
                if isinstance(v, int):
                    if value is not None and v < value and n >= first:
                        keep |= {a, b}
                    value = v
    return [events[i] for i in sorted(keep)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["train_step", "train_step", "train_step", "python_exception"]),
                          st.integers(0, 1), st.integers(0, 6), st.sampled_from([None, 1.0, 2.0, 3.0])),
                max_size=80))
def test_cap_keeps_what_its_description_says(spec):
    events = [Event(kind, "f.log", i + 1, rank=rank, ts=ts, fields={"step": step})
              for i, (kind, rank, step, ts) in enumerate(spec)]
    saved = eventcap.DENSE, eventcap.OTHER, eventcap.COMPACT_AT
    eventcap.DENSE, eventcap.OTHER, eventcap.COMPACT_AT = {"train_step": (2, 2)}, (3, 3), 1
    try:
        kept, _ = _capped(events)
        assert kept == _reference(events)
    finally:
        eventcap.DENSE, eventcap.OTHER, eventcap.COMPACT_AT = saved
