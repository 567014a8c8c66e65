"""Who fell behind and who went quiet: the suspects RK3 (lagging) and RK2 (silent) name.

* ``lagging_ranks(job)``: ranks behind the SeqNum the others waited in (same process group only),
  named by a desync report, still busy starting up, holding fewer works in their watchdog, or whose
  flight-recorder dump never reached a collective the other dumps entered;
* ``silent_ranks(job)``: ranks that wrote nothing, left no flight-recorder dump while the others
  did, or stopped early with no error while the others went on;
* ``stage_outliers(job)``: ranks that stopped earlier in NCCL's init sequence than the others;
* ``strongest`` / ``suspects_summary``: pick and word the suspects for a finding.

Built on the timeouts and failures (``timeouts.py``, ``failures.py``); every name here is importable
from ``facts`` too. Results are cached per job like the facts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..events import Event, LastLine
from ..model import JobModel, RankState, pg_key, stage_index
from .behind import line_behind
from .dumps import dump_facts
from .endings import endings, host_of_rank, late_arrivals, quiet_odd_ones
from .facts import (
    _per_job,
    count_ranks,
    global_rank,
    owner,
    per_rank_layout,
    pg_label,
    plural,
)
from .named import named_lagging
from .steps import step_outlier
from .still_writing import still_writing
from .stopped import stuck_when_stopped
from .timeouts import PgTimeouts, WatchdogKill, timeouts_by_pg, watchdog_kills
from .torchchecks import desync_ranks


@dataclass(slots=True, eq=False)
class Suspect:
    """A rank that lagged (RK3) or went silent (RK2), with why we think so."""

    rank: int | None
    state: RankState | None
    reason: str
    confidence: str  # high | medium | low
    events: list[Event] = field(default_factory=list)
    pg: str = "default"
    host: str | None = None
    confirmed: bool = True  # False: a hint only (the logs may simply not show this rank)
    label: str = ""  # who it is, when not a rank ("a node that never joined")
    #: how a quiet rank ended, for the one-line headline: "killed" / "stopped" by the launcher (it
    #: was hung), "left" (exited with status 0 before the others failed), "in <a phase>" (its last
    #: line is a phase the others did not enter, and the job hung), "" (not known)
    ended: str = ""
    #: what befell it, in a summary, when not "is missing or went silent" (a rendezvous round that
    #: never came together was not missing: every agent waited for it)
    what: str = ""

    def __post_init__(self) -> None:
        if self.host is None and self.state is not None:
            self.host = self.state.host


def _last_enqueued(job: JobModel) -> dict[tuple[int, str], tuple[int, Event]]:
    """(id(state), pg) -> the latest 'last enqueued' a rank reported outside its own timeout."""
    out: dict[tuple[int, str], tuple[int, Event]] = {}
    for ev in job.by_kind("torch_work_update", "torch_dump"):
        st = owner(job, ev)
        if st is not None and ev.get("enqueued") is not None:
            out[(id(st), pg_key(ev))] = (ev.get("enqueued"), ev)
    return out


@_per_job
def lagging_ranks(job: JobModel) -> list[Suspect]:
    """Ranks behind the SeqNum the others waited in (same PG only), named by a desync report, or
    with a smaller watchdog work list than the others."""
    found: dict[Any, Suspect] = {}

    def add(s: Suspect) -> None:
        if s.host is None and s.rank is not None:
            s.host = job.rank_hosts.get(s.rank)
        key = s.rank if s.rank is not None else id(s.state if s.state is not None else s)
        old = found.get(key)
        if old is None or _CONF[s.confidence] > _CONF[old.confidence]:
            found[key] = s

    for pg, pt in timeouts_by_pg(job).items():
        seq = pt.seq
        if seq is None:
            continue
        waiting = [r for r in pt.reports if r.seq == seq]
        if not waiting:
            continue
        for r in pt.reports:
            behind = r.enqueued if r.enqueued is not None and r.enqueued < seq else \
                r.seq if r.seq is not None and r.seq < seq else None
            if behind is not None:
                add(Suspect(r.rank, r.state, f"its last enqueued work in {pg_label(pg, pt.desc)} is {behind} while "
                            f"{plural(len(waiting), 'rank')} waited in SeqNum {seq}", "high", r.events[:2], pg))
        reporters = {id(r.state) for r in pt.reports}
        for (sid, epg), (enq, ev) in _last_enqueued(job).items():
            if epg == pg and sid not in reporters and enq < seq:
                st = owner(job, ev)
                add(Suspect(global_rank(job, ev), st, f"it had enqueued only up to work {enq} in {pg_label(pg)} "
                            f"while {plural(len(waiting), 'rank')} waited in SeqNum {seq}", "high", [ev], pg))
    _busy_starting(job, add)
    for ev in job.by_kind("torch_desync_rank"):
        state = ev.get("state")
        if state == "inconsistent":
            continue  # an inconsistent collective is a desync (DSY1), not a straggler
        why = (f"the desync report says it finished collective #{ev.get('finished')} but didn't join "
               f"#{ev.get('missing')}") if state == "not_joined" else \
            "the desync report says it never joined any collective" if state == "never_joined" else \
            f"the desync report says it joined but didn't finish collective #{ev.get('missing')}"
        for rank in desync_ranks(ev):
            add(Suspect(rank, job.known_ranks().get(rank), why, "high", [ev]))
    for n in named_lagging(job):  # a saved ncclras report: behind the operation count most ranks launched
        add(Suspect(n.rank, n.state, n.reason, n.confidence, n.events, n.pg, host=n.host))
    _work_list_outliers(job, add)
    behind = step_outlier(job)
    if behind is not None and not behind.ahead:
        add(Suspect(behind.rank, job.known_ranks().get(behind.rank), behind.reason, "medium", behind.events))
    short = line_behind(job) if behind is None and (timeouts_by_pg(job) or watchdog_kills(job)) else None
    if short is not None:
        add(Suspect(short.rank, job.known_ranks().get(short.rank),
                    f"its last line, \"{short.last[:100]}\", is the one every other rank wrote just before its own last "
                    f"(\"{short.others[:100]}\"): it never got past that point while they went on and waited",
                    "medium", short.events))
    if not quiet_odd_ones(job)[0]:  # a rank that wrote nothing is the likelier one they waited for
        waited = sum(len(pt.reports) for pt in timeouts_by_pg(job).values())
        late = late_arrivals(job)
        node = {host_of_rank(job, e) for e in late} if len(late) > 1 else set()
        working = still_writing(job, late, [e for e in endings(job).values() if e.how == "timeout"])
        if working is not None:  # one of them was still at work when the others began to wait: that one
            late, node = [e for e in late if e.rank == working.rank], set()
        for e in late:
            if len(node) == 1 and None not in node:  # every rank of one node (see late_arrivals)
                why = (f"no rank of {next(iter(node))} reported a timeout while {plural(waited, 'rank')} on other "
                       "nodes timed out waiting; their only error is that a peer had closed the connection: that "
                       "node stalled (frozen, stopped or cut off) and came back after they gave up")
            elif working is not None:
                why = (f"it was still writing ({working.last.file}:{working.last.line}, {working.after:.0f} s after the "
                       f"last record of any rank that then timed out waiting) and reported no timeout, only that a peer "
                       "had closed the connection: it reached the collective after they gave up, while the other ranks "
                       "that lost a peer had stopped writing with them")
            else:
                why = (f"it reported no timeout while {plural(waited, 'rank')} timed out waiting; its only error is "
                       "that a peer had closed the connection: it reached the collective after they gave up")
            add(Suspect(e.rank, e.state, why, "medium", e.events[:2], host=host_of_rank(job, e)))
    stopped = stuck_when_stopped(job)  # a stalled job killed from outside before any timeout
    if stopped is not None:
        add(Suspect(stopped.rank, stopped.state, stopped.reason, stopped.confidence, stopped.events,
                    what=stopped.what))
    stuck = bool(timeouts_by_pg(job) or watchdog_kills(job))
    for lag in dump_facts(job).lags:  # a collective the others entered and it never did
        if lag.confidence == "low" and not stuck:
            continue  # dumps of a running job taken at different times: the others may just be later
        for rank in lag.behind:
            add(Suspect(rank, job.known_ranks().get(rank), f"its flight-recorder dump shows it {lag.reason}",
                        lag.confidence, lag.evidence[:3], lag.pg))
    return sorted(found.values(), key=lambda s: (s.rank is None, s.rank or 0))


_CONF = {"low": 0, "medium": 1, "high": 2}


#: A timeout in one of a group's first collectives: the barrier/broadcast after start-up.
EARLY_SEQ = 3


def writer_last_line(job: JobModel, ev: Event) -> LastLine | None:
    """The last line written by whoever wrote ``ev`` (its process, launcher rank or local rank), in
    ``ev``'s file; the file's own last line when the file has a single writer."""
    per_file = job.last_lines.get(ev.file) or {}
    st = owner(job, ev)
    keys = [("rank", ev.rank), ("local_rank", ev.local_rank), ("proc", ev.host, ev.pid)]
    if "launcher_pid" in ev.fields:
        keys.append(("lpid", ev.fields.get("launcher_ip"), ev.fields["launcher_pid"]))
    if st is not None:
        keys += [("rank", st.rank), ("proc", st.host, st.pid), ("local_rank", st.local_rank)]
    writers = [k for k in per_file if k is not None]
    if len(writers) <= 1 or (per_rank_layout(job) and st is not None and
                             not any(r is not st and ev.file in r.files and r.rank is not None for r in job.ranks)):
        keys.append(None)
    cands = [per_file[k] for k in keys if k in per_file]
    return max(cands, key=lambda ll: ll.line) if cands else None


@_per_job
def early_timeouts(job: JobModel) -> dict[str, PgTimeouts]:
    """Process groups whose ranks timed out in one of their first collectives: SeqNum <= 3, or, where
    the timeouts carry no SeqNum (gloo's "Timed out waiting"), before the job printed any training
    progress at all (still in start-up)."""
    started = bool(job.by_kind("train_step", "train_epoch"))
    return {pg: pt for pg, pt in timeouts_by_pg(job).items()
            if (pt.seq is not None and pt.seq <= EARLY_SEQ) or (pt.seq is None and not started)}


@_per_job
def still_starting(job: JobModel) -> dict[int | None, list[Event]]:
    """rank -> start-up work lines (model loading, downloads, preprocessing) that were still going on
    when the others timed out in one of the first collectives (``early_timeouts``). A rank that timed
    out itself, or whose log moved on after its start-up lines, had finished starting; where the
    timeouts carry no SeqNum (the job printed no progress at all), start-up lines written in the
    same file before the first timeout report were too."""
    early = list(early_timeouts(job).values())
    if not early:
        return {}
    first_report = {}  # file -> line of the first timeout report in it (timeouts without a SeqNum)
    for pt in early:
        if pt.seq is None:
            for r in pt.reports:
                for e in r.events:
                    first_report[e.file] = min(first_report.get(e.file, e.line), e.line)
    waiting = {r for pt in early for r in pt.ranks}
    stop = min((pt.ts for pt in early if pt.ts is not None), default=None)
    window = max((max(pt.timeouts_ms) for pt in early if pt.timeouts_ms), default=0) / 1000.0
    out: dict[int | None, list[Event]] = defaultdict(list)
    for ev in job.by_kind("startup_work"):
        rank = global_rank(job, ev)
        if rank is not None and rank in waiting:
            continue
        last = writer_last_line(job, ev)
        if last is not None:  # the start-up lines are the end of that writer's log
            busy = ev.line >= last.line - 3
        else:  # else it must have been written after the others began to wait
            busy = ev.ts is not None and stop is not None and abs(ev.ts - stop) < 2 * 86400 \
                and stop - window < ev.ts <= stop + 60
        busy = busy or ev.line < first_report.get(ev.file, -1)
        if busy:
            out[rank].append(ev)
    return dict(out)


def _busy_starting(job: JobModel, add: Callable[[Suspect], None]) -> None:
    """Others timed out in an early collective while this rank was still loading or preprocessing:
    it is the rank they waited for."""
    pt = early_timeouts(job).get("default")
    if pt is None:
        return
    for rank, evs in still_starting(job).items():
        if rank is not None and rank not in pt.ranks:
            what = "; ".join(sorted({str(e.get("detail") or e.get("what")) for e in evs})[:3])
            add(Suspect(rank, job.known_ranks().get(rank), f"it was still busy with start-up work ({what}) while "
                        f"{plural(len(pt.ranks), 'rank')} waited in {early_place(pt)}",
                        "medium", evs[-1:] + pt.lead_events()[:1]))


def early_place(pt: PgTimeouts) -> str:
    """Where the ranks of an early timeout waited: 'BROADCAST SeqNum 1', 'a collective before any training step'."""
    if pt.seq is None:
        return f"{pt.op or 'a collective'} before any training step"
    return f"{pt.op or 'a collective'} SeqNum {pt.seq}"


def _work_list_outliers(job: JobModel, add: Callable[[Suspect], None]) -> None:
    """Heartbeat kills report ``workMetaList_.size()``: the rank(s) with fewer works enqueued lag."""
    by_pg: dict[str, list[WatchdogKill]] = defaultdict(list)
    for w in watchdog_kills(job):
        if w.work_meta_size is not None:
            by_pg[w.pg].append(w)
    for pg, kills in by_pg.items():
        sizes = Counter(w.work_meta_size for w in kills)
        if len(sizes) < 2:
            continue
        low = min(sizes)
        rest = len(kills) - sizes[low]
        if sizes[low] > rest:
            continue  # the majority is low: nothing stands out
        conf = "medium" if rest >= 2 and sizes[low] < rest else "low"
        others = sorted({w.work_meta_size for w in kills if w.work_meta_size != low})
        for w in kills:
            if w.work_meta_size == low:
                add(Suspect(w.rank, w.state, f"its watchdog held {low} works (workMetaList_) against "
                            f"{'/'.join(map(str, others))} on the other ranks: it enqueued fewer collectives",
                            conf, w.events[:1], pg))


def _latest_generation(job: JobModel) -> list[RankState]:
    """One process per rank: after a restart (same rank, new pid) only the latest attempt counts,
    the earlier attempt's further progress says nothing about the new one."""
    latest: dict[int, RankState] = {}
    out = []
    for r in job.ranks:
        if r.rank is None:
            out.append(r)
        elif r.rank not in latest or _starts_after(r, latest[r.rank]):
            latest[r.rank] = r
    return out + list(latest.values())


def _starts_after(a: RankState, b: RankState) -> bool:
    """a's first line comes after b's in a file they share (or a has the later first timestamp)."""
    if a.events and b.events:
        fa, fb = a.events[0], b.events[0]
        if fa.file == fb.file:
            return fa.line > fb.line
        if fa.ts is not None and fb.ts is not None:
            return fa.ts > fb.ts
    return False


@_per_job
def stage_outliers(job: JobModel) -> list[tuple[RankState, str, str]]:
    """(rank, its stage, the stage most others reached) for processes that stopped earlier in NCCL's
    init sequence than at least half of the others (only processes with NCCL stage evidence)."""
    staged = [r for r in _latest_generation(job) if r.stage not in ("none", "finished")]
    if len(staged) < 3:
        return []
    counts = Counter(stage_index(r.stage) for r in staged)
    top = max(counts)
    if counts[top] * 2 < len(staged):
        return []
    top_name = next(r.stage for r in staged if stage_index(r.stage) == top)
    return [(r, r.stage, top_name) for r in staged if stage_index(r.stage) < top]


def strongest(suspects: list[Suspect]) -> list[Suspect]:
    """The suspects named with the highest confidence (the others are weaker hints)."""
    if not suspects:
        return []
    best = max(_CONF[s.confidence] for s in suspects)
    return [s for s in suspects if _CONF[s.confidence] == best]


def suspects_summary(chosen: list[Suspect], what: str) -> str:
    """'rank 3 on gpu-2 <what>: <reason>' or 'N ranks (a-b) on h1, h2 <what>: <reason>'."""
    if len(chosen) == 1:
        s = chosen[0]
        who = s.label or (f"rank {s.rank}" if s.rank is not None else "a process (rank unknown)")
        return f"{who}{' on ' + s.host if s.host else ''} {what}: {s.reason}"
    hosts = sorted({s.host for s in chosen if s.host})
    where = f" on {', '.join(hosts)}" if 0 < len(hosts) <= 3 else ""
    who = count_ranks([s.rank for s in chosen], len(chosen))
    if all(s.rank is None for s in chosen):
        who += " (ranks unknown)"
    return f"{who}{where} {what}: {chosen[0].reason}"
