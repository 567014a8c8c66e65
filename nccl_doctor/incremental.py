"""Incremental analysis for bots that tail logs: lines in as they arrive, findings out.

``Analyzer.feed(source, line)`` (or ``feed_bytes`` for raw, possibly partial, data) accepts input as
it is written; ``findings()`` returns the findings for everything fed so far, and ``updates()`` /
``new_findings()`` return each new or changed finding once, and each reported finding that went
away (``"resolved"``). Lines are timed as they arrive (the analyzer's clock): the live progress
model (``evidence.progress``) learns the job's rhythm from them, and the live rules (ST1 stall,
ST2 straggler) are judged again as time passes, without re-reading anything.

The parsing is the batch scanner's own (``Scanner._scan_chunk``, run by ``growing``) over chunks of complete
lines, so the findings equal those of :func:`nccl_doctor.analyze` on the same files. Memory stays
bounded per source: lines are kept only until they are committed (about 256 KiB), the head used
to recognise launcher prefixes only until they are known (at most 256 KiB), and the tail that gives
each writer's last line (256 KiB); the events themselves are small. A chunk is committed only at a *quiet* line, one that no
multi-line record (torchrun Result block, ChildFailedError table, hard-wrapped line) can extend
across, so cutting there changes nothing. Not thread-safe: feed and read from one thread.
"""

from __future__ import annotations

import bisect
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
from .growing import _Source
from .scanner import FileScan
from .text_encoding import LiveDecoder


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
        self._decoders: dict[str, LiveDecoder] = {}  # each source's text encoding (UTF-16, GBK, ...)
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
        decoding = self._decoders.get(source)
        if decoding is None:
            decoding = self._decoders[source] = LiveDecoder()
        restart, data = decoding.feed(data)
        if restart:  # its first bytes turned out to be in another encoding: read again from its start
            self._sources.pop(source, None)
            self.progress.forget(source)
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
        self._decoders.pop(source, None)
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
