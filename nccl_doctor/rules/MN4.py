"""MN4: an MTU mismatch (or another size-dependent loss) on the path between nodes.

Jumbo frames on one hop and 1500 on another drop large frames only: rendezvous, init and small
collectives work, the first large payload hangs or fails. The logs never say "MTU"; the rule reads
the shape of the failure, and states its confidence:

* every rank that reported times out in the *same* early collective with a large ``NumelIn``
  (no rank lagging, none crashed, no transport error logged), after earlier collectives of the
  group completed, or right after a clean ``Init COMPLETE`` on every rank: medium confidence
  (error) when inter-node traffic uses TCP sockets and every expected rank reported that same
  timeout, low (warning) when the transport is unknown; not reported over IB (its reliable
  transport fails with a completion error instead) or with a second NCCL process group (DS1);
* a transport error (IB completion error, closed/reset socket, OFI error) on the first traffic of
  a process that had completed ``Init COMPLETE`` cleanly and made no progress since: medium
  (error) when the watchdog shows earlier collectives completed and the failing one is early and
  no port/link event was logged, low (warning) otherwise.

A small first collective (``NumelIn=1`` barrier) that hangs is not size-dependent (MN3/RK2 then).
"""

from __future__ import annotations

from ..evidence.facts import (
    first_failure,
    first_ts,
    fmt_ranks,
    lagging_ranks,
    pg_label,
    plural,
    timeouts_by_pg,
)
from ..evidence.nccl_facts import (
    after_init,
    host_networks,
    in_causal_order,
    on,
    ranks_hosts,
    transport_errors,
    transport_fault,
    transport_tier,
)
from ..model import JobModel
from .base import Rule

#: NumelIn from which a collective is "large": 256 KiB of fp32, far above any MTU.
LARGE_NUMEL = 1 << 16
#: "Early": the first collectives of a group (rendezvous, parameter broadcast, first buckets).
EARLY_SEQ = 32


def check(job: JobModel, rule: Rule) -> list:
    return _large_collective_stall(job, rule) or _transport_after_clean_init(job, rule)


def _large_collective_stall(job: JobModel, rule: Rule) -> list:
    """Every rank timed out in the same early, large collective, with no transport error at all.

    That is how an MTU black hole looks over TCP sockets (retransmits forever). Over IB/RoCE the
    reliable transport gives up with a completion error instead (the transport path), so a silent
    hang on IB is not reported; nor is one in a job with a second NCCL process group, whose
    cross-group deadlock looks the same (DS1).
    """
    nets = host_networks(job).values()
    sockets = any(hn.socket_channels or hn.socket_net for hn in nets)
    if job.by_kind("second_pg") or (any(hn.ib for hn in nets) and not sockets) or transport_errors(job):
        return []
    if first_failure(job, crash_only=True) is not None or lagging_ranks(job):
        return []  # a rank crashed or fell behind: the hang is its consequence (RK1/RK3)
    for pg, pt in timeouts_by_pg(job).items():
        seq = pt.seq
        if seq is None or seq > EARLY_SEQ or any(r.seq not in (None, seq) for r in pt.reports):
            continue
        sizes = [r.numel_in for r in pt.reports if r.numel_in is not None]
        numel = max(sizes) if sizes else None  # torch <= 2.0 does not print NumelIn
        if numel is not None and numel < LARGE_NUMEL:
            continue  # a small first collective that hangs is not size-dependent
        done = max((r.completed for r in pt.reports if r.completed is not None), default=None)
        staged = [r for r in job.ranks if r.stage != "none"]
        clean_init = bool(staged) and all(r.stage in ("init_complete", "running") for r in staged)
        prior_done = done is not None and done >= 1
        if not prior_done and not clean_init:
            continue
        everyone = job.ranks_expected is not None and len(pt.ranks) >= job.ranks_expected
        confidence = "medium" if everyone and sockets and numel is not None else "low"
        op = pt.op or "collective"
        summary = (f"{plural(len(pt.reports), 'rank')} ({fmt_ranks(pt.ranks) or 'ranks unknown'}) all timed out "
                   f"in the same early {op} (SeqNum {seq}, NumelIn {numel if numel is not None else 'not logged'}) of {pg_label(pg, pt.desc)}")
        summary += (f" after {plural(done, 'earlier collective')} completed" if prior_done
                    else " right after a clean Init COMPLETE")
        summary += ("; no rank crashed or lagged and no transport error was logged: init and the earlier "
                    "collectives went through, this large payload did not, the shape of an MTU black hole"
                    + (" on the TCP socket transport" if sockets else "") + " (check with ping -M do -s 8972)")
        evidence = pt.lead_events()[:6]
        ranks, hosts = ranks_hosts(job, evidence)
        return [rule.finding(summary, severity="error" if confidence == "medium" else "warning",
                             confidence=confidence, ranks=pt.ranks or ranks, hosts=hosts, evidence=evidence,
                             first_seen=first_ts(evidence))]
    return []


def _transport_after_clean_init(job: JobModel, rule: Rule) -> list:
    """Transport errors on the first traffic after a clean init (no training progress before them)."""
    if transport_fault(job) is None:
        return []  # the transport errors are the echo of a local failure elsewhere
    hits = []
    for ev in transport_errors(job):
        if transport_tier(ev) not in (0, 2) or ev.kind == "nccl_ib_async" or not after_init(job, ev):
            continue
        rs = job.rank_of(ev)
        if rs is not None and any(e.kind in ("train_step", "torch_work_update") and e.file == ev.file
                                  and e.line < ev.line for e in rs.events):
            continue  # it trained before: not a first-payload failure
        hits.append(ev)
    # The failing work as the watchdog saw it: a late SeqNum means the job had been training (not a
    # first-payload failure); a port/link event means the link went down (NET1), not large frames.
    reports = [r for pt in timeouts_by_pg(job).values() for r in pt.reports if r.seq is not None]
    if not hits or any(r.seq > EARLY_SEQ for r in reports) or any(e.kind == "nccl_ib_async"
                                                                  for e in transport_errors(job)):
        return []
    hits = in_causal_order(hits)
    ranks, hosts = ranks_hosts(job, hits)
    early_after_done = bool(reports) and all((r.completed or 0) >= 1 for r in reports)
    summary = f"transport error on the first traffic after a clean Init COMPLETE{on(job, hits[:1])}"
    if early_after_done:
        seq = min(r.seq for r in reports)
        done = max(r.completed or 0 for r in reports)
        summary += (f": collectives 1-{done} completed, work {seq} failed on the wire with no port or link "
                    f"event and no rank crashed: the shape of an MTU mismatch dropping large frames "
                    f"(NET1 names the link)")
        severity, confidence = "error", "medium"
        hits += [r.events[0] for r in reports][:2]
    else:
        summary += (": init's small messages went through, the first payload did not; an MTU mismatch on the "
                    "path is one explanation (see NET1 for the link)")
        severity, confidence = "warning", "low"
    return [rule.finding(summary, severity=severity, confidence=confidence, ranks=ranks, hosts=hosts,
                         evidence=hits[:6], first_seen=first_ts(hits))]
