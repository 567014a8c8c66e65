"""WB1: the W&B (wandb) service did not start in time.

During a slow distributed start-up (many ranks, a busy file system) ``wandb.init`` waits for its
background service and gives up after ``WANDB__SERVICE_WAIT`` (30 s by default):
``wandb: ERROR Run initialization has timed out``, ``ServiceStartTimeoutError``, ``Timed out waiting
for wandb service``. The job then looks hung or dies on the ranks that log to W&B, but NCCL is not
involved. A warning; an error when that rank is the job's first failure (it died on the W&B
timeout and the other ranks' timeouts followed), so the verdict names W&B as the cause.
"""

from __future__ import annotations

from ..evidence.facts import first_failure, first_ts
from ..evidence.launcher_facts import ranks_text, short
from ..evidence.nccl_facts import ranks_hosts
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list:
    timeouts = job.by_kind("wandb_timeout")
    if not timeouts:
        return []
    ranks, hosts = ranks_hosts(job, timeouts)
    who = f" on {ranks_text(ranks)}" if ranks else (f" on {', '.join(hosts)}" if hosts else "")
    files = len({e.file for e in timeouts})
    spread = f" (in {files} files)" if files > 1 else ""
    first = min(timeouts, key=lambda e: (e.ts is None, e.ts or 0.0, e.file, e.line))
    evidence = [first] + [e for e in timeouts if e is not first][:4]
    summary = f"W&B timed out starting its service{who}{spread}: {short(first, 80)}"

    failed = first_failure(job)
    w_ts = first_ts(timeouts)
    killed = failed is not None and failed.rank is not None and failed.rank in ranks \
        and (w_ts is None or failed.ts is None or failed.ts >= w_ts)
    if killed:
        # That rank's exit is the job's first failure: W&B, not NCCL, started the cascade.
        return [rule.finding(
            f"{summary}; rank {failed.rank} then exited ({failed.what}) and the other ranks' waits followed "
            "— a logging start-up problem, not an NCCL one",
            severity="error", confidence="high", ranks=ranks, hosts=hosts,
            evidence=evidence + failed.events[:1], first_seen=w_ts)]
    return [rule.finding(f"{summary} — a logging start-up problem, not an NCCL one",
                         severity="warning", confidence="high", ranks=ranks, hosts=hosts,
                         evidence=evidence, first_seen=w_ts)]
