"""Scan one input file into events: prefilter whole chunks, then parse only candidate lines.

Per file the result is a small summary (``FileScan``): events, line/byte counts, unparsed lines,
the last line of each writer, and what could not be read. Files are independent, so scans run in
parallel processes and only summaries travel back.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

from .discover import InputFile
from .eventcap import EventCap
from .events import Event
from .filescan import FileScan
from .jsonlog import RECORD_LAUNCHERS
from .launchers import LauncherStripper, detect_modes, head_lines
from .prefilter import HitLines, Prefilter
from .reading import (
    ReadIssue,
    clean_line,
    is_plain,
    iter_chunks,
    looks_binary,
    oldest_first_stream,
    open_binary,
)
from .records import BLOCK_LITERALS, is_continuation, join_block, quotes_source, split_glued
from .scan_events import make_event
from .startup import HEAD_BYTES, head_window, startup_settings
from .wrapped import SMALL_FILE, TerminalWrap, detect_width
from .writers import last_lines

_RECORDS = frozenset(RECORD_LAUNCHERS)  # structured records: their text is not their line

TAIL_BYTES = 256 << 10
#: The first bytes of a file that tell a document from a log (``Scanner.scan(f, documents=...)``).
DOCUMENT_HEAD = 4096
#: Repetitive line families, parsed only up to a cap per file (then counted, not parsed), plus
#: the last one of the file: inter-node channel lines repeat per channel, peer and communicator
#: (the first few tell the transport); NCCL_DEBUG_SUBSYS=COLL prints one line per collective
#: (the first ones give the sizes that worked, the last one where the rank stopped). No rule
#: reads more than that, and at 16k ranks each further line kept costs ~16k events.
REPEAT_CAPS: dict[bytes, tuple[int, str]] = {
    b"via NET/": (4, "nccl_channel_net"),
    b": opCount ": (4, "nccl_coll"),
}
_REPEAT_KIND = {kind: lit for lit, (_cap, kind) in REPEAT_CAPS.items()}
_HEADER = ("host", "pid", "cuda_dev")
#: Bytes that line cleaning may remove (control characters but tab, newline, carriage return).
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


#: What a rule line (a table's border) is drawn with.
_RULE_CHARS = "-=_*#~+"


class Scanner:
    """Compiled once per process: formats, the prefilter over their literals, launcher prefixes."""

    def __init__(self, formats=None, engine: str | None = None):
        if formats is None:
            from .formats import load_formats

            formats = load_formats()
        self.formats = formats
        # Repetitive families are found by direct search (first few, last one), not by the prefilter:
        # their lines would otherwise be most of the candidates.
        repeat = {lit.decode() for lit in REPEAT_CAPS}
        self.prefilter = Prefilter(tuple(x for x in formats.literals if x not in repeat) + BLOCK_LITERALS,
                                   engine=engine)
        #: How a record (a line's, or one joined from several lines) is matched: (record, the
        #: literals it holds or None) -> (kind, fields) or None.
        self.match_record = formats.match

    def scan(self, f: InputFile, documents: Callable[[bytes], bool] | None = None) -> FileScan:
        """``documents``: told a plain file's first bytes; when it says they are a document's, the
        scan stops there with ``document`` set (so that a caller reading documents apart opens
        each file once)."""
        out = FileScan(path=f.path, size=f.size)
        out.capper = EventCap(out.events)
        try:
            fp = open_binary(f.real)
        except OSError as exc:
            out.skipped = f"cannot open: {exc.strerror or exc}"
            return out
        try:
            try:
                out.mtime = os.stat(f.real).st_mtime if f.real != "-" else None
            except OSError:
                out.mtime = None
            stream, out.flipped = oldest_first_stream(fp, f.size)  # (a newest-first export: turned round)
            self._scan_stream(stream, out, documents if stream is fp and is_plain(fp) else None)
        except ReadIssue as exc:
            out.issue = str(exc)
        except OSError as exc:
            out.issue = f"read failed: {exc.strerror or exc}"
        except Exception as exc:  # a bug must cost one file's tail, not the whole analysis
            out.issue = f"scan stopped early: {type(exc).__name__}: {exc}"[:200]
        finally:
            if f.real != "-":
                fp.close()
        if f.cut and not out.issue:
            out.issue = f.cut
        return out

    def _scan_stream(self, fp, out: FileScan, documents: Callable[[bytes], bool] | None = None) -> None:
        year = time.gmtime(out.mtime or time.time()).tm_year
        stripper: LauncherStripper | None = None
        wrap: TerminalWrap | None = None
        base_line = 0
        tail = b""
        first = b""
        try:
            for chunk in iter_chunks(fp):
                if stripper is None:
                    if documents is not None and documents(chunk[:DOCUMENT_HEAD]):
                        out.document = True
                        return
                    if looks_binary(chunk[:8192]):
                        out.skipped = "binary data, not a text log"
                        return
                    head = head_lines(chunk)
                    modes = detect_modes(head)
                    out.modes = tuple(sorted(modes))
                    stripper = LauncherStripper(modes)
                    width = detect_width(head, stripper.strip, self.match_record, small=out.size <= SMALL_FILE)
                    wrap = TerminalWrap(width) if width else None
                    first = chunk[:HEAD_BYTES + 1]
                out.bytes += len(chunk)
                self._scan_chunk(chunk, base_line, stripper, year, out, wrap)
                nl = chunk.count(b"\n")
                if chunk and not chunk.endswith(b"\n"):
                    nl += 1
                base_line += nl
                tail = (tail + chunk)[-TAIL_BYTES:] if len(chunk) < TAIL_BYTES else chunk[-TAIL_BYTES:]
        finally:  # a truncated stream still reports what was read before it broke
            out.lines = base_line
            if stripper is not None:
                self._last_repeats(stripper, year, out)
            cap = out.capper
            if cap is not None:
                cap.done()
                out.step_ts, out.step_mmdd, out.years, out.capper = cap.step_ts, cap.step_mmdd, cap.years, None
            if stripper is not None:
                self._last_lines(tail, base_line, stripper, year, out)
                if not out.flipped:
                    out.startup = startup_settings(head_window(first, len(first) <= HEAD_BYTES), stripper)

    # ---- candidate lines ---------------------------------------------------------------------

    def _scan_chunk(self, chunk: bytes, base_line: int, stripper: LauncherStripper, year: int,
                    out: FileScan, wrap: TerminalWrap | None = None) -> None:
        skip = self._unwrap(chunk, base_line, stripper, year, out, wrap) if wrap is not None and wrap.active else ()
        spans = self._candidate_spans(chunk, base_line, out)
        if not spans:
            return
        cur = _Cursor(chunk, stripper)
        repeats = out.repeats
        line_no = base_line + 1
        counted_to = 0
        consumed_to = -1
        capped = [lit for lit, (cap, _k) in REPEAT_CAPS.items() if repeats.get(lit, 0) >= cap]
        lazy = spans if isinstance(spans, HitLines) else None  # told where the scan got to (see HitLines)
        for s, e, hits in spans:
            if s <= consumed_to or s in skip:
                continue
            line_no += chunk.count(b"\n", counted_to, s)
            counted_to = s
            raw = chunk[s:e]
            if capped and self._skip_capped(raw, capped, line_no, out):
                continue
            if hits is not None:
                ev = self._plain_line(raw, hits, line_no, stripper, year, out, capped)
                if ev is not None:
                    if not skip:  # (lines a wrapped record took are not run lines)
                        consumed_to = self._run_after(chunk, s, e, ev, hits, line_no, stripper, year, out, capped)
                        if lazy is not None:
                            lazy.floor = consumed_to
                    continue
            end = self._parse_line(cur, s, e, raw, hits, line_no, year, out, capped)
            if end > e:
                consumed_to = end
                out.parsed += chunk.count(b"\n", e, end)
                if lazy is not None:
                    lazy.floor = consumed_to

    def _plain_line(self, raw: bytes, hits: frozenset, line_no: int, stripper: LauncherStripper, year: int,
                    out: FileScan, capped: list) -> Event | None:
        """A shortcut for lines that need none of the general path (see fastscan): the event, when it
        parsed the line. Here: never."""
        return None

    def _run_after(self, chunk: bytes, s: int, e: int, ev: Event, hits: frozenset, line_no: int,
                   stripper: LauncherStripper, year: int, out: FileScan, capped: list) -> int:
        """After a plain line: the lines right after it that it can answer for in one go (see fastscan);
        the newline ending the last line taken, -1 when none. Here: none."""
        return -1

    def _candidate_spans(self, chunk: bytes, base_line: int, out: FileScan) -> list:
        """(start, end, literals or None) of the chunk's candidate lines, in order: the prefilter's
        plus the lines of the repetitive families still under their cap."""
        spans = self.prefilter.lines(chunk)
        extra = self._repeat_spans(chunk, base_line, out)
        if extra:
            # A repeat line's literals are not in the prefilter: its candidates come from its shape.
            merged = {(s, e): hits for s, e, hits in spans}
            merged.update((span, None) for span in extra)
            spans = sorted((s, e, hits) for (s, e), hits in merged.items())
        return spans

    @staticmethod
    def _skip_capped(raw: bytes, capped: list, line_no: int, out: FileScan) -> bool:
        """A known line of a repetitive family over its cap (see REPEAT_CAPS): counted, not parsed."""
        hit = next((lit for lit in capped if lit in raw), None)
        if hit is None:
            return False
        out.parsed += 1
        if line_no > out.last_repeat.get(hit, (0, b""))[0]:
            out.last_repeat[hit] = (line_no, raw)
        return True

    def _parse_line(self, cur: _Cursor, s: int, e: int, raw: bytes, hits, line_no: int, year: int,
                    out: FileScan, capped: list) -> int:
        """Parse one candidate line (and the lines a block or a wrapped record takes with it) into
        events; return the position of the newline ending the last line consumed."""
        cur.pos = e
        stripper = cur.stripper
        match = self.match_record
        text = clean_line(raw)
        if hits is not None and _CONTROL.search(raw) is not None:
            hits = None  # cleaning removed bytes, which can join text into a new literal
        # The line's launcher prefix first (an srun label, a kubectl timestamp): it belongs to every
        # record glued on the line, and a record start found after it is not a glued record.
        line_lf, body = stripper.strip(text)
        if hits is not None and not _RECORDS.isdisjoint(line_lf.get("launchers", ())):
            hits = None  # a JSON record's text is not its line ("ERROR: ..." from a "level" key)
        for rec in split_glued(body):
            lf, rest = stripper.strip(rec, nested=True)
            lf = stripper.within(line_lf, lf)
            records = join_block(rest, cur.take, cur.peek)  # None unless rest heads a known block
            if records is None and rest.startswith("    ") and quotes_source(cur.chunk, s, stripper):
                continue  # a traceback's quoted source line: code, not what happened
            for r in records or (rest,):
                at = line_no
                if isinstance(r, tuple):  # a line of the block that is a record of its own too, at its own line
                    offset, r = r
                    m = match(r, None)
                    if m is None:
                        continue  # (part of the block only: never a wrapped record)
                    at += offset
                else:
                    # Records cut from this line hold only literals the line holds; a joined block
                    # reaches into the next lines, so its candidates come from its shape.
                    m = match(r, None if records else hits)
                    if m is None:
                        m, r = self._rewrap(cur.chunk, s, cur, r, stripper, match, labelled=bool(lf))
                    if m is None:
                        continue
                self._count_repeat(m[0], out, capped)
                out.add(make_event(m[0], m[1], lf, out.path, at, r, year))
        return cur.pos

    def _unwrap(self, chunk: bytes, base_line: int, stripper: LauncherStripper, year: int, out: FileScan,
                wrap: TerminalWrap) -> set[int]:
        """Records a terminal cut at its width (see ``wrapped``): one event each; the starts of the
        lines they took, which the candidate loop then skips."""
        taken: set[int] = set()
        line_no, counted = base_line + 1, 0
        for j in wrap.join(chunk, clean_line, stripper.strip, self.match_record):
            line_no += chunk.count(b"\n", counted, j.start)
            counted = j.start
            taken.update(j.starts)
            out.parsed += len(j.starts)
            out.add(make_event(j.kind, j.fields, j.label, out.path, line_no, j.text, year))
        return taken

    @staticmethod
    def _count_repeat(kind: str, out: FileScan, capped: list) -> None:
        out.parsed += 1
        lit = _REPEAT_KIND.get(kind)
        if lit is not None:
            repeats = out.repeats
            repeats[lit] = repeats.get(lit, 0) + 1
            if repeats[lit] >= REPEAT_CAPS[lit][0] and lit not in capped:
                capped.append(lit)

    def _rewrap(self, chunk: bytes, s: int, cursor: _Cursor, rec: str, stripper: LauncherStripper, match,
                labelled: bool = False):
        """Try a hard-wrapped record: the previous record start plus following continuation lines.

        A continuation is a line that starts no record of its own: no launcher label, no known
        prefix, and it matches nothing by itself (log text wrapped at ~70 columns by a mail or
        commit-message formatter, ``064``).
        """
        def line_at(start: int, end: int) -> tuple[dict, str]:
            return stripper.strip(clean_line(chunk[start:end]))

        if not rec.strip().strip(_RULE_CHARS):
            return None, rec  # a rule of dashes (a table's border, dshbak's header) is no piece of a record
        parts = [rec.strip()]
        if is_continuation(rec) and not labelled:  # a line with a launcher label starts a record
            p_end = s - 1
            for _ in range(3):
                if p_end <= 0:
                    break
                p_start = chunk.rfind(b"\n", 0, p_end) + 1
                lf, prev = line_at(p_start, p_end)
                if not prev.strip() or match(prev) is not None:
                    break  # a line that is a record by itself was not cut: nothing joins onto it
                parts.insert(0, prev.strip())
                if lf or not is_continuation(prev):  # the record's first line (it may carry a label)
                    break
                p_end = p_start - 1
        n = len(chunk)
        pos = cursor.pos
        for _ in range(4):
            p = pos + 1
            if p >= n:
                break
            q = chunk.find(b"\n", p)
            q = n if q < 0 else q
            lf, nxt = line_at(p, q)
            if lf or not is_continuation(nxt) or match(nxt) is not None:
                break
            parts.append(nxt.strip())
            pos = q
            joined = " ".join(parts)
            m = match(joined)
            if m is not None:
                cursor.pos = pos
                return m, joined
        if len(parts) > 1:
            joined = " ".join(parts)
            m = match(joined)
            if m is not None:
                cursor.pos = pos
                return m, joined
        return None, rec

    @staticmethod
    def _repeat_spans(chunk: bytes, base_line: int, out: FileScan) -> list[tuple[int, int]]:
        """Lines of the repetitive families in this chunk: the first ones while under the cap (to be
        parsed), and the chunk's last one remembered (parsed at the end if it is the file's last)."""
        extra: list[tuple[int, int]] = []
        for lit, (cap, _kind) in REPEAT_CAPS.items():
            pos = chunk.find(lit)
            if pos < 0:
                continue
            budget = cap - out.repeats.get(lit, 0)
            taken_to = -1
            while pos >= 0 and budget > 0:
                s = chunk.rfind(b"\n", 0, pos) + 1
                e = chunk.find(b"\n", pos)
                e = len(chunk) if e < 0 else e
                extra.append((s, e))
                taken_to = e
                budget -= 1
                pos = chunk.find(lit, e)
            last = chunk.rfind(lit)
            if last > taken_to:
                s = chunk.rfind(b"\n", 0, last) + 1
                e = chunk.find(b"\n", last)
                e = len(chunk) if e < 0 else e
                out.last_repeat[lit] = (base_line + 1 + chunk.count(b"\n", 0, s), chunk[s:e])
        return extra

    def _last_repeats(self, stripper: LauncherStripper, year: int, out: FileScan) -> None:
        """Parse the last skipped line of each capped family: where the file's writer stopped."""
        for line_no, raw in sorted(out.last_repeat.values()):
            for rec in split_glued(clean_line(raw)):
                lf, rest = stripper.strip(rec)
                m = self.match_record(rest)
                if m is not None:
                    out.add(make_event(m[0], m[1], lf, out.path, line_no, rest, year))
        out.last_repeat.clear()

    # ---- last line of each writer ------------------------------------------------------------

    def _last_lines(self, tail: bytes, total: int, stripper: LauncherStripper, year: int, out: FileScan) -> None:
        last_lines(tail, total, stripper, year, out)


class _Cursor:
    """The line-by-line view of one chunk that multi-line blocks read through: ``pos`` is the
    newline ending the last line consumed; ``peek`` returns the next line (launcher prefix
    stripped) without consuming it, ``take`` consumes it."""

    __slots__ = ("chunk", "n", "pos", "stripper")

    def __init__(self, chunk: bytes, stripper: LauncherStripper):
        self.chunk, self.n, self.pos, self.stripper = chunk, len(chunk), 0, stripper

    def peek(self) -> str | None:
        p = self.pos + 1
        if p >= self.n:
            return None
        q = self.chunk.find(b"\n", p)
        q = self.n if q < 0 else q
        return self.stripper.strip(clean_line(self.chunk[p:q]))[1]

    def take(self) -> str | None:
        p = self.pos + 1
        if p >= self.n:
            return None
        q = self.chunk.find(b"\n", p)
        self.pos = self.n if q < 0 else q
        return ""
