"""What a rank kept doing at its end: the same handled failure again and again ("read of shard-00010 failed
(OSError: [Errno 5] ...), retry 61/1000 in 0.5s", "Retrying fetch_shard in 1 seconds as it raised URLError",
"step 41: could not build the batch, skipping it" above a logged traceback).

A rank stuck in a retry loop, or in a ``try: ... except: log.exception(...); continue`` that skips the
collective, writes no error of its own (each failure is handled) and its file keeps growing, while the others
time out waiting for it. Its handled failure is what kept it from the collective: the verdict says so rather
than "it wrote no error". Only a repetition counts (one retry that succeeded is no loop), only one that the
rank's training did not move past (no step line of the same file after it), and only one of its own: a
failure every rank's background thread keeps retrying (a metrics shipper with no server) is the job's noise.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, RankState
from .facts import _per_job, brief

#: The same handled failure this many times in one file is a loop, not a hiccup.
MIN_REPEATS = 3
#: Counters, times and sizes differ from one round to the next: the rest is the message's shape.
_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


@dataclass
class Repeated:
    """A handled failure a rank repeated at its end: its last record, how many, and the first of them."""

    last: Event
    count: int
    first: Event

    def said(self) -> str:
        """The clause a verdict quotes: what it kept saying, how often and where it last did."""
        text = brief(str(self.last.get("msg") or self.last.text), 140)
        return f"'{text}' ({self.count} times, the last at {self.last.file}:{self.last.line})"


def _shape(ev: Event) -> str:
    return _NUMBERS.sub("#", str(ev.get("msg") or ev.text))


@_per_job
def _shapes_by_state(job: JobModel) -> dict[int, set[str]]:
    """id(rank state) -> the shapes of the handled failures it logged."""
    return {id(st): {_shape(e) for e in st.events if e.kind == "log_carry_on"} for st in job.ranks}


def repeated_failure(job: JobModel, st: RankState | None) -> Repeated | None:
    """The handled failure ``st`` repeated at its end (see the module doc), or None."""
    if st is None:
        return None
    others = set().union(*(shapes for key, shapes in _shapes_by_state(job).items() if key != id(st)))
    by_shape: dict[tuple[str, str], list[Event]] = defaultdict(list)
    last_step: dict[str, int] = {}
    for ev in st.events:
        if ev.kind == "log_carry_on":
            by_shape[(ev.file, _shape(ev))].append(ev)
        elif ev.kind == "train_step":
            last_step[ev.file] = max(last_step.get(ev.file, 0), ev.line)
    loops = [evs for (file, shape), evs in by_shape.items() if len(evs) >= MIN_REPEATS and shape not in others
             and max(e.line for e in evs) > last_step.get(file, 0)]
    if not loops:
        return None
    evs = max(loops, key=len)
    evs.sort(key=lambda e: e.line)
    return Repeated(evs[-1], len(evs), evs[0])


__all__ = ["MIN_REPEATS", "Repeated", "repeated_failure"]
