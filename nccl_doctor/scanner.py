"""Scan one input file into events: prefilter whole chunks, then parse only candidate lines.

Per file the result is a small summary (``FileScan``): events, line/byte counts, unparsed lines,
the last line of each writer, and what could not be read. Files are independent, so scans run in
parallel processes and only summaries travel back.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from .discover import InputFile
from .events import MAX_TEXT, Event, LastLine
from .launchers import LauncherStripper, detect_modes
from .prefilter import Prefilter
from .reading import ReadIssue, clean_line, iter_chunks, looks_binary, open_binary
from .records import BLOCK_LITERALS, is_continuation, join_block, split_glued
from .timeparse import event_time, parse_iso, parse_mmdd
from .wrapped import SMALL_FILE, TerminalWrap, detect_width

TAIL_BYTES = 256 << 10
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
_NCCL_WHO = re.compile(r"^(?:\[[\d: -]{19,30}\] )?([\w.-]{1,253}):(\d{1,10}):\d{1,10} ")
_HEADER = ("host", "pid", "cuda_dev")
#: Bytes that line cleaning may remove (control characters but tab, newline, carriage return).
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(slots=True)
class FileScan:
    path: str
    size: int = 0
    lines: int = 0
    bytes: int = 0
    parsed: int = 0
    events: list[Event] = field(default_factory=list)
    last_lines: dict = field(default_factory=dict)  # writer key -> LastLine
    modes: tuple[str, ...] = ()
    skipped: str | None = None  # whole file skipped (binary, unreadable)
    issue: str | None = None  # partly read
    mtime: float | None = None
    #: (first ts, last ts, line) of timestamped lines from outside the job (no launcher label) that
    #: follow the job's last labelled line: time that passed with no output from the job.
    quiet: tuple | None = None
    repeats: dict = field(default_factory=dict)  # REPEAT_CAPS literal -> lines parsed so far
    last_repeat: dict = field(default_factory=dict)  # REPEAT_CAPS literal -> (line_no, raw) skipped last

    @property
    def unparsed(self) -> int:
        return max(0, self.lines - self.parsed)


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

    def scan(self, f: InputFile) -> FileScan:
        out = FileScan(path=f.path, size=f.size)
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
            self._scan_stream(fp, out)
        except ReadIssue as exc:
            out.issue = str(exc)
        except OSError as exc:
            out.issue = f"read failed: {exc.strerror or exc}"
        except Exception as exc:  # a bug must cost one file's tail, not the whole analysis
            out.issue = f"scan stopped early: {type(exc).__name__}: {exc}"[:200]
        finally:
            if f.real != "-":
                fp.close()
        return out

    def _scan_stream(self, fp, out: FileScan) -> None:
        year = time.gmtime(out.mtime or time.time()).tm_year
        stripper: LauncherStripper | None = None
        base_line = 0
        tail = b""
        try:
            for chunk in iter_chunks(fp):
                if stripper is None:
                    if looks_binary(chunk[:8192]):
                        out.skipped = "binary data, not a text log"
                        return
                    head = _head_lines(chunk)
                    modes = detect_modes(head)
                    out.modes = tuple(sorted(modes))
                    stripper = LauncherStripper(modes)
                    width = detect_width(head, stripper.strip, self.formats.match, small=out.size <= SMALL_FILE)
                    wrap = TerminalWrap(width) if width else None
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
                self._last_lines(tail, base_line, stripper, year, out)

    # ---- candidate lines ---------------------------------------------------------------------

    def _scan_chunk(self, chunk: bytes, base_line: int, stripper: LauncherStripper, year: int,
                    out: FileScan, wrap: TerminalWrap | None = None) -> None:
        skip = self._unwrap(chunk, base_line, stripper, year, out, wrap) if wrap is not None and wrap.active else ()
        spans = self.prefilter.lines(chunk)
        extra = self._repeat_spans(chunk, base_line, out)
        if extra:
            # A repeat line's literals are not in the prefilter: its candidates come from its shape.
            merged = {(s, e): hits for s, e, hits in spans}
            merged.update((span, None) for span in extra)
            spans = sorted((s, e, hits) for (s, e), hits in merged.items())
        if not spans:
            return
        match = self.formats.match
        n = len(chunk)
        repeats = out.repeats
        line_no = base_line + 1
        counted_to = 0
        consumed_to = -1
        cursor = [0]  # position of the newline ending the last line consumed by a block

        def peek() -> str | None:
            p = cursor[0] + 1
            if p >= n:
                return None
            q = chunk.find(b"\n", p)
            q = n if q < 0 else q
            return stripper.strip(clean_line(chunk[p:q]))[1]

        def take() -> str | None:
            p = cursor[0] + 1
            if p >= n:
                return None
            q = chunk.find(b"\n", p)
            cursor[0] = n if q < 0 else q
            return ""

        capped = [lit for lit, (cap, _k) in REPEAT_CAPS.items() if repeats.get(lit, 0) >= cap]
        for s, e, hits in spans:
            if s <= consumed_to or s in skip:
                continue
            line_no += chunk.count(b"\n", counted_to, s)
            counted_to = s
            cursor[0] = e
            raw = chunk[s:e]
            if capped:
                hit = next((lit for lit in capped if lit in raw), None)
                if hit is not None:
                    out.parsed += 1  # a known line of a repetitive family (see REPEAT_CAPS)
                    if line_no > out.last_repeat.get(hit, (0, b""))[0]:
                        out.last_repeat[hit] = (line_no, raw)
                    continue
            text = clean_line(raw)
            if hits is not None and _CONTROL.search(raw) is not None:
                hits = None  # cleaning removed bytes, which can join text into a new literal
            # The line's launcher prefix first (an srun label, a kubectl timestamp): it belongs to every
            # record glued on the line, and a record start found after it is not a glued record.
            line_lf, body = stripper.strip(text)
            for rec in split_glued(body):
                lf, rest = stripper.strip(rec, nested=True)
                lf = stripper.within(line_lf, lf)
                records = join_block(rest, take, peek)  # None unless rest heads a known block
                if records is None and rest.startswith("    ") and _quotes_source(chunk, s, stripper):
                    continue  # a traceback's quoted source line: code, not what happened
                for r in records or (rest,):
                    # Records cut from this line hold only literals the line holds; a joined block
                    # reaches into the next lines, so its candidates come from its shape.
                    m = match(r, None if records else hits)
                    if m is None:
                        m, r = self._rewrap(chunk, s, cursor, r, stripper, match, labelled=bool(lf))
                    if m is None:
                        continue
                    out.parsed += 1
                    lit = _REPEAT_KIND.get(m[0])
                    if lit is not None:
                        repeats[lit] = repeats.get(lit, 0) + 1
                        if repeats[lit] >= REPEAT_CAPS[lit][0] and lit not in capped:
                            capped.append(lit)
                    out.events.append(_make_event(m[0], m[1], lf, out.path, line_no, r, year))
            if cursor[0] > e:
                consumed_to = cursor[0]
                out.parsed += chunk.count(b"\n", e, cursor[0])

    def _unwrap(self, chunk: bytes, base_line: int, stripper: LauncherStripper, year: int, out: FileScan,
                wrap: TerminalWrap) -> set[int]:
        """Records a terminal cut at its width (see ``wrapped``): one event each; the starts of the
        lines they took, which the candidate loop then skips."""
        taken: set[int] = set()
        line_no, counted = base_line + 1, 0
        for j in wrap.join(chunk, clean_line, stripper.strip, self.formats.match):
            line_no += chunk.count(b"\n", counted, j.start)
            counted = j.start
            taken.update(j.starts)
            out.parsed += len(j.starts)
            out.events.append(_make_event(j.kind, j.fields, j.label, out.path, line_no, j.text, year))
        return taken

    def _rewrap(self, chunk: bytes, s: int, cursor: list, rec: str, stripper: LauncherStripper, match,
                labelled: bool = False):
        """Try a hard-wrapped record: the previous record start plus following continuation lines.

        A continuation is a line that starts no record of its own: no launcher label, no known
        prefix, and it matches nothing by itself (log text wrapped at ~70 columns by a mail or
        commit-message formatter, ``064``).
        """
        def line_at(start: int, end: int) -> tuple[dict, str]:
            return stripper.strip(clean_line(chunk[start:end]))

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
        pos = cursor[0]
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
                cursor[0] = pos
                return m, joined
        if len(parts) > 1:
            joined = " ".join(parts)
            m = match(joined)
            if m is not None:
                cursor[0] = pos
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
                m = self.formats.match(rest)
                if m is not None:
                    out.events.append(_make_event(m[0], m[1], lf, out.path, line_no, rest, year))
        out.last_repeat.clear()

    # ---- last line of each writer ------------------------------------------------------------

    def _last_lines(self, tail: bytes, total: int, stripper: LauncherStripper, year: int, out: FileScan) -> None:
        """The last non-blank line of the file and of each writer in it (launcher rank, local rank,
        NCCL host:pid). A file with one writer needs only its last line; others are walked back
        until every writer its events named has been met (bounded by the tail kept)."""
        wanted: set = set()
        for ev in out.events:
            if ev.rank is not None:
                wanted.add(("rank", ev.rank))
            elif ev.local_rank is not None:
                wanted.add(("local_rank", ev.local_rank))
            if ev.host is not None and ev.pid is not None and ev.kind.startswith("nccl_"):
                wanted.add(("proc", ev.host, ev.pid))
            if "launcher_pid" in ev.fields:
                wanted.add(("lpid", ev.fields.get("launcher_ip"), ev.fields["launcher_pid"]))
        single = len(wanted) <= 1
        labelled = any(k[0] in ("rank", "local_rank") for k in wanted)
        quiet_ts: list[float] = []
        job_line: int | None = None
        end = len(tail) - 1 if tail.endswith(b"\n") else len(tail)
        line_no = total + 1
        seen: dict = {}
        while end >= 0:
            start = tail.rfind(b"\n", 0, end) + 1
            raw = tail[start:end]
            line_no -= 1
            end = start - 1
            if not raw.strip():
                continue
            lf, rest = stripper.strip(clean_line(raw).replace("\r", " "))
            if not rest.strip():
                continue
            keys: list = [None]
            if "rank" in lf:
                keys.append(("rank", lf["rank"]))
            elif "local_rank" in lf:
                keys.append(("local_rank", lf["local_rank"]))
            if "pid" in lf and "host" not in lf:  # Ray's "(Worker pid=N, ip=A)", as in _make_event
                keys.append(("lpid", lf.get("ip"), lf["pid"]))
            who = _NCCL_WHO.match(rest)
            if who and len(who.group(2)) < 11:
                keys.append(("proc", who.group(1), int(who.group(2))))
            if labelled and job_line is None:
                if len(keys) == 1:  # a line from outside the job (a cron, the scheduler)
                    t = parse_iso(rest[:40])
                    if t is not None:
                        quiet_ts.append(t)
                else:
                    job_line = line_no
            for k in keys:
                if k not in seen:
                    seen[k] = LastLine(out.path, line_no, rest.strip()[:MAX_TEXT], event_time(lf, year))
            if (single or wanted.issubset(seen)) and (not labelled or job_line is not None):
                break
        out.last_lines = seen
        if job_line is not None and len(quiet_ts) >= 2:
            out.quiet = (min(quiet_ts), max(quiet_ts), job_line)


def _head_lines(chunk: bytes, want: int = 600, limit: int = 256 << 10) -> list[str]:
    """The first ``want`` lines of a file (at most ``limit`` bytes), decoded: what launcher
    detection looks at (it keeps the first 200 non-blank ones). A small window is decoded first
    and is enough when it holds those 200 lines; a large chunk is never decoded whole."""
    for size in (32 << 10, limit):
        window = chunk[:size]
        lines = window.decode("utf-8", "replace").splitlines()
        if len(window) < len(chunk) and not window.endswith(b"\n"):
            lines = lines[:-1]  # cut mid-line: the next window has it whole
        lines = lines[:want]
        if len(window) == len(chunk) or size == limit or len(lines) == want \
                or sum(1 for ln in lines if ln.strip()) >= 200:
            return lines
    return lines


def fix_years(events: list[Event]) -> None:
    """c10's ``MMDD hh:mm:ss`` has no year; each file's mtime gave one. When the job's logs carry
    full dates (kubectl, DeepSpeed, NCCL 2.26 WARN), their most common year is the better guess,
    applied to the whole job so that files never disagree on the year among themselves."""
    years = Counter(time.gmtime(e.ts).tm_year for e in events if e.ts is not None and "mmdd" not in e.fields)
    if not years:
        return
    year = years.most_common(1)[0][0]
    for e in events:
        if e.ts is not None and "mmdd" in e.fields and "hms" in e.fields and time.gmtime(e.ts).tm_year != year:
            e.ts = parse_mmdd(str(e.fields["mmdd"]), str(e.fields["hms"]), year)


#: A Python traceback's frame line: the line after it quotes the source, indented by four spaces.
_FRAME_LINE = re.compile(r'^\s{2}File "[^"\n]{1,4096}", line \d{1,9}')


def _quotes_source(chunk: bytes, s: int, stripper: LauncherStripper) -> bool:
    """The line starting at ``s`` follows a traceback frame line (same launcher prefix stripped): it
    is the quoted source line ("    raise RendezvousTimeoutError"), whatever words it holds."""
    if s <= 0:
        return False
    p_start = chunk.rfind(b"\n", 0, s - 1) + 1
    prev = stripper.strip(clean_line(chunk[p_start:s - 1]))[1]
    return _FRAME_LINE.match(prev) is not None


def _make_event(kind: str, fields: dict, lf: dict, path: str, line_no: int, text: str, year: int) -> Event:
    # Only the NCCL line prefix names the writer (host:pid:tid [dev]); a host or pid inside other
    # messages (srun's failed node, a ChildFailedError entry) is the subject, kept in fields.
    writer = kind.startswith("nccl_")
    host = (fields.pop("host", None) if writer else None) or lf.get("host") or lf.get("pod")
    pid = fields.pop("pid", None) if writer else None
    if pid is None:
        pid = lf.get("pid")
    cuda_dev = fields.pop("cuda_dev", None) if writer else fields.get("cuda_dev")
    ts = event_time(fields, year)
    if lf:
        if ts is None:
            ts = event_time(lf, year)
        if "pid" in lf and "host" not in lf:
            # Ray's "(Worker pid=N, ip=A)": a pid with no host name, the same on the worker's NCCL lines
            # and on its prints; with the address, who wrote the line (pids repeat across nodes).
            fields.setdefault("launcher_pid", lf["pid"])
            if "ip" in lf:
                fields.setdefault("launcher_ip", lf["ip"])
    # positional: this runs once per event (kind, file, line, host, pid, cuda_dev, rank, local_rank, ts, fields, text)
    return Event(kind, path, line_no, host, pid, cuda_dev, lf.get("rank"), lf.get("local_rank"), ts, fields,
                 text.strip()[:MAX_TEXT])
