"""MN3 timeout masking: the collective timeout made the surviving ranks wait out the full window.

The watchdog line is the symptom, not the cause: it says which collective (op, SeqNum, process
group) the survivors were stuck in and for how long. We report that, the ranks that did *not*
report (when the job's size is known), the time lost, and whether the timeout was a default nobody
chose or differs across ranks. gloo's ``Timed out waiting Nms for recv/send operation`` counts as
a collective timeout too; it names no collective, so when flight-recorder dumps are given we say
which collective each rank that timed out was in. Heartbeat-monitor kills without any collective
timeout are WD1's story; here they only add a warning that the job sat for the monitor's window.
"""

from __future__ import annotations

from collections import Counter

from ..events import Event
from ..evidence import facts, ras
from ..evidence.dumps import dump_facts
from ..evidence.facts import fmt_ms, fmt_ranks, pg_label, plural
from ..evidence.statements import barrier_roots
from ..findings import Finding, Severity
from ..model import JobModel, pg_key
from .base import Rule


def check(job: JobModel, rule: Rule) -> list[Finding]:
    groups = facts.timeouts_by_pg(job)
    if not groups:
        return _heartbeat_only(job, rule)
    main_pg, main = next(iter(groups.items()))  # the group most ranks timed out in
    ranks = sorted({r for pt in groups.values() for r in pt.ranks})
    ms = main.ran_ms or (max(main.timeouts_ms) if main.timeouts_ms else None)
    where = facts.waited_in(main) + (f" SeqNum {main.seq}" if main.seq is not None else "") + \
        (f" of {pg_label(main_pg, main.desc)}" if main.named else "")
    at_seq = [r for r in main.reports if main.seq is None or r.seq == main.seq]
    elsewhere = [r for r in main.reports if r.seq is not None and r.seq != main.seq]
    parts = [f"{_who(at_seq)} waited {fmt_ms(ms)} in {where}"]
    if elsewhere:
        parts.append(", ".join(f"{_who([r])} in SeqNum {r.seq}" for r in elsewhere[:4]))
    dumped, dump_evidence = _in_dumps(job, main_pg, main) if main.seq is None else ("", [])
    if dumped:
        parts.append(dumped)
    parts += _timeout_setting(job, main_pg, main)
    parts.append(_not_reporting(job, main_pg, main))
    parts.append(ras.symmetric_hang(job))  # every rank answered ncclras with the same counts
    lost = _time_lost(job, main)
    if lost:
        parts.append(lost)
    others = [f"{pg_label(pg, pt.desc)}: {pt.op or '?'} SeqNum {pt.seq} ({_who(pt.reports)})"
              for pg, pt in groups.items() if pg != main_pg]
    if others:
        parts.append("also timed out in " + "; ".join(others))
    evidence = [e for pt in groups.values() for e in pt.lead_events()]
    evidence.sort(key=lambda e: (e.ts is None, e.ts or 0.0, e.file, e.line))
    evidence += dump_evidence
    hosts = {r.host for pt in groups.values() for r in pt.reports}
    confidence = "high" if main.seq is not None and (main.op or main.ran_ms) else "medium"
    return [rule.finding("; ".join(p for p in parts if p), confidence=confidence, ranks=ranks, hosts=hosts,
                         evidence=evidence, first_seen=main.ts)]


def _who(reports: list[facts.RankTimeout]) -> str:
    return facts.count_ranks([r.rank for r in reports], len(reports))


def _in_dumps(job: JobModel, pg: str, pt: facts.PgTimeouts) -> tuple[str, list[Event]]:
    """Which collective the flight-recorder dumps put each rank that timed out in (for timeouts
    that do not say, like gloo's), with one dump entry per collective as evidence."""
    fr = dump_facts(job)
    where: dict[str, list[int]] = {}
    entries: dict[str, Event] = {}
    for rank in pt.ranks:
        pos = fr.position(rank, pg)
        if pos is not None and pos.seq is not None:
            where.setdefault(pos.what, []).append(rank)
            if pos.event is not None:
                entries.setdefault(pos.what, pos.event)
    if not where:
        return "", []
    text = " and ".join(f"{facts.name_ranks(rs)} in {w}" for w, rs in sorted(where.items(), key=lambda kv: kv[1]))
    return f"their flight-recorder dumps show {text}", list(entries.values())[:3]


def _timeout_setting(job: JobModel, pg: str, pt: facts.PgTimeouts) -> list[str]:
    """The timeout value and where it came from; a note when ranks disagree on it."""
    values: dict[int, set[int]] = {}
    for r in pt.reports:
        if r.timeout_ms is not None and r.rank is not None:
            values.setdefault(r.timeout_ms, set()).add(r.rank)
    for ev in job.by_kind("torch_pg_options", "torch_pg_env"):
        rank = facts.global_rank(job, ev)
        if ev.get("timeout_ms") and rank is not None and pg_key(ev) == pg:
            values.setdefault(int(ev.get("timeout_ms")), set()).add(rank)
    tmo = Counter(pt.timeouts_ms).most_common(1)[0][0] if pt.timeouts_ms else None
    out = []
    if tmo is not None:
        out.append(f"timeout {tmo} ms ({facts.timeout_origin(tmo)})")
    if len(values) > 1:
        out.append("the timeout differs across ranks: " +
                   ", ".join(f"{v} ms on {facts.name_ranks(rs)}" for v, rs in sorted(values.items())))
    return out


def _not_reporting(job: JobModel, pg: str, pt: facts.PgTimeouts) -> str:
    """Ranks that should have timed out too but did not say so (the suspects)."""
    if pg != "default" or not job.ranks_expected:
        size = "its membership" if pg != "default" else "the world size"
        return f"{size} is not in the logs, so ranks that did not report cannot be named"
    if job.partial_logs:
        seen, world = job.coverage() or (0, job.ranks_expected)
        return f"the logs cover {seen:,} of {world:,} ranks, so ranks that did not report cannot be named"
    reported = set(pt.ranks)
    silent = [r for r in range(job.ranks_expected) if r not in reported]
    if not silent:
        return f"all {job.ranks_expected} ranks reported"
    elsewhere = {r for p in facts.timeouts_by_pg(job).values() for r in p.ranks} & set(silent)
    barrier = barrier_roots(job) & set(silent)
    silent = [r for r in silent if r not in barrier]
    if not silent:
        return f"every other rank reported ({facts.name_ranks(barrier)} in its monitored barrier)"
    out = f"{plural(len(silent), 'rank')} of {job.ranks_expected} reported no timeout here: {fmt_ranks(silent)}"
    if elsewhere:
        out += f" ({facts.name_ranks(elsewhere)} timed out in another group)"
    if barrier:
        out += f" ({facts.name_ranks(barrier)} timed out in its monitored barrier)"
    return out


def _time_lost(job: JobModel, pt: facts.PgTimeouts) -> str:
    """The gap between the culprit's last sign of life and the survivors' timeout (needs timestamps)."""
    end = pt.ts
    if end is None:
        return ""
    culprit = facts.first_failure(job, crash_only=True)
    if culprit is None or culprit.ts is None or culprit.ts >= end:
        return ""
    gap_ms = (end - culprit.ts) * 1000
    window = max(pt.timeouts_ms) if pt.timeouts_ms else pt.ran_ms or 0
    if gap_ms > max(2 * window, window + 3_600_000):
        return ""  # clocks (or inferred years) of the two lines disagree: no honest gap
    return f"{culprit.who} failed {fmt_ms(gap_ms)} before the first timeout"


def _heartbeat_only(job: JobModel, rule: Rule) -> list[Finding]:
    kills = facts.watchdog_kills(job)
    if not kills:
        return []
    secs = max((k.seconds for k in kills if k.seconds), default=None)
    ranks = [k.rank for k in kills]
    summary = (f"{facts.count_ranks(ranks, len(kills))} sat "
               f"{fmt_ms(secs * 1000) if secs else 'the heartbeat window'} before the heartbeat monitor "
               "killed the process, with no collective timeout reported (the watchdog itself was stuck: see WD1)")
    evidence = [k.events[0] for k in kills]
    return [rule.finding(summary, severity=Severity.WARNING, confidence="medium", ranks=ranks,
                         hosts=[k.state.host for k in kills if k.state], evidence=evidence,
                         first_seen=facts.first_ts(evidence))]
