"""Log records exported from a search UI, a cloud CLI or a chat as JSON: Splunk's JSON export (one
``{"preview": false, "offset": N, "result": {"_raw": ..., "_time": ..., "host": ...}}`` per line) and
``aws logs filter-log-events`` (one document, its ``events`` each a ``logStreamName``, a ``timestamp``
in ms and a ``message``: a Container Insights record ``{"log": ..., "kubernetes": {"pod_name": ...}}``
or a line as written), and a Slack export's channel file (messages whose text holds a pasted log,
in code fences, Slack-escaped).

As csvexport does for CSV, such a file is read as the log its records came from: each line of a
record's text becomes one logcli-style line carrying its time and pod or host (a Slack message's pasted
lines stay as written), oldest first, and each keeps the number of the file line it came from (``line_map``).
An asciinema recording is read as the terminal's output, line by line. Bounded: a file larger than
JSON_MAX is not converted; a file that is no such export is read as it is.
"""

from __future__ import annotations

import json
import re
import time

from .csvexport import group_by_writer, logcli_line, pod_of
from .timeparse import parse_iso

#: Largest export converted (parsed whole, in memory).
JSON_MAX = 64 << 20
_SPLUNK = b'{"preview":'
_CLOUDWATCH_KEYS = (b'"events"', b'"logStreamName"')


def export_kind(head: bytes) -> str | None:
    """"splunk", "cloudwatch" or "slack" when the first bytes start such an export, else None."""
    start = head.lstrip()
    if start.startswith(_SPLUNK):
        return "splunk"
    if start.startswith(b"{") and all(k in head for k in _CLOUDWATCH_KEYS):
        return "cloudwatch"
    if start.startswith(b"[") and _SLACK_MESSAGE.search(head) is not None and b'"text"' in head:
        return "slack"
    if start.startswith(b'{"version":') and b'"width"' in head.split(b"\n", 1)[0]:
        return "asciinema"
    return None


def _asciinema(data: bytes) -> tuple[bytes, list[int]] | None:
    """An asciinema recording (.cast: a header line, then ``[time, "o", "text"]`` events that cut lines
    anywhere): the terminal's output joined and cut at its own line ends, each line at the file line of
    the event it began in."""
    out: list[str] = []
    line_map: list[int] = []
    pending, began = "", 0
    for n, raw in enumerate(data.split(b"\n")[1:], 2):
        if not raw.strip():
            continue
        try:
            ev = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not (isinstance(ev, list) and len(ev) == 3 and ev[1] == "o" and isinstance(ev[2], str)):
            continue  # (input, resize and marker events: no output)
        parts = ev[2].split("\n")
        for i, part in enumerate(parts):
            if not pending:
                began = n
            pending += part
            if i < len(parts) - 1:  # (a line end: the line is complete)
                if pending.strip():
                    out.append(pending.rstrip("\r"))
                    line_map.append(began)
                pending = ""
    if pending.strip():
        out.append(pending)
        line_map.append(began)
    return (("\n".join(out) + "\n").encode("utf-8", "surrogatepass"), line_map) if out else None


#: A Slack export's channel file: a JSON array of messages ("type": "message").
_SLACK_MESSAGE = re.compile(rb'"type"\s*:\s*"message"')
#: Slack's escapes in a message's text (its mrkdwn), and a code fence.
_SLACK_ESCAPES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))
_FENCE = re.compile(r"^```|```$")


def _slack(data: bytes) -> tuple[bytes, list[int]] | None:
    """A Slack export's messages (one channel's day): the text pasted in them, line by line, as written
    (a pasted log's lines carry their own times and writers; who pasted them is no writer of the job)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, list):
        return None
    at = _key_lines(data, b'"text"')
    out: list[str] = []
    line_map: list[int] = []
    k = 0
    for msg in doc:
        if not isinstance(msg, dict) or not isinstance(msg.get("text"), str):
            continue
        where = at[k] if k < len(at) else 1
        k += 1
        text = msg["text"]
        for old, new in _SLACK_ESCAPES:
            text = text.replace(old, new)
        for part in text.split("\n"):
            part = _FENCE.sub("", part.rstrip("\r"))
            if part.strip():
                out.append(part)
                line_map.append(where)
    return (("\n".join(out) + "\n").encode("utf-8"), line_map) if out else None


def _records(rows: list[tuple[int, float | None, dict, str]]) -> tuple[bytes, list[int]]:
    """(file line, time, the record's other keys, its text) rows as logcli-style lines, oldest first."""
    dated = [t for _line, t, _keys, _text in rows if t is not None]
    if len(dated) >= 2 and dated[0] > dated[-1]:
        rows = rows[::-1]  # (newest first, as the search listed them)
    rows = group_by_writer(rows, lambda row: (row[2].get("kubernetes.pod_name"), row[2].get("host")))  # (see csvexport)
    out: list[str] = []
    line_map: list[int] = []
    for line, t, keys, text in rows:
        pod = keys.get("kubernetes.pod_name")
        labels = {"pod": pod} if pod else {"host": keys.get("host", "")}
        for part in text.split("\n"):
            if part.strip():
                out.append(logcli_line(t, labels, part.rstrip("\r")))
                line_map.append(line)
    return ("\n".join(out) + "\n").encode("utf-8"), line_map


def _splunk(data: bytes) -> tuple[bytes, list[int]] | None:
    rows = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            res = json.loads(raw).get("result")
        except (ValueError, AttributeError, RecursionError):
            return None
        if not isinstance(res, dict) or not isinstance(res.get("_raw"), str):
            continue
        keys = {"timestamp": str(res.get("_time") or ""), "host": str(res.get("host") or "")}
        pod = pod_of(str(res.get("source") or ""))
        if pod is not None:
            keys["kubernetes.pod_name"] = pod
        rows.append((n, parse_iso(keys["timestamp"]), keys, res["_raw"]))
    return _records(rows) if rows else None


def _cloudwatch(data: bytes) -> tuple[bytes, list[int]] | None:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    events = doc.get("events") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return None
    at = _key_lines(data, b'"message"')
    rows = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("message"), str):
            continue
        ms = ev.get("timestamp")
        t = ms / 1000.0 if isinstance(ms, (int, float)) and not isinstance(ms, bool) else None
        keys = {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f"{t % 1:.3f}"[1:] if t else "",
                "host": str(ev.get("logStreamName") or "")}
        text = ev["message"]
        try:
            inner = json.loads(text) if text.startswith("{") else None
        except (ValueError, RecursionError):
            inner = None
        if isinstance(inner, dict) and isinstance(inner.get("log"), str):
            pod = inner.get("kubernetes", {}).get("pod_name") if isinstance(inner.get("kubernetes"), dict) else None
            keys["host"] = str(pod or pod_of(keys["host"]) or keys["host"])
            text = inner["log"]
        else:
            keys["host"] = pod_of(keys["host"]) or keys["host"]
        rows.append((at[i] if i < len(at) else 1, t, keys, text))
    return _records(rows) if rows else None





def export_records(data: bytes) -> tuple[bytes, list[int]] | None:
    """The export's records as lines and the file line of each, or None."""
    kind = export_kind(data[:8192])
    if kind == "splunk":
        return _splunk(data)
    if kind == "cloudwatch":
        return _cloudwatch(data)
    if kind == "slack":
        return _slack(data)
    if kind == "asciinema":
        return _asciinema(data)
    return None


def _key_lines(data: bytes, key: bytes) -> list[int]:
    """The file lines on which an indented JSON document's objects give ``key`` (one per object, in order:
    the AWS CLI's and Slack's layout), where a record's evidence points."""
    return [n for n, raw in enumerate(data.split(b"\n"), 1) if raw.lstrip().startswith(key)]
