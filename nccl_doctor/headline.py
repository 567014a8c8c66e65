"""The verdict in one line: who, what, and what followed, with the rules behind it.

    rank 225 (gpu-node-057) went silent; 1023 ranks then timed out in ALLREDUCE #39 [RK2, MN3]

The verdict (``verdict.decide``) chooses who is to blame and which class explains it; this module
only words that choice, from the verdict's rule, ranks and hosts, the findings it joined and the
facts behind them. The reasoning stays in the findings: the headline repeats none of their
sentences. At most ``LIMIT`` characters: details are shortened first, then cut.
"""

from __future__ import annotations

from .events import Event
from .evidence import facts
from .evidence.endings import lost_peer_only
from .evidence.facts import fmt_ms, fmt_ranks, plural
from .evidence.hang import silent_hang
from .evidence.named import named_silent
from .evidence.ras import symmetric_hang
from .evidence.rendezvous import deadlocked
from .findings import Finding, Severity
from .model import JobModel

#: The longest headline, in characters (a terminal line and a chat notification).
LIMIT = 140
#: Rank-level rules that name who failed, lagged or went silent, as ``verdict.CULPRIT_ORDER``.
CULPRITS = ("RK1", "RK3", "RK2")
_DOING = {"RK1": "failed first", "RK3": "lagged behind", "RK2": "went silent"}
#: A quiet rank the launcher had to end (``Suspect.ended``) was hung: what the launcher did to it.
_HUNG = {"killed": "kill", "stopped": "stop"}
#: Classes that only say "some NCCL error": the culprit's own error says more.
CATCH_ALL = ("NCX",)


def headline(job: JobModel, findings: list[Finding], verdict: dict) -> tuple[str, list[str]]:
    """One line for a verdict made by ``verdict.decide`` from these findings, and the rule ids it
    joins in causal order (who, what explains it, what followed)."""
    ranks, hosts = list(verdict.get("ranks") or []), list(verdict.get("hosts") or [])
    serious = [f for f in findings if f.severity.level >= Severity.WARNING.level]
    lead = _lead(serious, ranks, hosts)
    klass = next((f for f in serious if f.rule == verdict.get("rule") and f.rule not in (*CULPRITS, "MN3")), None)
    wait = next((f for f in serious if f.rule == "MN3" and f.severity is Severity.ERROR), None)
    rules = list(dict.fromkeys(f.rule for f in (lead, klass, wait) if f is not None)) or [verdict.get("rule", "?")]
    tag = f" [{', '.join(rules)}]"
    text = ""
    for detail, host_limit in ((60, 2), (40, 2), (40, 1), (24, 1), (0, 1)):
        who = _who(lead, ranks, hosts, host_limit)
        lost = lost_peer_only(job) if lead is not None and lead.rule == "RK2" and not ranks and not hosts \
            and not facts.silent_ranks(job) else []
        if lost:  # RK2 with nobody to name: ranks lost a peer that left no error (RK2._unknown_peer)
            first = f"{plural(len(lost), 'rank')} lost the connection to a peer; nothing here singles out the " \
                    "process that went away"
        elif lead is not None:
            first = f"{who} {_doing(job, lead, klass, ranks, hosts, detail)}"
        elif klass is not None and klass.rule == "TO1" and (hang := silent_hang(job)) is not None:
            stepped = isinstance(hang[1], Event) and hang[1].kind == "train_step"
            what = "its progress" if stepped or job.by_kind("train_step") else "its output, before any training step,"
            first = f"the job hung silently: {what} stopped {fmt_ms(hang[0] * 1000)} before its logs end, " \
                    "with no error"  # (error handling, TO1's title, is only what kept it from being one)
        elif klass is not None:
            first = f"{who}: {klass.title}" if who else klass.title
        else:
            first = ""
        then = _followed(job, wait, after=bool(first), short=detail < 40, culprits=tuple(ranks) if lead is not None and lead.rule == "RK1" else ())
        text = "; ".join(p for p in (first, then) if p) or verdict.get("summary", "")
        if not first and then and symmetric_hang(job):
            text += "; a symmetric hang: ncclras saw every rank launch it"  # not a missing or slow rank
        elif not first and then:
            text += "; no single rank stands out" if len(job.ranks) > 1 else "; the rank it waited for is not in the logs"
        if len(text) + len(tag) <= LIMIT:
            return text + tag, rules
    return text[: LIMIT - len(tag) - 1].rstrip(" ;,:") + "…" + tag, rules


def _lead(serious: list[Finding], ranks: list[int], hosts: list[str]) -> Finding | None:
    """The rank-level finding behind the verdict's culprit (its ranks or hosts are the verdict's)."""
    for rule in CULPRITS:
        for f in serious:
            if f.rule == rule and f.severity is Severity.ERROR and (
                    set(f.ranks) & set(ranks) or (not ranks and set(f.hosts) & set(hosts))
                    or (not ranks and not hosts)):
                return f
    return None


def _who(lead: Finding | None, ranks: list[int], hosts: list[str], host_limit: int) -> str:
    where = _hosts(hosts, host_limit)
    if ranks:
        name = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {fmt_ranks(ranks, limit=3)}"
        return f"{name} ({where})" if where else name
    if lead is not None and lead.subject and (not hosts or lead.hosts == hosts):
        return lead.subject  # who the finding names instead of a rank ("a node that --nnodes expects",
        # "the node n2 (2 processes)")
    if hosts:
        return f"a process on {where}" if lead is not None and len(hosts) == 1 else where
    return "a process (rank unknown)" if lead is not None else ""


def _hosts(hosts: list[str], limit: int) -> str:
    if not hosts:
        return ""
    if len(hosts) <= limit:
        return ", ".join(hosts)
    return plural(len(hosts), "host")


def _doing(job: JobModel, lead: Finding, klass: Finding | None, ranks: list[int], hosts: list[str],
           detail: int) -> str:
    """What the culprit did, with the class that explains it or, for a failure, its own error."""
    doing = _DOING[lead.rule]
    accused = _culprit_failure(job, ranks, hosts) if lead.rule == "RK1" else None
    if accused is not None and accused.doing:  # evidence.accused: a rank the others' failures point to, itself unfailed
        doing = accused.doing
    if lead.rule == "RK3" and len(ranks) == 1:
        # what befell it, when the lag has a name of its own ("never exited after training")
        doing = next((s.what for s in facts.lagging_ranks(job) if s.rank in ranks and s.what), doing)
    if lead.rule == "RK2" and ranks and not any(r.rank in ranks for r in job.ranks):
        source = next((n.source for n in named_silent(job) if n.rank in ranks and n.source), "")
        doing = "is missing" if len(ranks) == 1 else "are missing"
        # a saved report that names it (ncclras, torchfrtrace) says more than the silence of the logs
        doing += f" ({source} names {'it' if len(ranks) == 1 else 'them'})" if source else \
            " (no line of its own)" if len(ranks) == 1 else " (no line of their own)"
        ended = _ended(job, ranks)
        if ended == "left":  # endings.left_early: gone before the others failed
            doing = "left the job early (exit status 0, no line of its own)"
        elif ended in _HUNG and len(ranks) == 1:
            doing = f"hung (no line of its own; the launcher had to {_HUNG[ended]} it)"
    elif lead.rule == "RK2" and len(ranks) == 1 and _ended(job, ranks) == "looping":
        doing = "was stuck repeating a failure it handled"  # evidence.retrying: a retry or skip loop
    elif lead.rule == "RK2" and len(ranks) == 1 and _ended(job, ranks) == "left":
        doing = "left the job early (exit status 0, no error)"  # endings.left_early, a rank with lines
    elif lead.rule == "RK2" and (phase := _ended(job, ranks)).startswith("in "):
        # silent.stuck_in_phase: its last line is a phase the others never entered, and the job hung
        doing = f"hung {phase} that the other ranks did not enter"
    elif lead.rule == "RK2" and not ranks and not hosts:
        # (a rendezvous round that never came together is not missing: every agent waited for it)
        doing = "never came together" if deadlocked(job) is not None else "is missing"
    if not detail:
        return doing
    if klass is not None and klass.rule == "TO1" and not klass.ranks and silent_hang(job) is not None:
        # TO1 from the hang alone (no rank logged its error handling off): say what happened, not the
        # title's "NCCL error handling", which a gloo job never had
        return f"{doing}; the job then hung silently (no timeout fired) until its logs end"
    if klass is not None and klass.rule not in CATCH_ALL:
        return f"{doing} ({_bare(klass.title)})"
    if lead.rule == "RK1":
        error = _error(job, ranks, hosts)
        if accused is not None and accused.doing:
            error = error.split("; ")[0]  # why it is accused, before the reasoning
        return f"{doing}: {_short(error, detail)}" if error else doing
    return doing


def _ended(job: JobModel, ranks: list[int]) -> str:
    """How the named silent ranks ended (``Suspect.ended``), when they all ended alike."""
    ended = {s.ended for s in facts.silent_ranks(job) if s.rank in ranks}
    return ended.pop() if len(ended) == 1 else ""


def _error(job: JobModel, ranks: list[int], hosts: list[str]) -> str:
    """What the culprit's own error line says (the cause RK1 found), quoted from the log."""
    mine = _culprit_failure(job, ranks, hosts)
    return mine.what if mine is not None else ""


def _culprit_failure(job: JobModel, ranks: list[int], hosts: list[str]) -> facts.Failure | None:
    """The failure RK1 found of the verdict's ranks (or hosts)."""
    crashes = [f for f in facts.failures(job) if f.crash and not f.recovered]
    return next((f for f in crashes if f.rank is not None and f.rank in ranks), None) or next(
        (f for f in crashes if f.host is not None and f.host in hosts), None) or (crashes[0] if crashes else None)


def _followed(job: JobModel, wait: Finding | None, after: bool, short: bool, culprits: tuple = ()) -> str:
    """What the rest of the job did: '1023 ranks then timed out in ALLREDUCE #39'."""
    if wait is None:
        return ""
    groups = facts.timeouts_by_pg(job)
    if not groups:
        return ""
    pg, main = next(iter(groups.items()))  # the group most ranks timed out in
    at = [r for r in main.reports if main.seq is None or r.seq == main.seq]
    if at and all(r.rank is not None and r.rank in culprits for r in at):
        return ""  # only the culprit's own timeout (evidence.failures._lone_timeout): nobody's after it
    n = len(at)
    where = facts.waited_in(main) + (f" #{main.seq}" if main.seq is not None else "")
    if pg != "default" and not short:
        where += " of " + facts.pg_label(pg)
    return f"{plural(n, 'rank')} {'then ' if after else ''}timed out in {where}"


def _bare(title: str) -> str:
    """A catalogue title inside parentheses, without its own: 'Watchdog thread stuck (heartbeat
    monitor)' -> 'Watchdog thread stuck'."""
    cut = title.find(" (")
    return title[:cut] if cut > 0 else title


def _short(text: str, limit: int) -> str:
    """The first sentence of an error message, cut at a word to ``limit`` characters."""
    text = " ".join(text.split())
    cut = text.find(". ")
    if 0 < cut < limit:
        return text[:cut]
    if len(text) <= limit:
        return text.rstrip(".")
    space = text.rfind(" ", 0, limit)
    return text[: space if space > limit // 2 else limit - 1].rstrip(" ,;:") + "…"
