"""ST1 job stalled (live): no progress for far longer than the job's usual interval (``watch``).

The threshold (the ``--stall-after`` floor, ten usual intervals, twice the longest pause the job
recovered from in the same phase; five floors for a job with no rhythm yet, which hung while
starting or logs no progress) and who is named come from ``evidence.stall``; this rule words
it: since when, the last rank to report and why, or that nothing singles a rank out, and what to
capture now while the processes are alive. Silent in a batch analysis: lines have no arrival time.
"""

from __future__ import annotations

from ..events import MAX_TEXT
from ..evidence import stall as live_stall
from ..evidence.progress import MIN_GAPS
from ..findings import Evidence, Finding
from ..model import JobModel
from .base import Rule

CONFIDENCE = {"error": "high", "phase": "high", "behind": "high", "first_stop": "medium", "none": "medium"}


def check(job: JobModel, rule: Rule) -> list[Finding]:
    st = live_stall.stall(job)
    if st is None:
        return []
    if st.usual is None:  # it never showed a rhythm: it hung while starting, or logs no progress
        head = (f"no progress for {st.quiet:.0f} s (since {job.live.wall(st.since)}) and none since it started: "
                f"no rhythm learned yet (fewer than {MIN_GAPS} intervals between progress lines), "
                f"alert after {st.threshold:.0f} s")
    else:
        head = (f"no progress for {st.quiet:.0f} s (since {job.live.wall(st.since)}; usual interval "
                f"{st.usual:.1f} s, alert after {st.threshold:.0f} s)")
    if st.suspects:
        summary = f"{head}: last to report: {st.reason}"
        if st.why in ("phase", "error"):
            its = "its" if len(st.suspects) == 1 else "the first one's"
            summary += f"; {its} {'last line' if st.why == 'phase' else 'error'}: {st.evidence[0][0].text[:160]!r}"
    else:
        summary = f"{head}: {st.reason}"
    confidence = CONFIDENCE[st.why] if len(st.suspects) <= 1 else "medium"
    evidence = [Evidence(m.file, m.line, rank, m.text[:MAX_TEXT]) for m, rank in st.evidence]
    return [rule.finding(summary, confidence=confidence, ranks=[p.rank for p in st.suspects],
                         hosts=[p.host for p in st.suspects], evidence=evidence,
                         remedy=_capture(st) + "\n" + rule.remedy)]


def _capture(st: live_stall.Stall) -> str:
    """Who to capture first, with the pid when the logs gave it."""
    if not st.suspects:
        return ("Nothing singles a rank out: capture every rank, starting with those whose last line is "
                "the oldest (`py-spy dump --native --pid <pid>` on each host).")
    first = []
    for p in st.suspects[:4]:
        where = f" on {p.host}" if p.host else ""
        pid = f"--pid {p.pid}" if p.pid is not None else "--pid <pid>"
        first.append(f"{p.label}{where} (`py-spy dump --native {pid}`)")
    others = live_stall.names(st.others) if st.others else ""
    then = f"; then {others}, to compare" if others else ""
    return f"First {', '.join(first)}{then}."


def resolved(job: JobModel, finding: Finding) -> str:
    """Why the stall went away: the pause that just ended, when it was as long as a stall."""
    tr = job.live.tracker if job.live is not None else None
    if tr is None or tr.resumed is None:
        return ""
    gap, mark = tr.resumed
    if gap < tr.stall_after or mark.t < job.live.now - 2 * tr.stall_after:
        return ""  # gone for another reason (the job finished, a file was rotated away)
    return f"progress resumed after {gap:.0f} s without progress: {mark.file}:{mark.line} {mark.text[:200]}"
