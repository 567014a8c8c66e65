"""Who went quiet: the suspects RK2 (missing or silent) names.

``silent_ranks(job)``: ranks that wrote nothing, left no flight-recorder dump while the others did,
stopped early with no error while the others went on, ranks torch names as never arriving (a
monitored barrier, a store key never set), a node that never joined the rendezvous, and the ranks
that ended unlike all the others (``endings``). Built on the timeouts, failures and lagging ranks
(``suspects``); importable from ``facts`` too. Results are cached per job like the facts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import JobModel, RankState
from ..model.job import ERROR_KINDS
from ..model.links import rank_list
from .alike import common_complaints
from .dumps import dump_facts
from .endings import Ending, host_of_rank, lost_peer_only, quiet_odd_ones
from .facts import _per_job, _stem, file_host, int_in, name_ranks, per_rank_layout, pg_label, plural
from .failures import failures, job_failed, killed_ranks
from .hang import silent_hang
from .headless import cut_traceback
from .named import named_silent
from .nodename import node_name
from .progress import PHASE_WORDS, phase_of
from .ras import healthy as healthy_report
from .rendezvous import deadlocked, incomplete
from .retrying import repeated_failure
from .standing import point_at_stacks
from .statements import barrier_roots, named_by_torch
from .suspects import _CONF, Suspect, lagging_ranks, stage_outliers
from .timeouts import timed_out_states, timeouts_by_pg


@_per_job
def silent_ranks(job: JobModel) -> list[Suspect]:
    """Ranks that wrote nothing, or stopped early with no error while the others went on."""
    found: dict[Any, Suspect] = {}
    failed_states = {id(f.state) for f in failures(job) if f.state is not None}
    failed_ranks = {f.rank for f in failures(job) if f.rank is not None}
    timed = timed_out_states(job)

    killed_states, killed = killed_ranks(job)
    spoke = _snippet_ranks(job)  # Ray's controller quotes their errors: not silent, even when deduplicated away
    common = common_complaints(job)  # what every rank logged alike before they parted: no error of its own
    waited = barrier_roots(job)  # a monitored barrier's root that reported missing ranks timed out there

    def quiet(st: RankState | None, rank: int | None) -> bool:
        """No error (not even an echo of someone else's), no timeout and no kill by the launcher:
        the dead rank usually writes nothing."""
        busy = st is not None and (id(st) in failed_states or id(st) in timed or id(st) in killed_states
                                   or any(id(e) not in common for e in st.errors))
        return not busy and rank not in failed_ranks and rank not in killed and rank not in spoke \
            and rank not in waited

    def add(s: Suspect) -> None:
        if s.host is None and s.rank is not None:
            s.host = job.rank_hosts.get(s.rank)
        key = s.rank if s.rank is not None else id(s.state if s.state is not None else s)
        if key not in found or _CONF[s.confidence] > _CONF[found[key].confidence]:
            found[key] = s

    known = job.known_ranks()  # once: per named rank (per missing rank) it made this quadratic
    for ev in job.by_kind("hvd_missing_ranks"):
        for rank in sorted(set(rank_list(str(ev.get("ranks") or "")))):
            add(Suspect(rank, known.get(rank), "Horovod reports it never submitted the tensor "
                        f"{ev.get('tensor') or ''} (missing ranks)".replace("  ", " "), "high", [ev]))
    for said in named_by_torch(job):  # the waiters name whom they waited for
        for rank in said.ranks:
            add(Suspect(rank, known.get(rank), said.reason, "high", said.events))
    absent = incomplete(job)
    if absent is not None:
        add(Suspect(None, None, absent.what, "high", absent.events, label="a node that --nnodes expects"))
    stuck = deadlocked(job)
    if stuck is not None:
        add(Suspect(None, None, stuck.what, "high", stuck.events, label="the next rendezvous round",
                    what="never came together"))
    for n in named_silent(job):  # a saved ncclras report or the Flight Recorder analyzer names them
        if quiet(n.state, n.rank):
            add(Suspect(n.rank, n.state, n.reason, n.confidence, n.events, n.pg, host=n.host))
    exited = _reported_exits(job)
    gone = dump_facts(job).missing  # ranks without a flight-recorder dump while the others wrote one
    if gone is not None and gone.confidence != "low":
        for rank in gone.ranks:
            # a rank whose exit the launcher reported as the echo of another's failure left no dump
            # for that reason; a rank that died of its own failure (-9) did not write one either
            if rank not in killed and (rank not in exited or rank in failed_ranks):
                add(Suspect(rank, known.get(rank), f"it {gone.reason}", gone.confidence,
                            gone.evidence[:3]))
    symptom = job_failed(job)
    per_rank = per_rank_layout(job)
    # Processes whose rank is unknown may be the "missing" ranks: then absence is only a hint.
    roster = _ray_roster(job)  # Ray Train's table of every worker's pid: other actors are no ranks
    rankless = any(r.rank is None and (r.host or r.pid is not None) and (roster is None or r.pid in roster)
                   for r in job.ranks) or _unclaimed_writers(job)
    missing = [r for r in job.missing_ranks() if r not in spoke] if symptom else []
    # Nearly every rank is in the logs: then a rank without a line really wrote none.
    covered = bool(job.ranks_expected) and job.ranks_expected >= 4 and \
        job.ranks_expected - len(missing) >= 0.9 * job.ranks_expected
    elsewhere = _not_given(job)
    for rank in missing:
        if rank in killed or rank in exited or rank in spoke:
            continue  # the launcher reports how it ended: not a rank that never ran
        if elsewhere(rank):
            add(Suspect(rank, None, f"the job has {job.ranks_expected} ranks but rank {rank} is not in these logs "
                        "(its own log, or its node's, is not among them)", "low", [], confirmed=False))
        elif rankless and not per_rank:
            add(Suspect(rank, None, f"the job has {job.ranks_expected} ranks but no line names rank {rank}",
                        "low", [], confirmed=False))
        else:
            host = _neighbours_host(known, rank)
            where = f" (probably on the host of its neighbours {rank - 1} and {rank + 1})" if host else ""
            if host is None and len(missing) == 1 and (host := _node_of_the_missing(job)) is not None:
                where = f" (probably on {host}, the one node whose console holds no known rank's lines)"
            add(Suspect(rank, None, f"the job has {job.ranks_expected} ranks but rank {rank} wrote no line{where}",
                        "high" if per_rank else "medium", [], host=host,
                        confirmed=per_rank or covered or _launcher_labelled(job) or roster is not None))
    if symptom:
        if healthy_report(job) is None:  # ncclras got an answer from every rank: nobody went silent
            _silent_in_timeouts(job, add, quiet, per_rank)
        for st, stage, top in stage_outliers(job):
            if quiet(st, st.rank) and (st.rank is not None or st.host):
                ev = [e for e in st.events if e.kind.startswith("nccl_")][-1:]
                add(Suspect(st.rank, st, f"stopped at NCCL init stage '{stage}' with no error while most "
                            f"ranks reached '{top}'", "medium", ev))
    elif silent_hang(job) is not None:
        for st, ev, others in stuck_in_phase(job):
            add(Suspect(st.rank, st, f"its last line shows it in {PHASE_WORDS.get(ev[1], ev[1])} that "
                        f"{others} did not enter, and nothing came from it after that while the job hung",
                        "medium", [ev[0]], ended=f"in {PHASE_WORDS.get(ev[1], ev[1])}"))
    # Last: the same ranks are often named above with the collective they did not reach.
    odd, seen = quiet_odd_ones(job)
    node = {host_of_rank(job, e) for e in odd} if len(odd) > 1 else set()
    for e in odd:
        if e.state is None and e.rank is not None and elsewhere(e.rank):
            continue  # its log was not given: its silence here says nothing (see _not_given)
        ended = ""
        if len(node) == 1 and None not in node:
            lost = next(iter(node))
            reported = any(file_host(job, ev.file) == lost for ev in job.by_kind("elastic_failed", "elastic_cfe"))
            why, conf = (f"every rank of {lost} stopped with no error while {seen}" + (
                ", and its launcher stopped them" if reported else ", and that node's log ends with no launcher "
                "report: the node itself stopped (it died, lost power or its agent was killed)")), "high"
        elif e.how == "killed" and any(int_in(ev.get("exitcode")) in (-9, 137) for ev in e.events):
            why, conf, ended = (f"it wrote no error of its own while {seen}; the launcher had to kill it (SIGTERM, then SIGKILL "
                                "when it did not stop): it was hung or frozen"), "high", "killed"
        elif e.how == "killed" and (loop := repeated_failure(job, e.state)) is not None:
            why, conf, ended = (f"it wrote no error of its own but kept handling one, {loop.said()}, while {seen}; "
                                "the launcher had to stop it (SIGTERM): it was stuck repeating that and never reached "
                                "the collective they waited in"), "high", "looping"
        elif e.how == "killed":
            why, conf = f"it wrote no error of its own while {seen}; the launcher had to stop it (SIGTERM): it was hung", "high"
            if e.state is not None and e.state.events:  # (no clock says whether it was stuck or slow)
                why += ", or still busy with what its last line shows"
            ended = "stopped"
        elif e.left:
            why, conf, ended = (f"it is not among the failed processes in its node's launcher report, so it had "
                                f"already exited with status 0 when {seen}: it left the job early (a return or exit "
                                "in the script, a shorter data shard)"), "high", "left"
        elif (loop := repeated_failure(job, e.state)) is not None:
            why, conf, ended = (f"it wrote no error of its own but kept handling one, {loop.said()}, while {seen}: it was "
                                "stuck repeating that and never reached the collective they waited in"), "high", "looping"
        elif (done := _said_it_finished(e.state)) is not None:
            why, conf, ended = (f"its last line says \"{done.text[:120]}\" while {seen}: it left the job early (a return "
                                "or exit in the script, a shorter data shard)"), "high", "left"
        elif e.state is not None:
            why, conf = f"it wrote no error of its own while {seen}, and its lines stop there: it hung or left without a word", "high"
        else:
            why, conf = f"it wrote no line while {seen}", "medium"
        host = host_of_rank(job, e)
        if host is None and e.state is None and len(odd) == 1 and (host := _node_of_the_missing(job)) is not None:
            why += f"; it was probably on {host}, the one node whose console holds no known rank's lines"
        add(Suspect(e.rank, e.state, why, conf, e.events or (e.state.events[-1:] if e.state else []),
                    host=host, ended=ended))
    for s in found.values():  # a dump of its own stacks (faulthandler) says where it was stuck: point at it
        point_at_stacks(s, len(found), job)
    return sorted(found.values(), key=lambda s: (s.rank is None, s.rank or 0))


def _not_given(job: JobModel) -> Callable[[int], bool]:
    """Whether a rank's absence only says its log was not given, when the input is one file: one
    rank's own (a --log-dir stderr.log, rank3.log: no launcher line in it), or one node's console
    whose torchrun agent names its node's ranks (its rendezvous line, or a failure table of its whole
    worker group, local ranks 0..k-1, fewer than the world's) and the rank is not among them."""
    if len(job.files) != 1:
        return lambda rank: False
    ranks = {r.rank for r in job.ranks if r.rank is not None}
    agent = job.by_kind("elastic_cfe", "elastic_rdzv", "elastic_failed", "elastic_sigterm")
    if not agent:
        return (lambda rank: True) if len(ranks) <= 1 else (lambda rank: False)
    present: set[int] = set()
    for ev in job.by_kind("elastic_rdzv"):
        present.update(rank_list(ev.get("global_ranks")))
    table = {(int_in(e.get("rank")), int_in(e.get("local_rank"))) for e in job.by_kind("elastic_cfe")}
    local = {lr for _r, lr in table if lr is not None}
    if any(r is not None and lr is not None and r != lr for r, lr in table) or \
            (local and local == set(range(len(local))) and job.ranks_expected and len(local) < job.ranks_expected):
        present.update(r for r, _lr in table if r is not None)
    return (lambda rank: rank not in present) if present else (lambda rank: False)


def _unclaimed_writers(job: JobModel) -> bool:
    """A file of its own that no rank claims holds a process's errors or steps (a script's
    ``logs/<host>-<pid>.log``): a process of unknown rank wrote it, and may be a "missing" rank."""
    claimed = {f for r in job.ranks for f in r.files}
    return any(e.file not in claimed and e.rank is None and job.rank_of(e) is None
               for e in job.by_kind(*ERROR_KINDS, "gloo_timeout", "train_step"))


def _said_it_finished(st: RankState | None):
    """The rank's last line, when it says its training ended ("training finished") short of the steps it planned
    (its last step line "step 8/40"): it returned early, no hang. (A rank that finished every step it planned
    finished a later attempt, or the job.)"""
    last = st.events[-1] if st is not None and st.events else None
    if last is None or last.kind != "train_phase" or last.get("phase") != "training" or last.get("state") != "end":
        return None
    steps = [(int_in(e.get("step")), int_in(e.get("total"))) for e in st.events if e.kind == "train_step"][-2:]
    if not steps or None in steps[-1]:
        return None
    at, total = steps[-1]
    before = steps[0][0] if len(steps) == 2 else None
    stride = at - before if before is not None else 1  # (its step lines' spacing: "step 4", "step 8")
    return last if at < total - max(1, stride) else None  # (short of its last step line's next print)


def stuck_in_phase(job: JobModel) -> list[tuple[RankState, tuple[Any, str], str]]:
    """(rank, (its last event, the phase it starts), the others named) for the few ranks whose last
    line starts a phase (a data load, a checkpoint save, an evaluation, start-up work) that no other
    rank's last line is in: in a hung job, where that rank stayed while the others waited for it."""
    lasts: list[tuple[RankState, Any]] = []
    for st in job.ranks:
        if st.rank is not None and st.events:
            lasts.append((st, st.events[-1]))
    phases = {}
    for st, ev in lasts:
        ph = phase_of(ev)
        if ph is not None and ph[1]:
            phases[id(st)] = ph[0]
    if not phases or 2 * len(phases) >= len(lasts) or len(set(phases.values())) != 1:
        return []
    name = next(iter(phases.values()))
    others = name_ranks(st.rank for st, _ in lasts if id(st) not in phases)
    return [(st, (ev, name), others) for st, ev in lasts if id(st) in phases]


def _ray_roster(job: JobModel) -> set[int] | None:
    """The pids of every worker of a Ray Train worker group, when its table lists the whole world."""
    table = {int_in(e.get("rank")): int_in(e.get("pid")) for e in job.by_kind("ray_worker_rank")}
    if not job.ranks_expected or set(table) != set(range(job.ranks_expected)):
        return None
    return {pid for pid in table.values() if pid is not None}


def _snippet_ranks(job: JobModel) -> set[int]:
    """Ranks a Ray Train controller quotes an error of ('[Rank 0,3 Error Snippet]:')."""
    return {r for e in job.by_kind("ray_error_snippet") for r in rank_list(str(e.get("ranks") or ""))}


def _reported_exits(job: JobModel) -> set[int]:
    """Ranks whose failed exit torchrun's table reports (their missing dump is explained by it)."""
    return {int_in(e.get("rank")) for e in job.by_kind("elastic_cfe")
            if int_in(e.get("rank")) is not None and int_in(e.get("exitcode")) not in (None, 0)}


def _neighbours_host(known: dict[int, RankState], rank: int) -> str | None:
    """Ranks are placed in blocks per node: when both neighbours of a missing rank share a host, so
    (almost certainly) does the missing rank. ``known``: ``job.known_ranks()``."""
    lo, hi = known.get(rank - 1), known.get(rank + 1)
    if lo is not None and hi is not None and lo.host and lo.host == hi.host:
        return lo.host
    return None


def _node_of_the_missing(job: JobModel) -> str | None:
    """The one node whose consoles (named after it: ``gpu-node-b.out``) hold no known rank's lines, when one
    rank of the job is missing: its lines, which name no rank, are that rank's."""
    placed = {st.host for st in job.ranks if st.rank is not None and st.host}
    nodes = {name for f in job.files if (name := node_name(job, f)) is not None}
    # a console named like a known node's but for its last word ("gpu-node-b.out" beside gpu-node-a's)
    nodes |= {stem for f in job.files if (stem := _stem(f)) not in nodes
              and any(_sibling_names(stem, host) for host in placed)}
    others = nodes - placed
    return next(iter(others)) if len(others) == 1 and placed and placed <= nodes else None


def empty_node(job: JobModel) -> tuple[str, list[int]] | None:
    """(the node, the ranks of the world no line names) when ranks of the world wrote nothing and the one node whose
    consoles hold no known rank's lines (``_node_of_the_missing``) left them empty, its agent's lines too: that node
    went away whole, before it could write (a node killed with its agent)."""
    world = job.ranks_expected
    known = set(job.known_ranks())
    if not world or world > 4096 or len(known) >= world:
        return None
    node = _node_of_the_missing(job)
    if node is None:
        return None
    files = [f for f in job.files if _stem(f) == node]
    if not files or any(job.last_lines.get(f) for f in files):
        return None
    return node, sorted(set(range(world)) - known)


def _sibling_names(a: str, b: str) -> bool:
    """Two names that differ only in their last word (``gpu-node-a``, ``gpu-node-b``)."""
    pa, pb = re.split(r"[-_]", a), re.split(r"[-_]", b)
    return a != b and len(pa) == len(pb) >= 2 and pa[:-1] == pb[:-1] and len(pa[-1]) == len(pb[-1])


def _launcher_labelled(job: JobModel) -> bool:
    """Every line of the job carries its rank from the launcher (one combined but labelled stream),
    and no unlabelled worker output (a script's plain prints) sits beside the labelled lines."""
    labelled = [r for r in job.ranks if r.rank is not None and r.rank_source != "flight recorder"]  # dumps: no lines
    if not labelled or not all(r.rank_source == "launcher" for r in labelled):
        return False
    files = {f for r in labelled for f in r.files}
    return not any(r.rank is None and set(r.files) & files and r.of_kind(*_WORKER_OUTPUT) for r in job.ranks)


#: Lines only a worker writes (not the launcher): progress and start-up prints.
_WORKER_OUTPUT = ("train_step", "train_epoch", "rank_world", "startup_work", "checkpoint_load")


def _silent_in_timeouts(job: JobModel, add: Callable[[Suspect], None], quiet: Callable[..., bool],
                        per_rank: bool) -> None:
    """Default-group timeouts: every rank is a member, so a present rank that neither timed out nor
    failed stopped before the others (died without a word, or hung outside the watchdog's reach)."""
    pt = timeouts_by_pg(job).get("default")
    if pt is None or len(pt.ranks) < 2:
        return
    first = pt.ts
    lagging = {s.rank for s in lagging_ranks(job)}
    reporting_hosts = {r.host for r in pt.reports if r.host}
    reported = set(pt.ranks)
    for st in job.ranks:
        if st.rank is None or st.rank in reported or st.rank in lagging or not quiet(st, st.rank):
            continue
        last = st.last_line
        if first is not None and last is not None and last.ts is not None and last.ts >= first:
            continue  # it was still writing when the others timed out
        if job.only_in_cut_files(st) or cut_traceback(job, st) is not None:
            continue  # its lines stop where its file was cut short (inside a traceback): the edge of what was handed over
        # Its own file, a stream whose every line names its rank, or a host whose other ranks' timeouts
        # are in the logs: then the silence is real, not the edge of an excerpt.
        sure = per_rank or st.rank_source == "launcher" or (st.host is not None and st.host in reporting_hosts)
        add(Suspect(st.rank, st, f"it reported no timeout in {pg_label('default')} while "
                    f"{plural(len(pt.ranks), 'rank')} timed out"
                    + (f" in SeqNum {pt.seq}" if pt.seq is not None else ""),
                    "high" if per_rank else "medium" if sure else "low", st.events[-1:], confirmed=sure))


@dataclass
class StoppedNode:
    """A node that went away with its processes: ranks lost a peer, and the processes of unknown
    rank there stopped with no error and no launcher report from that host."""
    host: str
    states: list[RankState]  # its processes (their ranks not in the logs)
    lost: list[Ending]  # the ranks that lost the connection to a peer


@_per_job
def stopped_node(job: JobModel) -> StoppedNode | None:
    """Nothing names a silent rank, ranks only lost a peer (``lost_peer_only``), and the only
    processes of unknown rank (their lines name their host and pid) are all on one host, none of
    them with an error, with no launcher report from that host: that node went away with its
    processes (the node died, or its agent was killed)."""
    if silent_ranks(job):
        return None
    lost = lost_peer_only(job)
    rankless = [r for r in job.ranks if r.rank is None and r.host and r.events]
    hosts = {r.host for r in rankless}
    if not lost or len(hosts) != 1 or any(r.errors for r in rankless):
        return None
    host = next(iter(hosts))
    if any(end.state is not None and end.state.host == host for end in lost) or \
            any(file_host(job, ev.file) == host for ev in job.by_kind("elastic_failed", "elastic_cfe")):
        return None
    return StoppedNode(host, rankless, lost)
