"""WD1 watchdog stuck: the heartbeat monitor killed a process whose watchdog thread itself hung.

The watchdog polls CUDA events of enqueued collectives; when one of its CUDA/NCCL calls blocks
(a dead GPU, a driver hang, a thread holding the GIL inside a CUDA call) it stops beating, and
after ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`` (480/600 s) the monitor terminates the process. This is
not a collective timeout: no rank has to be slow for it. Evidence: "Heartbeat monitor timed out!",
"watchdog got stuck for N seconds", "NCCL monitor thread timeout" (2.2). The 2.5+ FATAL "due to
collective timeout or exception" after an ordinary timeout is not a hang and is left out.
"""

from __future__ import annotations

from ..evidence import facts
from ..findings import Finding, Severity
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list[Finding]:
    kills = facts.watchdog_kills(job)
    if not kills:
        return []
    ranks = [k.rank for k in kills]
    secs = max((k.seconds for k in kills if k.seconds), default=None)
    who = facts.count_ranks(ranks, len(kills))
    stuck = f"got stuck for {secs} s" if secs else "stopped beating"
    summary = f"the NCCL watchdog of {who} {stuck} and the heartbeat monitor terminated the process"
    sizes = {k.rank: k.work_meta_size for k in kills if k.work_meta_size is not None}
    if len(set(sizes.values())) > 1:
        summary += "; works in flight (workMetaList_): " + ", ".join(
            f"rank {r}: {n}" for r, n in sorted(sizes.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
    disabled = any("monitor thread is disabled" in e.text for k in kills for e in k.events)
    if disabled:
        summary += " (monitoring is disabled here, so the process was left hanging instead)"
    evidence = [e for k in kills for e in k.events[:2]]
    timeouts = facts.timeouts_by_pg(job)
    if timeouts:
        summary += "; collective timeouts were also reported (see MN3)"
    return [rule.finding(summary, severity=Severity.WARNING if disabled else None,
                         confidence="high", ranks=ranks, hosts=[k.state.host for k in kills if k.state],
                         evidence=evidence, first_seen=facts.first_ts(evidence))]
