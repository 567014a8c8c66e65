"""TO2 start-up timeout too short: slow start-up work behind a barrier outlasted the timeout.

Evidence: a watchdog timeout in one of the first collectives of a group (SeqNum 1-3: typically the
BARRIER/BROADCAST/ALLREDUCE that waits for rank 0) while a rank that did *not* time out was still
loading a model, downloading or preprocessing data (``startup_work`` lines at the end of its log,
or timed inside the others' wait). That rank is the one the others waited for. Start-up lines of
ranks that timed out themselves, or after which the log moved on, are not evidence.
"""

from __future__ import annotations

from ..evidence import facts
from ..evidence.facts import fmt_ms, pg_label
from ..findings import Finding, Severity
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list[Finding]:
    busy = facts.still_starting(job)
    if not busy:
        return []
    pg, pt = min(facts.early_timeouts(job).items(), key=lambda kv: kv[1].seq or 0)
    workers = sorted(r for r in busy if r is not None)
    lines = [e for evs in busy.values() for e in evs]
    doing = "; ".join(sorted({str(e.get("detail") or e.get("what") or "start-up work") for e in lines})[:3])
    tmo = max(pt.timeouts_ms) if pt.timeouts_ms else None
    waited = (f"{facts.count_ranks([r.rank for r in pt.reports], len(pt.reports))} timed out after "
              f"{fmt_ms(pt.ran_ms or tmo)} in {facts.early_place(pt)} of {pg_label(pg, pt.desc)}")
    if workers:
        who = facts.name_ranks(workers)
        summary = (f"{waited} while {who} {'were' if len(workers) > 1 else 'was'} still busy with start-up work "
                   f"({doing}): the timeout is too short for start-up")
        severity, confidence = None, "high"
    else:
        # The start-up lines name no rank (an unlabelled shared log): likely, not proven.
        summary = (f"{waited}; the log shows start-up work ({doing}) just before: if one rank was still "
                   "starting, the timeout is too short for start-up")
        severity, confidence = Severity.WARNING, "low"
    evidence = lines[-2:] + pt.lead_events()[:4]
    return [rule.finding(summary, severity=severity, confidence=confidence, ranks=workers,
                         hosts=[facts.host_of(job, e) for e in lines if facts.global_rank(job, e) in workers],
                         evidence=evidence, first_seen=facts.first_ts(evidence))]
