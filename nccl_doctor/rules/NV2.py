"""NV2: ``NCCL_*`` environment differs across ranks or hosts.

Evidence: ``NCCL_X set by environment to V`` lines (printed at init under the default
``NCCL_DEBUG_SUBSYS`` since 2.16). A variable with different values on different ranks (e.g.
``NCCL_SOCKET_IFNAME``, ``NCCL_IB_HCA``, ``NCCL_PROTO``, ``NCCL_ALGO``) makes ranks choose
different transports or algorithms: hangs or slow collectives. Also reported: a variable set on
some ranks but absent on others whose environment printout is otherwise the same set of
variables (so its absence is real, not a cut log).
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..evidence.facts import first_ts
from ..evidence.nccl_facts import place, proc_key, ranks_hosts
from ..model import JobModel
from .base import Rule

#: Variables whose value is legitimately per process (file names with %h/%p expanded, ids).
_PER_PROCESS = frozenset({"NCCL_DEBUG_FILE", "NCCL_COMM_ID", "NCCL_HOSTID", "NCCL_LAUNCH_MODE"})


def check(job: JobModel, rule: Rule) -> list:
    env: dict[tuple, dict[str, Event]] = defaultdict(dict)  # process -> var -> first event
    for ev in job.by_kind("nccl_env"):
        var = str(ev.get("var") or "")
        if var.startswith("NCCL_") and var not in _PER_PROCESS:
            env[proc_key(ev)].setdefault(var, ev)
    if len(env) < 2:
        return []
    parts, evidence, confidence = [], [], "high"
    for var in sorted({v for vs in env.values() for v in vs}):
        values: dict[str, list[Event]] = defaultdict(list)
        for vs in env.values():
            if var in vs:
                values[_norm(vs[var].get("val"))].append(vs[var])
        if len(values) > 1:
            desc = "; ".join(f"'{v}' on {place(job, evs)}" for v, evs in sorted(values.items()))
            parts.append(f"{var} differs: {desc}")
            evidence += [evs[0] for evs in values.values()][:2]
            continue
        # Absent on processes whose printout otherwise has the same variables as those that set it.
        setters = [p for p, vs in env.items() if var in vs]
        lacking = [p for p, vs in env.items() if var not in vs and len(vs) >= 2
                   and all(set(vs) - {var} <= set(env[s]) for s in setters)
                   and any(set(env[s]) - {var} <= set(vs) for s in setters)]
        if lacking:
            parts.append(f"{var} is set on {place(job, [env[p][var] for p in setters])} but not on "
                         f"{place(job, [next(iter(env[p].values())) for p in lacking])}")
            evidence += [env[setters[0]][var], next(iter(env[lacking[0]].values()))]
            confidence = "medium"
    if not parts:
        return []
    ranks, hosts = ranks_hosts(job, evidence)
    summary = "; ".join(parts[:4]) + (f"; and {len(parts) - 4} more" if len(parts) > 4 else "")
    return [rule.finding(summary + ": export the same NCCL_* settings on every rank", confidence=confidence,
                         ranks=ranks, hosts=hosts, evidence=evidence[:8], first_seen=first_ts(evidence))]


def _norm(val: object) -> str:
    """The value as NCCL printed it: one token, without the trailing period of 'set to 22.'."""
    words = str(val if val is not None else "").split()
    return words[0].rstrip(".") if words else ""

