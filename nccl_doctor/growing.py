"""One growing input of the incremental analyzer: the bytes fed so far, cut into complete lines,
committed (parsed for good, then dropped) at quiet lines, and scanned on demand exactly as the batch
scanner scans the same bytes (see ``incremental``'s module doc for the memory bounds)."""

from __future__ import annotations

import copy

from . import startup
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
        #: pending lines below this index are known to be no safe cut (see _safe_cut): their verdict,
        #: which depends on lines i-4 .. i+2 only, cannot change while pending only grows
        self.unsafe_below = 1
        self.partial = b""  # the incomplete last line
        self.skipping = False  # inside an overlong line whose rest is dropped
        self.tail = bytearray()  # the last TAIL_BYTES of content: each writer's last line
        self.first = bytearray()  # the first bytes of complete lines: each writer's start-up settings
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
        if len(self.first) <= startup.HEAD_BYTES:
            self.first += line[:startup.HEAD_BYTES + 1 - len(self.first)]
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
        self.unsafe_below = 1  # (the lines left lost their context above: checked afresh)
        self.pending_bytes -= len(chunk)
        self.next_commit = COMMIT_BYTES

    def _safe_cut(self) -> int | None:
        """The last pending line ``i`` such that scanning ``pending[:i]`` and ``pending[i:]`` apart
        gives what scanning them together gives (None: no such line).

        Records reach across lines in two ways only: blocks consume following lines that look like
        block lines, and a hard-wrapped record joins up to 3 lines before and 4 after a candidate
        line through continuation lines (``Scanner._rewrap``). So line ``i`` is a safe cut when it is
        not a block line and either it is not a continuation (nothing joins across it) or no
        candidate line lies within reach (lines ``i-4 .. i+2``). Lines below ``unsafe_below`` were
        found unsafe before, with the same context: not checked again.
        """
        strip = self.stripper.strip  # type: ignore[union-attr]
        spans = _scanner().prefilter.spans
        cut_width = (self.wrap.width - 1, self.wrap.width) if self.wrap is not None else ()
        last = len(self.pending) - 3
        for i in range(last, self.unsafe_below - 1, -1):
            if len(self.pending[i - 1].rstrip(b"\r\n")) in cut_width:
                continue  # the line before may be a piece a terminal cut: its record goes on here
            text = strip(clean_line(self.pending[i][:-1]))[1]
            if _KV.match(text) or _CFE_IDX.match(text) or _CFE_FIELD.match(text) or _STALL_RANK.match(text) \
                    or text.strip() == "<NO_OTHER_FAILURES>" or text[:1].isspace():
                continue  # an indented line belongs to what is above it (a traceback, a table, what())
            if not is_continuation(text) or not spans(b"".join(self.pending[max(0, i - 4):i + 3])):
                return i
        # none: next time only the lines added since are checked (else a long run of lines that are
        # all continuations near candidates, as a script's tagged step lines, costs O(n^2) until the
        # forced commit)
        self.unsafe_below = max(self.unsafe_below, last + 1)
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
        first = (bytes(self.first) + self.partial)[:startup.HEAD_BYTES + 1]  # as the batch scan's first chunk
        out.startup = startup.startup_settings(startup.head_window(first, len(first) <= startup.HEAD_BYTES), stripper)
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
