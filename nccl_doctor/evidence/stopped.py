"""A job that stalled and was stopped from outside before any timeout fired: who was stuck.

In production the collective timeout is long (10-30 min) and a hung job is usually killed first: a
``timeout`` wrapper, the scheduler's time limit, an operator's Ctrl-C, a deadline. Then no rank times
out and no rank fails on its own: every rank just stops. What tells the stuck rank is where each one
was when the signal came:

* a stack faulthandler dumped on the signal, or the traceback of the KeyboardInterrupt it raised: the
  others in a collective (torch.distributed frames), the stuck one elsewhere (its own code, a sleep, a
  lock, a data loader);
* a lost peer: a rank that saw the connection close was in a collective with the one that left;
* else its last step line: the others all printed one step more.

One rank must stand apart from all the others that say where they were. A job stopped while healthy
(a preemption) has none: its ranks were all between steps, or all in a collective.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..events import Event, by_place
from ..model import JobModel, RankState
from .behind import lone_last_line
from .causes import _PEER_GONE
from .facts import _per_job, plural
from .failures import failures
from .launcher_facts import progress_key, progress_text
from .outside import STOP_TYPES, interrupted, launcher_killed, stopped_from_outside
from .pids import self_pid_rank
from .stacks import in_collective, own_dump, where
from .timeouts import timeouts_by_pg, watchdog_kills
from .tracebacks import frames_above, script_name

_EXCEPTION = frozenset(("python_exception",))


@dataclass(slots=True, frozen=True)
class Stuck:
    rank: int
    state: RankState
    reason: str
    confidence: str
    events: list[Event]
    what: str = ""  # what befell it, when not "lagged behind" (Suspect.what)


def _killed_after_grace(job: JobModel, known: dict[int, RankState]) -> Stuck | None:
    """The agent had to SIGKILL one worker that ignored the stop ("Unable to shutdown process N via 15,
    forcefully exiting via 9") while the others exited; the one rank (three at least) whose last line
    is not the one every other rank ended on (their "exiting for preemption") is that worker: it was
    stuck where its own last line left it (a save that never finished)."""
    forced = {e.get("pid") for e in job.by_kind("elastic_forced_kill")}
    lasts = {r: st.last_line for r, st in known.items() if st.last_line is not None}
    rank = lone_last_line(lasts) if len(forced) == 1 and len(lasts) == len(known) else None
    if rank is None:
        return None
    peer = next(r for r in lasts if r != rank)
    kill = job.by_kind("elastic_forced_kill")[0]
    ev = Event("last_line", lasts[rank].file, lasts[rank].line, rank=rank, text=lasts[rank].text)
    return Stuck(rank, known[rank], f"the job was stopped from outside and its agent had to kill one worker that "
                 f"ignored the signal ({job.place(kill)}); every other rank's last line is "
                 f"\"{lasts[peer].text[:80]}\", rank {rank}'s \"{lasts[rank].text[:80]}\": it was stuck there",
                 "medium", [ev, kill], what="stuck when stopped")


def _position(st: RankState) -> tuple[bool, str, list[Event]] | None:
    """(in a collective, where in words, evidence) of a rank when the job was stopped, or None."""
    dump = own_dump(st)
    if dump is not None:
        return in_collective(dump), where(dump, others_too=False), dump[:2]
    evs = st.events
    lost = next((e for e in evs if e.kind == "python_exception" and _PEER_GONE.search(str(e.get("msg") or ""))), None)
    if lost is not None:  # (its own stop came after: what it was doing when the other left says more)
        return True, "in a collective (it lost the connection to a peer there)", [lost]
    for i in range(len(evs) - 1, -1, -1):
        exc = evs[i]
        if exc.kind != "python_exception":
            continue
        etype = str(exc.get("exc_type") or "")
        text = str(exc.get("msg") or "") or exc.text
        if _PEER_GONE.search(text):
            return True, "in a collective (it lost the connection to a peer there)", [exc]
        if not etype.endswith(STOP_TYPES):
            return None
        frames = [f for f in frames_above(evs, i, _EXCEPTION) if f.kind in ("torch_c10d_frame", "py_script_frame")]
        if not frames:
            return None
        if any(f.kind == "torch_c10d_frame" for f in frames):
            return True, f"in {frames[0].get('op') or 'a collective'}", [exc]
        inner = frames[0]  # (innermost first)
        return False, f"in {inner.get('func')} ({script_name(inner)}:{inner.get('srcline')})", [inner, exc]
    return None


@_per_job
def stuck_when_stopped(job: JobModel) -> Stuck | None:
    """The one rank that was not where all the others were when the job was stopped from outside."""
    if timeouts_by_pg(job) or watchdog_kills(job) or any(not f.recovered for f in failures(job)):
        return None
    if not stopped_from_outside(job) and not interrupted(job):
        return None
    known = {r: st for r, st in job.known_ranks().items() if st is not None}
    if len(known) < 2:
        return None
    left = _left_running(job, known) or _killed_after_grace(job, known)
    if left is not None:
        return left
    where_at: dict[int, tuple[bool, str, list[Event]]] = {}
    for rank, st in known.items():
        pos = _position(st)
        if pos is not None:
            where_at[rank] = pos
    outside = [r for r, p in where_at.items() if not p[0]]
    inside = [r for r, p in where_at.items() if p[0]]
    stalled = _stalled(job)
    if stalled is False:
        return None  # the ranks printed steps up to the stop: a running job stopped (a preemption), not a hang
    behind = _behind(job, known)
    if len(outside) == 1 and inside and (stalled or (behind is not None and behind.rank == outside[0])):
        # Where the signal found each rank is a snapshot: a healthy job's ranks are all over the place at any
        # moment. It says who was stuck only when the job had stalled before the stop, or that rank was
        # also a step behind.
        rank = outside[0]
        odd = where_at[rank]
        peer = where_at[inside[0]]
        return Stuck(rank, known[rank], f"the job was stopped from outside while it stalled: when the signal came "
                     f"it was {odd[1]}, while {plural(len(inside), 'other rank')} "
                     f"{'was' if len(inside) == 1 else 'were'} {peer[1]}", "high", odd[2] + peer[2][:1])
    return behind


def _left_running(job: JobModel, known: dict[int, RankState]) -> Stuck | None:
    """Every rank reached the same last step, the job was stopped from outside, and torchrun's own
    closing signals went to one process only, which a rank's start-up line names as its pid: the
    others had exited, that rank never did (a thread that never stops, an exit path that hangs)."""
    last = {r: st.last_step for r, st in known.items()}
    if None in last.values() or len(set(last.values())) != 1:
        return None
    sent = job.by_kind("elastic_sigterm")
    pids = {e.get("pid") for e in sent}
    if len(pids) != 1:
        return None
    pid = next(iter(pids))
    rank = self_pid_rank(job, pid)
    if rank not in known:
        return None
    said = [e for e in job.by_kind("self_pid") if e.get("self_pid") == pid]
    return Stuck(rank, known[rank], f"every rank reached step {last[rank]}, and when the job was stopped from outside "
                 f"torchrun had only this rank's process (pid {pid}) left to stop", "medium", [sent[0], said[0]],
                 what="never exited after training")


#: A stall before the stop, when the step lines are dated: this long with no step, and this many intervals.
STALL_S = 10.0
STALL_STEPS = 3


def _stalled(job: JobModel) -> bool | None:
    """True when the dated step lines stopped well before the logs' end (the stop), False when they ran
    up to it, None when the step lines carry no time. A launcher killed from outside (``outside.
    launcher_killed``: an operator's kill -9, not a scheduler's preemption) whose shell's line has no
    time is never said to have come right after the last step: None then too."""
    times = sorted(e.ts for e in job.by_kind("train_step") if e.ts is not None)
    if len(times) < 3:
        return None
    ends = [e.ts for e in job.events if e.ts is not None]
    if max(ends) <= times[-1] and launcher_killed(job):
        return None
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    interval = sorted(gaps)[len(gaps) // 2] if gaps else 0.0
    return max(ends) - times[-1] >= max(STALL_S, STALL_STEPS * interval)


def _behind(job: JobModel, known: dict[int, RankState]) -> Stuck | None:
    """Every rank printed its steps; one's last is behind all the others', who agree."""
    last: dict[int, Event] = {}
    for rank, st in known.items():
        steps = [e for e in st.events if e.kind == "train_step" and progress_key(e) is not None]
        if len(steps) < 2:
            return None
        last[rank] = max(steps, key=by_place)
    keys = {r: progress_key(e) for r, e in last.items()}
    if len(keys) < 2:
        return None
    top = max(keys.values())
    behind = [r for r, k in keys.items() if k < top]
    if len(behind) != 1 or len(known) - 1 < 1:
        return None
    rank = behind[0]
    peer = next(e for r, e in last.items() if r != rank)
    return Stuck(rank, known[rank], f"the job was stopped from outside while it stalled: rank {rank}'s last step "
                 f"line is {progress_text(last[rank])} while the other {plural(len(known) - 1, 'rank')} all reached "
                 f"{progress_text(peer)}: it never got to the collective they waited in", "medium",
                 [last[rank], peer])
