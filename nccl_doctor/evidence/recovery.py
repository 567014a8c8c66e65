"""A failing process that trained on afterwards: the error did not stop it (``Failure.recovered``).

Read from the step lines that follow the error in its file, unless a launcher or a driver reported
the process's exit (its later steps were printed before the error, or are a restarted group's), or
the error ended a thread the rank then starved for. And a failure the job got over: torchrun
restarted the worker group after it, and the restarted ranks trained on with no failure of theirs
(``clean_restart``): the job finished; the failure stays in the report as one it recovered from.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ..events import Event
from ..model import JobModel
from ..model.job import ERROR_KINDS
from ..model.links import rank_list
from .causes import _REPORTS
from .facts import _per_job, owner
from .failure_record import Failure
from .launcher_facts import attempt_in_path
from .timeouts import timeouts_by_pg
from .tracebacks import traceback_head


@_per_job
def _progress_by_file(job: JobModel) -> dict[str, list[Event]]:
    """Training steps and restarts per file, in line order (job.events is sorted by file, line)."""
    out: dict[str, list[Event]] = defaultdict(list)
    for e in job.by_kind("train_step", "elastic_restart", "elastic_rdzv"):
        out[e.file].append(e)
    return out


def trained_on(job: JobModel, f: Failure) -> bool:
    """The failing process trained on afterwards (the error did not stop it). Never when a launcher
    reported the process's exit with an error: a step line that comes after the traceback in the
    file was printed before it (torchrun forwards stdout and stderr by separate threads)."""
    if any(e.kind in _REPORTS for e in f.events):
        return False
    if f.rank is not None and any(f.rank in rank_list(str(e.get("ranks") or "")) for e in job.by_kind("ray_error_snippet")):
        return False  # Ray's driver reports that rank's training function failed: it did not go on
    ev = f.events[0]
    if f.state is not None and all(e.kind == "log_error" for e in f.events):
        # A logged error is a cause only as the rank's last word: any later line of its own (a step,
        # a message) says it handled it and went on.
        # (later: further down its file, or, in another of its files, dated after it: two files' line
        # numbers say nothing of which came first)
        return any(e.kind not in ERROR_KINDS and ((e.file == ev.file and e.line > ev.line) or (
            e.file != ev.file and e.ts is not None and ev.ts is not None and e.ts > ev.ts)) for e in f.state.events)
    if _uncaught(job, ev):
        return False  # its step lines below the traceback were printed before it, relayed late
    progress = _progress_by_file(job).get(ev.file, ())
    later = [e for e in progress if e.line > ev.line]
    if any(e.kind != "train_step" for e in later):
        return False  # progress after a restart is a new attempt, not a recovery
    failed = [e.line for e in job.by_kind("elastic_failed") if e.file == ev.file and e.line > ev.line]
    if failed and any(e.line > failed[0] for e in later):
        return False  # the agent reported the worker failed, and the steps after are its restarted group's
    if _thread_starved(job, f):
        return False
    mine = [e for e in later if owner(job, e) is f.state or (e.rank is not None and e.rank == f.rank)]
    if mine and not _no_further(job, f, ev, mine):
        return True
    if f.rank is None and f.label is None:
        # Nobody's traceback (no rank prefix on it): when every rank that prints steps in this file
        # printed more of them after it, whoever wrote it trained on (a caught error, logged).
        stepping = {e.rank for e in progress if e.rank is not None}
        return bool(stepping) and None not in {e.rank for e in progress} \
            and stepping <= {e.rank for e in later}
    return False


def _uncaught(job: JobModel, ev: Event) -> bool:
    """torch's hook printed the traceback ("[rank3]: " before each of its lines): an exception nothing caught, in
    the main thread; the process was ending."""
    if ev.kind != "python_exception":
        return False
    head = traceback_head(job, ev, same_rank=True)
    return head is not None and head.get("hook") == "torch"


_STEP_SAID = re.compile(r"\b[Ss]tep[ =:#]{0,2}(\d{1,9})\b")


def _no_further(job: JobModel, f: Failure, ev, later: list) -> bool:
    """Its step lines below the error count no step past the ones before it, or past the step its error names
    (a tee relaying stdout and stderr by two threads puts the step it was on after its traceback): no sign
    that it went on."""
    before = [e.get("step") for e in _progress_by_file(job).get(ev.file, ()) if e.line < ev.line
              and isinstance(e.get("step"), int) and (owner(job, e) is f.state or (e.rank is not None and e.rank == f.rank))]
    after = [e.get("step") for e in later if isinstance(e.get("step"), int)]
    said = [int(n) for n in _STEP_SAID.findall(ev.text)]  # "loss is nan at step 12": the step it failed in
    return bool(before) and bool(after) and len(after) == len(later) and max(after) <= max(before + said)


@_per_job
def clean_restart(job: JobModel) -> float | None:
    """The time of the last restart of the worker group when the job got over what came before it:
    the launcher reported a worker's failure, every rank it had started again (its start-up line,
    later), and after that every rank trained (step lines) and nothing failed, timed out or was
    reported failed. None when that is not what the (dated) lines say."""
    reports = [e for e in job.by_kind("elastic_failed", "elastic_restart") if e.ts is not None]
    if not reports:
        return None
    failed = [e.ts for e in reports]
    first_fail = min(failed)
    # the same agent's restart: workers starting again in the console it reported the failure in, or in
    # torchrun's attempt_<k> folder (not a new job's in a folder of its own: a sweep's next trial)
    consoles = {e.file: e.line for e in reports}
    starts: dict[int, float] = {}
    for e in job.by_kind("rank_world"):
        st = owner(job, e)
        rank = e.rank if e.rank is not None else getattr(st, "rank", None)
        same_agent = e.line > consoles.get(e.file, 1 << 62) or (attempt_in_path(e.file) or 0) > 0
        if rank is not None and e.ts is not None and e.ts > first_fail and same_agent:
            starts[rank] = max(starts.get(rank, e.ts), e.ts)
    if not starts or (job.ranks_expected and len(starts) < job.ranks_expected):
        return None
    restart = min(starts.values())
    if any(t > restart for t in failed):
        return None  # the restarted group failed too
    late = [e for e in job.events if e.ts is not None and e.ts > restart]
    if any(e.kind in ERROR_KINDS or e.kind in _REPORTS for e in late):
        return None
    stepped = {e.rank if e.rank is not None else getattr(owner(job, e), "rank", None)
               for e in late if e.kind == "train_step"}
    return restart if stepped - {None} else None


def before_clean_restart(job: JobModel, f: Failure, when: float | None) -> bool:
    """The failure came before a restart the job got over (see clean_restart)."""
    restart = clean_restart(job)
    return restart is not None and when is not None and when < restart


def _thread_starved(job: JobModel, f: Failure) -> bool:
    """The exception ended one of the rank's threads ("Exception in thread prefetch:" above its
    traceback), the main loop went on a while, and then the others timed out waiting while this rank
    did not: it stopped for want of what the thread did (a queue it reads, a lock it held)."""
    ev = f.events[0]
    heads = [e for e in job.by_kind("py_thread_exception") if e.file == ev.file and 0 < ev.line - e.line <= 60]
    if not heads or f.rank is None:
        return False
    waited = {r.rank for pt in timeouts_by_pg(job).values() for r in pt.reports}
    return bool(waited) and f.rank not in waited


def trained_between(st, before: Event, after: Event) -> bool:
    """The rank printed a step of its own between two of its error lines (of one file): it went on
    after the first, which did not stop it."""
    if before.file != after.file:
        return False
    lo, hi = before.line, after.line
    return any(e.kind == "train_step" and e.file == before.file and lo < e.line < hi for e in st.events)
