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
import urllib.error
import urllib.request
from typing import IO, Any

from . import __version__
from .discover import InputFile, Rediscovery
from .evidence.progress import STALL_AFTER
from .incremental import Analyzer, Update

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
        logs = [f for f in files if f.path not in dumps]
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
    (for a resolved finding: why, and what it was)."""
    f = update.finding
    if update.status == "resolved":
        return "\n".join([f"nccl-doctor: RESOLVED {f.rule} {f.title}", update.note or "no longer found",
                          f"was: {f.summary}"])
    lines = [f"nccl-doctor: {f.severity.value.upper()} {f.rule} {f.title} ({update.status})", f.summary]
    who = []
    if f.ranks:
        who.append("ranks " + ", ".join(map(str, f.ranks[:16])) + (" ..." if len(f.ranks) > 16 else ""))
    if f.hosts:
        who.append("hosts " + ", ".join(f.hosts[:8]) + (" ..." if len(f.hosts) > 8 else ""))
    if who:
        lines.append("; ".join(who))
    if f.evidence:
        ev = f.evidence[0]
        lines.append(f"evidence: {ev.file}:{ev.line}  {ev.text[:300]}")
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
        "verdict": verdict,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tool": {"name": "nccl-doctor", "version": __version__},
    }


class WebhookSender:
    """POSTs JSON payloads from a background thread, in order, retrying with exponential back-off.

    :meth:`send` never blocks (when the queue is full the oldest payload is dropped, with a note);
    :meth:`close` delivers what is queued within a deadline. Client errors (4xx but 408 and 429)
    are not retried; connection errors, timeouts, 5xx, 408 and 429 are (``Retry-After`` honoured).
    """

    def __init__(self, url: str, *, timeout: float = 10.0, tries: int = 8, backoff: float = 0.5,
                 max_backoff: float = 30.0, maxsize: int = 1000, log: IO[str] | None = None):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--webhook must be an http:// or https:// URL, not {url!r}")
        self.url, self.timeout, self.tries = url, timeout, tries
        self.backoff, self.max_backoff = backoff, max_backoff
        self.log = log or sys.stderr
        self.delivered = self.failed = 0
        self._queue: queue.Queue[dict | None] = queue.Queue(maxsize)
        self._deadline: float | None = None
        self._thread = threading.Thread(target=self._run, name="nccl-doctor-webhook", daemon=True)
        self._thread.start()

    def send(self, payload: dict) -> None:
        while True:
            try:
                self._queue.put_nowait(payload)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    self.failed += 1
                    self._note("webhook queue full: dropped the oldest alert")
                except queue.Empty:
                    pass

    def close(self, wait: float = 10.0) -> bool:
        """Deliver what is queued (at most ``wait`` seconds); True when everything was delivered."""
        self._deadline = time.monotonic() + wait
        try:
            self._queue.put(None, timeout=wait)
        except queue.Full:
            pass
        self._thread.join(wait + 1.0)
        return not self._thread.is_alive() and self.failed == 0

    def _run(self) -> None:
        while True:
            payload = self._queue.get()
            if payload is None:
                return
            if self._deliver(payload):
                self.delivered += 1
            else:
                self.failed += 1

    def _deliver(self, payload: dict) -> bool:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        delay = self.backoff
        for attempt in range(1, self.tries + 1):
            retry_after = None
            try:
                req = urllib.request.Request(self.url, data=body, method="POST", headers={
                    "Content-Type": "application/json", "User-Agent": f"nccl-doctor/{__version__}"})
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    resp.read()
                return True
            except urllib.error.HTTPError as exc:
                if 400 <= exc.code < 500 and exc.code not in (408, 429):
                    self._note(f"webhook refused the alert: HTTP {exc.code} {exc.reason}")
                    return False
                retry_after = _seconds(exc.headers.get("Retry-After") if exc.headers else None)
                why = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError, ValueError) as exc:
                why = str(getattr(exc, "reason", exc))
            wait = min(self.max_backoff, retry_after if retry_after is not None else delay)
            if attempt == self.tries or (self._deadline is not None and time.monotonic() + wait > self._deadline):
                self._note(f"webhook delivery failed after {attempt} attempt(s): {why}")
                return False
            time.sleep(wait)
            delay = min(self.max_backoff, delay * 2)
        return False

    def _note(self, msg: str) -> None:
        try:
            self.log.write(f"nccl-doctor: {msg}\n")
            self.log.flush()
        except (OSError, ValueError):
            pass


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


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
    """
    if interval <= 0:
        raise ValueError("--interval must be a positive number of seconds")
    out = out or sys.stdout
    analyzer = Analyzer(select=select, ignore=ignore, min_severity=min_severity,
                        settle=max(1.0, 3 * interval) if settle is None else settle, stall_after=stall_after)
    watcher = Watcher(paths, analyzer)
    sender = WebhookSender(webhook) if webhook else None

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
        if sender is not None:
            sender.close()


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
