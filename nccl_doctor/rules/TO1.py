"""TO1 error handling disabled: a dead peer leaves the others hanging forever.

Warning when a rank's ProcessGroupNCCL options/environment show ``(TORCH_)NCCL_ASYNC_ERROR_HANDLING:
0`` with blocking wait off (the collective timeout is then never enforced). Error when the job
hung silently: training progress stopped, the logs went on for much longer than the step interval
(or until a scheduler cancel), and no watchdog, timeout or crash was ever reported.
"""

from __future__ import annotations

from statistics import median

from ..events import Event
from ..evidence import facts
from ..evidence.facts import fmt_ms
from ..findings import Evidence, Finding, Severity
from ..model import JobModel
from .base import Rule

_VARS = ("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING")
#: A hang is a gap with no progress of at least this long, and this many step intervals.
MIN_GAP_S = 1800.0
MIN_GAP_STEPS = 20


def check(job: JobModel, rule: Rule) -> list[Finding]:
    disabled = _disabled(job)
    hang = _silent_hang(job)
    if not disabled and hang is None:
        return []
    parts: list[str] = []
    evidence: list[Event] = []
    ranks: list[int | None] = []
    if hang is not None:
        gap_s, last_step, end = hang
        what = "training progress" if isinstance(last_step, Event) and last_step.kind == "train_step" else \
            "the job's output"
        parts.append(f"{what} stopped {fmt_ms(gap_s * 1000)} before the logs end and no watchdog, "
                     "timeout or crash was reported: a silent hang")
        evidence += [last_step, end]
    if disabled:
        ranks = [facts.global_rank(job, e) for e in disabled]
        who = facts.name_ranks(ranks) or "this job"
        parts.append(f"async error handling is off on {who} (ASYNC_ERROR_HANDLING=0, blocking wait off), so a "
                     "dead or stuck peer is never turned into an error")
        evidence = disabled[:4] + evidence
    severity = Severity.ERROR if hang is not None else Severity.WARNING
    return [rule.finding("; ".join(parts), severity=severity, confidence="medium" if hang else "high",
                         ranks=ranks, hosts=[facts.host_of(job, e) for e in disabled], evidence=evidence,
                         first_seen=facts.first_ts(e for e in evidence if isinstance(e, Event)))]


def _disabled(job: JobModel) -> list[Event]:
    """Option/environment lines that switch error handling off (and blocking wait is not on)."""
    out = []
    blocking = any(e.get("blocking_wait") == 1 for e in job.by_kind("torch_pg_env"))
    blocking |= any(e.get("var") in ("NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT")
                    and str(e.get("val")).strip() == "1" for e in job.by_kind("nccl_env"))
    if blocking:
        return []
    for e in job.by_kind("torch_pg_env", "nccl_env"):
        if e.kind == "torch_pg_env" and e.get("async_error_handling") == 0:
            out.append(e)
        elif e.kind == "nccl_env" and e.get("var") in _VARS and str(e.get("val")).strip().rstrip(".") == "0":
            out.append(e)
    seen: set = set()
    unique = []
    for e in out:  # one line per rank is enough
        key = facts.global_rank(job, e) if facts.global_rank(job, e) is not None else (e.file, e.host, e.pid)
        if key not in seen:
            seen.add(key)
            unique.append(e)
    return unique


def _silent_hang(job: JobModel) -> tuple[float, Event, Event | Evidence] | None:
    """(seconds without progress, last step line, last line) when the job stalled with no error."""
    if facts.job_failed(job) or any(r.stage == "finished" for r in job.ranks):
        return None
    quiet = _quiet_after_output(job)
    steps = sorted((e for e in job.by_kind("train_step") if e.ts is not None), key=lambda e: e.ts)
    # Every step line's time (files keep only some step events: see nccl_doctor.eventcap).
    times = job.step_times if job.step_times is not None else [e.ts for e in steps]
    if len(times) < 2:
        return quiet
    # The end of the logs: the latest timed event or last line of any writer.
    ends: list[tuple[float, Event | Evidence]] = [(e.ts, e) for e in job.events if e.ts is not None]
    ends += [(ll.ts, Evidence(ll.file, ll.line, None, ll.text)) for per_file in job.last_lines.values()
             for ll in per_file.values() if ll.ts is not None]
    end_ts, end = max(ends, key=lambda te: te[0])
    last = steps[-1]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    interval = median(gaps) if gaps else 0.0
    gap = end_ts - last.ts
    if gap >= max(MIN_GAP_S, MIN_GAP_STEPS * interval):
        return gap, last, end
    return quiet


def _quiet_after_output(job: JobModel) -> tuple[float, Event | Evidence, Evidence] | None:
    """The job's own (launcher-labelled) output stopped, and lines from outside the job (a status
    cron, the scheduler) kept arriving in the same file for at least MIN_GAP_S: a hang with no error.
    The job's lines carry no time here; the outside lines' timestamps measure the silence."""
    best = None
    for path, (first, last, job_line) in job.quiet.items():
        span = last - first
        if span >= MIN_GAP_S and (best is None or span > best[0]):
            ll = job.last_lines.get(path, {}).get(None)
            end = Evidence(path, ll.line, None, ll.text) if ll is not None else Evidence(path, job_line, None, "")
            progress = [e for e in job.by_kind("train_step") if e.file == path and e.line <= job_line]
            stop = progress[-1] if progress else next((e for e in job.events if e.file == path and e.line == job_line), None)
            text = next((x.text for x in job.last_lines.get(path, {}).values() if x.line == job_line), "")
            best = (span, stop or Evidence(path, job_line, None, text), end)
    return best
