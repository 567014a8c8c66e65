"""NCCL-level facts shared by MN1, MN2, MN4, NET1, NC1, NC2, CFG1, NCX, NV1 and NV2.

Small questions over the job model that several of those rules ask: which events are the
specific NCCL failures (so that NCX does not report them twice and NET1 knows an echo from a
cause), where a ``-> N`` return-code chain starts, which host a peer address belongs to, which
network each host selected, and whether an event happened during or after communicator init.

The transport errors, their tiers and the peers they name live in ``transport.py``; the networks
each host selected in ``netsel.py``. Every name of both is importable from here as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, stage_index
from .facts import failures, fmt_ranks, global_rank, host_of, int_in, proc_key, writer

#: ncclResult_t values, as printed in ``file.cc:NNN -> N`` propagation lines.
RESULT_NAMES = {1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
                4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress"}

# ---- small event helpers -------------------------------------------------------------------------
# (``int_in``, ``writer`` and ``proc_key`` are the ones of ``facts``, importable from here too.)


def low(ev: Event) -> str:
    """The event's text and message fields, lower-cased, for phrase tests."""
    extra = " ".join(str(ev.fields[k]) for k in ("err", "msg", "detail", "exc") if ev.fields.get(k))
    return f"{ev.text} {extra}".lower()


def ranks_hosts(job: JobModel, events: Iterable[Event]) -> tuple[list[int], list[str]]:
    evs = list(events)
    ranks = sorted({r for r in (global_rank(job, e) for e in evs) if r is not None})
    hosts = sorted({h for h in (host_of(job, e) for e in evs) if h})
    return ranks, hosts


def who(job: JobModel, events: Iterable[Event]) -> str:
    """'rank 3 on gpu-07' / 'ranks 0-2, 5 on gpu-07' / 'gpu-07 (pid 4711)'; '' when nothing is known."""
    evs = list(events)
    ranks, hosts = ranks_hosts(job, evs)
    pids = sorted({e.pid for e in evs if e.pid is not None})
    bits = []
    if ranks:
        bits.append(("rank " if len(ranks) == 1 else "ranks ") + fmt_ranks(ranks))
    if hosts:
        bits.append(("on " if bits else "") + ", ".join(hosts[:6]) + (", ..." if len(hosts) > 6 else ""))
        if len(pids) == 1 and not ranks:
            bits.append(f"(pid {pids[0]})")
    return " ".join(bits)


def on(job: JobModel, events: Iterable[Event]) -> str:
    """' on rank 3 on gpu-07' for a summary, '' when the logs do not say who."""
    text = who(job, events)
    return f" on {text}" if text else ""


def place(job: JobModel, events: Iterable[Event]) -> str:
    """'ranks 0, 3' when ranks are known, else the hosts, else a process count (for value listings)."""
    evs = list(events)
    ranks, hosts = ranks_hosts(job, evs)
    if ranks:
        return f"rank{'s' if len(ranks) > 1 else ''} {fmt_ranks(ranks)}"
    return ", ".join(hosts[:4]) if hosts else f"{len(evs)} process(es)"


def in_causal_order(events: Iterable[Event]) -> list[Event]:
    """Earliest first: by time when every event has one, else by file and line."""
    evs = list(events)
    if evs and all(e.ts is not None for e in evs):
        return sorted(evs, key=lambda e: (e.ts, e.file, e.line))
    return sorted(evs, key=lambda e: (e.ts is None, e.ts or 0.0, e.file, e.line))


# ---- the specific NCCL failures (one definition, used by the rules and by NCX's exclusion) -------

_FABRIC_BAD = re.compile(r"not running|fail|inactive|dead|error|mismatch|not started|in progress|"
                         r"not yet initialized|uninitialized", re.I)


def fabric_errors(job: JobModel) -> list[Event]:
    """CUDA error 802 (cudaErrorSystemNotReady) from NCCL, torch or nccl-tests, or a failed fabric manager."""
    out = []
    for ev in job.by_kind("nccl_cuda_fail", "cuda_error", "python_exception", "torch_nccl_error",
                          "torch_nccl_err_kind", "nccl_warn", "fabric_manager"):
        t = low(ev)
        if "system not yet initialized" in t or int_in(ev.get("code")) == 802 and ev.kind == "nccl_cuda_fail":
            out.append(ev)
        elif ev.kind == "fabric_manager" and _FABRIC_BAD.search(t):
            out.append(ev)
    return out


def nvls_errors(job: JobModel) -> list[Event]:
    """``transport/nvls.cc ... Cuda failure ... invalid argument``: NVLink SHARP setup refused by the fabric."""
    out = []
    for ev in job.by_kind("nccl_cuda_fail", "nccl_warn"):
        src = str(ev.get("srcfile") or "")
        t = low(ev)
        if ("nvls" in src or "nvls.cc" in t) and "cuda failure" in t and "invalid argument" in t:
            out.append(ev)
    return out


def shm_errors(job: JobModel) -> list[Event]:
    """/dev/shm exhaustion: NCCL's shm segments, or a DataLoader worker killed for lack of shm."""
    out = list(job.by_kind("nccl_shm"))
    for ev in job.by_kind("nccl_warn", "nccl_socket_err", "python_exception", "signal"):
        t = low(ev)
        if "/dev/shm" in t or "shared memory segment" in t or "out of shared memory" in t \
                or "insufficient shared memory" in t:
            out.append(ev)
    return out


def nccl_oom_errors(job: JobModel) -> list[Event]:
    """NCCL's own GPU allocations failing: ``Cuda failure 'out of memory'``, ``Failed to CUDA calloc``."""
    out = list(job.by_kind("nccl_alloc_fail"))
    for ev in job.by_kind("nccl_cuda_fail", "nccl_warn"):
        t = low(ev)
        if "out of memory" in t or "failed to cuda calloc" in t or "failed to cuda malloc" in t \
                or (ev.kind == "nccl_cuda_fail" and int_in(ev.get("code")) == 2):
            out.append(ev)
    return out


def dup_gpu_errors(job: JobModel) -> list[Event]:
    out = list(job.by_kind("nccl_dup_gpu"))
    out += [e for e in job.by_kind("nccl_warn") if "duplicate gpu detected" in low(e)]
    return out


def driver_too_old(job: JobModel) -> list[Event]:
    """``CUDA driver version is insufficient for CUDA runtime version``: the runtime is newer than the driver."""
    return [e for e in job.by_kind("cuda_error", "nccl_cuda_fail", "python_exception", "nccl_warn")
            if "driver version is insufficient" in low(e)]


def node_wide_errors(job: JobModel) -> list[Event]:
    """Conditions of a node, not of one process, that a class rule of their own reports with the host:
    its NVSwitch fabric (MN1: fabric manager, NVLS), a full /dev/shm (NC1), a driver older than the
    runtime (NV1). (Xid errors and node failures have no class of their own: RK1 tells them.)"""
    return fabric_errors(job) + nvls_errors(job) + shm_errors(job) + driver_too_old(job) + job.by_kind("fabric_manager")


#: Categories of facts.failures() that are a process's own crash (not an exit report, a signal
#: that may be NCCL's own abort, or a transport error).
_CRASH_CATEGORIES = ("cuda", "oom", "exception", "host")


def local_causes(job: JobModel) -> list[Event]:
    """Failures of one process that make its peers' transport errors echoes (not network faults):
    the specific NCCL failures (fabric, nvls, /dev/shm, NCCL OOM, duplicate GPU) and process crashes
    (CUDA error, OOM, a Python exception, a host-level kill)."""
    crashes = [f.events[0] for f in failures(job) if f.category in _CRASH_CATEGORIES and not f.recovered]
    return (fabric_errors(job) + nvls_errors(job) + shm_errors(job) + nccl_oom_errors(job)
            + dup_gpu_errors(job) + crashes)


#: WARNs that are notices, not failures: missing optional libraries and plugins, RAS, deprecations.
_BENIGN_WARN = re.compile(r"libibverbs|ibv_fork_init|\bNET/OFI\b(?!.*completed with error)|\bRAS\b|ras\.cc|"
                          r"NET/Plugin|TUNER/Plugin|PROFILER/Plugin|Plugin\s*:|libnccl-net|dlerror|is deprecated|"
                          r"Could not find real path", re.I)


def benign_warn(job: JobModel, ev: Event) -> bool:
    """A notice (missing libibverbs, OFI/plugin/RAS notices) or anything after the process's own shutdown."""
    return bool(_BENIGN_WARN.search(ev.text)) or after_shutdown(job, ev)


# ---- return-code chains ----------------------------------------------------------------------------


@dataclass(slots=True)
class Chain:
    """Consecutive ``file.cc:NNN -> N`` lines of one thread; ``cause`` is the event just before it."""

    lines: list[Event]
    cause: Event | None = None

    @property
    def origin(self) -> Event:
        return self.lines[0]

    @property
    def code(self) -> int | None:
        """The first code in the chain: the real ncclResult_t (later frames may translate it)."""
        return int_in(self.origin.get("code"))


def chains(job: JobModel, window: int = 4) -> list[Chain]:
    """Every return-code chain, with the WARN/error event that started it when it is close above."""
    out: list[Chain] = []
    open_chain: dict[tuple, Chain] = {}
    last_other: dict[tuple, Event] = {}
    files = {e.file for e in job.by_kind("nccl_propagate")}  # a chain and what is above it are in one file
    for ev in job.events:  # sorted by file, line
        if ev.file not in files:
            continue
        key = (ev.file, ev.host, ev.pid, ev.get("tid"))
        if ev.kind != "nccl_propagate":
            open_chain.pop(key, None)
            last_other[key] = ev
            continue
        cur = open_chain.get(key)
        if cur is None:
            before = last_other.get(key)
            cause = before if before is not None and ev.line - before.line <= window else None
            cur = open_chain[key] = Chain([], cause)
            out.append(cur)
        cur.lines.append(ev)
    return out


# ---- communicator phase -----------------------------------------------------------------------------


def after_shutdown(job: JobModel, ev: Event) -> bool:
    """True when the event's process already logged ``Destroy COMPLETE`` / ``Abort COMPLETE``."""
    return any(e.kind == "nccl_init" and e.get("what") in ("Destroy", "Abort") and e.get("phase") == "COMPLETE"
               and e.file == ev.file and e.line < ev.line and proc_key(e) == proc_key(ev)
               for e in _proc_events(job, ev))


def after_init(job: JobModel, ev: Event) -> bool:
    """True when the event's process logged ``Init COMPLETE`` earlier and no new init started since."""
    state = False
    for e in _proc_events(job, ev):
        if e.file != ev.file or e.line >= ev.line or e.kind != "nccl_init" or e.get("what") != "Init":
            continue
        state = e.get("phase") in ("COMPLETE", None)
    return state


def _proc_events(job: JobModel, ev: Event) -> list[Event]:
    rs = job.rank_of(ev)
    if rs is not None:
        return rs.events
    key = proc_key(ev)
    return [e for e in job.events if e.file == ev.file and proc_key(e) == key]


def init_failed_ranks(job: JobModel) -> list:
    """Ranks that started NCCL init (bootstrap or later) but never reached Init COMPLETE."""
    lo, hi = stage_index("bootstrap"), stage_index("init_complete")
    return [r for r in job.ranks if lo <= stage_index(r.stage) < hi]


# ---- transport errors and network selection (their own modules; importable from here as before) ----

# Imported last: those modules build on the helpers above (and import them from here).
from .netsel import (  # noqa: E402
    HostNet,
    addr_hosts,
    bare_addr,
    host_networks,
    ip_of,
    multi_node,
    selected_ifaces,
    subnet16,
    suspicious_addr,
    suspicious_iface,
)
from .transport import (  # noqa: E402
    TRANSPORT_KINDS,
    TransportFault,
    bridge_connect_errors,
    nccl_origins,
    peer_addr,
    peer_of,
    transport_errors,
    transport_fault,
    transport_tier,
)

__all__ = [
    "RESULT_NAMES", "TRANSPORT_KINDS", "Chain", "HostNet", "TransportFault", "addr_hosts", "after_init",
    "after_shutdown", "bare_addr", "benign_warn", "bridge_connect_errors", "chains", "driver_too_old",
    "dup_gpu_errors", "fabric_errors", "host_networks", "in_causal_order", "init_failed_ranks", "int_in",
    "ip_of", "local_causes", "low", "multi_node", "nccl_oom_errors", "nccl_origins", "nvls_errors", "on",
    "peer_addr", "peer_of", "place", "proc_key", "ranks_hosts", "selected_ifaces", "shm_errors", "subnet16",
    "suspicious_addr", "suspicious_iface", "transport_errors", "transport_fault", "transport_tier", "who",
    "writer",
]
