"""Failures: every rank's first cause, de-duplicated, in causal order.

* ``failures(job)`` / ``first_failure(job)``: the non-consequential errors, one per rank, in causal
  order. Consequences (peer closed the socket, flushed IB work, a watchdog or gloo timeout, SIGTERM
  from the launcher, ``ncclRemoteError``, ``-> N`` chains) are never causes (``causes.classify``),
  nor is the exit code 1 of a rank whose own error was such an echo.
* ``killed_ranks(job)``: the ranks the launcher stopped because a peer failed (collateral);
  ``job_failed(job)``: did anything go wrong at all.
* ``state_for_pid`` / ``expand_tasks``: which rank a launcher's report (pid, Slurm task list) names.

Built on the helpers of ``facts`` and the timeouts (every name here is importable from ``facts`` too);
results are cached per job like the facts.
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..model import JobModel
from ..model.links import stream_console
from .accused import accused_failures
from .alike import everyones, mesh_never_formed, without_common_complaints
from .causes import _PEER_GONE, _REPORTS, CAUSE_KINDS, NETWORK_KINDS, PID_UNNAMED, classify
from .dumps import dump_facts
from .exits import (
    echo_only,
    echoed_exit,
    forced_kill,
    oom_collateral,
    outside_sigterm,
    silent_exits_together,
    srun_first_kill,
    teardown_after_echo,
    teardown_terminate,
)
from .facts import (
    _per_job,
    dated_after,
    file_host,
    fmt_ranks,
    global_rank,
    host_of,
    int_in,
    known_by,
    line_key,
    owner,
    writer,
)
from .failure_record import Failure
from .headless import headless_tracebacks
from .lockwait import lock_holder_failures
from .nodename import node_name
from .numerics import spread_failures
from .oddsetting import set_otherwise
from .orphans import name_the_erring_child, pair_loose_traceback, told_twice
from .outside import agent_signals, launcher_killed
from .pids import ds_spawned, expand_tasks, fail_ranks, state_for_pid
from .recovery import before_clean_restart, trained_between, trained_on
from .rendezvous import (
    is_wrapper_echo,
    store_beyond_world,
    store_client_rank,
    store_host_rank,
    store_not_joined,
    store_oversized,
    unreachable,
)
from .saysmore import says_more
from .teardown import harmless
from .timeouts import timed_out_states, timeouts_by_pg, watchdog_kills
from .tracebacks import CARRIES_ON, caught, chained_to_echo, heads_traceback, ran_past


def _signalled_agents(job: JobModel, found: list[Failure]) -> list[Failure]:
    """torchrun agents that were themselves signalled ("Received 15 death signal, shutting down
    workers") while other agents were not: that node was stopped from outside (a preemption, a
    scheduler's limit, an operator), and the others' errors follow from it. When every agent got the
    signal (one agent alone: it is the job) the whole job was stopped: no node stands out, and a stop
    from outside is no failure (CATALOGUE: a scheduler's cancel is not a fault). Nor when a rank
    raised an exception of its own (``found``): a lost node leaves the others echoes, never their own
    errors; that rank's job failed, and the stop was someone's decision (a sweep's early stopping of
    another trial in the same folder). Nor a signal after another rank had already timed out waiting."""
    agents, hit = agent_signals(job)
    if not hit or set(hit) >= agents or any(f.category == "exception" and f.rank is not None for f in found):
        return []
    out = []
    # A rank that had already waited out its timeout before the signal came: the job had hung by then, and the
    # stop (a job script's `timeout`, a scheduler's limit) ended the hang, not caused it.
    # (an untimed timeout by the first dated line after it: it happened by then)
    # (each of the rank's timeout lines: a --log-dir file may end with it while the console's copy has a
    # dated line after it)
    known = job.known_ranks()
    waited = [t for pt in timeouts_by_pg(job).values() for r in pt.reports
              for e in [*r.events[:1], *(known[r.rank].timeouts if r.rank in known else ())]
              if (t := known_by(job, e)) is not None]
    for where, evs in hit.items():
        if waited and evs[0].ts is not None and evs[0].ts > min(waited):
            continue
        host = where if where in job.hosts or file_host(job, evs[0].file) else None
        sig = str(evs[0].get("sig") or "a signal")
        out.append(Failure(rank=None, state=None, host=host, category="signal", events=evs[:2],
                           what=f"its torchrun agent received signal {sig} and shut its workers down: stopped "
                                "from outside (a preemption, the scheduler's time limit or cancel, an operator)",
                           label=f"the node {host}" if host else "a node"))
    return out


@_per_job
def _file_hosts(job: JobModel) -> dict[str, set[str]]:
    """file -> hosts named by its NCCL line prefixes (host:pid:tid)."""
    out: dict[str, set[str]] = defaultdict(set)
    for k in job.kinds("nccl_"):
        for e in job.by_kind(k):
            if e.host:
                out[e.file].add(e.host)
    return out


def _only_host(job: JobModel, file: str) -> str | None:
    hosts = _file_hosts(job).get(file, set())
    return next(iter(hosts)) if len(hosts) == 1 else None


@_per_job
def killed_ranks(job: JobModel) -> tuple[set[int], set[int]]:
    """(id() of states, ranks) the launcher stopped because a peer failed: SIGTERM to their pid,
    -15 in torchrun's table, srun 'Terminated'. They are collateral, not silent. Kills with no crash
    in the job, or after the others' timeouts, are the launcher cleaning up hung ranks: not counted."""
    states: set[int] = set()
    ranks: set[int] = set()
    if first_failure(job) is None and not watchdog_kills(job):  # any cause, a transport error too
        return states, ranks
    first_timeout = min((pt.ts for pt in timeouts_by_pg(job).values() if pt.ts is not None), default=None)
    for ev in job.by_kind("elastic_sigterm", "elastic_cfe", "slurm_task_exit"):
        if ev.ts is not None and first_timeout is not None and ev.ts > first_timeout + 60:
            continue
        if ev.kind == "elastic_sigterm":
            st = state_for_pid(job, ev.get("pid"), host_of(job, ev), ev.file)
            if st is not None:
                states.add(id(st))
            elif (rank := ds_spawned(job).get((ev.file, int_in(ev.get("pid"))))) is not None:
                ranks.add(rank)  # a rank with no line of its own, stopped by the DeepSpeed launcher
        elif ev.kind == "elastic_cfe" and (int_in(ev.get("exitcode")) in (-15, 143) or "TERM" in str(ev.get("sig"))):
            if int_in(ev.get("rank")) is not None:
                ranks.add(int_in(ev.get("rank")))
        elif ev.kind == "slurm_task_exit" and str(ev.get("how") or "").strip() in ("Terminated", "Killed") \
                and srun_first_kill(job, ev) is None:
            ranks.update(expand_tasks(ev.get("tasks")))
    return states, ranks


def _exits_together(job: JobModel) -> list[Failure]:
    """The job failed and all the logs hold of it is torchrun's table: ranks with no line of their
    own exiting with one status in the same second (``exits.silent_exits_together``). One failure naming
    neither: the verdict then says which ranks, and that nothing tells them apart."""
    ranks = silent_exits_together(job)
    if not ranks:
        return []
    rows = [e for e in job.by_kind("elastic_cfe") if int_in(e.get("rank")) in ranks]
    return [Failure(rank=None, state=None, host=None, category="exit", events=rows[:4],
                    what=f"exit code {rows[0].get('exitcode')} in the same second, as torchrun's failure table "
                         "reports, and no line of their own here: which one failed and which lost the other these "
                         "logs do not say",
                    label=f"one of ranks {fmt_ranks(ranks)}")]


def _store_waits(job: JobModel) -> bool:
    """Some rank gave up waiting at a key-value store (a key, or the clients that never joined)."""
    return bool(job.by_kind("torch_store_timeout")) or any(
        "DistStoreError" in str(e.get("exc_type") or "") or str(e.get("msg") or "").strip() == "Wait timeout"
        for e in job.by_kind("python_exception"))  # (a FileStore's wait: "RuntimeError: Wait timeout")


def _handled_failures(job: JobModel, caught_errors: list[Event], out: list[Failure]) -> list[Failure]:
    """A caught exception (see ``_handled``) of a process with no failure of its own: kept as a failure
    it recovered from (a note, never the cause), as one it trained on after would be."""
    taken = {id(f.state) for f in out if f.state is not None} | {f.rank for f in out if f.rank is not None}
    extra: dict[int, Failure] = {}
    for ev in caught_errors:
        st = owner(job, ev)
        key = id(st) if st is not None else id(ev)
        if key in taken or (st is not None and st.rank in taken) or key in extra:
            continue
        cls = classify(ev, False, False)
        if cls is not None:
            extra[key] = Failure(rank=st.rank if st is not None else global_rank(job, ev), state=st,
                                 host=st.host if st is not None else ev.host, category=cls[0], what=cls[1],
                                 events=[ev], recovered=True)
    return list(extra.values())


@_per_job
def _reporting_files(job: JobModel) -> set[str]:
    """Files holding torchrun's report of a failed worker: a nobody's "ERROR: ..." line there may be
    the words of the one worker it reports (pair_loose_traceback pairs them). Their consoles: a node's
    stdout beside the stderr that holds the report."""
    return {stream_console(e.file) for e in job.by_kind("elastic_failed", "elastic_cfe")}


@_per_job
def _rank_files(job: JobModel) -> set[str]:
    """Files holding lines of a known rank."""
    return set(_file_ranks(job))


@_per_job
def _file_ranks(job: JobModel) -> dict[str, set[int]]:
    """file -> the known ranks whose lines it holds."""
    out: dict[str, set[int]] = defaultdict(set)
    for st in job.ranks:
        if st.rank is not None:
            for f in st.files:
                out[f].add(st.rank)
    return out


@_per_job
def failures(job: JobModel) -> list[Failure]:
    """Every rank's first cause, de-duplicated, earliest first (time when known, else line order)."""
    job_timed_out = bool(timeouts_by_pg(job)) or bool(watchdog_kills(job))
    timed = timed_out_states(job)
    by_rank = job.known_ranks()
    echo = echo_only(job, job_timed_out, timed)
    merged: dict[tuple, Failure] = {}
    caught_errors: list[Event] = []  # (not ``handled``: that is tracebacks.handled, read above)
    said_by: dict[int, Event] = {}  # id(failure) -> the line its ``what`` comes from, when not its first
    for ev in job.by_kind(*CAUSE_KINDS, "torch_store_timeout", "numeric_warning"):
        st = owner(job, ev)
        if ev.kind == "log_error" and st is None and ev.rank is None and stream_console(ev.file) not in _reporting_files(job):
            continue  # an error line of nobody's (a shared console's "ERROR: ..."): no rank's last word
        if ev.kind == "log_error" and (heads_traceback(job, ev) or CARRIES_ON.search(str(ev.get("msg") or ""))):
            continue  # log.exception's message (the exception below it says what it was), or one it went on from
        if ev.kind == "python_exception" and caught(job, ev):
            caught_errors.append(ev)  # logged under "..., skipping" / "retrying": caught, and the process went on
            continue
        if oom_collateral(job, ev):
            continue  # killed with a larger process of its container by one OOM event: not what ran out
        if ev.kind == "shell_job_died" and any(ev is k for k in launcher_killed(job)):
            continue  # the launcher the job script ran was killed from outside: no rank's failure
        if ev.kind == "python_exception" and chained_to_echo(job, ev, job_timed_out, timed):
            continue  # raised from (or while handling) an echo ("raise StepFailed(...) from exc"): one too
        cls = classify(ev, job_timed_out, st is not None and id(st) in timed) or outside_sigterm(job, ev) \
            or srun_first_kill(job, ev) or store_not_joined(job, ev) or store_oversized(job, ev) \
            or store_beyond_world(job, ev)
        if cls is None or echoed_exit(job, ev, echo) or is_wrapper_echo(job, ev) or forced_kill(job, ev):
            continue
        if ev.get("exc_type") in ("BrokenPipeError", "ConnectionResetError") and st is not None and any(
                (e.file, e.line) < (ev.file, ev.line) and classify(e, job_timed_out, False) is None for e in st.errors):
            continue  # a pipe or socket to a process that went away, after the rank had lost a peer: one more echo
        if teardown_terminate(ev) and ((st is not None and id(st) in echo[0]) or teardown_after_echo(job, ev)):
            continue  # its teardown after an echo (see exits.echo_only), or a rank's right above it
        cat, what = cls
        own = global_rank(job, ev)
        named = fail_ranks(job, ev)
        if named == [None] and ev.kind == "timer_reaped":
            continue  # a pid no line ties to a rank: the rank it killed goes silent, and is found so
        if named == [None] and cat == "config":  # a store client no prefix names: its start-up line may
            client = store_client_rank(job, ev)
            named = [client if client is not None else store_host_rank(job, ev)]  # (or the store's host: its table)
        for rank in named:
            # a rank named only by a launcher report (no log of its own) has no process state
            rst = by_rank.get(rank) if rank is not None and rank in by_rank else st if rank == own else None
            host = ev.get("host") or ev.get("on_host") if ev.kind in ("slurm_task_exit", "elastic_cfe",
                                                                    "slurm_node_fail") else None
            if host is not None and rank is not None and ev.kind == "elastic_cfe":
                host = job.rank_hosts.get(rank, host)  # (the table's "localhost" may be the node's name)
            host = host or (rst.host if rst is not None else None) or ev.host or file_host(job, ev.file)
            if host is None and rank is not None and len(_file_ranks(job).get(ev.file, ())) > 1:
                host = node_name(job, ev.file)  # a node's console named after it ("cw-q-11.log"), its ranks' lines
            if host is None and rank is None and (st is None or st.rank is None) and ev.file not in _rank_files(job):
                host = node_name(job, ev.file)  # an agent's console of no rank: named after its node
            if host is None and ev.kind == "ds_exit":
                host = _only_host(job, ev.file)  # a node's launcher log: its ranks' NCCL lines name the node
            # (lines no writer claims are one failure per console: another file's are another process's)
            key = ("rank", rank) if rank is not None else \
                ("proc", id(st), ev.host, ev.pid, stream_console(ev.file) if st is None else None)
            f = merged.get(key)
            if f is None:
                said = what.replace(PID_UNNAMED, f"; rank {rank}'s own line names that pid") \
                    if rank is not None and ev.kind == "shell_job_died" else what  # (pids.self_pid_rank)
                merged[key] = Failure(rank=rank, state=rst, host=host, category=cat, what=said, events=[ev])
                continue
            f.host = f.host or host
            told = said_by[id(f)] if id(f) in said_by else f.events[0]
            if says_more(f.events, ev) or (everyones(job, told) and not everyones(job, ev) and rst is not None
                                            and trained_between(rst, told, ev)):
                # a more specific line of the same failure; or its own error after one every rank wrote
                # and it trained on after (a job-wide complaint it lived with)
                f.category, f.what = cat, what
                said_by[id(f)] = ev
            f.events.append(ev)
    out = list(merged.values())
    if not (job_timed_out or echo[0] or job.by_kind(*_REPORTS)):
        # A logged error in a job where nothing else went wrong (no peer lost it, nothing timed out,
        # no launcher reported a failed exit): the job ran on; it is no failure of the job's
        out = [f for f in out if not all(e.kind == "log_error" for e in f.events) and not ran_past(job, f)]
    if not any(not f.exit_only for f in out):
        # (a traceback cut short in a job whose ranks waited out a timeout is likelier one more timeout than a cause)
        out += _lone_timeout(job) or ([] if job_timed_out else headless_tracebacks(job))
    out += _signalled_agents(job, out)
    for pb in unreachable(job):  # a node's agent that could not reach the rendezvous endpoint
        out.append(Failure(rank=None, state=None, host=(pb.hosts or [None])[0], category="launcher", what=pb.what,
                           events=pb.events, label=f"the torchrun agent on {pb.hosts[0]}" if pb.hosts else None))
    out = name_the_erring_child(job, out, echo[1], job_timed_out, timed)
    out = pair_loose_traceback(job, out, echo[1])
    out = told_twice(out)
    # a nobody's error line that no failed exit of its file took (pair_loose_traceback) is no one's
    out = [f for f in out if f.rank is not None or f.label is not None or f.state is not None
           or not all(e.kind == "log_error" for e in f.events)]
    net_kinds = (*NETWORK_KINDS, "nccl_sock_closed", "nccl_socket_err")
    net_writers = {writer(job, e, line_key) for e in job.by_kind(*net_kinds)}
    for f in out:
        f.recovered = trained_on(job, f)
        if not f.recovered and before_clean_restart(job, f, _when(job, f)):
            # the failure that made torchrun restart the worker group is the restart's cause, however well the
            # restarted group did: the job lost its attempt to it (MN5 says whether the state was restored)
            f.what += "; torchrun restarted the worker group, which got over it"
        # "unhandled system error" raised right after this process's own socket/IB errors is the
        # transport failing (NET1/MN2 say between which hosts), not a crash of this rank.
        if f.category == "nccl" and all(e.kind in ("torch_nccl_error", "torch_nccl_err_kind") for e in f.events) \
                and any(writer(job, e, line_key) in net_writers for e in f.events):
            f.category = "network"
    out = [f for f in out if not all(harmless(job, e) for e in f.events)]  # (teardown noise: evidence.teardown)
    out = without_common_complaints(job, out, _REPORTS)  # (every rank logged it, then they parted: evidence.alike)
    out += _handled_failures(job, caught_errors, out)
    out = spread_failures(job, out)  # (ranks failing alike on one rank's NaN: evidence.numerics)
    out = accused_failures(job, out)  # (ranks failing alike, each naming one rank's model: evidence.accused)
    out = lock_holder_failures(job, out)  # (a wait for a file lock given up on: the rank that kept it, evidence.lockwait)
    if not out or all(f.exit_only for f in out):  # (every rank alike at start-up: evidence.alike)
        out = mesh_never_formed(job) or out or _exits_together(job)
    if not out and job.by_kind(*_REPORTS) and not job_timed_out and _store_waits(job):
        # every rank failed alike joining a store (a group set up again mid-run), one with other settings
        out += set_otherwise(job)  # (evidence.oddsetting)
    files = {p: i for i, p in enumerate(job.files)}
    # A rank's own error comes before any launcher's report of an exit; then time, then position.
    return sorted(out, key=lambda f: (f.exit_only, (t := _when(job, f)) is None, t or 0.0,
                                      files.get(f.events[0].file, 0), f.events[0].line))


def _when(job: JobModel, f: Failure) -> float | None:
    """By when a failure had happened: its time, or for an untimed error the time of the first dated line after
    it in its file (it happened by then). Both are bounds: an untimed error's time is at most the first dated line
    after it, however late a launcher's dated exit report among its evidence came."""
    bounds = [t for t in (f.ts, dated_after(job, f.events[0]) if f.events[0].ts is None else None) if t is not None]
    return min(bounds) if bounds else None


def first_failure(job: JobModel, crash_only: bool = False) -> Failure | None:
    """The earliest non-consequential failure (``crash_only``: process crashes, not transport errors)."""
    for f in failures(job):
        if not f.recovered and (f.crash or not crash_only):
            return f
    return None


def job_failed(job: JobModel) -> bool:
    """Did anything go wrong (a timeout, a watchdog kill, a crash that did not recover, or
    flight-recorder dumps that name a culprit)?"""
    return bool(timeouts_by_pg(job) or watchdog_kills(job) or first_failure(job, crash_only=True)
                or dump_facts(job).culprits)


def _lone_timeout(job: JobModel) -> list[Failure]:
    """One rank timed out, and every other rank's error is only the loss of it afterwards ("Connection
    closed by peer"): the others were still waiting within their own timeout when it gave up, so its
    wait ended first (a shorter timeout than theirs, or it waited long before them). Its timeout is
    what ended the job: a failure of its own, not an echo."""
    reports = [r for pt in timeouts_by_pg(job).values() for r in pt.reports]
    if len(reports) != 1 or reports[0].rank is None or reports[0].state is None:
        return []
    lone = reports[0]
    others = [st for st in job.ranks if st.rank is not None and st.rank != lone.rank]
    first = min(((e.file, e.line) for e in lone.events), default=None)
    if len(others) < 2 or first is None or any(not st.errors for st in others):
        return []
    for st in others:
        texts = [" ".join(str(v) for v in (e.get("msg"), e.get("err")) if v) or e.text for e in st.errors]
        if not all(_PEER_GONE.search(t) for t in texts):
            return []  # an error of its own (or a timeout): not only the echo of the lone one
    ms = lone.timeout_ms
    where = f" after {ms // 1000 if ms and ms % 1000 == 0 else ms} {'s' if ms and ms % 1000 == 0 else 'ms'}" if ms else ""
    return [Failure(rank=lone.rank, state=lone.state, host=lone.state.host, category="timeout",
                    what=f"it alone timed out{where}; the others, still waiting, only lost it after: a shorter "
                         "timeout than theirs", events=list(lone.events[:2]))]
