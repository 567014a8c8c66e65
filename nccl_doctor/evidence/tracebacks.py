"""What surrounds a traceback: the logged line that heads it (``log.exception``'s message), a handler's
words that it caught the exception and went on ("..., skipping", "retrying in 1.0s"), and where each
traceback began in its file (evidence.failures reads these)."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterator

from ..events import Event
from ..model import JobModel
from .facts import _per_job, global_rank


def heads_traceback(job: JobModel, ev: Event) -> bool:
    """A logged error right above a traceback (``log.exception("training failed")``, whose traceback
    has no prefix of its own): the heading of that exception, not an error of its own."""
    starts = traceback_starts(job)
    mine = global_rank(job, ev)
    for k in (1, 2, 3):
        tb = starts.get((ev.file, ev.line + k))
        if tb is not None:
            theirs = global_rank(job, tb)
            return theirs is None or theirs == mine  # (another rank's traceback in a shared console: no)
    return False


#: What a handler logs above a traceback it caught and went on from ("failed to decode sample 7, skipping",
#: "download failed (attempt 1/3), retrying in 1.0s").
CARRIES_ON = re.compile(r"\b(?:skipping|skipped|retrying|will retry|trying again|ignoring|ignored|continuing|"
                         r"falling back)\b", re.I)


@_per_job
def _handled_starts(job: JobModel) -> dict[str, list[int]]:
    """file -> the lines of the tracebacks that a logged "..., skipping" / "..., retrying" heads
    (``log.exception`` in a handler that carries on), sorted."""
    out: dict[str, list[int]] = defaultdict(list)
    starts = traceback_starts(job)
    for ev in job.by_kind("log_error", "log_carry_on"):
        if CARRIES_ON.search(str(ev.get("msg") or ev.text)):
            for k in (1, 2, 3):
                if (ev.file, ev.line + k) in starts:
                    out[ev.file].append(ev.line + k)
                    break
    return {f: sorted(lines) for f, lines in out.items()}


def caught(job: JobModel, ev: Event) -> bool:
    """The exception line of a traceback that a handler's "..., skipping" heads: the traceback it
    belongs to is the last one started before it in the file (its frames come in between)."""
    handled = _handled_starts(job).get(ev.file)
    if not handled:
        return False
    starts = _starts_by_file(job).get(ev.file, [])
    i = bisect_left(starts, ev.line) - 1
    return i >= 0 and ev.line - starts[i] <= 400 and starts[i] in handled


@_per_job
def _starts_by_file(job: JobModel) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for file, line in traceback_starts(job):
        out[file].append(line)
    return {f: sorted(lines) for f, lines in out.items()}


@_per_job
def traceback_starts(job: JobModel) -> dict[tuple[str, int], Event]:
    return {(e.file, e.line): e for e in job.by_kind("traceback_start")}


def frames_above(evs: list[Event], i: int, stop: frozenset[str]) -> Iterator[Event]:
    """The events right above ``evs[i]`` (an exception line) in its traceback, innermost first: back to
    its "Traceback" line, an event of a ``stop`` kind (another exception) or another file; 200 at most."""
    exc = evs[i]
    for j in range(i - 1, max(-1, i - 200), -1):
        f = evs[j]
        if f.file != exc.file or f.kind == "traceback_start" or f.kind in stop:
            return
        yield f


def script_name(frame: Event) -> str:
    """The file name of a ``py_script_frame`` (``train.py``)."""
    return str(frame.get("path")).replace("\\", "/").rsplit("/", 1)[-1]
