"""Network selection: which interfaces and networks each host's NCCL processes selected.

* address helpers (``bare_addr``, ``ip_of``, ``subnet16``) and the suspicious choices
  (``suspicious_iface``: docker/virtual bridges, loopback; ``suspicious_addr``: loopback,
  docker-bridge and link-local addresses);
* ``host_networks(job)``: per host, the interfaces, IB devices and socket transports it logged;
  ``addr_hosts(job)``: address -> host; ``multi_node(job)``: does the job span hosts.

Every name here is importable from ``nccl_facts`` too.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from functools import lru_cache

from ..events import Event
from ..model import JobModel
from .facts import _per_job, int_in

# ---- network selection -------------------------------------------------------------------------------

_IFACE_LIST = re.compile(r"\[\d+\]([\w.:@-]+?):([0-9a-fA-F.:%\w-]+?)<\d+>")
_SUSPICIOUS_IFACE = re.compile(r"^(?:docker\d*|virbr\d*|veth\w*|cni\w*|flannel[\w.]*|lo|usb\d*|br-[0-9a-f]+|"
                               r"lxcbr\d*|cali\w+|tunl\d*|vxlan[\w.]*)$")
_SUSPICIOUS_NETS = tuple(ipaddress.ip_network(n) for n in ("127.0.0.0/8", "172.17.0.0/16", "169.254.0.0/16"))


def bare_addr(addr: object) -> str | None:
    """``10.0.0.1<0>`` / ``[::ffff:10.0.0.1]:5`` / ``fe80::1%ib0<53249>`` -> the address alone."""
    if not addr:
        return None
    a = str(addr).split("<", 1)[0].strip("[] ")
    a = a.split("%", 1)[0]
    if a.lower().startswith("::ffff:") and "." in a:
        a = a[7:]
    return a or None


def ip_of(addr: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    a = bare_addr(addr)
    try:
        return ipaddress.ip_address(a) if a else None
    except ValueError:
        return None


def suspicious_iface(name: object) -> bool:
    return bool(name) and bool(_SUSPICIOUS_IFACE.match(str(name)))


def suspicious_addr(addr: object) -> bool:
    a = bare_addr(addr)
    return _suspicious_bare(a) if a else False


@lru_cache(maxsize=1 << 14)
def _suspicious_bare(a: str) -> bool:
    """(Cached: every rank of a host names its address, and parsing one costs more than the rest.)"""
    try:
        ip = ipaddress.ip_address(a)
    except ValueError:
        return False
    return ip.is_loopback or any(ip in n for n in _SUSPICIOUS_NETS if ip.version == n.version)


def subnet16(addr: object) -> str | None:
    ip = ip_of(addr)
    if ip is None or ip.version != 4:
        return None
    return str(ipaddress.ip_network(f"{ip}/16", strict=False))


@dataclass(slots=True)
class HostNet:
    """What one host's NCCL processes logged about the network they selected."""

    host: str | None
    ifaces: dict[str, str | None] = field(default_factory=dict)  # first-choice iface -> addr
    selection: list[Event] = field(default_factory=list)  # Bootstrap / NET/Socket / NET lines
    ib: list[Event] = field(default_factory=list)  # NET/IB : Using ..., Using network IB
    ib_none: list[Event] = field(default_factory=list)
    socket_net: list[Event] = field(default_factory=list)  # Using network Socket
    socket_channels: list[Event] = field(default_factory=list)  # inter-node channels via NET/Socket


def selected_ifaces(ev: Event) -> list[tuple[str, str | None]]:
    """(iface, addr) pairs an interface-selection line names, first choice first."""
    pairs = []
    if ev.kind == "nccl_net_ib":
        if ev.get("oob_iface"):
            pairs.append((str(ev.get("oob_iface")), bare_addr(ev.get("oob_addr"))))
        return pairs
    if ev.get("iface"):
        pairs.append((str(ev.get("iface")), bare_addr(ev.get("addr"))))
    for m in _IFACE_LIST.finditer(str(ev.get("ifaces") or "")):
        if (m.group(1), bare_addr(m.group(2))) not in pairs:
            pairs.append((m.group(1), bare_addr(m.group(2))))
    return pairs


_NET_KINDS = frozenset(("nccl_bootstrap", "nccl_net_socket", "nccl_net_iface", "nccl_net_ib", "nccl_ib_none",
                        "nccl_using_net", "nccl_channel_net"))


@_per_job
def host_networks(job: JobModel) -> dict[str | None, HostNet]:
    """(Computed once per job: callers only read it.)"""
    nets: dict[str | None, HostNet] = {}

    def of(ev: Event) -> HostNet:
        host = ev.host or (job.rank_of(ev).host if job.rank_of(ev) else None)
        return nets.setdefault(host, HostNet(host))

    for ev in job.events:
        k = ev.kind
        if k not in _NET_KINDS:
            continue
        if k in ("nccl_bootstrap", "nccl_net_socket", "nccl_net_iface"):
            hn = of(ev)
            hn.selection.append(ev)
            for iface, addr in selected_ifaces(ev)[:1]:
                hn.ifaces.setdefault(iface, addr)
        elif k == "nccl_net_ib":
            of(ev).ib.append(ev)
        elif k == "nccl_ib_none":
            of(ev).ib_none.append(ev)
        elif k == "nccl_using_net":
            net = str(ev.get("net") or "").lower()
            if net.startswith("socket"):
                of(ev).socket_net.append(ev)
            elif net.startswith("ib"):
                of(ev).ib.append(ev)
        elif k == "nccl_channel_net" and "socket" in str(ev.get("transport") or ev.text).lower():
            of(ev).socket_channels.append(ev)
    return nets


def addr_hosts(job: JobModel) -> dict[str, str]:
    """Address -> host, from every interface a host's NCCL lines named."""
    out: dict[str, str] = {}
    for ev in job.by_kind("nccl_bootstrap", "nccl_net_socket", "nccl_net_iface", "nccl_net_ib"):
        if ev.host:
            for _iface, addr in selected_ifaces(ev):
                if addr:
                    out.setdefault(addr, ev.host)
    return out


def multi_node(job: JobModel) -> bool:
    if len({r.host for r in job.ranks if r.host}) > 1 or len(job.hosts) > 1:
        return True
    return any((int_in(e.get("nnodes")) or 0) > 1 for e in job.by_kind("nccl_topo")) \
        or bool(job.by_kind("nccl_channel_net"))
