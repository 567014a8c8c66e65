"""The verdict: one headline that joins findings causally.

First the rank/host that failed or fell behind first (RK1, RK3, RK2 — with how we know), then the
class that explains it, then what the rest of the job did (MN3's wait). A class that blames a host
directly (MN2: the node that advertised docker0) outranks a rank on another host that merely failed
first: that failure is a consequence. When the evidence does not single out a rank, the verdict
says so instead of guessing.
"""

from __future__ import annotations

from typing import Any

from .findings import Finding, Severity
from .model import JobModel

#: Which rank-level finding names the culprit, strongest first.
CULPRIT_ORDER = ("RK1", "RK3", "RK2")
#: Classes that explain a failure, most specific (root-cause-like) first; MN3 is a consequence.
CLASS_ORDER = ("MN1", "CFG1", "CFG2", "CFG3", "NC1", "NC2", "DSY1", "MN2", "NET1", "MN4", "DS1", "TO2", "WD1", "MN6",
               "MN5", "NCX", "TO1", "WB1", "NV1", "NV2", "MN3")


#: Warning-level classes that tell one rank's own stall or failure: when no rank failed at error
#: level and the only error is MN3's wait, they name what the others waited for.
RANK_STORIES = ("DS1", "TO2", "WD1", "WB1")


def _first(findings: list[Finding], order: tuple[str, ...], floor: Severity = Severity.ERROR) -> Finding | None:
    for rid in order:
        cands = [f for f in findings if f.rule == rid and f.severity.level >= floor.level]
        if cands:
            return min(cands, key=lambda f: (f.first_seen is None, f.first_seen or 0.0))
    return None


def _blames_elsewhere(klass: Finding | None, culprit: Finding | None) -> bool:
    """True when the class names its own culprit host(s), confidently, away from the failed rank."""
    if klass is None or klass.severity is not Severity.ERROR or klass.confidence == "low":
        return False
    if not (klass.blame_hosts or klass.blame_ranks):
        return False
    if culprit is None:
        return True
    if klass.blame_hosts and set(culprit.hosts) & set(klass.blame_hosts):
        return False
    return not (klass.blame_ranks and set(culprit.ranks) & set(klass.blame_ranks))


def _who(ranks: list[int], hosts: list[str], why: str) -> dict[str, Any]:
    return {"rank": ranks[0] if len(ranks) == 1 else None, "ranks": ranks,
            "host": hosts[0] if len(hosts) == 1 else None, "why": why}


def decide(job: JobModel, findings: list[Finding]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    culprit = _first(findings, CULPRIT_ORDER)
    klass = _first(findings, CLASS_ORDER) or _first(findings, CLASS_ORDER, Severity.WARNING)
    if culprit is None and (klass is None or klass.rule == "MN3"):
        # The only error is the others' wait: a warning-level story of one rank's own stall or
        # failure (W&B start-up timeout, a stuck progress bar) is what they waited for.
        story = _first(findings, RANK_STORIES, Severity.WARNING)
        if story is not None and (story.ranks or story.hosts):
            klass = story
    wait = next((f for f in findings if f.rule == "MN3" and f.severity is Severity.ERROR), None)
    if culprit is None and klass is None:
        return None, None

    parts: list[str] = []
    ranks: list[int] = []
    hosts: list[str] = []
    last = None
    if klass is not None and _blames_elsewhere(klass, culprit):
        # The class names the root cause; the rank that failed first is its victim.
        ranks, hosts = list(klass.blame_ranks), list(klass.blame_hosts)
        where = ", ".join(hosts) if hosts else ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
        parts.append(f"{where}: {klass.title} ({klass.rule}): {klass.summary}")
        if culprit is not None:
            parts.append("then " + culprit.summary.replace(" failed first", " failed", 1))
        last = _who(ranks, hosts, f"{klass.rule}: {klass.summary}")
    else:
        if culprit is not None:
            ranks, hosts = list(culprit.ranks), list(culprit.hosts)
            parts.append(culprit.summary)
            last = _who(ranks, hosts, f"{culprit.rule}: {culprit.summary}")
        elif klass is not None and klass.rule != "MN3" and (klass.hosts or klass.ranks):
            ranks = list(klass.blame_ranks or klass.ranks)
            hosts = list(klass.blame_hosts or klass.hosts)
            if len(hosts) == 1:
                last = _who(ranks, hosts, f"{klass.rule}: {klass.summary}")
        if klass is not None and klass is not wait and (culprit is None or klass.rule != culprit.rule):
            parts.append(f"{klass.title} ({klass.rule}): {klass.summary}" if culprit else klass.summary)
    if wait is not None:
        # What the rest of the job did: "63 ranks then waited 30 min in ALLREDUCE SeqNum 4521 ... (MN3)".
        parts.append(f"then {wait.summary} (MN3)" if parts else wait.summary)
    if culprit is None and (klass is None or klass.rule == "MN3"):
        parts.append("the evidence does not single out one rank")
    if ranks and not hosts:  # where the culprit ran, when a rule named only its rank
        hosts = sorted({job.rank_hosts[r] for r in ranks if r in job.rank_hosts})
        if last is not None and last.get("host") is None and len(hosts) == 1:
            last["host"] = hosts[0]
    rule = klass.rule if klass is not None and klass.rule != "MN3" else (culprit.rule if culprit else "MN3")
    verdict = {"summary": "; ".join(p.rstrip(".") for p in parts if p), "rule": rule,
               "ranks": sorted(set(ranks)), "hosts": sorted(set(hosts))}
    return verdict, last
