"""Of several ranks that arrived after the others gave up waiting, the one still at work when they began to wait.

Ranks whose only error is a peer that closed the connection, while the others timed out, reached the collective
late. When they are all the ranks of one node, that node may have stalled whole (frozen, cut off): then every
one of them stopped writing before the waiters did. A node whose ranks run at different speeds (one slowed by
its own data path) shows something else: its fast ranks stopped writing when they entered the collective, as
the waiters did, while one rank went on writing its own records (dated, labelled with its pid) after
every waiter's last one: it was the one they waited for. Only with dated records of every rank involved.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..events import LastLine
from ..model import JobModel, RankState
from .endings import Ending

#: Later than every waiter's last record by less than this is no sign of work (clocks, buffered writes).
MIN_AFTER = 1.0


@dataclass(slots=True)
class StillWriting:
    rank: int
    last: LastLine  # its last dated record
    after: float  # seconds after the last record of any rank that timed out


def _last_dated(job: JobModel, st: RankState | None) -> LastLine | None:
    """The last dated record of the rank's process: its pid label's last line (writers.py), or its own
    last dated event."""
    if st is None:
        return None
    dated = [ll for f in st.files if st.pid is not None
             and (ll := job.last_lines.get(f, {}).get(("writer", st.pid))) is not None and ll.ts is not None]
    dated += [LastLine(e.file, e.line, e.text, e.ts) for e in st.events[-50:] if e.ts is not None]
    return max(dated, key=lambda ll: ll.ts) if dated else None


def still_writing(job: JobModel, late: list[Ending], timed: list[Ending]) -> StillWriting | None:
    """The one late rank whose last dated record came after every waiter's (and no other late rank's did)."""
    if len(late) < 2 or not timed:
        return None
    waiters = [_last_dated(job, e.state) for e in timed]
    mine = [(e, _last_dated(job, e.state)) for e in late]
    if any(ll is None for ll in waiters) or any(ll is None for _e, ll in mine):
        return None
    waited_from = max(ll.ts for ll in waiters if ll is not None)
    working = [(e, ll) for e, ll in mine if ll is not None and ll.ts - waited_from >= MIN_AFTER]
    if len(working) != 1:
        return None
    e, ll = working[0]
    return StillWriting(e.rank, ll, ll.ts - waited_from) if ll is not None else None


__all__ = ["MIN_AFTER", "StillWriting", "still_writing"]
