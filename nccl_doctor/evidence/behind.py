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
    return _stopped_short(job, False)


@_per_job
def stopped_short_of_output(job: JobModel) -> LineBehind | None:
    """As stopped_short, and where last lines are tracebacks (each rank's error ends its output) the last dated
    lines are compared: a record or a step line is dated, a traceback's lines and a C++ abort's are not. For
    a rank gloo aborted: how far each rank's own output got, whatever failed after."""
    return _stopped_short(job, True)


def _stopped_short(job: JobModel, dated: bool) -> LineBehind | None:
    ranks = [st for st in job.ranks if st.rank is not None and st.last_line is not None]
    if len({st.rank for st in ranks}) != len(ranks):
        return None
    found = _short_of({st.rank: (st.last_line, _before(job, st)) for st in ranks})
    if found is None and dated and all(_dated_last(job, st) is not None for st in ranks):
        found = _short_of({st.rank: _dated_last(job, st) for st in ranks})
    return found


def _short_of(lasts: dict[int, tuple[LastLine, str | None]]) -> LineBehind | None:
    lone = lone_last_line({rank: ll for rank, (ll, _b) in lasts.items()})
    if lone is None:
        return None
    odd = lasts[lone][0]
    others = [(rank, ll, b) for rank, (ll, b) in lasts.items() if rank != lone]
    if any(b is None or line_shape(b) != line_shape(odd.text) for _r, _ll, b in others):
        return None
    lead_rank, lead, _b = others[0]
    return LineBehind(lone, odd.text, lead.text, [_event(odd, lone), _event(lead, lead_rank)])


def _dated_last(job: JobModel, st: RankState) -> tuple[LastLine, str | None] | None:
    """The rank's last dated line over the files it writes (its labels' last lines in a shared file, the last
    line of a file of its own; an undated one, a traceback's, is passed over), and the line its writer wrote
    before it."""
    best, at = None, ("", False)
    for f in st.files:
        per, before = job.last_lines.get(f) or {}, job.last_before.get(f) or {}
        keys = [k for k in (("rank", st.rank), ("local_rank", st.local_rank)) if k in per]
        for key in keys or ([None] if len(per) == 1 and None in per else []):
            m = _TIME.search(per[key].text, 0, 48)
            # (of one line in two files, a console's copy and the rank's own file: where the line before is kept)
            if m is not None and (m.group(0), key in before) > at:
                best, at = (per[key], before.get(key)), (m.group(0), key in before)
    return best


#: The time of day a dated record starts with ("2026-11-29 02:44:21,604 INFO ...").
_TIME = re.compile(r"\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?")
