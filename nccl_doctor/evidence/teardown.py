"""Errors after training ran to its end: every rank printed the last step of its run ("step 29/30"),
and nothing says a process failed (no launcher reported a failed exit, nothing timed out). Then the
errors a handler caught (``log.exception``'s traceback, "..., skipping") and those Python itself
ignored ("Exception ignored in atexit callback: ...") changed nothing: a metrics flush on a closed
socket, an exit handler removing a file that is gone. They are teardown noise, not the job's failure;
an uncaught exception (the process died of it) still is one.
"""

from __future__ import annotations

from ..events import Event, by_place
from ..model import JobModel
from .causes import _REPORTS
from .facts import _per_job
from .timeouts import timeouts_by_pg, watchdog_kills
from .tracebacks import caught, logged


@_per_job
def finished_training(job: JobModel) -> bool:
    """Every rank of the world printed the last step of the run, the same one; no launcher reported
    an exit and nothing timed out. Only step lines that count the run's steps ("step 29/30", no epoch:
    an epoch's last step is no end of training)."""
    known = job.known_ranks()
    if not known or (job.ranks_expected and len(known) < job.ranks_expected):
        return False
    if job.by_kind(*_REPORTS) or timeouts_by_pg(job) or watchdog_kills(job):
        return False
    lasts = set()
    for st in known.values():
        steps = [e for e in st.events if e.kind == "train_step" and isinstance(e.get("step"), int)
                 and isinstance(e.get("total"), int)]
        if not steps:
            return False
        last = max(steps, key=by_place)
        step, total = last.get("step"), last.get("total")
        if last.get("epoch") is not None or step + 1 < total or step > total:
            return False
        lasts.add((step, total))
    return len(lasts) == 1


def harmless(job: JobModel, ev: Event) -> bool:
    """An error line of a job that finished training, which no process died of: a logged error, or
    an exception a handler caught or Python ignored."""
    if ev.kind not in ("log_error", "python_exception") or not finished_training(job):
        return False
    return ev.kind == "log_error" or caught(job, ev) or logged(job, ev)
