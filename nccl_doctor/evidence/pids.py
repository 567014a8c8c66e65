"""Which rank a launcher's report means when it names a process by its pid, its index or its unit:
the rank whose own lines carry that pid (``state_for_pid``), the one a home-grown launcher says it
started as that pid (``started_rank``) or a rank's own line names as its own (``self_pid_rank``),
torchrun's failure-table row (``table_rank``), a DeepSpeed launcher's children (``ds_spawned``), and
``fail_ranks``: the global ranks any failure event speaks for.

Results are cached per job like the facts.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from ..events import Event
from ..model import JobModel, RankState
from ..model.identity import file_rank
from ..model.links import expand_tasks, rank_list
from .facts import _per_job, global_rank, host_of, int_in
from .nodename import node_name


def _short_host(host: str | None) -> str | None:
    return host.split(".", 1)[0] if host else None  # NCCL cuts at the first dot, torchrun's fqdn does not


@_per_job
def _states_by_pid(job: JobModel) -> dict[int, list[RankState]]:
    out: dict[int, list[RankState]] = defaultdict(list)
    for r in job.ranks:
        if r.pid is not None and r.rank is not None:
            out[r.pid].append(r)
    return out


@_per_job
def _states_by_earlier_pid(job: JobModel) -> dict[int, list[RankState]]:
    """The ranks by the pids their own lines gave before their last one: a rank restarted by torchrun is
    one state across its attempts, under its last process's pid."""
    out: dict[int, list[RankState]] = defaultdict(list)
    for r in job.ranks:
        if r.pid is not None and r.rank is not None:
            for pid in {e.pid for e in r.events if e.pid is not None and e.pid != r.pid}:
                out[pid].append(r)
    return out


def state_for_pid(job: JobModel, pid: Any, host: str | None = None, file: str | None = None) -> RankState | None:
    """The rank process with this pid (on this host, or writing to this file, when the pid alone is
    ambiguous: pids repeat across containers); None when unknown or still ambiguous."""
    key = int_in(pid) or -1
    cands = _states_by_pid(job).get(key, [])
    if not cands and job.kinds("elastic_restart"):
        cands = _states_by_earlier_pid(job).get(key, [])
    if not cands and (said := self_pid_rank(job, key)) is not None and (st := job.known_ranks().get(said)) is not None:
        cands = [st]  # (a process whose lines carry no pid, but one of them names it: its start-up line)
    if host:
        hosted = [r for r in cands if _short_host(r.host) in (None, _short_host(host))]
        # (a label that names no host, a compose container's "trainer-1" on every node: the process of that pid
        # writing to the very file the report is in)
        cands = hosted or ([r for r in cands if file in r.files] if file else [])
    if len(cands) > 1 and file:
        cands = [r for r in cands if file in r.files]
    return cands[0] if len(cands) == 1 else None


#: The ranks a CheckpointException names ("CheckpointException ranks:dict_keys([2])").
_CHECKPOINT_RANKS = re.compile(r"ranks:\s?dict_keys\(\[([\d, ]{1,400})\]\)")


def fail_ranks(job: JobModel, ev: Event) -> list[int | None]:
    """Global ranks a failure event speaks for (exit reports name theirs in the fields or by pid)."""
    if ev.kind == "slurm_task_exit":
        return list(expand_tasks(ev.get("tasks"))) or [None]
    if ev.kind == "python_exception" and str(ev.get("exc_type") or "").endswith("CheckpointException"):
        named = _CHECKPOINT_RANKS.search(str(ev.get("msg") or ""))
        if named is not None:  # torch.distributed.checkpoint raises on every rank the ranks that failed
            return [int(r) for r in re.findall(r"\d{1,7}", named.group(1))][:64] or [None]
    if ev.kind in ("elastic_cfe", "mpi_abort") and int_in(ev.get("rank")) is not None:
        return [int_in(ev.get("rank"))]
    if ev.kind in ("worker_exit", "worker_mem_kill"):
        return [_worker_rank(job, ev)]
    if ev.kind == "unit_exit":
        return [_unit_rank(job, ev)]
    if ev.kind in ("elastic_failed", "elastic_cfe", "ds_exit", "oom_killer", "timer_reaped", "shell_job_died") \
            and ev.get("pid") is not None:
        st = state_for_pid(job, ev.get("pid"), ev.get("host") or host_of(job, ev), ev.file)
        if st is not None:
            return [st.rank]
        said = self_pid_rank(job, int_in(ev.get("pid")))
        if said is not None and ev.kind in ("oom_killer", "timer_reaped", "shell_job_died"):
            return [said]  # (a kernel's, a timer's or a shell's report of a pid only the rank's own line names)
        if ev.kind == "elastic_failed" and (ev.file, int_in(ev.get("pid"))) in _table_ranks(job):
            return [_table_ranks(job)[(ev.file, int_in(ev.get("pid")))]]
        local = int_in(ev.get("local_rank")) if ev.kind == "elastic_failed" else None
        if local is not None:
            if (base := _agent_base(job, ev.file)) is not None:
                return [base + local]  # the node's echoed torchrun command places its workers
            if _one_agent_for_all(job):
                return [local]  # one agent ran every rank: its local ranks are the ranks
            if (base := _worker_base(job, ev.file)) is not None:
                return [base + local]  # a worker of its node said its rank and local rank
        if ev.kind in ("elastic_failed", "elastic_cfe") and global_rank(job, ev) is None:
            lone = _lone_unseen_rank(job, ev.get("host") or host_of(job, ev) or node_name(job, ev.file))
            if lone is not None:
                return [lone]
    return [global_rank(job, ev)]


def _lone_unseen_rank(job: JobModel, host: str | None) -> int | None:
    """The one rank of the world no line accounts for, when the process a node's agent reports is on a node
    none of the ranks seen runs on (a rank that logged nothing, killed: its agent's "failed (exitcode: -9)
    local_rank: 0" is all there is of it, and every other rank of the world is elsewhere)."""
    unseen = _unseen_rank(job)
    if not host or unseen is None or _short_host(host) in unseen[1]:
        return None
    return unseen[0]


@_per_job
def _unseen_rank(job: JobModel) -> tuple[int, set[str | None]] | None:
    """(the one rank of the world no line names, the nodes of all the others) when every other rank's node is known."""
    world = job.ranks_expected
    seen = job.known_ranks()
    if not world or world > 65536 or len(seen) != world - 1:
        return None
    missing = [r for r in range(world) if r not in seen]
    hosts = {_short_host(st.host) for st in seen.values()}
    return (missing[0], hosts) if len(missing) == 1 and None not in hosts else None


def _worker_base(job: JobModel, file: str) -> int | None:
    """The first global rank of the node whose console ``file`` is, from its workers' own start-up lines giving their
    rank and local rank ("rank=0 local_rank=0 group_rank=0 world_size=4") in that console (its ``.out`` beside the
    agent's ``.err``): torchrun numbers a node's workers in a row, so rank - local rank is the node's first; None when
    they disagree (consoles joined) or none says."""
    bases = _worker_bases(job).get(_console(file), set())
    return next(iter(bases)) if len(bases) == 1 and min(bases) >= 0 else None


@_per_job
def _worker_bases(job: JobModel) -> dict[str, set[int]]:
    """console -> rank - local rank of each worker start-up line in it that gives both (one pass per job: asked once
    per agent's failure line)."""
    out: dict[str, set[int]] = defaultdict(set)
    for e in job.by_kind("rank_world"):
        if (r := int_in(e.get("rank"))) is not None and (local := int_in(e.get("own_local"))) is not None:
            out[_console(e.file)].add(r - local)
    return out


def _console(path: str) -> str:
    """A console's path without its ``.out`` / ``.err`` / ``.log`` ending: a node's stdout and stderr are one console."""
    return re.sub(r"\.(?:out|err|log|txt)$", "", path)


def _agent_base(job: JobModel, file: str) -> int | None:
    """The first global rank of the node whose console ``file`` is (``_agent_node``)."""
    node = _agent_node(job, file)
    return node[0] * node[1] if node is not None else None


def _agent_node(job: JobModel, file: str) -> tuple[int, int] | None:
    """(node rank, workers per node) of the node whose console ``file`` is, from its one echoed torchrun command (fixed
    node count, static ranks: parsers/elastic.toml torchrun_command); None without one, or with two (consoles joined)."""
    cmds = _torchrun_commands(job).get(file, ())
    if len(cmds) != 1:
        return None
    node, nproc = next(iter(cmds))
    return (node, nproc) if node is not None and nproc is not None else None


@_per_job
def _torchrun_commands(job: JobModel) -> dict[str, set[tuple[int | None, int | None]]]:
    """file -> the (node rank, workers per node) of the torchrun commands echoed in it (grouped once per job)."""
    out: dict[str, set[tuple[int | None, int | None]]] = defaultdict(set)
    for e in job.by_kind("torchrun_command"):
        out[e.file].add((int_in(e.get("node_rank")), int_in(e.get("nproc"))))
    return out


@_per_job
def _one_agent_for_all(job: JobModel) -> bool:
    """One torchrun agent wrote every agent line, and the workers it stopped or saw fail are as many as
    the job's ranks: a job of one node, whose local ranks are its global ranks (no failure table needed:
    a driver that catches ChildFailedError never prints it)."""
    agents = {e.get("agent_pid") for e in job.by_kind("elastic_failed", "elastic_sigterm") if e.get("agent_pid")}
    if len(agents) != 1 or not job.ranks_expected:
        return False
    workers = {int_in(e.get("pid")) for e in job.by_kind("elastic_failed", "elastic_sigterm")} - {None}
    return len(workers) == job.ranks_expected


#: How a home-grown launcher names a worker by its index (else by its pid: "child 3887").
_INDEX_WORDS = ("worker", "rank", "gpu", "proc")


def _worker_rank(job: JobModel, ev: Event) -> int | None:
    """The rank a home-grown launcher's exit report is about: the worker's index, or its pid as the
    launcher's own "started rank 3 as pid 3887" names it, or as the process's lines do."""
    word = str(ev.get("word") or "").lower()
    if word in _INDEX_WORDS:
        return int_in(ev.get("who"))
    pid = int_in(ev.get("pid")) if ev.get("pid") is not None else int_in(ev.get("who"))
    started = started_rank(job, pid, ev.file)
    if started is not None:
        return started
    st = state_for_pid(job, pid, host_of(job, ev), ev.file)
    if st is not None:
        return st.rank
    if word not in ("child", "pid", "") and ev.rank is None and int_in(ev.get("who")) is not None:
        return int_in(ev.get("who"))  # the launcher's own name for it, with its index ("trainer-3")
    return ev.rank  # the report's own rank tag names the child (Lightning's observer: "[rank: 1] Child process ...")


def _unit_rank(job: JobModel, ev: Event) -> int | None:
    """The rank a container's or service's exit report is about: the one rank whose lines carry that
    container's name (docker compose's prefix names each line's container), else the rank its name
    states (``ddp-rank1-1``, as a file's name would); a templated service's
    instance number ("train@2.service"), as a launcher's worker index, when that rank ran on the
    host the report comes from."""
    name = ev.get("container")
    if name is not None:
        ranks = {st.rank for st in job.ranks if st.host == name}
        if not ranks:  # no line carries the container's name: a name that states a rank ("ddp-rank1-1")
            ranks = {file_rank(str(name))}
        return next(iter(ranks)) if len(ranks) == 1 else None
    instance = int_in(ev.get("instance"))
    st = job.known_ranks().get(instance) if instance is not None else None
    if st is None or (ev.host and st.host and st.host != ev.host):
        return None
    return instance


def _folder(path: str) -> str:
    return path.rpartition("/")[0]


@_per_job
def _started_pids(job: JobModel) -> dict[tuple[str | None, int | None], int]:
    """(folder, pid) -> the rank a home-grown launcher says it started as that pid (worker_started), or
    reports by index and pid as it exits ("rank 1 (pid 7839) exited with status 152"), and (None, pid) for
    the pid anywhere; a pid it names for two ranks names none."""
    seen: dict[tuple[str | None, int | None], set[int]] = defaultdict(set)
    for ev in job.by_kind("worker_started", "worker_exit"):
        if ev.kind == "worker_exit" and (ev.get("pid") is None or str(ev.get("word") or "").lower() not in _INDEX_WORDS):
            continue
        who = int_in(ev.get("who")) if ev.get("who") is not None else int_in(ev.get("who2"))
        if who is not None:
            seen[(_folder(ev.file), int_in(ev.get("pid")))].add(who)
            seen[(None, int_in(ev.get("pid")))].add(who)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def self_pid_rank(job: JobModel, pid: int | None) -> int | None:
    """The one rank whose own line names this pid as its own ("started on vm pid 13022", "rank 2 |
    pid 14087 | ...", "starting on vm pid 23606: rank 0 local_rank 0 world_size 2"): what ties a kill report
    to a rank whose lines carry no pid."""
    return _self_pids(job).get(pid) if pid is not None else None


@_per_job
def _self_pids(job: JobModel) -> dict[int, int]:
    """pid -> the one rank whose own line names it (a pid two ranks name is left out). Built once: state_for_pid
    asks it for every pid no rank's lines carry, a launcher report's each."""
    owners: dict[int, set[int]] = defaultdict(set)
    for e in job.by_kind("self_pid", "rank_world"):
        pid, rank = e.get("self_pid"), global_rank(job, e)
        if pid is not None and rank is not None:
            owners[pid].add(rank)
    return {pid: next(iter(ranks)) for pid, ranks in owners.items() if len(ranks) == 1}


def started_rank(job: JobModel, pid: int | None, file: str | None = None) -> int | None:
    """The rank a launcher's "started rank 3 as pid 3887" gives this pid (in ``file``'s folder)."""
    return _started_pids(job).get((_folder(file) if file else None, pid))


@_per_job
def _table_ranks(job: JobModel) -> dict[tuple[str, int | None], int]:
    """(file, pid) -> global rank from torchrun's failure table (each row names rank and pid); pids
    that the table gives to two ranks are left out."""
    seen: dict[tuple[str, int | None], set[int]] = defaultdict(set)
    for ev in job.by_kind("elastic_cfe"):
        if int_in(ev.get("pid")) is not None and int_in(ev.get("rank")) is not None:
            seen[(ev.file, int_in(ev.get("pid")))].add(int_in(ev.get("rank")))  # type: ignore[arg-type]
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


_DS_HOST_RANKS = re.compile(r"""['"]([^'"]{1,253})['"]: \[([\d, ]{0,100000})\]""")


@_per_job
def ds_spawned(job: JobModel) -> dict[tuple[str, int | None], int]:
    """(launcher file, pid) -> global rank of the children a DeepSpeed launcher started ("process N
    spawned with command: [... '--local_rank=2']"), through its global_rank_mapping (host -> ranks):
    the one host of a one-node map, or the host that prefixes the line (pdsh)."""
    maps: dict[str, dict[str, list[int]]] = {}
    for ev in job.by_kind("ds_rank_map"):
        maps[ev.file] = {h: rank_list(r)
                         for h, r in _DS_HOST_RANKS.findall(str(ev.get("map") or ""))}
    out: dict[tuple[str, int | None], int] = {}
    for ev in job.by_kind("ds_spawn"):
        per_host, local = maps.get(ev.file), int_in(ev.get("local_rank"))
        if not per_host or local is None:
            continue
        ranks = next(iter(per_host.values())) if len(per_host) == 1 else per_host.get(ev.host or "")
        if ranks and local < len(ranks):
            out[(ev.file, int_in(ev.get("pid")))] = ranks[local]
    return out


def table_rank(job: JobModel, file: str, pid: int | None) -> int | None:
    """The rank torchrun's failure table in ``file`` gives this pid; with no table (a console cut before it), the
    rank its agent's own lines leave for it (``_agent_left_ranks``)."""
    rank = _table_ranks(job).get((file, pid))
    return rank if rank is not None else _agent_left_ranks(job).get((file, pid))


@_per_job
def _agent_left_ranks(job: JobModel) -> dict[tuple[str, int | None], int]:
    """(file, pid) -> global rank of the one worker of a node's agent that nothing else places. The node's echoed
    torchrun command gives its first rank and its P workers; the agent names P pids in all ("failed ...
    local_rank: 0 (pid: 24729)", "Sending process 24730 closing signal SIGTERM"), and every one but one is
    placed (by its local rank there, or by its rank's own lines): the last pid is the last local rank
    (t430_hang_r3_2x2_headc: head -c cut the table away; rank 3 hung and said nothing)."""
    out: dict[tuple[str, int | None], int] = {}
    by_file: dict[str, list[Event]] = defaultdict(list)  # (grouped once: a thousand nodes' consoles, linear)
    for e in job.by_kind("elastic_failed", "elastic_sigterm"):
        by_file[e.file].append(e)
    for file, agent in by_file.items():
        node = _agent_node(job, file)
        if node is None or not node[1] or not any(e.kind == "elastic_sigterm" for e in agent):
            continue
        nproc = node[1]
        base = node[0] * nproc
        pids = {int_in(e.get("pid")) for e in agent} - {None}
        if len(pids) != nproc:
            continue
        placed: dict[int, int] = {}  # pid -> local rank
        for e in agent:
            pid, local = int_in(e.get("pid")), int_in(e.get("local_rank"))
            if pid is not None and local is not None:
                placed[pid] = local
            elif pid is not None and (st := state_for_pid(job, pid, None, file)) is not None \
                    and st.rank is not None and base <= st.rank < base + nproc:
                placed[pid] = st.rank - base
        left = pids - set(placed)
        free = set(range(nproc)) - set(placed.values())
        if len(left) == 1 and len(free) == 1 and len(set(placed.values())) == len(placed):
            out[(file, next(iter(left)))] = base + next(iter(free))
    return out
