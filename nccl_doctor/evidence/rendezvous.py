"""The torchrun agents' rendezvous: nodes that could not join, and nodes that never came.

One torchrun agent runs per node; with c10d rendezvous they meet at a TCP store on the endpoint
host. What the agents' own logs say (FORMATS-2.md 3.7, 3.8):

* an agent that cannot reach the endpoint: ``The client socket has timed out after N ms while
  trying to connect to (H, P)`` / ``failed to connect to ... (H, P)``, then
  ``RendezvousConnectionError: The connection to the C10d store has failed``;
* an agent that waited for the nodes ``--nnodes`` asks for: ``RendezvousTimeoutError`` (no message);
  with static rendezvous (``--node-rank``, ``--master-addr``) the master's store: ``Timed out after
  N seconds waiting for clients. 1/2 clients joined.``;
* an agent whose store went away under it: ``Failed to recv, got 0 bytes`` / ``Broken pipe`` and
  then the same ``RendezvousConnectionError``: an echo of the store host's exit.

``unreachable(job)``: agents that could not connect while the endpoint's own agent was up and
waiting (its log shows the wait): the connecting node's endpoint, port or network is wrong.
``incomplete(job)``: the agents in the logs waited and gave up, and none of them failed to connect:
a node that was expected never joined (its own log, if any, is not here).
A node is known by the host its file is written for (``file_host``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel
from .causes import _CANNOT_LISTEN
from .facts import _per_job, file_host, line_key, plural, writer
from .nodename import node_name
from .pids import started_rank
from .statements import key_rank, one_waited_key
from .tracebacks import frames_above

_CONNECT = re.compile(r"(?:timed out after \d{1,12} ?m?s while trying to connect to|failed to connect to(?: any network "
                      r"address of)?) \(?\[?(?P<host>[\w.:%-]{1,255}?)\]?,? (?P<port>\d{1,5})\)?")
_WAIT = "RendezvousTimeoutError"
#: The store's host waiting for the others to connect (static rendezvous: the master agent's
#: TCPStore waits for --nnodes agents; init_process_group's env:// store for the world's ranks).
_CLIENTS = re.compile(r"waiting for clients\. (?P<joined>\d{1,9})/(?P<want>\d{1,9}) clients joined")


@dataclass(slots=True, eq=False)
class RdzvProblem:
    hosts: list[str]  # the nodes to look at (empty: not in these logs)
    what: str
    events: list[Event] = field(default_factory=list)


def _agent_lines(job: JobModel) -> tuple[dict[str, list[Event]], dict[str, list[Event]]]:
    """(file -> connect failures, file -> rendezvous waits that timed out)."""
    connects: dict[str, list[Event]] = {}
    waits: dict[str, list[Event]] = {}
    for ev in job.by_kind("torch_store_timeout", "python_exception"):
        text = str(ev.get("err") or ev.get("msg") or "") or ev.text
        if _CONNECT.search(text):
            connects.setdefault(ev.file, []).append(ev)
        elif _WAIT in text or _WAIT in str(ev.get("exc_type") or "") or _CLIENTS.search(text):
            waits.setdefault(ev.file, []).append(ev)
    return connects, waits


@_per_job
def unreachable(job: JobModel) -> list[RdzvProblem]:
    connects, waits = _agent_lines(job)
    waiting_hosts = {file_host(job, f) for f in waits} - {None}
    out = []
    for file, evs in connects.items():
        m = _CONNECT.search(str(evs[0].get("err") or evs[0].get("msg") or "") or evs[0].text)
        target = m.group("host") if m else None
        mine = file_host(job, file)
        if target is None or mine == target or target not in waiting_hosts:
            continue  # the endpoint may be down: its own log does not show it up and waiting
        where = mine or f"the node that wrote {file}"
        out.append(RdzvProblem([mine] if mine else [], "it could not connect to the "
                               f"rendezvous store at {target}:{m.group('port')} ({plural(len(evs), 'failed attempt')}) "
                               f"while the agent on {target} was up waiting for nodes: check --rdzv-endpoint "
                               f"(or --master-addr and --master-port: host and port) and the network from {where}", evs[:2] + waits_of(waits, job, target)))
    return out


#: Launch settings every torchrun agent of one job must share (--nnodes; --nproc-per-node may differ
#: between nodes).
_SHARED_SETTINGS = (("min_nodes", "--nnodes (minimum)"), ("max_nodes", "--nnodes (maximum)"), ("run_id", "--rdzv-id"),
                    ("rdzv_endpoint", "--rdzv-endpoint"))
_NODE_COUNTS = frozenset(("min_nodes", "max_nodes"))

@_per_job
def misconfigured_nodes(job: JobModel) -> list[RdzvProblem]:
    """torchrun agents of one job started with settings that must agree and do not:

    * their launch configs (``Starting elastic_operator with launch configs``) state another
      ``min_nodes``/``max_nodes`` than a clear majority of the agents: that node was given another
      ``--nnodes`` (it finds the round full, or waits for nodes that are not coming); or another
      ``run_id``/``rdzv_endpoint`` (``--rdzv-id``, ``--rdzv-endpoint``: it waits in a rendezvous of its own);
    * two agents each hosted the static rendezvous store and timed out waiting for clients: two
      nodes were given ``--node-rank 0``. The nodes joined the store at ``--master-addr``; the
      store that fewer clients joined is the one started by mistake.

    One problem per finding, its hosts the nodes to fix (empty when nothing tells which)."""
    out = []
    stated: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
    first: dict[tuple[str, str], Event] = {}
    for e in job.by_kind("elastic_launch_config"):
        for key, _flag in _SHARED_SETTINGS:
            v = e.get(key)
            if isinstance(v, (int, str)):
                stated[e.file][key].add(v)
                first.setdefault((e.file, key), e)
    for key, flag in _SHARED_SETTINGS:
        # one value per console (a file holding several agents' blocks says nothing of one node)
        values = {f: next(iter(d[key])) for f, d in stated.items() if len(d.get(key, ())) == 1}
        by_value: dict[int | str, list[str]] = defaultdict(list)
        for f, v in values.items():
            by_value[v].append(f)
        if len(by_value) < 2:
            continue
        ranked = sorted(by_value.items(), key=lambda kv: -len(kv[1]))
        (top, agree), odd_count = ranked[0], len(ranked[1][1])
        why = f"than the job's other {len(agree)} agents ({key} {top})"
        if len(agree) < 2 or odd_count == len(agree):
            # no clear majority: a node count is read against the agents that did start (two nodes,
            # one told --nnodes 3: the node counts of the logs say which was meant)
            meant = [v for v in by_value if key in _NODE_COUNTS and v == len(values)]
            if len(by_value) != 2 or len(meant) != 1:
                continue  # nothing says which setting was meant
            top, agree = meant[0], by_value[meant[0]]
            ranked = [(top, agree)] + [(v, fs) for v, fs in by_value.items() if v != top]
            why = f"than the other agent ({key} {top}, as many nodes as started: {len(values)})"
        odd = sorted(f for v, fs in ranked[1:] for f in fs)
        names = [node_name(job, f) for f in odd]
        said = "; ".join(f"{node_name(job, f) or 'the node that wrote ' + f} has {key} {values[f]}" for f in odd)
        out.append(RdzvProblem([n for n in names if n], f"its torchrun agent was started with another {flag} "
                               f"{why}: {said}",
                               [first[(f, key)] for f in odd][:3] + [first[(f, key)] for f in agree][:2]))
        break  # (min and max usually differ together: one problem)
    stores: dict[str, tuple[int, int, Event]] = {}
    for e in job.by_kind("torch_store_timeout", "python_exception"):
        m = _CLIENTS.search(str(e.get("err") or e.get("msg") or "") or e.text)
        if m and e.rank is None and e.local_rank is None and e.file not in stores:
            stores[e.file] = (int(m.group("joined")), int(m.group("want")), e)
    nodes = {node_name(job, f) or f for f in stores}
    if len(stores) >= 2 and len(nodes) == len(stores):
        fewest = min(j for j, _w, _e in stores.values())
        low = sorted(f for f, (j, _w, _e) in stores.items() if j == fewest)
        blame = low if len(low) < len(stores) else _off_endpoint(job, stores)
        said = ", ".join(f"{node_name(job, f) or 'the node that wrote ' + f} ({j}/{w} joined)"
                         for f, (j, w, _e) in sorted(stores.items()))
        tail = (f": the store fewer clients joined ({', '.join(node_name(job, f) or f for f in blame)}) is the one "
                "started by mistake; the other nodes joined the store at --master-addr" if blame and len(low) < len(stores)
                else f": the rendezvous endpoint the agents were given is on another host than "
                     f"{', '.join(node_name(job, f) or f for f in blame)}: its store is the one started by mistake"
                if blame else "; nothing here tells which one was meant")
        out.append(RdzvProblem([n for n in (node_name(job, f) for f in blame) if n],
                               f"{len(stores)} torchrun agents each hosted the rendezvous store and waited for the "
                               f"nodes to join it ({said}): {len(stores)} nodes were given --node-rank 0" + tail,
                               [stores[f][2] for f in blame] + [e for f, (_j, _w, e) in sorted(stores.items())
                                                                 if f not in blame][:2]))
    return out


def _off_endpoint(job: JobModel, stores: dict[str, tuple]) -> list[str]:
    """The stores' files whose node is not the host of the rendezvous endpoint every agent was given
    (``rdzv_endpoint : old-cpu-01:34210`` in each launch config), when one store's node is that host."""
    ends = {str(e.get("rdzv_endpoint")).rsplit(":", 1)[0] for e in job.by_kind("elastic_launch_config")
            if e.get("rdzv_endpoint")}
    if len(ends) != 1:
        return []
    host = next(iter(ends))
    names = {f: node_name(job, f) for f in stores}
    if sum(1 for n in names.values() if n == host) != 1:
        return []
    return sorted(f for f, n in names.items() if n is not None and n != host)


def waits_of(waits: dict[str, list[Event]], job: JobModel, host: str) -> list[Event]:
    return [e for f, evs in waits.items() if file_host(job, f) == host for e in evs[:1]]


@_per_job
def incomplete(job: JobModel) -> RdzvProblem | None:
    connects, waits = _agent_lines(job)
    if not waits or connects or misconfigured_nodes(job) or job.ranks_seen and any(r.of_kind("train_step", "rank_world") for r in job.ranks):
        return None
    hosts = sorted({node_name(job, f) or f"the node that wrote {f}" for f in waits})
    first = next(iter(waits.values()))[0]
    m = _CLIENTS.search(str(first.get("err") or first.get("msg") or "") or first.text)
    said = (f"only {m.group('joined')} of the {m.group('want')} clients it waited for joined its store"
            if m else "RendezvousTimeoutError")
    return RdzvProblem([], f"the rendezvous timed out on {', '.join(hosts)} ({said}): fewer nodes "
                       "joined than --nnodes asks for, and no agent here failed to connect; a node that was expected "
                       "never started its agent or never reached the endpoint (its log is not among these)",
                       [e for evs in waits.values() for e in evs[:1]])


#: The keys an elastic agent waits for in a rendezvous round ("wait timeout after 60000ms, keys:
#: /torch.rendezvous.<id>.1/torchelastic/role_info/0, ..." or ".../MASTER_ADDR").
_RDZV_KEYS = re.compile(r"wait timeout after \d{1,12} ?ms, keys: [^\n]{0,400}?(?:/torchelastic/|/MASTER_(?:ADDR|PORT)\b)")


@_per_job
def deadlocked(job: JobModel) -> RdzvProblem | None:
    """Every torchrun agent died waiting in the store for a rendezvous round's keys (role_info,
    MASTER_ADDR) that another agent was to write, and no worker failed: the new round never came
    together (a restart or a scale-up), each agent waiting for the others; no rank is at fault."""
    agents = {e.file for e in job.by_kind("elastic_sigterm", "elastic_rdzv", "elastic_launch_config",
                                          "elastic_failed", "elastic_cfe", "elastic_restart")}
    waits: dict[str, Event] = {}
    for ev in job.by_kind("torch_store_timeout", "python_exception"):
        if _RDZV_KEYS.search(str(ev.get("err") or ev.get("msg") or "")) and ev.rank is None:
            waits.setdefault(ev.file, ev)
    if len(waits) < 2 or not set(waits) >= agents or any(st.rank is not None and st.errors for st in job.ranks):
        return None
    return RdzvProblem([], f"every torchrun agent ({len(waits)}) died waiting in the store for a rendezvous round's "
                       "keys that another agent was to write (role_info, MASTER_ADDR): a restart or a node joining "
                       "began a new round that no agent could finish; no rank failed, and nothing here singles one out",
                       list(waits.values()))


def is_wrapper_echo(job: JobModel, ev: Event) -> bool:
    """``RendezvousConnectionError`` wraps the agent's inner error: that inner error says what
    happened (an unreachable endpoint: ``unreachable``; a store that went away: an echo)."""
    return ev.kind == "python_exception" and str(ev.get("exc_type") or "").endswith("RendezvousConnectionError")


@_per_job
def _store_unjoined(job: JobModel) -> tuple[int, int, set] | None:
    """(joined, expected, the writers that could not reach the store) when the store's host timed
    out waiting for clients while some processes could not connect to it; else None."""
    waited = [m for m in (_CLIENTS.search(e.text) for e in job.by_kind("torch_store_timeout")) if m]
    if not waited:
        return None
    joined, expected = int(waited[0].group("joined")), int(waited[0].group("want"))
    lost = {writer(job, e, line_key) for e in job.by_kind("torch_store_timeout") if e.get("what") == "store_unreachable"}
    if joined >= expected or not lost or len(lost) > expected - joined:
        return None
    return joined, expected, lost


def store_not_joined(job: JobModel, ev: Event) -> tuple[str, str] | None:
    """A process that could not reach the store while the store's host waited for the clients
    that never came ("2/3 clients joined"): it is one of them, and so the cause (its MASTER_ADDR or
    MASTER_PORT, or the network between them), not a waiter's echo. As many such processes as the
    clients that never joined, at most."""
    if ev.kind != "torch_store_timeout" or ev.get("what") != "store_unreachable":
        return None
    found = _store_unjoined(job)
    if found is None or writer(job, ev, line_key) not in found[2]:
        return None
    host, port = ev.get("store_host"), ev.get("store_port")
    where = f" at {host}:{port}" if host and port else ""
    return "config", (f"could not reach the store{where} while the store's host waited for its clients "
                      f"({found[0]}/{found[1]} joined): check its MASTER_ADDR / MASTER_PORT")


def store_oversized(job: JobModel, ev: Event) -> tuple[str, str] | None:
    """The store's host timed out waiting for more clients than the job has ranks, every one of which
    joined ("3/4 clients joined" in a job of 3): nobody failed to come; the host's own world size is
    wrong (a store created for another world), its cause, not an echo of a missing peer."""
    if ev.kind != "torch_store_timeout":
        return None
    m = _CLIENTS.search(ev.text)
    world = job.ranks_expected
    if m is None or world is None or int(m.group("joined")) != world or int(m.group("want")) <= world:
        return None
    return "config", (f"its store waited for {m.group('want')} clients, but the job has {world} ranks and all of "
                      "them joined: the store was created for another world size")


def _raised_in_a_script(job: JobModel, ev: Event) -> bool:
    """The traceback ``ev`` ends went through the job's own Python script (``train.py``), not only a
    launcher's entry point (``bin/torchrun``, which hosts its own store)."""
    evs = [e for e in job.events if e.file == ev.file]
    i = next((k for k, e in enumerate(evs) if e is ev), None)
    if i is None:
        return False
    return any(f.kind == "py_script_frame" and str(f.get("path") or "").endswith(".py")
               for f in frames_above(evs, i, frozenset(("python_exception",))))


def store_beyond_world(job: JobModel, ev: Event) -> tuple[str, str] | None:
    """A process that waited for the store key of a rank the job does not have (rank 3's in a job of
    3): its own world size is larger than the job's (init_process_group given another world_size),
    its cause, not the echo of a peer that never came."""
    if ev.kind not in ("torch_store_timeout", "python_exception"):
        return None
    key = one_waited_key(str(ev.get("err") or ev.get("msg") or ev.text))
    rank = key_rank(key) if key is not None else None
    world = job.ranks_expected
    if rank is None or world is None or rank < world:
        return None
    return "config", (f"it waited for rank {rank}'s store key, but the job has {world} ranks: its own "
                      "world size is larger than the job's")


def store_host_rank(job: JobModel, ev: Event) -> int | None:
    """The rank of the store's host, whose line no prefix names (it failed before the process group
    gave the ranks their prefixes). A worker that could not listen on the store's port is rank 0:
    init_process_group's env:// and tcp:// stores are hosted by rank 0 (torchrun's own store is its
    agent's, whose traceback belongs to no rank). One that timed out "waiting for clients" is the one
    rank of its file that the launcher's table reports exiting with a status of its own (not by a
    signal), the others having been stopped by the launcher."""
    if _CANNOT_LISTEN.search(ev.text) is not None:
        return 0 if _raised_in_a_script(job, ev) else None
    if _CLIENTS.search(ev.text) is None:
        return None
    own = {r for e in job.by_kind("elastic_cfe") if e.file == ev.file and isinstance(r := e.get("rank"), int)
           and isinstance(code := e.get("exitcode"), int) and code > 0}
    return next(iter(own)) if len(own) == 1 else None


def store_client_rank(job: JobModel, ev: Event) -> int | None:
    """The rank of a process that could not reach the store, when no prefix names it: the one
    process whose own start-up line names that store address ("... pid 15192 local_rank 3 ...
    master 192.0.2.77:33010"), by its pid as its launcher said it started it ("launched rank 3 pid
    15192") or by the rank the line states. None unless exactly one line names the address."""
    host, port = ev.get("store_host"), ev.get("store_port")
    if not host or not port:
        return None
    near = re.compile(r"\bpid[ =:]{1,3}(\d{1,10})\b(?:(?!\bpid\b)[^\n]){0,200}?" + re.escape(f"{host}:{port}"))
    pids = {int(m.group(1)) for e in job.by_kind("rank_world") for m in near.finditer(e.text)}
    if len(pids) != 1:
        return None
    return started_rank(job, next(iter(pids)))
