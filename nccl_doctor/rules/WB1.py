"""WB1: the W&B (wandb) service did not start in time.

During a slow distributed start-up (many ranks, a busy file system) ``wandb.init`` waits for its
background service and gives up after ``WANDB__SERVICE_WAIT`` (30 s by default):
``wandb: ERROR Run initialization has timed out``, ``ServiceStartTimeoutError``, ``Timed out waiting
for wandb service``. The job then looks hung or dies on the ranks that log to W&B, but NCCL is not
involved. A warning: it explains a failure of start-up, not of communication.
"""

from __future__ import annotations

from ..model import JobModel
from .base import Rule
from .facts import first_ts
from .launcher_facts import ranks_text
from .nccl_facts import ranks_hosts


def check(job: JobModel, rule: Rule) -> list:
    timeouts = job.by_kind("wandb_timeout")
    if not timeouts:
        return []
    ranks, hosts = ranks_hosts(job, timeouts)
    who = ""
    if ranks:
        who = f" on {ranks_text(ranks)}"
    elif hosts:
        who = f" on {', '.join(hosts)}"
    files = len({e.file for e in timeouts})
    spread = f" ({len(timeouts)} lines in {files} file{'s' if files > 1 else ''})" if len(timeouts) > 1 else ""
    first = min(timeouts, key=lambda e: (e.ts is None, e.ts or 0.0, e.file, e.line))
    return [rule.finding(
        f"W&B timed out starting its service{who}{spread}: {first.text.strip()[:120]} "
        "— a logging start-up problem, not an NCCL one",
        severity="warning", confidence="high", ranks=ranks, hosts=hosts,
        evidence=[first] + [e for e in timeouts if e is not first][:4], first_seen=first_ts(timeouts))]
