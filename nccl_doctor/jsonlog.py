"""Structured log records: one JSON object per line, or one logfmt record (``ts=... level=info rank=3
msg="step 10"``: structlog's key-value renderer, logrus, Go services), keys in ``parsers/launchers.toml``
(``[json_record]``).

A record is decoded into what a launcher prefix would give (rank, local rank, host, pid, time) and
the text the patterns read: its message (the object's own text when the message is one word, an
event's name); at error level, the exception it carries (the last line of its traceback, in an
exception key or in the message itself) or else the message as a printed ``ERROR: ...`` line, so that it is that writer's
own error as a plain log's would be. Anything else (a truncated line, an array, an object with no
message) is not a record and stays the line it is. Bounded: long lines are not decoded, and JSON
nested too deep to decode is no record.
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from functools import lru_cache
from pathlib import Path

from .resources import parsers_dir

#: Longest line decoded (a record with a long traceback fits; a megabyte of JSON is not a log line).
MAX_LINE = 256 << 10
#: Longest message or exception line kept (what a pattern reads of one record).
MAX_TEXT = 4000


@lru_cache(maxsize=4)
def load_keys(directory: str | None = None) -> dict:
    path = Path(directory or parsers_dir()) / "launchers.toml"
    return tomllib.loads(path.read_text(encoding="utf-8")).get("json_record", {})


def _lookup(obj: dict, keys: list[str], accept=lambda v: v is not None):
    """The first value under ``keys`` that ``accept`` takes (a dotted key is a nested one)."""
    for key in keys:
        value = obj.get(key)
        if value is None and "." in key:  # "log.level": {"log": {"level": ...}}
            value = obj
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
        if value is not None and accept(value):
            return value
    return None


def _is_text(value) -> bool:
    return isinstance(value, str)


def _int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 10**10 else None
    if isinstance(value, str) and value.isdigit() and len(value) <= 10:
        return int(value)
    return None


def _time(value) -> str | None:
    """A record's time as an ISO text (timeparse reads it); epoch seconds (or milliseconds) too."""
    if isinstance(value, str):
        return value[:64]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        secs = value / 1000.0 if value > 1e11 else float(value)
        if not 0 < secs < 7.2e9:
            return None
        frac = f"{secs % 1:.6f}"[1:]
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + frac
    return None


def _last_line(exc) -> str:
    """The exception line of a traceback held as one text (or as a list of lines)."""
    if isinstance(exc, list):
        exc = "\n".join(str(x) for x in exc[-50:])
    if not isinstance(exc, str):
        return ""
    lines = [ln.strip() for ln in exc[-64 * 1024:].splitlines() if ln.strip()]
    return lines[-1][:MAX_TEXT] if lines else ""


#: Launcher names a structured record is stripped as (its text is not its line: see scanner, fastscan).
RECORD_LAUNCHERS = ("json_record", "logfmt_record")
#: One logfmt pair: a key, then a bare value or a quoted one with backslash escapes (linear: no nesting).
#: structlog's KeyValueRenderer quotes as Python's repr does: 'text', its newlines as \n.
_PAIR = re.compile(r'([A-Za-z_@][\w.@-]{0,63})=("(?:[^"\\\n]|\\.){0,4000}"|\'(?:[^\'\\\n]|\\.){0,65536}\'|[^\s"\']{0,4000})(?:\s+|$)')
_REPR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}
#: What a logfmt line starts with: a key and its "=" (the gate in launchers.py).
LOGFMT_START = r"[A-Za-z_@][\w.@-]{0,63}=(?=\S)"


def decode_logfmt(text: str) -> tuple[dict, str] | None:
    """(launcher fields, the record's text) of a logfmt record: the whole line is key=value pairs
    (three at least), one of them a message or a step counter; else None (an environment dump, a plain
    line)."""
    if len(text) > MAX_LINE:
        return None
    obj: dict = {}
    pos, n = 0, len(text.rstrip())
    while pos < n:
        m = _PAIR.match(text, pos)
        if m is None:
            return None
        value = m.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        elif value.startswith("'"):
            value = re.sub(r"\\(.)", lambda e: _REPR_ESCAPES.get(e.group(1), e.group(1)), value[1:-1])
        obj.setdefault(m.group(1), value)
        pos = m.end()
    if len(obj) < 3:
        return None
    return _record(obj, text, "logfmt_record")


def decode(text: str) -> tuple[dict, str] | None:
    """(launcher fields, the record's text) of a JSON log record, or None when ``text`` is none."""
    if not text.startswith("{") or len(text) > MAX_LINE:
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("_source"), dict):
        obj = obj["_source"]  # a search hit exported from Elasticsearch / OpenSearch: the document it holds
    return _record(obj, text[1:], "json_record") if isinstance(obj, dict) else None


def _shipped_line(obj: dict, msg: str) -> bool:
    """A log shipper's record of a line a container wrote (docker's json-file "log", Fluent Bit's,
    Vector's "message" with the "stream" it came from): the line as written, one word included
    ("[1]:" heading torchrun's failure table), not a structured logger's event name."""
    return obj.get("log") is msg or obj.get("stream") in ("stdout", "stderr")


#: Keys of a record that count training progress (the event's name then says nothing more).
_COUNTER_KEYS = frozenset(("step", "iter", "iteration", "global_step"))


def _record(obj: dict, rest: str, name: str) -> tuple[dict, str] | None:
    """A decoded record's writer fields and text; ``rest``: what patterns read when its message is
    one word (the record's own keys, as a line would show them)."""
    keys = load_keys()
    msg = _lookup(obj, keys["message"], _is_text)
    if msg is None and name == "logfmt_record" and _COUNTER_KEYS.intersection(obj):
        msg = ""  # a metrics line of pairs only ("rank=2 step=4 loss=2.10"): the patterns read its keys
    if msg is None:
        return None
    fields: dict = {"launchers": [name]}
    for name in ("rank", "local_rank", "pid"):
        value = _lookup(obj, keys[name], lambda v: _int(v) is not None)
        if value is not None:
            fields[name] = _int(value)
    host = _lookup(obj, keys["host"], lambda v: isinstance(v, str) and 0 < len(v) <= 253)
    if host is not None:
        fields["host"] = host
    ts = _lookup(obj, keys["time"], lambda v: _time(v) is not None)
    if ts is not None:
        fields["ts"] = _time(ts)
    # (indentation kept: a shipper's "log" field is the line as written, a traceback's frame or a
    # failure table's row included)
    body = next((ln.rstrip() for ln in msg[:MAX_TEXT].splitlines() if ln.strip()), "")
    level = _lookup(obj, keys["level"], _is_text)
    if level is not None and level.upper() in keys["error_levels"]:
        # the exception line of the traceback it carries: in an exception key, or in the message itself
        # (Ray Train's worker logs: "Error in training function:\nTraceback ...")
        exc = _last_line(_lookup(obj, keys["exception"], _last_line)) \
            or (_last_line(msg) if "Traceback (most recent call last)" in msg[-64 * 1024:] else "")
        body = exc or (f"ERROR: {body}" if body else "")
    elif level is not None and level.upper() in keys.get("warning_levels", ()) and body and " " in body \
            and not _shipped_line(obj, msg):
        body = f"WARNING: {body}"  # (its level is the record's, as a printed line's would be its own words)
    elif (" " not in body or (_COUNTER_KEYS.intersection(obj) and not any(c.isdigit() for c in body))) \
            and not _shipped_line(obj, msg):
        # One word is an event's name ('"event": "step", "iter": 12, "loss": 2.09'), not what it
        # says: the patterns read the object's own keys, as in a line (training.toml's JSON counter);
        # so is a name with no number beside a counter of its own ("event='train step' step=6").
        body = rest
    elif _BARE_COUNTER.match(body) and not _shipped_line(obj, msg):
        # '"msg": "step 17", "loss": 2.0575, "step_time": 0.109': the counter in the message, its metrics in
        # keys beside it; read as the line a plain logger would print ("step 17 loss 2.0575 step_time 0.109")
        metrics = sorted(((k, v) for k, v in obj.items() if isinstance(v, int | float) and not isinstance(v, bool)
                          and k not in _WRITER_KEYS), key=lambda kv: kv[0] != "loss")[:8]
        body = " ".join([body, *(f"{k} {v}" for k, v in metrics)])
    return fields, body


#: A message that is a progress counter alone ("step 17", "iter 120", "Step 3/40").
_BARE_COUNTER = re.compile(r"(?:[Ss]tep|[Ii]ter(?:ation)?) \d{1,12}(?:/\d{1,12})?$")
#: Keys that say who wrote a record, not what it measured.
_WRITER_KEYS = frozenset(("rank", "local_rank", "world_size", "pid", "time", "ts", "timestamp", "created"))
