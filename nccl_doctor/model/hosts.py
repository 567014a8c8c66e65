"""The job's hosts, and the host of each rank a launcher reported: from the processes' own lines,
NCCL's line prefixes and torchrun's failure tables, one name per node."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from ..events import Event
from .links import expand_tasks

if TYPE_CHECKING:
    from .identity import Proc
    from .job import RankState

#: Names an agent whose own host name resolves to the loopback gives its node (getfqdn).
LOOPBACK = frozenset(("localhost", "localhost.localdomain", "127.0.0.1", "::1"))


def name_hosts(ranks: list[RankState], events: list[Event], world: int | None = None,
               containers: set[str] = frozenset()) -> tuple[list[str], dict[int, str]]:
    """(the job's hosts, rank -> host from torchrun's failure tables). A rank that two tables place
    on different hosts (a restart that moved it) is left out of the map. Ranks whose own lines name
    no host take the table's (the node whose launcher reported its exit), else Slurm's (below)."""
    nccl_hosts: set[str] = set()
    rows: dict[int, set[str]] = defaultdict(set)
    tasks: dict[int, set[str]] = defaultdict(set)
    for e in events:  # (one pass: a job has millions of events)
        if e.host and e.kind.startswith("nccl"):
            nccl_hosts.add(e.host)
        elif e.kind == "elastic_cfe" and isinstance(e.get("rank"), int) and e.get("host"):
            rows[e.get("rank")].add(str(e.get("host")))
        elif e.kind == "slurm_task_exit" and e.get("host"):  # "srun: error: node01: task 0: Exited ..."
            for t in expand_tasks(e.get("tasks"), most=4096):
                tasks[t].add(str(e.get("host")))
        elif e.kind == "slurm_cancel" and e.rank is not None and e.get("host"):  # slurmstepd's, under its label
            tasks[e.rank].add(str(e.get("host")))
    _labels_tables_split(ranks, rows, containers)
    seen_hosts = {r.host for r in ranks if r.host} | nccl_hosts
    short = {h.split(".", 1)[0] for h in seen_hosts}
    # torchrun's table names the agent's FQDN, NCCL cuts at the first dot: one host, one name
    # (unless the processes name it in full themselves: socket.gethostname() gives the FQDN on such nodes)
    table_hosts = {r: (h.split(".", 1)[0] if h not in seen_hosts and h.split(".", 1)[0] in short else h)
                   for r, hs in rows.items() if len(hs) == 1 for h in hs}
    if len(seen_hosts) == 1:
        # An agent whose own name resolves to the loopback calls its node "localhost" (getfqdn): the
        # one host the processes name is that node, not a second one.
        only = next(iter(seen_hosts))
        table_hosts = {r: only if h in LOOPBACK else h for r, h in table_hosts.items()}
    for r in ranks:
        if r.host is None and r.rank is not None and r.rank in table_hosts:
            r.host = table_hosts[r.rank]
    _consoles_named_by_host(ranks, events)
    # Slurm's lines place each task on its node; when the tasks seen are the ranks of the world (one
    # srun task a rank, or one torchrun a node running one rank), a rank no line places is on its task's.
    if world and set(tasks) == set(range(world)):
        for r in ranks:
            hs = tasks.get(r.rank) if r.host is None and r.rank is not None else None
            if hs is not None and len(hs) == 1:
                r.host = next(iter(hs))
    return sorted(seen_hosts | {r.host for r in ranks if r.host} | set(table_hosts.values())), table_hosts



def as_written(hosts: list[str], files: list[str] = ()) -> dict[str, str]:
    """short name -> the one full name the logs write for a node whose short name they never write.

    A finding's hosts are cut at the first dot, as NCCL prints them, so that torchrun's FQDN and
    NCCL's short name are one node (rules.base.short_host); a node the logs only ever name fully
    qualified (``gpu-a100-80gb-04.cluster.internal`` in every line) is shown as they write it. So is a
    node only its console's name names (``gpu059.cluster.internal.log``: the job's other nodes are
    ``*.cluster.internal``), whose name the evidence reads before the first dot, as any file's."""
    full: dict[str, set[str]] = defaultdict(set)
    for h in hosts:
        if "." in h and ":" not in h and not h.replace(".", "").isdigit():
            full[h.split(".", 1)[0]].add(h)
    plain = {h for h in hosts if "." not in h}
    domains = {h.split(".", 1)[1] for fs in full.values() for h in fs}
    for f in files if domains else ():
        stem, _, rest = file_name(f).partition(".")
        domain = next((d for d in domains if rest.startswith(d + ".") or rest == d), None)
        if domain and stem not in full and reads_as_node(stem):
            full[stem].add(f"{stem}.{domain}")
    return {s: next(iter(fs)) for s, fs in full.items() if len(fs) == 1 and s not in plain}


def _labels_tables_split(ranks: list[RankState], rows: dict[int, set[str]], containers: set[str]) -> None:
    """A label the ranks of two nodes share (a compose service's "trainer-1  | " on each node's console) that
    torchrun's tables split: the ranks under it are on two hosts, none of them the label; each rank is on its
    table's host, and a rank no table lists has no known host. So for a compose container's name whose ranks a
    table places on one host: the container's host name ("train-master", a container id) is what torchrun and
    the processes call the node, the container's name ("train-master-1") only what docker calls it."""
    under: dict[str, list[RankState]] = defaultdict(list)
    for r in ranks:
        if r.host and r.rank is not None:
            under[r.host].append(r)
    for label, rs in under.items():
        tables = {h for r in rs if len(rows.get(r.rank, ())) == 1 for h in rows[r.rank]} - LOOPBACK
        if not tables or label in tables or tables & set(under):
            continue
        if len(tables) < 2 and not all(set(r.files) & containers for r in rs):
            continue  # (``containers``: the files under docker compose's "<container>  | " labels)
        only = next(iter(tables)) if len(tables) == 1 else None  # (one container, one node: its ranks no row lists too)
        named = _consoles_tables_confirm(rs, rows)
        for r in rs:
            hs = rows.get(r.rank, set()) - LOOPBACK
            r.host = next(iter(hs)) if len(hs) == 1 else named.get(r.rank, only)


def _consoles_tables_confirm(rs: list[RankState], rows: dict[int, set[str]]) -> dict[int, str]:
    """rank -> the node its console is named after, for the ranks under one label whose consoles are named after
    nodes, when a table places a rank of one console on the node of that name (``trn-c2.compose.log``'s rank 1 on
    trn-c2) and the label's ranks sit under two names or more: each console is its node's (a node whose rank the
    launcher never listed, its agent stopped from outside, is still the one its console is named after)."""
    stems = {r.rank: {file_stem(f) for f in r.files} for r in rs}
    if len(set().union(*stems.values())) < 2 or not all(len(s) == 1 and reads_as_node(next(iter(s)))
                                                         for s in stems.values()):
        return {}
    if not any(len(rows.get(r.rank, ())) == 1 and {h.split(".", 1)[0] for h in rows[r.rank]} == stems[r.rank]
               for r in rs):
        return {}
    return {r.rank: next(iter(stems[r.rank])) for r in rs}


def labels_that_are_no_host(procs: list[Proc]) -> None:
    """A host label that processes share while they themselves name different nodes ("world size 4, rank 1,
    host dgx-a07" under a compose service's "trainer-1  | ", the same on every node): each process is on the node
    it names. Only nodes two processes name (one line glued to another can name "vmR1"). A start-up line that names
    the writer's host with its pid ("host vm pid 11225 local rank 3", "rank 1 of 2 starting on gpu-worker-2 (local rank
    0, pid 17564)") is its own word on its node (socket.gethostname()), over whatever label a relay or a script's
    print tag ("R1: ") put before it."""
    said: dict[int, tuple[str, str]] = {}  # process -> (the node it names, as it writes it)
    sure: set[int] = set()  # processes whose start-up line names their host and pid together
    for p in procs:
        own: set[str] = set()
        with_pid = False
        for e in p.events:
            if e.kind in _NAMES_OWN_HOST and e.fields.get("host"):
                own.add(str(e.fields["host"]))
                with_pid = with_pid or e.fields.get("self_pid") is not None  # (every self_pid line, some rank_world ones)
        if len({h.split(".", 1)[0] for h in own}) == 1:
            full = min(own)
            said[id(p)] = (full.split(".", 1)[0], full)
            if with_pid:
                sure.add(id(p))
    named = Counter(node for node, _ in said.values())
    nodes: dict[str, set[str]] = defaultdict(set)  # label -> the nodes its processes name
    for p in procs:
        node, _ = said.get(id(p), (None, None))
        if p.host and node and named[node] >= 2 and node != p.host.split(".", 1)[0]:
            nodes[p.host].add(node)
    for p in procs:
        node, full = said.get(id(p), (None, None))
        if node and ((len(nodes.get(p.host or "", ())) >= 2 and named[node] >= 2) or id(p) in sure):
            p.host = full


#: The kinds of a process's own statement of its host.
_NAMES_OWN_HOST = frozenset(("rank_world", "self_pid"))


#: A file's name before its first dot that may be a node's name ("dgx-a08.errors.txt", "gpu-node-3.log").
_HOSTLIKE = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,62}")
_AGENT_EXC = "ChildFailedError"
#: Words that name what a file holds, an attempt, a process or where it was pasted, not a node ("train-7731.log",
#: "console-2.out", "rank-3", "ticket-3904-paste.txt").
_NOT_A_NODE = re.compile(r"(?i)^(?:rank|worker|proc|process|local|attempt|stdout|stderr|std|out|err|log|logs|train|"
                         r"training|console|output|job|run|task|trainer|main|agent|launcher|torchrun|slurm)(?![a-z])"
                         # anywhere in the name (a pod's "-worker-0" is its node's name, a paste's "-paste" is not)
                         r"|(?<![a-z])(?:rank|attempt|train|training|console|output|result|debug|trace|dump|test|ticket|"
                         r"paste|grep|tail|head|copy|extract|logs?|errors?)(?![a-z])")
#: An issue tracker's key ("MLINFRA-2291.md", a ticket's pasted console): no node's name.
_TICKET = re.compile(r"^[A-Z][A-Z0-9]{1,9}-\d{1,7}$")


def reads_as_node(stem: str) -> bool:
    """A file's name (before its first dot) that reads as a node's: letters and a number, none of the words a
    file's contents, a job or a paste are named by (``ib-gpu-103``, ``dgx-a08``; not ``train-7731``, ``rank3``)."""
    return bool(_HOSTLIKE.fullmatch(stem) and re.search(r"\d", stem) and re.search(r"[A-Za-z]{2}", stem)
                and not _NOT_A_NODE.search(stem) and not _TICKET.match(stem))


def _consoles_named_by_host(ranks: list[RankState], events: list[Event]) -> None:
    """Per-node consoles named after their node ("dgx-a07.errors.txt", "dgx-a08.errors.txt": a grep of each node's
    output, whose lines name no host): files named alike but for their numbers or last letter, none of them a rank's,
    a job's or a console's name, two names or more, a launcher agent's lines (torchrun's messages or its
    ChildFailedError) in at least one, and no rank's lines under two names. A rank whose lines are all under one name,
    and that no line places on a host, is on the node of that name. Not when any rank's own lines name a host: then
    the names are not the hosts."""
    if any(r.host and r.host not in LOOPBACK for r in ranks):
        return
    held: dict[str, set[int]] = defaultdict(set)  # name -> the ranks whose lines are under it
    for r in ranks:
        for f in r.files:
            if r.rank is not None:
                held[file_stem(f)].add(r.rank)
    # (the names the ranks' files give first: most jobs stop here, before a pass over every event)
    if not held or not all(reads_as_node(n) for n in held) or len({name_shape(n) for n in held}) != 1:
        return
    if sum(map(len, held.values())) != len(set().union(*held.values())):
        return  # (one node's console holds its own ranks only)
    agent = {file_stem(e.file) for e in events if e.kind.startswith("elastic_") or e.get("by_agent")
             or (e.kind == "python_exception" and str(e.get("exc_type") or "").endswith(_AGENT_EXC))}
    nodes = set(held) | agent  # (a node's .out and .err: one name)
    if len(nodes) < 2 or not agent or not all(reads_as_node(n) for n in agent - set(held)) \
            or len({name_shape(n) for n in nodes}) != 1:
        return
    for r in ranks:
        names = {file_stem(f) for f in r.files}
        if r.rank is not None and (r.host is None or r.host in LOOPBACK) and len(names) == 1:
            r.host = next(iter(names))


def file_name(path: str) -> str:
    """A path's last part, whichever its separators."""
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def file_stem(path: str) -> str:
    """A file's name before its first dot."""
    return file_name(path).split(".", 1)[0]


def name_shape(name: str) -> str:
    """A host name with its numbers, and a last single letter after a separator (``train-a``, ``node_b``), made
    alike: the siblings of one cluster's naming."""
    return re.sub(r"(?<=[-_])[A-Za-z]$", "L", re.sub(r"\d+", "N", name))
