"""MN4: an MTU mismatch (or another size-dependent loss) on the path between nodes.

Jumbo frames on one hop and 1500 on another drop large frames only: rendezvous, init and small
collectives work, the first large payload hangs or fails. The logs never say "MTU"; the rule reads
the shape of the failure, and states its confidence:

* every rank that reported times out in the *same* early collective with a large ``NumelIn``
  (no rank lagging, none crashed), after earlier collectives of the group completed, or right
  after a clean ``Init COMPLETE`` on every rank: medium confidence (error) when every expected
  rank reported that same timeout, low (warning) otherwise;
* a transport error (IB completion error, closed/reset socket, OFI error) on the first traffic of
  a process that had completed ``Init COMPLETE`` cleanly and made no progress since: low (warning).

A small first collective (``NumelIn=1`` barrier) that hangs is not size-dependent (MN3/RK2 then).
"""

from __future__ import annotations

from ..model import JobModel
from .base import Rule
from .facts import first_failure, first_ts, fmt_ranks, lagging_ranks, pg_label, plural, timeouts_by_pg
from .nccl_facts import after_init, in_causal_order, on, ranks_hosts, transport_errors, transport_tier

#: NumelIn from which a collective is "large": 256 KiB of fp32, far above any MTU.
LARGE_NUMEL = 1 << 16
#: "Early": the first collectives of a group (rendezvous, parameter broadcast, first buckets).
EARLY_SEQ = 32


def check(job: JobModel, rule: Rule) -> list:
    if first_failure(job, crash_only=True) is not None or lagging_ranks(job):
        return []  # a rank crashed or fell behind: the hang is its consequence (RK1/RK3)
    return _large_collective_stall(job, rule) or _transport_after_clean_init(job, rule)


def _large_collective_stall(job: JobModel, rule: Rule) -> list:
    for pg, pt in timeouts_by_pg(job).items():
        seq = pt.seq
        if seq is None or seq > EARLY_SEQ or any(r.seq not in (None, seq) for r in pt.reports):
            continue
        numel = max((r.numel_in or 0 for r in pt.reports), default=0)
        if numel < LARGE_NUMEL:
            continue  # a small first collective that hangs is not size-dependent
        done = max((r.completed for r in pt.reports if r.completed is not None), default=None)
        staged = [r for r in job.ranks if r.stage != "none"]
        clean_init = bool(staged) and all(r.stage in ("init_complete", "running") for r in staged)
        prior_done = done is not None and done >= 1
        if not prior_done and not (clean_init and seq <= 2):
            continue
        everyone = job.ranks_expected is not None and len(pt.ranks) >= job.ranks_expected
        confidence = "medium" if everyone and (prior_done or clean_init) else "low"
        op = pt.op or "collective"
        summary = (f"{plural(len(pt.reports), 'rank')} ({fmt_ranks(pt.ranks) or 'ranks unknown'}) all timed out "
                   f"in the same early {op} (SeqNum {seq}, NumelIn {numel}) of {pg_label(pg, pt.desc)}")
        summary += (f" after {done} earlier collective(s) completed" if prior_done
                    else " right after a clean Init COMPLETE")
        summary += ("; no rank crashed or lagged: init and the earlier collectives went through, this large "
                    "payload did not, the shape of an MTU mismatch (check with ping -M do -s 8972)")
        evidence = pt.lead_events()[:6]
        ranks, hosts = ranks_hosts(job, evidence)
        return [rule.finding(summary, severity="error" if confidence == "medium" else "warning",
                             confidence=confidence, ranks=pt.ranks or ranks, hosts=hosts, evidence=evidence,
                             first_seen=first_ts(evidence))]
    return []


def _transport_after_clean_init(job: JobModel, rule: Rule) -> list:
    hits = []
    for ev in transport_errors(job):
        if transport_tier(ev) not in (0, 2) or not after_init(job, ev):
            continue
        rs = job.rank_of(ev)
        if rs is not None and any(e.kind in ("train_step", "torch_work_update") and e.file == ev.file
                                  and e.line < ev.line for e in rs.events):
            continue  # it trained before: not a first-payload failure
        hits.append(ev)
    if not hits:
        return []
    hits = in_causal_order(hits)
    ranks, hosts = ranks_hosts(job, hits)
    summary = (f"transport error on the first traffic after a clean Init COMPLETE{on(job, hits[:1])}: "
               f"init's small messages went through, the first payload did not; an MTU mismatch on the path "
               f"is one explanation (see NET1 for the link)")
    return [rule.finding(summary, severity="warning", confidence="low", ranks=ranks, hosts=hosts,
                         evidence=hits[:4], first_seen=first_ts(hits))]
