"""Who wrote each event: group events into processes and give each process its global rank.

``[N]`` in an NCCL prefix is the CUDA device, never the rank. A process is known by several keys:
its NCCL ``host:pid``, the global rank a launcher prefix gives (``[rank12]:``, ``srun --label``,
Open MPI tags), the torchrun local rank ``[default3]:`` within one file. Keys seen on the same line,
or in a file written by one process only, belong to the same process (union-find). Its global rank
then comes, in order of trust, from a launcher prefix, the NCCL communicator that spans the whole
job (``comm .. rank R nranks WORLD``), torch's ``initialization options ... global rank``, the file
name (``rank-12.log``), and last the rank inside the default process group. A process known only from
its flight-recorder dump keeps the dump's rank, with rank source "flight recorder". When none
applies the process keeps no rank: we never guess.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from ..eventcap import DENSE
from ..events import Event
from .hosts import labels_that_are_no_host
from .leftover import the_one_rank_left
from .links import _Union, link_launcher_maps, shared_local_labels, stated_rank, stream_console
from .merge import merge_same_rank
from .numbered import local_named, numbered_ranks
from .relays import HOST_BLOCK_KINDS, headed_sources, pssh_blocks, relay_writers, relaying_streams

#: Only explicit words: "worker-1" or "node-3" in a file name is usually a host, not a rank.
_FILE_RANK = re.compile(r"(?:^|[^a-z])(?:rank|task)[-_.]?(\d{1,7})(?:\D|$)", re.I)
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


#: torchrun --log-dir: <log dir>/<run id>/attempt_<k>/<local rank>/{stdout,stderr}.log (and error.json)
_LOGDIR_SLOT = re.compile(r"^(?P<attempt>.*/attempt_\d{1,6})/(?P<local>\d{1,5})/(?:stdout\.log|stderr\.log|error\.json)$")


#: A logged record saying where its own failure happened ("step 12 failed on rank 2: cannot decode sample ...,
#: skipping batch"): in a console no prefix labels, its writer's rank.
#: (or "... on global rank 1: ...; aborting": a process names itself by its global rank)
_FAILED_ON_RANK = re.compile(r"(?:\b(?:failed|failure|error|exception|crashed|died|aborted|skipp(?:ed|ing)) on|"
                             r"\bon global) rank[ =:]?(\d{1,7})\b(?![.\d])")
_FAILED_ON_KINDS = frozenset(("log_error", "log_warning", "log_carry_on"))


#: The lines of a traceback, which torch's excepthook labels "[rankN]: " in a console that labels nothing else.
_HOOK_KINDS = frozenset(("traceback_start", "py_frame", "py_script_frame", "py_signal_frame", "python_exception", "py_chain"))


def _on_rank(text: str) -> bool:
    """(a cheap test before ``_FAILED_ON_RANK``)"""
    return "on rank" in text or "on global rank" in text
_SELF_LOCAL = re.compile(r"(?<![\w-])(?:local_rank|LOCAL_RANK|local rank)(?: ?[=:] ?| )(\d{1,5})(?![\d.])")


@lru_cache(maxsize=1 << 16)
def logdir_slot(path: str) -> tuple[str, int] | None:
    """(the attempt folder, the local rank) of a file in torchrun's ``--log-dir`` tree, else None.
    (Cached: asked once per event, of a few thousand paths.)"""
    m = _LOGDIR_SLOT.match(path.replace("\\", "/"))
    return (m.group("attempt"), int(m.group("local"))) if m else None


def file_rank(path: str) -> int | None:
    """Rank from a file name like ``rank-00012.log``, ``worker_3.out``, or from the folder of a
    ``stdout``/``stderr`` file (Open MPI's ``--output-filename DIR``: ``DIR/1/rank.3/stdout``); None
    when absent."""
    parts = path.replace("\\", "/").rsplit("/", 2)
    m = _FILE_RANK.search(parts[-1])
    if m is None and len(parts) > 1 and parts[-1].split(".", 1)[0] in ("stdout", "stderr"):
        m = _FILE_RANK.search(parts[-2])
    return int(m.group(1)) if m else None


def _is_default_pg(ev: Event) -> bool:
    f = ev.fields
    return f.get("pg_id") in _DEFAULT_PG and f.get("pg_guid") in _DEFAULT_PG


#: Lines a controller writes about its workers (Ray Train's table and reports): they make no process
#: of their writer.
_ABOUT_WORKERS = frozenset(("ray_worker_rank", "ray_worker_context", "ray_error_snippet", "unit_exit"))


def _keys(ev: Event, file_has_labels: bool) -> list[tuple]:
    if ev.kind in _ABOUT_WORKERS:
        return []
    keys = []
    slot = logdir_slot(ev.file)
    if slot is not None:
        # The folder is the process: its stdout.log and stderr.log, one attempt, one local rank.
        if ev.local_rank is None:
            ev.local_rank = slot[1]
        keys.append(("logdir", *slot))
    if ev.host is not None and ev.pid is not None:
        keys.append(("proc", ev.host, ev.pid))
    coords = ev.fields.get("coords")
    if coords is not None and ev.rank is None:
        keys.append(("coords", stream_console(ev.file), coords))  # (model/links: the place's rank, by the mesh)
    lpid = ev.fields.get("launcher_pid")
    if lpid is not None:
        # A launcher prefix that names the pid but no host (Ray's "(RayTrainWorker pid=N, ip=A)"):
        # the same pid and address in one file is one process, whose NCCL lines carry that prefix too.
        keys.append(("lpid", ev.file, ev.fields.get("launcher_ip"), lpid))
    if ev.rank is None and ev.kind in ("rank_world", "train_step", "log_error"):
        # A script stating its own rank ("rank 3 of 8", "world_size=8 rank=3", a step line's
        # "Epoch: 0 | Step: 3 | Rank: 2 | loss ...", a logged error's "[RANK 2]") wrote that line.
        own = stated_rank(ev) if ev.kind == "rank_world" else ev.get("rank")
        if isinstance(own, int):
            keys.append(("rank", own))
    if ev.rank is None and not keys and ev.kind in _FAILED_ON_KINDS and not file_has_labels and _on_rank(ev.text) \
            and ev.fields.get("rank") is None and file_rank(ev.file) is None:
        m = _FAILED_ON_RANK.search(str(ev.fields.get("msg") or ev.text))
        if m is not None:
            keys.append(("rank", int(m.group(1))))
    if ev.rank is not None:
        keys.append(("rank", ev.rank))
    if ev.local_rank is not None:
        keys.append(("local", ev.file, ev.local_rank))
    if not keys and ev.fields.get("pg_rank") is not None and _is_default_pg(ev) and not file_has_labels \
            and file_rank(ev.file) is None:
        # torch <= 2.1 lines carry only "[Rank N]": in the default group that is the global rank.
        ev.rank = ev.fields["pg_rank"]
        keys.append(("rank", ev.rank))
    return keys


_UNSHARED = object()


def _unnamed_class(ev: Event):
    """What ``_keys`` reads of an event that names no writer, beyond the writer signature: its
    kind's class and a step line's own rank; ``_UNSHARED`` when ``_keys`` reads its text or sets a
    field of it (a ``--log-dir`` file's local rank, old torch's ``[Rank N]``), so that it is worked
    out alone."""
    kind = ev.kind
    if kind == "rank_world" or ev.fields.get("pg_rank") is not None or logdir_slot(ev.file) is not None:
        return _UNSHARED
    if kind in _ABOUT_WORKERS:
        return "about"
    if kind in _FAILED_ON_KINDS and _on_rank(ev.text):
        return _UNSHARED
    if kind in ("train_step", "log_error"):
        own = ev.fields.get("rank")
        return ("own", own) if isinstance(own, int) else None
    return None


#: The fields that name a writer besides the event's own (launcher's pid and address, journal stream,
#: the file an excerpt's line came from).
_SIG_KEYS = frozenset(("launcher_pid", "launcher_ip", "stream_pid", "excerpt_of", "coords"))


def build_processes(events: list[Event], world: int | None) -> list[Proc]:
    """Group events into processes and assign global ranks (see module docstring)."""
    kinds = relay_writers(events)
    file_procs: dict[str, set] = defaultdict(set)
    file_labels: set[str] = set()
    file_devs: dict[str, set] = defaultdict(set)
    relay_files: set[str] = set()  # files where a relay labels its process's lines ("[default0]:")
    for ev in events:
        if ev.host is not None and ev.pid is not None:
            file_procs[ev.file].add((ev.host, ev.pid))
        if ev.fields.get("relayed"):
            relay_files.add(ev.file)
        if (ev.rank is not None or ev.local_rank is not None) and ev.kind not in _HOOK_KINDS:
            file_labels.add(ev.file)  # (torch's "[rank1]: " on an uncaught traceback labels nothing else)
        if ev.cuda_dev is not None and ev.kind.startswith("nccl_"):
            file_devs[ev.file].add(ev.cuda_dev)

    uf = _Union()
    ev_key: list[tuple] = []
    # Events of one writer in one file share their keys: they are worked out once per distinct
    # (file, host, pid, rank, local rank, launcher address). Only events naming none of these look
    # at their other fields.
    by_writer: dict[tuple, tuple] = {}
    self_local: dict[str, list] = defaultdict(list)  # file -> (event, the local rank its script states)
    relayed = relaying_streams(events)
    if "file_header" in kinds:
        headed_sources(events)
    if not HOST_BLOCK_KINDS.isdisjoint(kinds):
        pssh_blocks(events)
    shared_locals = shared_local_labels(events)
    for ev in events:
        f = ev.fields
        if _SIG_KEYS.isdisjoint(f):  # (most events: none of those keys, one C-level test instead of four gets)
            sig = (ev.file, ev.host, ev.pid, ev.rank, ev.local_rank, None, None, None, None, None)
        else:
            sig = (ev.file, ev.host, ev.pid, ev.rank, ev.local_rank, f.get("launcher_pid"), f.get("launcher_ip"),
                   f.get("stream_pid"), f.get("excerpt_of"), f.get("coords"))
        named = ev.pid is not None or ev.rank is not None or ev.local_rank is not None
        if not named:
            # An event naming no writer: its keys follow from the same signature and what its kind
            # reads (a step line's own rank), unless _keys sets a field of it (see _unnamed_class).
            cls = _unnamed_class(ev)
            sig = None if cls is _UNSHARED else (*sig, cls)
        key0 = by_writer.get(sig) if sig is not None else None
        if key0 is None:
            keys = _keys(ev, ev.file in file_labels)  # may set ev.rank (old torch's "[Rank N]")
            if shared_locals and (ev.file, ev.local_rank) in shared_locals:
                # that label is several nodes' local rank: it names no writer (a line that names its rank too
                # is that rank's)
                keys = [k for k in keys if k[0] != "local"]
            src = ev.fields.get("excerpt_of")
            if src is not None and ev.kind not in _ABOUT_WORKERS:
                # an excerpt's line from another file (grep's prefix, head/tail's header): that file's writer,
                # whose rank its name may give, as a per-rank file's does
                keys.append(("src", ev.file, src))
                if not any(k[0] == "rank" for k in keys) and file_rank(str(src)) is not None:
                    keys.append(("rank", file_rank(str(src))))
            spid = ev.fields.get("stream_pid")
            if spid is not None and ev.kind not in _ABOUT_WORKERS and (ev.file, spid) not in relayed:
                keys.append(("stream", ev.file, spid))  # a journal stream of one process: its lines
            fp = file_procs.get(ev.file, ())
            if len(fp) == 1 and (ev.file not in relay_files or ev.fields.get("relayed")):
                # a file written by one process: everything in it is that process (but a line its relay did not
                # label, in a file where it labels that process's: the launcher's own, torchrun's TCPStore warnings)
                keys.append(("proc", *next(iter(fp))))
            if not keys:
                keys = [("file", ev.file)]
            uf.find(keys[0])  # registered even alone: torchrun's local -> global links look keys up
            for k in keys[1:]:
                uf.union(keys[0], k)
            key0 = keys[0]
            if sig is not None:
                by_writer[sig] = key0
            if key0 == ("file", ev.file) and ev.kind == "rank_world" and ev.local_rank is None:
                m = _SELF_LOCAL.search(ev.text)  # "... local_rank 1 world_size 3 ...": its own
                if m is not None:
                    self_local[ev.file].append((ev, int(m.group(1))))
        ev_key.append(key0)
    for stated in self_local.values():
        # A file of one writer (no other name in it) whose script states one local rank: that is
        # the writer's (several values: several processes, whose lines nothing tells apart).
        if len({lr for _ev, lr in stated}) == 1:
            for ev, lr in stated:
                ev.local_rank = lr

    # Files holding several writers (interleaved, per-node) say nothing about one rank by their name.
    # Several pids of one host on one GPU are one rank restarted (torchrun attempts), not several.
    shared = {f for f, procs in file_procs.items()
              if len({h for h, _ in procs}) > 1 or len(file_devs.get(f, ())) > 1}
    shared |= {f for f, r in {(e.file, e.rank) for e in events if e.rank is not None}
               if file_rank(f) not in (None, r)}
    link_launcher_maps(events, uf)
    groups: dict = defaultdict(list)
    root_of: dict[tuple, tuple] = {}
    for ev, k in zip(events, ev_key, strict=True):
        root = root_of.get(k)
        if root is None:
            root = root_of[k] = uf.find(k)
        groups[root].append(ev)
    procs = [Proc(key=root, events=evs, files={e.file for e in evs}) for root, evs in groups.items()]
    labels: dict[str, set] = defaultdict(set)
    for ev in events:
        if ev.rank is not None:
            labels[ev.file].add(("rank", ev.rank))
        if ev.local_rank is not None:
            labels[ev.file].add(("local", ev.local_rank))
    files = {f for p in procs for f in p.files}
    numbered = numbered_ranks(files - shared, labels)
    for f in local_named(files, file_rank):
        numbered[f] = None  # (a node's "rank1.log": its local rank, no global one)
    # A global rank known only through a link (torchrun's local -> global map) sits in the union.
    linked: dict = defaultdict(set)
    for k in list(uf.parent):
        if k[0] == "rank":
            linked[uf.find(k)].add(k[1])
    for p in procs:
        _fill_identity(p, world, shared, numbered)
        if p.rank is None and len(linked.get(p.key, ())) == 1:
            p.rank, p.rank_source = next(iter(linked[p.key])), "launcher"
    _single_node_log_folders(procs, world)
    _one_node_labels(procs, world)
    the_one_rank_left(procs, world)
    labels_that_are_no_host(procs)
    return merge_same_rank(procs)


def _single_node_log_folders(procs: list[Proc], world: int | None) -> None:
    """One node's ``--log-dir`` attempt holding a folder for every rank of the world: local rank is
    global rank (a multi-node job's attempt holds only its node's ranks, and says nothing here)."""
    slots: dict[str, set[int]] = defaultdict(set)
    for p in procs:
        for f in p.files:
            slot = logdir_slot(f)
            if slot is not None:
                slots[slot[0]].add(slot[1])
    for p in procs:
        found = {logdir_slot(f) for f in p.files} - {None}
        if p.rank is not None or len(found) != 1 or world is None:
            continue
        attempt, local = next(iter(found))
        held = slots[attempt]  # sizes first: a claimed world of millions is not built as a set per process
        if len(held) == world and held == set(range(world)):
            p.rank, p.rank_source = local, "log folder"


def _one_node_labels(procs: list[Proc], world: int | None) -> None:
    """One node (one host at most) whose launcher labels its workers by index, each label seen with
    a global rank being that rank: a process known only by its label (its own file, no rank line:
    a home-grown launcher's logs/worker-1.log) is the rank of that number, when no other process
    holds it and no label repeats (restarts, or several nodes)."""
    if not world:
        return
    labelled = [p for p in procs if p.local_rank is not None]
    if len({p.host for p in procs if p.host}) > 1 or \
            any(p.rank is not None and p.rank != p.local_rank for p in labelled):
        return
    bare = [p for p in labelled if p.rank is None]
    taken = {p.rank for p in procs if p.rank is not None}
    locals_ = [p.local_rank for p in bare]
    if len(set(locals_)) != len(locals_) or any(lr >= world or lr in taken for lr in locals_):
        return
    if len(bare) + len([p for p in labelled if p.rank is not None]) < 2:
        return  # one labelled process says nothing about the launcher's numbering
    for p in bare:
        p.rank, p.rank_source = p.local_rank, "launcher label"


def _most_common(counts: dict):
    """The value seen most often, the first seen among equals (as Counter.most_common(1)); None."""
    return max(counts, key=counts.__getitem__) if counts else None


def _fill_identity(p: Proc, world: int | None, shared: set[str], numbered: dict[str, int | None]) -> None:
    hosts: dict = {}
    pids: dict = {}
    devs: dict = {}
    lrs: dict = {}
    launcher: dict = {}
    dense_hosts: dict = {}
    dense_pids: dict = {}
    for e in p.events:  # (one pass: a process has hundreds of events, a job thousands of processes)
        # Step lines vote only when nothing else does: a batch scan keeps 16 of a file's hundreds (eventcap),
        # a live one all, so their count says nothing (two runs' pids in one log folder: t317_kill_..._prev).
        dense = e.kind in DENSE
        if e.host:
            h = dense_hosts if dense else hosts
            h[e.host] = h.get(e.host, 0) + 1
        if e.pid is not None:
            d = dense_pids if dense else pids
            d[e.pid] = d.get(e.pid, 0) + 1
        if e.cuda_dev is not None and e.kind.startswith("nccl_"):
            devs[e.cuda_dev] = devs.get(e.cuda_dev, 0) + 1
        if e.local_rank is not None:
            lrs[e.local_rank] = lrs.get(e.local_rank, 0) + 1
        if e.rank is not None:
            launcher[e.rank] = launcher.get(e.rank, 0) + 1
    p.host, p.pid, p.cuda_dev, p.local_rank = (_most_common(hosts or dense_hosts), _most_common(pids or dense_pids),
                                               _most_common(devs), _most_common(lrs))
    if launcher:
        p.rank, p.rank_source = _most_common(launcher), "launcher"
        if all(e.kind.startswith("fr_") for e in p.events if e.rank is not None):
            p.rank_source = "flight recorder"  # only dumps name it (nccl_trace_rank_<N>): no log line does
            return
        if all(e.rank is None or e.fields.get("pg_rank") == e.rank for e in p.events) and \
                not any(e.host for e in p.events) and _only_pg_ranks(p):
            p.rank_source = "default group"
        return
    best = None  # the communicator spanning the job: the largest nranks seen by this process
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
    for f in sorted(p.files - shared):
        r = file_rank(f) if f not in numbered else numbered[f]  # (a series of files 0..N-1: "worker-2.log")
        if r is not None:
            p.rank, p.rank_source = r, "file name"
            return


def _only_pg_ranks(p: Proc) -> bool:
    return all(e.fields.get("pg_rank") is not None for e in p.events if e.rank is not None)
