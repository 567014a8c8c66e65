"""RK1 rank failed first: the earliest real crash, before the others timed out or were killed.

Causes are a rank's own errors (Python exception, CUDA error/OOM, segfault/signal, a non-zero exit
in torchrun's failure table or srun's task list); echoes of someone else's failure (watchdog or
gloo timeouts, peers closing sockets, ``ncclRemoteError``, SIGTERM/-15 from the launcher) are not,
nor is the exit code 1 torchrun reports for a rank whose only exception was such an echo (the
killed rank's -9 is kept).
torchrun's "Root Cause (first observed failure)" is only the first process to *exit*, so it is
evidence, not the verdict. Ranks that failed with the same error at the same time (every rank of a
node hitting one broken GPU fabric or a full /dev/shm) are named together. A failure after which
the same process kept training is only info.
"""

from __future__ import annotations

from ..evidence import facts, stacks
from ..evidence.facts import plural
from ..evidence.nccl_facts import node_wide_errors
from ..findings import Finding, Severity
from ..model import JobModel
from .base import Rule

#: Failures this close in time (or untimed) with the same message are one event seen by several ranks.
SAME_TIME_S = 60.0


def check(job: JobModel, rule: Rule) -> list[Finding]:
    # A node-wide condition (fabric, /dev/shm, driver) of a process whose rank no line gives is its
    # class rule's story, told with the host: "a rank failed first" would name no rank.
    node_wide = {id(e) for e in node_wide_errors(job)}
    crashes = [f for f in facts.failures(job)
               if f.crash and not (f.rank is None and any(id(e) in node_wide for e in f.events))]
    live = [f for f in crashes if not f.recovered]
    if not live:
        return [_recovered(rule, f) for f in crashes[:1]]
    first = live[0]
    group = [f for f in live if f is first or _same_failure(first, f)]
    others = [f for f in live if f not in group]
    ranks = [f.rank for f in group]
    hosts = [f.host for f in group]
    if len(group) > 1 and any(r is not None for r in ranks):
        where = sorted({h for h in hosts if h})
        who = f"{facts.count_ranks(ranks, len(group))}" + (f" on {', '.join(where)}" if 0 < len(where) <= 3 else "")
        parts = [f"{who} failed first with the same error: {facts.brief(first.what).rstrip('.')}"]
    else:
        parts = [f"{first.who} {first.doing or 'failed first'}: {facts.brief(first.what).rstrip('.')}"]
    died_at = stacks.dump_after(job, first.events[0]) if first.category == "signal" and first.events else None
    if died_at is not None:  # faulthandler's dump of the thread the signal hit, right below it
        parts[0] += f", {stacks.where(died_at, others_too=False)}"
    # Exit reports that name ranks (srun task lists, torchrun's table) after an error without a rank.
    named = [f for f in others if f.exit_only and f.rank is not None]
    if first.rank is None and named:
        ranks += [f.rank for f in named]
        hosts += [f.host for f in named]
        by_host: dict[str, list[int]] = {}
        for f in named:
            by_host.setdefault(f.host or "?", []).append(f.rank)
        parts.append("then " + " and ".join(f"{facts.name_ranks(rs)} on {h}" for h, rs in by_host.items())
                     + " exited with an error")
    elif others:
        known = [f.rank for f in others if f.rank is not None]
        parts.append(f"{plural(len(others), 'other process')} failed after it"
                     + (f" ({facts.name_ranks(known)})" if known else ""))
    timed = sum(1 for pt in facts.timeouts_by_pg(job).values() for r in pt.reports
                if r.rank is None or r.rank != first.rank)  # (its own timeout may be what failed)
    if timed:
        parts.append(f"the {plural(timed, 'timeout')} that followed "
                     + ("is a consequence" if timed == 1 else "are consequences"))
    lead = [e for f in group[:3] for e in f.events[:2]] + first.events[2:4] + \
        ([stacks.main_thread(died_at)] if died_at is not None else [])
    evidence = list({id(e): e for e in lead + [e for f in others for e in f.events[:1]]}.values())
    return [rule.finding("; ".join(parts), confidence=_confidence(first, others), ranks=ranks, hosts=hosts,
                         evidence=evidence, first_seen=first.ts)]


def _same_failure(a: facts.Failure, b: facts.Failure) -> bool:
    """Same message (numbers and pointers aside), same kind, no time between them that orders them."""
    if a.category != b.category or a.exit_only or b.exit_only:
        return False
    if facts.VARYING.sub("N", a.what) != facts.VARYING.sub("N", b.what):
        return False
    return a.ts is None or b.ts is None or abs(a.ts - b.ts) <= SAME_TIME_S


def _confidence(first: facts.Failure, others: list[facts.Failure]) -> str:
    """High when one rank's own error stands out; lower when only exit codes speak, or when several
    ranks failed differently with nothing to order them by."""
    if first.exit_only:
        return "medium"
    if others and first.ts is None and any(not f.exit_only and f.ts is None for f in others) \
            and len({e.file for f in [first, *others] for e in f.events}) > 1:
        return "medium"
    return "high"


def _recovered(rule: Rule, f: facts.Failure) -> Finding:
    return rule.finding(f"{f.who} failed ({facts.brief(f.what)}) but training went on afterwards", severity=Severity.INFO,
                        confidence="medium", ranks=[f.rank], hosts=[f.host], evidence=f.events[:3],
                        first_seen=f.ts)
