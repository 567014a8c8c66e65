"""The job model: every process with its rank, progress, versions, network and errors.

Built once from the events of all files; rules read it and never touch files. Progress is kept
per process group: SeqNums compare only within one PG.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..events import Event, LastLine, by_place
from .hosts import name_hosts
from .identity import Proc, build_processes
from .last_line import rank_last_line
from .world import world_size

#: Init stages in the order NCCL reaches them.
STAGES = ("none", "started", "bootstrap", "init_start", "topology", "connected", "init_complete",
          "running", "finished")
_STAGE_OF = {
    "nccl_version": "started", "nccl_env": "started",
    "nccl_bootstrap": "bootstrap", "nccl_net_socket": "bootstrap", "nccl_net_ib": "bootstrap",
    "nccl_net_iface": "bootstrap", "nccl_using_net": "bootstrap", "nccl_ib_none": "bootstrap",
    "nccl_topo": "topology", "nccl_trees": "topology", "nccl_channel_net": "topology",
    "nccl_connected": "connected",
    "train_step": "running", "torch_work_update": "running",
}
ERROR_KINDS = frozenset({
    "python_exception", "log_error", "cpp_terminate", "cuda_error", "cuda_oom", "signal", "xid", "oom_killer",
    "nccl_cuda_fail", "nccl_shm", "nccl_alloc_fail", "nccl_dup_gpu", "nccl_ib_cqe", "nccl_sock_closed",
    "nccl_connect_err", "nccl_ofi_error", "torch_nccl_error", "torch_nccl_err_kind", "nccl_warn",
    "nccl_socket_err", "nccl_no_iface", "nccl_version_mismatch", "torch_wd_exception",
    "nccltests_failure", "dataloader_shm", "nccl_ib_qp_error", "wandb_timeout",
})
TIMEOUT_KINDS = frozenset({"torch_wd_timeout", "torch_wd_status", "torch_heartbeat_timeout",
                           "torch_watchdog_stuck", "torch_monitor_timeout", "gloo_timeout"})


#: SeqNum of a watchdog line that does not say which process group it belongs to.
UNNAMED_PG = "?"


def stage_index(stage: str) -> int:
    return STAGES.index(stage) if stage in STAGES else 0


def pg_key(ev: Event) -> str:
    """A process-group name comparable across ranks: PG GUID, else PG id, else 'default'."""
    f = ev.fields
    guid = f.get("pg_guid")
    if guid not in (None, ""):
        return "default" if str(guid) in ("0", "default_pg") else str(guid)
    pid = f.get("pg_id")
    if pid not in (None, ""):
        return "default" if str(pid) == "0" else f"pg{pid}"
    return "default"


@dataclass(slots=True)
class RankState:
    rank: int | None
    host: str | None
    pid: int | None
    cuda_dev: int | None
    local_rank: int | None
    rank_source: str | None
    files: list[str]
    events: list[Event]
    stage: str = "none"
    last_line: LastLine | None = None
    last_seq: dict[str, int] = field(default_factory=dict)  # pg -> SeqNum it timed out in / reported
    enqueued: dict[str, int] = field(default_factory=dict)
    completed: dict[str, int] = field(default_factory=dict)
    timeouts: list[Event] = field(default_factory=list)
    errors: list[Event] = field(default_factory=list)
    last_step: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    net: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"

    @property
    def label(self) -> str:
        who = f"rank {self.rank}" if self.rank is not None else "rank ?"
        bits = [b for b in (self.host, f"pid {self.pid}" if self.pid is not None else None,
                            f"cuda {self.cuda_dev}" if self.cuda_dev is not None else None) if b]
        return f"{who} ({', '.join(bits)})" if bits else who

    def of_kind(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]


#: Absent ranks below which a claimed world is still taken as the job's (see JobModel.partial_logs).
PARTIAL_MIN_MISSING = 64


@dataclass(slots=True)
class JobModel:
    ranks: list[RankState]
    events: list[Event]
    ranks_expected: int | None
    hosts: list[str]
    files: list[str]
    last_lines: dict[str, dict]
    index: dict[int, RankState] = field(default_factory=dict, repr=False)  # id(event) -> its rank
    #: rank -> host, from the processes and from launcher reports (a rank that wrote no line of its own)
    rank_hosts: dict[int, str] = field(default_factory=dict)
    #: file -> (first ts, last ts, last job line): time that passed after the job's last labelled
    #: line with only outside lines (a cron, the scheduler) written to that file.
    quiet: dict[str, tuple] = field(default_factory=dict)
    startup: dict[str, dict] = field(default_factory=dict)  # file -> writer -> its start-up settings
    last_before: dict[str, dict] = field(default_factory=dict)  # file -> writer -> its line before its last
    kind_index: dict[str, list[Event]] = field(default_factory=dict, repr=False)
    #: The live progress model and the time now (``evidence.stall.Live``), set by the incremental
    #: analyzer that ``watch`` runs; None in a batch analysis (no line has an arrival time there).
    live: Any = field(default=None, repr=False)
    #: The times of every step line read, sorted (None: not counted, read them from the events).
    #: Files keep only some of their step events (scanner caps, see eventcap); the times are all here.
    step_times: list[float] | None = None
    #: file -> its number of lines, for files read in the other order than their lines run (newest
    #: first: see model.order); emptied once their events carry the file's own line numbers.
    flipped: dict[str, int | list[int]] = field(default_factory=dict)
    #: files read only in part (cut short, an archive that ends inside them): their last lines are no writer's last
    cut: frozenset[str] = frozenset()

    def place(self, ev: Event | LastLine) -> str:
        """``file:line`` of an event as the file numbers its lines (what evidence quotes)."""
        return f"{ev.file}:{file_line(self.flipped.get(ev.file), ev.line)}"

    def only_in_cut_files(self, st: RankState | None) -> bool:
        """Whether every file a rank's lines come from was read only in part: its lines stop at the edge of what
        was handed over, not where the rank stopped."""
        return st is not None and bool(st.files) and set(st.files) <= self.cut

    def kinds(self, prefix: str = "") -> list[str]:
        """The kinds of the job's events (those starting with ``prefix``), in order of first event."""
        self.by_kind()  # (builds the index)
        return [k for k in self.kind_index if k.startswith(prefix)]

    def by_kind(self, *kinds: str) -> list[Event]:
        """Events of these kinds in file/line order (indexed once: rules ask many times)."""
        if not self.kind_index and self.events:
            for e in self.events:
                self.kind_index.setdefault(e.kind, []).append(e)
        if len(kinds) == 1:
            return list(self.kind_index.get(kinds[0], ()))
        out = [e for k in dict.fromkeys(kinds) for e in self.kind_index.get(k, ())]
        out.sort(key=by_place)
        return out

    def rank_of(self, ev: Event) -> RankState | None:
        return self.index.get(id(ev))

    @property
    def ranks_seen(self) -> int:
        known = {r.rank for r in self.ranks if r.rank is not None}
        return len(known) if known else len(self.ranks)

    def known_ranks(self) -> dict[int, RankState]:
        out: dict[int, RankState] = {}
        for r in self.ranks:
            if r.rank is not None and (r.rank not in out or len(r.events) > len(out[r.rank].events)):
                out[r.rank] = r
        return out

    def coverage(self) -> tuple[int, int] | None:
        """(ranks of the claimed world that the logs show, the claimed world size); None when the
        world size is unknown or no rank number is known. Linear in the ranks seen, whatever the claim."""
        if not self.ranks_expected:
            return None
        seen = {r.rank for r in self.ranks if r.rank is not None and 0 <= r.rank < self.ranks_expected}
        if not seen and not any(r.rank is not None for r in self.ranks):
            return None
        return len(seen), self.ranks_expected

    @property
    def partial_logs(self) -> bool:
        """The world size is a claim, not a list of culprits: when the logs show fewer than half of the
        ranks it claims (and more than PARTIAL_MIN_MISSING are absent), the logs are partial — a
        ``nranks 100000`` line beside 16 rank logs is not 99,984 missing ranks."""
        cov = self.coverage()
        if cov is None:
            return False
        seen, world = cov
        return world - seen > max(seen, PARTIAL_MIN_MISSING)

    def missing_ranks(self) -> list[int]:
        """Ranks of the world without a line; empty when the logs are partial (``partial_logs``), so
        the list is never longer than about the number of ranks seen."""
        if not self.ranks_expected or self.partial_logs:
            return []
        seen = {r.rank for r in self.ranks if r.rank is not None}
        if not seen:
            return []
        return [r for r in range(self.ranks_expected) if r not in seen]

    def versions(self, what: str) -> list[str]:
        found = {r.versions[what] for r in self.ranks if what in r.versions}
        if not found and what in _VERSION_LINES:
            # No rank owns a version line (pdsh's "node7: NCCL version ..." names no writer): the job's lines still tell.
            kind, name = _VERSION_LINES[what]
            found = {str(e.get(name)) for e in self.by_kind(kind) if e.get(name)}
        return sorted(found)


def file_line(flip: int | list[int] | None, line: int) -> int:
    """The file's own number of a line read in another order (see FileScan.flipped)."""
    if not flip:
        return line
    if isinstance(flip, int):
        return flip + 1 - line
    return flip[line - 1] if 0 < line <= len(flip) else line


#: versions() asked for -> (event kind, field) of the lines that state it.
_VERSION_LINES = {"nccl": ("nccl_version", "version"), "nccl_cuda": ("nccl_version", "cuda"),
                  "torch": ("torch_version", "version")}


def build_job(events: list[Event], scans: list) -> JobModel:
    world = world_size(events)
    if world is not None and world < 0:
        # Only a lower bound (a failure table, --log-dir folders): a rank the processes name beyond it
        # (a node whose agent wrote no table) raises it.
        world = max(-world, 1 + max((e.rank for e in events if e.rank is not None), default=0))
    procs = build_processes(events, world)
    last_by_file = {s.path: s.last_lines for s in scans}
    # A group of events with no rank, host or pid (a bare "NCCL version" line in a shared file)
    # is not a rank; its events stay in job.events for the rules. Nor is the group of a file's lines
    # that name no writer but carry a host prefix (pdsh's "node7: ..." on launcher lines and prints
    # of every node): the host belongs to each line, not to one process.
    attributed = [p for p in procs if p.rank is not None
                  or ((p.host is not None or p.pid is not None) and p.key[0] != "file")]
    chosen = attributed or procs
    # Files that processes of several ranks wrote lines to: a file's last line is no one rank's
    # there (a restarted rank's generations are one writer).
    ranks_in: dict[str, set] = defaultdict(set)
    for p in chosen:
        if p.rank is not None:
            for f in p.files:
                ranks_in[f].add(p.rank)
    shared = {f for f, rs in ranks_in.items() if len(rs) > 1}
    # Files torchrun's agent wrote into too (a console): an unlabelled line there may be the agent's
    agent_files = {e.file for e in events if e.kind.startswith("elastic_")}
    ranks = [_rank_state(p, last_by_file, shared, agent_files) for p in chosen]
    _reconcile_across_ranks(ranks)
    ranks.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.host or "", r.pid or 0))
    hosts, table_hosts = name_hosts(ranks, events, world, {s.path for s in scans if "compose_service" in getattr(s, "modes", ())})
    job = JobModel(ranks=ranks, events=sorted(events, key=by_place), ranks_expected=world,
                   hosts=hosts, rank_hosts={**table_hosts, **{r.rank: r.host for r in ranks if r.rank is not None and r.host}}, files=[s.path for s in scans], last_lines=last_by_file,
                   cut=frozenset(s.path for s in scans if getattr(s, "issue", None)),
                   quiet={s.path: s.quiet for s in scans if getattr(s, "quiet", None)},
                   startup={s.path: s.startup for s in scans if getattr(s, "startup", None)},
                   last_before={s.path: s.last_before for s in scans if getattr(s, "last_before", None)})
    job.flipped = {s.path: s.flipped for s in scans if getattr(s, "flipped", 0)}
    if scans and all(getattr(s, "step_ts", None) is not None for s in scans):
        job.step_times = sorted(t for s in scans for t in s.step_ts if t == t)  # t != t: NaN, no time
    job.index = {}
    for r in ranks:
        job.index.update(dict.fromkeys(map(id, r.events), r))
        if r.rank is not None:
            for e in r.events:
                if e.rank is None:
                    e.rank = r.rank
    return job


def _rank_state(p: Proc, last_by_file: dict[str, dict], shared: set[str] = frozenset(),
                agent_files: set[str] = frozenset()) -> RankState:
    evs = sorted(p.events, key=by_place)
    st = RankState(rank=p.rank, host=p.host, pid=p.pid, cuda_dev=p.cuda_dev, local_rank=p.local_rank,
                   rank_source=p.rank_source, files=sorted(p.files), events=evs)
    best = 0
    for e in evs:
        k = e.kind
        if k == "nccl_init":
            what, phase = e.get("what"), e.get("phase")
            if what == "Init" and phase == "START":
                i = _INIT_START
            elif what == "Init" and phase in ("COMPLETE", None):
                i = _INIT_COMPLETE
            elif what == "Destroy" and phase == "COMPLETE":
                i = _FINISHED
            else:
                i = 0
        else:
            i = _STAGE_INDEX.get(k, 0)
        if i > best:
            best = i
        if k in _PROGRESS_KINDS:
            _progress(st, e)
    st.stage = STAGES[best]
    st.last_line = rank_last_line(p, last_by_file, shared, agent_files)
    _reconcile_unnamed_pg(st)
    return st


def _reconcile_unnamed_pg(st: RankState) -> None:
    """A watchdog-timeout line does not name its process group; the status line that follows does.

    Attach the unnamed SeqNum to the group that reports the same SeqNum, else to the default group
    when the rank reports no other group (torch <= 2.1 logs name no group at all).
    """
    seq = st.last_seq.pop(UNNAMED_PG, None)
    if seq is None:
        return
    if any(v == seq for v in st.last_seq.values()):
        return
    st.last_seq[UNNAMED_PG] = seq


def _reconcile_across_ranks(ranks: list[RankState]) -> None:
    """Unnamed SeqNums left after the per-rank pass: use a group another rank names at that SeqNum."""
    named: dict[int, str] = {}
    for r in ranks:
        for pg, seq in r.last_seq.items():
            if pg != UNNAMED_PG:
                named.setdefault(seq, pg)
    for r in ranks:
        seq = r.last_seq.pop(UNNAMED_PG, None)
        if seq is not None:
            r.last_seq.setdefault(named.get(seq, "default"), seq)


_STAGE_INDEX = {k: stage_index(s) for k, s in _STAGE_OF.items()}
_INIT_START, _INIT_COMPLETE, _FINISHED = (stage_index(s) for s in ("init_start", "init_complete", "finished"))
#: The kinds _progress reads (every other kind leaves a rank's progress as it is).
_PROGRESS_KINDS = frozenset({
    "torch_wd_timeout", "torch_wd_status", "torch_work_update", "fr_pg", *TIMEOUT_KINDS, *ERROR_KINDS, "train_step",
    "nccl_version", "torch_version", "torch_nccl_error", "nccl_env", "nccl_bootstrap", "nccl_net_socket",
    "nccl_net_iface", "nccl_net_ib", "nccl_using_net", "nccl_ib_none"})


def _progress(st: RankState, e: Event) -> None:
    k = e.kind
    f = e.fields
    if k == "torch_wd_timeout":
        st.timeouts.append(e)
        if f.get("seq") is not None:
            named = any(f.get(x) not in (None, "") for x in ("pg_guid", "pg_id"))
            st.last_seq[pg_key(e) if named else UNNAMED_PG] = f["seq"]
    elif k in ("torch_wd_status", "torch_work_update"):
        pg = pg_key(e)
        if k == "torch_wd_status":
            st.timeouts.append(e)
            if f.get("seq") is not None:
                st.last_seq.setdefault(pg, f["seq"])
        if f.get("enqueued") is not None:
            st.enqueued[pg] = f["enqueued"]
        if f.get("completed") is not None:
            st.completed[pg] = f["completed"]
    elif k == "fr_pg":  # a flight-recorder dump's group: its last collective and pg_status (SeqNum units)
        pg = pg_key(e)
        if f.get("last_seq") is not None:
            st.last_seq.setdefault(pg, f["last_seq"])  # a log line of the rank wins
        for name in ("enqueued", "completed"):
            if isinstance(f.get(name), int) and f[name] >= 0:
                getattr(st, name).setdefault(pg, f[name])
    elif k in TIMEOUT_KINDS and not f.get("by_agent"):
        st.timeouts.append(e)
    if k in ERROR_KINDS:
        if not f.get("by_agent"):
            st.errors.append(e)  # (torchrun's own traceback in a file whose unlabelled lines are a rank's: relays)
    elif k == "train_step" and isinstance(f.get("step"), int):
        st.last_step = f["step"]
    elif k == "nccl_version" and f.get("version"):
        st.versions.setdefault("nccl", str(f["version"]))
        if f.get("cuda"):
            st.versions.setdefault("nccl_cuda", str(f["cuda"]))
    elif k == "torch_version" and f.get("version"):
        st.versions.setdefault("torch", str(f["version"]))
    elif k == "torch_nccl_error" and f.get("version"):
        st.versions.setdefault("nccl", str(f["version"]))
    elif k == "nccl_env" and f.get("var"):
        st.env[str(f["var"])] = str(f.get("val", ""))
    elif k in ("nccl_bootstrap", "nccl_net_socket", "nccl_net_iface") and f.get("iface"):
        st.net.setdefault("iface", f["iface"])
        if f.get("addr"):
            st.net.setdefault("addr", f["addr"])
    elif k == "nccl_net_ib":
        st.net["ib"] = f.get("devs")
        if f.get("oob_iface"):
            st.net.setdefault("iface", f["oob_iface"])
            st.net.setdefault("addr", f.get("oob_addr"))
    elif k == "nccl_using_net" and f.get("net"):
        st.net["net"] = f["net"]
    elif k == "nccl_ib_none":
        st.net["ib_none"] = True
