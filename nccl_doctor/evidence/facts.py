"""Shared facts about a job: what several rules, the rank statuses and the verdict all need.

* ``timeouts_by_pg(job)``: per process group, which ranks timed out in which SeqNum/op, after how
  long, and their last enqueued/completed work (de-duplicated: the same timeout is echoed 3-5 times
  per rank, as the LOG line, the watchdog exception, ``what()`` and the Python error). gloo's
  ``Timed out waiting Nms for recv operation`` counts as the rank's timeout too (no SeqNum: the
  flight-recorder dumps, when given, say which collective). They live in ``timeouts.py``.
* ``failures(job)`` / ``first_failure(job)``: the non-consequential errors, one per rank, in causal
  order. Consequences (peer closed the socket, flushed IB work, a watchdog or gloo timeout, SIGTERM
  from the launcher, ``ncclRemoteError``, ``-> N`` chains) are never causes, nor is the exit code 1
  of a rank whose own error was such an echo. They live in ``failures.py``; which single line is a
  cause (``classify``) in ``causes.py``.
* ``lagging_ranks(job)``, ``silent_ranks(job)``, ``stage_outliers(job)``: who fell behind, who went
  quiet, who stopped earlier in NCCL's init sequence than the others (they live in ``suspects.py``).
* small formatters (``fmt_ranks``, ``fmt_ms``, ``pg_label``) so summaries read the same everywhere,
  and who wrote a line (``owner``, ``global_rank``, ``host_of``, ``writer``): here, with the cache.

Every name of those modules is importable from here as before. Results are cached per job (rules
run one after another over the same job model).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any, TypeVar

from ..events import Event
from ..model import JobModel, RankState
from ..model.hosts import file_stem, name_shape

T = TypeVar("T")

#: Collective timeouts that nobody chose: say so, the fix is to choose one.
DEFAULT_TIMEOUTS_MS = {
    600_000: "the 10-minute default of torch >= 2.2",
    1_800_000: "the 30-minute default of torch <= 2.1 and DeepSpeed",
}

# ---- cache: facts are computed once per job -----------------------------------------------------

_CACHE: dict[str, Any] = {}
_CACHED_JOB: list[JobModel] = []


def _per_job(fn: Callable[[JobModel], T]) -> Callable[[JobModel], T]:
    key = f"{fn.__module__}.{fn.__qualname__}"  # two modules may each have a `missing`

    @wraps(fn)
    def wrapper(job: JobModel) -> T:
        if not _CACHED_JOB or _CACHED_JOB[0] is not job:  # only the latest job is kept
            _CACHE.clear()
            _CACHED_JOB[:] = [job]
        if key not in _CACHE:
            _CACHE[key] = fn(job)
        return _CACHE[key]

    return wrapper


# ---- formatting ---------------------------------------------------------------------------------


def fmt_ranks(ranks: Iterable[int | None], limit: int = 12) -> str:
    """``[0, 1, 2, 3, 5, 8, 9]`` -> ``0-3, 5, 8-9``; long lists are cut with a count."""
    vals = sorted({r for r in ranks if r is not None})
    runs: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        runs.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    if len(runs) > limit:
        return ", ".join(runs[:limit]) + f", ... ({len(vals)} ranks)"
    return ", ".join(runs)


def name_ranks(ranks: Iterable[int | None]) -> str:
    """'rank 3' / 'ranks 0-2, 5' / '' when none is known."""
    vals = {r for r in ranks if r is not None}
    if not vals:
        return ""
    return f"rank {next(iter(vals))}" if len(vals) == 1 else f"ranks {fmt_ranks(vals)}"


def count_ranks(ranks: Iterable[int | None], n: int | None = None) -> str:
    """'rank 3' / '3 ranks (0-2)' / '2 processes' (n: how many, when some ranks are unknown)."""
    vals = sorted({r for r in ranks if r is not None})
    total = n if n is not None else len(vals)
    if vals and total == 1:
        return f"rank {vals[0]}"
    if vals and total > len(vals):  # some processes of unknown rank among them
        return (f"{plural(total, 'process')} ({'rank' if len(vals) == 1 else 'ranks'} {fmt_ranks(vals)} and "
                f"{total - len(vals)} of unknown rank)")
    if vals:
        return f"{plural(total, 'rank')} ({fmt_ranks(vals)})"
    return plural(total, "process")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}{'es' if word.endswith('s') else 's'}"


def fmt_ms(ms: float | None) -> str:
    """Milliseconds as a duration a person reads: ``8.1 s``, ``10 min``, ``1 h 5 min``."""
    if ms is None:
        return "an unknown time"
    s = ms / 1000.0
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    m = s / 60.0
    if m < 60:
        return f"{m:.0f} min" if abs(m - round(m)) < 0.05 else f"{m:.1f} min"
    h, rest = divmod(round(m), 60)
    return f"{h} h {rest} min" if rest else f"{h} h"


def timeout_origin(ms: int | None) -> str:
    """Why a timeout has the value it has (a default nobody chose, or an explicit setting)."""
    if ms is None:
        return ""
    return DEFAULT_TIMEOUTS_MS.get(ms, "set explicitly")


def pg_label(pg: str, desc: str | None = None) -> str:
    if pg == "default":
        return "the default group"
    name = pg[2:] if pg.startswith("pg") and pg[2:].isdigit() else pg
    return f"process group {name}" + (f" ({desc})" if desc and desc not in ("undefined", "default_pg") else "")


def brief(text: str, limit: int = 160) -> str:
    """The first sentence(s) of an error message, short enough for a headline."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(". ", 40, limit)
    return text[: cut + 1] if cut > 0 else text[: limit - 1].rstrip() + "…"  # (not "...": a sentence's period is stripped after)


def record_text(ev: Event) -> str:
    """What a record or an error says (its message, error and exception fields), else its line."""
    return " ".join(str(v) for v in (ev.get("msg"), ev.get("err"), ev.get("exc")) if v) or ev.text


def first_ts(events: Iterable[Event]) -> float | None:
    times = [e.ts for e in events if e.ts is not None]
    return min(times) if times else None


# ---- who wrote an event -------------------------------------------------------------------------


def owner(job: JobModel, ev: Event) -> RankState | None:
    """The process (RankState) that wrote ``ev``; None for lines no process could claim."""
    return job.rank_of(ev)


def global_rank(job: JobModel, ev: Event) -> int | None:
    """The event's global rank: its own (launcher/identity), else its process's."""
    if ev.rank is not None:
        return ev.rank
    st = owner(job, ev)
    return st.rank if st is not None else None


def host_of(job: JobModel, ev: Event) -> str | None:
    if ev.host:
        return ev.host
    st = owner(job, ev)
    return st.host if st is not None else None


def rank_host(job: JobModel, st: RankState | None, ev: Event | None = None) -> str | None:
    """A rank's host when a finding names it: its own, the job's map of ranks to hosts, the host of its line ``ev``,
    else the one node its files were written on by what their lines or names say (``file_host``: a rank whose
    records name no host, in a per-node console named after it, ``gpu-h4.err``, and its --log-dir files)."""
    if st is not None and (st.host or job.rank_hosts.get(st.rank)):
        return st.host or job.rank_hosts.get(st.rank)
    if ev is not None and (host := host_of(job, ev) or file_host(job, ev.file)):
        return host
    hosts = {h for f in (st.files if st is not None else ()) if (h := file_host(job, f)) is not None}
    return next(iter(hosts)) if len(hosts) == 1 else None


@_per_job
def _file_hosts(job: JobModel) -> dict[str, str]:
    """file -> the one node it was written on, from what the lines say (NCCL prefixes, the hosts of
    torchrun's failure table, the processes in it), else from its name: a per-node console named
    after its host (``gpu-node-07.log``) when the job names that host or a sibling file's name has
    the same shape and is a host the job names (``a3-node-011.log`` beside ``a3-node-012.log``)."""
    said: dict[str, set[str]] = defaultdict(set)
    full_names = set(job.hosts)
    for e in job.events:
        if e.host and (e.kind.startswith("nccl_") or e.pid is not None):
            said[e.file].add(e.host)
        elif e.kind == "elastic_cfe" and e.get("host"):
            host = str(e.get("host"))
            said[e.file].add(host if host in full_names else host.split(".", 1)[0])
    for r in job.ranks:
        if r.host:
            for f in r.files:
                said[f].add(r.host)
    out = {f: next(iter(h)) for f, h in said.items() if len(h) == 1}
    known = {h.split(".", 1)[0] for h in job.hosts} | set(out.values())
    for e in job.by_kind("torch_store_timeout"):  # the endpoint a store client tried: "(host, port)"
        m = _ENDPOINT.search(e.text)
        if m:
            known.add(m.group(1).split(".", 1)[0])
    stems = {f: _stem(f) for f in job.files if f not in out and f not in said}
    named = {f: st for f, st in stems.items() if st in known}
    shapes = {_shape(st) for st in named.values()} | {_shape(_stem(f)) for f, h in out.items() if _stem(f) == h}
    for f, st in stems.items():
        if st in known or (shapes and _shape(st) in shapes and re.search(r"\d", st)):
            out[f] = st
    return out


_ENDPOINT = re.compile(r"\(([A-Za-z][\w.-]{0,252}), \d{1,5}\)")


@_per_job
def _dated_lines(job: JobModel) -> dict[str, tuple[list[int], list[float]]]:
    """file -> (lines, times) of its dated events, in line order."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for e in job.events:  # (sorted by file, line)
        if e.ts is not None:
            lines, times = out.setdefault(e.file, ([], []))
            lines.append(e.line)
            times.append(e.ts)
    return out


def dated_after(job: JobModel, ev: Event) -> float | None:
    """The time of the first dated line after ``ev`` in its file (an upper bound of its own time)."""
    found = _dated_lines(job).get(ev.file)
    if not found:
        return None
    i = bisect_left(found[0], ev.line + 1)
    return found[1][i] if i < len(found[0]) else None


def known_by(job: JobModel, ev: Event) -> float | None:
    """By when ``ev`` had happened: its own time, else the first dated line's after it in its file."""
    return ev.ts if ev.ts is not None else dated_after(job, ev)


#: What differs between one message as several ranks or processes print it: addresses, counts, their own rank.
VARYING = re.compile(r"0x[0-9a-f]+|\d+")


_stem, _shape = file_stem, name_shape  # (a file's name before its first dot; a host name's shape: model.hosts)


def file_host(job: JobModel, file: str) -> str | None:
    return _file_hosts(job).get(file)


@_per_job
def per_rank_layout(job: JobModel) -> bool:
    """True when the logs are one file per rank (so a rank without lines really wrote nothing)."""
    if len(job.files) < 2:
        return False
    ranks_in_file: dict[str, set[int]] = defaultdict(set)
    for r in job.ranks:
        if r.rank is not None:
            for f in r.files:
                ranks_in_file[f].add(r.rank)
    with_rank = [f for f in job.files if ranks_in_file.get(f)]
    return len(with_rank) >= 2 and all(len(ranks_in_file[f]) == 1 for f in with_rank)


def proc_key(ev: Event) -> tuple:
    """One writer process: (host, pid) when the line says so, else its launcher rank or file."""
    if ev.host is not None and ev.pid is not None:
        return ("proc", ev.host, ev.pid)
    if ev.rank is not None:
        return ("rank", ev.rank)
    return ("file", ev.file)


def line_key(ev: Event) -> tuple:
    """One writer as far as the line itself says: its file and prefixes (local rank, host, pid)."""
    return ("file", ev.file, ev.local_rank, ev.host, ev.pid)


def writer(job: JobModel, ev: Event, unclaimed: Callable[[Event], tuple] = proc_key) -> tuple:
    """Who wrote a line: its process (one RankState when known, across its NCCL and torch lines),
    else ``unclaimed(ev)``: ``proc_key`` (NCCL's facts) or ``line_key`` (what its file and prefixes
    say about the writer: the timeouts and failures)."""
    st = owner(job, ev)
    return ("state", id(st)) if st is not None else unclaimed(ev)


# ---- field values -------------------------------------------------------------------------------


def int_in(value: object) -> int | None:
    """An int from a field that may be an int, ``'12'`` or ``'2 (UNDELIVERABLE)'``; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = re.search(r"-?\d+", value)
        return int(m.group()) if m else None
    return None


# ---- timeouts, failures, suspects (their own modules; importable from here as before) -----------

# Imported last: those modules build on the helpers above (and import them from here).
from ..model.links import expand_tasks  # noqa: E402
from .causes import CAUSE_KINDS, NETWORK_KINDS, classify  # noqa: E402
from .failures import (  # noqa: E402
    Failure,
    failures,
    first_failure,
    job_failed,
    killed_ranks,
)
from .pids import state_for_pid  # noqa: E402
from .silent import StoppedNode, silent_ranks, stopped_node  # noqa: E402
from .suspects import (  # noqa: E402
    EARLY_SEQ,
    Suspect,
    early_place,
    early_timeouts,
    lagging_ranks,
    stage_outliers,
    still_starting,
    strongest,
    suspects_summary,
    writer_last_line,
)
from .timeouts import (  # noqa: E402
    PgTimeouts,
    RankTimeout,
    WatchdogKill,
    timed_out_states,
    timeouts_by_pg,
    waited_in,
    watchdog_kills,
)

__all__ = [
    "CAUSE_KINDS", "DEFAULT_TIMEOUTS_MS", "VARYING", "EARLY_SEQ", "NETWORK_KINDS", "Failure", "PgTimeouts",
    "RankTimeout", "Suspect", "WatchdogKill", "brief", "classify", "count_ranks", "early_place", "early_timeouts",
    "expand_tasks", "failures",
    "file_host", "first_failure", "first_ts", "fmt_ms", "fmt_ranks", "global_rank", "host_of", "int_in", "job_failed",
    "killed_ranks", "lagging_ranks", "line_key", "name_ranks", "owner", "per_rank_layout", "pg_label",
    "plural", "proc_key", "silent_ranks", "stage_outliers", "StoppedNode", "stopped_node", "state_for_pid", "still_starting", "strongest",
    "suspects_summary", "timed_out_states", "timeout_origin", "timeouts_by_pg", "waited_in", "watchdog_kills", "writer",
    "writer_last_line",
]
