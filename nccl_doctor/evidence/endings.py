"""How each rank ended, and the ranks that ended unlike the others.

When no rank failed on its own, the errors in the logs are echoes: a rank timed out waiting in a
collective or at the store, or a peer closed the connection under it. Those ranks were waiting for
someone. The ranks that ended *without* such an echo are the ones they waited for:

* ``quiet_odd_ones(job)``: every rank of the job but a few ended in an echo (or was stopped by the
  launcher after writing one), and those few wrote no error at all: hung (the launcher had to stop
  them with SIGTERM) or gone without a word (no failed exit in the launcher's table: status 0);
* ``late_arrivals(job)``: the others timed out waiting, and a rank's only error is that a peer had
  closed the connection: it reached the collective after the others gave up;
* ``lost_peer_only(job)``: ranks lost a peer and nothing else is said (no cause, no timeout, no
  quiet rank): the job failed, and the logs do not single out the process that went away.

Each rank's ending is one of: cause (an error of its own), timeout, echo, killed (the launcher
stopped it and it wrote no error) or none. Results are cached per job like the facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel, RankState
from ..model.hosts import LOOPBACK
from .causes import (
    _PEER_GONE,
    _TIMEOUT_ECHOES,
    classify,
    worker_exit_code,
)
from .exits import forced_kills
from .facts import _per_job, file_host, fmt_ranks, global_rank, int_in, plural, record_text
from .failures import failures
from .headless import cut_traceback
from .nodename import node_name
from .pids import fail_ranks, state_for_pid, table_rank
from .recovery import clean_restart
from .sites import script_site
from .statements import aborted_in_tables, lone_abort, mismatch_reports
from .stopraised import _OWN, after_signal, stop_words, terminated
from .storeloss import waits_ended, without_late_store_losses
from .teardown import harmless
from .timeouts import P2P_CALLS, c10d_call, timed_out_states, timeouts_by_pg
from .tracebacks import handled

_WAITED = re.compile(r"[Tt]imed out|[Tt]imeout")
#: At most this share of the world may end unlike the rest for the rest to single them out.
ODD_SHARE = 4


@dataclass(slots=True, eq=False)
class Ending:
    rank: int
    state: RankState | None
    how: str  # cause | timeout | echo | story | killed | cut | none
    events: list[Event] = field(default_factory=list)
    peer_gone: bool = False  # its echo is a peer that closed the connection
    left: bool = False  # its node's launcher table leaves it out: it had exited with status 0


@_per_job
def endings(job: JobModel) -> dict[int, Ending]:
    """rank -> how it ended, for every rank of the world (known size) or every rank seen."""
    known = job.known_ranks()
    # The claimed world only when the logs cover it (JobModel.partial_logs): then it is about as long
    # as the ranks seen; a claim far beyond them is not a list of ranks that ended without a word.
    world = range(job.ranks_expected) if job.ranks_expected and not job.partial_logs else sorted(known)
    caused = {f.rank for f in failures(job) if f.rank is not None and not f.recovered}
    timed = timed_out_states(job)
    timed_ranks = {r for pt in timeouts_by_pg(job).values() for r in pt.ranks}
    killed = launcher_kills(job)
    left = left_early(job)
    exits = {int_in(e.get("rank")) for e in job.by_kind("elastic_cfe")
             if int_in(e.get("exitcode")) not in (None, 0, -15, 143) and "TERM" not in str(e.get("sig") or "")
             and int_in(e.get("rank")) not in killed}
    # by when another rank's wait had ended: the earliest, or for that rank itself the next (not a min per rank: W x W)
    ends_first = sorted(waits_ended(job).items(), key=lambda rt: rt[1])[:2]
    out: dict[int, Ending] = {}
    for rank in world:
        st = known.get(rank)
        own = [e for e in st.events if (e.kind in _OWN or _logged_echo(e)) and not harmless(job, e)
               and not handled(job, e)] if st is not None else []  # (what a handler dealt with, retried)
        other_ended = next((t for r, t in ends_first if r != rank), None)
        own = without_late_store_losses(own, other_ended)
        # what it raised because it was stopped (the launcher's SIGTERM, an interrupt) is no ending of its own
        ended_by_stop = [terminated(job, e) or after_signal(job, st, e) for e in own]
        stopped_here = rank in killed or any(ended_by_stop)
        # (torchrun's own traceback among its unlabelled lines, relays.agent_tracebacks, is none of its errors; the
        # signal it tells of is the rank's stop too)
        own = [e for e, stop in zip(own, ended_by_stop, strict=True) if not stop and not e.get("by_agent")]
        if rank in caused:
            how = "cause"
        elif rank in timed_ranks or (st is not None and id(st) in timed):
            how = "timeout"
        elif any(e.kind in _TIMEOUT_ECHOES or _WAITED.search(record_text(e)) for e in own):
            how = "timeout"  # it waited (in a collective, at the store, at a barrier) until it gave up
        elif own or rank in exits:
            how = "echo"  # its errors, or the failed exit the launcher reports, echo another's failure
        elif st is not None and (errs := [e for e in st.errors if not handled(job, e)]) \
                and not (stopped_here and all(stop_words(job, e) for e in errs)):
            how = "story"  # an error line of another kind (a W&B timeout, an NCCL WARN): its own rule tells
        elif stopped_here:
            how = "killed"
        elif st is not None and cut_traceback(job, st) is not None:
            how = "cut"  # it raised, and the copy ends inside its traceback: no rank that stayed quiet (t430's head -c)
        else:
            how = "none"
        gone = how == "echo" and any(_PEER_GONE.search(record_text(e)) for e in own) \
            and all(classify(e, True, False) is None for e in own)
        gone_early = how == "none" and rank in left
        out[rank] = Ending(rank, st, how, own[:2] + killed.get(rank, [])[:1] + (left[rank][:2] if gone_early else []),
                           gone, gone_early)
    return out


def _logged_echo(ev: Event) -> bool:
    """A logged error that quotes a lost peer or a wait that timed out ("evaluation sync failed after step 20:
    ... Connection closed by peer"): the rank's record of an echo, as its traceback would be."""
    if ev.kind != "log_error":
        return False  # (before the text: endings asks this of every event of every rank)
    text = record_text(ev)
    return _PEER_GONE.search(text) is not None or _WAITED.search(text) is not None


@_per_job
def launcher_kills(job: JobModel) -> dict[int, list[Event]]:
    """rank -> the launcher's lines that stopped it (SIGTERM to its pid, -15/143 in torchrun's table, a
    container's 143 or a service's SIGTERM)."""
    out: dict[int, list[Event]] = {}
    for ev in job.by_kind("elastic_cfe"):
        code, rank = int_in(ev.get("exitcode")), int_in(ev.get("rank"))
        if rank is not None and (code in (-15, 143) or "TERM" in str(ev.get("sig") or "")
                                 or int_in(ev.get("pid")) in forced_kills(job, ev.file)):
            out.setdefault(rank, []).append(ev)
    unknown: dict[str, list[Event]] = {}  # file -> the stops of pids no line or table row names
    # A worker the agent sent SIGTERM to while it was already failing (its timeout raised in the same poll) ends
    # with its own status in the table (1, not -15): the stop did not end it, its own error did. Only where its
    # own lines are not there to tell (none, or a file cut short): a handler of the signal (Lightning's) exits 1 too.
    own_exit = {(ev.file, int_in(ev.get("pid"))) for ev in job.by_kind("elastic_cfe")
                if 0 < (int_in(ev.get("exitcode")) or 0) < 128 and "TERM" not in str(ev.get("sig") or "")}
    known = job.known_ranks()
    for ev in job.by_kind("elastic_sigterm"):
        st = state_for_pid(job, ev.get("pid"), ev.host, ev.file)
        rank = st.rank if st is not None else table_rank(job, ev.file, int_in(ev.get("pid")))
        own = st if st is not None else known.get(rank) if rank is not None else None
        if (ev.file, int_in(ev.get("pid"))) in own_exit and (own is None or job.only_in_cut_files(own)):
            continue
        if rank is not None:  # (a process whose lines name no pid: the failure table's row of that pid)
            out.setdefault(rank, []).append(ev)
        else:
            unknown.setdefault(ev.file, []).append(ev)
    for ev in job.by_kind("spawn_sigterm"):  # (only to account for the ranks its table leaves out)
        unknown.setdefault(ev.file, []).append(ev)
    _stopped_unlisted(job, unknown, out)
    for ev in job.by_kind("unit_exit"):  # a container stopped (143), a service's process SIGTERMed
        rank = fail_ranks(job, ev)[0]
        if rank is not None and worker_exit_code(ev) == -15:
            out.setdefault(rank, []).append(ev)
    return out


def _stopped_unlisted(job: JobModel, unknown: dict[str, list[Event]], out: dict[int, list[Event]]) -> None:
    """A launcher that lists only the first failure (``torch.multiprocessing.spawn``, behind
    elastic_launch's function entrypoints: "<NO_OTHER_FAILURES>") leaves the workers it then stopped
    out of its table, and names them only by pid ("Terminating process 32530 via signal SIGTERM").
    When it stopped as many pids its table does not hold as there are ranks of its group the table
    leaves out, those ranks were running until stopped: none had left early."""
    if not unknown:
        return
    gone = left_early(job)
    for file, evs in unknown.items():
        ranks = [r for r, lines in gone.items() if r not in out and any(e.file == file for e in lines)]
        if ranks and len(ranks) == len({int_in(e.get("pid")) for e in evs}):
            for r in ranks:
                out.setdefault(r, []).extend(evs)


@_per_job
def quiet_odd_ones(job: JobModel) -> tuple[list[Ending], str]:
    """(the few ranks that wrote no error while all the others ended in echoes, what the others saw)."""
    ends = endings(job)
    if not ends or any(e.how == "cause" for e in ends.values()) or clean_restart(job) is not None:
        return [], ""  # (an attempt the job got over: the restarted group trained on)
    waited = [e for e in ends.values() if e.how in ("timeout", "echo")]
    timed = sum(e.how == "timeout" for e in waited)
    quiet = [e for e in ends.values() if e.how in ("killed", "none")]
    if not timed:
        # Nobody waited out a timeout: a peer went away. A rank the launcher stopped was still
        # alive then, and a rank with no line at all may just not print: only a rank whose own
        # lines stop with no error, and no failed exit, left -- or one that its node's launcher
        # table leaves out (it had exited with status 0 before the others failed).
        absent = [e for e in quiet if e.how == "none" and e.state is None and not e.left]
        quiet = [e for e in quiet if e.how == "none" and (e.state is not None or e.left)]
        if not quiet and len(absent) == 1 and all(e.how == "echo" and e.peer_gone for e in waited) \
                and len(waited) == len(ends) - 1:
            # every other rank of the world says it lost a peer, each in its own lines: the one rank with no line at
            # all is the peer they lost (alive, it would have lost them too and said so)
            quiet = absent
    if not waited or not quiet or (len(quiet) > max(1, len(ends) // ODD_SHARE)
                                   and not _one_node(job, quiet, waited)):
        return [], ""
    if not timed and _aborted_receivers(job, quiet):
        return [], ""  # gloo aborted them on another collective's data: the desync (DSY1) says why
    if not timed and (a := lone_abort(job)) is not None and a not in {e.rank for e in quiet} \
            and all(e.peer_gone for e in waited if e.rank != a):
        # the peer they lost is the rank gloo aborted on a size mismatch (DSY1 says why); a rank with no error of
        # its own then was stopped with the job (its agent gone), not the one that went away
        return [], ""
    seen = ("timed out waiting" if timed == len(waited) else "lost the connection to a peer" if timed == 0
            else "timed out waiting or lost the connection to a peer")
    return quiet, f"{plural(len(waited), 'rank')} ({fmt_ranks(e.rank for e in waited)}) {seen}"


def _aborted_receivers(job: JobModel, quiet: list[Ending]) -> bool:
    """As many of gloo's size-mismatch aborts with no rank on them (a console without labels) as there
    are quiet ranks, and the others only lost a peer: the quiet ones are the processes gloo aborted,
    silent because ``std::terminate`` prints no rank (torchrun's table would say -6 for them)."""
    torn, _ = mismatch_reports(job)
    unnamed = [e for e in torn if e.kind == "cpp_terminate" and global_rank(job, e) is None]
    # the aborts a launcher's table already gives a rank (-6, 134) do not explain these quiet ones
    told = aborted_in_tables(job) - {e.rank for e in quiet}
    return bool(unnamed) and len(unnamed) == len(torn) and len(unnamed) - len(told) >= len(quiet)


@_per_job
def left_early(job: JobModel) -> dict[int, list[Event]]:
    """Ranks that torchrun's failure table of their node leaves out although it lists other ranks of
    that node. The agent stops every worker still running when one fails (they are listed, SIGTERM
    -15), so a worker of that node that is not listed had already exited, with status 0.

    A node's ranks are a block: ``rank - local_rank`` is its first, and it holds ``world / nodes``
    ranks when the world divides evenly among the tables' hosts (else up to the last rank listed).
    Returns rank -> the lines of the table that leaves it out."""
    tables: dict[tuple, dict[int, int]] = {}  # (file, host) -> rank -> local rank
    lines: dict[tuple, list[Event]] = {}
    for ev in job.by_kind("elastic_cfe"):
        rank, local = int_in(ev.get("rank")), int_in(ev.get("local_rank"))
        if rank is not None and local is not None and 0 <= local <= rank:
            tables.setdefault((ev.file, ev.get("host")), {})[rank] = local
            lines.setdefault((ev.file, ev.get("host")), []).append(ev)
    if not tables:
        return {}
    listed = {r for t in tables.values() for r in t}
    # Past the last rank listed only when the nodes are known to be several (each with its table):
    # one table and one host seen may be one node of a job whose other nodes left no log here.
    # (a node known only by its console's name counts: the one whose whole console just ends, killed with its node)
    seen = {host for _f, host in tables} | set(job.hosts)
    short = {str(h).split(".", 1)[0] for h in seen if h}
    nodes = len(seen) + len({n.split(".", 1)[0] for f in job.files if (n := node_name(job, f))} - short)
    world = job.ranks_expected if job.ranks_expected and not job.partial_logs else None
    per_node = world // nodes if world and nodes > 1 and len(tables) == nodes and world % nodes == 0 else None
    # A rank whose own lines are in the console of the one agent whose table is in that file, and
    # which ran on that agent's host (or the job has one host), was a worker of that agent, whatever
    # the number of nodes: the agent captured its output. (A rank of another node in the same file,
    # whose agent left no table, may have died with its node: not said to have left.)
    hosts_in_file: dict[str, set] = {}
    for f, host in tables:
        hosts_in_file.setdefault(f, set()).add(host)
    one_host = len({h.split(".", 1)[0] for h in job.hosts}) <= 1
    captured: dict[str, set[int]] = {}
    for st in job.ranks:
        if st.rank is None:
            continue
        for f in st.files:
            agent = hosts_in_file.get(f, ())
            if len(agent) != 1:
                continue
            host = next(iter(agent))
            if (st.host and host and st.host.split(".", 1)[0] == str(host).split(".", 1)[0]) \
                    or ((st.host is None or host in LOOPBACK) and one_host):  # (the agent's "localhost": that node)
                captured.setdefault(f, set()).add(st.rank)
    out: dict[int, list[Event]] = {}
    for key, table in tables.items():
        bases = {r - lr for r, lr in table.items()}
        if len(bases) != 1:
            continue
        base = bases.pop()
        top = base + per_node - 1 if per_node else max(table)
        for r in range(base, min(top, base + 4096) + 1):
            if r not in listed:
                out[r] = lines[key]
        for r in captured.get(key[0], ()):
            if r > top and r not in listed and (per_node is None or r < base + per_node):
                out[r] = lines[key]
    return out


@_per_job
def lost_peer_only(job: JobModel) -> list[Ending]:
    """Ranks that lost the connection to a peer when nothing else is said: no rank failed on its
    own, none timed out, none stands out. The job failed (their tracebacks say so), but the process
    that went away left no error here: its log is missing, or it exited without a word."""
    ends = endings(job)
    if any(e.how in ("cause", "timeout") for e in ends.values()) or quiet_odd_ones(job)[0]:
        return []
    if clean_restart(job) is not None:
        return []  # they lost a peer in an attempt the job got over: the restarted group trained on
    lost = [e for e in ends.values() if e.how == "echo" and e.peer_gone]
    if lost and any(mismatch_reports(job)):
        return []  # a process aborted on another collective's data: the desync (DSY1) says why
    return lost


def host_of_rank(job: JobModel, e: Ending) -> str | None:
    if e.state is not None and e.state.host:
        return e.state.host
    if e.rank in job.rank_hosts:
        return job.rank_hosts[e.rank]
    if e.left and len(hosts := {ev.get("host") for ev in left_early(job).get(e.rank, ())} - {None}) == 1:
        return next(iter(hosts))  # (else its files' node, below: a console named after it)
    if e.state is None and e.how == "killed":  # stopped by its node's launcher: that launcher's host
        hosts = {ev.host or file_host(job, ev.file) for ev in launcher_kills(job).get(e.rank, ())}
        if len(hosts) == 1 and None not in hosts:
            return next(iter(hosts))
    files = set(e.state.files) if e.state is not None else set()
    # (a node's console named after it, "cpu-n041.log"; its --log-dir files beside it name none)
    hosts = {node_name(job, f) for f in files} - {None}
    return next(iter(hosts)) if len(hosts) == 1 else None


def _one_node(job: JobModel, quiet: list[Ending], waited: list[Ending]) -> bool:
    """The quiet ranks are every rank of one node, and the others are on other nodes: a node that
    stopped as a whole (it died, or its agent was killed), not a scattering of silent ranks."""
    hosts = {host_of_rank(job, e) for e in quiet}
    if len(hosts) != 1 or None in hosts:
        return False
    others = {host_of_rank(job, e) for e in waited}
    return None not in others and not hosts & others


@_per_job
def late_arrivals(job: JobModel) -> list[Ending]:
    """Ranks whose only error is a peer that went away, while most of the others timed out waiting."""
    ends = endings(job)
    if any(e.how == "cause" for e in ends.values()):
        return []
    timed = [e for e in ends.values() if e.how == "timeout"]
    late = [e for e in ends.values() if e.how == "echo" and e.peer_gone]
    if not timed or not late or len(timed) < len(ends) // 2:
        return []
    if len(late) > max(1, len(ends) // ODD_SHARE) and not _one_node(job, late, timed):
        return []  # (every rank of one node late while the other nodes' timed out: that node stalled)
    # In one stream, a rank that arrived after the others gave up writes its error after all of
    # their timeouts. Written before one of them, it lost a peer that was exiting from its own
    # timeout: one more waiter, not late.
    last_timeout: dict[str, int] = {}
    for e in timed:
        for ev in e.events:
            if ev.kind in _TIMEOUT_ECHOES or _WAITED.search(record_text(ev)):
                last_timeout[ev.file] = max(last_timeout.get(ev.file, 0), ev.line)
    return [e for e in late if (all(ev.line > last_timeout.get(ev.file, 0) for ev in e.events
                                    if _PEER_GONE.search(record_text(ev))) and not _facing(e, timed))
            or _elsewhere(e, timed)]


def _facing(late: Ending, timed: list[Ending]) -> bool:
    """One rank timed out in one collective while this one waited in another (its lost peer was raised
    inside a torch.distributed call other than the timed-out rank's): two ranks each waiting for the
    other, the one that gave up first no earlier than the other; nothing says which side strayed."""
    if len(timed) != 1 or late.state is None or timed[0].state is None:
        return False
    mine, theirs = c10d_call(late.state), c10d_call(timed[0].state)
    if mine is None or theirs is None:
        # (a lost peer raised where no torch.distributed frame shows, DDP's all_reduce under loss.backward(): the
        # script's own lines say where each was)
        mine, theirs = script_site(late.state), script_site(timed[0].state)
        mine, theirs = mine and mine[0], theirs and theirs[0]
    return mine is not None and theirs is not None and mine != theirs


def _elsewhere(late: Ending, timed: list[Ending]) -> bool:
    """Its lost peer stopped it at another line of its script than the one every rank that timed
    out waited at (two at least): it was not in their collective, whenever its error was written
    (a waiter that lost a peer exiting from its own timeout waits at their line). Not for
    point-to-point stages, which wait at different lines by design."""
    states = [e.state for e in timed]
    if late.state is None or len(states) < 2 or None in states \
            or any(c10d_call(st) in P2P_CALLS for st in (*states, late.state)):
        return False
    sites = [script_site(st) for st in states]
    mine = script_site(late.state)
    if mine is None or None in sites or len({s[0] for s in sites}) != 1:
        return False
    return mine[0] != sites[0][0] and mine[0][0] == sites[0][0][0]  # same script, another line
