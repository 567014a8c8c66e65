"""NC1: /dev/shm too small for NCCL's shared-memory transport (typical in containers).

Evidence: ``failed to extend /dev/shm/nccl-* ... No space left on device``, ``Error while creating
shared memory segment``, ``posix_fallocate failed``; also a DataLoader worker killed because it ran
out of shared memory (same cause, same fix). Docker's default /dev/shm is 64 MB; NCCL needs a few
MB per peer and channel. The ``-> 2`` / ``socket.cc -> 3`` lines that follow are echoes.
"""

from __future__ import annotations

import re

from ..evidence.facts import first_ts
from ..evidence.nccl_facts import in_causal_order, on, ranks_hosts, shm_errors
from ..model import JobModel
from .base import Rule

_SIZE = re.compile(r"(?:to|size) (\d{4,})(?: bytes)?")


def check(job: JobModel, rule: Rule) -> list:
    errs = in_causal_order(shm_errors(job))
    if not errs:
        return []
    nccl = [e for e in errs if e.kind in ("nccl_shm", "nccl_warn", "nccl_socket_err")]
    first = (nccl or errs)[0]
    ranks, hosts = ranks_hosts(job, errs)
    size = _SIZE.search(first.text)
    need = f" (a {int(size.group(1)) / 2**20:.1f} MiB segment)" if size else ""
    if nccl:
        summary = (f"/dev/shm is full{on(job, nccl)}: NCCL could not create its shared-memory "
                   f"segment{need} for intra-node transport; later '-> 2'/'-> 3' lines are echoes")
        confidence = "high"
    else:
        summary = (f"a DataLoader worker{on(job, errs)} ran out of shared memory (/dev/shm): "
                   f"the container's /dev/shm is too small")
        confidence = "medium"
    return [rule.finding(summary, confidence=confidence, ranks=ranks, hosts=hosts, evidence=errs[:6],
                         first_seen=first_ts(errs))]
