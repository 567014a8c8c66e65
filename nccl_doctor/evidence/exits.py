"""What a launcher's exit reports say: which rank they name, and whether an exit is the rank's own
failure or the echo of someone else's.

(Which rank a report names, by pid, task list or failure-table row, is ``pids``.)

* ``echo_only``: the ranks whose own errors are all echoes of another rank's failure;
* ``echoed_exit``: an exit code 1 (Python's status after an uncaught exception) of a rank whose own
  error was an echo, or that has no line of its own in a job whose timed-out ranks also exited 1;
  an abort (-6) right after a C++ terminate whose what() was an echo;
* ``forced_kills`` / ``forced_kill``: a worker the agent had to SIGKILL after its SIGTERM;
* ``outside_sigterm``: a worker that died of a SIGTERM its agent did not send (a cause);

Results are cached per job like the facts.
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..model import JobModel
from .causes import (
    _OWN_ERRORS,
    _REPORTS,
    _TABLE_EXCEPTION,
    _TIMEOUT_ECHOES,
    CAUSE_KINDS,
    classify,
    worker_exit_code,
)
from .facts import _per_job, global_rank, int_in, owner
from .pids import fail_ranks
from .timeouts import timeouts_by_pg
from .tracebacks import handled, heads_traceback

#: Sets for the per-event tests below (tuples are searched one by one).
_OWN = frozenset(_OWN_ERRORS)
_OWN_OR_CAUSE = (_OWN | frozenset(CAUSE_KINDS)) - frozenset(_REPORTS)
#: Exceptions a launcher raises about its children (torchrun's own traceback ends in one of them).
_LAUNCHER_TYPES = ("ChildFailedError", "SignalException")


#: Lines apart that one OOM event's kills are printed at most (the kernel's or an event list's rows).
_OOM_BURST = 8


def oom_collateral(job: JobModel, ev: Event) -> bool:
    """An OOM kill of a process that was not what ran out of memory: the kernel killed a larger one in
    the same event (the lines around it, at the same time where dated), as a container's cgroup with
    ``memory.oom.group`` kills every process of it at once; the largest resident set (``anon-rss``) is
    the one the OOM killer chose, the others go with it."""
    rss = int_in(ev.get("rss_kb"))
    if ev.kind != "oom_killer" or rss is None:
        return False
    return any(int_in(o.get("rss_kb")) is not None and int_in(o.get("rss_kb")) > rss  # type: ignore[operator]
               and o.file == ev.file and abs(o.line - ev.line) <= _OOM_BURST and (o.ts is None or ev.ts is None or o.ts == ev.ts)
               for o in job.by_kind("oom_killer"))


def _row_says_echo(job: JobModel, ev: Event) -> bool:
    """torchrun's failure-table row for the pid of an ``elastic_failed`` line (same file) quotes the
    worker's exception (``@record``: "traceback : RuntimeError: ... Connection closed by peer"), and it
    is an echo: classify tells it of the row (None), so the "failed (exitcode: 1)" line is one too."""
    pid = int_in(ev.get("pid"))
    rows = [r for r in job.by_kind("elastic_cfe") if r.file == ev.file and int_in(r.get("pid")) == pid]
    return any(_TABLE_EXCEPTION.match(str(r.get("traceback") or "")) and classify(r, False, False) is None
               for r in rows)


def echo_only(job: JobModel, job_timed_out: bool, timed: set[int]) -> tuple[set[int], set[int]]:
    """(id() of states, ranks) whose own errors are all echoes of another rank's failure (a timeout,
    a peer that closed the socket, gloo's "Timed out waiting"), with no cause of their own."""
    states: set[int] = set()
    ranks: set[int] = set()
    caused: set[int] = set()
    for st in job.ranks:
        rank_timed = id(st) in timed
        own = [e for e in st.events if e.kind in _OWN_OR_CAUSE
               and not (e.kind == "log_error" and heads_traceback(job, e))  # (its exception says)
               and not handled(job, e)]  # (what a handler dealt with and went on from)
        if any(teardown_terminate(e) for e in own) and \
                any(e.kind != "cpp_terminate" and classify(e, job_timed_out, rank_timed) is None for e in own):
            own = [e for e in own if not teardown_terminate(e)]  # its teardown after an echo of its own
        if any(classify(e, job_timed_out, rank_timed) is not None for e in own):
            if st.rank is not None:
                caused.add(st.rank)
        elif rank_timed or any(e.kind in _OWN for e in own):
            states.add(id(st))
            if st.rank is not None:
                ranks.add(st.rank)
    return states, ranks - caused


def echoed_exit(job: JobModel, ev: Event, echo: tuple[set[int], set[int]]) -> bool:
    """Exit code 1 in torchrun's reports (Python's status after an uncaught exception), or another
    small status the script chose after catching it (``sys.exit(75)`` to requeue), of a rank whose
    exception was an echo: a consequence too; so is an abort (-6) right after a C++ terminate whose
    what() was an echo (gloo's enforce on a lost peer or a desync). Signals (-9, 139, an abort with no
    terminate before it) keep their word."""
    if ev.kind == "mp_spawn_failed":
        code = int_in(ev.get("exitcode"))
        if code is None and ev.get("sig") is None:
            code = 1  # "terminated with the following error": the child relayed its exception, then exited 1
    elif ev.kind in ("elastic_cfe", "elastic_failed"):
        code = int_in(ev.get("exitcode") if ev.kind == "elastic_cfe" else ev.get("code"))
    elif ev.kind in ("worker_exit", "unit_exit"):
        code = worker_exit_code(ev)
    elif ev.kind == "mpi_abort" and ev.get("code") is not None:  # mpirun's first process to exit non-zero
        code = int_in(ev.get("code"))
    elif ev.kind == "slurm_task_exit" and "Exited" in str(ev.get("how") or ""):
        code = int_in(ev.get("code"))
    elif ev.kind == "slurm_task_exit" and str(ev.get("how") or "").strip() == "Aborted":
        code = -6  # srun's "task 1: Aborted": SIGABRT
    elif ev.kind == "shell_job_died" and (ev.get("sig") == "SIGABRT" or int_in(ev.get("signum")) == 6):
        code = -6  # a shell's "18529 Aborted  RANK=2 python train.py": SIGABRT
    else:
        return False
    if code in (-6, 134):
        return _aborted_on_echo(job, ev, echo[1])
    named = fail_ranks(job, ev)
    if ev.kind == "unit_exit" and named == [None] and code is not None and code > 0 \
            and len({st.rank for st in job.ranks if st.rank is not None and ev.file in st.files}) > 1:
        return True  # a service that ran the whole job (torchrun under systemd): its status is the job's
    if code is not None and code > 0 and named \
            and all(r is not None and r in silent_exits_together(job) for r in named):
        return True  # one status of several ranks at once and no line of theirs (see silent_exits_together)
    if code is None or not 0 < code < 128:
        return False  # (killed by a signal, or no status: its own word)
    # Exit code 1 is Python's after an uncaught exception; another small status is the script's own
    # choice after what it caught (sys.exit(75) for a requeue, sys.exit(2) after logging "FATAL"): an
    # echo when what it caught was one.
    if ev.kind == "elastic_failed" and _row_says_echo(job, ev):
        return True  # its row in the failure table quotes its exception (@record): an echo
    states, ranks = echo
    if all(r is not None for r in named):
        if all(r in ranks for r in named):
            return True
        known = job.known_ranks()
        if any(r in known and any(e.kind in _OWN_OR_CAUSE for e in known[r].events) for r in named):
            return False  # the rank has errors of its own: its exit is theirs to explain
        # No line of its own says why (its output filtered away, lost in a buffer): when the ranks
        # seen timing out themselves exited with 1 (gloo raises the timeout in Python), its exit 1
        # looks exactly like theirs and says nothing more. (NCCL's watchdog aborts timed-out ranks:
        # there a lone exit 1 stands out, and stays a failure.)
        return _only_echoes_unclaimed(job, ev.file) or code in _timed_out_exit_codes(job)
    lr = int_in(ev.get("local_rank"))
    procs = [st for st in job.ranks if lr is not None and st.local_rank == lr and ev.file in st.files]
    if not procs and ev.kind == "elastic_failed":
        # No process of that file is known by its local rank (no failure table: the job went on, or
        # its ranks print no local rank): when every process of the file echoed, so did this one.
        procs = [st for st in job.ranks if ev.file in st.files and st.rank is not None]
    return bool(procs) and all(id(st) in states for st in procs)


@_per_job
def silent_exits_together(job: JobModel) -> set[int]:
    """Ranks with no line of their own that torchrun's table reports exiting with one status in the
    same second as another such rank, in logs that hold no error line but the launcher's: nothing
    tells which of them failed and which lost the other (gloo raises a lost peer or a timeout in
    Python too: exit 1; a stall watchdog in every rank exits alike, os._exit(3)); the table's "Root
    Cause" is only the first exit the agent observed. None of them is a cause by that report alone."""
    for kind in _OWN_OR_CAUSE:
        for e in job.by_kind(kind):
            if not str(e.get("exc_type") or "").endswith(_LAUNCHER_TYPES):
                return set()  # an error line of anyone's (a loose traceback may be theirs): not the table alone
    known = job.known_ranks()
    when: dict[tuple[str, str], set[int]] = defaultdict(set)
    for ev in job.by_kind("elastic_cfe"):
        rank, code = int_in(ev.get("rank")), int_in(ev.get("exitcode"))
        if rank is None or code is None or code <= 0 or not ev.get("time"):
            continue
        st = known.get(rank)
        if st is None or not any(e.kind in _OWN_OR_CAUSE for e in st.events):
            when[(ev.file, str(ev.get("time")), code)].add(rank)
    return {r for ranks in when.values() if len(ranks) >= 2 for r in ranks}


@_per_job
def _agent_pids(job: JobModel) -> dict[tuple[str, str], set[int]]:
    """(kind, file) -> the pids torchrun's agent named: ``elastic_sigterm`` ("Sending process N closing
    signal SIGTERM", the workers it stops) and ``elastic_forced_kill`` (those it then had to SIGKILL)."""
    out: dict[tuple[str, str], set[int]] = defaultdict(set)
    for e in job.by_kind("elastic_sigterm", "elastic_forced_kill"):
        if int_in(e.get("pid")) is not None:
            out[(e.kind, e.file)].add(int_in(e.get("pid")))  # type: ignore[arg-type]
    return out


def forced_kills(job: JobModel, file: str) -> set[int]:
    """pids the agent writing ``file`` SIGKILLed after they ignored its SIGTERM."""
    return _agent_pids(job).get(("elastic_forced_kill", file), set())


def forced_kill(job: JobModel, ev: Event) -> bool:
    """A -9 exit (or the table's SIGKILL note) of a worker its agent had to kill: the launcher's doing."""
    if ev.kind not in ("elastic_failed", "elastic_cfe", "signal"):
        return False
    code = int_in(ev.get("exitcode") if ev.kind == "elastic_cfe" else ev.get("code") if ev.kind == "elastic_failed"
                  else -int_in(ev.get("signal") or 0))
    return code in (-9, 137) and int_in(ev.get("pid")) in forced_kills(job, ev.file)


def outside_sigterm(job: JobModel, ev: Event) -> tuple[str, str] | None:
    """A worker that died of a SIGTERM its agent did not send (the agent lists the pids it stops):
    someone else killed it (an operator, the scheduler, a preemption); a cause, not the launcher's
    clean-up."""
    if ev.kind not in ("elastic_failed", "elastic_cfe"):
        return None
    code = int_in(ev.get("exitcode") if ev.kind == "elastic_cfe" else ev.get("code"))
    pid = int_in(ev.get("pid"))
    sent = _agent_pids(job).get(("elastic_sigterm", ev.file))
    if code not in (-15, 143) or pid is None or not sent or pid in sent:
        return None
    return "signal", (f"exit code {code} (SIGTERM) that the launcher did not send (it stopped pids "
                      f"{', '.join(map(str, sorted(sent)[:6]))}): killed from outside, by an operator, "
                      "the scheduler or a preemption")


def _aborted_on_echo(job: JobModel, ev: Event, echo_ranks: set[int]) -> bool:
    """The rank's C++ terminates (its own, or in the report's file with no rank) were all echoes: a
    what() that echoes a wait or a lost peer, or, for a rank whose own errors were all such echoes,
    "terminate called without an active exception" (a thread still running when the process tore
    itself down after that error: no cause of its own)."""
    named = [r for r in fail_ranks(job, ev) if r is not None]
    terms = [e for e in job.by_kind("cpp_terminate")
             if (named and global_rank(job, e) in named)
             or (e.file == ev.file and getattr(owner(job, e), "rank", None) is None)]
    teardown = bool(named) and all(r in echo_ranks for r in named)
    return bool(terms) and all(classify(e, True, False) is None or (teardown and teardown_terminate(e)) for e in terms)


def teardown_terminate(ev: Event) -> bool:
    """"terminate called without an active exception" (or recursively): what a process prints when it
    tears itself down with a thread still running; after an echo of its own, no cause of its own."""
    return ev.kind == "cpp_terminate" and bool(ev.get("how"))


def teardown_after_echo(job: JobModel, ev: Event) -> bool:
    """A teardown terminate no prefix names, printed right below a rank's echo (its "Connection reset by peer"
    traceback, then "terminate called without an active exception"): that rank's process tearing itself down,
    nobody's failure of its own."""
    if not teardown_terminate(ev) or owner(job, ev) is not None:
        return False
    lines = _ranks_echo_lines(job).get(ev.file, ())
    return any(ev.line - d in lines for d in (1, 2, 3))


@_per_job
def _ranks_echo_lines(job: JobModel) -> dict[str, set[int]]:
    """file -> the lines of the echoes (a lost peer, a timeout) a rank raised there (read once: a console of many
    ranks may hold a teardown abort under each rank's echo)."""
    out: dict[str, set[int]] = defaultdict(set)
    for e in job.by_kind(*_TIMEOUT_ECHOES, "python_exception"):
        if getattr(owner(job, e), "rank", None) is not None and classify(e, True, False) is None:
            out[e.file].add(e.line)
    return out


@_per_job
def _timed_out_exit_codes(job: JobModel) -> set[int]:
    """The exit codes torchrun's tables give the ranks that were seen timing out."""
    timed = {r for pt in timeouts_by_pg(job).values() for r in pt.ranks}
    return {int_in(e.get("exitcode")) for e in job.by_kind("elastic_cfe")
            if int_in(e.get("rank")) in timed and int_in(e.get("exitcode")) is not None}  # type: ignore[misc]


def _only_echoes_unclaimed(job: JobModel, file: str) -> bool:
    """The tracebacks in ``file`` that no rank claims (printed before ``init_process_group`` gave
    the ranks their prefixes, or by a script without them) are all echoes of a wait or a lost peer:
    then an exit code 1 without a traceback of its own is one of those echoes."""
    own = job.by_kind(*_OWN)
    loose = [e for e in own if e.file == file and getattr(owner(job, e), "rank", None) is None
             and not str(e.get("exc_type") or "").endswith(_LAUNCHER_TYPES)  # the launcher's own traceback
             and e.kind != "cpp_terminate"]  # (a C++ terminate aborts its process: -6, never another's exit 1)
    # (one a rank's claimed traceback repeats word for word is that rank's, told twice: logged by the
    # script's handler, then raised through torch's "[rankN]:" hook; it is no unclaimed writer's)
    claimed = {(e.get("exc_type"), e.get("msg")) for e in own if getattr(owner(job, e), "rank", None) is not None}
    loose = [e for e in loose if (e.get("exc_type"), e.get("msg")) not in claimed]
    return bool(loose) and all(classify(e, True, False) is None for e in loose)


def srun_first_kill(job: JobModel, ev: Event) -> tuple[str, str] | None:
    """srun's "task 1: Killed" when it is the first thing srun reports in its file, before any of
    its own stopping of the step (``slurm_step_stop``) or a cancel: that task died of SIGKILL (the
    OOM killer, an operator), a cause; after them, "Killed" is the step's clean-up."""
    if ev.kind != "slurm_task_exit" or str(ev.get("how") or "").strip() != "Killed":
        return None
    before = [e for e in job.by_kind("slurm_task_exit", "slurm_step_stop", "slurm_cancel")
              if e.file == ev.file and e.line < ev.line]
    if before:
        return None
    tasks = str(ev.get("tasks") or "?")
    return "signal", f"srun: {'task' if tasks.isdigit() else 'tasks'} {tasks} on {ev.get('host') or '?'} ended with: Killed"
