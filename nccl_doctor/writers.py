"""The last line of each writer of a file: where each process, rank or launcher label stopped.

Read from the file's tail (the last TAIL_BYTES) after its events: a file with one writer needs only
its last line; others are walked back until every writer its events named has been met. Also the
"quiet" span: timestamped lines from outside the job (a cron, the scheduler) after the job's last
labelled line, which measure how long the job stayed silent. And the line each rank wrote before
its last (``FileScan.last_before``).
"""

from __future__ import annotations

import re

from .events import MAX_TEXT, LastLine
from .launchers import LauncherStripper
from .reading import clean_line
from .timeparse import event_time, parse_iso

#: Lines walked back past the point where every writer's last line is known, for the lines before them.
BEFORE_LINES = 200
_NCCL_WHO = re.compile(r"^(?:\[[\d: -]{19,30}\] )?([\w.-]{1,253}):(\d{1,10}):\d{1,10} ")


def last_lines(tail: bytes, total: int, stripper: LauncherStripper, year: int, out) -> None:
    """The last non-blank line of the file and of each writer in it (launcher rank, local rank,
    NCCL host:pid). A file with one writer needs only its last line; others are walked back
    until every writer its events named has been met (bounded by the tail kept)."""
    wanted: set = set()
    writers: set = set()  # a record's own pid label ("host[pid]", "pid=N"): evidence.still_writing only
    for ev in out.events:
        if ev.rank is not None:
            wanted.add(("rank", ev.rank))
        elif ev.local_rank is not None:
            wanted.add(("local_rank", ev.local_rank))
        if ev.host is not None and ev.pid is not None and ev.kind.startswith("nccl_"):
            wanted.add(("proc", ev.host, ev.pid))
        elif ev.pid is not None:
            writers.add(("writer", ev.pid))
        if "launcher_pid" in ev.fields:
            wanted.add(("lpid", ev.fields.get("launcher_ip"), ev.fields["launcher_pid"]))
    single = len(wanted) <= 1
    wanted |= writers
    # The line before the last of each rank's label (and of a file's one writer): where a rank that
    # stopped one line short of the others stopped (see evidence.behind)
    want_before = {k for k in wanted if k[0] in ("rank", "writer")} | ({None} if single else set())
    befores: dict = {}
    extra: int | None = None
    labelled = any(k[0] in ("rank", "local_rank") for k in wanted)
    quiet_ts: list[float] = []
    job_line: int | None = None
    end = len(tail) - 1 if tail.endswith(b"\n") else len(tail)
    line_no = total + 1
    seen: dict = {}
    while end >= 0:
        start = tail.rfind(b"\n", 0, end) + 1
        raw = tail[start:end]
        line_no -= 1
        end = start - 1
        if not raw.strip():
            continue
        lf, rest = stripper.strip(clean_line(raw).replace("\r", " "))
        if not rest.strip():
            continue
        keys: list = [None]
        if "rank" in lf:
            keys.append(("rank", lf["rank"]))
        elif "local_rank" in lf:
            keys.append(("local_rank", lf["local_rank"]))
        if "pid" in lf and "host" not in lf:  # Ray's "(Worker pid=N, ip=A)", as in _make_event
            keys.append(("lpid", lf.get("ip"), lf["pid"]))
        if "pid" in lf and writers:
            keys.append(("writer", lf["pid"]))
        who = _NCCL_WHO.match(rest)
        if who and len(who.group(2)) < 11:
            keys.append(("proc", who.group(1), int(who.group(2))))
        if labelled and job_line is None:
            if len(keys) == 1:  # a line from outside the job (a cron, the scheduler)
                t = parse_iso(rest[:40])
                if t is not None:
                    quiet_ts.append(t)
            else:
                job_line = line_no
        for k in keys:
            if k in want_before and k in seen and k not in befores:
                befores[k] = rest.strip()[:MAX_TEXT]
        if extra is not None:  # every last line is known: only the lines before them are still looked for
            extra -= 1
            if extra <= 0 or want_before.issubset(befores):
                break
            continue
        last = None
        for k in keys:
            if k not in seen:
                if last is None:
                    last = LastLine(out.path, line_no, rest.strip()[:MAX_TEXT], event_time(lf, year),
                                    not stripper.relays.isdisjoint(lf.get("launchers", ())))
                seen[k] = last
                if k is not None and k[0] == "rank":
                    want_before.add(k)
        if (single or wanted.issubset(seen)) and (not labelled or job_line is not None):
            if want_before.issubset(befores):
                break
            extra = BEFORE_LINES
    out.last_lines = seen
    out.last_before = befores
    if job_line is not None and len(quiet_ts) >= 2:
        out.quiet = (min(quiet_ts), max(quiet_ts), job_line)
