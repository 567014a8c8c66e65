"""Log lines exported from a search UI as CSV (Kibana's Discover "CSV report", Splunk's and Datadog's
exports, Grafana's "Download CSV"): one row per log record, the record's text in a message column
(a traceback shipped as one record is one quoted field over several lines), its time, pod or host
beside it, often newest first.

Such a file is read as the log the rows came from: each line of a row's message becomes one JSON
record (the row's other columns as its keys, read by ``jsonlog`` as a shipper's record is: its pod or
host names the writer, its time dates it), rows oldest first. Every record line keeps the number of
the file's own line it came from (``line_map``), which the report quotes. Bounded: a file larger than
CSV_MAX is read as plain text; a file that is no such export (no header with a message column, rows
that do not parse) is too.
"""

from __future__ import annotations

import csv
import io
import json
import re

from .timeparse import parse_iso

#: Largest export turned into records (read whole, in memory); a larger one is read as plain text.
CSV_MAX = 64 << 20
#: Longest field read (a traceback shipped as one record fits).
_FIELD_MAX = 4 << 20
#: The message column, by name (any case): what the record says.
_MESSAGE = ("message", "msg", "log", "_raw", "line", "text", "@message", "content")
#: A time column, by name (any case).
_TIME = ("@timestamp", "timestamp", "_time", "time", "date", "ts", "datetime")
#: Kibana's display format, "Nov 28, 2026 @ 04:33:10.169".
_KIBANA_TIME = re.compile(r"^([A-Z][a-z]{2}) (\d{1,2}), (\d{4}) @ (\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)$")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                                       "Dec"), 1)}


def export_header(head: bytes) -> list[str] | None:
    """The columns of a CSV export, judged on its first line: two columns at least, one of them a
    message column and one a time column; else None."""
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    if b"," not in first or len(first) > 4096:
        return None
    try:
        cols = next(csv.reader([first.decode("utf-8-sig")]))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return None
    names = [c.strip().lower() for c in cols]
    if len(cols) < 2 or not any(n in _MESSAGE for n in names) or not any(n in _TIME for n in names):
        return None
    return cols


def iso_time(value: str) -> str:
    """A time as an ISO text (Kibana's display format turned round); others as they are."""
    m = _KIBANA_TIME.match(value.strip())
    if m is None or m.group(1) not in _MONTHS:
        return value
    mon, day, year, hms = _MONTHS[m.group(1)], int(m.group(2)), m.group(3), m.group(4)
    return f"{year}-{mon:02d}-{day:02d}T{hms}"


def export_records(data: bytes) -> tuple[bytes, list[int]] | None:
    """The export's rows as JSON record lines, oldest first, and for each such line the file line it
    came from; None when the data do not parse as an export."""
    try:
        text = data.decode("utf-8-sig", "replace")
    except UnicodeDecodeError:  # (not raised with "replace": kept for clarity)
        return None
    limit = csv.field_size_limit()
    csv.field_size_limit(_FIELD_MAX)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader, None)
        if not header:
            return None
        names = [c.strip().lower() for c in header]
        msg_at = next(i for i, n in enumerate(names) if n in _MESSAGE)
        time_at = next(i for i, n in enumerate(names) if n in _TIME)
        rows: list[tuple[int, list[str]]] = []  # (the file line the row starts on, its fields)
        start = reader.line_num + 1
        for row in reader:
            if len(row) == len(header):
                rows.append((start, row))
            start = reader.line_num + 1
    except (csv.Error, StopIteration):
        return None
    finally:
        csv.field_size_limit(limit)
    if not rows:
        return None
    times = [parse_iso(iso_time(row[time_at])) for _start, row in rows]
    dated = [t for t in times if t is not None]
    if len(dated) >= 2 and dated[0] > dated[-1]:
        rows.reverse()  # (newest first, as the UI listed them: read oldest first, each record's lines in order)
    out: list[str] = []
    line_map: list[int] = []
    keys = [c.strip() for c in header]
    for start, row in rows:
        # the columns as keys, the time and the message under the names jsonlog reads first
        record = {k: v for i, (k, v) in enumerate(zip(keys, row, strict=True)) if i not in (msg_at, time_at)}
        record["timestamp"] = iso_time(row[time_at])
        lines = row[msg_at].split("\n")
        # (the message is the row's last multi-line field as a rule: its lines end the row's lines)
        first = start + max(0, sum(f.count("\n") for f in row) - (len(lines) - 1))
        for k, line in enumerate(lines):
            if not line.strip():
                continue
            record["message"] = line.rstrip("\r")
            out.append(json.dumps(record, ensure_ascii=False))
            line_map.append(first + k)
    return ("\n".join(out) + "\n").encode("utf-8"), line_map
