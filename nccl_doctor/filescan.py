"""What the scan of one file gives: a small summary that crosses process boundaries (events, line
and byte counts, the last line of each writer, what could not be read)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from .eventcap import EventCap
from .events import Event

#: Kinds read (the line is known, not unparsed, not a wrapped record) but never kept as events.
UNKEPT_KINDS = frozenset(("py_lib_frame",))


@dataclass(slots=True)
class FileScan:
    path: str
    size: int = 0
    lines: int = 0
    bytes: int = 0
    parsed: int = 0
    events: list[Event] = field(default_factory=list)
    last_lines: dict = field(default_factory=dict)  # writer key -> LastLine
    last_before: dict = field(default_factory=dict)  # writer key -> the text of its line before its last
    startup: dict = field(default_factory=dict)  # writer key -> its first settings (see startup.py)
    modes: tuple[str, ...] = ()
    skipped: str | None = None  # whole file skipped (binary, unreadable)
    issue: str | None = None  # partly read
    mtime: float | None = None
    #: (first ts, last ts, line) of timestamped lines from outside the job (no launcher label) that
    #: follow the job's last labelled line: time that passed with no output from the job.
    quiet: tuple | None = None
    repeats: dict = field(default_factory=dict)  # REPEAT_CAPS literal -> lines parsed so far
    last_repeat: dict = field(default_factory=dict)  # REPEAT_CAPS literal -> (line_no, raw) skipped last
    #: Batch scans cap their events (see eventcap): the times of every step line, those of them
    #: without a year (index, MMDD, hh:mm:ss), and year -> events dated with one. None: not counted.
    step_ts: array | None = None
    step_mmdd: list | None = None
    years: dict | None = None
    #: The file's first bytes look like a document (a flight-recorder dump, an ncclras JSON report):
    #: not scanned; the caller that asked (``scan(f, documents=...)``) reads it as one.
    document: bool = False
    #: The file was read in another order than its lines: newest first (see reading.newest_first), read
    #: oldest first: its number of lines (event line ``i`` is the file's line ``n + 1 - i``); a search
    #: UI's CSV export read as records (csvexport): the file line of each record line read (event line
    #: ``i`` is the file's line ``flipped[i - 1]``), until model.order restores the file's numbers.
    flipped: int | list[int] = 0
    capper: EventCap | None = None  # while scanning only

    @property
    def unparsed(self) -> int:
        return max(0, self.lines - self.parsed)

    def add(self, ev: Event) -> None:
        if ev.kind in UNKEPT_KINDS:
            return  # a known line that tells nothing (a library's traceback frame)
        if self.capper is None:
            self.events.append(ev)
        else:
            self.capper.add(ev)
