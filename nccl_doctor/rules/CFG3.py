"""CFG3: the torchrun agents of one job were launched with settings that must agree and do not.

Evidence (``evidence.rendezvous.misconfigured_nodes``): the agents' launch configs state another
``min_nodes``/``max_nodes``, ``run_id`` or ``rdzv_endpoint`` on one node than on a clear majority (another
``--nnodes``, ``--rdzv-id`` or ``--rdzv-endpoint``; of two agents whose node counts differ, the one whose
count is not the number of agents that started), or two agents
each hosted the static rendezvous store and timed out waiting for clients (two nodes given
``--node-rank 0``; the store fewer clients joined is the mistaken one). The job then never forms:
the other agents' rendezvous timeouts and closed stores are consequences.
"""

from __future__ import annotations

from ..evidence.facts import first_ts
from ..evidence.rendezvous import misconfigured_nodes
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list:
    out = []
    for pb in misconfigured_nodes(job):
        where = ", ".join(pb.hosts) if pb.hosts else "the job"
        out.append(rule.finding(f"{where}: {pb.what}", hosts=pb.hosts, blame_hosts=pb.hosts, evidence=pb.events,
                                first_seen=first_ts(pb.events), confidence="high" if pb.hosts else "medium"))
    return out
