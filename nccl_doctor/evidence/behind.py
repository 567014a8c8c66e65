"""The one rank that stopped a line short of the others: its last line is the one every other rank
printed just before its own last.

A phase of the job's own ("refreshing data shard shard-00003 for step 10", then "shard shard-00003
ready") that every rank entered and all but one left is where that rank hung, whatever words the job
uses: the others went on to their next collective and waited there for it. No pattern knows such
lines; their shapes (digits masked) are compared. A hint (RK3 at medium confidence), only with three
ranks or more, when every other rank's last line has one shape and the line before it has the odd
rank's last shape, and when the odd rank wrote no error of its own.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..events import Event, LastLine
from ..model import JobModel, RankState
from .facts import _per_job

_DIGITS = re.compile(r"\d+")


@dataclass(slots=True)
class LineBehind:
    rank: int
    last: str  # its last line
    others: str  # the line every other rank wrote after it
    events: list[Event]


def line_shape(text: str) -> str:
    """A line with every number masked: the same statement whatever its counters."""
    return _DIGITS.sub("#", text.strip())


def _before(job: JobModel, st: RankState) -> str | None:
    """The line its writer wrote before its last one (the key its last line is filed under)."""
    ll = st.last_line
    if ll is None:
        return None
    per = job.last_lines.get(ll.file) or {}
    before = job.last_before.get(ll.file) or {}
    keys = [k for k, v in per.items() if v is ll and k in before]
    if not keys:
        return None
    own = ("rank", st.rank)
    if own in keys:
        return before[own]
    if None in keys and len(per) == 1:  # a file of one writer: its last line is filed under None only
        return before[None]
    return before[keys[0]]


def _event(ll: LastLine, rank: int | None) -> Event:
    return Event("last_line", ll.file, ll.line, rank=rank, ts=ll.ts, text=ll.text)


def lone_last_line(lasts: dict[int, LastLine]) -> int | None:
    """The one rank (of three or more) whose last line has another shape (digits masked) than the
    last line every other rank ended on."""
    if len(lasts) < 3:
        return None
    shapes = {rank: line_shape(ll.text) for rank, ll in lasts.items()}
    (common, n), *rest = Counter(shapes.values()).most_common()
    if n != len(lasts) - 1 or not rest:
        return None
    return next(rank for rank, sh in shapes.items() if sh != common)


@_per_job
def line_behind(job: JobModel) -> LineBehind | None:
    odd = stopped_short(job)
    if odd is None or any(st.errors or st.timeouts for st in job.ranks if st.rank == odd.rank):
        return None  # it said what befell it
    return odd


@_per_job
def stopped_short(job: JobModel) -> LineBehind | None:
    """The one rank whose last line is the one every other rank wrote just before its own last, whatever
    else it said (an error of its own does not move where it stopped)."""
    ranks = [st for st in job.ranks if st.rank is not None and st.last_line is not None]
    if len({st.rank for st in ranks}) != len(ranks):
        return None
    lone = lone_last_line({st.rank: st.last_line for st in ranks})
    if lone is None:
        return None
    odd = next(st for st in ranks if st.rank == lone)
    others = [st for st in ranks if st is not odd]
    befores = [_before(job, st) for st in others]
    if any(b is None or line_shape(b) != line_shape(odd.last_line.text) for b in befores):
        return None
    lead = others[0].last_line
    return LineBehind(odd.rank, odd.last_line.text, lead.text, [_event(odd.last_line, odd.rank), _event(lead, others[0].rank)])
