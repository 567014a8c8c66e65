"""MN2: NCCL picked a network interface that cannot carry the job's traffic.

Evidence:

* an interface-selection line (``Bootstrap : Using``, ``NET/Socket : Using``, ``NET : Using
  interface``, the IB OOB interface) naming a bridge or local interface (docker0, virbr0, veth*,
  cni*, flannel*, lo, usb0, ...) or an address in 127.0.0.0/8, 172.17.0.0/16 (docker's default
  bridge) or 169.254.0.0/16 (link-local) on a multi-node job;
* ``Connect to <addr> failed`` where the address is such an address; ``no socket interface found``;
* hosts that disagree on the interface name or the /16 subnet they selected;
* some hosts on IB while others say ``NET/IB : No device found`` / ``Using network Socket``;
* inter-node channels ``via NET/Socket`` (GPU traffic over TCP, often a container's eth0).

Error when the job failed or hung in bootstrap/connect, warning otherwise. Not faults: ``lo`` on a
single host; a cluster with no IB at all where every host uses the same NIC and subnet (info).
A refused connection to an ordinary data-plane address is a dead peer, not an interface choice:
NET1 reports it.
"""

from __future__ import annotations

from ..events import Event
from ..evidence.facts import first_ts, plural
from ..evidence.nccl_facts import (
    HostNet,
    bare_addr,
    bridge_connect_errors,
    host_networks,
    in_causal_order,
    init_failed_ranks,
    multi_node,
    peer_addr,
    ranks_hosts,
    selected_ifaces,
    subnet16,
    suspicious_addr,
    suspicious_iface,
)
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list:
    nets = host_networks(job)
    multi = multi_node(job)
    failed = _setup_failure(job)
    problems: list[tuple[str, list[Event], bool]] = []  # (what, evidence, strong)

    bad_sel = [e for hn in nets.values() for e in hn.selection + hn.ib if _bad_selection(e)]
    if bad_sel and multi:
        names = sorted({f"{i}:{a}" if a else i for e in bad_sel for i, a in selected_ifaces(e)[:1]})
        problems.append((f"NCCL selected {', '.join(names[:4])}, a bridge/local interface or address that "
                         f"other nodes cannot reach", bad_sel, True))

    bad_connect = bridge_connect_errors(job)
    if bad_connect:
        peers = sorted({bare_addr(peer_addr(e)) or "?" for e in bad_connect})
        problems.append((f"connections to {', '.join(peers[:4])} failed: a docker-bridge, loopback or "
                         f"link-local address was advertised as a peer address", bad_connect, True))

    no_iface = job.by_kind("nccl_no_iface")
    if no_iface:
        problems.append(("NCCL found no usable socket interface (NCCL_SOCKET_IFNAME matches nothing on "
                         f"{_hosts_text(job, no_iface)})", no_iface, True))

    disagree = _disagreement(nets) if multi else None
    if disagree:
        problems.append(disagree)

    mixed = _ib_mismatch(nets) if multi else None
    if mixed:
        problems.append(mixed)

    sock = [e for hn in nets.values() for e in hn.socket_channels]
    if sock and not problems:
        no_ib_anywhere = not any(hn.ib for hn in nets.values())
        consistent = no_ib_anywhere and _all_same_choice(nets)
        hosts = sorted({h for h in nets if h and nets[h].socket_channels})
        what = (f"inter-node channels run over TCP sockets (via NET/Socket) on {', '.join(hosts[:4]) or 'this job'}"
                f"{'; the hosts look like containers (docker-style host names)' if _containerish(hosts) else ''}")
        if consistent:
            return [_finding(rule, job, what + ": socket-only fabric, expect low bandwidth", sock, "info", "high")]
        problems.append((what + ": no InfiniBand/RoCE/EFA transport was used between nodes", sock, False))

    if not problems:
        return _socket_only_info(rule, job, nets, multi)

    evidence = [e for _, evs, _ in problems for e in in_causal_order(evs)[:3]]
    strong = any(s for _, _, s in problems)
    severity = "error" if failed else "warning"
    confidence = "high" if strong and failed else "medium" if strong or failed else "low"
    summary = "; ".join(w for w, _, _ in problems)
    if failed:
        summary += f"; the job then failed or hung while connecting ({_hosts_text(job, failed)})"
        evidence += failed[:2]
    return [_finding(rule, job, summary, evidence, severity, confidence, blame=_blamed_hosts(nets, bad_sel))]


def _blamed_hosts(nets: dict, bad_sel: list[Event]) -> list[str]:
    """The hosts whose own interface choice is wrong (not the peers that failed to reach them)."""
    hosts = {e.host for e in bad_sel if e.host}
    if not hosts:
        disagree = _disagreement(nets)
        if disagree:  # the minority choice is the odd one out
            by_choice: dict = {}
            for h, hn in nets.items():
                if h and hn.ifaces:
                    i, a = next(iter(hn.ifaces.items()))
                    by_choice.setdefault((i, subnet16(a)), []).append(h)
            groups = sorted(by_choice.values(), key=len)
            if len(groups) > 1 and len(groups[0]) < len(groups[-1]):
                hosts = set(groups[0])
    return sorted(hosts)


def _finding(rule: Rule, job: JobModel, summary: str, evidence: list[Event], severity: str, confidence: str,
             blame: list[str] | None = None):
    ranks, hosts = ranks_hosts(job, evidence)
    blame_ranks = [r.rank for r in job.ranks if blame and r.host in blame]
    return rule.finding(summary, severity=severity, confidence=confidence, ranks=ranks, hosts=hosts,
                        evidence=evidence, first_seen=first_ts(evidence), blame_hosts=blame or (),
                        blame_ranks=blame_ranks)


def _bad_selection(ev: Event) -> bool:
    first = selected_ifaces(ev)[:1]
    return any(suspicious_iface(i) or suspicious_addr(a) for i, a in first)


def _setup_failure(job: JobModel) -> list[Event]:
    """Evidence that the job failed or hung in bootstrap/connect (before every Init COMPLETE)."""
    out = list(job.by_kind("nccl_connect_err", "nccl_no_iface", "torch_store_timeout"))
    for r in init_failed_ranks(job):
        out += [e for e in r.errors + r.timeouts if e not in out][:1]
    return in_causal_order(out)


def _disagreement(nets: dict[str | None, HostNet]) -> tuple[str, list[Event], bool] | None:
    """Hosts that chose different interface names or different /16 subnets."""
    choice = {h: next(iter(hn.ifaces.items())) for h, hn in nets.items() if h and hn.ifaces}
    if len(choice) < 2:
        return None
    names = {i for i, _ in choice.values()}
    with_subnet = [subnet16(a) for _, a in choice.values() if subnet16(a)]
    subnets = set(with_subnet)
    # Different names on one subnet are just different NIC naming; they matter when the subnets
    # differ, or when the addresses are unknown and the names are all we can compare.
    if len(subnets) < 2 and (len(names) < 2 or len(with_subnet) >= 2):
        return None
    groups: dict[str, list[str]] = {}
    for h, (i, a) in choice.items():
        groups.setdefault(f"{i} ({subnet16(a) or a or '?'})", []).append(h)
    parts = [f"{k} on {', '.join(sorted(v)[:3])}{', ...' if len(v) > 3 else ''}" for k, v in sorted(groups.items())]
    evidence = [nets[h].selection[0] for hs in groups.values() for h in sorted(hs)[:1]]
    strong = len(subnets) > 1
    return "hosts disagree on the NCCL interface: " + "; ".join(parts[:4]), evidence, strong


def _ib_mismatch(nets: dict[str | None, HostNet]) -> tuple[str, list[Event], bool] | None:
    with_ib = sorted(h for h, hn in nets.items() if h and hn.ib)
    without = sorted(h for h, hn in nets.items() if h and not hn.ib and (hn.ib_none or hn.socket_net))
    if not with_ib or not without:
        return None
    evidence = [nets[h].ib[0] for h in with_ib[:1]] + [(nets[h].ib_none + nets[h].socket_net)[0] for h in without[:3]]
    return (f"{', '.join(without[:4])} found no IB device and fell back to sockets while "
            f"{', '.join(with_ib[:3])} use IB", evidence, True)


def _all_same_choice(nets: dict[str | None, HostNet]) -> bool:
    choices = {(i, subnet16(a)) for hn in nets.values() for i, a in list(hn.ifaces.items())[:1]}
    return len(choices) == 1 and not any(suspicious_iface(i) for i, _ in choices)


def _containerish(hosts: list[str]) -> bool:
    """Docker's default host names are 12 hex digits (the container id)."""
    return bool(hosts) and all(len(h) == 12 and all(c in "0123456789abcdef" for c in h) for h in hosts)


def _socket_only_info(rule: Rule, job: JobModel, nets: dict[str | None, HostNet], multi: bool) -> list:
    """``NET/IB : No device found`` everywhere and one NIC/subnet: not a fault, worth knowing (info)."""
    none = [e for hn in nets.values() for e in hn.ib_none + hn.socket_net]
    if not multi or not none or any(hn.ib for hn in nets.values()):
        return []
    if not _all_same_choice({h: hn for h, hn in nets.items() if hn.ifaces}):
        return []
    hosts = sorted(h for h in nets if h)
    without_ib = [h for h in hosts if nets[h].ib_none or nets[h].socket_net]
    iface = next((i for hn in nets.values() for i in hn.ifaces), "?")
    sel = [e for hn in nets.values() for e in hn.selection][:2]
    summary = (f"no InfiniBand device on {len(without_ib)} of {plural(len(hosts), 'host')} and none elsewhere; every host "
               f"uses {iface} for NCCL over TCP sockets (consistent, expect socket-level bandwidth; for EFA/IB "
               f"install the net plugin)")
    return [_finding(rule, job, summary, none[:2] + sel, "info", "high")]


def _hosts_text(job: JobModel, events: list[Event]) -> str:
    _, hosts = ranks_hosts(job, events)
    return ", ".join(hosts[:4]) if hosts else "the reporting ranks"
