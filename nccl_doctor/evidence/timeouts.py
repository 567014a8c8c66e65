"""Collective timeouts and watchdog kills, one report per rank and process group.

* ``timeouts_by_pg(job)``: per process group, which ranks timed out in which SeqNum/op, after how
  long, and their last enqueued/completed work (de-duplicated: the same timeout is echoed 3-5 times
  per rank, as the LOG line, the watchdog exception, ``what()`` and the Python error). gloo's
  ``Timed out waiting Nms for recv operation`` counts as the rank's timeout too (no SeqNum: the
  flight-recorder dumps, when given, say which collective).
* ``watchdog_kills(job)``: heartbeat-monitor kills and stuck watchdogs; ``timed_out_states(job)``:
  the processes that reported either.

Built on the helpers of ``facts`` (every name here is importable from ``facts`` too); results are
cached per job like the facts.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel, RankState, pg_key
from .facts import _per_job, first_ts, int_in, line_key, owner, writer

# ---- collective timeouts ------------------------------------------------------------------------

#: The WorkNCCL repr inside an echo (watchdog exception, what(), Python error) of a timeout.
_WORK = re.compile(r"WorkNCCL\((?:SeqNum=(?P<seq>\d{1,18}), )?OpType=(?P<op>\w{1,40})[^)]{0,300}?"
                   r"Timeout\(ms\)=(?P<tmo>\d{1,12})\)(?: ran for (?P<ran>\d{1,15}) milliseconds)?")
_TIMEOUT_TEXT = "Watchdog caught collective operation timeout"
_ECHO_KINDS = ("torch_wd_exception", "python_exception", "torch_nccl_error", "cpp_terminate")
#: Every kind :func:`_timeout_fields` reads.
_TIMEOUT_KINDS = frozenset(("torch_wd_timeout", "torch_wd_status", "torch_exception_hit", "gloo_timeout", *_ECHO_KINDS))


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
    #: False when these are gloo's transport timeouts alone, none naming a group ("default" is then
    #: only an assumption: gloo never says which group the collective was in)
    named: bool = True

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


#: torch.distributed's point-to-point calls: a traceback stopping in one was sending or receiving,
#: not in a collective.
P2P_CALLS = frozenset(("send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list",
                       "recv_object_list"))


def c10d_frame(st: RankState | None) -> Event | None:
    """The innermost frame in distributed_c10d.py of a process's last traceback (the last one
    printed), or None."""
    return next((e for e in reversed(st.events if st is not None else ()) if e.kind == "torch_c10d_frame"), None)


def c10d_call(st: RankState | None) -> str | None:
    """The torch.distributed call a process's last traceback stopped in, or None."""
    frame = c10d_frame(st)
    return frame.get("op") if frame is not None else None


def waited_in(pt: PgTimeouts) -> str:
    """Where a group's ranks waited, in words: the collective their lines name; else the call
    their tracebacks stop in ("point-to-point recv/send" when each is one of those); else "a
    collective" (gloo's transport timeouts name none)."""
    if pt.op:
        return pt.op
    calls = {c10d_call(r.state) for r in pt.reports}
    if calls and None not in calls:
        if calls <= P2P_CALLS:
            return "point-to-point " + "/".join(sorted(calls))
        if len(calls) == 1:
            return next(iter(calls))
    return "a collective"


@_per_job
def timeouts_by_pg(job: JobModel) -> dict[str, PgTimeouts]:
    """Per process group (``pg_key``), every rank's collective timeout, de-duplicated."""
    # SeqNum -> PG from lines that name their PG, to place the WorkNCCL lines that do not.
    seq_pg_job: dict[int, set[str]] = defaultdict(set)  # job-wide, from lines that name their PG
    seq_pg_writer: dict[tuple, dict[int, str]] = defaultdict(dict)  # per writer
    for e in job.by_kind("torch_wd_status", "torch_exception_hit"):
        if e.get("seq") is not None:
            seq_pg_writer[writer(job, e, line_key)][e.get("seq")] = pg_key(e)
            if e.get("pg_id") is not None or e.get("pg_guid") is not None:
                seq_pg_job[e.get("seq")].add(pg_key(e))
    descs: dict[str, str] = {}
    merged: dict[tuple, RankTimeout] = {}
    unnamed: set[int] = set()  # id() of the timeouts placed in "default" for want of a name
    for ev in job.events:  # not only the ranks' events: lines of an unknown rank count too
        if ev.kind not in _TIMEOUT_KINDS:
            continue  # most events (checked inline: a call per event cost more than the rest)
        fields = _timeout_fields(ev)
        if fields is None:
            continue
        st, wkey, seq = owner(job, ev), writer(job, ev, line_key), fields.get("seq")
        if ev.get("pg_id") is not None or ev.get("pg_guid") is not None:
            pg = pg_key(ev)
        elif seq in seq_pg_writer[wkey]:
            pg = seq_pg_writer[wkey][seq]
        elif len(seq_pg_job.get(seq, ())) == 1:
            pg = next(iter(seq_pg_job[seq]))
        else:
            pg = "default"
            if ev.kind == "gloo_timeout":  # (torch <= 2.1's watchdog lines: one group, see job._reconcile)
                unnamed.add(id(ev))
        if ev.get("pg_desc"):
            descs.setdefault(pg, str(ev.get("pg_desc")))
        rank = ev.rank if ev.rank is not None else st.rank if st is not None else None
        if rank is None and pg == "default":
            rank = int_in(ev.get("pg_rank"))  # in the default group the group rank is the global rank
        key = (("rank", rank) if rank is not None else (wkey, ev.get("pg_rank")), pg)
        rt = merged.get(key)
        if rt is None:
            rt = merged[key] = RankTimeout(rank=rank, state=st, pg=pg)
        _merge_timeout(rt, ev, fields)
    _fold_unranked(merged)
    _fold_told_twice(merged)
    _drop_relays(merged, job.ranks_expected)
    out: dict[str, PgTimeouts] = {}
    for rt in merged.values():
        out.setdefault(rt.pg, PgTimeouts(pg=rt.pg, reports=[], desc=descs.get(rt.pg))).reports.append(rt)
    dumped = {pg_key(e) for e in job.by_kind("fr_pg")}  # a flight-recorder dump names its groups
    for pt in out.values():
        pt.named = pt.pg != "default" or pt.pg in dumped or not all(id(e) in unnamed for r in pt.reports
                                                                     for e in r.events)
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

#: How far (lines) a script's own log of an exception may come before torch's ranked copy of it.
_TOLD_TWICE_LINES = 200


def _fold_told_twice(merged: dict[tuple, RankTimeout]) -> None:
    """A script that logs the exception it then lets go prints its timeout twice: its own line with
    no rank ("[pp 2/3] ERROR pipeline step failed: RuntimeError: ... Timed out waiting ...") and then
    torch's "[rank2]:" traceback of it. A timeout of no rank whose every line is followed, in its
    file and within a traceback's length, by a ranked report of the same kind is those ranks'
    own copy: not one more process (the nearest such report takes it)."""
    loose = [(k, o) for k, o in merged.items() if o.rank is None]
    if not loose:
        return
    ranked: dict[str, list[tuple[int, str, RankTimeout]]] = defaultdict(list)
    for o in merged.values():
        if o.rank is not None:
            for e in o.events:
                ranked[e.file].append((e.line, e.kind, o))
    for after in ranked.values():
        after.sort(key=lambda t: t[0])
    for key, rt in loose:
        takers = []
        for ev in rt.events:
            nearest = next((o for line, kind, o in ranked.get(ev.file, ())
                            if ev.line < line <= ev.line + _TOLD_TWICE_LINES and kind == ev.kind), None)
            if nearest is None or nearest.pg != rt.pg:
                break
            takers.append((nearest, ev))
        else:
            for o, ev in takers:
                _merge_timeout(o, ev, {})
            del merged[key]


def _drop_relays(merged: dict[tuple, RankTimeout], world: int | None) -> None:
    """Timeouts of no rank that cannot all be other ranks (with the ranked ones they outnumber the
    world: a controller quoting its workers' errors, as Ray Train's does) are relays, not processes."""
    if not world:
        return
    for pg in {o.pg for o in merged.values()}:
        ranked = [k for k, o in merged.items() if o.pg == pg and o.rank is not None]
        loose = [k for k, o in merged.items() if o.pg == pg and o.rank is None]
        if loose and len(ranked) + len(loose) > world:
            for k in loose:
                del merged[k]


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
            rank = int_in(ev.get("pg_rank"))
        key = (("rank", rank) if rank is not None else (writer(job, ev, line_key), ev.get("pg_rank")), pg)
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
