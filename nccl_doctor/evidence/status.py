"""Each rank's status from cross-rank evidence: ok | timed_out | echo | failed | silent | lagging.

* failed: the rank's own error is a cause (a crash, not the echo of someone else's failure);
* lagging: behind the SeqNum the others waited in, or named by a desync report;
* silent: wrote nothing / stopped early with no error while the others went on (or went away
  with their node);
* timed_out: it waited (in a collective, at the store, at a barrier) until it gave up, or its
  watchdog was killed - a consequence;
* echo: it ended in an error that is what it saw of another's failure (a peer that closed the
  connection, an aborted communicator, a lock another rank kept, a file it should have made): a
  consequence too, never "ok", which an engineer reads as healthy;
* ok: none of these.

A rank that failed and then also timed out is "failed"; the order below is the precedence.
"""

from __future__ import annotations

from ..model import JobModel
from . import facts
from .endings import endings
from .nodeloss import store_node_lost


def assign_statuses(job: JobModel) -> None:
    """Set ``RankState.status`` on every rank of the job (the analysis calls it right after ``build_job``)."""
    by_state: dict[int, str] = {}
    by_rank: dict[int, str] = {}

    def mark(state, rank, status: str) -> None:
        if state is not None:
            by_state.setdefault(id(state), status)
        if rank is not None:
            by_rank.setdefault(rank, status)

    for f in facts.failures(job):
        if f.crash and not f.recovered:
            mark(f.state, f.rank, "failed")
    for s in facts.lagging_ranks(job):
        mark(s.state, s.rank, "lagging")
    for s in facts.silent_ranks(job):
        if s.confirmed:
            mark(s.state, s.rank, "silent")
    node = facts.stopped_node(job)
    for st in node.states if node is not None else ():
        mark(st, None, "silent")  # its processes went away with the node
    gone = store_node_lost(job)
    for st in gone.states if gone is not None else ():
        mark(st, st.rank, "silent")  # (the node that hosted the store, gone with its ranks)
    # A rank whose watchdog hung while the others' collectives timed out is the odd one out.
    if facts.timeouts_by_pg(job):
        waited = {id(r.state) for p in facts.timeouts_by_pg(job).values() for r in p.reports}
        for w in facts.watchdog_kills(job):
            if w.state is not None and id(w.state) not in waited:
                mark(w.state, w.rank, "failed")
    timed = facts.timed_out_states(job)
    for r in job.ranks:
        status = by_state.get(id(r)) or (by_rank.get(r.rank) if r.rank is not None else None)
        if status is None and id(r) in timed:
            status = "timed_out"
        r.status = status or "ok"


#: An ending that is a consequence of another's failure -> its status (endings.Ending.how).
_CONSEQUENCE = {"timeout": "timed_out", "echo": "echo"}


def consequence_statuses(job: JobModel, verdict: dict | None) -> None:
    """Ranks still "ok" whose ending is a consequence (endings: they gave up waiting at the store or a
    barrier; their error is a lost peer or what they read of another's fault) get that
    status, once the verdict is known: a rank the verdict names is left as it is (a late arrival's
    only error is a closed connection, yet it is the one the others waited for)."""
    named = set(verdict.get("ranks") or ()) if verdict else set()
    hosts = set(verdict.get("hosts") or ()) if verdict and not named else set()
    for end in endings(job).values():
        st = end.state
        if st is None or st.status != "ok" or end.how not in _CONSEQUENCE or end.rank in named \
                or (hosts and st.host in hosts):
            continue
        st.status = _CONSEQUENCE[end.how]
