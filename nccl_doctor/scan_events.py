"""Events from matched records, and the year of dates that carry none (the scan's output side)."""

from __future__ import annotations

import re
import time
from collections import Counter
from functools import lru_cache

from .events import MAX_TEXT, Event
from .launchers import load_launchers
from .timeparse import event_time, hms_of, parse_mmdd


def fix_years(events: list[Event], years: dict | None = None, scans: list | None = None) -> None:
    """c10's ``MMDD hh:mm:ss`` has no year; each file's mtime gave one. When the job's logs carry
    full dates (kubectl, DeepSpeed, NCCL 2.26 WARN), their most common year is the better guess,
    applied to the whole job so that files never disagree on the year among themselves.

    ``years``: year -> events dated with one, counted over every event (also those a file's cap
    did not keep, see eventcap) when the scans counted them; else counted here over ``events``.
    ``scans``: their step times without a year get the same correction as the events."""
    if years is None:
        years = Counter(time.gmtime(e.ts).tm_year for e in events if e.ts is not None and "mmdd" not in e.fields)
    if not years:
        return
    year = Counter(years).most_common(1)[0][0]
    for e in events:
        if e.ts is not None and "mmdd" in e.fields and "hms" in e.fields and time.gmtime(e.ts).tm_year != year:
            e.ts = parse_mmdd(str(e.fields["mmdd"]), hms_of(e.fields), year)
    for s in scans or ():
        for i, mmdd, hms in s.step_mmdd or ():
            if time.gmtime(s.step_ts[i]).tm_year != year:
                t = parse_mmdd(mmdd, hms, year)
                s.step_ts[i] = float("nan") if t is None else t  # NaN: no time (left out of the job's)


#: A logging record at error level whose message starts with its writer's rank ("[ERROR] [rank2] train: sync failed:
#: ... Timed out waiting 20000ms", "ERROR:root:rank 1: ..."): launchers leave such records whole for the log_error
#: patterns, so a record another pattern reads (the timeout or lost peer it quotes) takes the rank from here.
_ERROR_RECORD_RANK = re.compile(r"\[?(?:ERROR|CRITICAL|FATAL)\]?(?::[\w.<>-]{1,64}:|[ |:-]{1,8})"
                                r"(?:[\w.<>-]{1,64}(?::| -| \|) {1,2})?\[?(?:[A-Za-z][\w.-]{0,252}/)?(?:RANK|[Rr]ank)[ =:_-]?(\d{1,7})\b")


@lru_cache(maxsize=1)
def _relays() -> frozenset[str]:
    """The launchers that label every line of the process they run (launchers.toml's ``relay``)."""
    return frozenset(lc.name for lc in load_launchers() if lc.relay)


def make_event(kind: str, fields: dict, lf: dict, path: str, line_no: int, text: str, year: int) -> Event:
    # Only the NCCL line prefix names the writer (host:pid:tid [dev]); a host or pid inside other
    # messages (srun's failed node, a ChildFailedError entry) is the subject, kept in fields.
    # ("host=X rank=R/W", "host X pid N local_rank L": its own)
    writer = kind.startswith("nccl_") or (kind in ("rank_world", "self_pid") and "host" in fields)
    # (a start-up line's own host stays in its fields too: the writer's word on its node, over a launcher's label)
    host = ((fields.get("host") if kind in ("rank_world", "self_pid") else fields.pop("host", None)) if writer
            else None) or lf.get("host") or lf.get("pod")
    pid = (fields.get("self_pid") if kind == "self_pid" else fields.pop("pid", None)) if writer else None
    if pid is None:
        pid = lf.get("pid")
    cuda_dev = fields.pop("cuda_dev", None) if writer else fields.get("cuda_dev")
    ts = event_time(fields, year)
    if lf:
        if ts is None:
            ts = event_time(lf, year)
        if "pid" in lf and "host" not in lf:
            # Ray's "(Worker pid=N, ip=A)": a pid with no host name, the same on the worker's NCCL lines
            # and on its prints; with the address, who wrote the line (pids repeat across nodes).
            fields.setdefault("launcher_pid", lf["pid"])
            if "ip" in lf:
                fields.setdefault("launcher_ip", lf["ip"])
        if "stream_pid" in lf:  # journald's stream: a writer only where it never speaks for two ranks
            fields.setdefault("stream_pid", lf["stream_pid"])
        if "excerpt_of" in lf:  # grep's "file:line:" prefix: the file the line came from
            fields.setdefault("excerpt_of", lf["excerpt_of"])
        if "coords" in lf:  # a script's "[tp=1 dp=0]": the writer's place in its parallel groups (model/links)
            fields.setdefault("coords", lf["coords"])
        if kind == "traceback_start" and "torch_rank" in lf.get("launchers", ()):
            fields["hook"] = "torch"  # torch's "[rank3]:" before each line: its hook for an uncaught exception
        if not _relays().isdisjoint(lf.get("launchers", ())):
            # put by a relay on every line its process writes ("[default0]:", srun's "3: "): a line of that file
            # without it is someone else's, the launcher's own (model.identity)
            fields["relayed"] = True
    # positional: this runs once per event (kind, file, line, host, pid, cuda_dev, rank, local_rank, ts, fields, text)
    rank = lf.get("rank")
    if rank is None and kind != "log_error" and (m := _ERROR_RECORD_RANK.match(text)) is not None:
        rank = int(m.group(1))
    local = lf.get("local_rank")
    if local is None and writer and kind == "self_pid":
        local = fields.get("local_rank")  # its own start-up line: its launcher's worker slot
    return Event(kind, path, line_no, host, pid, cuda_dev, rank, local, ts, fields,
                 text.strip()[:MAX_TEXT])
