"""Webhook delivery for ``nccl-doctor watch --webhook URL``: never blocks reading, never loses an
alert without saying so.

Each alert is one POST of a JSON body, sent in order from a background thread:

* every request has a hard deadline (``timeout`` seconds for connect, send, headers and body
  together): a watchdog shuts the socket down when it passes, so an endpoint that trickles or never
  finishes its answer cannot hold the sender;
* the answer's body is read up to ``MAX_BODY`` bytes, never more;
* redirects are refused (urllib would turn a redirected POST into a GET, or re-POST to another
  host): the URL to give is the final one, and the message says where it pointed;
* connection errors, timeouts, 5xx, 408 and 429 are retried with exponential back-off;
  ``Retry-After`` is honoured up to ``max_retry_after`` seconds; other 4xx are not retried;
* :meth:`WebhookSender.close` delivers what is still queued within a deadline, then says on stderr
  how many alerts were not delivered and why, and returns False (``watch`` then exits non-zero).

Standard library only.
"""

from __future__ import annotations

import http.client
import json
import math
import queue
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import IO, Any

from . import __version__
from .report.safe import plain

#: Bytes of an answer's body that are read (the status is what matters; chat services answer "ok").
MAX_BODY = 64 << 10


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: the 3xx comes back as an HTTPError the sender reports."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D401 - urllib API
        return None


def _tracked(cls: type, on_connect) -> type:
    """A connection class that hands its socket to ``on_connect`` (the watchdog needs it)."""

    class Tracked(cls):  # type: ignore[misc, valid-type]
        def connect(self) -> None:
            super().connect()
            on_connect(self.sock)

    return Tracked


class WebhookSender:
    """POSTs JSON payloads from a background thread, in order (see the module docstring).

    :meth:`send` never blocks: when the queue is full the oldest payload is dropped and counted as
    not delivered.
    """

    def __init__(self, url: str, *, timeout: float = 10.0, tries: int = 8, backoff: float = 0.5,
                 max_backoff: float = 30.0, max_retry_after: float = 60.0, maxsize: int = 1000,
                 log: IO[str] | None = None):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--webhook must be an http:// or https:// URL, not {plain(url, 200)!r}")
        self.url, self.timeout, self.tries = url, timeout, tries
        self.backoff, self.max_backoff, self.max_retry_after = backoff, max_backoff, max_retry_after
        self.log = log
        self.sent = self.delivered = self.failed = 0
        self.last_error = ""
        self._queue: queue.Queue[dict | None] = queue.Queue(maxsize)
        self._deadline: float | None = None
        self._closing = threading.Event()  # wakes a back-off sleep when close() sets the deadline
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        opener = urllib.request.build_opener(_Redirects())
        for handler in opener.handlers:  # urllib's own HTTP(S) handlers, with a tracked connection class
            if isinstance(handler, (urllib.request.HTTPHandler, urllib.request.HTTPSHandler)):
                do_open = handler.do_open
                handler.do_open = (lambda h, req, _d=do_open, **kw: _d(_tracked(h, self._connected), req, **kw))
        self._opener = opener
        self._thread = threading.Thread(target=self._run, name="nccl-doctor-webhook", daemon=True)
        self._thread.start()

    # ---- the caller's side
    def send(self, payload: dict) -> None:
        self.sent += 1
        while True:
            try:
                self._queue.put_nowait(payload)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    self._fail("webhook queue full: dropped the oldest alert")
                except queue.Empty:
                    pass

    def close(self, wait: float = 10.0) -> bool:
        """Deliver what is queued within ``wait`` seconds; say on stderr what was not delivered.
        True when every alert sent was delivered."""
        self._deadline = time.monotonic() + wait
        self._closing.set()
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass  # the worker sees the deadline and stops by itself
        self._thread.join(wait + 0.5)
        lost = self.sent - self.delivered
        if lost > 0:
            why = f": {self.last_error}" if self.last_error else ""
            if self._thread.is_alive() and not self.last_error:
                why = f": not delivered within {wait:g} s of exiting"
            self._note(f"{lost} of {self.sent} alert{'s' if self.sent != 1 else ''} not delivered to the webhook{why}")
        return lost <= 0

    # ---- the worker's side
    def _run(self) -> None:
        while True:
            payload = self._queue.get()
            if payload is None:
                return
            if self._past_deadline():
                self._fail("not delivered before the deadline at exit")
                continue
            if self._deliver(payload):
                self.delivered += 1

    def _past_deadline(self, extra: float = 0.0) -> bool:
        return self._deadline is not None and time.monotonic() + extra > self._deadline

    def _deliver(self, payload: dict) -> bool:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        delay = self.backoff
        for attempt in range(1, self.tries + 1):
            retry_after = None
            try:
                self._post(body)
                return True
            except urllib.error.HTTPError as exc:
                code = exc.code
                if 300 <= code < 400:
                    where = plain(exc.headers.get("Location", "") if exc.headers else "", 200)
                    self._fail(f"webhook answered HTTP {code} (a redirect{' to ' + where if where else ''}); "
                               "redirects are not followed: give the final URL")
                    return False
                if 400 <= code < 500 and code not in (408, 429):
                    self._fail(f"webhook refused the alert: HTTP {code} {plain(exc.reason, 100)}")
                    return False
                retry_after = _seconds(exc.headers.get("Retry-After") if exc.headers else None)
                why = f"HTTP {code}"
            except _Cut:
                why = f"no complete answer within {self.timeout:g} s"
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
                why = plain(str(getattr(exc, "reason", exc)) or type(exc).__name__, 200)
            wait = min(self.max_retry_after, retry_after) if retry_after is not None else delay
            if attempt == self.tries or self._past_deadline(wait) or not self._pause(wait):
                self._fail(f"webhook delivery failed after {attempt} attempt{'s' if attempt > 1 else ''}: {why}"
                           + (f" (Retry-After {retry_after:g} s)" if retry_after else ""))
                return False
            delay = min(self.max_backoff, delay * 2)
        return False

    def _pause(self, wait: float) -> bool:
        """Sleep ``wait`` seconds before the next attempt; False when close() set a deadline that
        the pause would pass (then the alert is given up instead of waited for)."""
        end = time.monotonic() + wait
        if not self._closing.is_set():
            self._closing.wait(wait)  # close() wakes us to check the rest of the pause against its deadline
        rest = end - time.monotonic()
        if self._past_deadline(max(0.0, rest)):
            return False
        if rest > 0:
            time.sleep(rest)
        return True

    def _post(self, body: bytes) -> None:
        """One POST under a hard deadline: the watchdog shuts the socket down when it passes."""
        req = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": f"nccl-doctor/{__version__}"})
        cut = threading.Event()
        watchdog = threading.Timer(self.timeout, self._cut, args=(cut,))
        watchdog.daemon = True
        watchdog.start()
        try:
            # The socket's own timeout is a second net, just behind the watchdog's deadline.
            with self._opener.open(req, timeout=self.timeout + 1.0) as resp:
                try:  # the 2xx status says the alert was taken; the body is read only to free the connection
                    resp.read(MAX_BODY)
                except Exception:  # an endless or stalled body (cut by the watchdog): delivered all the same
                    pass
        except Exception:
            if cut.is_set():
                raise _Cut from None
            raise
        finally:
            watchdog.cancel()
            with self._lock:
                self._sock = None

    def _connected(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock

    def _cut(self, flag: threading.Event) -> None:
        flag.set()
        with self._lock:
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked read in the sender thread
            except OSError:
                pass

    def _fail(self, msg: str) -> None:
        self.failed += 1
        if msg != self.last_error:
            self._note(msg)
        self.last_error = msg

    def _note(self, msg: str) -> None:
        log = self.log or sys.stderr
        try:
            log.write(f"nccl-doctor: {msg}\n")
            log.flush()
        except (OSError, ValueError, AttributeError):
            pass  # stderr closed: nothing more can be said


class _Cut(Exception):
    """The request's deadline passed and the watchdog cut it."""


def _seconds(value: Any) -> float | None:
    """Retry-After in seconds (an HTTP date or garbage: None; negative: 0; NaN: None)."""
    try:
        s = float(value) if value else None
    except (TypeError, ValueError):
        return None
    if s is None or math.isnan(s):
        return None
    return max(0.0, s)


__all__ = ["MAX_BODY", "WebhookSender"]
