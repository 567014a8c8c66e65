"""Maps that launchers print from their workers to global ranks, applied to the union-find of
process keys that ``identity`` builds: torchrun's rendezvous result and failure table (local rank
-> global rank in the agent's file), several nodes' ``--log-dir`` trees (a node's folder -> its
failure table), and Ray Train's worker-group table (worker pid -> rank).
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict

from ..events import Event


class _Union:
    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, k):
        parent = self.parent
        parent.setdefault(k, k)
        root = k
        while parent[root] != root:
            root = parent[root]
        while parent[k] != root:  # path compression
            parent[k], k = root, parent[k]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def rank_list(value: object) -> list[int]:
    """The ranks a field lists: a list of ints, or every number in a text ('0,3', '[8, 9]', '1, 5')."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int)]
    if isinstance(value, str):
        return [int(x) for x in re.findall(r"\d{1,7}", value)]
    return []


def expand_tasks(spec: str | None, most: int | None = None) -> list[int]:
    """``8-13,15`` -> [8, 9, 10, 11, 12, 13, 15] (Slurm task lists); at most ``most`` ids when given."""
    out: list[int] = []
    for part in str(spec or "").replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            a, b = int(lo), int(hi) if hi else int(lo)
            if 0 <= b - a <= 100_000:
                out.extend(range(a, b + 1 if most is None else min(b + 1, a + most - len(out))))
        if most is not None and len(out) >= most:
            break
    return out


def _link_local_to_global(events: list[Event], uf: _Union) -> None:
    """torchrun's own lines map a node's local ranks to global ranks: the rendezvous result
    (``local_ranks=[0, 1]`` / ``global_ranks=[8, 9]``) and the ChildFailedError table
    (``rank : 9 (local_rank: 1)``). In the agent's file, ``[default1]:`` lines are then rank 9."""
    maps: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for ev in events:
        if ev.kind == "elastic_rdzv":
            local, glob = rank_list(ev.get("local_ranks")), rank_list(ev.get("global_ranks"))
            if local and len(local) == len(glob):
                for lr, gr in zip(local, glob, strict=True):
                    maps[ev.file][lr].add(gr)
        elif ev.kind == "elastic_cfe" and isinstance(ev.get("rank"), int) and isinstance(ev.get("local_rank"), int):
            maps[ev.file][ev.get("local_rank")].add(ev.get("rank"))
    for f, per_local in maps.items():
        for lr, globs in per_local.items():
            key = ("local", f, lr)
            if len(globs) == 1 and key in uf.parent:  # an ambiguous map (membership changed) links nothing
                uf.union(("rank", next(iter(globs))), key)


def _link_ray_workers(events: list[Event], uf: _Union) -> None:
    """Ray Train's table of its worker group (``- (ip=A, pid=P) world_rank=R, ...``) names the rank
    of each worker pid; in that file, the lines behind ``(RayTrainWorker pid=P)`` are then rank R
    (the prefix gives the ip only for a worker on another node than the driver), and in the other
    files of that folder."""
    ranks = {(os.path.dirname(ev.file), ev.get("pid")): (ev.get("ip"), ev.get("rank"))
             for ev in events if ev.kind == "ray_worker_rank"}
    for key in [k for k in uf.parent if k[0] == "lpid"]:
        # (a console captured as stdout and stderr apart: the table is in one, the lines in both)
        ip, rank = ranks.get((os.path.dirname(key[1]), key[3]), (None, None))
        if isinstance(rank, int) and key[2] in (None, ip):
            uf.union(("rank", rank), key)


_ATTEMPT = re.compile(r"^(?P<run>.*)/attempt_(?P<k>\d{1,6})$")
_SEPARATOR = re.compile(r"[^A-Za-z0-9]")


def _link_log_folders(events: list[Event], uf: _Union) -> None:
    """Several nodes' torchrun ``--log-dir`` trees, each under a folder named after its node
    (``logs-gpu-07/<run>/attempt_0/1/``): the node's failure table (``host``, ``rank (local_rank)``)
    maps the folder's local rank to its global rank. Only a run's last attempt: a restart may give
    a node other ranks, and the table tells the last one."""
    by_host: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for ev in events:
        if ev.kind != "elastic_cfe":
            continue
        host, rank, local = ev.get("host"), ev.get("rank"), ev.get("local_rank")
        if host and isinstance(rank, int) and isinstance(local, int):
            by_host[str(host)][local].add(rank)
            by_host[str(host).split(".", 1)[0]][local].add(rank)
    if not by_host:
        return
    slots = []  # (key, run folder, attempt number)
    for key in uf.parent:
        m = _ATTEMPT.match(key[1]) if key[0] == "logdir" else None
        if m is not None:
            slots.append((key, m.group("run"), int(m.group("k"))))
    last: dict[str, int] = {}
    for _key, run, k in slots:
        last[run] = max(last.get(run, 0), k)
    hosts_of = {run: _host_in_path(run, by_host) for run in last}
    for key, run, k in slots:
        host = hosts_of[run]
        globs = by_host[host].get(key[2], set()) if host and k == last[run] else set()
        if len(globs) == 1:
            uf.union(("rank", next(iter(globs))), key)


def _host_in_path(path: str, hosts: dict) -> str | None:
    """The longest host name that stands alone in ``path`` (between separators), when only one does.
    Looked up piece by piece (the stretches between separators and their runs), never a regex per
    host: thousands of hosts and folders stay cheap."""
    found: set[str] = set()
    for part in path.replace("\\", "/").split("/")[-8:]:
        part = part[:256]
        seps = [m.start() for m in _SEPARATOR.finditer(part)]
        cuts, ends = [0] + [i + 1 for i in seps], seps + [len(part)]
        found.update(part[a:b] for a in cuts for b in ends if b - a >= 2 and part[a:b] in hosts)
    if not found:
        return None
    longest = max(len(h) for h in found)
    best = [h for h in found if len(h) == longest]
    return best[0] if len(best) == 1 else None


_NUMBER = re.compile(r"(?<![0-9])[0-9]{2,10}(?![0-9])")


def _table_rows(events: list[Event]) -> list[Event]:
    """torchrun's failure-table rows that name both a worker's pid and its rank."""
    return [ev for ev in events if ev.kind == "elastic_cfe" and isinstance(ev.get("pid"), int)
            and isinstance(ev.get("rank"), int)]


def table_pid_ranks(events: list[Event]) -> dict[int, set[int]]:
    """pid -> the ranks torchrun's failure tables give it (one, unless pids were reused)."""
    out: dict[int, set[int]] = defaultdict(set)
    for ev in _table_rows(events):
        out[ev.get("pid")].add(ev.get("rank"))
    return out


def _link_pid_files(events: list[Event], uf: _Union) -> None:
    """torchrun's failure table names each worker's host, pid and rank: a process its lines know by
    host and pid only is that rank, and so is a file a process named after its pid (a script's
    ``logs/<host>-<pid>.log``) that no line of it ties to a rank (only a number of the file's name
    that is one listed pid, of one rank, links the file)."""
    rows = _table_rows(events)
    if not rows:
        return
    pid_ranks: dict[int, set[int]] = defaultdict(set)
    host_pid_ranks: dict[tuple, set[int]] = defaultdict(set)
    console_pid_ranks: dict[tuple, set[int]] = defaultdict(set)
    for ev in rows:
        pid_ranks[ev.get("pid")].add(ev.get("rank"))
        console_pid_ranks[(stream_console(ev.file), ev.get("pid"))].add(ev.get("rank"))
        if ev.get("host"):
            host_pid_ranks[(str(ev.get("host")).split(".", 1)[0], ev.get("pid"))].add(ev.get("rank"))
    # A process known by the host and pid its lines name (a logging format's "[host:pid]"), of a
    # row of the table: that row's rank.
    for key in [k for k in uf.parent if k[0] == "proc" and isinstance(k[1], str)]:
        ranks = host_pid_ranks.get((key[1].split(".", 1)[0], key[2]), set())
        if len(ranks) == 1:
            uf.union(("rank", next(iter(ranks))), key)
    # A process its lines know by pid only (a logging format's "[pid 6753]"), in the console whose failure
    # table lists that pid: that row's rank (the table's workers are the console's node's).
    for key in [k for k in uf.parent if k[0] == "lpid" and k[2] is None]:
        ranks = console_pid_ranks.get((stream_console(key[1]), key[3]), set())
        if len(ranks) == 1:
            uf.union(("rank", next(iter(ranks))), key)
    for key in [k for k in uf.parent if k[0] == "file"]:
        stem = os.path.basename(key[1]).rsplit(".", 1)[0]
        hits = {int(n) for n in _NUMBER.findall(stem)} & pid_ranks.keys()
        if len(hits) == 1 and len(pid_ranks[next(iter(hits))]) == 1:
            uf.union(("rank", next(iter(pid_ranks[next(iter(hits))]))), key)


def _link_identity_labels(uf: _Union) -> None:
    """A console whose launcher labels (local ranks) are each seen beside the same global rank, for
    two ranks or more ("[worker 2] [rank2]: ...", "[default1]:[rank1]: ..."), is one node whose
    index is the rank: a label never seen beside a rank there (a worker that hung, or died without
    a traceback) is that rank too. A console is a file, or its stdout and stderr captured apart
    (job.out, job.err: one stem)."""
    ranks_of: dict = defaultdict(set)
    for k in list(uf.parent):
        if k[0] == "rank":
            ranks_of[uf.find(k)].add(k[1])
    by_file: dict[str, dict[int, set]] = defaultdict(dict)  # console (stem) -> label -> ranks
    for k in list(uf.parent):
        if k[0] == "local":
            by_file[os.path.splitext(k[1])[0]].setdefault(k[2], set()).update(ranks_of.get(uf.find(k), ()))
    for f, labels in by_file.items():
        seen = {lr: g for lr, g in labels.items() if g}
        if len(seen) < 2 or any(g != {lr} for lr, g in seen.items()):
            continue
        for k in [k for k in uf.parent if k[0] == "local" and os.path.splitext(k[1])[0] == f]:
            if not ranks_of.get(uf.find(k)):
                uf.union(("rank", k[2]), k)


#: One process's stdout and stderr written apart, one name: submitit's ``<job>_<task>_log.out`` and
#: ``.err``, Slurm's ``--output=%j_%t.out --error=%j_%t.err``.
_STREAM_EXTS = (".out", ".err")


def stream_console(path: str) -> str:
    """The name one process's or node's stdout and stderr written apart share (``node1.out`` and
    ``node1.err``: ``node1``); any other file's own path."""
    stem, ext = os.path.splitext(path)
    return stem if ext in _STREAM_EXTS else path


#: A script's banner stating its rank in words its pattern left in the text ("... rank=1 world_size=4").
_SELF_RANK = re.compile(r"(?<![\w-])(?:rank|RANK) ?[=:] ?(\d{1,7})(?![\d.])")


def stated_rank(ev: Event) -> int | None:
    """The rank a script's ``rank_world`` banner states of its writer: its pattern's field, else the
    text's ``rank=N``."""
    r = ev.fields.get("rank")
    if isinstance(r, int):
        return r
    m = _SELF_RANK.search(ev.text)
    return int(m.group(1)) if m else None


def _named_rank(ev: Event) -> int | None:
    """The global rank a line names: its label's, or a script's "rank 1/3" banner's (before the job
    model has set ``Event.rank`` from it)."""
    r = ev.rank if ev.rank is not None else ev.fields.get("rank") if ev.kind == "rank_world" else None
    return r if isinstance(r, int) else None


def _link_stream_pairs(events: list[Event], uf: _Union) -> None:
    """A file of one process's stderr (``X.err``) whose lines name no rank, beside its stdout (``X.out``)
    whose lines name one rank only: that rank's. Never a console's pair (``job.out`` naming several
    ranks, or none, or whose scripts' banners state several: "rank=1 ...", "rank=0 ..."; or a launcher's
    failure table there that lists several ranks: a node's console of several workers)."""
    files = {key[1] for key in uf.parent if key[0] == "file"}
    if not any(f.endswith(_STREAM_EXTS) for f in files):
        return  # (most jobs: no X.err whose lines name no writer)
    named: dict[str, set[int]] = defaultdict(set)
    stated: dict[str, set[int]] = defaultdict(set)  # the ranks its scripts' banners state in words
    tabled: dict[str, set] = defaultdict(set)  # stem -> the ranks a launcher's failure table there lists
    for ev in events:
        if ev.file.endswith(_STREAM_EXTS):
            r = _named_rank(ev)
            named[ev.file].add(r) if r is not None else named.setdefault(ev.file, set())
            if ev.kind == "rank_world" and (r := stated_rank(ev)) is not None:
                stated[ev.file].add(r)
            if ev.kind == "elastic_cfe":
                tabled[stream_console(ev.file)].add(ev.fields.get("rank"))
    by_stem: dict[str, list[str]] = defaultdict(list)
    for f in named:
        by_stem[stream_console(f)].append(f)
    for stem, paths in by_stem.items():
        if len(paths) != 2 or len(tabled.get(stem, ())) > 1:
            continue
        (a, ra), (b, rb) = sorted(((f, named[f]) for f in paths), key=lambda x: len(x[1]))
        if not ra and len(rb) == 1 and len(stated[a]) < 2 and ("file", a) in uf.parent:
            uf.union(("rank", next(iter(rb))), ("file", a))


def shared_local_labels(events: list[Event]) -> set[tuple[str, int]]:
    """(file, local rank) labels that lines of two global ranks carry: one console of several nodes'
    torchrun (``--tee 3`` under srun without ``--label``), where ``[default0]:`` is local rank 0 of every
    node (two ranks' lines under it, or two nodes' failure tables listing it). Such a label names no
    writer."""
    seen: dict[tuple[str, int], set[int]] = defaultdict(set)
    for ev in events:
        if ev.local_rank is not None and ev.rank is not None:
            seen[(ev.file, ev.local_rank)].add(ev.rank)
        elif ev.kind == "elastic_cfe" and isinstance(ev.get("rank"), int) and isinstance(ev.get("local_rank"), int):
            seen[(ev.file, ev.get("local_rank"))].add(ev.get("rank"))  # (two nodes' failure tables in one file)
    return {k for k, ranks in seen.items() if len(ranks) > 1}


#: Kinds that only a launcher, a scheduler or a driver writes (about its workers): a file holding one is
#: theirs too, and its lines that name nobody may be theirs.
_NOT_A_WORKER = ("elastic_", "slurm_", "mp_spawn", "ds_exit", "mpi_abort", "ray_", "shell_job", "worker_exit",
                 "worker_mem_kill", "unit_exit", "timer_reaped")


def _link_one_rank_files(events: list[Event], uf: _Union) -> None:
    """A file in which only the script's own banner names a rank ("rank 1/3": a node's ``X.out`` of one
    worker), one rank, and which no launcher writes into: its lines that name nobody (steps, records)
    are that rank's. A console of several writers names several, holds a launcher's lines, or labels
    its lines (then the unlabelled ones may be another writer's)."""
    files = {key[1] for key in uf.parent if key[0] == "file"}
    if not files:
        return
    ranks: dict[str, set] = defaultdict(set)
    for ev in events:
        if ev.file not in files:
            continue
        if ev.kind.startswith(_NOT_A_WORKER) or ev.local_rank is not None or ev.fields.get("excerpt_of") is not None:
            ranks[ev.file].add(None)  # a launcher's file, a label, an excerpt of other files: not one rank's
        elif ev.kind == "rank_world" and ev.rank is None and isinstance(r := ev.fields.get("rank"), int):
            ranks[ev.file].add(r)  # the script's own "rank 1/3" banner
        elif ev.rank is not None or ev.host is not None or ev.pid is not None:
            # a label or a writer's prefix: the file's other lines may be another writer's (C++ output
            # torch's label misses, a console's other ranks)
            ranks[ev.file].add(("writer", ev.rank, ev.host, ev.pid))
    for f, named in ranks.items():
        if len(named) == 1 and isinstance(r := next(iter(named)), int):
            uf.union(("rank", r), ("file", f))


#: The order of a device mesh's dimensions, outermost first: tensor-parallel ranks are neighbours (Megatron's and
#: torchtitan's default; "rank grid (dp x tp)", "stage s, replica d = rank s*2+d").
_MESH_ORDER = ("pp", "dp", "cp", "ep", "tp")


def _link_group_coords(events: list[Event], uf: _Union) -> None:
    """A console whose records name their writer by its place in the parallel groups only ("[tp=1 dp=0]"): the
    place's rank, by the mesh's usual order (tensor-parallel innermost, pipeline outermost), when the places seen
    fill the whole mesh (one rank each, the mesh's size the world's as the script states it) and no line naming both
    a rank and a place contradicts the order."""
    keys = [k for k in uf.parent if k[0] == "coords"]
    if not keys:
        return
    worlds = {ev.get("world_size") for ev in events if ev.kind == "rank_world" and isinstance(ev.get("world_size"), int)}
    said = {(stream_console(ev.file), ev.fields["coords"], ev.rank) for ev in events
            if ev.rank is not None and ev.fields.get("coords") is not None}
    by_console: dict[str, list[tuple]] = defaultdict(list)
    for k in keys:
        by_console[k[1]].append(k)
    for console, ks in by_console.items():
        places = {k[2]: dict(c.split("=") for c in k[2].split()) for k in ks}
        dims = {tuple(sorted(p)) for p in places.values()}
        if len(dims) != 1 or not set(next(iter(dims))) <= set(_MESH_ORDER):
            continue
        order = [d for d in _MESH_ORDER if d in next(iter(dims))]
        sizes = [max(int(p[d]) for p in places.values()) + 1 for d in order]
        size = math.prod(sizes)
        if len(places) != size or (worlds and worlds != {size}):
            continue
        rank_of = {}
        for text, p in places.items():
            r = 0
            for d, n in zip(order, sizes, strict=True):
                r = r * n + int(p[d])
            rank_of[text] = r
        if any(c == console and rank_of.get(text, r) != r for c, text, r in said):
            continue  # (the script numbers its mesh otherwise)
        for k in ks:
            uf.union(("rank", rank_of[k[2]]), k)


def link_launcher_maps(events: list[Event], uf: _Union) -> None:
    _link_group_coords(events, uf)
    _link_stream_pairs(events, uf)
    _link_one_rank_files(events, uf)
    _link_local_to_global(events, uf)
    _link_log_folders(events, uf)
    _link_ray_workers(events, uf)
    _link_pid_files(events, uf)
    _link_identity_labels(uf)
