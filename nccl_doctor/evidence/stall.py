"""Stall and straggler facts from the live progress model (rules ST1 and ST2).

The writers of ``evidence.progress`` are grouped into processes with the job model's identities
(a rank's torch lines and its NCCL file are one process). A **stall**: the whole job made no
progress for longer than its threshold (the ``--stall-after`` floor, ``STALL_FACTOR`` usual
intervals, and twice the longest pause it already recovered from in the same phase, so that a
periodic checkpoint is learned after its first occurrence). Who to look at first, in this order:

1. a process that reported an error after its last progress;
2. a process whose last line shows it in a phase (a checkpoint save, an evaluation, a data load)
   that the other processes did not reach or already left;
3. the process(es) behind the others in opCount, SeqNum or step (a minority of them);
4. the process that stopped writing clearly before the others;
5. nobody: the facts say so (all stopped together, in the same place).

A job that has **no rhythm yet** (fewer than ``MIN_GAPS`` intervals between progress lines: it hung
before its first steps, or it logs no progress at all) may still be starting: loading a model or
preparing data can take minutes without a line. Its stall waits for ``STARTUP_FACTOR`` times the
floor (5 minutes by default, far sooner than a collective timeout of 10 or 30), or twice the longest
gap it has shown, and is judged over every process seen (a rank that stopped writing long before the
others is exactly the one to name). Only a job seen running counts: lines that were all there when
watching began (a job that ended long ago) never make a stall.

A **straggler**: a minority process whose lag behind a position the others reached (or how late it
reached its last position) passes ``STRAGGLER_FACTOR`` usual intervals (at least
``STRAGGLER_FLOOR`` seconds), while the job itself is not judged on it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

from ..model import JobModel
from ..model.identity import file_rank
from .facts import name_ranks
from .progress import PHASE_WORDS, STARTUP_FACTOR, WRITER_KINDS, Mark, ProgressTracker, WriterProgress

STALL_FACTOR = 10.0
PAUSE_MARGIN = 2.0
STRAGGLER_FACTOR = 8.0
STRAGGLER_FLOOR = 5.0
#: Two processes stopped writing "clearly" apart when this many usual intervals (at least
#: FIRST_STOP_FLOOR seconds) separate their last lines.
FIRST_STOP_FACTOR = 3.0
FIRST_STOP_FLOOR = 3.0

SIGNAL_WORDS = {"op": "opCount", "seq": "SeqNum", "step": "step"}


@dataclass(slots=True)
class Live:
    """What the incremental analyzer attaches to ``JobModel.live``: the model and the time now."""

    tracker: ProgressTracker
    now: float
    #: ``time.time() - clock()``: shows arrival times (clock seconds) as wall-clock times.
    wall_offset: float = 0.0

    def wall(self, t: float) -> str:
        return time.strftime("%H:%M:%S UTC", time.gmtime(t + self.wall_offset))


@dataclass(slots=True, eq=False)  # compared by identity: one object per process
class Process:
    """One process's progress, merged from its writers."""

    ident: tuple
    label: str
    rank: int | None
    host: str | None
    pid: int | None
    writers: list[WriterProgress] = field(default_factory=list)
    last: Mark | None = None
    progress: Mark | None = None
    phase: tuple[str, Mark] | None = None
    error: Mark | None = None
    positions: dict = field(default_factory=dict)  # signal -> (position, Mark)
    lateness: dict = field(default_factory=dict)
    done: bool = False

    def add(self, w: WriterProgress) -> None:
        self.writers.append(w)
        self.done = self.done or w.done
        self.last = _later(self.last, w.last)
        self.progress = _later(self.progress, w.progress)
        if w.phase is not None and (self.phase is None or w.phase[1].t > self.phase[1].t):
            self.phase = w.phase
        self.error = _later(self.error, w.error)
        for signal, (value, mark) in w.positions.items():
            if signal not in self.positions or value > self.positions[signal][0]:
                self.positions[signal] = (value, mark)
                self.lateness[signal] = w.lateness.get(signal, 0.0)


def _later(a: Mark | None, b: Mark | None) -> Mark | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if (b.t, b.line) > (a.t, a.line) else a


@dataclass(slots=True)
class Stall:
    since: float  # clock time of the job's last progress
    quiet: float
    threshold: float
    usual: float | None  # None: no rhythm learned yet (the job stalled while starting)
    why: str  # error | phase | behind | first_stop | none
    reason: str
    suspects: list[Process]
    others: list[Process]
    evidence: list[tuple[Mark, int | None]]  # a line and the rank that wrote it


@dataclass(slots=True)
class Straggler:
    proc: Process
    signal: tuple
    position: int
    frontier: int
    lag: float  # how long it has been behind, or how late it reached its last position
    threshold: float
    others: list[Process]  # the processes past its position
    evidence: list[tuple[Mark, int | None]]


# ---- processes ------------------------------------------------------------------------------------

class _Index:
    def __init__(self, job: JobModel):
        self.by_rank = job.known_ranks()
        self.by_proc = {(r.host, r.pid): r for r in job.ranks if r.host and r.pid is not None}
        self.by_local = {(f, r.local_rank): r for r in job.ranks if r.local_rank is not None for f in r.files}
        self.by_pid = {(f, r.pid): r for r in job.ranks if r.pid is not None for f in r.files}
        self.by_file: dict[str, list] = defaultdict(list)
        for r in job.ranks:
            for f in r.files:
                self.by_file[f].append(r)


def processes(job: JobModel, writers: list[WriterProgress] | None = None) -> list[Process]:
    """The tracker's writers (all, or those given) grouped into processes."""
    tr = job.live.tracker
    idx = _Index(job)
    out: dict[tuple, Process] = {}
    for w in tr.writers.values() if writers is None else writers:
        proc = _identity(w, tr, idx)
        if proc is None:
            continue
        have = out.get(proc.ident)
        if have is None:
            have = out[proc.ident] = proc
        have.add(w)
    return sorted(out.values(), key=lambda p: (p.rank is None, p.rank or 0, p.label))


def _identity(w: WriterProgress, tr: ProgressTracker, idx: _Index) -> Process | None:
    file, key = w.file, w.key
    if key is None:
        keyed = [k for k in tr.file_keys.get(file, ()) if k is not None and k[0] in WRITER_KINDS]
        if len(keyed) > 1:
            return None  # a shared console's own lines (the launcher's): no process of the job
        if keyed:
            key = keyed[0]
        else:
            states = idx.by_file.get(file, [])
            if len(states) == 1:
                return _of_state(states[0], ("file", file), file)
            r = file_rank(file)
            if r is not None:
                return _of_state(idx.by_rank.get(r), ("rank", r), f"rank {r}", rank=r)
            return Process(("file", file), file, None, None, None)
    kind = key[0]
    if kind == "rank":
        return _of_state(idx.by_rank.get(key[1]), ("rank", key[1]), f"rank {key[1]}", rank=key[1])
    if kind == "proc":
        return _of_state(idx.by_proc.get((key[1], key[2])), ("proc", key[1], key[2]), f"{key[1]}:{key[2]}",
                         host=key[1], pid=key[2])
    if kind == "local_rank":
        rs = idx.by_local.get((file, key[1]))
        r = file_rank(file)
        if (rs is None or rs.rank is None) and r is not None:  # a launcher's label in a file of one rank
            return _of_state(idx.by_rank.get(r), ("rank", r), f"rank {r}", rank=r)
        return _of_state(rs, ("local", file, key[1]), f"local rank {key[1]} of {file}")
    return _of_state(idx.by_pid.get((file, key[2])), ("lpid", file, key[1], key[2]), f"pid {key[2]} of {file}",
                     pid=key[2])


def _of_state(rs, ident: tuple, label: str, rank: int | None = None, host: str | None = None,
              pid: int | None = None) -> Process:
    if rs is not None and rs.rank is not None:
        return Process(("rank", rs.rank), f"rank {rs.rank}", rs.rank, rs.host, rs.pid)
    if rs is not None:
        host, pid = rs.host or host, rs.pid if rs.pid is not None else pid
    return Process(ident, label, rank, host, pid)


@dataclass(slots=True)
class _Judged:
    """What the live rules derive from one job model and one state of the progress model: valid
    until either changes, so that judging again as time passes costs almost nothing."""

    procs: list[Process]  # the processes taking part in the job's recent progress
    single: tuple | None = None  # _single_out(procs), once asked
    #: for a job with no rhythm: (every process seen, _single_out of them or None), once asked
    startup: tuple | None = None
    #: per signal: (signal, processes reporting it, [(due, proc, position, furthest, since, lateness,
    #: allowed)] by due time: when that process becomes late enough to be a straggler)
    late: list = field(default_factory=list)
    deadline: float = float("inf")  # the earliest time a process can be a straggler


def _judged(job: JobModel) -> _Judged:
    tr = job.live.tracker
    cached = tr.judged
    if cached is not None and cached[0] is job and cached[1] == tr.version:
        return cached[2]
    j = _Judged(processes(job, tr.active()))
    usual = tr.usual
    if usual is not None:
        floor = max(STRAGGLER_FLOOR, STRAGGLER_FACTOR * usual)
        for signal in _signals(j.procs):
            having = [p for p in j.procs if signal in p.positions]
            top = max(p.positions[signal][0] for p in having)
            rows = []
            for p in having:
                value = p.positions[signal][0]
                since = tr.went_past(signal, value) if value < top else None
                allowed = floor
                if p.phase is not None:
                    allowed = max(floor, PAUSE_MARGIN * tr.pause_allowance((p.phase[0],)))
                late = p.lateness.get(signal, 0.0)
                due = -float("inf") if late >= allowed else (since + allowed if since is not None else None)
                if due is not None:
                    rows.append((due, p, value, top, since, late, allowed))
                    j.deadline = min(j.deadline, due)
            rows.sort(key=lambda r: r[0])
            j.late.append((signal, len(having), rows))
    tr.judged = (job, tr.version, j)
    return j


def _active(job: JobModel) -> list[Process]:
    return _judged(job).procs


# ---- the stall ------------------------------------------------------------------------------------

def stall(job: JobModel) -> Stall | None:
    """The job stalled (see the module docstring), or None (batch analysis: never)."""
    live = job.live
    if live is None:
        return None
    tr = live.tracker
    if tr.last_progress is None:
        return None
    usual = tr.usual
    quiet = live.now - tr.last_progress
    if usual is None:
        return _startup_stall(job, tr, quiet)
    threshold = max(tr.stall_after, STALL_FACTOR * usual, PAUSE_MARGIN * tr.pause_allowance())
    if quiet < threshold:
        return None
    j = _judged(job)
    procs = j.procs
    if procs and all(p.done for p in procs):
        return None  # the job finished: quiet is what it should be
    if j.single is None:
        j.single = _single_out(procs, usual)
    why, suspects, reason, evidence = j.single
    others = [p for p in procs if p not in suspects]
    return Stall(tr.last_progress, quiet, threshold, usual, why, reason, suspects, others, evidence)


def _startup_stall(job: JobModel, tr, quiet: float) -> Stall | None:
    """The stall of a job with no rhythm yet (see the module docstring), or None."""
    if tr.first_live is None:
        return None  # never seen running: every line was there when watching began
    threshold = max(STARTUP_FACTOR * tr.stall_after, PAUSE_MARGIN * max(tr.gaps, default=0.0))
    if quiet < threshold:
        return None
    j = _judged(job)  # (judged once per state of the models, as the stall of a job with a rhythm)
    if j.startup is None:
        procs = processes(job, tr.counted())
        j.startup = (procs, None if not procs or all(p.done for p in procs) else
                     _single_out(procs, tr.stall_after / STALL_FACTOR))
    procs, single = j.startup
    if single is None:
        return None
    why, suspects, reason, evidence = single
    others = [p for p in procs if p not in suspects]
    return Stall(tr.last_progress, quiet, threshold, None, why, reason, suspects, others, evidence)


def _single_out(procs: list[Process], usual: float) -> tuple:
    failed = [p for p in procs if p.error is not None]
    if failed:
        return ("error", failed, f"{names(failed)} reported an error after {_its(failed)} last progress",
                [(p.error, p.rank) for p in failed] + _progress_marks(failed))
    in_phase = [p for p in procs if p.phase is not None]
    if in_phase and len(in_phase) < len(procs):
        others = [p for p in procs if p.phase is None]
        phases = sorted({p.phase[0] for p in in_phase})
        what = " and ".join(PHASE_WORDS.get(n, n) for n in phases)
        left = [p for p in others if any(n in w.left for w in p.writers for n in phases)]
        verb = "already left" if len(left) == len(others) else "did not enter"
        return ("phase", in_phase,
                f"{_is(in_phase)} in {what} that {names(others)} {verb}",
                [(p.phase[1], p.rank) for p in in_phase] + _progress_marks(in_phase) + _progress_marks(others[:1]))
    for signal in _signals(procs):
        vals = {id(p): p.positions[signal][0] for p in procs if signal in p.positions}
        top = max(vals.values())
        behind = [p for p in procs if id(p) in vals and vals[id(p)] < top]
        if behind and 2 * len(behind) <= len(vals):
            ahead = [p for p in procs if vals.get(id(p)) == top]
            word = SIGNAL_WORDS[signal[0]]
            at = ", ".join(fmt_position(signal, v) for v in sorted({vals[id(p)] for p in behind}))
            return ("behind", behind,
                    f"{_is(behind)} behind: at {word} {at} while {names(ahead)} reached {word} "
                    f"{fmt_position(signal, top)}",
                    _position_marks(behind, signal) + _position_marks(ahead[:1], signal))
    lasts = sorted((p for p in procs if p.last is not None), key=lambda p: p.last.t)
    if len(lasts) >= 2 and lasts[1].last.t - lasts[0].last.t >= max(FIRST_STOP_FLOOR, FIRST_STOP_FACTOR * usual):
        first, rest = lasts[0], lasts[1:]
        return ("first_stop", [first],
                f"{first.label} stopped writing first, {lasts[1].last.t - first.last.t:.0f} s before {names(rest)}",
                [(first.last, first.rank), (rest[0].last, rest[0].rank)])
    return ("none", [], _nothing(procs), [(p.last, p.rank) for p in procs[:3] if p.last is not None])


def _nothing(procs: list[Process]) -> str:
    if not procs:
        return "nothing singles a rank out (no writer of the job reported progress recently)"
    if len(procs) == 1:
        p = procs[0]
        where = f", {PHASE_WORDS.get(p.phase[0], p.phase[0])} by its last line" if p.phase else ""
        return f"nothing singles a rank out: only {p.label} reports progress{where}"
    lasts = [p.last.t for p in procs if p.last is not None]
    spread = max(lasts) - min(lasts) if lasts else 0.0
    bits = [f"{names(procs)} stopped writing within {spread:.0f} s of each other"]
    for signal in _signals(procs):
        vals = {p.positions[signal][0] for p in procs if signal in p.positions}
        if len(vals) == 1:
            bits.append(f"all at {SIGNAL_WORDS[signal[0]]} {fmt_position(signal, vals.pop())}")
            break
    phases = {p.phase[0] for p in procs if p.phase is not None}
    if len(phases) == 1 and all(p.phase is not None for p in procs):
        bits.append(f"all in {PHASE_WORDS.get(next(iter(phases)), 'one phase')}")
    return "nothing singles a rank out: " + ", ".join(bits)


def fmt_position(signal: tuple, value: int) -> str:
    """As the logs print it: NCCL's opCount in hex, SeqNums and steps in decimal."""
    return f"{value:x}" if signal[0] == "op" else str(value)


def _signals(procs: list[Process]) -> list[tuple]:
    """Signals at least two processes report, strongest first (opCount, SeqNum, step)."""
    count: dict[tuple, int] = defaultdict(int)
    for p in procs:
        for s in p.positions:
            count[s] += 1
    order = {"op": 0, "seq": 1, "step": 2}
    return sorted((s for s, n in count.items() if n >= 2), key=lambda s: (order.get(s[0], 9), str(s)))


# ---- words ----------------------------------------------------------------------------------------

def names(procs: list[Process]) -> str:
    """'ranks 0-1, 3', with the labels of processes whose rank is unknown ('local rank 2 of x.log')."""
    named = [p for p in procs if p.rank is not None and p.ident[0] == "rank"]
    rest = [p.label for p in procs if all(p is not q for q in named)]
    parts = [name_ranks(p.rank for p in named)] if named else []
    parts.extend(rest[:6])
    if len(rest) > 6:
        parts.append(f"{len(rest) - 6} more")
    return ", ".join(parts) or "the others"


def _is(procs: list[Process]) -> str:
    return names(procs) + (" is" if len(procs) == 1 else " are")


def _its(procs: list[Process]) -> str:
    return "its" if len(procs) == 1 else "their"


def _progress_marks(procs: list[Process]) -> list[tuple[Mark, int | None]]:
    return [(p.progress, p.rank) for p in procs if p.progress is not None]


def _position_marks(procs: list[Process], signal: tuple) -> list[tuple[Mark, int | None]]:
    return [(p.positions[signal][1], p.rank) for p in procs if signal in p.positions]


__all__ = ["Live", "Process", "Stall", "Straggler", "fmt_position", "names", "processes", "stall"]
