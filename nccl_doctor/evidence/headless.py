"""A rank's traceback whose exception line is not in the logs: the file ends inside it.

A console copied onto a full disk, a `head -c` of it, a journal export cut at a block: the copy can end in the
middle of the one traceback that says what went wrong. The frames are there ("[rank0]: Traceback ...",
"File train.py, line 228, in main / loss = F.mse_loss(model(x), y)"), the exception line is not. When nothing else
in the job is a failure of its own (the others only lost that rank afterwards), that rank raised first: its own
error, whose words were cut off. Only one such traceback in the job, running to the very end of its file, and not
where ranks timed out waiting (failures.py: there a cut traceback is likelier one more timeout: t418's head -c)."""

from __future__ import annotations

import re

from ..events import Event
from ..model import JobModel, RankState
from .facts import _per_job
from .failure_record import Failure

#: A traceback's last line, the exception ("UserWarning: To get the last learning rate ...", "KeyboardInterrupt"):
#: a dotted CamelCase name, then ": " or nothing.
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w{0,64}\.){0,8}[A-Z]\w{0,64}(?::\s|:?$)")
#: What may follow a traceback's start in the rank's own lines until the file ends: its frames.
_FRAMES = frozenset(("traceback_start", "py_frame", "py_script_frame", "py_signal_frame"))


def cut_traceback(job: JobModel, st: RankState) -> tuple[Event, list[Event]] | None:
    """(its traceback's first line, its script frames) when the rank's own lines end in a traceback that runs to the
    end of its file: the file was cut inside it (a rank raising something is not a rank gone silent)."""
    found = _cut_tracebacks(job).get(id(st))
    return found[1] if found is not None else None


@_per_job
def _cut_tracebacks(job: JobModel) -> dict[int, tuple[RankState, tuple[Event, list[Event]]]]:
    """id(rank state) -> (the state, its cut traceback: ``cut_traceback``) for every rank that has one: found once
    per job, for RK1's failure and for silent.py."""
    return {id(st): (st, cut) for st in job.ranks if (cut := _cut(job, st)) is not None}


def _cut(job: JobModel, st: RankState) -> tuple[Event, list[Event]] | None:
    if st.rank is None:
        return None
    for ev in reversed(st.events):
        if ev.kind != "traceback_start":
            continue
        if ev.get("by_agent"):
            return None
        ends = job.last_lines.get(ev.file) or {}
        last, mine = ends.get(None), ends.get(("rank", st.rank))
        if last is None or mine is None or last.line <= ev.line or mine.line != last.line:
            return None  # the file goes on after it, with another writer's lines
        if _EXCEPTION_LINE.match(last.text.strip()):
            return None  # its file ends on the exception line, of a kind not read as an error ("UserWarning: ...")
        after = [e for e in st.events if e.file == ev.file and e.line > ev.line]
        if any(e.kind not in _FRAMES for e in after):
            return None  # its exception line (or anything else of its own) came after: a whole traceback
        return ev, [e for e in after if e.kind == "py_script_frame"]
    return None


@_per_job
def headless_tracebacks(job: JobModel) -> list[Failure]:
    found = _cut_tracebacks(job)
    if len(found) != 1:
        return []
    st, (ev, frames) = next(iter(found.values()))
    where = f", raised under {frames[-1].get('func')}() at line {frames[-1].get('srcline')} of its script" \
        if frames else ""
    return [Failure(rank=st.rank, state=st, host=st.host or job.rank_hosts.get(st.rank), category="exception",
                    what=f"a traceback of its own{where}, whose exception line is not in the logs (its file ends "
                         "inside the traceback: the copy was cut there)", events=[ev, *frames[-1:]])]
