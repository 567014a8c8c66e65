"""Ranks that a saved report names outright, gathered for the suspects (RK2 silent, RK3 lagging).

CATALOGUE.md: a saved ``ncclras`` report and the Flight Recorder analyzer's output name ranks in
plain words; they outrank the launcher's "Root Cause". Each source reads its own lines (``ras``,
``frtrace``); here they become one list per suspicion, with the same fields as
``suspects.Suspect``. (torch's own statements are read in ``statements``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel, RankState
from . import frtrace, ras
from .facts import _per_job


@dataclass(slots=True, eq=False)
class NamedRank:
    rank: int | None
    state: RankState | None
    reason: str
    confidence: str
    events: list[Event] = field(default_factory=list)
    host: str | None = None
    pg: str = "default"
    source: str = ""  # the report that names it: "ncclras" | "torchfrtrace"


def _known(job: JobModel, rank: int | None) -> RankState | None:
    return job.known_ranks().get(rank) if rank is not None else None


@_per_job
def named_silent(job: JobModel) -> list[NamedRank]:
    """Ranks a report says are missing, dead, unresponsive or never arrived."""
    out = [NamedRank(n.rank, n.state, n.reason, "high", n.events, n.host, source="ncclras") for n in ras.missing(job)]
    for m in frtrace.missing(job):
        out += [NamedRank(r, _known(job, r), m.reason, m.confidence, m.events, source="torchfrtrace") for r in m.ranks]
    for n in out:
        if n.host is None and n.state is not None:
            n.host = n.state.host
    return out


@_per_job
def named_lagging(job: JobModel) -> list[NamedRank]:
    """Ranks a report says are behind the others (RAS operation counts)."""
    return [NamedRank(b.rank, b.state, b.reason, "high" if b.confident else "medium", b.events,
                      b.host or (b.state.host if b.state is not None else None), source="ncclras")
            for b in ras.behind(job)]
