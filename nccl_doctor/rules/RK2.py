"""RK2 rank missing or silent: a rank the job expected wrote nothing, or went quiet first.

A dead rank usually writes nothing: no error, no timeout. We name a rank as missing/silent when
Horovod's stall inspector lists it (``missing ranks: R`` names the missing rank, not the reporter),
when the job's size is known and a rank has no line while the job failed, when it left no
flight-recorder dump while the other ranks did (a killed rank writes none), when it reported no
timeout in the default group while the others timed out, or when its log stops at an earlier NCCL
init stage than everyone else's. A log excerpt that simply does not show some ranks is not
evidence: without a known world size and per-rank files we say "hint", not "missing". When ranks
only lost a peer and nothing names who went away, we say that, naming no rank. A node killed whole with
the rendezvous store it hosted (the others' agents lost the store, its console just ends) is named.
"""

from __future__ import annotations

from ..evidence import facts
from ..evidence.endings import lost_peer_only
from ..evidence.facts import fmt_ranks, plural
from ..evidence.nodeloss import LostStoreNode, store_node_lost
from ..evidence.nodename import node_name
from ..evidence.outside import interrupted as _interrupted
from ..evidence.outside import stopped_from_outside
from ..evidence.restarts import got_over
from ..evidence.silent import empty_node
from ..findings import Finding, Severity
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list[Finding]:
    suspects = facts.silent_ranks(job)
    if not suspects:
        return _unknown_peer(job, rule)
    confirmed = [s for s in suspects if s.confirmed]
    if not confirmed:
        return [_hint(rule, suspects)]
    chosen = facts.strongest(confirmed)
    summary = facts.suspects_summary(chosen, (chosen[0].what or "is missing or went silent") if len(chosen) == 1
                                     else "are missing or went silent")
    picked = {id(s) for s in chosen}  # by identity, in a set: a list made this quadratic
    weaker = [s for s in suspects if id(s) not in picked and s.rank is not None]
    if weaker:
        summary += f"; weaker hints also point at ranks {fmt_ranks(s.rank for s in weaker)}"
    summary += got_over(job)
    evidence = [e for s in chosen for e in s.events][:8]
    return [rule.finding(summary, confidence=chosen[0].confidence, ranks=[s.rank for s in chosen],
                         hosts=[s.host for s in chosen], evidence=evidence, first_seen=facts.first_ts(evidence),
                         subject=chosen[0].label if len(chosen) == 1 else "")]


def _unknown_peer(job: JobModel, rule: Rule) -> list[Finding]:
    """Ranks lost a peer and nothing else is said: the job failed, and its cause is a process that
    left no error here. Said as such, naming no rank (rather than "no failure found")."""
    lost = lost_peer_only(job)
    if not lost:
        gone = store_node_lost(job)
        return [_store_node(job, gone, rule)] if gone is not None else []
    node = facts.stopped_node(job)
    if node is not None:
        return [_stopped_node(node, rule)]
    if stopped_from_outside(job) or _interrupted(job):
        return []  # the stop itself took the peers away (a preemption, Ctrl-C): the job's note says so
    empty = empty_node(job)
    if empty is not None:
        return [_empty_node(empty, lost, rule)]
    summary = (f"{plural(len(lost), 'rank')} ({fmt_ranks(e.rank for e in lost)}) lost the connection to a peer, "
               "and no rank in these logs failed on its own: the process that went away left no error here "
               "(its log is not among these, or it exited without a word); nothing here singles it out")
    evidence = [e for end in lost for e in end.events[:1]][:6]
    return [rule.finding(summary, confidence="low", evidence=evidence, first_seen=facts.first_ts(evidence))]


def _stopped_node(node: facts.StoppedNode, rule: Rule) -> Finding:
    lost, n = node.lost, len(node.states)
    summary = (f"{plural(len(lost), 'rank')} ({fmt_ranks(e.rank for e in lost)}) lost the connection to a peer, "
               f"while the {plural(n, 'process')} on {node.host} (their ranks not in the logs) stopped "
               "with no error, and that node's log ends with no launcher report: the node itself stopped "
               "(it died, lost power or its agent was killed)")
    evidence = [r.events[-1] for r in node.states][:3] + [e for end in lost for e in end.events[:1]][:3]
    return rule.finding(summary, confidence="medium", hosts=[node.host], evidence=evidence, blame_hosts=[node.host],
                        first_seen=facts.first_ts(evidence), subject=f"the node {node.host} ({plural(n, 'process')})")


def _empty_node(empty: tuple[str, list[int]], lost: list, rule: Rule) -> Finding:
    host, unseen = empty
    summary = (f"{plural(len(lost), 'rank')} ({fmt_ranks(e.rank for e in lost)}) lost the connection to a peer, while "
               f"{'rank' if len(unseen) == 1 else 'ranks'} {fmt_ranks(unseen)} wrote no line here and the console of "
               f"{host} is empty, its launcher's lines too: that node most likely went away whole (it died, lost power "
               "or its agent and workers were killed) with the ranks they lost")
    evidence = [e for end in lost for e in end.events[:1]][:4]
    return rule.finding(summary, confidence="medium", hosts=[host], evidence=evidence, blame_hosts=[host],
                        first_seen=facts.first_ts(evidence), subject=f"the node {host}")


def _store_node(job: JobModel, node: LostStoreNode, rule: Rule) -> Finding:
    ranks = [s.rank for s in node.states]
    others = sorted({h for e in node.losses if (h := node_name(job, e.file)) is not None} - {node.host})
    where = f"the agent on {', '.join(others)}" if others else "another node's agent"
    lasts = [s.events[-1] for s in node.states]
    summary = (f"the node {node.host} ({'rank' if len(ranks) == 1 else 'ranks'} {fmt_ranks(ranks)}) went away: its log ends with "
               f"no error and no launcher report, while {where} lost the rendezvous store it hosted and stopped its "
               "own workers before they could fail: the node itself stopped (it died, lost power or was killed)")
    evidence = lasts[:2] + node.losses[:2]
    return rule.finding(summary, confidence="medium", ranks=ranks, hosts=[node.host] * len(ranks), evidence=evidence,
                        blame_hosts=[node.host], first_seen=facts.first_ts(evidence), subject=f"the node {node.host}")


def _hint(rule: Rule, suspects: list[facts.Suspect]) -> Finding:
    """Silence we cannot confirm (a combined log may just not show these ranks): a warning, not a verdict."""
    summary = (f"{plural(len(suspects), 'rank')} ({fmt_ranks(s.rank for s in suspects) or '?'}) did not report "
               f"while others failed or timed out ({suspects[0].reason}); the logs may not include them, "
               "so this is a hint")
    evidence = [e for s in suspects for e in s.events][:6]
    return rule.finding(summary, severity=Severity.WARNING, confidence="low", ranks=[s.rank for s in suspects],
                        hosts=[s.host for s in suspects], evidence=evidence, first_seen=facts.first_ts(evidence))
