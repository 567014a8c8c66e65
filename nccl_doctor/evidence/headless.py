"""A rank's traceback whose exception line is not in the logs: the file ends inside it.

A console copied onto a full disk, a `head -c` of it, a journal export cut at a block: the copy can end in the
middle of the one traceback that says what went wrong. The frames are there ("[rank0]: Traceback ...",
"File train.py, line 228, in main / loss = F.mse_loss(model(x), y)"), the exception line is not. When nothing else
in the job is a failure of its own (the others only lost that rank afterwards), that rank raised first: its own
error, whose words were cut off. Only one such traceback in the job, running to the very end of its file."""

from __future__ import annotations

from ..model import JobModel
from .facts import _per_job, owner
from .failure_record import Failure

#: What may follow a traceback's start in the rank's own lines until the file ends: its frames.
_FRAMES = frozenset(("traceback_start", "py_frame", "py_script_frame", "py_signal_frame"))


@_per_job
def headless_tracebacks(job: JobModel) -> list[Failure]:
    found = []
    for ev in job.by_kind("traceback_start"):
        st = owner(job, ev)
        if ev.get("by_agent") or st is None or st.rank is None:
            continue
        ends = job.last_lines.get(ev.file) or {}
        last, mine = ends.get(None), ends.get(("rank", st.rank))
        if last is None or mine is None or last.line <= ev.line or mine.line != last.line:
            continue  # the file goes on after it, with another writer's lines
        after = [e for e in st.events if e.file == ev.file and e.line > ev.line]
        if any(e.kind not in _FRAMES for e in after):
            continue  # its exception line (or anything else of its own) came after: a whole traceback
        found.append((ev, st, [e for e in after if e.kind == "py_script_frame"]))
    if len(found) != 1:
        return []
    ev, st, frames = found[0]
    where = f", raised under {frames[-1].get('func')}() at line {frames[-1].get('srcline')} of its script" \
        if frames else ""
    return [Failure(rank=st.rank, state=st, host=st.host or job.rank_hosts.get(st.rank), category="exception",
                    what=f"a traceback of its own{where}, whose exception line is not in the logs (its file ends "
                         "inside the traceback: the copy was cut there)", events=[ev, *frames[-1:]])]
