"""ST2 straggler (live): one rank far behind the others while they progress (``watch``).

A rank whose lag behind a position the others reached (opCount, SeqNum, step), or how late it
reached its last one, passes eight usual intervals (at least 5 s; more when it is in a phase the
job already paused in and recovered from). Only a minority of the ranks reporting that signal can
be stragglers. Silent in a batch analysis: lines have no arrival time.
"""

from __future__ import annotations

from ..events import MAX_TEXT
from ..evidence import stall as live_stall
from ..evidence.stragglers import stragglers
from ..findings import Evidence, Finding
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list[Finding]:
    out = []
    usual = job.live.tracker.usual if job.live is not None else None
    for s in stragglers(job):
        word = live_stall.SIGNAL_WORDS[s.signal[0]]
        ahead = live_stall.names(s.others)
        at, top = live_stall.fmt_position(s.signal, s.position), live_stall.fmt_position(s.signal, s.frontier)
        if s.position < s.frontier:
            what = (f"{s.proc.label} is at {word} {at}: {ahead} went past it {s.lag:.0f} s ago "
                    f"(the furthest is at {word} {top})")
        else:
            what = f"{s.proc.label} reached {word} {at} {s.lag:.0f} s after the first rank did"
        summary = f"{what} (usual interval {usual:.1f} s, flagged beyond {s.threshold:.0f} s)"
        if s.proc.phase is not None:
            summary += f"; its last line: {s.proc.phase[1].text[:160]!r}"
        evidence = [Evidence(m.file, m.line, rank, m.text[:MAX_TEXT]) for m, rank in s.evidence]
        out.append(rule.finding(summary, confidence="high" if s.proc.rank is not None else "medium",
                                ranks=[s.proc.rank], hosts=[s.proc.host], evidence=evidence))
    return out


def resolved(job: JobModel, finding: Finding) -> str:
    """Why the straggler alert went away: where that rank is now."""
    if job.live is None:
        return ""
    for p in live_stall.processes(job):
        if (finding.ranks and p.rank in finding.ranks) or (not finding.ranks and finding.summary.startswith(p.label)):
            if p.progress is not None:
                return f"{p.label} keeps up again: {p.progress.file}:{p.progress.line} {p.progress.text[:200]}"
    return ""
