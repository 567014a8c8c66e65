"""Where in its own script each rank was when it gave up: the innermost frame of the job's code (not
Python's or a package's) in the traceback of its timeout or of its lost peer.

A rank-dependent code path (one rank all-reduces two values where the others reduce one, or calls
its collective from another line) leaves every rank waiting in a collective, and gloo then says
only "Timed out waiting" or "Connection closed by peer" everywhere. What tells the stray rank is
where it waited: all the others' tracebacks stop at one line of the script, its own at another.
Only for collectives: point-to-point stages wait at different lines by design (a pipeline's sender
and receiver).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, RankState
from .causes import _PEER_GONE, _TIMEOUT_ECHOES
from .endings import launcher_kills
from .facts import _per_job
from .launcher_facts import numbers_masked
from .sites import exc_text
from .sites import script_site as _site
from .timeouts import P2P_CALLS, c10d_call, timeouts_by_pg


@dataclass(slots=True, frozen=True)
class OddSite:
    rank: int
    site: str  # "train27.py:215 (in train)"
    others: str  # the majority's
    majority: list[int]
    events: list[Event]


@_per_job
def odd_call_site(job: JobModel) -> OddSite | None:
    """The one rank that timed out at another line of its script than every other rank, in a job
    whose ranks timed out and where every rank of the world (three at least) says where it waited:
    a rank that hung in silence or failed of its own is another story (its own rules tell it)."""
    sites = _every_site(job)
    if sites is None or len(sites) < 3:
        return None
    where = {r: site[0] for r, site in sites.items()}
    top, n, odd = _one_apart(where)
    if n < 2 or len(odd) != 1:
        # the others at several lines of one function (a training step's forward and backward), the
        # stray one in another function (a logging helper's all_reduce): apart by the function; a barrier is
        # no part of a step (a barrier and DDP's all-reduce under backward at two lines of one main() are two
        # code paths, not one step: t450_bestsave)
        known = job.known_ranks()
        where = {r: (site[0][0], site[1].get("func"), c10d_call(known.get(r)) == "barrier")
                 for r, site in sites.items()}
        top_func, n, odd = _one_apart(where)
        if n < 2 or len(odd) != 1:
            return None
        top = next(site[0] for r, site in sites.items() if where[r] == top_func)
    rank = odd[0]
    key, frame, exc, in_c10d = sites[rank]
    text = exc_text(exc)
    if exc.kind not in _TIMEOUT_ECHOES and "imed out" not in text and "imeout" not in text \
            and (not in_c10d or rank in launcher_kills(job)):
        # it lost a peer outside any collective, or when the launcher stopped it (a SIGTERM handler's own
        # collective): stopped where it hung, not a desync
        return None
    majority = sorted(r for r in sites if r != rank)
    lead = next(sites[r] for r in majority if sites[r][0] == top)
    lines = ", ".join(f":{n}" for n in sorted({sites[r][0][1] for r in majority}))[1:]
    return OddSite(rank, f"{key[0]}:{key[1]} (in {frame.get('func')})",
                   f"{top[0]}:{lines} (in {lead[1].get('func')})", majority, [frame, exc, lead[1], lead[2]])


@dataclass(slots=True, frozen=True)
class TwoSites:
    sides: list[tuple[int, str]]  # (rank, "train27.py:215 (in train)"), one per rank
    events: list[Event]


@_per_job
def two_sites(job: JobModel) -> TwoSites | None:
    """The two ranks of a job waited in two collectives of the script: one took a code path the other did
    not (a collective in a rank-dependent branch, a skipped one), and with no majority nothing says which
    (odd_call_site names the odd one out of three or more; of four, a 2-2 split is more often the timing
    of an echo than two code paths)."""
    sites = _every_site(job)
    if sites is None or len(sites) != 2 or not all(map(_in_collective, sites.values())) \
            or len({site[0] for site in sites.values()}) != 2:
        return None
    sides, events = [], []
    for r, (key, frame, exc, _in) in sorted(sites.items()):
        sides.append((r, f"{key[0]}:{key[1]} (in {frame.get('func')})"))
        events += [frame, exc]
    return TwoSites(sides, events)


@dataclass(slots=True, frozen=True)
class BranchAlone:
    rank: int
    site: str
    said: Event  # its last line: an action the other rank never took
    other: int
    other_site: str
    events: list[Event]


@_per_job
def branch_alone(job: JobModel) -> BranchAlone | None:
    """Of two ranks waiting at two collectives (two_sites), the one whose last line before it is an action of a
    phase the other rank never logged in the whole run (rank 0's "saved checkpoint", then a barrier), while the
    other's last line is a training step: its collective stands in a branch only it took (a barrier or a flag's
    all_reduce inside ``if rank == 0:``), the commonest form of this bug; the other went on to its next step's
    collective. A skipped collective of the common path would read the same, and is much rarer."""
    two = two_sites(job)
    if two is None:
        return None
    known = job.known_ranks()
    (a, site_a), (b, site_b) = two.sides
    last = {r: _last_said(known.get(r)) for r in (a, b)}
    for me, mine, other, theirs in ((a, site_a, b, site_b), (b, site_b, a, site_a)):
        said, their_last = last[me], last[other]
        if said is None or their_last is None or said.kind != "train_phase" or their_last.kind != "train_step":
            continue
        if _logs_phase(known.get(other), said):
            continue
        return BranchAlone(me, mine, said, other, theirs, [said, *two.events])
    return None


@dataclass(slots=True, frozen=True)
class BarrierAlone:
    rank: int
    site: str
    other: int
    other_site: str
    events: list[Event]


@_per_job
def barrier_alone(job: JobModel) -> BarrierAlone | None:
    """Of two ranks waiting at two collectives (two_sites), the one whose traceback stops in ``barrier()`` while the
    other's goes through no torch.distributed call (DDP's gradient all-reduce under ``loss.backward()``: still in its
    training step): it left the loop early (its data ran out, it ended its epoch after an error it handled) or took a
    branch with a barrier the other did not (a save only it was asked for). A rank that skipped a barrier every other
    rank calls reads the same, and is rarer; not when the rank's last line before it is an action the other rank also
    logs (both save checkpoints: the other may have skipped its save). Asked only where no last line says more
    (branch_alone)."""
    two = two_sites(job)
    if two is None:
        return _barrier_alone_of_many(job)
    known = job.known_ranks()
    (a, site_a), (b, site_b) = two.sides
    # (no torch.distributed call in the other's traceback: DDP's all-reduce under backward)
    calls = {r: c10d_call(known.get(r)) for r in (a, b)}
    for me, mine, other, theirs in ((a, site_a, b, site_b), (b, site_b, a, site_a)):
        said = _last_said(known.get(me))
        if said is not None and said.kind == "train_phase" and _logs_phase(known.get(other), said):
            continue  # (the action before its barrier is one the other rank takes too: the other may have skipped it)
        if calls[me] == "barrier" and calls[other] is None:
            return BarrierAlone(me, mine, other, theirs, two.events)
    return None


def _barrier_alone_of_many(job: JobModel) -> BarrierAlone | None:
    """Of three ranks or more, each saying where it waited, the one alone in ``barrier()`` while another was still in its
    training step (DDP's all-reduce under backward): the ranks between them wait on what the lone rank never joined (a
    broadcast's root stuck sending to it, t450_bestsave). Two in a barrier: the one elsewhere may have skipped it."""
    sites = _every_site(job)
    if sites is None or len(sites) < 3 or not all(map(_in_collective, sites.values())):
        return None
    known = job.known_ranks()
    calls = {r: c10d_call(known.get(r)) for r in sites}
    alone = [r for r, call in calls.items() if call == "barrier"]
    stepping = sorted(r for r, call in calls.items() if call is None)
    if len(alone) != 1 or not stepping:
        return None
    me, other = alone[0], stepping[0]
    said = _last_said(known.get(me))
    if said is not None and said.kind == "train_phase" and any(_logs_line(known.get(r), said) for r in sites if r != me):
        return None  # (the action before its barrier is one the others take too: they may have skipped it)
    (key, frame, exc, _), (okey, oframe, oexc, _) = sites[me], sites[other]
    return BarrierAlone(me, f"{key[0]}:{key[1]} (in {frame.get('func')})", other,
                        f"{okey[0]}:{okey[1]} (in {oframe.get('func')})", [frame, exc, oframe, oexc])


def _logs_phase(st: RankState | None, said: Event) -> bool:
    """Whether this rank logged, anywhere in the run, a line of the phase ``said`` starts or ends."""
    return st is not None and any(e.kind == "train_phase" and e.get("phase") == said.get("phase") for e in st.events)


def _logs_line(st: RankState | None, said: Event) -> bool:
    """Whether this rank logged, anywhere in the run, the line ``said`` in the same words (numbers aside): of three
    ranks a phase word is too coarse ("waiting for the other ranks" ends an epoch's line and a lone save's alike)."""
    sig = numbers_masked(said.text)  # (the whole line: a phase line's message may be its last words only)
    return st is not None and any(e.kind == said.kind and numbers_masked(e.text) == sig for e in st.events)


def _last_said(st: RankState | None) -> Event | None:
    """A rank's last step or phase line (before the traceback of its wait)."""
    if st is None:
        return None
    return next((e for e in reversed(st.events) if e.kind in ("train_step", "train_phase")), None)


def _in_collective(site: tuple[tuple[str, int], Event, Event, bool]) -> bool:
    """The rank's echo was raised in a collective: its traceback goes through torch.distributed, or it
    timed out or lost its peer (DDP's all-reduce under loss.backward() shows no torch.distributed frame;
    a launcher's own SignalException is neither)."""
    _key, _frame, exc, in_c10d = site
    text = exc_text(exc)
    return in_c10d or exc.kind in _TIMEOUT_ECHOES or _PEER_GONE.search(text) is not None


def _every_site(job: JobModel) -> dict[int, tuple[tuple[str, int], Event, Event, bool]] | None:
    """Where each rank of the world waited in its script (see sites.script_site), when some rank timed
    out and every rank says so; None otherwise, and for point-to-point stages (which wait at different
    lines by design)."""
    if not timeouts_by_pg(job):
        return None
    sites: dict[int, tuple[tuple[str, int], Event, Event, bool]] = {}
    for st in job.ranks:
        if st.rank is None or st.rank in sites:
            continue
        if c10d_call(st) in P2P_CALLS:
            return None
        found = _site(st)
        if found is not None:
            sites[st.rank] = found
    world = job.ranks_expected or len(job.known_ranks())
    if len(sites) < 2 or len(sites) != world or job.kinds("elastic_restart"):
        return None  # a rank that says nothing (hung, killed) or one that failed is the story; a restart mixes attempts
    return sites


def _one_apart(where: dict[int, object]) -> tuple[object, int, list[int]]:
    """(the place most ranks share, how many share it, the ranks elsewhere)."""
    (top, n), *_rest = Counter(where.values()).most_common()
    return top, n, [r for r, w in where.items() if w != top]

