"""Log lines exported from a search UI as CSV (Kibana's Discover "CSV report", Splunk's and Datadog's
exports, Grafana's "Download CSV"): one row per log record, the record's text in a message column
(a traceback shipped as one record is one quoted field over several lines), its time, pod or host
beside it, often newest first.

Such a file is read as the log the rows came from: each line of a row's message becomes one line as
Loki's logcli prints it (``logcli_line``: the row's time and its pod or host before the text, read by
launchers.toml's ``loki_labels``), each writer's rows together, oldest first. Every line keeps the number
of the file's own line it came from (``line_map``), which the report quotes. Bounded: a file larger than
CSV_MAX is read as plain text; a file that is no such export (no header with a message column, rows
that do not parse) is too.
"""

from __future__ import annotations

import csv
import io
import re
import time

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


#: A container's log file as Kubernetes names it, in a log stream's or a source's name: the pod is the
#: writer ("...var.log.containers.<pod>_<namespace>_<container>-<id>.log", "/var/log/pods/<ns>_<pod>_<uid>/").
_CONTAINER_LOG = re.compile(r"containers[./]([a-z0-9][a-z0-9.-]{0,252})_[a-z0-9-]{1,63}_|/pods/[a-z0-9-]{1,63}_([a-z0-9][a-z0-9.-]{0,252})_")
#: Columns that may name the container log a record came from.
_STREAM_COLUMNS = ("@logstream", "logstreamname", "source", "filename", "log.file.path")


#: Columns naming the writer of a record besides its log stream.
_LABEL_UNSAFE = re.compile(r'[{}"\\\s]')
_WRITER_COLUMNS = ("host", "hostname", "host.name", "kubernetes.pod_name", "pod", "pod_name", "container_name")


def logcli_line(when: float | None, labels: dict[str, str], text: str) -> str:
    """A record's line as Loki's logcli prints it ("<time> {pod="w-0"} <line>": launchers.toml's loki_labels),
    which carries its time and its writer; a record with neither is the line alone."""
    shown = ", ".join(f'{k}="{_LABEL_UNSAFE.sub("_", v)[:253]}"' for k, v in labels.items() if v)
    if when is None or not shown:
        return text
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(when)) + f"{when % 1:.6f}"[1:] + "Z"
    return f"{stamp} {{{shown}}} {text}"


def group_by_writer(rows: list, key) -> list:
    """The rows of one writer together, writers in the order they first appear, each one's in order."""
    first: dict = {}
    keyed = [(first.setdefault(key(r), len(first)), i, r) for i, r in enumerate(rows)]
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [r for _w, _i, r in keyed]


def pod_of(value: str) -> str | None:
    """The pod whose container log a stream or source name is, or None."""
    m = _CONTAINER_LOG.search(value)
    return (m.group(1) or m.group(2)) if m else None


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
    """The export's rows as logcli-style lines, oldest first, and for each such line the file line it
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
        stream_at = [i for i, n in enumerate(names) if n in _STREAM_COLUMNS]
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
    # One stream after the other (a pod's, a host's), as its own file would hold it: the search merged them
    # by time, so that a block one process wrote (torchrun's failure table) may be cut by another's lines.
    writer = [i for i, n in enumerate(names) if n in _STREAM_COLUMNS or n in _WRITER_COLUMNS]
    rows = group_by_writer(rows, lambda row: tuple(pod_of(row[1][i]) or row[1][i] for i in writer))
    out: list[str] = []
    line_map: list[int] = []
    host_at = next((i for i, n in enumerate(names) if n in _WRITER_COLUMNS), None)
    for start, row in rows:
        pod = next((p for i in stream_at if (p := pod_of(row[i]))), None)
        labels = {"pod": pod} if pod else {"host": row[host_at]} if host_at is not None and row[host_at] else {}
        when = parse_iso(iso_time(row[time_at]))
        lines = row[msg_at].split("\n")
        # (the message is the row's last multi-line field as a rule: its lines end the row's lines)
        first = start + max(0, sum(f.count("\n") for f in row) - (len(lines) - 1))
        for k, line in enumerate(lines):
            if line.strip():
                out.append(logcli_line(when, labels, line.rstrip("\r")))
                line_map.append(first + k)
    return ("\n".join(out) + "\n").encode("utf-8"), line_map
