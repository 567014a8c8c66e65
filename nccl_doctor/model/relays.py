"""Who wrote a line when its writer is told elsewhere: spawn's parent relaying a child's traceback,
loguru's copy of an exception under its pid, a logged traceback under its error record, the lines after head's or tail's "==> file <==" header,
and journald streams that relay several ranks (model/identity.py groups events with these)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from operator import attrgetter

from ..events import Event, by_place
from .links import table_pid_ranks


def relay_writers(events: list[Event]) -> set[str]:
    """Every relay below that the job's kinds of lines can involve (a job has millions of events: a
    relay whose heading kind is absent is not looked for, one pass over the kinds instead of one each).
    Returns the kinds."""
    kinds = set(map(_KIND, events))
    if "traceback_start" in kinds:
        agent_tracebacks(events)
    if "mp_spawn_failed" in kinds:
        spawn_relayed(events)
    if "loguru_caught" in kinds:
        loguru_relayed(events)
    if "pyspy_process" in kinds:
        pyspy_relayed(events)
    if "log_error" in kinds and "traceback_start" in kinds:
        logged_tracebacks(events)
    if "traceback_start" in kinds:
        checkpoint_relayed(events)
    if "rpc_remote" in kinds or "python_exception" in kinds:
        rpc_relayed(events)
    return kinds


_KIND = attrgetter("kind")


def spawn_relayed(events: list[Event]) -> None:
    """torch.multiprocessing.spawn's parent names a failed child by its process index ("-- Process 2
    terminated with the following error:", "process 1 terminated with signal SIGKILL"), which the
    child's function receives as its first argument: its rank, on the one node such a job has (a
    multi-node spawn script adds its node's offset, which nothing in the log says). The traceback
    the parent prints right after the first form is the child's own, relayed: its events are that
    rank's (up to the exception line that ends it). Where the spawning parent is an elastic agent
    (a function entrypoint: the agent's lines are in the file) the index is a local rank on some node:
    the rank only when the agent's failure table in that file gives that local rank's."""
    spawned = [ev for ev in events if ev.kind == "mp_spawn_failed"]
    if not spawned:
        return
    files = {ev.file for ev in spawned}
    agents = {ev.file for ev in events if ev.file in files and ev.kind.startswith("elastic_")}
    # An agent's file may say which rank each local rank is: its failure table's rows (a function
    # entrypoint's children are spawned by the agent, their index a local rank)
    table: dict[tuple[str, int], int] = {}
    for ev in events:
        if ev.kind == "elastic_cfe" and ev.file in agents and isinstance(ev.get("local_rank"), int) \
                and isinstance(ev.get("rank"), int):
            table[(ev.file, ev.get("local_rank"))] = ev.get("rank")
    relaying: tuple[str, int] | None = None
    for ev in events:
        if relaying is not None and (ev.file != relaying[0] or ev.rank is not None or ev.local_rank is not None):
            relaying = None
        proc = ev.get("proc") if ev.kind == "mp_spawn_failed" else None
        rank = proc if ev.file not in agents else table.get((ev.file, proc)) if isinstance(proc, int) else None
        if ev.kind == "mp_spawn_failed" and ev.rank is None and ev.local_rank is None and isinstance(rank, int):
            ev.rank = rank
            if ev.get("exitcode") is None and ev.get("sig") is None:
                relaying = (ev.file, ev.rank)
        elif relaying is not None:
            ev.rank = relaying[1]
            if ev.kind == "python_exception" or ev.get("exc_type"):
                relaying = None  # its exception line ends what it relayed


#: Lines inside a traceback, before its exception line: its head and the frames read as events.
_IN_TRACEBACK = frozenset(("traceback_start", "torch_c10d_frame", "py_script_frame", "py_signal_frame"))
#: Exceptions only torchrun's agent raises (its rendezvous, its signal handler, its failure report: its workers
#: never install elastic's signal handler).
AGENT_EXCEPTION = "torch.distributed.elastic."


def agent_tracebacks(events: list[Event]) -> None:
    """A traceback that ends in torch.distributed.elastic's own exception (``SignalException``,
    ``ChildFailedError``, ``RendezvousConnectionError``), with the tracebacks chained before it ("The above
    exception was the direct cause ..."), is torchrun's agent's, never a rank's. Where an outer launcher labels
    every line of a node (``srun --label`` running one torchrun per node: "0: " is the node's task), that label
    gave its lines a rank: taken off. Where its lines are unlabelled, in a file a rank writes unlabelled too (a
    pod's stderr, a console), they are marked ``by_agent``: the rank's own errors and timeouts leave them out."""
    open_at: dict[tuple[str, int | None], int] = {}  # (file, label rank) -> index of its (chain's) first head
    done: set[tuple[str, int | None]] = set()  # its exception line came: only a chained traceback goes on from it
    chained: set[tuple[str, int | None]] = set()
    for i, ev in enumerate(events):
        key = (ev.file, ev.rank)
        if ev.kind == "traceback_start":
            if key not in chained:
                open_at[key] = i
            chained.discard(key)
            done.discard(key)
        elif ev.kind == "py_chain":
            if key in open_at:  # (its exception line may be of a kind with no exc_type: c10d's store error)
                done.discard(key)
                chained.add(key)
        elif ev.get("exc_type") and key in open_at and key not in done:
            if not str(ev.get("exc_type")).startswith(AGENT_EXCEPTION):
                done.add(key)  # (a chained traceback may follow: "The above exception was the direct cause ...")
                continue
            start = open_at.pop(key)
            for e in events[start:i + 1]:
                if e.file == ev.file and e.rank == key[1]:
                    if key[1] is None:
                        e.fields["by_agent"] = True
                    elif e.kind in _IN_TRACEBACK or e is ev:
                        e.rank = None


def loguru_relayed(events: list[Event]) -> None:
    """loguru's ``logger.catch()`` prints its own copy of an exception with no launcher prefix, under
    "An error has been caught in function ..., process 'MainProcess' (PID)". torchrun's failure table
    names each worker's pid and rank: the header and the copy below it, up to its exception line,
    are that rank's (else a copy of a timeout would count as one more process that timed out)."""
    if not any(ev.kind == "loguru_caught" for ev in events):
        return
    pid_ranks = table_pid_ranks(events)
    relaying: tuple[str, int] | None = None
    for ev in events:
        if ev.kind == "loguru_caught":
            ranks = pid_ranks.get(ev.get("caught_pid"), set())
            relaying = (ev.file, next(iter(ranks))) if len(ranks) == 1 and ev.rank is None else None
            if relaying is not None:
                ev.rank = relaying[1]
        elif relaying is not None:
            if ev.file != relaying[0] or ev.rank is not None or ev.local_rank is not None:
                relaying = None
                continue
            ev.rank = relaying[1]
            if ev.kind not in _IN_TRACEBACK:  # the copy's exception line ends it
                relaying = None


def pyspy_relayed(events: list[Event]) -> None:
    """py-spy heads each dump with the process it read ("Process 604: python train.py"): where torchrun's
    failure table names that pid's rank, the dump's threads (up to the next such head in the file) are
    that rank's, whatever file they were saved in (one file of every rank's dumps, one named by pid)."""
    heads = [ev for ev in events if ev.kind == "pyspy_process"]
    if not heads:
        return
    pid_ranks = table_pid_ranks(events)
    files = {ev.file for ev in heads}
    relaying: tuple[str, int] | None = None
    for ev in events:
        if ev.file not in files:
            continue
        if ev.kind == "pyspy_process":
            ranks = pid_ranks.get(ev.get("dumped_pid"), set())
            relaying = (ev.file, next(iter(ranks))) if len(ranks) == 1 and ev.rank is None else None
        if relaying is not None and ev.kind in ("pyspy_process", "py_stack", "stack_frame_collective") \
                and ev.rank is None and ev.local_rank is None:
            ev.rank = relaying[1]


def logged_tracebacks(events: list[Event]) -> None:
    """``log.exception(...)`` / ``log.critical(..., exc_info=True)``: logging writes the record and the
    traceback below it in one write, and the traceback carries no prefix of its own (torch's ``[rankN]:``
    only reaches an uncaught exception). An error record naming its rank ("CRITICAL [rank1] train:
    unrecoverable error") right above a traceback no prefix claims: that traceback, up to its exception
    line, is the rank's (its own error or an echo, as its text says)."""
    heads = {(ev.file, ev.line): rank for ev in events
             if ev.kind == "log_error" and isinstance(rank := ev.rank if ev.rank is not None else ev.fields.get("rank"),
                                                       int)}
    if not heads:
        return
    files = {f for f, _line in heads}
    relaying: tuple[str, int] | None = None
    for ev in sorted((ev for ev in events if ev.file in files), key=by_place):
        named = ev.rank is not None or ev.local_rank is not None or ev.pid is not None
        if ev.kind == "traceback_start":
            relaying = None
            if not named:
                rank = heads.get((ev.file, ev.line - 1))  # (one write: the record, then its traceback)
                if rank is not None:
                    relaying = (ev.file, rank)
                    ev.rank = rank
            continue
        if relaying is None:
            continue
        if ev.file != relaying[0] or named:
            relaying = None
            continue
        ev.rank = relaying[1]
        if ev.kind not in _IN_TRACEBACK:  # its exception line ends it
            relaying = None


def checkpoint_relayed(events: list[Event]) -> None:
    """torch.distributed.checkpoint gathers the exception a rank raised in a save or load step and
    every rank raises it again (``CheckpointException ranks:dict_keys([2])``), the failing rank's
    traceback inside, headed "Traceback (most recent call last): (RANK 2)": that traceback, up to its
    exception line, is rank 2's own, whoever printed it (the CheckpointException line that follows
    names rank 2 too: evidence.pids.fail_ranks)."""
    if not any("relayed_rank" in ev.fields for ev in events if ev.kind == "traceback_start"):
        return
    relaying: tuple[str, int | None, int] | None = None  # (file, the printer's rank, the relayed rank)
    for ev in events:
        if ev.kind == "traceback_start":
            r = ev.fields.get("relayed_rank")
            relaying = (ev.file, ev.rank, r) if isinstance(r, int) else None
            if relaying is not None:
                ev.rank = r
            continue
        if relaying is None:
            continue
        if ev.file != relaying[0] or ev.rank != relaying[1]:
            continue  # (another rank's line between: its lines interleave in a shared console)
        ev.rank = relaying[2]
        if ev.kind not in _IN_TRACEBACK:  # its exception line ends it
            relaying = None


#: torch.distributed.rpc's heading of a remote exception, on its own line or ending the caller's
#: exception line ("RuntimeError: IndexError: On WorkerInfo(id=2, name=trainer2):"); submitit's driver
#: relaying a task's ("FailedJobError: Job (task=0) failed during processing with trace:").
RPC_REMOTE = re.compile(r"(?:On WorkerInfo\(id=(\d{1,7}), name=[^\s()]{1,128}\)|Job \(task=(\d{1,7})\) failed during "
                        r"processing with trace):\s{0,8}$")
#: Lines between that heading and its traceback (the exception's repr, which may wrap).
_RPC_GAP = 6


_RPC_KINDS = frozenset(("rpc_remote", "python_exception"))


def _rpc_worker(ev: Event) -> int | None:
    if ev.kind == "rpc_remote":
        return ev.fields.get("worker_id")
    if ev.kind == "python_exception":
        m = RPC_REMOTE.search(str(ev.fields.get("msg") or ""))
        return int(m.group(1) or m.group(2)) if m else None
    return None


def rpc_relayed(events: list[Event]) -> None:
    """An exception raised in a function torch.distributed.rpc ran on another worker comes back to
    its caller headed "On WorkerInfo(id=2, name=trainer2):" and the worker's traceback: that traceback,
    up to its exception line, is worker 2's own (its id is the rank it gave ``init_rpc``), whoever
    printed it; the caller's exception is the relay (evidence.causes). A relayed traceback may end in
    another relay (a worker that called a third): each heading passes to the traceback below it.
    submitit's driver relays a failed task's traceback the same way (its task id is the rank)."""
    if not any(_rpc_worker(ev) is not None for ev in events if ev.kind in _RPC_KINDS):
        return
    pending: tuple[str, int | None, int, int] | None = None  # (file, printer, worker, heading line)
    relaying: tuple[str, int | None, int] | None = None  # (file, printer, worker)
    for ev in events:
        printer = ev.rank
        if relaying is not None and ev.file == relaying[0] and printer == relaying[1]:
            if ev.kind == "traceback_start":
                relaying = None
            else:
                ev.rank = relaying[2]
                if ev.kind not in _IN_TRACEBACK:  # its exception line ends it
                    relaying = None
        if ev.kind == "traceback_start" and pending is not None and ev.file == pending[0] \
                and printer == pending[1] and 0 < ev.line - pending[3] <= _RPC_GAP:
            ev.rank = pending[2]
            relaying, pending = (pending[0], pending[1], pending[2]), None
            continue
        worker = _rpc_worker(ev)
        if worker is not None:
            pending = (ev.file, printer, worker, ev.line)


def _headers(events: list[Event], kind: str, key: str, empty: bool = False) -> dict[str, list[tuple[int, str]]]:
    """file -> (line, value) of the headers of one kind in it, in line order (``empty``: those with no
    value too, as "": a heading that ends the block above it and names nothing)."""
    heads: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for ev in events:
        if ev.kind == kind and (empty or ev.get(key)):
            heads[ev.file].append((ev.line, str(ev.get(key) or "")))
    for marks in heads.values():
        marks.sort()
    return heads


def _under(heads: dict[str, list[tuple[int, str]]], ev: Event) -> str | None:
    """The value of the last header above the event in its file, if any."""
    marks = heads.get(ev.file)
    if not marks:
        return None
    i = bisect_right(marks, (ev.line, "\uffff")) - 1
    return marks[i][1] if i >= 0 else None


def headed_sources(events: list[Event]) -> None:
    """Lines after head's or tail's "==> path <==" header are that path's (``excerpt_of``), up to the next."""
    heads = _headers(events, "file_header", "path")
    if heads:
        for ev in events:
            if ev.kind != "file_header" and (path := _under(heads, ev)) is not None:
                ev.fields.setdefault("excerpt_of", path)


def relaying_streams(events: list[Event]) -> set[tuple[str, int]]:
    """(file, journal stream pid) of streams that speak for two ranks or more: a torchrun agent's
    service relaying every rank of its node. Such a pid is no writer; any other stream's is one."""
    seen: dict[tuple[str, int], set[int]] = defaultdict(set)
    for ev in events:
        spid = ev.fields.get("stream_pid") if ev.rank is not None else None
        if spid is not None:
            seen[(ev.file, spid)].add(ev.rank)
    return {k for k, ranks in seen.items() if len(ranks) > 1}


#: A block header naming no one host: dshbak -c's range of hosts whose output was the same
#: ("node[1-2]", "a,b"), pdsh's own lines ("pdsh@login01").
_NOT_ONE_HOST = re.compile(r"[\[\],@]")


#: Headings of one host's (or pod's) block in a file of several, one after the other (pssh -i, dshbak,
#: a kubectl bundle): what comes after one is another host's output, never a later run's.
HOST_BLOCK_KINDS = frozenset(("pssh_header", "dshbak_header", "kubectl_section"))


def pssh_blocks(events: list[Event]) -> None:
    """Lines after pssh's "[1] 03:45:21 [FAILURE] node02 ..." header are that host's, up to the next
    header (pssh -i prints each host's output as one block when the host is done); so are the lines
    under dshbak's header of a host (pdsh's output grouped by host)."""
    heads = _headers(events, "pssh_header", "host")
    for file, marks in _headers(events, "kubectl_section", "host", empty=True).items():
        # (a kubectl bundle: another command's heading ends a pod's block)
        heads[file] = sorted([*heads.get(file, []), *marks])
    for file, marks in _headers(events, "dshbak_header", "host").items():
        # (a range or pdsh's own block ends the host before it, and names no host)
        heads[file] = sorted([*heads.get(file, []), *((line, "" if _NOT_ONE_HOST.search(h) else h) for line, h in marks)])
    if heads:
        for ev in events:
            if ev.host is None and ev.kind not in HOST_BLOCK_KINDS and (host := _under(heads, ev)):
                ev.host = host
