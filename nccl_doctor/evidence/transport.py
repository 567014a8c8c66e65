"""Transport errors between processes: how primary each is, the network fault they add up to, and
the peer each names.

* ``transport_tier(ev)``: 0 = fabric/completion error, 1 = connect failure, 2 = peer closed/reset,
  3 = echo; ``transport_errors(job)`` / ``bridge_connect_errors(job)``: the events of those tiers;
* ``transport_fault(job)``: the job's network fault, or None when its transport errors are echoes
  of a local failure (``nccl_facts.local_causes``) or of a process's own NCCL error
  (``nccl_origins``);
* ``peer_addr(ev)`` / ``peer_of(job, ev)``: the peer a transport line names and its host.

Every name here is importable from ``nccl_facts`` too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel
from .facts import host_of, int_in, writer
from .nccl_facts import after_shutdown, benign_warn, in_causal_order, local_causes, low
from .netsel import addr_hosts, bare_addr, ip_of, suspicious_addr

#: Transport failures, most primary first: a bad completion or fabric error is the cause, a closed
#: socket or a refused connection usually the echo of a peer that died, a flush (IB status 5) or a
#: proxy/service thread noticing it later is always an echo.
_ECHO_SOCKET = ("socket recv failed", "socket send failed", "connection closed by localrank",
                "call to recv from", "polling for opid")


#: The only kinds transport_tier can classify (the rest of a job's events are skipped unread).
TRANSPORT_KINDS = ("nccl_ib_cqe", "nccl_ofi_error", "nccl_ib_async", "nccl_connect_err", "nccl_ib_qp_error",
                   "nccl_sock_closed", "nccl_socket_err", "nccl_proxy_fail", "nccl_svc_closed", "nccl_warn")


def transport_tier(ev: Event) -> int | None:
    """0 = fabric/completion error, 1 = connect failure, 2 = peer closed/reset, 3 = echo; None = not transport."""
    k = ev.kind
    if k not in TRANSPORT_KINDS:
        return None
    t = low(ev)
    if k == "nccl_ib_cqe":
        status = int_in(ev.get("status"))
        return 3 if status == 5 or "wr_flush_err" in t else 0
    if k in ("nccl_ofi_error", "nccl_ib_async"):
        return 0
    if k in ("nccl_connect_err", "nccl_ib_qp_error"):
        return 1  # a socket or queue-pair connection to a peer could not be set up
    if k == "nccl_sock_closed":
        return 2
    if k == "nccl_socket_err":
        if any(p in t for p in _ECHO_SOCKET):
            return 3
        return 2 if any(p in t for p in ("reset", "broken pipe", "closed", "timed out", "no route")) else 3
    if k in ("nccl_proxy_fail", "nccl_svc_closed"):
        return 3
    if k == "nccl_warn":
        if "net/ib" in t and "completion" in t or "net/ofi" in t and "completed with error" in t:
            return 0
        if "ibv_modify_qp failed" in t or ("connect to" in t and ("failed" in t or "returned" in t)):
            return 1  # queue-pair / socket connection to a peer could not be set up
    return None


def transport_errors(job: JobModel) -> list[Event]:
    return [e for e in job.by_kind(*TRANSPORT_KINDS) if transport_tier(e) is not None]


def bridge_connect_errors(job: JobModel) -> list[Event]:
    """Connections refused/unreachable at a docker-bridge, loopback or link-local address (MN2's)."""
    return [e for e in transport_errors(job) if transport_tier(e) == 1 and suspicious_addr(peer_addr(e))]


_NCCL_LOCAL_KINDS = frozenset({"nccl_cuda_fail", "nccl_shm", "nccl_alloc_fail", "nccl_dup_gpu", "nccl_warn"})


#: Error text that reports someone else's failure (a peer exited, the network failed, an abort).
_REMOTE_TEXT = ("remote process exited", "ncclremoteerror", "network error", "connection closed", "was aborted",
                "socket recv failed", "call to recv", "call to send")


def nccl_origins(job: JobModel) -> list[Event]:
    """NCCL errors a process raised itself (internal error, invalid usage, a proxy operation that
    failed, a CUDA failure), as opposed to reporting that a peer or the network went away."""
    out = []
    for ev in job.by_kind("nccl_warn", "nccl_proxy_fail", "nccl_cuda_fail", "torch_nccl_error", "torch_nccl_err_kind"):
        t = low(ev)
        if not any(p in t for p in _REMOTE_TEXT) and transport_tier(ev) in (None, 3) and not benign_warn(job, ev):
            out.append(ev)
    return out


@dataclass(slots=True)
class TransportFault:
    """The transport errors that explain a job: the first class of error (``tier``) and its echoes."""

    tier: int
    primary: list[Event]
    echoes: list[Event]


def transport_fault(job: JobModel) -> TransportFault | None:
    """The job's network fault, or None when there is none or its transport errors are echoes.

    Completion/fabric errors (tier 0) always count. Refused and closed sockets are echoes when a
    process failed locally (NCCL OOM, /dev/shm, fabric, duplicate GPU, a crash), and closed sockets
    also when another process raised its own NCCL error (its peers then see the socket close).
    Refusals by a docker-bridge/loopback/link-local address belong to MN2.
    """
    bridge = bridge_connect_errors(job)
    errs = [e for e in transport_errors(job) if not after_shutdown(job, e) and e not in bridge]
    if not errs:
        return None
    tier = min(transport_tier(e) for e in errs)
    primary = in_causal_order(e for e in errs if transport_tier(e) == tier)
    reporters = {writer(job, e) for e in errs if transport_tier(e) < 3}
    # A crash of a process that itself reports the transport error is its consequence, not a cause.
    causes = [c for c in local_causes(job) if c.kind in _NCCL_LOCAL_KINDS or writer(job, c) not in reporters]
    if tier >= 1 and causes:
        return None
    if tier == 0 and causes:
        # A completion error towards a host whose process crashed first is that crash's echo.
        peer_hosts = {peer_of(job, e)[1] for e in primary} - {None}
        if peer_hosts and any(host_of(job, c) in peer_hosts for c in causes):
            return None
    if tier >= 2 and any(writer(job, o) not in reporters for o in nccl_origins(job)):
        return None
    return TransportFault(tier, primary, in_causal_order(e for e in errs if transport_tier(e) > tier))


# ---- the peer a transport error names ------------------------------------------------------------

_PEER_IN_TEXT = re.compile(r"(?:peer|to|from) ([\w.:%\[\]-]{1,253})<(\d{1,5})>"
                           r"|remote GIDs? ?(?:::ffff:)?(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})()")


def peer_addr(ev: Event) -> str | None:
    """The peer a transport line names: its ``peer`` field, else ``to/from/peer host<port>`` in the text."""
    if ev.get("peer"):
        return str(ev.get("peer"))
    m = _PEER_IN_TEXT.search(ev.text)
    return (m.group(1) or m.group(3)) if m else None


def peer_of(job: JobModel, ev: Event) -> tuple[str | None, str | None]:
    """(peer as printed, host it belongs to) for a transport error; host None when unknown."""
    peer = peer_addr(ev)
    if not peer:
        return None, None
    port = ev.get("port")
    if port in (None, "") and not ev.get("peer"):
        m = _PEER_IN_TEXT.search(ev.text)
        port = (m.group(2) or None) if m else None
    shown = peer + (f"<{port}>" if port not in (None, "") and "<" not in peer else "")
    addr = bare_addr(peer)
    if addr is None:
        return shown, None
    if ip_of(addr) is not None:
        return shown, addr_hosts(job).get(addr)
    short = addr.split(".", 1)[0]  # NCCL logs host names truncated at the first dot
    return shown, short

