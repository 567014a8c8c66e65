"""CFG1: two ranks bound to one GPU.

Evidence: ``Duplicate GPU detected : rank A and rank B both on CUDA device X`` (X is the PCI bus
id, e.g. ``1000`` = 0000:01:00.0, not a device index), followed by ``-> 5`` (ncclInvalidUsage);
or, without the WARN, two ranks of one communicator (same commId) on one host reporting the same
``busId`` in their init lines. Cause: every local rank selects the same device (missing
``torch.cuda.set_device(local_rank)``, a global rank used as device index, one
``CUDA_VISIBLE_DEVICES`` for all processes).
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..evidence.facts import first_ts
from ..evidence.nccl_facts import dup_gpu_errors, in_causal_order, int_in, ranks_hosts
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list:
    warns = in_causal_order(dup_gpu_errors(job))
    if warns:
        ranks = sorted({r for e in warns for r in (int_in(e.get("rank_a")), int_in(e.get("rank_b")))
                        if r is not None} | set(ranks_hosts(job, warns)[0]))
        _, hosts = ranks_hosts(job, warns)
        devices = sorted({str(e.get("device")) for e in warns if e.get("device") not in (None, "")})
        dev = f"GPU busId {', '.join(devices)}" if devices else "one GPU"
        where = f" on {', '.join(hosts)}" if hosts else ""
        summary = (f"ranks {', '.join(map(str, ranks))}{where} are bound to the same {dev}: NCCL refused to "
                   f"initialise (ncclInvalidUsage); each local rank needs its own device")
        return [rule.finding(summary, ranks=ranks, hosts=hosts, evidence=warns[:6], first_seen=first_ts(warns))]
    return _same_bus_in_init(job, rule)


def _same_bus_in_init(job: JobModel, rule: Rule) -> list:
    """Two ranks of one communicator on one host with the same busId, without the WARN line."""
    seen: dict[tuple, dict[int, Event]] = defaultdict(dict)
    for e in job.by_kind("nccl_init"):
        comm_id, bus, rank = e.get("comm_id"), e.get("bus_id"), int_in(e.get("rank"))
        if not (comm_id and bus and rank is not None and e.host):
            continue
        # A line whose launcher label names another rank than its world-communicator text is two
        # records glued together, not evidence.
        if e.rank is not None and e.rank != rank and e.get("nranks") == job.ranks_expected:
            continue
        seen[(comm_id, e.host, str(bus))].setdefault(rank, e)
    dups = [(key, evs) for key, evs in seen.items() if len(evs) > 1]
    if not dups:
        return []
    (comm_id, host, bus), evs = dups[0]
    ranks = sorted(evs)
    evidence = [evs[r] for r in ranks][:6]
    summary = (f"ranks {', '.join(map(str, ranks))} of communicator {comm_id} on {host} report the same GPU "
               f"(busId {bus}) in their init lines: two ranks share one device")
    return [rule.finding(summary, confidence="medium", ranks=ranks, hosts=[host], evidence=evidence,
                         first_seen=first_ts(evidence))]
