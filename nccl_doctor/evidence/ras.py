"""What a saved NCCL RAS report (``ncclras``, text or JSON) says about the job's processes.

The report lines arrive as ``ras_*`` events (``parsers/ras.toml``; the JSON form through
``rasjson``); ``reports(job)`` reads them back in line order into reports, blocks and rank groups.
The facts the rules read:

* ``missing(job)``: processes RAS declares DEAD, processes and ranks it got no answer from
  (INCOMPLETE): the silent ranks RK2 names;
* ``behind(job)``: ranks whose "launched up to operation N" is below the count most ranks of their
  communicator launched: the ranks RK3 names (never the ones ahead);
* ``healthy(job)``: a report in which every communicator is RUNNING with no error, no missing rank
  and no count disagreement. Beside a PyTorch timeout this is the symmetric hang (every rank launched
  the same collective and none finished it), not a healthy job;
* ``ip_hosts(job)``: RAS names nodes by IP address; the NCCL lines of the same job (``Bootstrap :
  Using eth0:10.1.2.17<0>``, ``RAS network listening socket at 10.1.2.17<40233>``) give host names.

"Rank" in a report is the *communicator* rank: it is the global rank only for the communicator that
spans the job (or when the process is known by node and pid). Results are cached per job.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel, RankState
from .facts import _per_job, fmt_ranks, int_in, plural
from .pids import state_for_pid
from .timeouts import timeouts_by_pg, watchdog_kills

RAS_KINDS = ("ras_banner", "ras_section", "ras_comm", "ras_block", "ras_detail", "ras_process", "ras_rank",
             "ras_ranks")
#: The kinds whose field ``addr`` (or ``oob_addr``) is an address of the line's own host.
_ADDR_KINDS = ("nccl_bootstrap", "nccl_net_socket", "nccl_net_iface", "nccl_net_ib", "nccl_ras")


@dataclass(slots=True, eq=False)
class RankLine:
    """One rank line of a report (singular with its own verb, or under a grouped line)."""

    rank: int | None
    event: Event
    pid: int | None = None
    node: str | None = None
    gpu: str | None = None

    @classmethod
    def of(cls, ev: Event) -> RankLine:
        return cls(int_in(ev.get("rank")), ev, int_in(ev.get("pid")), ev.get("node"), ev.get("gpu"))


@dataclass(slots=True, eq=False)
class Group:
    """A set of ranks that agree ("29 ranks have launched up to operation 5121"); ``count`` is the
    launched count (0: none launched), ``status``/``err`` the other groupings."""

    n: int
    event: Event
    count: int | None = None
    status: str | None = None
    err: str | None = None
    ranks: list[RankLine] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Check:
    """One disagreement inside a MISMATCH or ERROR block: operation counts of one collective type,
    status, or errors."""

    what: str  # opcounts | status | errors
    event: Event
    coll: str | None = None
    groups: list[Group] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Block:
    """INCOMPLETE / DEAD / TIMEOUT (whole job) or #group-index (hash) INCOMPLETE / ERROR / MISMATCH."""

    kind: str
    event: Event
    group: int | None = None
    index: int | None = None
    comm_hash: str | None = None
    details: list[Event] = field(default_factory=list)
    processes: list[Event] = field(default_factory=list)
    ranks: list[RankLine] = field(default_factory=list)  # rank lines with no group (missing ranks)
    listed: list[int] = field(default_factory=list)  # 2.24-2.25 "The missing ranks: 1,5"
    checks: list[Check] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"communicator #{self.group}-{self.index} ({self.comm_hash})" if self.group is not None else "the job"


@dataclass(slots=True, eq=False)
class Report:
    file: str
    events: list[Event] = field(default_factory=list)
    version: str | None = None
    comms: list[Event] = field(default_factory=list)  # rows of the communicators table
    blocks: list[Block] = field(default_factory=list)
    no_data: bool = False

    @property
    def first(self) -> Event:
        return self.events[0]

    def comm_size(self, group: int | None) -> int | None:
        row = next((e for e in self.comms if e.get("group") == group), None)
        return int_in(row.get("size")) if row is not None else None

    def spans_job(self, group: int | None) -> bool:
        """The communicator group is the job's: one communicator, the largest of the report."""
        row = next((e for e in self.comms if e.get("group") == group), None)
        sizes = [int_in(e.get("size")) or 0 for e in self.comms]
        return row is not None and row.get("ncomms") == 1 and (int_in(row.get("size")) or 0) == max(sizes)

    @property
    def healthy(self) -> bool:
        return bool(self.comms) and not self.blocks and not self.no_data and all(
            e.get("status") == "RUNNING" and e.get("errors") == "OK" for e in self.comms)


@_per_job
def reports(job: JobModel) -> list[Report]:
    """Every RAS report in the job's files, in file and line order."""
    out: list[Report] = []
    cur: Report | None = None
    block: Block | None = None
    check: Check | None = None
    group: Group | None = None
    for ev in job.by_kind(*RAS_KINDS):
        k = ev.kind
        if cur is None or cur.file != ev.file or (k == "ras_banner" and ev.get("version") and cur.events):
            cur, block, check, group = Report(ev.file), None, None, None
            out.append(cur)
        cur.events.append(ev)
        if k == "ras_banner" and ev.get("version"):
            cur.version = str(ev.get("version"))
        elif k == "ras_section":
            cur.no_data = cur.no_data or ev.get("what") == "no_data"
            if ev.get("what") in ("Errors", "Warnings", "Communicators"):
                block = check = group = None
        elif k == "ras_comm":
            cur.comms.append(ev)
        elif k == "ras_block":
            block = Block(str(ev.get("block")), ev, ev.get("group"), ev.get("index"), ev.get("comm_hash"))
            cur.blocks.append(block)
            check = group = None
        elif ev.get("block"):
            _place(cur, ev)  # a JSON entry: it names its block itself
        elif block is None:
            continue  # a body line outside any block: a partial paste
        elif k == "ras_detail":
            block.details.append(ev)
            what = ev.get("what")
            if what in ("opcounts", "status", "errors"):
                check = Check(str(what), ev, ev.get("coll"))
                block.checks.append(check)
                group = None
            elif what == "rank_list" and ev.get("list") == "missing":
                block.listed += [int(x) for x in re.findall(r"\d{1,10}", str(ev.get("ranks") or ""))]
        elif k == "ras_process":
            block.processes.append(ev)
        elif k == "ras_ranks":
            group = Group(int_in(ev.get("n")) or 0, ev, _count(ev), ev.get("status"), ev.get("err"))
            if check is None:  # 2.24-2.25 status mismatches have no header line of their own
                check = Check("status" if ev.get("status") else "errors", ev)
                block.checks.append(check)
            check.groups.append(group)
        elif k == "ras_rank":
            line = RankLine.of(ev)
            if _count(ev) is not None or ev.get("status") or ev.get("err"):
                if check is None:
                    check = Check("status" if ev.get("status") else "errors", ev)
                    block.checks.append(check)
                check.groups.append(Group(1, ev, _count(ev), ev.get("status"), ev.get("err"), [line]))
            elif group is not None:
                group.ranks.append(line)
            else:
                block.ranks.append(line)
    return out


def _place(rep: Report, ev: Event) -> None:
    """Put an entry that names its block (kind, communicator group and, for counts, collective) there."""
    kind, grp = str(ev.get("block")), ev.get("group")
    block = next((b for b in rep.blocks if b.kind == kind and b.group == grp), None)
    if block is None:
        block = Block(kind, ev, grp, 0 if grp is not None else None, ev.get("comm_hash"))
        rep.blocks.append(block)
    if ev.kind == "ras_process":
        block.processes.append(ev)
    elif ev.get("coll"):
        check = next((c for c in block.checks if c.coll == ev.get("coll")), None)
        if check is None:
            check = Check("opcounts", ev, ev.get("coll"))
            block.checks.append(check)
        check.groups.append(Group(1, ev, _count(ev), None, None, [RankLine.of(ev)]))
    else:
        block.ranks.append(RankLine.of(ev))


def _count(ev: Event) -> int | None:
    """The operation count a rank (or group) launched; 0 for 'not launched any operations'."""
    if ev.get("none") is True:
        return 0
    return int_in(ev.get("op"))


# ---- host names ---------------------------------------------------------------------------------


@_per_job
def ip_hosts(job: JobModel) -> dict[str, str]:
    """IP address -> host name, from NCCL lines that give both (an address claimed by two hosts is left out)."""
    seen: dict[str, set[str]] = {}
    for ev in job.by_kind(*_ADDR_KINDS):
        if not ev.host:
            continue
        for name in ("addr", "oob_addr"):
            addr = ev.get(name)
            if ev.kind == "nccl_ras" and ev.get("what") != "listen":
                continue  # a dead peer's or another peer's address, not this host's
            if isinstance(addr, str) and addr:
                seen.setdefault(addr.split("%", 1)[0], set()).add(ev.host)
    return {ip: next(iter(hosts)) for ip, hosts in seen.items() if len(hosts) == 1}


def host_of_node(job: JobModel, node: str | None) -> str | None:
    return ip_hosts(job).get(node) if node else None


def _state(job: JobModel, node: str | None, pid: int | None) -> RankState | None:
    """The process a report names by node and pid, when the logs know it."""
    if pid is None:
        return None
    host = host_of_node(job, node)
    if host:
        return state_for_pid(job, pid, host)
    cands = [r for r in job.ranks if r.pid == pid and r.rank is not None]
    # pids repeat across nodes: one process with that pid, whose own address (if known) is the node
    if len(cands) == 1 and cands[0].net.get("addr") in (None, node):
        return cands[0]
    return None


# ---- the facts ------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Named:
    """A rank (or process) a report names, resolved against the logs where they allow it."""

    rank: int | None
    state: RankState | None
    host: str | None  # host name when known, else the node's IP address
    reason: str
    events: list[Event]
    pid: int | None = None
    node: str | None = None


def _resolve(job: JobModel, rep: Report, block: Block | None, line: RankLine | None, pid: int | None,
             node: str | None) -> tuple[int | None, RankState | None, str | None]:
    st = _state(job, node, pid)
    rank = st.rank if st is not None else None
    if rank is None and line is not None and line.rank is not None and block is not None and \
            rep.spans_job(block.group) and (not job.ranks_expected or rep.comm_size(block.group) == job.ranks_expected):
        rank = line.rank  # the communicator of the whole job: its ranks are the global ranks
    host = host_of_node(job, node) or (st.host if st is not None else None) or node
    return rank, st, host


def _who(pid: int | None, node: str | None, gpu: str | None) -> str:
    bits = [f"pid {pid}" if pid is not None else "", f"GPU {gpu}" if gpu else "", f"node {node}" if node else ""]
    return ", ".join(b for b in bits if b)


@_per_job
def missing(job: JobModel) -> list[Named]:
    """Processes and ranks a report got no answer from (INCOMPLETE) or declares DEAD."""
    out: dict[tuple, Named] = {}
    for rep in reports(job):
        before = set(out)
        for block in rep.blocks:
            if block.kind not in ("INCOMPLETE", "DEAD"):
                continue
            word = "declares the process dead (unreachable via the RAS network)" if block.kind == "DEAD" else \
                "got no answer from the process"
            head = [block.event] + block.details[:1]
            for ev in block.processes:
                pid, node = int_in(ev.get("pid")), ev.get("node")
                rank, st, host = _resolve(job, rep, None, None, pid, node)
                key = ("proc", node, pid)
                if key not in out or block.kind == "DEAD":
                    out[key] = Named(rank, st, host, f"the ncclras report {word} ({_who(pid, node, ev.get('gpus'))})",
                                     head + [ev], pid, node)
            for line in block.ranks:
                rank, st, host = _resolve(job, rep, block, line, line.pid, line.node)
                key = ("proc", line.node, line.pid) if line.pid is not None else ("rank", block.group, line.rank)
                if key in out:
                    if out[key].rank is None and rank is not None:
                        out[key].rank, out[key].state = rank, st
                    continue
                what = f"rank {line.rank} of {block.where}" if rank != line.rank else block.where
                out[key] = Named(rank, st, host, f"the ncclras report got no answer in {what} "
                                 f"({_who(line.pid, line.node, line.gpu) or 'process information not found'})",
                                 head + [line.event], line.pid, line.node)
            for r in block.listed:  # 2.24-2.25: ranks without process details
                line = RankLine(r, block.event)
                rank, st, host = _resolve(job, rep, block, line, None, None)
                out.setdefault(("rank", block.group, r), Named(
                    rank, st, host, f"listed among the missing ranks of {block.where} in the ncclras report", head))
        _merge_listed(out, [k for k in out if k not in before])
    for ev in job.by_kind("ras_event"):  # monitor mode (ncclras -m): the peer's end
        if ev.get("event") in ("PEER_DEAD", "PEER_TIMEOUT_DEAD"):
            pid, node = int_in(ev.get("pid")), ev.get("node") or ev.get("addr")
            rank, st, host = _resolve(job, Report(ev.file), None, None, pid, node)
            out.setdefault(("proc", node, pid), Named(rank, st, host, "ncclras monitor mode reports it "
                           f"{str(ev.get('event')).replace('PEER_', '').replace('_', ' ').lower()} "
                           f"({_who(pid, node, ev.get('gpus'))})", [ev], pid, node))
    return list(out.values())


def _merge_listed(out: dict[tuple, Named], keys: list[tuple]) -> None:
    """2.24-2.25 list a communicator's missing ranks apart from the missing processes (pid, node,
    GPU), with nothing that pairs them: when the processes no line resolves are no more than the
    ranks listed, they are those ranks; keep the ranks and say which processes they are."""
    listed = [out[k] for k in keys if k[0] == "rank" and out[k].rank is not None]
    loose = [k for k in keys if k[0] == "proc" and out[k].rank is None]
    if listed and loose and len(loose) <= len(listed):
        procs = "; ".join(_who(out[k].pid, out[k].node, None) for k in loose)
        for n in listed:
            n.reason += f" (the report's missing processes: {procs})"
        for k in loose:
            del out[k]


@dataclass(slots=True, eq=False)
class Behind(Named):
    count: int = 0
    majority: int = 0
    coll: str = "collective"
    confident: bool = True
    report: int = 0  # which report (snapshot) of the job said so


@_per_job
def behind(job: JobModel) -> list[Behind]:
    """Ranks whose launched count is below the one most ranks of their communicator launched."""
    hung = bool(timeouts_by_pg(job) or watchdog_kills(job))
    seen: dict[tuple, list[Behind]] = {}
    for n_rep, rep in enumerate(reports(job)):
        for block in rep.blocks:
            for check in block.checks:
                if check.what != "opcounts":
                    continue
                counted = [g for g in check.groups if g.count is not None]
                if len(counted) < 2:
                    continue
                sizes = Counter({g.count: 0 for g in counted})
                for g in counted:
                    sizes[g.count] += g.n
                (top, n_top), *rest = sizes.most_common()
                if rest and rest[0][1] == n_top:
                    continue  # no majority: nothing to be behind of
                coll = check.coll if check.coll and check.coll != "collective" else "collective"
                for g in counted:
                    if g.count >= top:
                        continue
                    for line in g.ranks:
                        rank, st, host = _resolve(job, rep, block, line, line.pid, line.node)
                        gap = top - g.count
                        why = (f"the ncclras report shows it launched {coll} operations only up to {g.count} while "
                               f"{plural(n_top, 'rank')} of {block.where} launched up to {top}")
                        item = Behind(rank, st, host, why, [block.event, check.event, g.event, line.event][:4],
                                      line.pid, line.node, g.count, top, coll, confident=hung or gap > 1,
                                      report=n_rep)
                        seen.setdefault((line.node, line.pid, line.rank, block.group), []).append(item)
    out = []
    for items in seen.values():
        item = items[-1]  # the latest report
        item.confident = item.confident or len({i.report for i in items}) > 1  # behind in two snapshots: not a race
        out.append(item)
    return out


@_per_job
def healthy(job: JobModel) -> Report | None:
    """The last report, when it found every communicator RUNNING with no error, nobody missing and
    equal operation counts."""
    reps = [r for r in reports(job) if r.comms]
    return reps[-1] if reps and reps[-1].healthy else None


def symmetric_hang(job: JobModel) -> str:
    """A sentence for a job that timed out while RAS saw every rank healthy; '' otherwise."""
    rep = healthy(job)
    if rep is None or not timeouts_by_pg(job):
        return ""
    ranks = sum(int_in(e.get("ranks")) or 0 for e in rep.comms if e.get("group") == 0)
    who = f"all {ranks} ranks" if ranks else "every rank"
    return (f"the ncclras report saw {who} of its {plural(sum(int_in(e.get('ncomms')) or 0 for e in rep.comms), 'communicator')} "
            "RUNNING with no missing rank and the same operation counts: a symmetric hang (every rank launched "
            "the collective and none finished it), not a missing or lagging rank; look at the network and the "
            "GPUs' state (a kernel that never completes), not at one rank")


def names(items: list[Named]) -> str:
    """'ranks 4, 27' / 'pid 48213 on node 10.1.2.17' for a summary."""
    ranks = [n.rank for n in items if n.rank is not None]
    if ranks:
        return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {fmt_ranks(ranks)}"
    return ", ".join(_who(n.pid, n.node, None) for n in items[:3])
