"""Stragglers (rule ST2): a minority process whose lag behind a position the others reached (or how
late it reached its last position) passes ``stall.STRAGGLER_FACTOR`` usual intervals, while the job
itself is not judged on it. Built on what ``stall`` derives from the live progress model once per
state (``_judged``: per signal, when each process becomes late enough).
"""

from __future__ import annotations

import bisect

from ..model import JobModel
from .stall import Straggler, _judged, _position_marks


def stragglers(job: JobModel) -> list[Straggler]:
    """Processes far behind the others (see the module docstring); none in batch analysis."""
    live = job.live
    if live is None or live.tracker.usual is None:
        return []
    j = _judged(job)
    now = live.now
    if now < j.deadline:
        return []
    found: dict[tuple, Straggler] = {}
    for signal, having, rows in j.late:
        n = bisect.bisect_right(rows, now, key=lambda r: r[0])  # late enough by now
        if not n or 2 * n > having:
            continue
        for _due, p, value, top, since, lateness, allowed in rows[:n]:
            lag = max(now - since if since is not None else 0.0, lateness)
            ahead = [q for q in j.procs if signal in q.positions and q.positions[signal][0] > value]
            ev = _position_marks([p], signal) + ([(p.phase[1], p.rank)] if p.phase else []) \
                + _position_marks(ahead[:1], signal)
            if p.ident not in found or lag > found[p.ident].lag:
                found[p.ident] = Straggler(p, signal, value, top, lag, allowed, ahead, ev)
    return sorted(found.values(), key=lambda s: -s.lag)
