"""Who wrote each event: group events into processes and give each process its global rank.

``[N]`` in an NCCL prefix is the CUDA device, never the rank. Ranks come, in order of trust, from
launcher prefixes that carry the global rank (``[rank12]:``, ``srun --label``, Open MPI tags), the
NCCL communicator that spans the whole job (``comm .. rank R nranks WORLD``), torch's
``initialization options ... global rank``, the file name (``rank-12.log``), and last, the rank
inside the default process group. When none applies the process keeps no rank: we never guess.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..events import Event

_FILE_RANK = re.compile(r"(?:^|[^a-z])(?:rank|proc|task|worker|node_rank)[-_.]?(\d{1,7})(?:\D|$)", re.I)
_DEFAULT_PG = {None, 0, "0", "default_pg"}


@dataclass(slots=True)
class Proc:
    """One process (one OS pid on one host, or one rank when the pid is unknown)."""

    key: tuple
    host: str | None = None
    pid: int | None = None
    rank: int | None = None
    rank_source: str | None = None
    local_rank: int | None = None
    cuda_dev: int | None = None
    files: set[str] = field(default_factory=set)
    events: list[Event] = field(default_factory=list)


def file_rank(path: str) -> int | None:
    """Rank from a file name like ``rank-00012.log``, ``worker_3.out``; None when absent."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    m = _FILE_RANK.search(name)
    return int(m.group(1)) if m else None


def _is_default_pg(ev: Event) -> bool:
    f = ev.fields
    return f.get("pg_id") in _DEFAULT_PG and f.get("pg_guid") in _DEFAULT_PG | {"default_pg"}


def build_processes(events: list[Event], world: int | None) -> list[Proc]:
    """Group events into processes and assign global ranks (see module docstring)."""
    # 1. Which (host, pid) processes each file holds, and which launcher ranks.
    file_procs: dict[str, set] = defaultdict(set)
    file_ranks: dict[str, set] = defaultdict(set)
    for ev in events:
        if ev.host is not None and ev.pid is not None:
            file_procs[ev.file].add((ev.host, ev.pid))
        if ev.rank is not None:
            file_ranks[ev.file].add(ev.rank)

    procs: dict[tuple, Proc] = {}
    link_rank: dict[int, tuple] = {}  # launcher rank -> (host, pid) seen on the same line

    def proc_for(key: tuple) -> Proc:
        p = procs.get(key)
        if p is None:
            p = procs[key] = Proc(key=key)
        return p

    for ev in events:
        fp = file_procs.get(ev.file, ())
        if ev.host is not None and ev.pid is not None:
            key = ("proc", ev.host, ev.pid)
            if ev.rank is not None:
                link_rank.setdefault(ev.rank, key)
        elif ev.rank is not None:
            key = ("rank", ev.rank)
        elif len(fp) == 1:
            key = ("proc", *next(iter(fp)))
        elif ev.local_rank is not None:
            key = ("local", ev.file, ev.local_rank)
        elif "pg_rank" in ev.fields and ev.fields.get("pg_rank") is not None and _is_default_pg(ev) \
                and not file_ranks.get(ev.file):
            key = ("rank", ev.fields["pg_rank"])
            ev.rank = ev.fields["pg_rank"]
        else:
            key = ("file", ev.file)
        p = proc_for(key)
        p.events.append(ev)
        p.files.add(ev.file)

    # 2. Merge launcher-rank processes into the (host, pid) process they are linked to, and
    #    single-process files' rank-only events into that file's process.
    for key in list(procs):
        if key[0] != "rank" or key not in procs:
            continue
        target = link_rank.get(key[1])
        if target is None:
            files = procs[key].files
            cands = {next(iter(file_procs[f])) for f in files if len(file_procs.get(f, ())) == 1}
            if len(cands) == 1:
                target = ("proc", *cands.pop())
        if target is not None and target in procs:
            _merge(procs[target], procs.pop(key))
            procs[target].rank = key[1]
            procs[target].rank_source = "launcher"

    for p in procs.values():
        _fill_identity(p, world)
    _dedupe_ranks(procs)
    return list(procs.values())


def _merge(dst: Proc, src: Proc) -> None:
    dst.events.extend(src.events)
    dst.events.sort(key=lambda e: (e.file, e.line))
    dst.files |= src.files


def _fill_identity(p: Proc, world: int | None) -> None:
    hosts = Counter(e.host for e in p.events if e.host)
    p.host = hosts.most_common(1)[0][0] if hosts else None
    pids = Counter(e.pid for e in p.events if e.pid is not None)
    p.pid = pids.most_common(1)[0][0] if pids else None
    devs = Counter(e.cuda_dev for e in p.events if e.cuda_dev is not None and e.kind.startswith("nccl_"))
    p.cuda_dev = devs.most_common(1)[0][0] if devs else None
    lrs = Counter(e.local_rank for e in p.events if e.local_rank is not None)
    p.local_rank = lrs.most_common(1)[0][0] if lrs else None
    if p.rank is not None:
        return
    launcher = Counter(e.rank for e in p.events if e.rank is not None)
    if launcher:
        p.rank, p.rank_source = launcher.most_common(1)[0][0], "launcher"
        return
    # The communicator spanning the job: the largest nranks seen by this process.
    best = None
    for e in p.events:
        if e.kind in ("nccl_init", "nccl_topo") and e.get("rank") is not None and e.get("nranks"):
            if best is None or e.get("nranks") > best.get("nranks"):
                best = e
    if best is not None and world is not None and best.get("nranks") == world:
        p.rank, p.rank_source = best.get("rank"), "nccl communicator"
        return
    for e in p.events:
        if e.kind == "torch_pg_options" and e.get("global_rank") is not None:
            p.rank, p.rank_source = e.get("global_rank"), "torch options"
            return
    for f in sorted(p.files):
        r = file_rank(f)
        if r is not None:
            p.rank, p.rank_source = r, "file name"
            return


def _dedupe_ranks(procs: dict[tuple, Proc]) -> None:
    """Two processes claiming one rank: keep the better-sourced claim, drop the weaker ones' rank."""
    order = {"launcher": 0, "nccl communicator": 1, "torch options": 2, "file name": 3}
    by_rank: dict[int, list[Proc]] = defaultdict(list)
    for p in procs.values():
        if p.rank is not None:
            by_rank[p.rank].append(p)
    for _rank, ps in by_rank.items():
        if len(ps) < 2:
            continue
        # Same rank in several processes is legitimate after a restart (new pid); keep all when
        # they are on the same host. Otherwise the weaker claims lose the rank.
        hosts = {p.host for p in ps}
        if len(hosts) <= 1:
            continue
        ps.sort(key=lambda p: order.get(p.rank_source or "", 9))
        for p in ps[1:]:
            if order.get(p.rank_source or "", 9) > order.get(ps[0].rank_source or "", 9):
                p.rank, p.rank_source = None, None
