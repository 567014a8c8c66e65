"""A node that went away with the rendezvous store it hosted: its torchrun agent and its ranks were killed
together (the node died, lost power, was reclaimed), so its console just ends, with no error and no launcher
report, while the other nodes' agents find the store gone (TCPStore's "Failed to recv, got 0 bytes" or
"Broken pipe", a failed keep-alive heartbeat, ``RendezvousConnectionError``) and stop their own workers before
these can raise anything: no rank failed, none timed out, and yet the job is over. The node is named by its
console: the host its lines name, else the file's own name when that reads as a host (``gpu-r7-n01.log``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, RankState
from ..model.job import ERROR_KINDS
from .facts import _per_job
from .failures import failures
from .nodename import node_name
from .timeouts import timeouts_by_pg, watchdog_kills

#: Seconds a lost node's last line may come after the first loss another agent reports (clocks, buffering).
_SLACK_S = 2.0
#: What an agent says when the store is gone (torch.toml: TCPStore and rendezvous lines).
_LOSSES = frozenset(("store_closed", "store_unreachable"))


@dataclass
class LostStoreNode:
    host: str
    states: list[RankState]  # the node's ranks, which stopped with it
    losses: list[Event]  # the other agents' losses of the store


@_per_job
def store_node_lost(job: JobModel) -> LostStoreNode | None:
    """The one node whose console ends, with no error and no launcher line, by the time every other node's
    agent lost the store and stopped its workers, when no rank failed or timed out (see module doc)."""
    if any(not f.recovered for f in failures(job)) or timeouts_by_pg(job) or watchdog_kills(job):
        return None
    losses = [e for e in job.by_kind("torch_store_timeout") if e.get("what") in _LOSSES and e.rank is None
              and job.rank_of(e) is None]
    dated = [e.ts for e in losses if e.ts is not None]
    if not dated:
        return None
    lost_at = min(dated)
    losing = {e.file for e in losses}
    stopped = {e.file for e in job.by_kind("elastic_sigterm")}
    if not losing <= stopped:
        return None  # an agent that lost the store but stopped no worker: not the end of the job here
    quiet: dict[str, list[RankState]] = {}  # node -> its ranks, whose consoles just end
    for st in job.ranks:
        if st.rank is None or not st.events or losing.intersection(st.files):
            continue
        last = max((e.ts for e in st.events if e.ts is not None), default=None)
        hosts = {node_name(job, f) for f in st.files}
        if len(hosts) != 1 or None in hosts or last is None or last > lost_at + _SLACK_S or st.errors:
            return None  # a rank still writing after the loss, or with an error: not a node that went away
        quiet.setdefault(next(iter(hosts)), []).append(st)
    if len(quiet) != 1:
        return None
    host, states = next(iter(quiet.items()))
    files = {f for st in states for f in st.files}
    if any(e.file in files and (e.kind.startswith("elastic_") or e.kind in ERROR_KINDS) for e in job.events):
        return None  # its agent wrote its own end (a report, a stop): it did not just vanish
    if host in {node_name(job, f) for f in losing}:
        return None
    return LostStoreNode(host, sorted(states, key=lambda s: s.rank), losses)
