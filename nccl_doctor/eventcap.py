"""Bounded events per file: dense repeated kinds are counted and capped, never one object each.

A training job can print a step line per iteration on every rank (hundreds per rank, millions per
job), and a hostile or merely chatty log can repeat any recognised line millions of times. Each
event costs a few hundred bytes and a little work in every later layer, so a file keeps, per
*stream* (one event kind of one writer: host, pid, rank, local rank, launcher address):

* the first ``first`` events and the last ``last`` ones;
* for the dense kinds (DENSE), also what the rules read around the job's other events: the
  first event of the stream after any other event of the file and the last one before it (a
  failure, a restart marker, a banner), which is where progress is compared with what happened;
  and both sides of every place where the counter goes down (the peak before a restart, the
  lowest value after it);
* the first and the last event with the latest time, so that "the latest line" stays the same.

Memory stays bounded whatever the file: a dense stream pins at most PIN_MAX events for the other
events around it (a log whose every other line is another kind would pin a share of all).

Counting stays exact (``FileScan.parsed`` counts lines, not events), and the times of every
``train_step`` line are kept as numbers (``FileScan.step_ts``): the interval between steps is a
median over all of them. Kept events stay in line order. Streams at or under ``first + last``
events are untouched.

Why 8 and 8: the rules read a stream's first steps (the rhythm it started with) and its last ones
(where it stopped), and the pinned ones; the first and last 32 kept at first gave the same report
on every fixture, real run, real excerpt and generated corpus as 8 and 8 do (and as no cap does,
``tests/test_eventcap.py``), while a job whose every rank prints its steps carried 48 events per
rank more through every layer: on the 8k-rank step corpus, half of its events.
"""

from __future__ import annotations

import time
from array import array
from collections import deque

from .events import Event
from .timeparse import hms_of

#: kind -> (first, last) kept per stream. Step and epoch lines: the progress counters.
DENSE: dict[str, tuple[int, int]] = {"train_step": (8, 8), "train_epoch": (8, 8)}
_COUNTER = {"train_step": "step", "train_epoch": "epoch"}
#: Holes (dropped events) left in the list before it is compacted, when they are half of it.
COMPACT_AT = 4096
#: Events a dense stream keeps for the other events around it and for its counter going down. A
#: stream whose steps alternate with other lines (a log where every line is recognised) would
#: otherwise keep a share of everything; past this, only its first, last and latest ones.
PIN_MAX = 4096
#: Every other kind: a safety cap far above what a real log holds per writer (memory bound).
OTHER = (4096, 4096)


class _Stream:
    __slots__ = ("epoch", "first_rec", "kth", "n", "pinned", "prev", "record", "record_ts", "value", "window")

    def __init__(self, last: int):
        self.n = 0
        self.kth = -1  # index of its ``first``-th event: every index up to it is kept
        self.prev = -1  # index of its latest event
        self.epoch = -1  # the file's boundary count at its latest event
        self.window: deque[int] = deque(maxlen=last + 1)  # indices of its latest events past the first
        self.pinned: set[int] = set()  # indices kept whatever comes later
        self.record = -1  # index of its latest-timed event (the last one at that time)
        self.first_rec = -1  # ... and of the first one at that time
        self.record_ts = 0.0
        self.value: int | None = None  # the counter of its latest event (dense kinds)

    def holds(self, idx: int) -> bool:
        return (idx <= self.kth or idx in self.pinned or idx == self.record or idx == self.first_rec
                or idx in self.window)


class EventCap:
    """Receives a file's events in line order; ``done()`` leaves the kept ones in ``events``."""

    def __init__(self, events: list[Event]):
        self.events = events
        self.streams: dict[tuple, _Stream] = {}
        self.boundaries = 0  # events of the file that are not of a dense kind, so far
        self.dirty: set[_Stream] = set()  # dense streams whose latest event may need pinning
        self.holes = 0
        self.step_ts = array("d")  # 8 bytes per step line, whatever the count
        self.step_mmdd: list[tuple[int, str, str]] = []  # (index in step_ts, MMDD, hh:mm:ss): no year
        self.years: dict[int, int] = {}  # year -> events dated with one (see scanner.fix_years)

    def add(self, ev: Event) -> None:
        kind = ev.kind
        f = ev.fields
        ts = ev.ts
        if ts is not None:
            if "mmdd" not in f:
                y = time.gmtime(ts).tm_year
                self.years[y] = self.years.get(y, 0) + 1
            if kind == "train_step":
                if "mmdd" in f and "hms" in f:
                    self.step_mmdd.append((len(self.step_ts), str(f["mmdd"]), hms_of(f)))
                self.step_ts.append(ts)
        dense = DENSE.get(kind)
        if dense is None:
            self.boundaries += 1
            if self.dirty:  # the last event of each dense stream before this one is kept
                for d in self.dirty:
                    if d.prev > d.kth and len(d.pinned) < PIN_MAX:
                        d.pinned.add(d.prev)
                self.dirty.clear()
        key = _stream_key(ev)
        st = self.streams.get(key)
        if st is None:
            st = self.streams[key] = _Stream((dense or OTHER)[1])
        events = self.events
        idx = len(events)
        events.append(ev)
        n = st.n = st.n + 1
        prev, st.prev = st.prev, idx
        if dense is not None:
            self.dirty.add(st)
            after_boundary = st.epoch < self.boundaries
            st.epoch = self.boundaries
            value = f.get(_COUNTER[kind])
            if isinstance(value, int):
                if st.value is not None and value < st.value and n > dense[0] and len(st.pinned) < PIN_MAX:
                    if prev > st.kth:
                        st.pinned.add(prev)  # the peak before the counter went down
                    st.pinned.add(idx)  # and where it went down to
                st.value = value
        if ts is not None and (st.record < 0 or ts >= st.record_ts):
            old, old_first = st.record, st.first_rec
            if st.record < 0 or ts > st.record_ts:
                st.first_rec = idx
            st.record, st.record_ts = idx, ts
            if n > (dense or OTHER)[0]:
                for i in {old, old_first}:
                    if i > st.kth and not st.holds(i):
                        self._drop(i)
        first, last = dense or OTHER
        if n <= first:
            st.kth = idx
            return
        if dense is not None and after_boundary and len(st.pinned) < PIN_MAX:
            st.pinned.add(idx)  # the first of its stream after another event of the file
        window = st.window
        window.append(idx)
        if len(window) > last:
            out = window.popleft()
            if not st.holds(out):
                self._drop(out)
        if self.holes > COMPACT_AT and self.holes * 2 > len(events):
            self._compact()

    def run_keeps(self, ev: Event, count: int, values: list[int] | None) -> list[bool] | None:
        """Which of ``count`` more events of the stream of ``ev`` (the latest event added, of a dense
        kind), coming right after it with no other event between, no time, and counters ``values``
        (None: the counter stays as it is), this cap could keep: the stream's first ones, both
        sides of the counter going down, and the last ``last`` ones (what follows may pin or pop
        those). The others it would drop as they left its window: the caller may hand them to
        ``pass_over`` instead of ``add``. None when ``ev`` is not such an event."""
        dense = DENSE.get(ev.kind)
        st = self.streams.get(_stream_key(ev))
        if dense is None or st is None or st.prev != len(self.events) - 1 or ev.ts is not None or dense[1] < 1:
            return None
        first, last = dense
        head = max(0, first - st.n)  # (indices below: still among the stream's first ones)
        tail = count - last
        if values is None:
            return [i < head or i >= tail for i in range(count)]
        keeps = []
        prev = st.value
        for i, v in enumerate(values):
            keeps.append(i < head or i >= tail or (prev is not None and v < prev) or values[i + 1] < v)
            prev = v
        return keeps

    def pass_over(self, ev: Event, count: int, value: int | None) -> None:
        """``count`` events of the stream of ``ev`` that ``run_keeps`` said this cap would drop,
        counted as ``add`` counts them; ``value``: the counter of the last of them (None: unchanged)."""
        st = self.streams[_stream_key(ev)]
        st.n += count
        if value is not None:
            st.value = value

    def _drop(self, idx: int) -> None:
        if self.events[idx] is not None:
            self.events[idx] = None  # type: ignore[call-overload]
            self.holes += 1

    def _compact(self) -> None:
        """Remove the holes, renumbering what the streams hold (amortised: half the list is holes)."""
        new_index: dict[int, int] = {}
        kept: list[Event] = []
        for i, ev in enumerate(self.events):
            if ev is not None:
                new_index[i] = len(kept)
                kept.append(ev)
        self.events[:] = kept
        self.holes = 0
        for st in self.streams.values():
            st.window = deque((new_index[i] for i in st.window if i in new_index), maxlen=st.window.maxlen)
            st.pinned = {new_index[i] for i in st.pinned if i in new_index}
            st.record = new_index.get(st.record, -1)
            st.first_rec = new_index.get(st.first_rec, -1)
            st.prev = new_index.get(st.prev, -1)
            st.kth = new_index.get(st.kth, -1)

    def done(self) -> None:
        if self.holes:
            self.events[:] = [ev for ev in self.events if ev is not None]
            self.holes = 0
        self.streams.clear()
        self.dirty.clear()


def _stream_key(ev: Event) -> tuple:
    f = ev.fields
    return ev.kind, ev.host, ev.pid, ev.rank, ev.local_rank, f.get("launcher_pid"), f.get("launcher_ip")
