"""NET1: a network transport error between two hosts.

Evidence: IB/RoCE completion errors (``Got completion from peer ... with error 12`` / ``status=12``
/ ``IBV_WC_RETRY_EXC_ERR(12)``; 4 = local protection; 5 = flushed, always an echo), IB async
events, libfabric/OFI request errors (``NET/OFI Request ... completed with error``), refused
connections to ordinary addresses, ``Connection closed by remote peer`` / reset / broken pipe.

The first error in causal order is the cause: a bad completion or fabric error beats a refused
connection, which beats a closed socket; flushes, proxy/service-thread failures and ``-> 3``/``-> 6``
chains are echoes. When another process of the job failed first for a local reason (NCCL OOM,
/dev/shm, fabric manager, CUDA error), closed sockets are its echo and NET1 stays quiet; a
completion error is reported anyway. Connections refused by a docker-bridge/loopback/link-local
address belong to MN2.
"""

from __future__ import annotations

from ..events import Event
from ..evidence.facts import first_ts, host_of, plural
from ..evidence.nccl_facts import (
    after_init,
    peer_addr,
    peer_of,
    proc_key,
    ranks_hosts,
    transport_fault,
    transport_tier,
    who,
)
from ..model import JobModel
from .base import Rule

_IB_STATUS = {12: "transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR: the peer stopped acknowledging)",
              4: "local protection error (IBV_WC_LOC_PROT_ERR: memory registration / GPUDirect problem)",
              13: "RNR retry exceeded (the receiver was not ready)",
              10: "remote access error", 11: "remote operation error", 9: "remote invalid request",
              5: "work request flushed (an echo of an earlier error on the queue pair)"}


def check(job: JobModel, rule: Rule) -> list:
    fault = transport_fault(job)
    if fault is None:
        return []
    best_tier, primary, echoes = fault.tier, fault.primary, fault.echoes
    first = primary[0]
    evidence = primary[:5] + echoes[:3]

    # The link: the first error that names a peer (an async port event names none).
    with_peer = next((e for e in primary if peer_addr(e)), first)
    peer_shown, peer_host = peer_of(job, with_peer)
    ranks, hosts = ranks_hosts(job, primary)
    local = host_of(job, with_peer)
    peer_hosts = {peer_of(job, e)[1] for e in primary}
    pair_hosts = sorted({h for h in [local, *peer_hosts] if h} | set(hosts))
    summary = f"{_describe(first)}: {who(job, [first]) or 'a process'}"
    if with_peer is not first:
        summary += f"; then {_describe(with_peer)}: {who(job, [with_peer]) or 'a process'}"
    if peer_shown:
        summary += f" <-> peer {peer_shown}" + (f" ({peer_host})" if peer_host and peer_host not in peer_shown else "")
        if peer_host is not None and peer_host == local:
            summary += "; the peer is on the same host, so a local peer process (or its proxy thread) died " \
                       "rather than the network"
        elif transport_tier(with_peer) == 1:
            summary += "; the peer's process is gone or its node's network is broken: check or exclude that node"
    if local and peer_host and local != peer_host:
        summary += f"; host pair {local} <-> {peer_host}"
    phase = "after communicator init" if after_init(job, first) else "during communicator init" \
        if _in_init(job, first) else None
    if phase:
        summary += f"; {phase}"
    others = len({proc_key(e) for e in primary}) - 1
    if others > 0:
        summary += f"; {plural(others, 'more process')} reported the same"
    if echoes:
        summary += f"; {plural(len(echoes), 'later line')} {'is an echo' if len(echoes) == 1 else 'are echoes'}"
    severity, confidence = ("error", "high") if best_tier <= 1 else ("error", "medium")
    if best_tier >= 3:
        # Only echoes (flushes, proxy threads noticing a dead socket): the first error is not in these logs.
        severity, confidence = "warning", "low"
        summary += "; only secondary errors are visible, the first error is missing from these logs"
    return [rule.finding(summary, severity=severity, confidence=confidence, ranks=ranks, hosts=pair_hosts or hosts,
                         evidence=evidence, first_seen=first_ts(evidence))]


def _describe(ev: Event) -> str:
    k = ev.kind
    if k == "nccl_ib_cqe":
        status = ev.get("status")
        try:
            code = int(status)
        except (TypeError, ValueError):
            code = None
        meaning = _IB_STATUS.get(code, "a failed work completion") if code is not None else "a failed work completion"
        vendor = f", vendor err {ev.get('vendor_err')}" if ev.get("vendor_err") not in (None, "") else ""
        return f"IB completion error {status if status is not None else '?'} ({meaning}{vendor})"
    if k == "nccl_ib_async":
        dev = f" on {ev.get('dev')}:{ev.get('ib_port')}" if ev.get("dev") else ""
        return f"IB async event '{ev.get('event') or '?'}'{dev} (the port or link went down)"
    if k == "nccl_ofi_error" or "net/ofi" in ev.text.lower():
        rc, err = ev.get("rc"), ev.get("err")
        detail = ", ".join(x for x in (f"RC {rc}" if rc else "", f"error {err}" if err else "") if x)
        return f"libfabric/OFI request failed ({detail or 'completed with error'})"
    if k == "nccl_connect_err":
        return f"connect failed ({ev.get('err') or 'refused'})"
    if k == "nccl_ib_qp_error":
        return f"queue-pair setup failed (ibv_modify_qp {ev.get('err') or ''} {ev.get('errstr') or ''})".replace("  ", " ")
    if k == "nccl_warn":
        msg = str(ev.get("msg") or ev.text.split("NCCL WARN", 1)[-1]).strip()
        return f"connection setup failed ({msg[:100]})"
    if k == "nccl_sock_closed":
        return "socket closed by the remote peer"
    return f"socket error ({ev.get('err') or ev.text[-80:]})"


def _in_init(job: JobModel, ev: Event) -> bool:
    """The process had started NCCL init (bootstrap or later lines) but not completed it."""
    rs = job.rank_of(ev)
    return rs is not None and rs.stage in ("bootstrap", "init_start", "topology", "connected")
