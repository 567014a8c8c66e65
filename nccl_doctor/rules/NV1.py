"""NV1: NCCL, CUDA or torch versions differ across ranks, or the driver is older than the runtime.

Evidence: ``NCCL version X+cudaY`` per process (INFO line or bare stdout line, also the
``NCCL version`` suffix of torch's ``NCCL error in:`` message), torch version lines, NCCL's own
``Mismatched NCCL version detected`` and ``CUDA driver version is insufficient for CUDA runtime
version``. Mixed images make NCCL's wire protocol or kernels disagree: hangs at init, ``invalid
argument`` or ``internal error`` from nvls/p2p setup. A warning: the mismatch is a trap, the error
it causes is reported by its own rule.
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..evidence.facts import first_ts
from ..evidence.nccl_facts import driver_too_old, place, ranks_hosts
from ..model import JobModel
from .base import Rule

_WHAT = {"nccl": "NCCL", "nccl_cuda": "CUDA runtime (NCCL build)", "torch": "torch"}
_SOURCE_KINDS = {"nccl": ("nccl_version", "torch_nccl_error"), "nccl_cuda": ("nccl_version",),
                 "torch": ("torch_version",)}


def check(job: JobModel, rule: Rule) -> list:
    parts, evidence, odd = [], [], []
    for what, label in _WHAT.items():
        where = _where(job, what)
        if len(where) > 1:
            desc = "; ".join(f"{v} on {place(job, evs)}" for v, evs in sorted(where.items()))
            parts.append(f"{label} differs: {desc}")
            evidence += [evs[0] for evs in where.values()][:3]
            # The odd ones out: the version fewer processes run (all of them on a tie).
            least = min(len(evs) for evs in where.values())
            if sum(len(evs) == least for evs in where.values()) == 1:
                odd += next(evs for evs in where.values() if len(evs) == least)
    mism = job.by_kind("nccl_version_mismatch")
    if mism:
        parts.insert(0, "NCCL reported 'Mismatched NCCL version detected'")
        evidence = mism[:2] + evidence
    old = driver_too_old(job)
    if old:
        parts.append("the CUDA driver is older than the CUDA runtime ('driver version is insufficient')")
        evidence += old[:2]
        odd += old
    if not parts:
        return []
    ranks, hosts = _ranks_and_hosts(job, odd or evidence)
    if odd:
        parts.append(f"odd one(s) out: {place(job, odd)}" + (f" on {', '.join(hosts[:4])}" if hosts else ""))
    return [rule.finding("; ".join(parts) + ": run every rank from the same image/environment",
                         ranks=ranks, hosts=hosts, evidence=evidence, first_seen=first_ts(evidence))]


def _ranks_and_hosts(job: JobModel, events: list[Event]) -> tuple[list[int], list[str]]:
    """Ranks and hosts of the events; a bare version line has no host, its rank's process may."""
    ranks, hosts = ranks_hosts(job, events)
    known = job.known_ranks()
    hosts = sorted(set(hosts) | {known[r].host for r in ranks if r in known and known[r].host})
    return ranks, hosts


def _where(job: JobModel, what: str) -> dict[str, list[Event]]:
    """Version -> the first event of each process that reported it."""
    out: dict[str, list[Event]] = defaultdict(list)
    for r in job.ranks:
        v = r.versions.get(what)
        if not v:
            continue
        src = next((e for e in r.events if e.kind in _SOURCE_KINDS[what]
                    and str(e.get("cuda" if what == "nccl_cuda" else "version") or "") == v), None)
        if src is not None:
            out[v].append(src)
    return out

