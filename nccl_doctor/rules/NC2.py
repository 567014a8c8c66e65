"""NC2: NCCL itself ran out of GPU memory (its buffers, not the model's tensors).

Evidence: ``Cuda failure 'out of memory'`` from NCCL (``include/alloc.h``, also nested after
``Last error:`` in a torch error), ``Failed to CUDA calloc N bytes``. NCCL allocates its channel
buffers at communicator init and lazily at the first collective of a new peer/algorithm, so it
fails when the framework has already filled the GPU. Peers of the failing process then log
``Connection closed by remote peer`` / ``Socket recv failed`` — often *before* the OOM line in
a merged log: printing order is not causal order. A framework-level ``CUDA out of memory.
Tried to allocate`` (torch) is RK1's, not this rule's.
"""

from __future__ import annotations

import re

from ..evidence.facts import first_ts, plural
from ..evidence.nccl_facts import in_causal_order, nccl_oom_errors, on, ranks_hosts, transport_errors
from ..model import JobModel
from .base import Rule

_BYTES = re.compile(r"(\d{3,}) bytes")


def check(job: JobModel, rule: Rule) -> list:
    errs = in_causal_order(nccl_oom_errors(job))
    if not errs:
        return []
    ranks, hosts = ranks_hosts(job, errs)
    sizes = [int(m.group(1)) for e in errs for m in [_BYTES.search(e.text)] if m]
    if not sizes:
        sizes = [b for e in errs if isinstance(e.get("bytes"), int) for b in [e.get("bytes")]]
    what = f" ({max(sizes) / 2**20:.1f} MiB)" if sizes else ""
    summary = f"NCCL ran out of GPU memory{on(job, errs)}: a buffer allocation{what} failed"
    echoes = [e for e in transport_errors(job) if e.pid != errs[0].pid or e.host != errs[0].host]
    if echoes:
        summary += (f"; the {plural(len(echoes), 'socket/transport error')} of other processes are consequences "
                    f"(even where printed earlier)")
    return [rule.finding(summary, ranks=ranks, hosts=hosts, evidence=errs[:6] + in_causal_order(echoes)[:2],
                         first_seen=first_ts(errs))]
