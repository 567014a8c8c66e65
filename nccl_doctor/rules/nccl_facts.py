"""NCCL-level facts shared by MN1, MN2, MN4, NET1, NC1, NC2, CFG1, NCX, NV1 and NV2.

Small questions over the job model that several of those rules ask: which events are the
specific NCCL failures (so that NCX does not report them twice and NET1 knows an echo from a
cause), where a ``-> N`` return-code chain starts, which host a peer address belongs to, which
network each host selected, and whether an event happened during or after communicator init.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel, stage_index
from .facts import failures, fmt_ranks, global_rank, host_of, owner

#: ncclResult_t values, as printed in ``file.cc:NNN -> N`` propagation lines.
RESULT_NAMES = {1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
                4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress"}

# ---- small event helpers -------------------------------------------------------------------------


def low(ev: Event) -> str:
    """The event's text and message fields, lower-cased, for phrase tests."""
    extra = " ".join(str(ev.fields[k]) for k in ("err", "msg", "detail", "exc") if ev.fields.get(k))
    return f"{ev.text} {extra}".lower()


def int_in(value: object) -> int | None:
    """An int from a field that may be an int, ``'12'`` or ``'2 (UNDELIVERABLE)'``; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = re.search(r"-?\d+", value)
        return int(m.group()) if m else None
    return None


def writer(job: JobModel, ev: Event) -> tuple:
    """The process an event belongs to, across its NCCL and torch lines (one RankState when known)."""
    st = owner(job, ev)
    return ("state", id(st)) if st is not None else proc_key(ev)


def proc_key(ev: Event) -> tuple:
    """One writer process: (host, pid) when the line says so, else its launcher rank or file."""
    if ev.host is not None and ev.pid is not None:
        return ("proc", ev.host, ev.pid)
    if ev.rank is not None:
        return ("rank", ev.rank)
    return ("file", ev.file)


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


def driver_too_old(job: JobModel) -> list[Event]:
    """``CUDA driver version is insufficient for CUDA runtime version``: the runtime is newer than the driver."""
    return [e for e in job.by_kind("cuda_error", "nccl_cuda_fail", "python_exception", "nccl_warn")
            if "driver version is insufficient" in low(e)]


#: Categories of facts.failures() that are a process's own crash (not an exit report, a signal
#: that may be NCCL's own abort, or a transport error).
_CRASH_CATEGORIES = ("cuda", "oom", "exception", "host")


_NCCL_LOCAL_KINDS = frozenset({"nccl_cuda_fail", "nccl_shm", "nccl_alloc_fail", "nccl_dup_gpu", "nccl_warn"})


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
#: Error text that reports someone else's failure (a peer exited, the network failed, an abort).
_REMOTE_TEXT = ("remote process exited", "ncclremoteerror", "network error", "connection closed", "was aborted",
                "socket recv failed", "call to recv", "call to send")


def benign_warn(job: JobModel, ev: Event) -> bool:
    """A notice (missing libibverbs, OFI/plugin/RAS notices) or anything after the process's own shutdown."""
    return bool(_BENIGN_WARN.search(ev.text)) or after_shutdown(job, ev)


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
    for ev in job.events:  # sorted by file, line
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
    ip = ip_of(addr)
    if ip is None:
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


def host_networks(job: JobModel) -> dict[str | None, HostNet]:
    nets: dict[str | None, HostNet] = {}

    def of(ev: Event) -> HostNet:
        host = ev.host or (job.rank_of(ev).host if job.rank_of(ev) else None)
        return nets.setdefault(host, HostNet(host))

    for ev in job.events:
        k = ev.kind
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


def multi_node(job: JobModel) -> bool:
    if len({r.host for r in job.ranks if r.host}) > 1 or len(job.hosts) > 1:
        return True
    return any((int_in(e.get("nnodes")) or 0) > 1 for e in job.by_kind("nccl_topo")) \
        or bool(job.by_kind("nccl_channel_net"))
