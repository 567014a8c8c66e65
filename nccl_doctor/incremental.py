"""Incremental analysis for bots that tail logs: lines in as they arrive, findings out.

``Analyzer.feed(source, line)`` (or ``feed_bytes`` for raw, possibly partial, data) accepts input as
it is written; ``findings()`` returns the findings for everything fed so far, and ``updates()`` /
``new_findings()`` return each new or changed finding once.

The parsing is the batch scanner's own (``Scanner._scan_chunk``), run over chunks of complete
lines, so the findings equal those of :func:`nccl_doctor.analyze` on the same files. Memory stays
bounded per source: lines are kept only until they are committed (about 256 KiB), the head used
to recognise launcher prefixes only until they are known (at most 256 KiB), and the tail that gives
each writer's last line (256 KiB); the events themselves are small. A chunk is committed only at a *quiet* line, one that no
multi-line record (torchrun Result block, ChildFailedError table, hard-wrapped line) can extend
across, so cutting there changes nothing. Not thread-safe: feed and read from one thread.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .analysis import Report, analyze_scans
from .discover import InputError
from .events import Event, Skipped
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


@dataclass(frozen=True, slots=True)
class Update:
    """A finding reported by :meth:`Analyzer.updates`: ``status`` is ``"new"`` or ``"changed"``."""

    status: str
    finding: Finding

    def to_dict(self) -> dict:
        return {"status": self.status, "finding": self.finding.to_dict()}


def _material(f: Finding) -> tuple:
    """What makes a finding worth reporting again: who (rule, ranks, hosts) and how bad."""
    return f.key + (f.severity.value, f.confidence)


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
    for this many seconds, so that a cascade of timeouts gives one alert, not one per rank.
    ``on_update`` is called with each :class:`Update` that :meth:`updates` returns.
    """

    def __init__(self, *, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
                 min_severity: Severity | str = Severity.INFO, settle: float = 0.0, year: int | None = None,
                 on_update: Callable[[Update], None] | None = None, clock: Callable[[], float] = time.monotonic):
        self.select, self.ignore, self.min_severity = select, ignore, min_severity
        self.settle = settle
        self.year = year or time.gmtime().tm_year
        self.on_update = on_update
        self._clock = clock
        self._sources: dict[str, _Source] = {}
        self._skipped: list[Skipped] = []
        self._extra: list[Event] = []
        self._report: Report | None = None
        self._stale = True
        self._since: dict[tuple, float] = {}  # material fingerprint -> when it (last) appeared
        self._reported: dict[tuple, tuple] = {}  # finding key -> material fingerprint reported

    # ---- input -------------------------------------------------------------------------------

    def feed(self, source: str, line: str | bytes) -> None:
        """Add one line of ``source`` (a file name: it shows in evidence and may carry the rank)."""
        self.feed_bytes(source, _line_bytes(line))

    def feed_lines(self, source: str, lines: Iterable[str | bytes]) -> None:
        for line in lines:
            self.feed(source, line)

    def feed_bytes(self, source: str, data: bytes) -> None:
        """Add raw bytes of ``source``; a trailing partial line waits for the rest of it."""
        src = self._sources.get(source)
        if src is None:
            src = self._sources[source] = _Source(source, self.year)
        if src.failed is None:
            try:
                src.add(data)
            except Exception as exc:  # a bug must cost this source's tail, not the watch (as in Scanner.scan)
                src.failed = f"scan stopped early: {type(exc).__name__}: {exc}"[:200]
                src.view = None
        self._stale = True

    def forget(self, source: str) -> None:
        """Drop everything fed for ``source`` (the file was truncated, rotated or removed)."""
        if self._sources.pop(source, None) is not None:
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
        if self._stale or self._report is None:
            scans = [self._scan(p) for p in self.sources]
            extra = [_copy(e) for e in self._extra]
            self._report = analyze_scans(scans, self._skipped, select=self.select, ignore=self.ignore,
                                         min_severity=self.min_severity, extra_events=extra)
            self._stale = False
        return self._report

    def _scan(self, path: str) -> FileScan:
        src = self._sources[path]
        try:
            scan = _fresh(src.scan())
        except Exception as exc:  # a bug: this source is listed as not read, the others are analysed
            return FileScan(path=path, skipped=f"scan failed: {type(exc).__name__}: {exc}"[:200])
        if src.failed is not None:
            scan.issue = src.failed
        return scan

    def findings(self) -> list[Finding]:
        """The current findings (empty while nothing analysable was fed)."""
        try:
            return self.report().findings
        except InputError:
            return []

    def updates(self, *, final: bool = False) -> list[Update]:
        """Findings that are new or changed since the last call, each reported once.

        ``final=True`` ignores ``settle`` (the input is complete: report what is there).
        """
        now = self._clock()
        current = self.findings()
        marks = {_material(f): f for f in current}
        self._since = {m: self._since.get(m, now) for m in marks}
        out: list[Update] = []
        for mark, f in marks.items():
            if self._reported.get(f.key) == mark:
                continue
            if not final and now - self._since[mark] < self.settle:
                continue
            status = "changed" if self._seen_before(f) else "new"
            self._reported[f.key] = mark
            out.append(Update(status, f))
        for u in out:
            if self.on_update is not None:
                self.on_update(u)
        return out

    def new_findings(self, *, final: bool = False) -> list[Finding]:
        """:meth:`updates` without the status: each new or changed finding, once."""
        return [u.finding for u in self.updates(final=final)]

    def _seen_before(self, f: Finding) -> bool:
        """Reported already under this key, or under an overlapping one of the same rule."""
        if f.key in self._reported:
            return True
        ranks, hosts = set(f.ranks), set(f.hosts)
        for rule, r, h in self._reported:
            if rule == f.rule and ((ranks & set(r)) or (hosts & set(h)) or not (ranks or hosts or r or h)):
                return True
        return False


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
