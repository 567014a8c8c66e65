"""RK3 lagging rank (silent straggler): the rank the others were waiting for.

When ranks time out in SeqNum S of a process group, the member whose last enqueued work is below
S never reached that collective. Also named: ranks a desync report (``TORCH_NCCL_DESYNC_DEBUG``)
points at, from heartbeat-monitor kills the rank whose watchdog held fewer works
(``workMetaList_.size()``) than the others', and from flight-recorder dumps the rank whose last
collective is below one the other ranks' dumps entered (the collective it never entered). SeqNums
are only compared within one process group.
"""

from __future__ import annotations

from ..evidence import facts
from ..evidence.facts import fmt_ranks
from ..evidence.restarts import got_over
from ..findings import Finding
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list[Finding]:
    suspects = facts.lagging_ranks(job)
    if not suspects:
        return []
    chosen = facts.strongest(suspects)
    summary = facts.suspects_summary(chosen, (chosen[0].what or "lagged behind") if len(chosen) == 1 else "lagged behind")
    hint = [s for s in suspects if s not in chosen]
    if hint:
        summary += f"; weaker hints also point at ranks {fmt_ranks(s.rank for s in hint)}"
    summary += got_over(job)
    evidence = [e for s in chosen for e in s.events][:6] + _waiting_evidence(job, chosen)
    return [rule.finding(summary, confidence=chosen[0].confidence, ranks=[s.rank for s in chosen],
                         hosts=[s.host for s in chosen], evidence=evidence, first_seen=facts.first_ts(evidence))]


def _waiting_evidence(job: JobModel, chosen: list[facts.Suspect]) -> list:
    """A line of a rank that waited in the same group: what the laggard was compared with."""
    groups = facts.timeouts_by_pg(job)
    out = []
    for pg in sorted({s.pg for s in chosen}):
        pt = groups.get(pg)
        if pt is not None:
            out.extend(e for e in pt.lead_events()[:2] if all(e not in s.events for s in chosen))
    return out[:2]
