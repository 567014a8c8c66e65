"""The job stopped from outside (a preemption, a scheduler's time limit or cancel, an operator's Ctrl-C,
a ``timeout`` wrapper): the launchers' own words that a signal reached them, and the exceptions a stop
signal raises in the processes. Not a failure of any rank (CATALOGUE: a scheduler's cancel is no fault);
the report says it in a note."""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..model import JobModel
from .facts import _per_job, file_host

#: Exceptions a stop signal raises in Python.
STOP_TYPES = ("KeyboardInterrupt", "SignalException", "SystemExit")


@_per_job
def agent_signals(job: JobModel) -> tuple[set[str], dict[str, list[Event]]]:
    """(every torchrun agent of the job, by host or file; the agents that got a death signal -> those lines)."""
    agents = {file_host(job, e.file) or e.file for k in job.kinds("elastic_") for e in job.by_kind(k)}
    hit: dict[str, list[Event]] = defaultdict(list)
    for e in job.by_kind("elastic_death_signal"):
        hit[file_host(job, e.file) or e.file].append(e)
    return agents, dict(hit)


def stopped_from_outside(job: JobModel) -> list[Event]:
    """The lines saying the whole job was stopped from outside: every torchrun agent got a death signal
    (an operator's Ctrl-C, a preemption, a scheduler's cancel), or Slurm cancelled the job. Not a
    failure of any rank (see _signalled_agents); the report says it in a note."""
    agents, hit = agent_signals(job)
    if hit and set(hit) >= agents:
        return [evs[0] for evs in hit.values()]
    launcher = job.by_kind("launcher_signalled")
    if launcher:
        return launcher[:2]
    killed = launcher_killed(job)
    if killed:
        return killed[:2]
    # (a step cancel right after srun's own "_step_signal: Terminating" is srun's kill-on-bad-exit)
    by_srun = {e.file: e.line for e in job.by_kind("slurm_step_stop") if e.get("by_srun")}
    return [e for e in job.by_kind("slurm_cancel") if not (e.file in by_srun and by_srun[e.file] < e.line)][:2]


def interrupted(job: JobModel) -> bool:
    """A stop signal reached the processes (KeyboardInterrupt, SignalException, SystemExit raised)."""
    return any(str(e.get("exc_type") or "").endswith(STOP_TYPES) for e in job.by_kind("python_exception"))


@_per_job
def launcher_killed(job: JobModel) -> list[Event]:
    """The job script's shell reporting that the command it ran was killed ("job.sh: line 14: 25940
    Killed "$@""), where that process was no rank (no rank has its pid) and no rank wrote an error,
    timed out or lost a peer: the launcher itself was killed from outside (an operator's kill -9),
    its workers orphaned (hung, or training on). Not a failure of any rank."""
    reports = [e for e in job.by_kind("shell_job_died") if e.get("sig") == "SIGKILL" and e.get("pid") is not None]
    if not reports or any(r.errors or r.timeouts for r in job.ranks):
        return []
    pids = {r.pid for r in job.ranks if r.pid is not None}
    return [e for e in reports if e.get("pid") not in pids]
