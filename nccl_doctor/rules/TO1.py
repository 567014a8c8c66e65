"""TO1 error handling disabled: a dead peer leaves the others hanging forever.

Warning when a rank's ProcessGroupNCCL options/environment show ``(TORCH_)NCCL_ASYNC_ERROR_HANDLING:
0`` with blocking wait off (the collective timeout is then never enforced). Error when the job
hung silently: training progress stopped, the logs went on for much longer than the step interval
(or until a scheduler cancel, an operator's Ctrl-C, a preemption: then a minute is long enough), and
no watchdog, timeout or crash was ever reported.
"""

from __future__ import annotations

from ..events import Event
from ..evidence import facts
from ..evidence.facts import fmt_ms
from ..evidence.hang import silent_hang
from ..findings import Finding, Severity
from ..model import JobModel
from .base import Rule

_VARS = ("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING")


def check(job: JobModel, rule: Rule) -> list[Finding]:
    disabled = _disabled(job)
    hang = silent_hang(job)
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
