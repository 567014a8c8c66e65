"""Incremental analysis for bots that tail logs: lines in as they arrive, findings out.

``Analyzer.feed(source, line)`` (or ``feed_bytes`` for raw, possibly partial, data) accepts input as
it is written; ``findings()`` returns the findings for everything fed so far, and ``updates()`` /
``new_findings()`` return each new or changed finding once, and each reported finding that went
away (``"resolved"``). Lines are timed as they arrive (the analyzer's clock): the live progress
model (``evidence.progress``) learns the job's rhythm from them, and the live rules (ST1 stall,
ST2 straggler) are judged again as time passes, without re-reading anything.

The parsing is the batch scanner's own (``Scanner._scan_chunk``), run over chunks of complete
lines, so the findings equal those of :func:`nccl_doctor.analyze` on the same files. Memory stays
bounded per source: lines are kept only until they are committed (about 256 KiB), the head used
to recognise launcher prefixes only until they are known (at most 256 KiB), and the tail that gives
each writer's last line (256 KiB); the events themselves are small. A chunk is committed only at a *quiet* line, one that no
multi-line record (torchrun Result block, ChildFailedError table, hard-wrapped line) can extend
across, so cutting there changes nothing. Not thread-safe: feed and read from one thread.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import time
from collections.abc import Callable, Iterable

from .alerts import Alerts, Update
from .analysis import Report, analyze_scans, refresh_live
from .discover import InputError
from .events import Event, Skipped
from .evidence.progress import STALL_AFTER, ProgressTracker, first_after
from .evidence.stall import Live
from .findings import Finding, Severity
from .launchers import LauncherStripper, detect_modes
from .reading import MAX_LINE, clean_line, looks_binary
from .records import _CFE_FIELD, _CFE_IDX, _KV, _STALL_RANK, is_continuation
from .scanner import TAIL_BYTES, FileScan, Scanner
from .wrapped import TerminalWrap, detect_width

#: The batch scanner detects launcher modes on the first 256 KiB (at most 400 non-blank lines).
HEAD_BYTES = 256 << 10
HEAD_LINES = 400
#: Pending lines are committed (parsed for good, then dropped) once they exceed this many bytes.
COMMIT_BYTES = 256 << 10
#: Without a quiet line to cut at, commit anyway at the batch scanner's chunk size.
FORCE_COMMIT_BYTES = 8 << 20
#: Arrival marks kept per source between two reads of the progress model.
MAX_MARKS = 4096


class _Source:
    """One growing input: what is committed (a FileScan) plus the lines not committed yet."""

    def __init__(self, path: str, year: int):
        self.path = path
        self.year = year
        self.done = FileScan(path=path)  # events and `parsed` of committed lines
        self.done_lines = 0
        self.total_bytes = 0
        self.head = bytearray()  # the first HEAD_BYTES of complete lines: launcher modes, binary check
        self.head_lines = 0  # non-blank lines in `head`, as detect_modes counts them
        self.stripper: LauncherStripper | None = None  # fixed once the head is complete
        self.wrap: TerminalWrap | None = None  # a terminal's width, found in the head with the stripper
        self.binary = False
        self.pending: list[bytes] = []  # complete, capped lines ending in b"\n"
        self.pending_bytes = 0
        self.next_commit = COMMIT_BYTES  # try to commit when pending_bytes reaches this
        self.partial = b""  # the incomplete last line
        self.skipping = False  # inside an overlong line whose rest is dropped
        self.tail = bytearray()  # the last TAIL_BYTES of content: each writer's last line
        self.view: FileScan | None = None  # cached scan of everything (committed + pending)
        self.failed: str | None = None  # a bug stopped reading this source: what it gave so far stays
        self.view_ordered = 0  # events of the view in line order (the last-repeat ones follow)
        #: (complete lines so far, arrival time, backlog) after each feed that completed lines;
        #: dropped once the progress model has read those lines.
        self.marks: list[tuple[int, float, bool]] = []
        self.observed = 0  # lines the progress model has read

    @property
    def complete_lines(self) -> int:
        return self.done_lines + len(self.pending)

    def mark(self, t: float, backlog: bool) -> None:
        """The lines completed so far arrived by ``t`` (bounded: old marks merge into later ones)."""
        n = self.complete_lines
        marks = self.marks
        if marks and n <= marks[-1][0]:
            return
        if marks and marks[-1][1] == t and marks[-1][2] == backlog:
            marks[-1] = (n, t, backlog)
            return
        marks.append((n, t, backlog))
        if len(marks) > MAX_MARKS:  # nobody asked for a while: coarser times (later, never earlier)
            del marks[: len(marks) - MAX_MARKS // 2: 2]

    # ---- bytes in ----------------------------------------------------------------------------

    def add(self, data: bytes) -> None:
        """Append raw bytes; lines are capped at MAX_LINE exactly as ``reading.iter_chunks`` does."""
        if self.binary or not data:
            return
        self.view = None
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return
            data, self.skipping = data[nl + 1:], False
        buf = self.partial + data if self.partial else data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl + 1]
            self._line(line if len(line) <= MAX_LINE + 1 else line[:MAX_LINE] + b"\n")
            start = nl + 1
        self.partial = buf[start:]
        if len(self.partial) > MAX_LINE:
            self._line(self.partial[:MAX_LINE] + b"\n")
            self.partial, self.skipping = b"", True

    def _line(self, line: bytes) -> None:
        self.pending.append(line)
        self.pending_bytes += len(line)
        self.total_bytes += len(line)
        self.tail += line
        if len(self.tail) > TAIL_BYTES + (64 << 10):
            del self.tail[:-TAIL_BYTES]
        if self.stripper is None:
            room = HEAD_BYTES - len(self.head)
            self.head += line[:room]
            self.head_lines += sum(1 for ln in line.decode("utf-8", "replace").splitlines() if ln.strip())
            if len(self.head) >= HEAD_BYTES or self.head_lines >= HEAD_LINES:
                self.stripper = self._stripper()
                self.wrap = self._wrap(self.stripper) if self.stripper is not None else None
                self.head = bytearray()  # the launcher modes are known for good
                if self.stripper is None:  # binary: nothing of this source is read
                    self.binary = True
                    self.pending, self.pending_bytes, self.tail = [], 0, bytearray()
                    return
        if self.stripper is not None and self.pending_bytes >= self.next_commit:
            self._commit()

    def _wrap(self, stripper: LauncherStripper) -> TerminalWrap | None:
        """The terminal width of a hard-wrapped source, from the head's complete lines (as the batch scanner)."""
        head = bytes(self.head) or self.partial[:HEAD_BYTES]
        lines = head.decode("utf-8", "replace").splitlines()
        if len(head) >= HEAD_BYTES and not head.endswith(b"\n"):
            lines = lines[:-1]
        width = detect_width(lines, stripper.strip, _scanner().formats.match)  # a growing file: as a small one
        return TerminalWrap(width) if width else None

    def _stripper(self) -> LauncherStripper | None:
        head = bytes(self.head) or self.partial[:HEAD_BYTES]
        if looks_binary(head[:8192]):
            return None
        return LauncherStripper(detect_modes(head.decode("utf-8", "replace").splitlines()))

    # ---- committing and scanning -------------------------------------------------------------

    def _commit(self) -> None:
        assert self.stripper is not None
        cut = self._safe_cut()
        if cut is None:
            if self.pending_bytes < FORCE_COMMIT_BYTES:
                self.next_commit = self.pending_bytes + COMMIT_BYTES
                return
            cut = len(self.pending)
        chunk = b"".join(self.pending[:cut])
        sc = _scanner()
        sc.wrap = self.wrap
        sc.scan_chunk(chunk, self.done_lines, self.stripper, self.year, self.done)
        self.done_lines += cut
        del self.pending[:cut]
        self.pending_bytes -= len(chunk)
        self.next_commit = COMMIT_BYTES

    def _safe_cut(self) -> int | None:
        """The last pending line ``i`` such that scanning ``pending[:i]`` and ``pending[i:]`` apart
        gives what scanning them together gives (None: no such line).

        Records reach across lines in two ways only: blocks consume following lines that look like
        block lines, and a hard-wrapped record joins up to 3 lines before and 4 after a candidate
        line through continuation lines (``Scanner._rewrap``). So line ``i`` is a safe cut when it is
        not a block line and either it is not a continuation (nothing joins across it) or no
        candidate line lies within reach (lines ``i-4 .. i+2``).
        """
        strip = self.stripper.strip  # type: ignore[union-attr]
        spans = _scanner().prefilter.spans
        cut_width = (self.wrap.width - 1, self.wrap.width) if self.wrap is not None else ()
        for i in range(len(self.pending) - 3, 0, -1):
            if len(self.pending[i - 1].rstrip(b"\r\n")) in cut_width:
                continue  # the line before may be a piece a terminal cut: its record goes on here
            text = strip(clean_line(self.pending[i][:-1]))[1]
            if _KV.match(text) or _CFE_IDX.match(text) or _CFE_FIELD.match(text) or _STALL_RANK.match(text) \
                    or text.strip() == "<NO_OTHER_FAILURES>" or text[:1].isspace():
                continue  # an indented line belongs to what is above it (a traceback, a table, what())
            if not is_continuation(text) or not spans(b"".join(self.pending[max(0, i - 4):i + 3])):
                return i
        return None

    def scan(self) -> FileScan:
        """A FileScan of everything fed, equal to ``Scanner.scan`` of the same bytes (cached)."""
        if self.view is not None:
            return self.view
        out = FileScan(path=self.path, size=self.total_bytes + len(self.partial))
        out.bytes = out.size
        out.lines = self.done_lines + len(self.pending) + (1 if self.partial else 0)
        stripper = self.stripper or (None if self.binary else self._stripper())
        if stripper is None:
            out.skipped = "binary data, not a text log"
            self.view = out
            return out
        out.modes = tuple(sorted(stripper.modes))
        out.parsed = self.done.parsed
        out.events = list(self.done.events)
        out.repeats = dict(self.done.repeats)
        out.last_repeat = dict(self.done.last_repeat)
        sc = _scanner()
        # a copy: the width's budget of tries moves on only with committed lines
        sc.wrap = copy.copy(self.wrap) if self.stripper is not None else self._wrap(stripper)
        if self.pending:
            sc.scan_chunk(b"".join(self.pending), self.done_lines, stripper, self.year, out)
        if self.partial:  # the batch reader yields an unterminated last line as a chunk of its own
            sc.scan_chunk(self.partial, self.done_lines + len(self.pending), stripper, self.year, out)
        self.view_ordered = len(out.events)
        sc._last_repeats(stripper, self.year, out)
        sc._last_lines((bytes(self.tail) + self.partial)[-TAIL_BYTES:], out.lines, stripper, self.year, out)
        self.view = out
        return out


class _ChunkScanner(Scanner):
    #: The terminal width of the source being scanned (set by it before each call; one thread).
    wrap: TerminalWrap | None = None

    def scan_chunk(self, chunk: bytes, base_line: int, stripper: LauncherStripper, year: int,
                   out: FileScan) -> None:
        self._scan_chunk(chunk, base_line, stripper, year, out, self.wrap)


_SCANNER: _ChunkScanner | None = None


def _scanner() -> _ChunkScanner:
    global _SCANNER
    if _SCANNER is None:
        _SCANNER = _ChunkScanner()
    return _SCANNER


def _path_key(path: str) -> tuple[str, ...]:
    """Sources in the order ``discover`` walks folders (component by component, by name)."""
    return tuple(path.replace("\\", "/").split("/"))


class Analyzer:
    """Incremental analysis of logs that are still being written.

    ``select``/``ignore``/``min_severity`` are as in :func:`nccl_doctor.analyze`. ``settle``: report
    a finding only once it has stayed the same (same rule, ranks, hosts, severity and confidence)
    for this many seconds, so that a cascade of timeouts gives one alert, not one per rank; a
    reported finding is resolved once it has stayed gone that long. ``stall_after``: the floor of
    the stall threshold (ST1), seconds. ``clock``: seconds, monotonic; it times each arrival.
    ``on_update`` is called with each :class:`Update` that :meth:`updates` returns.
    """

    def __init__(self, *, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
                 min_severity: Severity | str = Severity.INFO, settle: float = 0.0, year: int | None = None,
                 on_update: Callable[[Update], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 stall_after: float = STALL_AFTER):
        self.select, self.ignore, self.min_severity = select, ignore, min_severity
        self.year = year or time.gmtime().tm_year
        self.on_update = on_update
        self._clock = clock
        self._wall_offset = time.time() - clock()
        self._sources: dict[str, _Source] = {}
        self._skipped: list[Skipped] = []
        self._extra: list[Event] = []
        self._report: Report | None = None
        self._stale = True
        self._alerts = Alerts(settle)
        self.progress = ProgressTracker(stall_after)
        self._live_at: float | None = None  # when the live rules were last judged

    @property
    def settle(self) -> float:
        return self._alerts.settle

    # ---- input -------------------------------------------------------------------------------

    def feed(self, source: str, line: str | bytes) -> None:
        """Add one line of ``source`` (a file name: it shows in evidence and may carry the rank)."""
        self.feed_bytes(source, _line_bytes(line))

    def feed_lines(self, source: str, lines: Iterable[str | bytes]) -> None:
        for line in lines:
            self.feed(source, line)

    def feed_bytes(self, source: str, data: bytes, *, backlog: bool = False) -> None:
        """Add raw bytes of ``source``; a trailing partial line waits for the rest of it.

        ``backlog``: the bytes were there before watching started (nobody saw them arrive): they give
        positions and last lines, but no interval to learn from.
        """
        src = self._sources.get(source)
        if src is None:
            src = self._sources[source] = _Source(source, self.year)
        if src.failed is None:
            try:
                src.add(data)
            except Exception as exc:  # a bug must cost this source's tail, not the watch (as in Scanner.scan)
                src.failed = f"scan stopped early: {type(exc).__name__}: {exc}"[:200]
                src.view = None
        src.mark(self._clock(), backlog)
        self._stale = True

    def forget(self, source: str) -> None:
        """Drop everything fed for ``source`` (the file was truncated, rotated or removed)."""
        if self._sources.pop(source, None) is not None:
            self.progress.forget(source)
            self._stale = True

    def set_context(self, *, skipped: list[Skipped] | None = None, events: list[Event] | None = None) -> None:
        """Inputs that are not lines: files skipped (listed in the report) and ready-made events."""
        if skipped is not None and skipped != self._skipped:
            self._skipped, self._stale = list(skipped), True
        if events is not None and events != self._extra:
            self._extra, self._stale = list(events), True

    @property
    def sources(self) -> list[str]:
        return sorted(self._sources, key=_path_key)

    # ---- output ------------------------------------------------------------------------------

    def report(self) -> Report:
        """The full report for everything fed so far; raises InputError when nothing was fed."""
        now = self._clock()
        if self._stale or self._report is None:
            scans = [self._scan(p) for p in self.sources]
            self.progress.end_pass()
            extra = [_copy(e) for e in self._extra]
            self._report = analyze_scans(scans, self._skipped, select=self.select,
                                         ignore=self.ignore, min_severity=self.min_severity, extra_events=extra,
                                         live=self._live(now))
            self._stale = False
            self._live_at = now
        elif now != self._live_at:  # time passed, nothing arrived: only the live rules can change
            self._report = refresh_live(self._report, self._live(now), select=self.select, ignore=self.ignore,
                                        min_severity=self.min_severity)
            self._live_at = now
        return self._report

    def _scan(self, path: str) -> FileScan:
        src = self._sources[path]
        try:
            view = src.scan()
            self._observe(src, view)
            scan = _fresh(view)
        except Exception as exc:  # a bug: this source is listed as not read, the others are analysed
            return FileScan(path=path, skipped=f"scan failed: {type(exc).__name__}: {exc}"[:200])
        if src.failed is not None:
            scan.issue = src.failed
        return scan

    def _live(self, now: float) -> Live:
        return Live(self.progress, now, self._wall_offset)

    def _observe(self, src: _Source, view: FileScan) -> None:
        """Give the progress model the lines of ``src`` it has not read: their events (in line
        order) and each writer's last line, with their arrival times."""
        n = src.complete_lines
        if n <= src.observed or not src.marks:
            return
        seen = src.observed
        ordered = view.events[: src.view_ordered]
        start = bisect.bisect_right(ordered, seen, key=lambda e: e.line)
        new = [e for e in ordered[start:] if e.line <= n]
        new += sorted((e for e in view.events[src.view_ordered:] if seen < e.line <= n), key=lambda e: e.line)
        last = {k: ll for k, ll in view.last_lines.items() if ll.line <= n}
        marks = src.marks
        self.progress.observe(src.path, new, last, lambda line: first_after(marks, line))
        src.observed = n
        keep = bisect.bisect_left(marks, n, key=lambda m: m[0])
        del marks[:keep]  # lines up to n are read: their marks are no longer needed

    def findings(self) -> list[Finding]:
        """The current findings (empty while nothing analysable was fed)."""
        try:
            return self.report().findings
        except InputError:
            return []

    def updates(self, *, final: bool = False) -> list[Update]:
        """Findings that are new or changed since the last call, each reported once, and reported
        findings that went away (``"resolved"``, once no finding of the same rule covers them).

        ``final=True`` ignores ``settle`` (the input is complete: report what is there).
        """
        out = self._alerts.step(self.findings(), self._clock(), final=final, why_resolved=self._why_resolved)
        for u in out:
            if self.on_update is not None:
                self.on_update(u)
        return out

    def _why_resolved(self, f: Finding) -> str:
        """The rule's own word on why it went away (a live rule: progress resumed), else a generic one."""
        from .rules import registry

        rule = registry.get(f.rule) if f.rule in registry else None
        if rule is not None and rule.resolved is not None and self._report is not None:
            why = rule.resolved(self._report.job, f)
            if why:
                return why
        return "no longer found in the logs as they are now"

    def new_findings(self, *, final: bool = False) -> list[Finding]:
        """:meth:`updates` without the status: each new or changed finding, once."""
        return [u.finding for u in self.updates(final=final) if u.status != "resolved"]


def parse_lines(lines: Iterable[str | bytes], source: str = "<lines>", year: int | None = None) -> list[Event]:
    """The events of some lines, as the scanner finds them in a file holding those lines."""
    src = _Source(source, year or time.gmtime().tm_year)
    for line in lines:
        src.add(_line_bytes(line))
    scan = src.scan()
    if scan.skipped:
        raise InputError(f"{source}: {scan.skipped}")
    return scan.events


def _line_bytes(line: str | bytes) -> bytes:
    data = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
    return data if data.endswith(b"\n") else data + b"\n"


def _copy(e: Event) -> Event:
    """Building a job fills ``Event.rank`` in place: every report works on its own copies."""
    return dataclasses.replace(e, fields=dict(e.fields))


def _fresh(scan: FileScan) -> FileScan:
    return dataclasses.replace(scan, events=[_copy(e) for e in scan.events])


__all__ = ["Analyzer", "Update", "parse_lines"]
