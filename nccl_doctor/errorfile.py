"""torchelastic's error file of a worker (``@record`` / ``--run-path``: ``<log dir>/.../attempt_<k>/<local
rank>/error.json``): ``{"message": {"message": "RuntimeError: ...", "extraInfo": {"py_callstack":
"Traceback ...", "timestamp": "1795847282"}}}``. When torchrun's failure table lists one worker only
(``<NO_OTHER_FAILURES>``: a function entrypoint stops at its first failed child), the other workers'
errors are in these files alone. Read as the traceback it holds (its lines, each at the file's one
line), in the log-dir folder whose local rank is the worker's.
"""

from __future__ import annotations

import json

#: How torchelastic starts an error file (errors/error_handler.py writes it with json.dump).
_HEAD = b'{"message": {"message": '
#: Largest error file read (a traceback; a bigger one is no such file).
ERROR_FILE_MAX = 4 << 20


def looks_like(head: bytes) -> bool:
    return head.startswith(_HEAD)


def looks_like_file(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return looks_like(fh.read(len(_HEAD)))
    except OSError:
        return False


def error_lines(data: bytes) -> tuple[bytes, list[int]] | None:
    """The traceback the error file holds as text lines (its message when it holds no traceback), and
    the file line of each (all 1: the file is one line of JSON); None when it is no error file."""
    if len(data) > ERROR_FILE_MAX:
        return None
    try:
        doc = json.loads(data)
        msg = doc["message"]
        text = msg["extraInfo"].get("py_callstack") if isinstance(msg.get("extraInfo"), dict) else None
        if not isinstance(text, str) or not text.strip():
            text = msg.get("message")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if not isinstance(text, str):
        return None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"), [1] * len(lines)
