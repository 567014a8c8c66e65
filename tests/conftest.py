"""Shared test helpers: repository paths, the synthetic job generator, a local HTTP server."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REAL = FIXTURES / "real"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def real_dir() -> Path:
    return REAL


@contextmanager
def local_http_server(handler: type, **state: Any) -> Iterator[Any]:
    """A threaded HTTP server on 127.0.0.1 serving ``handler``, with ``state`` as attributes, a
    ``lock``, a ``release`` event set at the end (handlers that hold a request wait on it) and its
    ``url``; shut down on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.lock, server.release = threading.Lock(), threading.Event()
    for k, v in state.items():
        setattr(server, k, v)
    server.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


def has_hyperscan() -> bool:
    """The fast scan path needs Hyperscan's literal hits (its tests are skipped without the wheel)."""
    from nccl_doctor.prefilter import Prefilter

    try:
        Prefilter(["x"], engine="hyperscan")
        return True
    except RuntimeError:
        return False
