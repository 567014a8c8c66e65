"""Several runs of one job in the inputs: a log folder that also holds an earlier attempt.

At 3 a.m. the folder given often holds more than the run that just failed: yesterday's run, a
resubmission's predecessor, a first attempt that failed another way. Merging them mixes two runs'
ranks (rank 2's error of the first run beside rank 0's hang of the second). The runs are told apart
by time: each file spans the time of its dated lines (or, with none, the time its name gives:
``train.20261127-155405.log``, ``logs/20261127-155452.err``); files whose spans overlap are one run.
Two runs are two only when the later one names most of the earlier one's ranks (a rerun), so that nodes
whose clocks differ, or a report written later (an ncclras dump), are never cut off, and never in a
job that restarted itself (torchrun's restarts, --log-dir attempts: one job, whose first failure is
the story). The latest run is the one analysed; the others are named in a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from operator import attrgetter

from ..timeparse import _epoch
from .identity import logdir_slot
from .job import ERROR_KINDS, TIMEOUT_KINDS
from .relays import HOST_BLOCK_KINDS

#: A date and time in a file's name or folder: 20261127-155405, 2026-11-27_15-54-05, 20261127T155405.
_NAME_TIME = re.compile(r"(?<!\d)(20\d\d)-?([01]\d)-?([0-3]\d)[-_T.]?([0-2]\d)[-_:]?([0-5]\d)[-_:]?([0-5]\d)(?!\d)")
#: Seconds by which two spans may miss each other and still be one run (clocks, buffered lines).
SLACK_S = 2.0
_KIND, _RANK, _TS = attrgetter("kind"), attrgetter("rank"), attrgetter("ts")
#: Event kinds that say a run restarted itself (then its attempts are one job).
_RESTART_KINDS = frozenset(("elastic_restart", "elastic_rdzv"))


@dataclass(slots=True)
class _Span:
    lo: float
    hi: float
    ranks: set
    scans: list


def name_time(path: str) -> float | None:
    found = list(_NAME_TIME.finditer(path.replace("\\", "/")))
    if not found:
        return None
    m = found[-1]  # (the last one: the file's own name before its folders')
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups())
    return _epoch(y, mo, d, h, mi, s)


def _has_table(scan) -> bool:
    """The file holds a launcher's failure table (C-level: most files hold none)."""
    return "elastic_cfe" in set(map(_KIND, scan.events))


#: What a run's end alone holds: its errors and timeouts, their tracebacks, its launcher's report.
_END_KINDS = ERROR_KINDS | TIMEOUT_KINDS | {"traceback_start", "py_script_frame", "py_lib_frame", "py_signal_frame",
                                             "torch_c10d_frame"}


def _only_an_end(run: _Span) -> bool:
    """Every line read in the run's files is of its end: a failure's tracebacks and its agent's lines."""
    return all(k in _END_KINDS or k.startswith("elastic_") for s in run.scans for k in set(map(_KIND, s.events)))


def _ended(run: _Span) -> bool:
    """The run's files hold its launcher's failure table: torchrun exited there."""
    return any(_has_table(s) for s in run.scans)


def split_runs(scans: list) -> tuple[list, list]:
    """(the scans of the latest run, the scans of earlier runs: empty when there is one run)."""
    if len(scans) < 2:
        return scans, []
    spans: list[_Span] = []
    loose = []
    for s in scans:
        slot = logdir_slot(s.path)
        if slot is not None and not slot[0].endswith("attempt_0"):
            return scans, []
        evs = s.events  # (C-level passes: a job has millions of events)
        if not _RESTART_KINDS.isdisjoint(map(_KIND, evs)):
            return scans, []
        ranks = set(map(_RANK, evs))
        ranks.discard(None)
        times = [t for t in map(_TS, evs) if t is not None]
        named = name_time(s.path)
        if not ranks or (not times and named is None):
            loose.append(s)  # (a job script's own output, a report: placed by the ranks' files, kept)
            continue
        # the time a name gives is the file's creation, the run's start: its lines come after it
        lo, hi = (min(times), max(times)) if times else (named, named)
        if named is not None and times:
            lo = min(lo, named)
        spans.append(_Span(lo, hi, ranks, [s]))
    # a run's streams share a name (train.out and train.err): one run whatever their times say
    by_stem: dict[str, _Span] = {}
    for sp in spans:
        stem = sp.scans[0].path.rsplit(".", 1)[0]
        other = by_stem.get(stem)
        if other is None:
            by_stem[stem] = sp
        else:
            other.lo, other.hi = min(other.lo, sp.lo), max(other.hi, sp.hi)
            other.ranks |= sp.ranks
            other.scans.extend(sp.scans)
    spans = list({id(sp): sp for sp in by_stem.values()}.values())
    if len(spans) < 2:
        return scans, []
    spans.sort(key=lambda sp: sp.lo)
    runs = [spans[0]]
    for sp in spans[1:]:
        last = runs[-1]
        if sp.lo <= last.hi + SLACK_S:  # (in place: thousands of files merge into one run)
            last.hi = max(last.hi, sp.hi)
            last.ranks |= sp.ranks
            last.scans.extend(sp.scans)
        else:
            runs.append(sp)
    if len(runs) < 2:
        return scans, []
    latest = runs[-1]
    earlier = runs[:-1]
    # A rerun names the ranks the earlier runs named, or (a rank that hung in it may have said nothing)
    # most of them when the earlier run ended in its launcher's failure table; else the "runs" are nodes
    # (disjoint ranks), reports, workers' own files that stop before their console's table.
    if not latest.ranks or any(not r.ranks or not (r.ranks <= latest.ranks or (
            2 * len(r.ranks & latest.ranks) >= len(r.ranks) and _ended(r))) for r in earlier):
        return scans, []
    if _only_an_end(latest) and not all(_only_an_end(r) for r in earlier):
        # The later "run" is tracebacks and its agent's report only, the earlier one ran: one run whose last
        # node reported seconds after the others (its ranks waited out a timeout; t429_kill9's hpc-g301 told
        # its failure table 11 s after hpc-g302's). A rerun shows a run of its own (a banner, steps).
        return scans, []
    dropped = [s for r in earlier for s in r.scans]
    # a file with neither ranks nor times goes with the run whose files share its name (train.attempt1.out
    # beside train.attempt1.err)
    stems = {s.path.rsplit(".", 1)[0] for s in dropped}
    dropped += [s for s in loose if s.path.rsplit(".", 1)[0] in stems]
    keep = {id(s) for s in dropped}
    return [s for s in scans if id(s) not in keep], dropped


#: Progress a rank prints only while its run is alive (a new run's banner, its steps).
_PROGRESS = frozenset(("rank_world", "train_step"))


def earlier_runs_in_files(scans: list) -> list[str]:
    """A file that a later run of the job was appended to (``nohup.out``, ``>> train.log``, a job
    script run again): torchrun prints its failure table as it exits, and the workers it lists are
    gone by then; when one of them prints progress again further down (its banner, a step), a new
    run started there. The lines up to the last such table are earlier runs': left out (the report
    names them). Files of several nodes appended together (``tee -a``) are not cut: a node's table
    lists only its own workers, and those never speak after it."""
    notes = []
    gone: set[str] = set()  # the error lines of the earlier runs cut off, and of the runs kept
    kept: set[str] = set()
    for s in scans:
        if not _has_table(s):
            continue
        cut = _last_rerun(s.events)
        if cut:
            gone.update(e.text for e in s.events if e.line <= cut and e.kind in _ERRORS)
            kept.update(e.text for e in s.events if e.line > cut and e.kind in _ERRORS)
            s.events = [e for e in s.events if e.line > cut]
            notes.append(f"{s.path} holds more than one run of the job (a later run was appended to it): its lines up "
                         f"to {cut} (through the failure table that ended one) are earlier runs', left out; the latest "
                         "run is analysed")
    if gone:
        notes += _copies_of_earlier(scans, gone - kept, kept)
    return notes


#: Lines whose text tells one run from another (the same step lines recur in every run of a seeded job).
_ERRORS = ERROR_KINDS | {"gloo_timeout"}


def _copies_of_earlier(scans: list, gone: set[str], kept: set[str]) -> list[str]:
    """Files that hold an earlier run's errors only (a worker's --log-dir file of a run whose console
    output, copied by --tee, was cut off above; a reused log folder keeps every run's), and the
    other files of that run's --log-dir folder: left out too."""
    folders = {id(s): _run_folder(s.path) for s in scans}
    earlier: set[str] = set()  # run folders (the parent of attempt_N) of an earlier run
    for s in scans:
        errors = {e.text for e in s.events if e.kind in _ERRORS}
        if errors and errors & gone and not errors & kept:
            earlier.add(folders[id(s)])
    notes = []
    for s in scans:
        if folders[id(s)] in earlier and s.events:
            s.events = []
            notes.append(f"{s.path} holds an earlier run's output (its errors are those of the run cut off above): left out")
    return notes


def _run_folder(path: str) -> str:
    """A --log-dir file's run folder (the parent of its attempt_N), else the file itself."""
    slot = logdir_slot(path)
    return slot[0].rsplit("/", 1)[0] if slot else path


def _last_rerun(events: list) -> int:
    """The line ending the last failure table after which a worker it lists prints progress again (0: none).

    A start-up banner that names no rank ("attempt 2: world size 3, ...") counts too when the file
    held one launcher so far (its glog lines all of one agent pid): no other node's workers write
    there, so a worker starting after that launcher exited is a new run's."""
    tables: list[tuple[int, set, bool]] = []  # (the line ending it, the global ranks it lists, one agent)
    rows: set = set()
    agents: set = set()
    for e in events:
        agent = e.fields.get("agent_pid")
        if agent is not None:
            agents.add(agent)
        if e.kind != "elastic_cfe":
            continue
        rank = e.fields.get("rank")
        if isinstance(rank, int):
            rows.add(rank)
        if e.fields.get("root_cause"):  # (the root cause closes a table: torchrun prints it last)
            tables.append((e.line, rows, len(agents) == 1))
            rows = set()
    # A file of per-host blocks (pdsh's output sorted by dshbak, pssh -i): a block after the table's is
    # another host's output, never a later run; so is another file's under head's or tail's "==> path <==".
    blocks = [e.line for e in events if e.kind in HOST_BLOCK_KINDS or e.kind == "file_header"]
    cut = 0
    for last, ranks, one_agent in tables:
        end = min((b for b in blocks if b > last), default=None)
        if ranks and any(e.kind in _PROGRESS and e.line > last and (end is None or e.line < end) and (
                e.rank in ranks or (one_agent and e.rank is None and e.kind == "rank_world")) for e in events):
            cut = last
    return cut
