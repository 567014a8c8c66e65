"""``nccl-doctor watch PATH...``: follow growing logs and report each new or changed finding once.

Files under the paths are re-discovered whenever a folder under them changes, so files created later
are followed too (a poll of a quiet job costs a ``stat`` per file and per folder, no walk). A
file whose inode changes (rotation by rename) or that shrinks or is rewritten (truncation,
``copytruncate``) is read again from its start; a file that disappears is dropped. So the findings
always describe what is under the paths now, exactly as ``nccl-doctor analyze`` would.

Each finding becomes one JSON line on stdout, or one POST to ``--webhook URL`` whose JSON body has
a ``text`` field (what Slack, Mattermost, Rocket.Chat and most chat bots display) next to the
finding itself; ``status`` is ``new``, ``changed``, or ``resolved`` once a reported finding is gone
(a stall whose job resumed: an alert bot closes its incident). Lines are timed as they arrive, so
that a job that stops making progress is reported long before its collective timeout fires (ST1). Deliveries run in a background thread with retries and exponential back-off; reading
never waits for the network. Standard library only.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
import time
from typing import IO, Any

from . import __version__
from .discover import InputFile, Rediscovery
from .errorfile import looks_like_file as looks_like_error_file
from .events import Skipped
from .evidence.progress import STALL_AFTER
from .incremental import Analyzer, Update
from .report.jsonout import inert
from .report.safe import plain
from .webhook import WebhookSender

READ_BLOCK = 1 << 20
#: The first bytes of a file, compared at each poll to notice a rewrite that grew past our offset.
SIGNATURE = 64
_COMPRESSED = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd")


# ---- following files ---------------------------------------------------------------------------

class _Follower:
    """One file: read what was appended since the last poll; start over when it was replaced.

    No file stays open between polls (a job of thousands of ranks must not exhaust descriptors): the
    file is reopened when its size or mtime changed, and read from where the last read ended.
    """

    def __init__(self, f: InputFile):
        self.path, self.real = f.path, f.real
        self.reset()

    def reset(self) -> None:
        self.ident: tuple | None = None  # (dev, inode) being followed
        self.offset = 0
        self.sig = b""  # its first bytes: a rewrite that grew past `offset` changes them
        self.stamp: tuple | None = None  # (dev, inode, size, mtime) at the last read
        self.compressed = False

    def poll(self, analyzer: Analyzer, seen_until: float | None = None) -> bool:
        """Feed new bytes to the analyzer; True when anything changed. ``seen_until``: the wall time
        of the previous poll (of the start, at the first): a file read from its start that was last
        written before then (there when watching started, or renamed into the paths by a rotation)
        is backlog, with no arrival times to learn from."""
        try:
            st = os.stat(self.real)
        except OSError:
            return False  # gone for now; discovery drops it if it stays gone
        stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp == self.stamp:
            return False
        try:
            with open(self.real, "rb") as fp:
                head = fp.read(max(len(self.sig), 4))
                restart = self.ident is not None and (
                    self.ident != stamp[:2] or st.st_size < self.offset or self.compressed
                    or not head.startswith(self.sig))
                if restart:  # rotated, truncated or rewritten: what it gave before is void
                    analyzer.forget(self.path)
                    self.reset()
                backlog = self.offset == 0 and seen_until is not None and st.st_mtime <= seen_until
                self.ident, self.stamp = stamp[:2], stamp
                self.compressed = head.startswith(_COMPRESSED)
                if self.compressed:
                    return self._read_compressed(analyzer)
                fp.seek(self.offset)
                return self._read_plain(fp, analyzer, backlog) or restart
        except OSError:
            return False

    def _read_plain(self, fp: IO[bytes], analyzer: Analyzer, backlog: bool) -> bool:
        got = False
        while True:
            data = fp.read(READ_BLOCK)
            if not data:
                return got
            if len(self.sig) < SIGNATURE:
                self.sig += data[: SIGNATURE - len(self.sig)]
            self.offset += len(data)
            analyzer.feed_bytes(self.path, data, backlog=backlog)
            got = True

    def _read_compressed(self, analyzer: Analyzer) -> bool:
        """Compressed logs do not grow in place: read whole, and again whenever they change."""
        from .reading import ReadIssue, iter_chunks, open_binary

        try:
            with open_binary(self.real) as fp:
                for chunk in iter_chunks(fp):
                    analyzer.feed_bytes(self.path, chunk, backlog=True)  # read whole: no arrival times
        except (OSError, ReadIssue):
            pass  # what was readable was fed; the next change of the file reads it again
        return True


class _StdinReader(threading.Thread):
    """``-``: lines from a pipe (``kubectl logs -f pod | nccl-doctor watch -``), read in a thread."""

    def __init__(self) -> None:
        super().__init__(name="nccl-doctor-stdin", daemon=True)
        self.chunks: queue.Queue[bytes] = queue.Queue()
        self.eof = threading.Event()

    def run(self) -> None:
        stream = sys.stdin.buffer
        try:
            for line in iter(stream.readline, b""):
                self.chunks.put(line)
        finally:
            self.eof.set()

    def drain(self, analyzer: Analyzer, source: str) -> bool:
        got = False
        while True:
            try:
                analyzer.feed_bytes(source, self.chunks.get_nowait())
            except queue.Empty:
                return got
            got = True


class Watcher:
    """Discovers the files under ``paths`` at every :meth:`poll` and feeds what they gained."""

    def __init__(self, paths: list[str], analyzer: Analyzer):
        self.paths = list(paths)
        self.analyzer = analyzer
        self.followers: dict[str, _Follower] = {}
        self.stdin: _StdinReader | None = None
        self._dump_key: tuple | None = None
        self._dumps: tuple[list, set[str], list] = ([], set(), [])
        self._seen_until: float | None = None  # wall time of the previous poll
        self._discover = Rediscovery(self.paths)

    @property
    def finished(self) -> bool:
        """Only stdin was given and it ended: nothing more can arrive."""
        return self.stdin is not None and self.stdin.eof.is_set() and self.stdin.chunks.empty() \
            and not self.followers and self.paths == ["-"]

    def poll(self) -> bool:
        files, skipped = self._discover()
        changed = False
        if any(f.real == "-" for f in files):
            if self.stdin is None:
                self.stdin = _StdinReader()
                self.stdin.start()
            changed |= self.stdin.drain(self.analyzer, "<stdin>")
        files = [f for f in files if f.real != "-"]
        events, dumps, dump_skipped = self._flight_recorder(files)
        # (torchelastic's error.json, written once as a worker fails, is a document analyze reads whole:
        # not a log to follow line by line)
        static = [f for f in files if f.path.endswith("error.json") and looks_like_error_file(f.real)]
        dump_skipped = dump_skipped + [Skipped(f.path, "a worker's error file (read by analyze, not followed)")
                                       for f in static]
        logs = [f for f in files if f.path not in dumps and f not in static]
        now = time.time()
        seen_until, self._seen_until = self._seen_until or now, now
        for f in logs:
            follower = self.followers.get(f.path)
            if follower is None:
                follower = self.followers[f.path] = _Follower(f)
            changed |= follower.poll(self.analyzer, seen_until)
        for path in set(self.followers) - {f.path for f in logs}:
            del self.followers[path]
            self.analyzer.forget(path)
            changed = True
        self.analyzer.set_context(skipped=skipped + dump_skipped, events=events)
        return changed

    def _flight_recorder(self, files: list[InputFile]) -> tuple[list, set[str], list]:
        """Flight-recorder dumps become events (read again only when the files or a dump change)."""
        from .analysis import _flight_recorder

        names = tuple(f.path for f in files)
        if (names, self._dump_sizes(files)) != self._dump_key:
            events, logs, skipped = _flight_recorder(files)
            self._dumps = (events, set(names) - {f.path for f in logs}, skipped)
            self._dump_key = (names, self._dump_sizes(files))
        return self._dumps

    def _dump_sizes(self, files: list[InputFile]) -> tuple[int, ...]:
        """Sizes of the dumps, now (discovery may be cached: a dump rewritten in place changes its size)."""
        sizes = []
        for f in files:
            if f.path in self._dumps[1]:
                try:
                    sizes.append(os.stat(f.real).st_size)
                except OSError:
                    sizes.append(-1)
        return tuple(sizes)


# ---- what is sent --------------------------------------------------------------------------------

def alert_text(update: Update) -> str:
    """A short chat message: severity, rule and title, who, the first evidence line and the fix
    (for a resolved finding: why, and what it was). Everything from the logs is made inert
    (``report.safe.plain``: no controls, no chat mentions)."""
    f = update.finding
    if update.status == "resolved":
        return "\n".join([f"nccl-doctor: RESOLVED {f.rule} {f.title}", plain(update.note or "no longer found", 1000),
                          f"was: {plain(f.summary, 1000)}"])
    lines = [f"nccl-doctor: {f.severity.value.upper()} {f.rule} {f.title} ({update.status})", plain(f.summary, 1000)]
    who = []
    if f.ranks:
        who.append("ranks " + ", ".join(map(str, f.ranks[:16])) + (" ..." if len(f.ranks) > 16 else ""))
    if f.hosts:
        who.append("hosts " + ", ".join(plain(h, 100) for h in f.hosts[:8]) + (" ..." if len(f.hosts) > 8 else ""))
    if who:
        lines.append("; ".join(who))
    if f.evidence:
        ev = f.evidence[0]
        lines.append(f"evidence: {plain(ev.file, 300)}:{ev.line}  {plain(ev.text, 300)}")
    if f.remedy:
        lines.append("fix: " + " ".join(f.remedy.split())[:500])
    return "\n".join(lines)


def alert_payload(update: Update, verdict: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one alert (also the JSON line printed without ``--webhook``)."""
    return {
        "text": alert_text(update),
        "status": update.status,
        **({"note": update.note} if update.note else {}),
        "finding": update.finding.to_dict(),
        "verdict": inert(verdict),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tool": {"name": "nccl-doctor", "version": __version__},
    }


# ---- the command ---------------------------------------------------------------------------------

def run_watch(paths: list[str], *, webhook: str | None = None, interval: float = 1.0, once: bool = False,
              settle: float | None = None, select=None, ignore=None, min_severity: str = "info",
              out: IO[str] | None = None, stall_after: float = STALL_AFTER) -> int:
    """Follow ``paths`` until interrupted (SIGINT/SIGTERM: exit 0), or until stdin ends when only
    ``-`` is watched. ``once``: read what is there, report every finding, exit like ``analyze``
    (0, 1 with findings at warning or above, 2 with nothing to analyse).

    ``settle`` (default ``max(1, 3 * interval)`` seconds): a finding is reported once it has stayed
    the same that long, so that a cascade of timeouts over many ranks gives one alert; a reported
    finding that stayed gone that long is sent again as ``"resolved"``. ``stall_after``: the floor of
    the stall threshold (ST1), seconds without progress.

    With ``webhook``, alerts still queued at the end are delivered within a deadline; when some
    could not be, stderr says how many and why, and the exit status is 2.
    """
    if interval <= 0:
        raise ValueError("--interval must be a positive number of seconds")
    sender = WebhookSender(webhook) if webhook else None
    try:
        status = _follow(paths, sender, interval=interval, once=once, settle=settle, select=select,
                         ignore=ignore, min_severity=min_severity, out=out, stall_after=stall_after)
    finally:
        delivered = sender is None or sender.close()
    return status if delivered else 2


def _follow(paths: list[str], sender: WebhookSender | None, *, interval: float, once: bool,
            settle: float | None, select, ignore, min_severity: str, out: IO[str] | None,
            stall_after: float) -> int:
    out = out or sys.stdout
    analyzer = Analyzer(select=select, ignore=ignore, min_severity=min_severity,
                        settle=max(1.0, 3 * interval) if settle is None else settle, stall_after=stall_after)
    watcher = Watcher(paths, analyzer)

    def emit(final: bool = False) -> None:
        for update in analyzer.updates(final=final):
            payload = alert_payload(update, analyzer.report().verdict)
            if sender is not None:
                sender.send(payload)
            else:
                out.write(json.dumps(payload, ensure_ascii=False) + "\n")
                out.flush()

    stop = threading.Event()
    restore = _on_signals(stop)
    try:
        if once:
            watcher.poll()
            while watcher.stdin is not None and not watcher.stdin.eof.wait(interval) and not stop.is_set():
                watcher.poll()
            watcher.poll()
            status = analyzer.report().exit_status  # InputError when nothing is analysable: exit 2
            emit(final=True)
            return status
        if not analyzer.sources and not watcher.poll():
            sys.stderr.write(f"nccl-doctor: watching {', '.join(paths)} (nothing to read yet)\n")
        next_analysis = 0.0
        while not stop.is_set():
            watcher.poll()
            if time.monotonic() >= next_analysis:  # on huge jobs, analyse at most 1/4 of the time
                t0 = time.monotonic()
                emit()
                next_analysis = t0 + 4 * (time.monotonic() - t0)
            if watcher.finished:
                emit(final=True)
                return analyzer.report().exit_status if analyzer.sources else 0
            stop.wait(interval)
        emit(final=True)
        return 0
    except KeyboardInterrupt:
        emit(final=True)
        return 0
    finally:
        restore()


def _on_signals(stop: threading.Event):
    """SIGTERM (and SIGINT) end the loop cleanly: pending alerts are still delivered."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for s in old:
        signal.signal(s, lambda *_: stop.set())

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, h)

    return restore


__all__ = ["Watcher", "WebhookSender", "alert_payload", "alert_text", "run_watch"]
