"""MN6: Horovod elastic fell below ``--min-np`` (or a Horovod stall left ranks missing).

When live workers drop below the minimum, elastic Horovod pauses and gives up after
``HOROVOD_ELASTIC_TIMEOUT`` (600 s). The driver says so: ``Timed out waiting for minimum number of
slots``, ``failure count == N -> stop running``, ``reset count N has exceeded limit M``, after hosts
were blacklisted and ``reset workers: N`` counts dropped. The stall inspector's ``[missing ranks:
R]`` names the ranks that never submitted the tensor: R is the suspect, not the rank reporting.

Not a fault: a scale-in (host blacklisted, a worker exits) after which training goes on.
"""

from __future__ import annotations

from ..events import Event, by_place
from ..evidence.facts import first_ts
from ..evidence.launcher_facts import ints_in, progress_after, ranks_text
from ..evidence.nccl_facts import int_in, ranks_hosts
from ..model import JobModel
from .base import Rule


def _is_fatal_stop(ev: Event) -> bool:
    """Driver decisions that end an elastic job; ``success count == N`` is a normal finish."""
    what = str(ev.get("what") or ev.text).lower()
    return "success" not in what


def _worker_counts(resets: list[Event]) -> list[int]:
    """``reset workers: N`` sizes in order, consecutive repeats folded."""
    out: list[int] = []
    for ev in resets:
        n = int_in(ev.get("size"))
        if n is not None and (not out or out[-1] != n):
            out.append(n)
    return out


def _shrinkage(job: JobModel) -> tuple[list[str], str, list[Event]]:
    """Blacklisted hosts, a 'workers 4 -> 3' text and the events showing the job shrinking."""
    blacklist = job.by_kind("hvd_blacklist")
    hosts = sorted({str(e.get("host")) for e in blacklist if e.get("host")})
    counts = _worker_counts(job.by_kind("hvd_reset"))
    dropped = len(counts) >= 2 and counts[-1] < max(counts)
    counts_text = f"workers {' -> '.join(map(str, counts))}" if dropped else ""
    events = blacklist[:3] + ([e for e in job.by_kind("hvd_reset")][-2:] if dropped else [])
    return hosts, counts_text, events


def _missing_ranks(stall_lines: list[Event]) -> list[int]:
    ranks: list[int] = []
    for ev in stall_lines:
        for r in ints_in(ev.get("ranks")):
            if r not in ranks:
                ranks.append(r)
    return sorted(ranks)


def check(job: JobModel, rule: Rule) -> list:
    fatal = job.by_kind("hvd_timeout") + [e for e in job.by_kind("hvd_stop") if _is_fatal_stop(e)]
    shutdown = job.by_kind("hvd_shutdown")
    hosts, counts_text, shrink_events = _shrinkage(job)
    exits = [e for e in job.by_kind("hvd_worker_exit") if int_in(e.get("code")) not in (None, 0)]
    if fatal:
        return [_below_min_np(job, rule, fatal, shutdown, hosts, counts_text, shrink_events, exits)]

    stall_lines = job.by_kind("hvd_missing_ranks")
    stall_notices = job.by_kind("hvd_stall")
    if stall_lines or stall_notices:
        found = _stall(job, rule, stall_lines, stall_notices, hosts, shrink_events)
        if found is not None:
            return [found]

    if not (hosts or counts_text):
        return []
    last = max(shrink_events + exits, key=by_place)
    shrunk = ", ".join(b for b in (f"host{'s' if len(hosts) > 1 else ''} {', '.join(hosts)} blacklisted"
                                   if hosts else "", counts_text) if b)
    after = progress_after(job, last)
    evidence = shrink_events + exits[:2]
    if after:  # a scale-in the job absorbed: context, not a fault
        return [rule.finding(
            f"Horovod elastic scale-in: {shrunk}; training went on (step {after[-1].get('step')} "
            "logged afterwards)", severity="info", confidence="high", hosts=hosts,
            evidence=evidence + [after[0]], first_seen=first_ts(evidence))]
    return [rule.finding(
        f"Horovod elastic lost workers ({shrunk}) and no training progress is logged afterwards: "
        "the job is likely paused below --min-np, waiting HOROVOD_ELASTIC_TIMEOUT",
        severity="warning", confidence="medium", hosts=hosts, evidence=evidence,
        first_seen=first_ts(evidence))]


def _below_min_np(job: JobModel, rule: Rule, fatal: list[Event], shutdown: list[Event], hosts: list[str],
                  counts_text: str, shrink_events: list[Event], exits: list[Event]):
    first = fatal[0]
    min_np = next((e.get("min_np") for e in fatal if e.get("min_np") is not None), None)
    why = "timed out waiting for the minimum number of slots" if first.kind == "hvd_timeout" \
        else f"the driver stopped the job ({(first.get('what') or first.text).strip()[:80]})"
    blacklisted = f"hosts {', '.join(hosts)} were" if len(hosts) > 1 else f"host {''.join(hosts)} was"
    context = [b for b in (f"after {blacklisted} blacklisted" if hosts else "", counts_text) if b]
    summary = f"Horovod elastic {why}" + (f" (min-np {min_np})" if min_np is not None else "")
    if context:
        summary += " " + "; ".join(context)
    # The stall inspector, when it ran, names the ranks the job lost.
    stall_lines = job.by_kind("hvd_missing_ranks")
    missing = _missing_ranks(stall_lines)
    if missing:
        summary += f"; {ranks_text(missing)} missing"
    evidence = shrink_events + exits[:2] + fatal[:2] + shutdown[:1] + stall_lines[:1]
    return rule.finding(summary, severity="error", confidence="high", ranks=missing,
                        hosts=hosts or ranks_hosts(job, exits)[1],
                        evidence=sorted(evidence, key=lambda e: (e.ts is None, e.ts or 0.0, e.file, e.line)),
                        first_seen=first_ts(evidence))


def _stall(job: JobModel, rule: Rule, stall_lines: list[Event], notices: list[Event], hosts: list[str],
           shrink_events: list[Event]):
    """A Horovod stall: some ranks never submitted a tensor the others are waiting for."""
    missing = _missing_ranks(stall_lines)
    reporters = sorted({e.rank for e in stall_lines + notices if e.rank is not None} - set(missing))
    tensors = sorted({str(e.get("tensor")) for e in stall_lines if e.get("tensor")})
    last = max(stall_lines + notices, key=by_place)
    evidence = shrink_events + notices[:1] + stall_lines[:4]
    who = ranks_text(missing, none="some ranks")
    waiting = f" while {ranks_text(reporters)} waited" if reporters else ""
    what = f" {len(tensors)} tensor{'s' if len(tensors) > 1 else ''} (e.g. {tensors[0]})" if tensors else " tensors"
    if progress_after(job, last):
        # Training went on after the stall warnings: a slow rank, not a lost one.
        return rule.finding(
            f"Horovod stall warning: {who} submitted{what} late{waiting}; training continued afterwards",
            severity="warning", confidence="medium", ranks=missing, hosts=hosts, evidence=evidence,
            first_seen=first_ts(evidence))
    return rule.finding(
        f"Horovod stall: {who} never submitted{what}{waiting} (the missing rank is the suspect, "
        "not the reporter)", severity="error", confidence="high" if missing else "medium",
        ranks=missing, hosts=hosts, evidence=evidence, first_seen=first_ts(evidence))
