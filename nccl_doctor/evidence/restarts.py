"""Restart generations: every event of a job assigned to the attempt (of torchrun's worker group) it
belongs to, from the restart markers in each file (``Worker group FAILED. k/N attempts left``, a
rendezvous with ``restart_count=k``, a worker's own start-up line with its ``restart_count k``, ``attempt_k`` paths, the workers writing again after the agent
reported one failed), and, in files with no marker, by time or by start-up banners printed again.
Read by MN5 (a restart that restored no state, a crash loop)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter

from ..events import Event
from ..model import JobModel
from ..model.job import ERROR_KINDS
from ..model.relays import HOST_BLOCK_KINDS
from .causes import _REPORTS
from .facts import _per_job
from .launcher_facts import attempt_in_path
from .nccl_facts import int_in

#: Lines a process prints once when it starts: seen again after progress, the script re-ran.
_BANNER_KINDS = ("nccl_version", "torch_version", "ds_version", "ds_init_backend")
#: Lines a script writes only as it starts (a checkpoint found or not; with ``rank_world``, its own "rank 1/3"
#: banner): after progress in a file no restart line marks, the next attempt's.
_START_AGAIN = ("checkpoint_load", "checkpoint_none")
#: Worker lines that, after the agent reported a failed worker, show a new attempt running.
_WORKER_START = (*_BANNER_KINDS, "train_step", "train_epoch", "rank_world", "startup_work", "checkpoint_load",
                 "checkpoint_none", "nccl_init")


@dataclass(slots=True)
class Restarts:
    """What the logs say about restarts, with every event assigned to a generation (attempt)."""

    markers: list[Event] = field(default_factory=list)  # restart / restart_count>0 / attempt_k>0
    group_failed: list[Event] = field(default_factory=list)  # pre-torchrun "[default] Worker group failed"
    gen_of: dict[int, int] = field(default_factory=dict)  # id(event) -> generation
    count: int = 0  # highest generation seen
    attempts_left: Event | None = None  # first "k/N attempts left" line


def _numbered(ev: Event) -> bool:
    """A restart marker that carries its own count (not a membership-change echo)."""
    return (ev.kind == "elastic_restart" and ev.get("left") is not None) \
        or (ev.kind in ("elastic_rdzv", "elastic_attempt", "rank_world")
            and (int_in(ev.get("restart_count", ev.get("attempt"))) or 0) > 0)


def _marker_generation(ev: Event, current: int, numbered_job: bool) -> int | None:
    """The generation an event starts, or None when it is not a restart marker.

    When one agent's workers fail, the *other* agents log ``Detected N new nodes ...; will restart
    worker group`` for the same restart: such lines start a generation only in a job with no
    numbered restart evidence (a pure scale-up)."""
    if ev.kind == "elastic_restart" and ev.get("left") is None:
        return current + 1 if not numbered_job else None
    if ev.kind == "elastic_restart":
        left, most = int_in(ev.get("left")), int_in(ev.get("max"))
        # "3/3 attempts left" is printed before the first restart: next attempt = max - left + 1.
        if left is not None and most is not None and most >= left:
            return max(current + 1, most - left + 1)
        return current + 1
    if ev.kind in ("elastic_rdzv", "rank_world"):  # (a worker's own start-up line: "... restart_count 1")
        k = int_in(ev.get("restart_count"))
        return k if k is not None and k > 0 else None
    if ev.kind == "elastic_attempt":
        k = int_in(ev.get("attempt"))
        return k if k is not None and k > 0 else None
    return None


#: The kinds that start a generation, or whose line tells one ended.
_GENERATION_KINDS = ("elastic_restart", "elastic_rdzv", "elastic_attempt", "elastic_failed", "elastic_group_failed")


@_per_job
def segment_restarts(job: JobModel) -> Restarts:
    """Assign every event to a restart generation.

    Within a file, by line order after each restart marker (or by an ``attempt_N`` path). A file
    with no marker (a worker's own log appended across attempts) is placed by timestamp against
    the markers' times when both are known; otherwise it stays in generation 0.
    """
    out = Restarts()
    unmarked: list[list[Event]] = []
    marker_times: list[tuple[float, int]] = []
    numbered_job = any(_numbered(e) for e in job.by_kind("elastic_restart", "elastic_rdzv", "elastic_attempt",
                                                         "rank_world"))
    # Files with no line that can start or end a generation: every event is of generation 0 (which
    # gen_of leaves out: it is what every reader defaults to), and the file is unmarked.
    eventful = {e.file for e in job.by_kind(*_GENERATION_KINDS)} | \
        {e.file for e in job.by_kind("rank_world") if (int_in(e.get("restart_count")) or 0) > 0}
    by_file: dict[str, list[Event]] = {}
    for path, group in groupby(job.events, key=attrgetter("file")):  # (runs of one file: C calls)
        by_file.setdefault(path, []).extend(group)
    for path, events in by_file.items():
        gen = attempt_in_path(path) or 0
        if not gen and path not in eventful:
            if attempt_in_path(path) is None:
                unmarked.append(events)
            continue
        has_marker = False
        agent_failed = False  # a worker failure the agent reported, with no "will restart" line after it
        for i, ev in enumerate(events):
            if ev.kind == "elastic_group_failed":
                out.group_failed.append(ev)
            started = _marker_generation(ev, gen, numbered_job)
            if started is None and gen > 0 and i == 0 and not numbered_job:
                started = gen  # the first line of torchrun's attempt_<k> log folder
            if ev.kind == "elastic_failed":
                agent_failed = True
            elif ev.kind in HOST_BLOCK_KINDS or ev.kind == "file_header":
                # another host's block (dshbak, pssh -i), another file's lines under head's or tail's "==> path <==":
                # its workers, not a new attempt
                agent_failed = False
            elif agent_failed and started is None and ev.kind in _WORKER_START and ev.get("listed") is None:
                # torchrun logs "will restart worker group" at INFO only: the workers writing again
                # after the agent reported one failed is the restart (the table ends the last attempt).
                started, agent_failed = gen + 1, False
            elif started is not None:
                agent_failed = False
            if started is not None:
                has_marker = True
                out.markers.append(ev)
                gen = max(gen, started)
                if ev.ts is not None:
                    marker_times.append((ev.ts, gen))
                if ev.kind == "elastic_restart" and out.attempts_left is None:
                    out.attempts_left = ev
            out.gen_of[id(ev)] = gen
            out.count = max(out.count, gen)
        if not has_marker and attempt_in_path(path) is None:
            unmarked.append(events)
    if not out.markers and job.by_kind("elastic_failed"):
        stopped = {int_in(e.get("pid")) for e in job.by_kind("elastic_failed", "elastic_sigterm", "elastic_cfe")}
        restarted = _two_own_pids(job)  # (only such files are walked: the others cannot hold a start again)
        unmarked = [evs for evs in unmarked
                    if evs[0].file not in restarted or not _new_process_markers(out, evs, stopped - {None})]
    for events in unmarked if out.markers else ():
        _place_unmarked(out, events, marker_times)
    return out


def _two_own_pids(job: JobModel) -> set[str]:
    """Files where start-up lines name two pids of their writers' own or more."""
    pids: dict[str, set[int]] = defaultdict(set)
    for e in job.by_kind("rank_world", "self_pid"):
        if (own := int_in(e.get("self_pid"))) is not None:
            pids[e.file].add(own)
    return {f for f, ps in pids.items() if len(ps) > 1}


def _new_process_markers(out: Restarts, events: list[Event], stopped: set[int]) -> bool:
    """A worker's start-up line naming another pid of its own after it made progress, when its agent had
    stopped or seen fail the process of its previous pid (``stopped``: the pids of "Sending process N
    closing signal", "failed (exitcode: ...) (pid: N)"), in a job that logged no restart (torchrun at its
    default level; a membership change keeps ``restart_count 0``): the same worker started again, the next
    attempt (not another job's rank of that number writing to the same file). Its events take their
    generation by line order; False when the file shows no such line."""
    starts = []
    pid: dict[int, int] = {}  # rank -> the pid its last start-up line named
    progressed: set[int | None] = set()  # ranks with a step line since (None: a step line naming no rank)
    for i, ev in enumerate(events):
        rank = ev.rank if ev.rank is not None else int_in(ev.get("rank"))
        if ev.kind in ("train_step", "train_epoch"):
            progressed.add(rank)
            continue
        own = int_in(ev.get("self_pid")) if ev.kind in ("rank_world", "self_pid") and rank is not None else None
        if own is not None:
            # (a file of several writers: only a rank's own start-up lines say it started again)
            if pid.get(rank, own) != own and progressed & {rank, None} and pid[rank] in stopped:
                starts.append(i)
                progressed.clear()
            pid[rank] = own
    if not starts:
        return False
    gen = 0
    for i, ev in enumerate(events):
        if starts and i == starts[0]:
            starts.pop(0)
            gen += 1
            out.markers.append(ev)
        out.gen_of[id(ev)] = gen
        out.count = max(out.count, gen)
    return True


def _place_unmarked(out: Restarts, events: list[Event], marker_times: list[tuple[float, int]]) -> None:
    """Generations in a file with no restart line, in a job that restarted: by time against the
    markers when the event has a timestamp, else by start-up banners (a process printing its
    banner, its "rank 1/3" line or its checkpoint search again after it made progress is the next
    attempt)."""
    gen, progressed = 0, False
    at_time = [max((g for t, g in marker_times if t <= ev.ts), default=0) if ev.ts is not None else None
               for ev in events] if marker_times else [None] * len(events)
    # An undated line takes the attempt of the next dated one close below it: a worker's traceback is
    # printed before its agent's dated "failed (exitcode: 1)" of the same attempt.
    after: list[int | None] = [None] * len(events)
    nxt, left = None, 0
    for i in range(len(events) - 1, -1, -1):
        if at_time[i] is not None:
            nxt, left = at_time[i], _NEXT_DATED
        elif left:
            left -= 1
            after[i] = nxt
    for i, ev in enumerate(events):
        if progressed and (ev.kind in _BANNER_KINDS or ev.kind in _START_AGAIN
                           or ev.kind == "rank_world" and isinstance(ev.get("rank"), int)):
            gen, progressed = gen + 1, False
        elif ev.kind in ("train_step", "train_epoch"):
            progressed = True
        dated = at_time[i]
        out.gen_of[id(ev)] = dated if dated is not None else max(gen, after[i] or 0)


#: Events above a dated line of an unmarked file that take its attempt (a traceback and its chain).
_NEXT_DATED = 200


@_per_job
def restarted_group_went_on(job: JobModel) -> Event | None:
    """The last step line of the job's last worker group, when torchrun restarted the group and that
    group trained with no failure, timeout or failed exit of its own: the job got over what stopped
    the earlier group (a lost node it went on without, a frozen node that came back). None otherwise."""
    rs = segment_restarts(job)
    if not rs.count:
        return None
    late = [e for e in job.events if rs.gen_of.get(id(e), 0) == rs.count]
    if any(e.kind in ERROR_KINDS or e.kind in _REPORTS for e in late):
        return None
    steps = [e for e in late if e.kind == "train_step" and isinstance(e.get("step"), int)]
    return max(steps, key=lambda e: e.get("step")) if steps else None


def got_over(job: JobModel) -> str:
    """What a silent or lagging rank's verdict adds when the restarted job trained on without failing."""
    last = restarted_group_went_on(job)
    if last is None:
        return ""
    return (f"; torchrun then restarted the worker group and it trained on with no failure (its last step line: "
            f"{last.text[:120]}): the job got over it")
