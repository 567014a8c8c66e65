"""A silent hang: the job's progress stopped long before its logs end, and nothing failed.

Training progress (step lines with a time) stopped, the logs went on for much longer than the step
interval (or until the job was stopped from outside: a scheduler's cancel, an operator's Ctrl-C, a
preemption, after which a minute is long enough), and no watchdog, timeout or crash was reported.
A job that never timed a training step hung while starting when it was stopped from outside
minutes after its own last line (``STARTUP_FACTOR`` floors, as ``watch`` judges a job with no
rhythm). TO1 reports it (error handling that never turned the hang into an error); the verdict
words it.
"""

from __future__ import annotations

from statistics import median

from ..events import Event
from ..findings import Evidence
from ..model import JobModel
from . import facts
from .facts import _per_job
from .outside import stopped_from_outside
from .progress import STALL_AFTER, STARTUP_FACTOR

#: A hang is a gap with no progress of at least this long, and this many step intervals.
MIN_GAP_S = 1800.0
MIN_GAP_STEPS = 20


@_per_job
def silent_hang(job: JobModel) -> tuple[float, Event, Event | Evidence] | None:
    """(seconds without progress, last step line, last line) when the job stalled with no error."""
    if facts.job_failed(job) or any(r.stage == "finished" for r in job.ranks):
        return None
    quiet = _quiet_after_output(job)
    steps = sorted((e for e in job.by_kind("train_step") if e.ts is not None), key=lambda e: e.ts)
    # Every step line's time (files keep only some step events: see nccl_doctor.eventcap).
    times = job.step_times if job.step_times is not None else [e.ts for e in steps]
    if len(times) < 2:
        return quiet or _startup_hang(job)
    # The end of the logs: the latest timed event or last line of any writer.
    ends: list[tuple[float, Event | Evidence]] = [(e.ts, e) for e in job.events if e.ts is not None]
    ends += [(ll.ts, Evidence(ll.file, ll.line, None, ll.text)) for per_file in job.last_lines.values()
             for ll in per_file.values() if ll.ts is not None]
    end_ts, end = max(ends, key=lambda te: te[0])
    last = steps[-1]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    interval = median(gaps) if gaps else 0.0
    gap = end_ts - last.ts
    # Logs may just stop being copied; a job stopped from outside was alive until the stop, so a
    # shorter silence before it already says the job hung (the floor of watch's stall threshold).
    floor = STALL_AFTER if stopped_from_outside(job) else MIN_GAP_S
    if gap >= max(floor, MIN_GAP_STEPS * interval):
        return gap, last, end
    return quiet


def _startup_hang(job: JobModel) -> tuple[float, Event, Event] | None:
    """The job's own output stopped ``STARTUP_FACTOR`` floors or more before it was stopped from
    outside, with no training step timed: it hung while starting (the others waited in a collective
    or a rendezvous whose timeout had not come yet)."""
    stops = [e for e in stopped_from_outside(job) if e.ts is not None]
    if not stops:
        return None
    stop = min(stops, key=lambda e: e.ts)
    own = [e for e in job.events if e.ts is not None and e.ts <= stop.ts and not e.kind.startswith(_OUTSIDE)]
    if not own:
        return None
    last = max(own, key=lambda e: (e.ts, e.line))
    gap = stop.ts - last.ts
    return (gap, last, stop) if gap >= STARTUP_FACTOR * STALL_AFTER else None


#: Kinds of lines the launcher or the scheduler writes, not the job's processes.
_OUTSIDE = ("elastic_", "slurm_")


def _quiet_after_output(job: JobModel) -> tuple[float, Event | Evidence, Evidence] | None:
    """The job's own (launcher-labelled) output stopped, and lines from outside the job (a status
    cron, the scheduler) kept arriving in the same file for at least MIN_GAP_S: a hang with no error.
    The job's lines carry no time here; the outside lines' timestamps measure the silence."""
    best = None
    for path, (first, last, job_line) in job.quiet.items():
        span = last - first
        if span >= MIN_GAP_S and (best is None or span > best[0]):
            ll = job.last_lines.get(path, {}).get(None)
            end = Evidence(path, ll.line, None, ll.text) if ll is not None else Evidence(path, job_line, None, "")
            progress = [e for e in job.by_kind("train_step") if e.file == path and e.line <= job_line]
            stop = progress[-1] if progress else next((e for e in job.events if e.file == path and e.line == job_line), None)
            text = next((x.text for x in job.last_lines.get(path, {}).values() if x.line == job_line), "")
            best = (span, stop or Evidence(path, job_line, None, text), end)
    return best
