"""The rank timeline: one pandas model shared by the TUI and the PNG.

One row per rank (grouped by host, ranks that were expected but wrote nothing included), each
with a status and a list of marks placed on two x-axes: ``t`` (seconds since the first timestamp,
where lines carry one) and ``x`` (logical progress: init stages, then the job's main counter, the
SeqNum of its busiest process group or else the training step). Warnings, errors, watchdog
timeouts and the last line sit at the progress the rank had reached when it wrote them.

Which rank is the last to report, and the statuses of a job whose model gave none, are in
``timeline_last.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .model.job import _STAGE_OF, STAGES, TIMEOUT_KINDS, JobModel, RankState, pg_key, stage_index
from .report.reach import last_coll, main_pg, reach_label, stage_label

#: Worst first; the order of filters and legends.
STATUSES = ("failed", "timed_out", "silent", "lagging", "echo", "ok")
#: Statuses that name nobody: a job of only these has no rank the statuses single out.
UNSINGLED = frozenset(("ok", "echo"))
#: Mark kinds, in drawing order (later ones are drawn on top of earlier ones at the same place).
MARKS = ("stage", "collective", "last", "warning", "timeout", "error")
WARNING_KINDS = frozenset({"nccl_warn", "nccl_ras", "nccl_ib_async", "nccl_svc_closed", "nccl_propagate",
                           "torch_barrier_device_unknown", "torch_gil", "hvd_stall", "wandb_timeout",
                           "elastic_restart", "torch_watchdog_stuck"})
FAIL_KINDS = frozenset({"python_exception", "cpp_terminate", "cuda_error", "cuda_oom", "signal", "xid",
                        "oom_killer", "nccl_cuda_fail", "nccl_shm", "nccl_alloc_fail", "nccl_dup_gpu",
                        "nccl_ib_cqe", "nccl_sock_closed", "nccl_connect_err", "nccl_ofi_error",
                        "torch_nccl_error", "torch_nccl_err_kind", "nccl_socket_err", "nccl_no_iface",
                        "nccl_version_mismatch", "torch_wd_exception", "nccl_proxy_fail", "elastic_failed",
                        "mpi_abort", "torch_comm_aborted"})
_TIMEOUTS = TIMEOUT_KINDS - {"torch_watchdog_stuck"}
_COUNTER_KINDS = frozenset({"torch_wd_timeout", "torch_wd_status", "torch_work_update", "train_step"})
#: Logical x of the first counter value; init stages sit at their index before it.
RUNNING_X = float(stage_index("running"))
#: Marks kept per rank and category (first and last few): a rank is a row, not a log.
KEEP = 3
#: Timestamps spanning more than this disagree (e.g. a year guessed for MMDD lines): no wall clock.
MAX_SPAN_S = 31 * 86400.0
#: A rank that stopped writing this long before the median rank is silent.
SILENT_AFTER_S = 60.0


@dataclass(slots=True)
class Timeline:
    ranks: pd.DataFrame
    marks: pd.DataFrame
    axis: str  # "time" or "progress"
    t0: float | None
    counter: str | None
    counter_base: int | None
    last: dict[str, Any] | None
    findings: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    _bounds: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.ranks)

    @property
    def xcol(self) -> str:
        return "t" if self.axis == "time" else "x"

    def progress_label(self, x: float) -> str:
        """Human name of a logical-progress position."""
        if x < RUNNING_X or self.counter is None:
            return stage_label(STAGES[max(0, min(int(round(x)), len(STAGES) - 1))])
        if x <= RUNNING_X:
            return "running"
        value = int(round(x - RUNNING_X - 1)) + (self.counter_base or 0)
        if self.counter.startswith("coll:"):
            return f"opCount 0x{value:x} ({self.counter[5:]}-rank comm)"
        return f"step {value}" if self.counter == "step" else f"SeqNum {value} ({self.counter[3:]})"

    def counter_tick(self, value: int) -> str:
        """A short axis label of one value of the main counter."""
        if self.counter == "step":
            return f"step {value}"
        return f"0x{value:x}" if (self.counter or "").startswith("coll:") else f"#{value}"

    def marks_of(self, row: int) -> pd.DataFrame:
        """The marks of one row (cheap: marks are sorted by row, slices found by binary search)."""
        if self._bounds is None:
            self._bounds = np.searchsorted(self.marks["row"].to_numpy(), np.arange(self.n + 1))
        a, b = self._bounds[row], self._bounds[row + 1]
        return self.marks.iloc[a:b]

    def rows_of(self, ranks: list[int] | None = None, hosts: list[str] | None = None) -> list[int]:
        """Rows of these ranks; of these hosts only when no rank is given."""
        df = self.ranks
        sel = df["rank"].isin(ranks) if ranks else df["host"].isin(hosts or [])
        return df.index[sel].tolist()

    def info(self, row: int) -> dict[str, Any]:
        """One rank's row as plain Python values (None where missing)."""
        return row_dict(self.ranks.loc[row])

    def status_counts(self) -> dict[str, int]:
        counts = self.ranks["status"].value_counts()
        return {s: int(counts.get(s, 0)) for s in STATUSES}


def build(report: Any) -> Timeline:
    """The timeline of a Report (needs only ``.job``, ``.findings``, ``.verdict``, ``.last_rank_to_report``)."""
    job: JobModel = report.job
    states = list(job.ranks)
    owners: dict[str, int] = {}
    for r in states:
        for f in r.files:
            owners[f] = owners.get(f, 0) + 1
    # A COLL trace is a rank's progress only in a file of its own: shared files keep the first few
    # and the last COLL line of the whole file, not of each writer.
    own = {id(r) for r in states if r.files and all(owners[f] == 1 for f in r.files)}
    counter, base = _main_counter(states, own)
    progress = [{"last_seq": r.last_seq, "last_enqueued": r.enqueued, "last_coll": last_coll(r)} for r in states]
    pg = main_pg(progress)
    # The model assigned statuses: use them as they are. (An echo alone singles nobody out: the ranks
    # still "ok" beside it may be told silent or lagging by their lines, as when all were "ok".)
    trusted = any(r.status not in UNSINGLED for r in states)
    rows: list[dict[str, Any]] = []
    marks: list[tuple] = []
    for i, r in enumerate(states):
        row, mk = _rank_row(r, counter, base, derive=not trusted, coll=id(r) in own)
        row["state"] = i
        row["reached"], row["reached_text"] = reach_label(progress[i], pg, short=True), reach_label(progress[i], pg)
        rows.append(row)
        marks.extend((i, *m) for m in mk)
    seen = {r.rank for r in states if r.rank is not None}
    # A rank with no line of its own sits under the host a launcher's table gave it, or the one the
    # verdict names for it (its neighbours' node, a file named after its node), as the report says it
    # ("ranks 0-1 on gpu-r7-n01": a verdict naming several ranks and one host puts them all there);
    # so does a rank whose lines name no host.
    verdict = getattr(report, "verdict", None) or {}
    named = verdict.get("hosts") or []
    verdict_host = named[0] if len(named) == 1 and verdict.get("ranks") else None
    for row in rows:
        if row["host"] is None and verdict_host is not None and row["rank"] in verdict["ranks"]:
            row["host"] = verdict_host
    for m in job.missing_ranks():
        if m not in seen:
            row = _missing_row(m)
            row["host"] = job.rank_hosts.get(m) or (verdict_host if m in (verdict.get("ranks") or []) else None)
            rows.append(row)
    ranks = pd.DataFrame(rows, columns=list(_missing_row(0)))
    order_of = {h: i for i, h in enumerate(sorted(ranks["host"].dropna().unique(), key=natural_key))}
    ranks["_h"] = ranks["host"].map(order_of).fillna(len(order_of))
    ranks = ranks.sort_values(["_h", "rank", "pid"], na_position="last", kind="stable").drop(columns="_h")
    ranks["rank"] = ranks["rank"].astype("Int64")
    order = ranks["state"].to_numpy()
    ranks = ranks.reset_index(drop=True)
    row_of_state = {int(s): i for i, s in enumerate(order) if s >= 0}
    md = pd.DataFrame(marks, columns=["state", "mark", "x", "ts", "pg", "seq", "file", "line", "label", "text"])
    md["row"] = md["state"].map(row_of_state).astype("int64")
    md = md.drop(columns="state").sort_values(["row", "x", "line"], kind="stable").reset_index(drop=True)

    axis = _axis(ranks, md)
    t0 = float(np.nanmin(md["ts"].to_numpy(dtype=float))) if md["ts"].notna().any() else None
    md["t"] = md["ts"] - t0 if t0 is not None else np.nan
    ranks["last_t"] = ranks["last_ts"] - t0 if t0 is not None else np.nan
    for col in ("counter_value", "pid", "cuda_dev", "last_line"):
        ranks[col] = ranks[col].astype("Int64")
    from .timeline_last import _last_rank, _statuses, describe_last

    if not trusted and ranks["status"].isin(["failed", "timed_out"]).any():
        _statuses(ranks)
    ranks["is_last"] = False
    tl = Timeline(ranks=ranks, marks=md, axis=axis, t0=t0, counter=counter, counter_base=base, last=None,
                  verdict=report.verdict)
    tl.last = _last_rank(tl, report.last_rank_to_report)
    if tl.last:
        ranks.loc[tl.last["rows"], "is_last"] = True
        tl.last["label"] = describe_last(tl)
    order = {rid: i for i, rid in enumerate((report.verdict or {}).get("rules") or [])}
    for f in sorted(report.findings, key=lambda f: order.get(f.rule, len(order))):  # the verdict's first
        tl.findings.append({"rule": f.rule, "severity": f.severity.value, "title": f.title, "summary": f.summary,
                            "ranks": list(f.ranks), "hosts": list(f.hosts), "rows": tl.rows_of(f.ranks, f.hosts),
                            "evidence": list(f.evidence), "remedy": f.remedy})
    return tl


def row_dict(series: pd.Series) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in series.items():
        if v is None or (not isinstance(v, (list, dict)) and pd.isna(v)):
            out[k] = None
        else:
            out[k] = v.item() if isinstance(v, np.generic) else v
    return out


def nice_step(raw: float) -> float:
    """A round number of seconds at least ``raw``: for axis ticks."""
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400):
        if step >= raw:
            return float(step)
    return 86400.0 * -(-raw // 86400)


def fmt_duration(s: float) -> str:
    """``42s``, ``17m``, ``3h05``: tick labels on the wall-clock axis."""
    s = int(round(s))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m" if s % 60 == 0 else f"{s // 60}m{s % 60:02d}"
    return f"{s // 3600}h{(s % 3600) // 60:02d}"


def natural_key(text: object) -> tuple:
    """``node-2`` before ``node-10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(text)))


# ---- per rank ------------------------------------------------------------------------------------


def _event_stage(e) -> str | None:
    if e.kind != "nccl_init":
        return _STAGE_OF.get(e.kind)
    what, phase = e.get("what"), e.get("phase")
    if what == "Init":
        return "init_start" if phase == "START" else "init_complete"
    return "finished" if what == "Destroy" and phase == "COMPLETE" else None


def _counter_values(e, coll: bool = False) -> list[tuple[str, int]]:
    """(counter, value) pairs an event reports: SeqNum per PG (the op reached), the step, or (with
    ``coll``) the opCount of an NCCL COLL line per communicator size."""
    if coll and e.kind == "nccl_coll" and isinstance(e.get("nranks"), int):
        try:
            return [(f"coll:{e.get('nranks')}", int(str(e.get("opcount")), 16))]
        except ValueError:
            return []
    if e.kind not in _COUNTER_KINDS:
        return []
    f = e.fields
    if e.kind == "train_step":
        return [("step", f["step"])] if isinstance(f.get("step"), int) else []
    vals = [v for v in (f.get("seq"), f.get("enqueued")) if isinstance(v, int)]
    return [(f"pg:{pg_key(e)}", max(vals))] if vals else []


def _axis(ranks: pd.DataFrame, md: pd.DataFrame) -> str:
    """Wall clock when most ranks' lines carry a time and so does most of their progress (init
    stages, collectives), and the times agree (span under a month); else logical progress (NCCL
    INFO lines carry none: often only the final errors are timed, and a clock over them alone
    would hide the hours before)."""
    present = int((~ranks["missing"]).sum())
    timed_ranks = int(ranks["last_ts"].notna().sum())
    progress = md[md["mark"].isin(["stage", "collective"])]
    timed_progress = progress["ts"].notna().mean() if len(progress) else 0.0
    ts = md["ts"].dropna()
    sane = len(ts) and float(ts.max() - ts.min()) <= MAX_SPAN_S
    return "time" if sane and present and timed_ranks >= 0.5 * present and timed_progress >= 0.5 else "progress"


def _main_counter(states: list[RankState], own: set[int] = frozenset()) -> tuple[str | None, int | None]:
    """The counter most ranks report, and its smallest value. On a tie a PG's SeqNum comes first,
    then a COLL opCount, then the step. A rank that went silent before its last collective wrote
    no SeqNum but its COLL trace did: then the opCount covers more ranks and is the axis."""
    who: dict[str, set[int]] = {}
    low: dict[str, int] = {}
    for i, r in enumerate(states):
        for e in r.events:
            for c, v in _counter_values(e, coll=id(r) in own):
                who.setdefault(c, set()).add(i)
                low[c] = min(low.get(c, v), v)
    if not who:
        return None, None
    best = max(who, key=lambda c: (len(who[c]), c.startswith("pg:"), c != "step", c == "pg:default",
                                   c.startswith("coll:") and int(c[5:])))
    return best, low[best]


def _rank_row(r: RankState, counter: str | None, base: int | None,
              derive: bool = True, coll: bool = False) -> tuple[dict[str, Any], list[tuple]]:
    marks: list[tuple] = []
    x = 0.0
    seen_stage = 0
    picked: dict[str, list[tuple]] = {"collective": [], "warning": [], "error": [], "timeout": []}
    first_timeout = first_error = None
    for e in r.events:
        st = _event_stage(e)
        if st is not None and stage_index(st) > seen_stage and st != "finished":
            seen_stage = stage_index(st)
            x = max(x, float(min(seen_stage, RUNNING_X)))
            marks.append(_mark(e, "stage", x, st))
        for c, v in _counter_values(e, coll):
            if c == counter and base is not None:
                x = max(x, RUNNING_X + 1 + v - base)
                label = (f"step {v}" if c == "step" else f"{e.get('op') or 'collective'} opCount 0x{v:x}"
                         if c.startswith("coll:") else f"{e.get('op') or 'collective'} SeqNum {v}")
                picked["collective"].append(_mark(e, "collective", x, label, pg=c[3:] or None, seq=v))
        if e.kind in _TIMEOUTS:
            first_timeout = first_timeout or e
            seq = e.get("seq")
            at = x  # a timeout sits on the SeqNum it timed out in, when that is on the axis
            if isinstance(seq, int) and base is not None and counter == f"pg:{pg_key(e)}":
                at = RUNNING_X + 1 + seq - base
            picked["timeout"].append(_mark(e, "timeout", at, f"watchdog timeout in SeqNum {seq}"
                                           if isinstance(seq, int) else "watchdog timeout", seq=seq))
        elif e.kind in WARNING_KINDS:
            picked["warning"].append(_mark(e, "warning", x, e.kind))
        elif e.kind in FAIL_KINDS:
            first_error = first_error or e
            picked["error"].append(_mark(e, "error", x, e.kind))
    for group in picked.values():
        marks.extend(group if len(group) <= 2 * KEEP else group[:KEEP] + group[-KEEP:])
    ll = r.last_line
    last_ts = ll.ts if ll is not None and ll.ts is not None else max(
        (e.ts for e in r.events if e.ts is not None), default=None)
    if ll is not None:
        marks.append(("last", x, ll.ts if ll.ts is not None else last_ts, None, None, ll.file, ll.line,
                      "last line", ll.text))
    status = r.status
    derive = derive and status == "ok"  # (an echo is the model's word on that rank: kept)
    if derive and first_timeout is not None:
        status = "failed" if first_error is not None and _before(first_error, first_timeout) else "timed_out"
    elif derive and first_error is not None:
        status = "failed"
    row = {
        "rank": r.rank, "host": r.host, "pid": r.pid, "cuda_dev": r.cuda_dev,
        "label": f"r{r.rank}" if r.rank is not None else (f"pid {r.pid}" if r.pid is not None else "?"),
        "stage": r.stage, "status": status, "progress": x,
        "counter_value": int(round(x - RUNNING_X - 1 + base)) if base is not None and x > RUNNING_X else None,
        "last_ts": last_ts, "last_file": ll.file if ll else None, "last_line": ll.line if ll else None,
        "last_text": ll.text if ll else "", "n_errors": len(picked["error"]), "n_timeouts": len(picked["timeout"]),
        "n_warnings": len(picked["warning"]), "missing": False, "state": -1, "reached": "", "reached_text": "",
    }
    return row, marks


def _mark(e, kind: str, x: float, label: str, pg: str | None = None, seq: Any = None) -> tuple:
    return (kind, x, e.ts, pg, seq if isinstance(seq, int) else None, e.file, e.line, label, e.text)


def _before(a, b) -> bool:
    if a.file == b.file:
        return a.line < b.line
    return a.ts is not None and b.ts is not None and a.ts < b.ts


def _missing_row(rank: int) -> dict[str, Any]:
    return {"rank": rank, "host": None, "pid": None, "cuda_dev": None, "label": f"r{rank}", "stage": "none",
            "status": "silent", "progress": 0.0, "counter_value": None, "last_ts": None,
            "last_file": None, "last_line": None, "last_text": "", "n_errors": 0, "n_timeouts": 0,
            "n_warnings": 0, "missing": True, "state": -1, "reached": "", "reached_text": ""}
