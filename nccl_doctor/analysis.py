"""The one engine behind the CLI, the TUI and the library: paths -> events -> job -> findings -> report."""

from __future__ import annotations

import dataclasses
import gc
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .discover import InputError, InputFile, discover
from .events import Event, Skipped
from .evidence.outside import stopped_from_outside
from .evidence.status import assign_statuses, consequence_statuses
from .findings import Finding, Severity
from .model import JobModel, build_job
from .model.hosts import as_written
from .model.order import restore as restore_order
from .model.runs import earlier_runs_in_files, split_runs
from .rasjson import split_ras_json
from .scan_events import fix_years
from .scanner import FileScan, Scanner

#: Below this many bytes a process pool costs more than it saves.
PARALLEL_MIN_BYTES = 32 << 20

Progress = Callable[[int, int, str], None]


@dataclass(slots=True)
class Report:
    """Everything one analysis found. ``to_dict()`` is the JSON contract (``report/jsonout.py``)."""

    job: JobModel
    findings: list[Finding]
    verdict: dict[str, Any] | None
    last_rank_to_report: dict[str, Any] | None
    inputs: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: Why no log content was found (empty files, no complete line, no line of a known format), or
    #: None. Such a report is never healthy: its exit status is 2 and the CLI prints this one line.
    nothing_found: str | None = None

    @property
    def exit_status(self) -> int:
        if self.nothing_found:
            return 2
        return 1 if any(f.severity.level >= Severity.WARNING.level for f in self.findings) else 0

    def to_dict(self) -> dict[str, Any]:
        from .report.jsonout import report_dict

        return report_dict(self)


_SCANNERS: dict[str, Scanner] = {}
#: Engine names: ``auto`` (the default: the fast scan path over Hyperscan's literal hits when the
#: wheel is there), ``fast`` (the same, said explicitly), ``python`` (the general per-line path for
#: every candidate line; the reference the fast path is tested against), ``hyperscan`` / ``re`` (the
#: general path with that prefilter engine forced).
ENGINES = ("auto", "fast", "python", "hyperscan", "re")


def _scanner(engine: str | None = None) -> Scanner:
    name = (engine or os.environ.get("NCCL_DOCTOR_ENGINE") or "auto").lower()
    sc = _SCANNERS.get(name)
    if sc is None:
        if name not in ENGINES:
            raise ValueError(f"unknown engine {name!r} (one of {', '.join(ENGINES)})")
        prefilter = name if name in ("hyperscan", "re") else "auto"
        if name in ("auto", "fast"):
            from .fastscan import FastScanner

            sc = FastScanner(engine=prefilter)
        else:
            sc = Scanner(engine=prefilter)
        _SCANNERS[name] = sc
    return sc


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one analysis, then restore it.

    An analysis builds up to millions of small objects (events, their fields) and frees almost none
    until it ends, so every collection would walk them all again for nothing: a fifth of the time
    at 4k ranks and a growing share beyond. The objects hold no reference cycles that need it.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _scan_batch(files: list[InputFile], engine: str | None = None, documents: bool = False) -> list[FileScan]:
    sc = _scanner(engine)
    sniff = document_head if documents else None
    with gc_paused():
        return [sc.scan(f, sniff) for f in files]


def document_head(head: bytes) -> bool:
    """A file's first bytes may be a document's: a pickle (a flight-recorder dump) or an ncclras
    JSON report. What ``_flight_recorder`` opens each file to look at, asked of the scan's first
    chunk instead (see ``scan_documents``)."""
    from .rasjson import looks_like

    try:
        from .flightrec.decode import sniff
    except ImportError:  # (as _flight_recorder: no dump is read then)
        return looks_like(head)
    return sniff(head[:64]) == "pickle" or looks_like(head)


def scan_files(files: list[InputFile], jobs: int | None = None, progress: Progress | None = None,
               engine: str | None = None, documents: bool = False) -> list[FileScan]:
    """Scan files, in parallel processes when the input is large; order of results = order of files.
    ``documents``: a file that starts like a document is not scanned (``FileScan.document``)."""
    total = sum(f.size for f in files)
    jobs = jobs or os.cpu_count() or 1
    if jobs <= 1 or total < PARALLEL_MIN_BYTES or len(files) < 2 or any(f.real == "-" for f in files):
        out = []
        sc = _scanner(engine)
        sniff = document_head if documents else None
        for i, f in enumerate(files):
            out.append(sc.scan(f, sniff))
            if progress:
                progress(i + 1, len(files), f.path)
        return out
    # Batches balanced by bytes, several per worker so progress moves and stragglers even out.
    nb = min(len(files), jobs * 8)
    batches: list[list[int]] = [[] for _ in range(nb)]
    sizes = [0] * nb
    for i in sorted(range(len(files)), key=lambda i: -files[i].size):
        j = sizes.index(min(sizes))
        batches[j].append(i)
        sizes[j] += files[i].size
    results: list[FileScan | None] = [None] * len(files)
    done = 0
    if multiprocessing.get_start_method() == "fork":
        _scanner(engine)  # compiled once here: forked workers inherit it instead of each compiling its own
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futs = [(b, pool.submit(_scan_batch, [files[i] for i in b], engine, documents)) for b in batches if b]
        for b, fut in futs:
            for i, scan in zip(b, fut.result(), strict=True):
                results[i] = scan
            done += len(b)
            if progress:
                progress(done, len(files), files[b[-1]].path)
    return [r for r in results if r is not None]


def analyze(paths: Iterable[str] | str, *, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
            min_severity: Severity | str = Severity.INFO, jobs: int | None = None,
            progress: Progress | None = None, engine: str | None = None) -> Report:
    """Analyse log files/folders/globs (``-`` = stdin) and return a Report.

    Raises InputError when nothing analysable was found (the CLI turns it into exit status 2).
    """
    if isinstance(paths, str):
        paths = [paths]
    paths = list(paths)
    files, skipped = discover(paths)
    if not files and not skipped:
        raise InputError(f"nothing to analyse: no file in {', '.join(paths[:3]) or 'the paths given'}")
    with gc_paused():
        dump_events, scans, dump_skipped = scan_documents(files, jobs=jobs, progress=progress, engine=engine)
        return analyze_scans(scans, skipped + dump_skipped, select=select, ignore=ignore,
                             min_severity=min_severity, extra_events=dump_events)


def scan_documents(files: list[InputFile], jobs: int | None = None, progress: Progress | None = None,
                   engine: str | None = None) -> tuple[list[Event], list[FileScan], list[Skipped]]:
    """``_flight_recorder`` and ``scan_files`` in one pass over the files: (events of the documents,
    scans of the logs in the order of ``files``, documents not read). A log is opened once: the scan
    tells the files that start like a document, which are then read as ``_flight_recorder`` reads
    them (a file it gives back as a log after all is scanned then)."""
    named = {i for i, f in enumerate(files) if f.real != "-" and _dump_named(f.path)}
    rest = [i for i in range(len(files)) if i not in named]
    scanned = dict(zip(rest, scan_files([files[i] for i in rest], jobs=jobs, progress=progress, engine=engine,
                                        documents=True), strict=True))
    candidates = sorted(named | {i for i, s in scanned.items() if s.document})
    if not candidates:
        return [], list(scanned.values()), []
    events, logs, skipped = _flight_recorder([files[i] for i in candidates])
    back = {id(f) for f in logs}
    sc = _scanner(engine)
    for i in candidates:
        if id(files[i]) in back:
            scanned[i] = sc.scan(files[i])
        else:
            scanned.pop(i, None)
    return events, [scanned[i] for i in sorted(scanned)], skipped


def _dump_named(path: str) -> bool:
    try:
        from .flightrec import is_dump_name
    except ImportError:
        return False
    return is_dump_name(path)


def _flight_recorder(files: list[InputFile]) -> tuple[list[Event], list[InputFile], list[Skipped]]:
    """Documents among the inputs become events -- flight-recorder dumps, and ncclras reports in JSON
    (``ncclras -f json``) -- the rest are logs to scan. (``watch`` calls this too.)"""
    try:
        from .flightrec import split_dumps
    except ImportError:
        events: list[Event] = []
        skipped: list[Skipped] = []
    else:
        events, files, skipped = split_dumps(files)
    ras_events, files, ras_skipped = split_ras_json(files)
    return events + ras_events, files, skipped + ras_skipped


def analyze_scans(scans: list[FileScan], skipped: list[Skipped], *, select=None, ignore=None,
                  min_severity: Severity | str = Severity.INFO, extra_events: list[Event] | None = None,
                  live: Any = None) -> Report:
    """``live``: the live progress model and the time now (``evidence.stall.Live``), from ``watch``."""
    from . import rules

    skipped = list(skipped)
    read = []
    for s in scans:
        if s.skipped:
            skipped.append(Skipped(s.path, s.skipped))
        else:
            read.append(s)
            if s.issue:
                skipped.append(Skipped(s.path, f"partly read: {s.issue}"))
            elif not s.lines:
                skipped.append(Skipped(s.path, "empty: no log line"))
    if not read and not extra_events:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:3]) or "no files found"
        raise InputError(f"nothing to analyse ({reasons})")
    read, earlier = split_runs(read)  # a folder holding an earlier run too: the latest one is analysed
    appended = earlier_runs_in_files(read)  # a file a later run was appended to: its latest run
    events = [e for s in read for e in s.events] + list(extra_events or [])
    nothing = None if events else nothing_recognised(read, skipped)
    fix_years(events, _years(read, extra_events or []), read)
    job = build_job(events, read)
    job.live = live
    assign_statuses(job)  # derived evidence: who failed, lagged, went silent or only waited
    findings, notes = rules.run(job, select=select, ignore=ignore, min_severity=min_severity)
    written = as_written(job.hosts, job.files)  # (a node the logs only name fully qualified: as they write it)
    for f in findings if written else ():
        f.hosts, f.blame_hosts = [written.get(h, h) for h in f.hosts], [written.get(h, h) for h in f.blame_hosts]
    if job.partial_logs:
        seen, world = job.coverage() or (0, 0)
        notes.insert(0, f"the logs cover {seen:,} of {world:,} ranks: they are partial, so the {world - seen:,} "
                        "ranks without a line are not named as missing")
    notes[:0] = appended
    if earlier:
        names = ", ".join(s.path for s in earlier[:3]) + (f" and {len(earlier) - 3} more" if len(earlier) > 3 else "")
        notes.insert(0, f"these files hold more than one run of the job: the latest is analysed, and "
                        f"{plural_files(len(earlier))} of earlier runs left out ({names}); analyse those apart to see "
                        "how they ended")
    stop = stopped_from_outside(job)
    if stop:
        notes.append(f"the job was stopped from outside ({job.place(stop[0])}: {_how_stopped(stop[0])}): a "
                     "preemption, a scheduler's time limit or cancel, an operator; not a failure of the job")
    notes += restore_order(job, findings)  # (newest-first files: their own line numbers from here on)
    verdict, last = _verdict(job, findings)
    consequence_statuses(job, verdict)  # (after the verdict: a rank it names is no consequence)
    inputs = {
        "files": len(read),
        "lines": sum(s.lines for s in read),
        "bytes": sum(s.bytes for s in read),
        "unparsed_lines": sum(s.unparsed for s in read),
        "skipped": [k.to_dict() for k in skipped],
    }
    if nothing:
        notes = [nothing, *notes]
    return Report(job=job, findings=findings, verdict=verdict, last_rank_to_report=last, inputs=inputs, notes=notes,
                  nothing_found=nothing)


def _how_stopped(ev: Event) -> str:
    """What the line that says the job was stopped from outside says (the report's note)."""
    if ev.kind == "shell_job_died":
        return (f"the job script's shell reports the launcher it ran (pid {ev.get('pid')}) killed, SIGKILL; its "
                "workers were left orphaned")
    sig = ev.get("sig") if ev.kind in ("elastic_death_signal", "launcher_signalled") else None
    if sig is not None:
        who = "torchrun" if ev.kind == "elastic_death_signal" else "the launcher"
        return f"{who} received signal {sig} and shut its workers down"
    return "Slurm cancelled it" + (" at its time limit" if "TIME LIMIT" in ev.text else "")


def plural_files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def nothing_recognised(read: list[FileScan], skipped: list[Skipped]) -> str:
    """Why files that were read give nothing to analyse: empty, cut short, or no known line at all.
    Never a healthy verdict: an answer about nothing would be a lie."""
    lines = sum(s.lines for s in read)
    names = ", ".join(s.path for s in read[:2]) + (f" and {len(read) - 2} more" if len(read) > 2 else "")
    if not lines:
        what = f"no log line in {names}" + (" (empty)" if all(not s.issue for s in read) else "")
    else:
        what = (f"the only line in {names} is not" if lines == 1 else f"none of the {lines:,} lines in {names} is") + \
            " one nccl-doctor knows (NCCL, PyTorch, launcher or training output)"
    cut = [k for k in skipped if k.reason.startswith("partly read")]
    if cut:
        what += f"; {cut[0].path} was cut short ({cut[0].reason.removeprefix('partly read: ')})"
    return f"nothing to analyse: {what}"


def refresh_live(report: Report, live: Any, *, select=None, ignore=None,
                 min_severity: Severity | str = Severity.INFO) -> Report:
    """The report with its live findings (stall, straggler) judged again at ``live.now``: time
    passed, no line arrived, so nothing else can have changed."""
    from . import rules

    job = report.job
    job.live = live
    fresh, notes = rules.run(job, select=select, ignore=ignore, min_severity=min_severity, live_only=True)
    live_ids = {r.id for r in rules.registry if r.live}
    before = [f for f in report.findings if f.rule in live_ids]
    findings = rules.sort_findings([f for f in report.findings if f.rule not in live_ids] + fresh)
    if _shapes(before) == _shapes(fresh):  # only wording moved ("no progress for 64 s"): same verdict
        verdict, last = report.verdict, report.last_rank_to_report
    else:
        verdict, last = _verdict(job, findings)
    notes = list(dict.fromkeys(report.notes + notes))
    return dataclasses.replace(report, findings=findings, verdict=verdict, last_rank_to_report=last, notes=notes)


def _shapes(findings: list[Finding]) -> list[tuple]:
    return sorted(f.material for f in findings)


def _verdict(job: JobModel, findings: list[Finding]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The verdict (with its one-line headline) and the last rank to report."""
    from .headline import headline
    from .verdict import decide

    verdict, last = decide(job, findings)
    if verdict:
        verdict["headline"], verdict["rules"] = headline(job, findings, verdict)
    return verdict, last


def _years(scans: list[FileScan], extra: list[Event]) -> dict | None:
    """Year -> dated events over every event read (also those the files' caps did not keep), in
    the order the events come; None when a scan did not count them (incremental scans)."""
    if any(s.years is None for s in scans):
        return None
    years: dict[int, int] = {}
    for s in scans:
        for y, n in s.years.items():
            years[y] = years.get(y, 0) + n
    for e in extra:
        if e.ts is not None and "mmdd" not in e.fields:
            y = time.gmtime(e.ts).tm_year
            years[y] = years.get(y, 0) + 1
    return years


def _stderr_progress() -> Progress | None:
    if sys.stderr is None or not sys.stderr.isatty():
        return None

    def show(done: int, total: int, path: str) -> None:
        sys.stderr.write(f"\rreading {done}/{total} files ")
        if done == total:
            sys.stderr.write("\r" + " " * 40 + "\r")
        sys.stderr.flush()

    return show
