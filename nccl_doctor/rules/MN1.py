"""MN1: a node whose NVSwitch fabric (nvidia-fabricmanager) is not up cannot join the job.

Evidence, strongest first:

* CUDA error 802 ``system not yet initialized`` (cudaErrorSystemNotReady) from NCCL
  (``Cuda failure 802 'system not yet initialized'``), nested in a torch error (``Last error:``),
  from nccl-tests, or a fabric-manager line reporting a failure: error, high confidence;
* ``transport/nvls.cc ... Cuda failure ... invalid argument`` during init: NVLink SHARP buffers
  refused by the fabric. Error, medium confidence; low when versions differ across ranks or the
  driver is older than the runtime (the look-alike, see NV1);
* alone, ranks of one host stopping earlier in the NCCL init sequence (e.g. no topology, channel
  or ``Init COMPLETE`` lines) than every rank of every other host, while those started
  communicator init: a warning, low confidence, because a dead or slow node looks the same (RK2).

The culprit is the host that reported the failure (or the host that stopped early).
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..evidence.facts import first_ts, plural
from ..evidence.nccl_facts import driver_too_old, fabric_errors, in_causal_order, nvls_errors, on, ranks_hosts
from ..model import JobModel, stage_index
from .base import Rule

#: Kinds that show a process is stuck for another, already-explained reason (not the fabric).
_OTHER_CAUSES = frozenset({"nccl_connect_err", "nccl_shm", "nccl_alloc_fail", "nccl_dup_gpu", "nccl_no_iface",
                           "cuda_oom", "nccl_ib_cqe", "nccl_ofi_error"})


def check(job: JobModel, rule: Rule) -> list:
    strong = in_causal_order(fabric_errors(job))
    nvls = in_causal_order(nvls_errors(job))
    early_host, stuck, reached = _host_stopped_early(job)
    early_evidence = stuck + reached

    if strong or nvls:
        evidence = (strong or nvls)[:5] + (nvls[:2] if strong else [])
        ranks, hosts = ranks_hosts(job, strong or nvls)
        if early_host and (not hosts or early_host in hosts):
            evidence += early_evidence[:2]
            hosts = sorted(set(hosts) | {early_host})
        if strong:
            what = _what(strong)
            confidence = "high"
        else:
            what = "NVLS (NVLink SHARP) setup failed in transport/nvls.cc with Cuda failure 'invalid argument'"
            confidence = "low" if _versions_suspect(job) else "medium"
        place = on(job, strong or nvls)
        summary = (f"{what}{place}: the NVSwitch fabric of that node is not initialised "
                   f"(nvidia-fabricmanager stopped, crashed or at a different version than the driver)")
        if hosts and len(hosts) == 1 and hosts[0] not in place:
            summary += f"; node {hosts[0]}"
        if early_host:
            summary += "; its ranks stopped in NCCL init while every other host's ranks got further"
        if confidence == "low":
            summary += "; versions differ across ranks or the driver is older than the CUDA runtime, " \
                       "which gives the same nvls error (see NV1)"
        return [rule.finding(summary, confidence=confidence, ranks=ranks, hosts=hosts, evidence=evidence,
                             first_seen=first_ts(evidence))]

    if early_host:
        ranks, _ = ranks_hosts(job, stuck)
        n = len([r for r in job.ranks if r.host == early_host])
        summary = (f"{'the ' + plural(n, 'rank') if n != 1 else 'the rank'} on {early_host} stopped earlier in NCCL init than every rank on the other "
                   f"hosts (their last lines are evidence): a node whose NVSwitch "
                   f"fabric manager is down looks like this, but so does a dead or stalled node (check RK2)")
        return [rule.finding(summary, severity="warning", confidence="low", ranks=ranks, hosts=[early_host],
                             evidence=early_evidence, first_seen=first_ts(early_evidence))]
    return []


def _what(strong: list[Event]) -> str:
    """What the evidence lines themselves say: the code 802 only when a line names it."""
    texts = [e.text.lower() for e in strong]
    if any("802" in t for t in texts):
        return "CUDA error 802 'system not yet initialized' (cudaErrorSystemNotReady)"
    if any("system not yet initialized" in t for t in texts):
        return "CUDA error 'system not yet initialized'"
    return "the fabric manager reported a failure"


def _host_stopped_early(job: JobModel) -> tuple[str | None, list[Event], list[Event]]:
    """The single host whose ranks all stopped at an earlier NCCL init stage than every rank elsewhere.

    Only ranks that logged some NCCL line count, the other hosts' ranks must have started
    communicator init (Init START or later), and a host whose ranks show another failure
    (connect, shm, OOM, duplicate GPU, transport) is explained by that failure's rule.
    """
    by_host: dict[str, list] = defaultdict(list)
    for r in job.ranks:
        if r.host and stage_index(r.stage) >= stage_index("started") and r.stage != "finished":
            by_host[r.host].append(r)
    if len(by_host) < 2:
        return None, [], []
    top = {h: max(stage_index(r.stage) for r in rs) for h, rs in by_host.items()}
    low = min(top.values())
    early = [h for h, t in top.items() if t == low]
    others = [r for h, rs in by_host.items() if h not in early for r in rs]
    if len(early) != 1 or not others:  # every host stopped at the same stage: nobody is early
        return None, [], []
    floor = min(stage_index(r.stage) for r in others)
    if floor <= low or floor < stage_index("init_start"):
        return None, [], []
    stuck = by_host[early[0]]
    if any(e.kind in _OTHER_CAUSES for r in stuck for e in r.events):
        return None, [], []
    last_lines = [r.events[-1] for r in stuck if r.events][:4]
    reached = [e for r in others for e in r.events if e.kind == "nccl_init"]
    return early[0], last_lines, reached[-2:]


def _versions_suspect(job: JobModel) -> bool:
    """The nvls look-alike: different NCCL/CUDA builds across ranks, or a driver older than the runtime."""
    if len(job.versions("nccl")) > 1 or len(job.versions("nccl_cuda")) > 1:
        return True
    return bool(driver_too_old(job))
