"""Shared facts about a job: what several rules, the rank statuses and the verdict all need.

* ``timeouts_by_pg(job)``: per process group, which ranks timed out in which SeqNum/op, after how
  long, and their last enqueued/completed work (de-duplicated: the same timeout is echoed 3-5 times
  per rank, as the LOG line, the watchdog exception, ``what()`` and the Python error). gloo's
  ``Timed out waiting Nms for recv operation`` counts as the rank's timeout too (no SeqNum: the
  flight-recorder dumps, when given, say which collective).
* ``failures(job)`` / ``first_failure(job)``: the non-consequential errors, one per rank, in causal
  order. Consequences (peer closed the socket, flushed IB work, a watchdog or gloo timeout, SIGTERM
  from the launcher, ``ncclRemoteError``, ``-> N`` chains) are never causes, nor is the exit code 1
  of a rank whose own error was such an echo.
* ``lagging_ranks(job)``, ``silent_ranks(job)``, ``stage_outliers(job)``: who fell behind, who went
  quiet, who stopped earlier in NCCL's init sequence than the others (they live in ``suspects.py``
  and are importable from here).
* small formatters (``fmt_ranks``, ``fmt_ms``, ``pg_label``) so summaries read the same everywhere.

Results are cached per job (rules run one after another over the same job model).
"""

from __future__ import annotations

import re
import signal
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar

from ..events import Event
from ..flightrec.analysis import dump_facts
from ..model import JobModel, RankState, pg_key

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
    @wraps(fn)
    def wrapper(job: JobModel) -> T:
        if not _CACHED_JOB or _CACHED_JOB[0] is not job:  # only the latest job is kept
            _CACHE.clear()
            _CACHED_JOB[:] = [job]
        if fn.__name__ not in _CACHE:
            _CACHE[fn.__name__] = fn(job)
        return _CACHE[fn.__name__]

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
    return text[: cut + 1] if cut > 0 else text[: limit - 3].rstrip() + "..."


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


# ---- collective timeouts ------------------------------------------------------------------------

#: The WorkNCCL repr inside an echo (watchdog exception, what(), Python error) of a timeout.
_WORK = re.compile(r"WorkNCCL\((?:SeqNum=(?P<seq>\d{1,18}), )?OpType=(?P<op>\w{1,40})[^)]{0,300}?"
                   r"Timeout\(ms\)=(?P<tmo>\d{1,12})\)(?: ran for (?P<ran>\d{1,15}) milliseconds)?")
_TIMEOUT_TEXT = "Watchdog caught collective operation timeout"
_ECHO_KINDS = ("torch_wd_exception", "python_exception", "torch_nccl_error", "cpp_terminate")


@dataclass(slots=True, eq=False)  # identity, not field-by-field, equality
class RankTimeout:
    """One rank's timeout in one process group (all its echoes merged)."""

    rank: int | None
    state: RankState | None
    pg: str
    seq: int | None = None
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    enqueued: int | None = None
    completed: int | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def ts(self) -> float | None:
        return first_ts(self.events)

    @property
    def host(self) -> str | None:
        return self.state.host if self.state is not None else None


@dataclass(slots=True, eq=False)
class PgTimeouts:
    """Every rank's timeout in one process group."""

    pg: str
    reports: list[RankTimeout]
    desc: str | None = None
    seq: int | None = None  # the SeqNum most ranks timed out in (set once the reports are in)

    def settle(self) -> PgTimeouts:
        seqs = Counter(r.seq for r in self.reports if r.seq is not None)
        self.seq = max(seqs, key=lambda s: (seqs[s], s)) if seqs else None
        return self

    @property
    def op(self) -> str | None:
        ops = Counter(r.op for r in self.reports if r.op and (self.seq is None or r.seq == self.seq))
        return ops.most_common(1)[0][0] if ops else None

    @property
    def ranks(self) -> list[int]:
        return sorted({r.rank for r in self.reports if r.rank is not None})

    @property
    def timeouts_ms(self) -> Counter:
        return Counter(r.timeout_ms for r in self.reports if r.timeout_ms is not None)

    @property
    def ran_ms(self) -> int | None:
        vals = [r.ran_ms for r in self.reports if r.ran_ms is not None]
        return max(vals) if vals else None

    @property
    def ts(self) -> float | None:
        return first_ts(e for r in self.reports for e in r.events)

    def lead_events(self) -> list[Event]:
        """One watchdog line per rank (the most informative), in rank order."""
        out = []
        for r in sorted(self.reports, key=lambda r: (r.rank is None, r.rank or 0)):
            best = next((e for e in r.events if e.kind == "torch_wd_timeout"), None) or r.events[0]
            out.append(best)
        return out


def _echo_work(ev: Event) -> dict | None:
    """Fields of a timeout echoed inside an exception text, or None."""
    text = " ".join(str(v) for v in (ev.get("exc"), ev.get("msg"), ev.get("err")) if v) or ev.text
    if _TIMEOUT_TEXT not in text:
        return None
    m = _WORK.search(text)
    if not m:
        return {}
    return {k: (int(v) if k != "op" else v) for k, v in m.groupdict().items() if v is not None}


@_per_job
def timeouts_by_pg(job: JobModel) -> dict[str, PgTimeouts]:
    """Per process group (``pg_key``), every rank's collective timeout, de-duplicated."""
    # SeqNum -> PG from lines that name their PG, to place the WorkNCCL lines that do not.
    seq_pg_job: dict[int, set[str]] = defaultdict(set)  # job-wide, from lines that name their PG
    seq_pg_writer: dict[tuple, dict[int, str]] = defaultdict(dict)  # per writer
    for e in job.by_kind("torch_wd_status", "torch_exception_hit"):
        if e.get("seq") is not None:
            seq_pg_writer[_writer(job, e)][e.get("seq")] = pg_key(e)
            if e.get("pg_id") is not None or e.get("pg_guid") is not None:
                seq_pg_job[e.get("seq")].add(pg_key(e))
    descs: dict[str, str] = {}
    merged: dict[tuple, RankTimeout] = {}
    for ev in job.events:  # not only the ranks' events: lines of an unknown rank count too
        fields = _timeout_fields(ev)
        if fields is None:
            continue
        st, writer, seq = owner(job, ev), _writer(job, ev), fields.get("seq")
        if ev.get("pg_id") is not None or ev.get("pg_guid") is not None:
            pg = pg_key(ev)
        elif seq in seq_pg_writer[writer]:
            pg = seq_pg_writer[writer][seq]
        elif len(seq_pg_job.get(seq, ())) == 1:
            pg = next(iter(seq_pg_job[seq]))
        else:
            pg = "default"
        if ev.get("pg_desc"):
            descs.setdefault(pg, str(ev.get("pg_desc")))
        rank = ev.rank if ev.rank is not None else st.rank if st is not None else None
        if rank is None and pg == "default":
            rank = _int(ev.get("pg_rank"))  # in the default group the group rank is the global rank
        key = (("rank", rank) if rank is not None else (writer, ev.get("pg_rank")), pg)
        rt = merged.get(key)
        if rt is None:
            rt = merged[key] = RankTimeout(rank=rank, state=st, pg=pg)
        _merge_timeout(rt, ev, fields)
    _fold_unranked(merged)
    out: dict[str, PgTimeouts] = {}
    for rt in merged.values():
        out.setdefault(rt.pg, PgTimeouts(pg=rt.pg, reports=[], desc=descs.get(rt.pg))).reports.append(rt)
    return {pg: pt.settle() for pg, pt in sorted(out.items(), key=lambda kv: (-len(kv[1].reports), kv[0]))}


def _fold_unranked(merged: dict[tuple, RankTimeout]) -> None:
    """A line that names no rank (``Exception hit in NCCL work: 2``) is the echo of the one ranked
    report with that SeqNum in its group, when there is exactly one; it is not another rank."""
    ranked: dict[tuple, list[RankTimeout]] = defaultdict(list)
    for o in merged.values():
        if o.rank is not None:
            ranked[(o.pg, o.seq)].append(o)
    for key, rt in list(merged.items()):
        same = ranked.get((rt.pg, rt.seq), []) if rt.rank is None else []
        if len(same) == 1:
            for ev in rt.events:
                _merge_timeout(same[0], ev, {"enq": rt.enqueued, "comp": rt.completed})
            del merged[key]


def _writer(job: JobModel, ev: Event) -> tuple:
    """Who wrote a line: its process, else what its file and prefixes say about the writer."""
    st = owner(job, ev)
    return ("state", id(st)) if st is not None else ("file", ev.file, ev.local_rank, ev.host, ev.pid)


def _timeout_fields(ev: Event) -> dict | None:
    k = ev.kind
    if k == "torch_wd_timeout":
        return {"seq": ev.get("seq"), "op": ev.get("op"), "numel_in": ev.get("numel_in"),
                "numel_out": ev.get("numel_out"), "tmo": ev.get("timeout_ms"), "ran": ev.get("ran_ms")}
    if k in ("torch_wd_status", "torch_exception_hit"):
        return {"seq": ev.get("seq"), "enq": ev.get("enqueued"), "comp": ev.get("completed")}
    if k == "gloo_timeout":  # gloo's transport gave up on a collective: no SeqNum, no op (send/recv is not one)
        return {"tmo": ev.get("timeout_ms")}
    if k in _ECHO_KINDS:
        return _echo_work(ev)
    return None


def _merge_timeout(rt: RankTimeout, ev: Event, f: dict) -> None:
    """Fill what is still unknown; an echo never overrides the watchdog line itself."""
    if rt.seq is None and f.get("seq") is not None:
        rt.seq = f["seq"]
    for attr, key in (("op", "op"), ("numel_in", "numel_in"), ("numel_out", "numel_out"),
                      ("timeout_ms", "tmo"), ("ran_ms", "ran"), ("enqueued", "enq"), ("completed", "comp")):
        if getattr(rt, attr) is None and f.get(key) is not None:
            setattr(rt, attr, f[key])
    if ev.kind == "torch_wd_timeout" or not any(e.kind == ev.kind for e in rt.events):
        rt.events.append(ev)


@dataclass(slots=True, eq=False)
class WatchdogKill:
    """A heartbeat-monitor kill / stuck watchdog on one rank."""

    rank: int | None
    state: RankState | None
    pg: str
    work_meta_size: int | None = None
    seconds: int | None = None
    events: list[Event] = field(default_factory=list)


#: 2.5+ prints this FATAL line after an ordinary timeout when the monitor wins the race: not a hang.
_NOT_A_HANG = ("due to collective timeout or exception",)


@_per_job
def watchdog_kills(job: JobModel) -> list[WatchdogKill]:
    """Heartbeat-monitor kills and 'watchdog got stuck' reports, one per rank and PG."""
    merged: dict[tuple, WatchdogKill] = {}
    for ev in job.by_kind("torch_heartbeat_timeout", "torch_watchdog_stuck", "torch_monitor_timeout"):
        if any(s in ev.text for s in _NOT_A_HANG):
            continue
        st, pg = owner(job, ev), pg_key(ev)
        rank = ev.rank if ev.rank is not None else st.rank if st is not None else None
        if rank is None and pg == "default":
            rank = _int(ev.get("pg_rank"))
        key = (("rank", rank) if rank is not None else (_writer(job, ev), ev.get("pg_rank")), pg)
        wk = merged.get(key)
        if wk is None:
            wk = merged[key] = WatchdogKill(rank=rank, state=st, pg=pg)
        if wk.work_meta_size is None and ev.get("work_meta_size") is not None:
            wk.work_meta_size = ev.get("work_meta_size")
        if wk.seconds is None and ev.get("seconds") is not None:
            wk.seconds = ev.get("seconds")
        wk.events.append(ev)
    return sorted(merged.values(), key=lambda w: (w.rank is None, w.rank or 0))


def timed_out_states(job: JobModel) -> set[int]:
    """id() of every RankState that reported a timeout or a watchdog kill."""
    ids = {id(r.state) for p in timeouts_by_pg(job).values() for r in p.reports if r.state is not None}
    return ids | {id(w.state) for w in watchdog_kills(job) if w.state is not None}


# ---- failures: causes, not consequences ---------------------------------------------------------

#: Error text that is the echo of someone else's failure, never a cause by itself.
_CONSEQUENCE = re.compile(
    r"Watchdog caught collective operation timeout|Connection closed by remote peer|remote process exited"
    r"|ncclRemoteError|communicator was aborted|ChildFailedError|SignalException|got signal: ?15\b|SIGTERM"
    r"|Connection reset by peer|Broken pipe|WR_FLUSH_ERR|status=5\b|with error 5\b|KeyboardInterrupt"
    r"|Socket recv failed|Connection closed by localRank|DistStoreError|[Tt]imed out|[Tt]imeout",
)
#: Exception types that only report that a child/peer failed.
_ECHO_TYPES = ("ChildFailedError", "CalledProcessError", "ProcessExitedException", "SignalException",
               "KeyboardInterrupt", "SystemExit", "DistNetworkError", "DistStoreError")
_CUDA_TEXT = re.compile(r"CUDA error|CUDA out of memory|illegal memory access|out of memory|ECC error|Xid", re.I)
NETWORK_KINDS = ("nccl_ib_cqe", "nccl_connect_err", "nccl_ofi_error", "nccl_no_iface")
#: Every kind ``classify`` may call a cause.
CAUSE_KINDS = ("python_exception", "cpp_terminate", "cuda_error", "cuda_oom", "signal", "xid", "oom_killer",
               "nccl_cuda_fail", "nccl_alloc_fail", "nccl_shm", "nccl_dup_gpu", "torch_nccl_error",
               "torch_nccl_err_kind", "torch_wd_exception", *NETWORK_KINDS, "elastic_cfe", "elastic_failed",
               "slurm_task_exit", "mp_spawn_failed", "ds_exit", "mpi_abort", "slurm_node_fail")
#: A rank waiting for a peer that never came (gloo's transport, the TCPStore): always a consequence.
_TIMEOUT_ECHOES = ("gloo_timeout", "torch_store_timeout")
#: A rank's own error lines that may be no more than the echo of another rank's failure.
_OWN_ERRORS = ("python_exception", "cpp_terminate", "torch_wd_exception", "torch_nccl_error", "torch_nccl_err_kind",
               *_TIMEOUT_ECHOES)
#: Launcher/host reports about a process (not the process's own words).
_REPORTS = ("elastic_cfe", "elastic_failed", "slurm_task_exit", "mp_spawn_failed", "ds_exit", "mpi_abort",
            "slurm_node_fail")
#: Which of a rank's error lines describes its failure best (lower is more specific).
_SPECIFIC = {"cuda_oom": 0, "cuda_error": 0, "nccl_cuda_fail": 0, "nccl_alloc_fail": 0, "nccl_shm": 0,
             "nccl_dup_gpu": 0, "xid": 0, "oom_killer": 0, "python_exception": 1, "torch_wd_exception": 1,
             "torch_nccl_err_kind": 2, "torch_nccl_error": 2, "cpp_terminate": 3, "signal": 3}


@dataclass(slots=True, eq=False)
class Failure:
    """One rank's first non-consequential error, with its echoes as extra evidence."""

    rank: int | None
    state: RankState | None
    host: str | None
    category: str  # cuda | oom | nccl | exception | host | signal | network | exit
    what: str
    events: list[Event] = field(default_factory=list)
    recovered: bool = False  # the rank (or job) went on training afterwards

    @property
    def crash(self) -> bool:
        """A process-level failure (not a transport error between two hosts)."""
        return self.category != "network"

    @property
    def ts(self) -> float | None:
        return first_ts(self.events)

    @property
    def exit_only(self) -> bool:
        return self.category == "exit"

    @property
    def who(self) -> str:
        if self.rank is not None:
            return f"rank {self.rank}" + (f" on {self.host}" if self.host else "")
        st = self.state
        if st is not None and st.local_rank is not None:
            return f"local rank {st.local_rank} (global rank unknown)" + (f" on {self.host}" if self.host else "")
        if self.host:
            pid = f", pid {st.pid}" if st is not None and st.pid is not None else ""
            return f"a process on {self.host}{pid} (rank unknown)"
        return "a process (rank not in the log)"


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def expand_tasks(spec: str | None) -> list[int]:
    """``8-13,15`` -> [8, 9, 10, 11, 12, 13, 15] (Slurm task lists)."""
    out: list[int] = []
    for part in str(spec or "").replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            a, b = int(lo), int(hi) if hi else int(lo)
            if 0 <= b - a <= 100_000:
                out.extend(range(a, b + 1))
    return out


def _exit_is_consequence(code: int | None, sig: str | None, job_timed_out: bool) -> bool | None:
    """None: not a failure at all (exit 0); True: killed because of someone else."""
    if code == 0 and not sig:
        return None
    if code in (-15, 143, 15) or (sig and "TERM" in sig.upper()):
        return True
    if code in (-6, 134) or (sig and "ABRT" in sig.upper()):
        return job_timed_out  # the watchdog's teardown after a timeout
    return False


def classify(ev: Event, job_timed_out: bool, rank_timed_out: bool) -> tuple[str, str] | None:
    """(category, description) when ``ev`` is a cause, None when it is a consequence or no error."""
    k, get = ev.kind, ev.get
    text = ev.text
    if k in _TIMEOUT_ECHOES:
        return None
    if k == "python_exception":
        etype, msg = str(get("exc_type") or ""), str(get("msg") or "")
        if etype.rsplit(".", 1)[-1] in _ECHO_TYPES or (etype == "Exception" and not msg.strip()):
            return None
        if _CONSEQUENCE.search(msg) and not _CUDA_TEXT.search(msg):
            return None
        cat = "oom" if "OutOfMemory" in etype or "out of memory" in msg else \
            "cuda" if _CUDA_TEXT.search(msg) else "exception"
        return cat, f"{etype}: {msg}".strip(": ")[:200]
    if k == "cpp_terminate":
        etype = str(get("exc_type") or "an exception")
        # DistBackendError is the watchdog re-throwing a timeout or NCCL error (quoted elsewhere)
        if "DistBackendError" in etype or ((rank_timed_out or job_timed_out) and "CUDA" not in etype):
            return None
        return "exception", f"terminate called after throwing {etype}"  # its what() line says more
    if k == "cuda_error":
        return "cuda", f"CUDA error: {get('err') or text}"[:200]
    if k == "cuda_oom":
        detail = str(get("detail") or "").strip()
        return "oom", (detail if detail.startswith("CUDA out of memory") else
                       f"CUDA out of memory{': ' + detail if detail else ''}")[:200]
    if k == "signal":
        sig = str(get("signal") or text)
        if _exit_is_consequence(None, sig, job_timed_out or rank_timed_out):
            return None
        return "signal", sig[:200]
    if k == "xid":
        return "host", f"GPU Xid {get('code')}: {get('msg') or text}"[:200]
    if k == "slurm_node_fail":
        return "host", f"Slurm node failure on {get('host') or get('on_host') or 'a node'}"
    if k == "oom_killer":
        return "host", f"kernel OOM killer killed {get('process') or 'a process'} (pid {get('pid')})"
    if k in ("nccl_cuda_fail", "nccl_alloc_fail", "nccl_shm", "nccl_dup_gpu"):
        return "nccl", f"NCCL: {text.split('NCCL WARN', 1)[-1].strip()}"[:200]
    if k == "torch_nccl_error":
        err = str(get("err") or "")
        if _CONSEQUENCE.search(err):
            return None
        etype = str(get("exc_type") or "").rsplit(".", 1)[-1]
        return "nccl", f"{etype + ': ' if etype else ''}NCCL error: {err}"[:200]
    if k == "torch_nccl_err_kind":
        return None if get("err_kind") == "ncclRemoteError" else ("nccl", f"{get('err_kind')}: {get('detail')}")
    if k == "torch_wd_exception":
        exc = str(get("exc") or text)
        if _CONSEQUENCE.search(exc) and not _CUDA_TEXT.search(exc):
            return None
        return ("cuda" if _CUDA_TEXT.search(exc) else "exception"), f"watchdog thread terminated with: {exc}"[:200]
    if k in NETWORK_KINDS:
        status = _int(get("status"))
        if k == "nccl_ib_cqe" and (status == 5 or "FLUSH" in str(get("status_name") or "")):
            return None
        return "network", text.split("NCCL WARN", 1)[-1].strip()[:200]
    return _classify_exit(ev, job_timed_out)


def _classify_exit(ev: Event, job_timed_out: bool) -> tuple[str, str] | None:
    k, get = ev.kind, ev.get
    if k == "elastic_cfe":
        code, sig = _int(get("exitcode")), get("sig")
        if _exit_is_consequence(code, sig, job_timed_out) is not False:
            return None
        return "exit", f"exit code {code}" + (f" ({sig})" if sig else "") + " in torchrun's failure table"
    if k == "elastic_failed":
        code = _int(get("code"))
        if _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        sig = f"{_signal_name(-code)}; " if code is not None and code < 0 and _signal_name(-code) else ""
        return "exit", f"exit code {code} ({sig}local rank {get('local_rank')}, pid {get('pid')})"
    if k == "slurm_task_exit":
        code, how = _int(get("code")), str(get("how") or "").strip()
        if how in ("Killed", "Terminated") or (how == "Aborted" and job_timed_out):
            return None  # srun stopping the other tasks after a failure, or the watchdog's teardown
        if "Exited" in how and _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        what = f"exited with code {code}" if "Exited" in how else f"ended with: {how}"
        tasks = str(get("tasks") or "?")
        word = "task" if tasks.isdigit() else "tasks"
        return "exit", f"srun: {word} {tasks} on {get('host') or '?'} {what}"
    if k == "mp_spawn_failed":
        code, sig = _int(get("exitcode")), get("sig")
        if (code is not None or sig) and _exit_is_consequence(code, sig, job_timed_out) is not False:
            return None
        return "exit", f"process {get('proc')} terminated" + (f" with exit code {code}" if code is not None else "")
    # Horovod worker exits are MN6's story (elastic Horovod drops and re-adds workers by design).
    if k in ("ds_exit", "mpi_abort"):
        code = _int(get("code"))
        if k != "mpi_abort" and _exit_is_consequence(code, None, job_timed_out) is not False:
            return None
        return "exit", ev.text.strip()[:200]
    return None


def _signal_name(num: int) -> str | None:
    """9 -> 'SIGKILL' (torchrun reports a worker killed by a signal as exit code -N)."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return None


def _short_host(host: str | None) -> str | None:
    return host.split(".", 1)[0] if host else None  # NCCL cuts at the first dot, torchrun's fqdn does not


@_per_job
def _states_by_pid(job: JobModel) -> dict[int, list[RankState]]:
    out: dict[int, list[RankState]] = defaultdict(list)
    for r in job.ranks:
        if r.pid is not None and r.rank is not None:
            out[r.pid].append(r)
    return out


def state_for_pid(job: JobModel, pid: Any, host: str | None = None, file: str | None = None) -> RankState | None:
    """The rank process with this pid (on this host, or writing to this file, when the pid alone is
    ambiguous: pids repeat across containers); None when unknown or still ambiguous."""
    cands = _states_by_pid(job).get(_int(pid) or -1, [])
    if host:
        cands = [r for r in cands if _short_host(r.host) in (None, _short_host(host))]
    if len(cands) > 1 and file:
        cands = [r for r in cands if file in r.files]
    return cands[0] if len(cands) == 1 else None


def _fail_ranks(job: JobModel, ev: Event) -> list[int | None]:
    """Global ranks a failure event speaks for (exit reports name theirs in the fields or by pid)."""
    if ev.kind == "slurm_task_exit":
        return list(expand_tasks(ev.get("tasks"))) or [None]
    if ev.kind in ("elastic_cfe", "mpi_abort") and _int(ev.get("rank")) is not None:
        return [_int(ev.get("rank"))]
    if ev.kind in ("elastic_failed", "elastic_cfe", "ds_exit", "oom_killer") and ev.get("pid") is not None:
        st = state_for_pid(job, ev.get("pid"), ev.get("host") or host_of(job, ev), ev.file)
        if st is not None:
            return [st.rank]
        if ev.kind == "elastic_failed" and (ev.file, _int(ev.get("pid"))) in _table_ranks(job):
            return [_table_ranks(job)[(ev.file, _int(ev.get("pid")))]]
    return [global_rank(job, ev)]


@_per_job
def _table_ranks(job: JobModel) -> dict[tuple[str, int | None], int]:
    """(file, pid) -> global rank from torchrun's failure table (each row names rank and pid); pids
    that the table gives to two ranks are left out."""
    seen: dict[tuple[str, int | None], set[int]] = defaultdict(set)
    for ev in job.by_kind("elastic_cfe"):
        if _int(ev.get("pid")) is not None and _int(ev.get("rank")) is not None:
            seen[(ev.file, _int(ev.get("pid")))].add(_int(ev.get("rank")))  # type: ignore[arg-type]
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def _echo_only(job: JobModel, job_timed_out: bool, timed: set[int]) -> tuple[set[int], set[int]]:
    """(id() of states, ranks) whose own errors are all echoes of another rank's failure (a timeout,
    a peer that closed the socket, gloo's "Timed out waiting"), with no cause of their own."""
    states: set[int] = set()
    ranks: set[int] = set()
    caused: set[int] = set()
    for st in job.ranks:
        rank_timed = id(st) in timed
        own = [e for e in st.events if (e.kind in _OWN_ERRORS or e.kind in CAUSE_KINDS) and e.kind not in _REPORTS]
        if any(classify(e, job_timed_out, rank_timed) is not None for e in own):
            if st.rank is not None:
                caused.add(st.rank)
        elif rank_timed or any(e.kind in _OWN_ERRORS for e in own):
            states.add(id(st))
            if st.rank is not None:
                ranks.add(st.rank)
    return states, ranks - caused


def _echoed_exit(job: JobModel, ev: Event, echo: tuple[set[int], set[int]]) -> bool:
    """Exit code 1 in torchrun's reports (Python's status after an uncaught exception) of a rank
    whose exception was an echo: a consequence too. Other codes (-9, 139, ...) keep their word."""
    if ev.kind not in ("elastic_cfe", "elastic_failed"):
        return False
    if _int(ev.get("exitcode") if ev.kind == "elastic_cfe" else ev.get("code")) != 1:
        return False
    states, ranks = echo
    named = _fail_ranks(job, ev)
    if all(r is not None for r in named):
        return all(r in ranks for r in named)
    lr = _int(ev.get("local_rank"))
    procs = [st for st in job.ranks if lr is not None and st.local_rank == lr and ev.file in st.files]
    return bool(procs) and all(id(st) in states for st in procs)


@_per_job
def killed_ranks(job: JobModel) -> tuple[set[int], set[int]]:
    """(id() of states, ranks) the launcher stopped because a peer failed: SIGTERM to their pid,
    -15 in torchrun's table, srun 'Terminated'. They are collateral, not silent. Kills with no crash
    in the job, or after the others' timeouts, are the launcher cleaning up hung ranks: not counted."""
    states: set[int] = set()
    ranks: set[int] = set()
    if first_failure(job) is None and not watchdog_kills(job):  # any cause, a transport error too
        return states, ranks
    first_timeout = min((pt.ts for pt in timeouts_by_pg(job).values() if pt.ts is not None), default=None)
    for ev in job.by_kind("elastic_sigterm", "elastic_cfe", "slurm_task_exit"):
        if ev.ts is not None and first_timeout is not None and ev.ts > first_timeout + 60:
            continue
        if ev.kind == "elastic_sigterm":
            st = state_for_pid(job, ev.get("pid"), host_of(job, ev), ev.file)
            if st is not None:
                states.add(id(st))
        elif ev.kind == "elastic_cfe" and (_int(ev.get("exitcode")) in (-15, 143) or "TERM" in str(ev.get("sig"))):
            if _int(ev.get("rank")) is not None:
                ranks.add(_int(ev.get("rank")))
        elif ev.kind == "slurm_task_exit" and str(ev.get("how") or "").strip() in ("Terminated", "Killed"):
            ranks.update(expand_tasks(ev.get("tasks")))
    return states, ranks


@_per_job
def failures(job: JobModel) -> list[Failure]:
    """Every rank's first cause, de-duplicated, earliest first (time when known, else line order)."""
    job_timed_out = bool(timeouts_by_pg(job)) or bool(watchdog_kills(job))
    timed = timed_out_states(job)
    by_rank = job.known_ranks()
    echo = _echo_only(job, job_timed_out, timed)
    merged: dict[tuple, Failure] = {}
    for ev in job.by_kind(*CAUSE_KINDS):
        st = owner(job, ev)
        cls = classify(ev, job_timed_out, st is not None and id(st) in timed)
        if cls is None or _echoed_exit(job, ev, echo):
            continue
        cat, what = cls
        own = global_rank(job, ev)
        for rank in _fail_ranks(job, ev):
            # a rank named only by a launcher report (no log of its own) has no process state
            rst = by_rank.get(rank) if rank is not None and rank in by_rank else st if rank == own else None
            host = ev.get("host") or ev.get("on_host") if ev.kind in ("slurm_task_exit", "elastic_cfe",
                                                                    "slurm_node_fail") else None
            host = host or (rst.host if rst is not None else None) or ev.host
            key = ("rank", rank) if rank is not None else ("proc", id(st), ev.host, ev.pid)
            f = merged.get(key)
            if f is None:
                merged[key] = Failure(rank=rank, state=rst, host=host, category=cat, what=what, events=[ev])
                continue
            f.host = f.host or host
            if _SPECIFIC.get(ev.kind, 4) < min(_SPECIFIC.get(e.kind, 4) for e in f.events):
                f.category, f.what = cat, what  # a more specific line of the same failure
            f.events.append(ev)
    out = list(merged.values())
    net_writers = {_writer(job, e) for e in job.by_kind(*NETWORK_KINDS, "nccl_sock_closed", "nccl_socket_err")}
    for f in out:
        f.recovered = _recovered(job, f)
        # "unhandled system error" raised right after this process's own socket/IB errors is the
        # transport failing (NET1/MN2 say between which hosts), not a crash of this rank.
        if f.category == "nccl" and all(e.kind in ("torch_nccl_error", "torch_nccl_err_kind") for e in f.events) \
                and any(_writer(job, e) in net_writers for e in f.events):
            f.category = "network"
    files = {p: i for i, p in enumerate(job.files)}
    # A rank's own error comes before any launcher's report of an exit; then time, then position.
    return sorted(out, key=lambda f: (f.exit_only, f.ts is None, f.ts or 0.0,
                                      files.get(f.events[0].file, 0), f.events[0].line))


@_per_job
def _progress_by_file(job: JobModel) -> dict[str, list[Event]]:
    """Training steps and restarts per file, in line order (job.events is sorted by file, line)."""
    out: dict[str, list[Event]] = defaultdict(list)
    for e in job.by_kind("train_step", "elastic_restart", "elastic_rdzv"):
        out[e.file].append(e)
    return out


def _recovered(job: JobModel, f: Failure) -> bool:
    """The failing process trained on afterwards (the error did not stop it)."""
    ev = f.events[0]
    later = [e for e in _progress_by_file(job).get(ev.file, ()) if e.line > ev.line]
    if any(e.kind != "train_step" for e in later):
        return False  # progress after a restart is a new attempt, not a recovery
    return any(owner(job, e) is f.state or (e.rank is not None and e.rank == f.rank) for e in later)


def first_failure(job: JobModel, crash_only: bool = False) -> Failure | None:
    """The earliest non-consequential failure (``crash_only``: process crashes, not transport errors)."""
    for f in failures(job):
        if not f.recovered and (f.crash or not crash_only):
            return f
    return None


def job_failed(job: JobModel) -> bool:
    """Did anything go wrong (a timeout, a watchdog kill, a crash that did not recover, or
    flight-recorder dumps that name a culprit)?"""
    return bool(timeouts_by_pg(job) or watchdog_kills(job) or first_failure(job, crash_only=True)
                or dump_facts(job).culprits)


# ---- who fell behind, who went quiet (suspects.py; importable from here as before) ---------------

from .suspects import (  # noqa: E402  (suspects builds on the facts above)
    EARLY_SEQ,
    Suspect,
    lagging_ranks,
    silent_ranks,
    stage_outliers,
    still_starting,
    strongest,
    suspects_summary,
    writer_last_line,
)

__all__ = [
    "CAUSE_KINDS", "DEFAULT_TIMEOUTS_MS", "EARLY_SEQ", "NETWORK_KINDS", "Failure", "PgTimeouts", "RankTimeout",
    "Suspect", "WatchdogKill", "brief", "classify", "count_ranks", "expand_tasks", "failures", "first_failure",
    "first_ts", "fmt_ms", "fmt_ranks", "global_rank", "host_of", "job_failed", "killed_ranks", "lagging_ranks",
    "name_ranks", "owner", "per_rank_layout", "pg_label", "plural", "silent_ranks", "stage_outliers",
    "state_for_pid", "still_starting", "strongest", "suspects_summary", "timed_out_states", "timeout_origin",
    "timeouts_by_pg", "watchdog_kills", "writer_last_line",
]
