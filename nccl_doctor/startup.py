"""The settings each writer of a file printed as it started: lines with a value among its first lines.

A job's own start-up banner is where a rank that was built or configured differently shows it, often
nowhere else: "comm hook: none (built-in all-reduce)" where the other ranks print "comm hook:
powerSGD_hook", "validation shard valid-00001-of-00003: 40 records" where the others have 64. No format
pattern knows such lines (they are the job's own words), so they are not events: the scan keeps a few
per writer (lines with a number or a "key: value"), from the file's first HEAD_BYTES, for
evidence.oddsetting to compare across ranks; ``setting_of`` reads a "key: value" line there.

Bounded: at most MAX_LINES lines of the head are looked at and PER_WRITER settings kept per writer,
each line capped; the head is left once every writer is full and QUIET_LINES lines brought no new one
(a per-rank log of step lines costs a few dozen lines, not MAX_LINES).
"""

from __future__ import annotations

import re

from .events import MAX_TEXT
from .launchers import LauncherStripper
from .reading import clean_line
from .records import split_glued

#: Bytes of the file's head looked at, lines of it, and settings kept per writer.
HEAD_BYTES = 32 << 10
MAX_LINES = 200
PER_WRITER = 16
#: Lines with no new writer after which a head whose every writer is full is left.
QUIET_LINES = 16
#: The key: the run of words right before ": " (letters first; no brackets, pipes or colons in it).
_KEY = re.compile(r"[A-Za-z][\w .,/()-]{0,60}$")

#: A heading that names the rank whose settings follow, indented: "rank 2/4 config:", "[rank 1] args:".
_HEADING = re.compile(r"\W{0,3}(?:[Rr]ank|RANK)[ _-]?(\d{1,7})(?:/\d{1,7})?\b[^:]{0,60}:\s*$")
_VALUE = re.compile(r"\d|: ")
#: A library's own line, not the job's: glog's "W1128 01:21:51.852 socket.cpp:469] ...", a frame, an
#: exception ("torch.distributed.DistStoreError: wait timeout after 20000ms, keys: ...").
_LIBRARY = re.compile(r"\s*(?:\[?[IWEF]\d{4} \d\d:\d\d|File \"|[A-Za-z_][\w.]{0,80}(?:Error|Exception|Warning|Interrupt)\b:)")


def setting_of(text: str) -> tuple[str, str] | None:
    """("comm hook", "none (built-in all-reduce)") from "comm hook: none (built-in all-reduce)"."""
    i = text.find(": ")
    if i < 1 or i > 120:
        return None
    m = _KEY.search(text, 0, i)
    if m is None:
        return None
    key = m.group(0).strip(" .,-")
    value = text[i + 2:].strip()[:200]
    if not key or not value or len(key.split()) > 6:
        return None
    return key, value


def head_window(chunk: bytes, whole: bool) -> bytes:
    """The complete lines among the first HEAD_BYTES (``whole``: ``chunk`` is all the file has)."""
    window = chunk[:HEAD_BYTES]
    if not (whole and len(chunk) <= HEAD_BYTES):
        window = window[:window.rfind(b"\n") + 1]
    return window


def startup_settings(window: bytes, stripper: LauncherStripper) -> dict:
    """writer key (None, ("rank", r), ("local_rank", l)) -> its first lines with a value, in line order:
    (line number, its text without launcher prefixes)."""
    out: dict = {}
    failed: set = set()  # writers that printed a traceback
    block = None  # the rank a heading line named ("rank 2/4 config:"), for the indented lines under it
    newest = 0  # the line that brought the latest new writer
    for n, raw in enumerate(window.split(b"\n")[:MAX_LINES], 1):
        if n - newest > QUIET_LINES and out and all(len(v) >= PER_WRITER for v in out.values()):
            break  # every writer is full and no new one came for a while (a log of steps: a few dozen lines)
        if b"NCCL" in raw:  # NCCL's own INFO lines are read as events
            continue
        for rec in split_glued(clean_line(raw)):
            lf, rest = stripper.strip(rec)
            key = ("rank", lf["rank"]) if "rank" in lf else ("local_rank", lf["local_rank"]) \
                if "local_rank" in lf else None
            if key is None and block is not None and rec[:1] in (" ", "\t"):
                key = block  # an indented line under a heading that names its rank
            else:
                head = _HEADING.match(rest) if key is None else None
                block = ("rank", int(head.group(1))) if head is not None else None
            if rest.startswith("Traceback (most recent call last)"):
                failed.add(key)  # what follows is its failure, not its settings
            if key in failed or not _VALUE.search(rest) or _LIBRARY.match(rest):
                continue
            kept = out.get(key)
            if kept is None:
                kept = out[key] = []
                newest = n
            if len(kept) < PER_WRITER:
                kept.append((n, rest.strip()[:MAX_TEXT // 2]))
    return out
