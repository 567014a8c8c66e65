"""The live progress model: per writer, its last progress line and when it arrived; per job, its
usual interval between progress lines, learned while it runs. ``watch`` (through the incremental
``Analyzer``) feeds it; the stall and straggler facts (``evidence.stall``, rules ST1 and ST2) read it.

A writer is what the scanner tells apart in a file: a launcher rank or local rank, an NCCL
``host:pid``, a Ray worker pid, or the file itself when one process writes it. Progress signals,
strongest first: a per-collective NCCL line (``opCount``, per communicator size), a watchdog SeqNum
(``NCCL Work update periodically``: the last completed work, per process group), a training step
line; a position counts as progress when it moves. Any other output is the weakest signal: it
counts only while the job has shown none of the others (a job that prints no step lines still has
a rhythm, and a hung job that keeps printing warnings is not making progress once steps are known).

A phase line (a checkpoint save, an evaluation, a data load, start-up work) puts its writer in that
phase until its next progress line or the phase's end line; an error line (a traceback's exception,
a CUDA error) marks the writer as failed until it progresses again.

Arrival times are the caller's clock (seconds, monotonic): lines present when watching starts
(``backlog``) give positions and last lines but no interval, since nobody saw them arrive.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..events import Event, LastLine
from ..model.job import ERROR_KINDS, pg_key

#: Default floor of the stall threshold (``watch --stall-after``), seconds.
STALL_AFTER = 60.0
#: A job with no rhythm yet (it never showed progress) is stalled after this many floors without
#: a line: start-up work (loading a model, preparing data) can be silent for minutes.
STARTUP_FACTOR = 5.0
#: How a phase is named in a sentence ("rank 2 is in an evaluation").
PHASE_WORDS = {"checkpoint": "a checkpoint save", "eval": "an evaluation", "data": "a data load",
               "startup": "start-up work", "work": "a phase of its own"}
#: Gaps between progress arrivals kept to learn the usual interval (median of them).
GAP_MEMORY = 256
#: Gaps needed before the usual interval is trusted (a job that never progressed has no rhythm).
MIN_GAPS = 5
#: A gap this many times the usual interval (and at least PAUSE_FLOOR s) that ended in progress is
#: remembered as a pause of the phase the job was in (a periodic checkpoint, an evaluation).
PAUSE_FACTOR = 5.0
PAUSE_FLOOR = 3.0
#: First arrival of each recent position per signal, for lags (bounded).
REACH_MEMORY = 512
#: Signals followed at most (one per communicator size and per process group: a file that claims
#: more is not allowed to grow the model without bound; further ones are ignored).
MAX_SIGNALS = 1024

#: Writer keys that name one process (the scanner's last-line keys).
WRITER_KINDS = ("rank", "local_rank", "proc", "lpid")


@dataclass(slots=True)
class Mark:
    """One line of a writer and when it arrived."""

    file: str
    line: int
    text: str
    t: float


@dataclass(slots=True)
class WriterProgress:
    file: str
    key: tuple | None
    last: Mark | None = None  # its last line of any kind
    progress: Mark | None = None  # its last progress line (a position moved, or a step line)
    #: signal -> (position, its line): ("step",), ("op", nranks), ("seq", process group)
    positions: dict = field(default_factory=dict)
    #: signal -> seconds between another writer first reaching its position and it reaching it
    lateness: dict = field(default_factory=dict)
    phase: tuple[str, Mark] | None = None  # a phase started after its last progress
    error: Mark | None = None  # an error line after its last progress
    left: dict = field(default_factory=dict)  # phase name -> when it last left that phase
    done: bool = False  # it finished: its last step of the total, "training done", communicator destroyed

    @property
    def writer_id(self) -> tuple:
        return (self.file, self.key)


def writer_key(ev: Event) -> tuple | None:
    """The scanner's last-line key of the writer of an event (see ``Scanner._last_lines``)."""
    if ev.rank is not None:
        return ("rank", ev.rank)
    if ev.local_rank is not None:
        return ("local_rank", ev.local_rank)
    if "launcher_pid" in ev.fields:
        return ("lpid", ev.fields.get("launcher_ip"), ev.fields["launcher_pid"])
    if ev.host is not None and ev.pid is not None and ev.kind.startswith("nccl_"):
        return ("proc", ev.host, ev.pid)
    return None


def phase_of(ev: Event) -> tuple[str, bool] | None:
    """(phase name, True when the line starts it / False when it ends it), or None."""
    k = ev.kind
    if k == "train_phase":
        return str(ev.get("phase") or "work"), ev.get("state") != "end"
    if k == "startup_work":
        return "startup", True
    if k == "checkpoint_load":
        return "checkpoint", True
    if k == "train_step" and ev.get("phase") == "valid":
        return "eval", False  # Megatron prints the validation loss once evaluation is over
    return None


def position_of(ev: Event) -> tuple[tuple, int | None] | None:
    """(signal, position) of a progress line, position None for a step line without a number."""
    k = ev.kind
    if k == "train_step" and ev.get("phase") != "valid":
        step = ev.get("step")
        return ("step",), step if isinstance(step, int) else None
    if k == "nccl_coll":
        try:
            op = int(str(ev.get("opcount", "")), 16)
        except ValueError:
            return None
        return ("op", ev.get("nranks")), op
    if k == "torch_work_update" and isinstance(ev.get("completed"), int):
        return ("seq", pg_key(ev)), ev.get("completed")
    return None


class ProgressTracker:
    """What the job's writers did and when, learned as lines arrive (see the module docstring).

    ``observe`` takes one source's new events and its last lines after each read; ``end_pass``
    closes one round of reads (the job's phase is judged then). Memory is bounded per writer.
    """

    def __init__(self, stall_after: float = STALL_AFTER):
        if not stall_after > 0:
            raise ValueError("--stall-after must be a positive number of seconds")
        self.stall_after = float(stall_after)
        self.writers: dict[tuple, WriterProgress] = {}
        self.file_keys: dict[str, set] = {}  # file -> writer keys seen in its last lines
        self.gaps: deque[float] = deque(maxlen=GAP_MEMORY)
        self.last_progress: float | None = None  # arrival of the job's last progress line
        #: arrival of the first progress (or, before any, output) line seen arriving: the job was
        #: seen running (lines present when watching began prove nothing of the sort)
        self.first_live: float | None = None
        self.strong = False  # the job has shown step/opCount/SeqNum lines: plain output no longer counts
        self.reach: dict[tuple, dict[int, float]] = {}  # signal -> position -> first arrival
        self.pauses: dict[tuple, float] = {}  # phase key -> longest pause that ended in progress
        self.phase_key: tuple = ()  # phases the job was in at the end of the last pass
        self.resumed: tuple[float, Mark] | None = None  # (length, first line after) of the last pause
        self._pause_phases: set[str] = set()
        self._after_backlog = False  # the next gap starts at lines nobody saw arrive
        self._usual: float | None = None
        self._ahead: dict[tuple, tuple[list[int], list[float]]] = {}  # signal -> sorted positions, suffix min
        #: Bumped whenever anything above changes: what ``evidence.stall`` derives from this model
        #: for one job model stays valid while it is the same (it keeps it in ``judged``).
        self.version = 0
        self.judged: tuple | None = None

    # ---- input -------------------------------------------------------------------------------

    def forget(self, path: str) -> None:
        self.version += 1
        for wid in [w for w in self.writers if w[0] == path]:
            del self.writers[wid]
        self.file_keys.pop(path, None)

    def observe(self, path: str, events: Iterable[Event], last_lines: dict,
                arrival: Callable[[int], tuple[float, bool]]) -> None:
        """New events of ``path`` (lines not observed before, in line order) and its current last
        lines; ``arrival(line)`` gives (when that line arrived, whether it was backlog)."""
        self.version += 1
        for ev in events:
            self._event(path, ev, *arrival(ev.line))
        keys = self.file_keys.setdefault(path, set())
        for key, ll in last_lines.items():
            if not isinstance(ll, LastLine) or (key is not None and key[0] == "writer"):
                continue  # (a record label's last line: the same writer as its rank's, see writers.py)
            keys.add(key)
            w = self._writer(path, key)
            if w.last is None or ll.line > w.last.line:
                t, backlog = arrival(ll.line)
                w.last = Mark(path, ll.line, ll.text, t)
                if not self.strong and self._counts_as_writer(path, key):
                    w.progress = w.last  # plain output is the signal: a later line ends a phase or an error
                    if w.phase is not None and w.phase[1].line < ll.line:
                        self._leave(w, t)
                    if w.error is not None and w.error.line < ll.line:
                        w.error = None
                    self._job_progress(w.last, backlog)

    def end_pass(self) -> None:
        """One round of reads is over: the phases the job is in now (learned pauses are per phase)."""
        self.version += 1
        self.phase_key = tuple(sorted({w.phase[0] for w in self.active() if w.phase is not None}))
        self._pause_phases.update(self.phase_key)

    def _writer(self, path: str, key: tuple | None) -> WriterProgress:
        w = self.writers.get((path, key))
        if w is None:
            w = self.writers[(path, key)] = WriterProgress(path, key)
        return w

    def _event(self, path: str, ev: Event, t: float, backlog: bool) -> None:
        w = self._writer(path, writer_key(ev))
        pos = position_of(ev)
        if pos is not None and (pos[0] in self.reach or len(self.reach) < MAX_SIGNALS):
            signal, value = pos
            old = w.positions.get(signal)
            if value is None or old is None or old[0] != value:
                mark = Mark(path, ev.line, ev.text, t)
                if value is not None:
                    w.positions[signal] = (value, mark)
                    w.lateness[signal] = t - self._reached(signal, value, t)
                self._progress(w, mark, backlog)
                total = ev.get("total")
                w.done = isinstance(total, int) and value == total and ev.kind == "train_step"
            return
        if ev.kind == "nccl_init" and ev.get("what") == "Destroy" and ev.get("phase") == "COMPLETE":
            w.done = True
            return
        ph = phase_of(ev)
        if ph is not None:
            name, starts = ph
            self._leave(w, t)
            if name == "training" and not starts:
                w.done = True
            elif starts:
                w.phase = (name, Mark(path, ev.line, ev.text, t))
            else:
                w.left[name] = t
        elif ev.kind in ERROR_KINDS:
            w.error = Mark(path, ev.line, ev.text, t)

    def _reached(self, signal: tuple, value: int, t: float) -> float:
        """When any writer first reached ``value`` on ``signal`` (recorded now if nobody had)."""
        seen = self.reach.setdefault(signal, {})
        first = seen.get(value)
        if first is None:
            first = seen[value] = t
            if len(seen) > REACH_MEMORY:
                del seen[min(seen)]
            self._ahead.pop(signal, None)
        return first

    @staticmethod
    def _leave(w: WriterProgress, t: float) -> None:
        if w.phase is not None:
            w.left[w.phase[0]] = t
            w.phase = None

    def _progress(self, w: WriterProgress, mark: Mark, backlog: bool) -> None:
        w.progress = mark
        self._leave(w, mark.t)
        w.error = None
        if not self.strong:  # from now on only these signals count: what was learned from plain output goes
            self.strong = True
            self.gaps.clear()
            self._usual = None
            self.pauses.clear()
        self._job_progress(mark, backlog)

    def _job_progress(self, mark: Mark, backlog: bool) -> None:
        t = mark.t
        last = self.last_progress
        if not backlog and self.first_live is None:
            self.first_live = t
        if last is None or backlog:
            self.last_progress = t if last is None else max(last, t)
            self._after_backlog = True
            return
        if t <= last:
            return
        gap = t - last
        if self._after_backlog:
            self._after_backlog = False  # the time before it was not seen: no interval to learn
        else:
            usual = self.usual
            if usual is not None and gap >= max(PAUSE_FLOOR, PAUSE_FACTOR * usual):
                key = tuple(sorted(self._pause_phases))
                self.pauses[key] = max(self.pauses.get(key, 0.0), gap)
                self.resumed = (gap, mark)
            self.gaps.append(gap)
            self._usual = None
        self._pause_phases = set()
        self.last_progress = t

    # ---- what was learned ------------------------------------------------------------------------

    @property
    def usual(self) -> float | None:
        """The job's usual interval between progress arrivals (median of the recent gaps)."""
        if len(self.gaps) < MIN_GAPS:
            return None
        if self._usual is None:
            ordered = sorted(self.gaps)
            self._usual = ordered[len(ordered) // 2]
        return self._usual

    def window(self) -> float:
        """How far back from the job's last progress a writer still counts as taking part."""
        usual = self.usual or 1.0
        return max(30.0, 10 * usual)

    def pause_allowance(self, phases: tuple | None = None) -> float:
        """The longest pause the job recovered from in these phases (the current ones by default)."""
        return self.pauses.get(self.phase_key if phases is None else phases, 0.0)

    def _counts_as_writer(self, path: str, key: tuple | None) -> bool:
        """A file's unattributed lines are a writer only when the file has one writer at most (in a
        shared console they are the launcher's own lines)."""
        if key is not None:
            return True
        keys = self.file_keys.get(path, ())
        return sum(1 for k in keys if k is not None and k[0] in WRITER_KINDS) <= 1

    def counted(self) -> list[WriterProgress]:
        """Every writer of the job so far (a file's unattributed lines when it has one writer)."""
        return [w for w in self.writers.values() if self._counts_as_writer(w.file, w.key)]

    def active(self) -> list[WriterProgress]:
        """Writers that took part in the job's recent progress (their last progress, or last line,
        arrived within ``window()`` of the job's last progress)."""
        if self.last_progress is None:
            return []
        since = self.last_progress - self.window()
        out = []
        for w in self.writers.values():
            mark = w.progress if self.strong else w.last
            if mark is not None and mark.t >= since and self._counts_as_writer(w.file, w.key):
                out.append(w)
        return out

    def went_past(self, signal: tuple, value: int) -> float | None:
        """When a writer first went past ``value`` on ``signal`` (None: nobody did)."""
        table = self._ahead.get(signal)
        if table is None:
            seen = self.reach.get(signal) or {}
            values = sorted(seen)
            suffix = [0.0] * len(values)
            low = float("inf")
            for i in range(len(values) - 1, -1, -1):
                low = min(low, seen[values[i]])
                suffix[i] = low
            table = self._ahead[signal] = (values, suffix)
        values, suffix = table
        i = bisect.bisect_right(values, value)
        return suffix[i] if i < len(values) else None


def first_after(marks: list[tuple[int, float, bool]], line: int) -> tuple[float, bool]:
    """(arrival, backlog) of ``line`` from (lines complete so far, time, backlog) marks in order."""
    i = bisect.bisect_left(marks, line, key=lambda m: m[0])
    m = marks[min(i, len(marks) - 1)]
    return m[1], m[2]


__all__ = ["Mark", "PHASE_WORDS", "ProgressTracker", "STALL_AFTER", "STARTUP_FACTOR", "WriterProgress", "first_after", "phase_of",
           "position_of", "writer_key"]
