"""Failures nobody's prefix claims, given to the rank that wrote them: a DeepSpeed launcher's exit
report (it names the node, not the child), and a traceback with no rank prefix (printed before the
ranks had prefixes, by a thread, or by the script's own logger). Works on the list ``failures``
builds (``Failure`` objects), and returns it with what was paired merged or dropped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING

from ..model import JobModel
from ..model.links import stream_console
from .causes import PID_UNNAMED
from .facts import first_ts, int_in
from .pids import started_rank

if TYPE_CHECKING:
    from .failures import Failure


#: Launcher reports of a child's end that do not say which child: DeepSpeed's exit line, Ray's
#: "The actor is dead because its worker process has died".
_NODE_REPORTS = ("ds_exit", "ray_worker_died", "shell_job_died")


def _reported_worker(job: JobModel, report) -> int | None:
    """The rank of the worker Ray's death report is about: the "Worker info" block right before it
    in the controller's output names it (``ray_worker_context``)."""
    if report.kind != "ray_worker_died":
        return None
    near = [e for e in job.by_kind("ray_worker_context") if e.file == report.file and 0 < report.line - e.line <= 40]
    return int_in(near[-1].get("rank")) if near else None


def _started_as(job: JobModel, report):
    """The job script's line that names the pid of bash's report with a rank ("launched rank 3 pid 18886",
    "rank 1 (pid 7839) exited with status 152"), when it names that pid with one rank only."""
    pid = int_in(report.get("pid")) if report.kind == "shell_job_died" else None
    rank = started_rank(job, pid, report.file) if pid is not None else None
    if rank is None:
        return None
    return next((e for e in job.by_kind("worker_started", "worker_exit") if int_in(e.get("pid")) == pid
                 and int_in(e.get("who", e.get("who2"))) == rank), None)


def name_the_erring_child(job: JobModel, out: list[Failure], echo_ranks: set[int], timed_out: bool,
                           timed: set[int]) -> list[Failure]:
    """A DeepSpeed launcher's exit report names its node, not the child (see ds_exit): when exactly
    one rank of that node logged an error of its own before the report, that rank is the child.
    When every rank of the node that wrote an error wrote an echo (a peer gone, a timeout) and one
    wrote none, the echoes say whom they lost: a child ended by a signal (-9) is that quiet rank, as
    is any failed exit when its peers lost their connection to it; when they timed out waiting
    instead, the quiet rank was alive (hung) and the exit is an echo's: no failure of its own (RK2
    names the quiet rank)."""
    own = {f.rank for f in out if f.rank is not None}
    drop: set[int] = set()
    for f in out:
        if f.rank is not None or f.state is not None or any(e.kind not in _NODE_REPORTS for e in f.events):
            continue
        about = _reported_worker(job, f.events[0])
        if about is not None and about not in own:  # Ray's report says whose process it was
            f.rank, f.state = about, job.known_ranks().get(about)
            f.what = f.what.replace("; which one Ray's line does not say", "")
            continue
        named = _started_as(job, f.events[0])
        if named is not None:
            # the job script's own line ties the pid bash names to a rank ("rank 1 (pid 7839) exited ..."),
            # whose exit status that line may report too: bash's word says which signal it was
            rank = int_in(named.get("who", named.get("who2")))
            f.rank, f.state = rank, job.known_ranks().get(rank)
            f.what = f.what.replace(PID_UNNAMED, f"; the job script's own line gives that pid to rank {rank}")
            if named.kind == "worker_started":  # (an exit report of that rank is its own failure: merged with this)
                f.events = [*f.events, named]
            continue
        node = [st for st in job.ranks if st.rank is not None and (st.host == f.host if f.host else True)]
        if not f.host and len({st.host for st in node}) > 1:
            continue  # a launcher log of one node among several, and nothing says which
        t = f.ts
        erring = [st for st in node if st.errors
                  and (t is None or first_ts(st.errors) is None or first_ts(st.errors) <= t)]
        if f.host and len(erring) == 1 and erring[0].rank not in own:
            f.rank, f.state = erring[0].rank, erring[0]
            f.what += f"; rank {erring[0].rank} is the one rank on {f.host} that logged an error before it"
            f.events = [*f.events, erring[0].errors[0]]
            continue
        troubled = [st for st in node if st.errors or id(st) in timed]
        quiet = [st.rank for st in node if not st.errors and id(st) not in timed and st.rank not in own]
        if not f.host:
            quiet += [r for r in job.missing_ranks() if r not in own]  # a rank that wrote no line at all
        if not troubled or any(st.errors and st.rank not in echo_ranks for st in troubled) or len(quiet) != 1:
            continue
        signalled = _signal_in(int_in(f.events[0].get("code"))) is not None
        if timed_out and not signalled:
            drop.add(id(f))  # a timed-out rank's exit: the quiet one was alive, hung
            continue
        rank = quiet[0]
        st = job.known_ranks().get(rank)
        f.rank, f.state, f.host = rank, st, f.host or (st.host if st is not None else None)
        f.what += (f"; rank {rank} is the one rank{f' on {f.host}' if f.host else ''} that wrote no error "
                   "while the others lost their connection to it")
    return [f for f in out if id(f) not in drop]




def pair_loose_traceback(job: JobModel, out: list[Failure], echo_ranks: set[int]) -> list[Failure]:
    """A traceback no rank claims (printed before init_process_group gave the ranks their prefixes,
    or by a thread, which torch's rank prefix does not reach, or by the script's own logger) belongs
    to the one rank in its file that could have written it: the one rank whose own error says the
    same exception word for word (a script that logs its exception and then raises it: the same
    failure, told twice), else the one whose failed exit the launcher reports there (told twice
    too), else the one rank of that file's launcher table with no error line of its own. A fatal
    signal's dump goes to the rank the table says died of it (with no table: ``_only_quiet_rank``).
    ``echo_ranks``: the ranks whose own errors are all echoes (``exits.echo_only``)."""
    by_file: dict[str, list[Failure]] = defaultdict(list)
    for f in out:
        by_file[stream_console(f.events[0].file)].append(f)
    drop: set[int] = set()
    for fs in by_file.values():
        file = {g.events[0].file for g in fs}
        loose = [f for f in fs if f.rank is None and f.label is None and not f.exit_only]
        exits = [f for f in fs if f.rank is not None and f.exit_only]
        if len(loose) != 1:
            continue
        f = loose[0]
        signum = _dump_signal(f)
        if signum is not None:
            # Python's own dump of a fatal signal ("Fatal Python error: Aborted"), or C++'s terminate,
            # was written by the process that died of that signal: the launcher's table says which
            # rank that was. A rank that had already timed out or lost a peer aborted while tearing
            # down: an echo.
            died = _died_of(job, file, signum)
            if died is None and len(dead := _all_died_of(job, file, signum)) > 1 and (
                    dead <= echo_ranks or (rest := dead - _aborted_by_gloo(job)) != dead and rest <= echo_ranks):
                # every rank the table says died of it had lost a peer first: their teardowns (but the one
                # gloo's own enforce aborted, whose words are its mismatch report, not this line)
                drop.add(id(f))
                continue
            if died is None and not exits:
                died = _only_quiet_rank(job, file, echo_ranks)
            if died is not None:
                if died in echo_ranks:
                    drop.add(id(f))
                    continue
                f.rank, f.state = died, job.known_ranks().get(died)
                f.host = f.host or job.rank_hosts.get(died)
                drop.update(id(ex) for ex in exits if ex.rank == died)
                continue
        twin = _twin(f, fs)
        if twin is not None:
            twin.events = [*twin.events, *f.events]
            drop.add(id(f))
            continue
        if len(exits) == 1 and not _after(f, exits[0]) and (signum is None or _exit_signal(exits[0]) in (None, signum)) and (
                len(fs) == 2 or not _signalled(exits[0]) and all(
                g.rank in echo_ranks for g in fs if g is not f and g is not exits[0])):
            # the one failed exit of the console, whose rank said nothing of its own (the others, if
            # any, only echoes, and that exit a status of its own, not a signal: a node's stdout holding
            # a logged error no record names, its stderr the launcher's exit 1 and the others' lost peer)
            ex = exits[0]
            f.rank, f.state, f.host = ex.rank, ex.state, f.host or ex.host
            f.events = [*f.events, *ex.events]
            drop.add(id(ex))
        elif len(exits) > 1 and len(fs) == len(exits) + 1 and _told_times(f) >= len(exits):
            # The same exception told at least once per rank whose failed exit the launcher reports
            # (raised before any rank prefix existed: a config or environment error that hit every
            # process alike): each of those exits is that exception.
            for ex in exits:
                ex.category, ex.what, ex.events = f.category, f.what, [*f.events[:1], *ex.events]
            drop.add(id(f))
        elif not exits and (rank := _only_unspoken_rank(job, file)) is not None:
            f.rank, f.state = rank, job.known_ranks().get(rank)
            f.host = f.host or job.rank_hosts.get(rank)
    _own_copy_of_relayed(job, out, drop)
    # A rank now named twice (its log-dir file and the console both hold the dump): one failure.
    first: dict[int, Failure] = {}
    for f in out:
        if id(f) in drop or f.rank is None or f.label is not None:
            continue
        if f.rank in first and first[f.rank].exit_only == f.exit_only:
            first[f.rank].events.extend(f.events)
            drop.add(id(f))
        else:
            first.setdefault(f.rank, f)
    return [f for f in out if id(f) not in drop]


def _own_copy_of_relayed(job: JobModel, out: list[Failure], drop: set[int]) -> None:
    """torch.multiprocessing.spawn's parent quotes a child's traceback ("-- Process 1 terminated with
    the following error:"): the child's own log (a script's logs/<host>-<pid>.log, which no rank
    claims) that raised that exception word for word, the only one to, is that rank's copy of the
    same failure, not another process's."""
    claimed = {f for st in job.ranks if st.rank is not None for f in st.files}
    relayed = [g for g in out if id(g) not in drop and g.rank is not None and g.label is None and not g.exit_only
               and any(e.kind == "mp_spawn_failed" for e in g.events)]
    copies: dict[int, list[Failure]] = defaultdict(list)
    for f in out:
        if id(f) in drop or f.rank is not None or f.label is not None or f.exit_only or f.events[0].file in claimed:
            continue
        twin = _twin(f, relayed)
        if twin is not None:
            copies[id(twin)].append(f)
    for g in relayed:
        found = copies.get(id(g), [])
        if len(found) == 1:
            g.events = [*g.events, *found[0].events]
            drop.add(id(found[0]))


#: What a DataLoader worker process prints as it dies of a signal (torch/csrc/DataLoader.cpp's handler:
#: "ERROR: Unexpected segmentation fault encountered in worker."), and what its rank then raises.
_WORKER_DYING = re.compile(r"^Unexpected [\w -]{1,40} encountered in worker\b")
_WORKER_DIED = re.compile(r"DataLoader worker \(pids?\b")


def _after(f: Failure, ex: Failure) -> bool:
    """Whether loose failure ``f`` is logged error records all written after the launcher reported
    the exit ``ex`` (later in the same file, or dated later): a wrapper's words about that exit
    ("Reporting training FAILURE"), not the dead process's own."""
    first = ex.events[0]
    t = first_ts(ex.events)
    return all(e.kind == "log_error" for e in f.events) and all(e.file == first.file and e.line > first.line
               or t is not None and e.ts is not None and e.ts > t for e in f.events)


def _signalled(ex: Failure) -> bool:
    """Whether a failed exit was a death by signal (a negative status or one above 128)."""
    return _exit_signal(ex) is not None


def _exit_signal(ex: Failure) -> int | None:
    """The signal a failed exit says its process died of (-9, 137: 9), else None. A process SIGKILLed writes
    nothing: a loose "terminate called ..." (SIGABRT) in its console is another process's."""
    for e in ex.events:
        sig = _signal_in(int_in(e.get("exitcode", e.get("code"))))
        if sig is not None:
            return sig
    return None


def _signal_in(code: int | None) -> int | None:
    """The signal an exit status says (a launcher's -9, a shell's 137: 9), else None."""
    if code is None or 0 <= code <= 128:
        return None
    return -code if code < 0 else code - 128


def _twin(f: Failure, fs: list[Failure]) -> Failure | None:
    """The one rank's failure among ``fs`` that raised the exception of loose failure ``f`` word for
    word, or None (none, or several: then the words single out nobody). A dying DataLoader worker's
    own line (no rank: it is the worker's, not the rank's) is the one rank's whose worker died."""
    if any(e.kind == "log_error" and _WORKER_DYING.match(str(e.get("msg") or "")) for e in f.events):
        return _one_rank_raising(fs, lambda texts: any(_WORKER_DIED.search(t) for t in texts))
    said = {e.text for e in f.events if e.kind == "python_exception"}
    return _one_rank_raising(fs, lambda texts: bool(said & texts)) if said else None


def _one_rank_raising(fs: list[Failure], raised) -> Failure | None:
    """The failure of the one rank among ``fs`` whose own exception lines (their texts) satisfy
    ``raised``, or None (none, or several)."""
    same = {g.rank: g for g in fs if g.rank is not None and g.label is None and not g.exit_only
            and raised({e.text for e in g.events if e.kind == "python_exception"})}
    return next(iter(same.values())) if len(same) == 1 else None


def _told_times(f: Failure) -> int:
    """How many times a loose failure's exception was raised, word for word (0: not one exception)."""
    texts = [e.text for e in f.events if e.kind == "python_exception"]
    return len(texts) if texts and len(set(texts)) == 1 else 0


#: Python's names of the fatal signals it dumps a stack for (faulthandler), and their numbers.
_DUMPED_SIGNALS = {"Aborted": 6, "Segmentation fault": 11, "Bus error": 7, "Floating-point exception": 8,
                   "Floating point exception": 8, "Illegal instruction": 4}


def _dump_signal(f: Failure) -> int | None:
    """The signal a loose failure's process died of when its own lines say: Python's dump of a fatal
    signal, or C++'s "terminate called ..." (std::terminate aborts: SIGABRT)."""
    ev = f.events[0]
    if ev.kind == "cpp_terminate":
        return 6
    if ev.kind != "signal" or ev.get("sig") != "Fatal Python error":
        return None
    return _DUMPED_SIGNALS.get(str(ev.get("detail") or "").strip())


def _aborted_by_gloo(job: JobModel) -> set[int]:
    """The one rank gloo's size check aborted (statements.lone_abort), as a set."""
    from .statements import lone_abort  # (statements reads failures, which read this module)

    rank = lone_abort(job)
    return set() if rank is None else {rank}


def _died_of(job: JobModel, file: set[str], signum: int) -> int | None:
    """The one rank that ``file``'s launcher table reports dead of signal ``signum``."""
    ranks = _all_died_of(job, file, signum)
    return ranks.pop() if len(ranks) == 1 else None


def _all_died_of(job: JobModel, file: set[str], signum: int) -> set[int]:
    """The ranks that ``file``'s launcher table reports dead of signal ``signum``."""
    return {int_in(e.get("rank")) for e in job.by_kind("elastic_cfe")
            if e.file in file and int_in(e.get("exitcode")) in (-signum, 128 + signum)} - {None}


def _only_unspoken_rank(job: JobModel, file: set[str]) -> int | None:
    """The one rank that ``file``'s launcher table lists and that wrote no error line of its own."""
    listed = {int_in(e.get("rank")) for e in job.by_kind("elastic_cfe") if e.file in file} - {None}
    known = job.known_ranks()
    unspoken = [r for r in listed if r not in known or not (known[r].errors or known[r].timeouts)]
    return unspoken[0] if len(unspoken) == 1 else None


def _only_quiet_rank(job: JobModel, file: set[str], echo_ranks: set[int]) -> int | None:
    """For a fatal signal's dump no table ties to a rank: the one rank whose lines ``file`` holds that
    wrote no error and no timeout, when every other rank there lost a peer and none timed out
    (faulthandler's "Fatal Python error: Segmentation fault", written straight to stderr past the
    script's rank tag, is the process that died; its peers saw it go)."""
    known = job.known_ranks()
    ranks = {r for r, st in known.items() if not file.isdisjoint(st.files)}
    quiet = [r for r in ranks if not (known[r].errors or known[r].timeouts)]
    others = ranks - set(quiet)
    if len(quiet) != 1 or not others or not others <= echo_ranks or any(known[r].timeouts for r in others):
        return None
    return quiet[0]


def told_twice(out: list[Failure]) -> list[Failure]:
    """A failure of a process of unknown rank that repeats word for word the failure of one rank, on
    the same host when its host is known, is that rank's, told twice: merged into it. A rank's own log
    file that names no rank, beside the console where torch's "[rankN]:" hook printed the same
    exception; torchelastic's ``error.json`` of a worker, the same failure as its traceback (the first
    such rank's: the file is one worker's, whichever of several ranks raising alike it was). A
    launcher's report of one pid's end ("exitcode  : -9 (pid: 11793)" in a copy of its table that
    names no rank) is the failure of the one rank whose other reports name that pid."""
    named: dict[str, list[Failure]] = defaultdict(list)
    by_pid: dict[int, list[Failure]] = defaultdict(list)
    for f in out:
        if f.rank is not None and f.category != "exit":
            named[f.what].append(f)
        if f.rank is not None:
            for p in _pids(f):
                by_pid[p].append(f)
    drop: set[int] = set()
    for f in out:
        if f.rank is None and f.label is None and len(pids := _pids(f)) == 1 \
                and len({id(g) for g in by_pid.get(next(iter(pids)), ())}) == 1:
            by_pid[next(iter(pids))][0].events.extend(f.events)
            drop.add(id(f))
            continue
        if f.rank is not None or f.label is not None or f.category == "exit":
            continue
        # (a file of no known host, "logs/dgx-18/rank1.log", may be any host's)
        same = [g for g in named.get(f.what, []) if f.host is None or g.host in (None, f.host)]
        if len(same) == 1 or (same and f.events[0].file.endswith("error.json")):
            same[0].events.extend(f.events)
            drop.add(id(f))
    return [f for f in out if id(f) not in drop]


#: A launcher's reports of a worker's end, which name its pid.
_PID_REPORTS = frozenset(("elastic_failed", "elastic_cfe", "signal"))


def _pids(f: Failure) -> set[int]:
    """The pids a failure's launcher reports name (torchrun's exit line and table)."""
    return {p for e in f.events if e.kind in _PID_REPORTS and (p := int_in(e.get("pid"))) is not None}
