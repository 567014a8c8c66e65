"""What surrounds a traceback: the logged line that heads it (``log.exception``'s message), a handler's
words that it caught the exception and went on ("..., skipping", "retrying in 1.0s"), where each
traceback began in its file, and the exception it was chained from ("The above exception was the
direct cause ...": evidence.failures reads these)."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterator
from operator import attrgetter

from ..events import Event
from ..model import JobModel
from ..model.job import ERROR_KINDS, TIMEOUT_KINDS
from .causes import classify
from .facts import _per_job, global_rank, owner


def heads_traceback(job: JobModel, ev: Event) -> bool:
    """A logged error right above a traceback (``log.exception("training failed")``, whose traceback
    has no prefix of its own): the heading of that exception, not an error of its own."""
    starts = traceback_starts(job)
    mine = global_rank(job, ev)
    for k in (1, 2, 3):
        tb = starts.get((ev.file, ev.line + k))
        if tb is not None:
            if k > 1 and _event_lines(job).get(ev.file, set()).intersection(range(ev.line + 1, ev.line + k)):
                return False  # another record between them (torchrun's "failed" line above its own traceback)
            theirs = global_rank(job, tb)
            return theirs is None or theirs == mine  # (another rank's traceback in a shared console: no)
    return False


@_per_job
def _event_lines(job: JobModel) -> dict[str, set[int]]:
    """file -> the lines of its events, for the files where a traceback starts."""
    files = {e.file for e in job.by_kind("traceback_start")}
    out: dict[str, set[int]] = defaultdict(set)
    for e in job.events:
        if e.file in files:
            out[e.file].add(e.line)
    return out


#: What a handler logs above a traceback it caught and went on from ("failed to decode sample 7, skipping",
#: "download failed (attempt 1/3), retrying in 1.0s", "it's safe to ignore this error").
CARRIES_ON = re.compile(r"\b(?:skipping|skipped|retrying|will retry|trying again|ignoring|ignored|continuing|"
                         r"falling back|safe to ignore)\b|--- Logging error ---", re.I)


@_per_job
def _handled_starts(job: JobModel) -> dict[str, list[int]]:
    """file -> the lines of the tracebacks that a logged "..., skipping" / "..., retrying" heads
    (``log.exception`` in a handler that carries on), sorted."""
    out: dict[str, list[int]] = defaultdict(list)
    direct: dict[str, list[int]] = defaultdict(list)  # headed by the line right above: the same writer's record
    starts = traceback_starts(job)
    heads = job.by_kind("traceback_start")
    claimed: set[int] = set()
    for ev in job.by_kind("log_error", "log_carry_on"):
        if ev.get("carry") == "Logging error":
            # logging's own report: its traceback is the next one of the same writer, whatever other
            # writers' lines came in between (a console several ranks share); two reports written at
            # once ("--- Logging error ---" twice, then two tracebacks) each head their own
            nxt = next((h for h in heads if h.file == ev.file and 0 < h.line - ev.line <= 400 and id(h) not in claimed
                        and (h.rank, h.local_rank) == (ev.rank, ev.local_rank)), None)
            if nxt is not None:
                claimed.add(id(nxt))
                out[ev.file].append(nxt.line)
        elif CARRIES_ON.search(str(ev.get("msg") or ev.text)):
            for k in (1, 2, 3):
                head = starts.get((ev.file, ev.line + k))
                if head is not None:
                    # (torch's "[rank3]:" on each line of a traceback is its hook for an exception nothing
                    # caught: the process died of it, whatever the record above it said)
                    if head.get("hook") != "torch":
                        out[ev.file].append(ev.line + k)
                        if k == 1:
                            direct[ev.file].append(ev.line + k)
                    break
    _chained_on(job, direct, out)
    return {f: sorted(lines) for f, lines in out.items()}


def _chained_on(job: JobModel, direct: dict[str, list[int]], handled_starts: dict[str, list[int]]) -> None:
    """Add the tracebacks chained to a handled one that its handler's record heads right above ("During
    handling of the above exception ...": one logged exception printed as two or more tracebacks, tenacity's
    "Retrying ... as it raised" with exc_info): the handler caught the last of them, so they are all handled."""
    chains: dict[str, list[int]] = defaultdict(list)
    for ev in job.by_kind("py_chain"):
        if ev.file in direct:
            chains[ev.file].append(ev.line)
    by_file = _starts_by_file(job)
    for file, lines in chains.items():
        starts, done = by_file.get(file, []), set(direct[file])
        for chain in sorted(lines):
            i = bisect_right(starts, chain)  # (a chain line is no traceback's start: the next start is starts[i])
            before = starts[i - 1] if i else None
            if i < len(starts) and starts[i] - chain <= 3 and before in done and starts[i] not in done:
                done.add(starts[i])
                handled_starts[file].append(starts[i])


def handled(job: JobModel, ev: Event) -> bool:
    """An error a handler dealt with and went on from: a caught exception ("..., retrying" above its
    traceback), or the handler's own record that says it carries on."""
    if ev.kind == "python_exception":
        return caught(job, ev)
    return ev.kind == "log_error" and CARRIES_ON.search(str(ev.get("msg") or ev.text)) is not None


def caught(job: JobModel, ev: Event) -> bool:
    """The exception line of a traceback that a handler's "..., skipping" heads."""
    return _headed_by(job, ev, _handled_starts(job).get(ev.file))


def _headed_by(job: JobModel, ev: Event, heads) -> bool:
    """The traceback exception line ``ev`` ends starts at one of ``heads`` (its file's headed traceback lines)."""
    if not heads:
        return False
    start = traceback_head(job, ev)
    return start is not None and ev.line - start.line <= 400 and start.line in heads


def traceback_head(job: JobModel, ev: Event, same_rank: bool = False) -> Event | None:
    """The start of the traceback the exception line ``ev`` ends: the last one started before it in its
    file (its frames come in between); with ``same_rank``, the last one its own rank started (ranks
    interleave their tracebacks in one tee'd console)."""
    starts = _starts_by_file(job).get(ev.file, [])
    by_line = traceback_starts(job)
    for i in range(bisect_left(starts, ev.line) - 1, -1, -1):
        start = by_line[(ev.file, starts[i])]
        if not same_rank or start.rank == ev.rank:
            return start
    return None


@_per_job
def _logged_starts(job: JobModel) -> dict[str, set[int]]:
    """file -> the lines of the tracebacks that an error record right above heads (``log.exception``:
    the record and its traceback in one write, written by a handler that caught the exception)."""
    out: dict[str, set[int]] = defaultdict(set)
    starts = traceback_starts(job)
    for ev in job.by_kind("log_error"):
        if (ev.file, ev.line + 1) in starts:
            out[ev.file].add(ev.line + 1)
    return out


def logged(job: JobModel, ev: Event) -> bool:
    """The exception line of a traceback that a handler logged (``log.exception``): caught, whatever
    the process did next (carried on, exited, raised again: other lines tell)."""
    return _headed_by(job, ev, _logged_starts(job).get(ev.file))


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


#: Where a traceback's frames end going outwards: another exception's line.
EXCEPTION_LINES = frozenset(("python_exception",))


def where_signal_found(job: JobModel, ev: Event) -> list[Event] | None:
    """The script frames where a signal found the process, innermost first, when the exception ``ev`` was
    raised inside a signal handler (a ``py_signal_frame`` above it in its traceback: a handler that ran a
    collective, as Lightning's broadcast of a SIGTERM, loses its peers); None when it was not."""
    st = owner(job, ev)
    if ev.kind != "python_exception" or st is None:
        return None
    i = next((k for k in range(len(st.events) - 1, -1, -1) if st.events[k] is ev), None)
    if i is None:
        return None
    frames = list(frames_above(st.events, i, EXCEPTION_LINES))
    handler = next((k for k, f in enumerate(frames) if f.kind == "py_signal_frame"), None)
    if handler is None:
        return None
    return [f for f in frames[handler + 1:] if f.kind == "py_script_frame"]


def script_name(frame: Event) -> str:
    """The file name of a ``py_script_frame`` (``train.py``)."""
    return str(frame.get("path")).replace("\\", "/").rsplit("/", 1)[-1]


#: Events that are part of a traceback but not its exception line.
_NOT_EXCEPTION = frozenset(("traceback_start", "py_chain", "py_script_frame", "py_signal_frame", "torch_c10d_frame"))
#: How far above a traceback its chain's separator may be (blank lines, a launcher's empty prefix),
#: and the exception above that separator.
_SEPARATOR_GAP = 4
_CAUSE_GAP = 400
_LINE = attrgetter("line")


@_per_job
def _chained_files(job: JobModel) -> dict[str, list[Event]]:
    """file -> its events in line order, for the files where a chain separator was read (none in most jobs)."""
    files = {e.file for e in job.by_kind("py_chain")}
    out: dict[str, list[Event]] = defaultdict(list)
    if files:
        for e in job.events:  # (sorted by place)
            if e.file in files:
                out[e.file].append(e)
    return out


def chained_from(job: JobModel, ev: Event) -> Event | None:
    """The exception line that ``ev``'s (an exception line's) was chained from: a separator ("The above
    exception was the direct cause of the following exception:", "During handling of the above
    exception, another exception occurred:") right above the traceback it ends, and the last exception
    line above that separator, of the same rank where ranks are known (their lines interleave)."""
    evs = _chained_files(job).get(ev.file)
    if not evs:
        return None
    mine = global_rank(job, ev)

    def same(e: Event) -> bool:
        return mine is None or global_rank(job, e) in (None, mine)

    i = bisect_right(evs, ev.line, key=_LINE) - 1
    start = next((e for e in reversed(evs[max(0, i - 200):i]) if e.kind == "traceback_start" and same(e)), None)
    if start is None:
        return None
    j = bisect_left(evs, start.line, key=_LINE)
    sep = next((e for e in reversed(evs[max(0, j - 8):j]) if e.kind == "py_chain" and same(e)
                and start.line - e.line <= _SEPARATOR_GAP), None)
    if sep is None:
        return None
    k = bisect_left(evs, sep.line, key=_LINE)
    return next((e for e in reversed(evs[max(0, k - 200):k]) if e.kind not in _NOT_EXCEPTION and same(e)
                 and sep.line - e.line <= _CAUSE_GAP), None)


def chain_root(job: JobModel, ev: Event) -> Event:
    """The first exception of the chain ``ev`` ends (``ev`` itself when it was chained from none)."""
    root = ev
    for _ in range(16):  # (bounded: a chain in a log is a few exceptions long)
        cause = chained_from(job, root)
        if cause is None or (cause.file, cause.line) >= (root.file, root.line):
            break
        root = cause
    return root


#: Lines of the kinds a rank wrote before its exception that it went on writing after it: caught.
RAN_ON = 3


def ran_past(job: JobModel, f) -> bool:
    """A rank's exception after which it went on writing what it wrote before (RAN_ON lines of those
    kinds at least), in a job where nothing else went wrong: a handler caught it (a retry), and it ran
    on. Or a traceback no process claims (printed by the script's own handler: ``traceback.print_exc()``,
    no rank prefix), in a job where nothing else went wrong (no launcher reported a failed exit, no
    rank timed out or lost a peer) and whose ranks (two or more) all reached the same last step: had
    it ended one of them, that rank would have stopped short. It was caught, and the job ran on."""
    if any(e.kind != "python_exception" for e in f.events) or f.label is not None:
        return False
    if f.state is not None:  # a rank's own: it went on writing what it wrote before, as before
        last = f.events[-1]
        before = {e.kind for e in f.state.events if e.file == last.file and e.line < last.line} - _ERROR_OR_TIMEOUT
        went_on = [e for e in f.state.events if e.file == last.file and e.line > last.line and e.kind in before]
        return len(went_on) >= RAN_ON
    if f.rank is not None:
        return False
    last: dict[int, int] = {}
    for e in job.by_kind("train_step"):
        step = e.get("step")
        if e.rank is not None and isinstance(step, int):
            last[e.rank] = max(step, last.get(e.rank, step))
    return len(last) >= 2 and len(set(last.values())) == 1


def chained_to_echo(job: JobModel, ev: Event, job_timed_out: bool, timed: set) -> bool:
    """The first exception of the chain ``ev`` ends is an echo (a peer closed the connection, a
    timeout): what the rank raised from it, or while handling it, follows from it too."""
    root = chain_root(job, ev)
    if root is ev or root.kind not in _ERROR_OR_TIMEOUT:
        return False
    st = owner(job, root)
    return classify(root, job_timed_out, st is not None and id(st) in timed) is None


_ERROR_OR_TIMEOUT = ERROR_KINDS | TIMEOUT_KINDS
