"""Webhook delivery never blocks and never loses an alert without saying so: local endpoints that
are slow, answer 429 with a huge Retry-After, send an endless body, or redirect."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from conftest import local_http_server

from nccl_doctor.webhook import MAX_BODY, WebhookSender

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "fixtures" / "real" / "019_mn3_timeout.log"


class _Endpoint(BaseHTTPRequestHandler):
    """Behaves as ``server.mode`` says; counts requests."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        srv = self.server
        with srv.lock:
            srv.requests += 1
        mode = srv.mode
        if mode == "slow":
            srv.release.wait(30)  # never answers while the sender waits
            return
        if mode == "429":
            self._answer(429, {"Retry-After": "100000000"})
        elif mode == "307":
            self._answer(307, {"Location": "http://127.0.0.1:1/elsewhere"})
        elif mode == "endless":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"x" * 4096
            try:
                while not srv.release.is_set():  # more than any reader should take
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    with srv.lock:
                        srv.sent += len(chunk)
            except OSError:
                pass  # the sender hung up: what it should do
        else:
            self._answer(200, {})

    def _answer(self, code: int, headers: dict[str, str]) -> None:
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def endpoint():
    with local_http_server(_Endpoint, requests=0, sent=0, mode="ok") as server:
        yield server


def test_slow_endpoint_is_cut_and_the_loss_is_said(endpoint):
    endpoint.mode = "slow"
    log = io.StringIO()
    sender = WebhookSender(endpoint.url, timeout=0.5, tries=2, backoff=0.1, log=log)
    sender.send({"text": "one"})
    assert sender.close(wait=10) is False
    assert sender.delivered == 0 and endpoint.requests == 2  # each try was cut, then it gave up
    assert "1 of 1 alert not delivered to the webhook" in log.getvalue()
    assert "no complete answer within 0.5 s" in log.getvalue()


def test_429_with_a_huge_retry_after_gives_up_at_the_deadline(endpoint):
    endpoint.mode = "429"
    log = io.StringIO()
    sender = WebhookSender(endpoint.url, timeout=2, log=log)
    for i in range(3):
        sender.send({"text": f"alert {i}"})
    assert sender.close(wait=1) is False  # Retry-After (capped at 60 s) cannot fit in the deadline
    msg = log.getvalue()
    assert "3 of 3 alerts not delivered" in msg and "HTTP 429" in msg and "Retry-After 1e+08 s" in msg
    assert endpoint.requests == 3  # one try each: no retry after 60 s fits before the deadline


def test_endless_body_is_read_up_to_the_limit_and_later_alerts_go_out(endpoint):
    endpoint.mode = "endless"
    log = io.StringIO()
    sender = WebhookSender(endpoint.url, timeout=5, log=log)
    sender.send({"text": "one"})
    sender.send({"text": "two"})
    assert sender.close(wait=20) is True, log.getvalue()
    assert sender.delivered == 2 and endpoint.requests == 2
    assert log.getvalue() == ""
    assert endpoint.sent < 1000 * MAX_BODY  # it stopped reading (the server would go on for ever)


def test_redirect_is_refused_not_retried(endpoint):
    endpoint.mode = "307"
    log = io.StringIO()
    sender = WebhookSender(endpoint.url, timeout=2, log=log)
    sender.send({"text": "one"})
    assert sender.close(wait=5) is False
    assert endpoint.requests == 1
    assert "HTTP 307 (a redirect to http://127.0.0.1:1/elsewhere); redirects are not followed" in log.getvalue()


def test_watch_says_what_it_could_not_deliver_and_exits_non_zero(tmp_path, endpoint):
    endpoint.mode = "429"
    shutil.copy(LOG, tmp_path / "rank-0.log")
    r = subprocess.run([sys.executable, "-m", "nccl_doctor", "watch", "--once", "--webhook", endpoint.url,
                        str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert "not delivered to the webhook" in r.stderr and "HTTP 429" in r.stderr
    assert "Traceback" not in r.stderr


def test_watch_delivers_and_exits_as_analyze_when_the_endpoint_answers(tmp_path, endpoint):
    shutil.copy(LOG, tmp_path / "rank-0.log")
    r = subprocess.run([sys.executable, "-m", "nccl_doctor", "watch", "--once", "--webhook", endpoint.url,
                        str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1 and r.stderr == "", r.stderr
    assert endpoint.requests >= 1
