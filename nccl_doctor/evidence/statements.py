"""Ranks that torch names in its own words: the waiters say whom they waited for.

* a monitored barrier: rank 0 reports ``[Rank 0]: Rank(s) 2[, 3] failed to pass monitoredBarrier
  in N ms``: those ranks never arrived (FORMATS-2.md 3.6);
* a store key that was never set: every waiter reports ``wait timeout after N ms, keys: K`` with
  the same key, and the key ends in a rank number (the c10d rendezvous keys of a process group are
  ``<prefix>/<rank>``: each rank publishes its own and waits for the others'). That rank never
  published it: it never got as far as its peers. A key without a rank (``/vocab_ready``) names no
  one.

* ``mismatch_reports(job)``: the lines in which torch or gloo say the ranks ran different
  collectives: ``TORCH_DISTRIBUTED_DEBUG=DETAIL``'s fingerprint check (``Detected mismatch between
  collectives on ranks``) and gloo receiving another collective's data (``Received data size doesn't
  match expected size``). DSY1 tells them; a lost peer beside them is their echo.

Such a statement is stronger than torchrun's "Root Cause", which is only the first process to exit
(usually one of the waiters). Results are cached per job like the facts.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel
from ..model.links import rank_list
from .facts import _per_job, fmt_ms, global_rank, int_in, name_ranks, owner, plural, writer
from .timeouts import c10d_call, c10d_frame

#: TORCH_DISTRIBUTED_DEBUG=DETAIL's check of every collective's fingerprint across ranks.
FINGERPRINT_MISMATCH = re.compile(r"Detected mismatch between collectives on ranks")
#: gloo's enforce when a pair received more bytes than the op posted (torch 2.x gloo pair.cc).
TRANSPORT_MISMATCH = re.compile(r"Received data size doesn't match expected size|Is there a distributed collective "
                                r"mismatch\??")
_KEYS = re.compile(r"wait timeout after (?P<ms>\d{1,12}) ?ms, keys: (?P<keys>[^\n]{1,2000})")
_RANK_KEY = re.compile(r"/(\d{1,7})$")
SUBGROUP_KEY = re.compile(r"^/?default_pg/\d{1,7}//\d{1,7}//")


@dataclass(slots=True, eq=False)
class Statement:
    """Ranks a torch message names as the ones the others waited for."""

    ranks: list[int]
    reason: str
    events: list[Event] = field(default_factory=list)


@_per_job
def named_by_torch(job: JobModel) -> list[Statement]:
    return _barrier(job) + _store_keys(job)


@_per_job
def barrier_roots(job: JobModel) -> set[int]:
    """The ranks whose monitored barrier reported missing ranks: they waited there until it timed out."""
    return {r for e in job.by_kind("torch_barrier_missing")
            if (r := int_in(e.get("reporter")) if e.get("reporter") is not None else e.rank) is not None}


def _barrier(job: JobModel) -> list[Statement]:
    by_ranks: dict[tuple[int, ...], list[Event]] = defaultdict(list)
    for ev in job.by_kind("torch_barrier_missing"):
        ranks = tuple(sorted(set(rank_list(str(ev.get("ranks") or "")))))
        if ranks:
            by_ranks[ranks].append(ev)
    out: list[Statement] = []
    if waited_together(job) is not None:
        return out
    for ranks, evs in by_ranks.items():
        ms = next((int_in(e.get("timeout_ms")) for e in evs if e.get("timeout_ms") is not None), None)
        reporter = next((int_in(e.get("reporter")) for e in evs if e.get("reporter") is not None), None)
        who = f"rank {reporter}" if reporter is not None else "the barrier's root"
        out.append(Statement(list(ranks), f"{who}'s monitored barrier reports that {name_ranks(ranks)} did not "
                             f"arrive within {fmt_ms(ms)}", evs[:3]))
    return out


@_per_job
def waited_together(job: JobModel) -> tuple[list[int], str, list[Event]] | None:
    """(ranks, "script.py:238 (broadcast)", evidence) when the ranks a monitored barrier names, two at least, each
    timed out in a collective of its own at one and the same line of the script, where no rank that reached the
    barrier was: they did not go missing, they waited in a collective the others had passed (a broadcast whose root
    they disagreed on: one sends, the other receives, and nobody answers either). The barrier says only that they
    were elsewhere, not which of them strayed. (gloo's barrier names each rank, then all of them: their union is what
    it reports.)"""
    from .sites import script_site  # (sites reads tracebacks, which read these statements' kinds)

    said = job.by_kind("torch_barrier_missing")
    ranks = sorted({r for e in said for r in rank_list(str(e.get("ranks") or ""))})
    known = job.known_ranks()
    if len(ranks) < 2 or any(r not in known for r in ranks):
        return None
    sites = [script_site(known[r]) for r in ranks]
    where = {s[0] for s in sites if s is not None}
    if len(where) != 1 or any(s is None or not s[3] for s in sites):
        return None
    others = {s[0] for st in job.ranks if st.rank is not None and st.rank not in ranks
              and (s := script_site(st)) is not None}
    if where & others:
        return None
    (script, line), = where
    ops = {c10d_call(known[r]) for r in ranks} - {None}
    site = f"{script}:{line}" + (f" ({next(iter(ops))})" if len(ops) == 1 else "")
    return ranks, site, [s[2] for s in sites if s is not None][:2] + said[-1:]


def _waited_for_clients(job: JobModel, rank: int) -> bool:
    """The rank's own line says the store it hosts timed out "waiting for clients. 3/4 clients
    joined" (init_method env:// without torchrun: rank 0 hosts the store): it never published its
    key because a client never came."""
    st = job.known_ranks().get(rank)
    return st is not None and any("waiting for clients" in str(e.get("err") or e.text) for e in st.events
                                  if e.kind in ("torch_store_timeout", "python_exception"))


def one_waited_key(text: str) -> str | None:
    """The store key a waiter's "wait timeout after N ms, keys: K" names, when it names one."""
    m = _KEYS.search(text)
    keys = [k.strip() for k in m.group("keys").split(",") if k.strip()] if m is not None else []
    return keys[0] if len(keys) == 1 else None


def key_rank(key: str) -> int | None:
    """The rank number a store key ends in (``/default_pg/0//cpu//0/3``: 3). Not a subgroup's key
    (``/default_pg/0//4//cpu//0/0``: the 4th group ``new_group`` made): its number is the rank within
    that group, whose members the logs do not give."""
    if SUBGROUP_KEY.search(key):
        return None
    m = _RANK_KEY.search(key)
    return int(m.group(1)) if m is not None else None


def subgroup_waits(job: JobModel) -> dict[int, tuple[Event, str]]:
    """rank -> (its store wait that timed out on a subgroup's key, the key: ``/default_pg/0//3//cpu//0/1``):
    it was creating a process group (``new_group``, a device mesh) that its peers were not creating then."""
    out: dict[int, tuple[Event, str]] = {}
    for ev in job.by_kind("torch_store_timeout", "python_exception"):
        key = one_waited_key(str(ev.get("err") or ev.get("msg") or ""))
        rank = global_rank(job, ev) if key is not None and SUBGROUP_KEY.search(key) else None
        if rank is not None:
            out.setdefault(rank, (ev, key))
    return out


def _store_keys(job: JobModel) -> list[Statement]:
    """Waiters that timed out on one store key ending in a rank number, and that rank is not one of them."""
    waits: dict[str, dict[tuple, Event]] = defaultdict(dict)
    for ev in job.by_kind("torch_store_timeout", "python_exception"):
        key = one_waited_key(str(ev.get("err") or ev.get("msg") or ""))
        if key is not None:
            # one report per waiter (its echoes repeat it); unattributed tracebacks count one each
            st = owner(job, ev)
            who = writer(job, ev) if st is not None and st.rank is not None else ("line", ev.file, ev.line)
            waits[key].setdefault(who, ev)
    out = []
    for key, by_writer in waits.items():
        rank = key_rank(key)
        if rank is None or "/torchelastic/" in key:
            continue  # (torchelastic's own keys, "/none/torchelastic/assigned_ranks/1", number nodes: no rank's)
        waiters = {global_rank(job, e) for e in by_writer.values()} - {None}
        if (rank in waiters and len(waiters - {rank}) < 2) or (job.ranks_expected and rank >= job.ranks_expected):
            # a number beyond the world is not a rank; c10d's own keys are never waited for by their
            # owner, but a script's barrier may wait for every rank's key, its own included: then the
            # others' waiting for it too (two at least) still says that rank never set it
            continue
        if _waited_for_clients(job, rank):
            continue  # it hosts the store and itself waited for a client that never came: not the cause
        evs = list(by_writer.values())
        ms = next((int(_KEYS.search(str(e.get("err") or e.get("msg"))).group("ms")) for e in evs), None)
        # The waiters reached the store, so its host was up; without rank 0's own log nothing says whether
        # rank 0 hung or, hosting the store (env:// init), waited for a rank that never joined it
        hedge = "" if rank != 0 or job.known_ranks().get(0) else (
            " (rank 0 may host the store and itself wait there for a rank that never joined: its own log, "
            "not among these, says which)")
        out.append(Statement([rank], f"{plural(len(evs), 'process')} waited {fmt_ms(ms)} for the store key "
                             f"{key!r}, which rank {rank} publishes and never did{hedge}", evs[:3]))
    return out


@_per_job
def mismatch_reports(job: JobModel) -> tuple[list[Event], list[Event]]:
    """(gloo's transport mismatches, DETAIL's fingerprint mismatches), as the ranks' errors print them."""
    errors = job.by_kind("python_exception", "cpp_terminate", "torch_wd_exception")
    return ([e for e in errors if TRANSPORT_MISMATCH.search(e.text)],
            [e for e in errors if FINGERPRINT_MISMATCH.search(e.text)])


#: torch.distributed's blocking point-to-point sends (a non-blocking isend raises from the script's
#: own ``work.wait()``, which names no direction).
_SENDS = frozenset(("send", "send_object_list"))


@_per_job
def mismatch_sender(job: JobModel) -> tuple[int, Event] | None:
    """(rank, its frame) of the process that sent the data of another size a receiver aborted on.

    gloo's enforce fires in the *receiver*, which cannot say who deviated. In a point-to-point
    exchange (pipeline stages) the sender is the one other rank whose traceback stops in a blocking
    ``send``: the connection broke under it when the receiver died. Several such ranks (or none)
    single out nobody; a collective's tracebacks stop in the collective, never in ``send``."""
    torn, _ = mismatch_reports(job)
    if not torn:
        return None
    receivers = {global_rank(job, e) for e in torn}
    sending: dict[int, Event] = {}
    for st in job.ranks:
        if st.rank is None or st.rank in receivers:
            continue
        frame = c10d_frame(st)
        if frame is not None and frame.get("op") in _SENDS:
            sending[st.rank] = frame
    return next(iter(sending.items())) if len(sending) == 1 else None


#: A launcher's report that a worker died by SIGABRT (gloo's enforce ends in std::terminate, then abort).
_ABORTED = (-6, 134)


@_per_job
def aborted_in_tables(job: JobModel) -> set[int]:
    """The ranks a launcher's failure table says died by SIGABRT (gloo's enforce ends in abort)."""
    return {r for e in job.by_kind("elastic_cfe") if int_in(e.get("exitcode")) in _ABORTED
            and (r := int_in(e.get("rank"))) is not None}


@_per_job
def lone_abort(job: JobModel) -> int | None:
    """The one rank gloo aborted on a size mismatch (its report's rank, or a launcher's SIGABRT row), else None."""
    from .sites import script_site  # (sites reads tracebacks, which read these statements' kinds)

    torn, _ = mismatch_reports(job)
    named = {global_rank(job, e) for e in torn} - {None}
    aborted = named | aborted_in_tables(job)
    if torn and not named and len(aborted) > 1:
        # A rank that raised a lost peer in Python, then died by SIGABRT ("terminate called without an active
        # exception" at its teardown), was not the receiver gloo's enforce aborted: that one raised nothing.
        known = job.known_ranks()
        aborted = {r for r in aborted if r not in known or script_site(known[r]) is None}
    return next(iter(aborted)) if torn and len(aborted) == 1 else None


@_per_job
def mismatch_spared(job: JobModel) -> tuple[int, list[int], list[int]] | None:
    """(rank, the receivers, the receivers cut off) when gloo aborted every rank of the job but one on a size
    mismatch (or some, and the others lost them in the same broadcast).

    Each receiver got more (or less) data from a peer than its collective posted; when all ranks but
    one report it, the data they disagree with came from the one rank they have in common, which
    gloo spared (its own receives matched): that rank ran the odd collective (another size, another
    op). With two ranks nothing tells the sides apart, so at least three. A report that names no rank
    (a console without rank labels) is matched to the launcher's table of ranks that died by SIGABRT,
    only when they are as many as the reports."""
    torn, _ = mismatch_reports(job)
    world = job.ranks_expected
    if not torn or world is None or world < 3:
        return None
    named = {global_rank(job, e) for e in torn}
    receivers = named - {None}
    if None in named:
        aborted = aborted_in_tables(job)
        # (two processes aborting into one stream at once leave one record holding both: "terminate called after
        # throwing an instance of 'terminate called after throwing ...")
        told = sum(max(1, e.text.count("terminate called after throwing")) for e in torn)
        if len(aborted | receivers) != told:
            return None
        receivers |= aborted
    cut: set[int] = set()
    if len(receivers) >= 2 and len(receivers) < world - 1:
        # a broadcast's other receivers, cut off by the first aborts before their own receive failed: still in
        # that broadcast, they lost a peer (two receivers aborting alike at least: the root sent them all more)
        cut = {st.rank for st in job.ranks if st.rank is not None and c10d_call(st) in BROADCASTS} - receivers
    spared = set(range(world)) - receivers - cut
    if len(spared) != 1 or len(receivers | cut) != world - 1:
        return None
    return next(iter(spared)), sorted(receivers), sorted(cut)


#: One-to-many collectives: every receiver takes the root's data.
BROADCASTS = frozenset(("broadcast", "broadcast_object_list"))


#: "op.preamble.length <= op.nbytes. 77748 vs 4": what a peer sent, then what the aborted receiver posted.
_SIZES = re.compile(r"(\d{1,15}) vs (\d{1,15})")
#: A receive buffer this small is a scalar collective (a loss, a counter, a flag), never a gradient bucket.
SCALAR_BYTES = 16
#: A message this many times the scalar the receiver posted is no scalar of the same collective, padded (a small
#: model's gradient chunk: "3396 vs 4", 849 times).
BIG_RATIO = 100


@_per_job
def mismatch_apart(job: JobModel) -> tuple[int, list[Event]] | None:
    """(rank, evidence) when gloo aborted one rank that posted a scalar collective while every other rank
    that says where it was lost its peer at one and the same line of the script, a collective with no scalar:
    outside any torch.distributed call (autograd's backward, DDP's gradient all-reduce), or one whose data to
    the aborted rank was a hundred times its scalar (a gradient chunk). The aborted rank was alone in another
    collective (an extra all_reduce of a metric, a step its peers skipped): it deviated. Two of them at least,
    so that the others are a majority; none elsewhere."""
    from .sites import script_site  # (sites reads tracebacks, which read these statements' kinds)

    torn, _ = mismatch_reports(job)
    rank = lone_abort(job)
    sizes = next((m for e in torn if (m := _SIZES.search(e.text)) is not None), None)
    if rank is None or sizes is None or int(sizes.group(2)) > SCALAR_BYTES:
        return None
    sites: dict[int, tuple] = {}
    for st in job.ranks:
        if st.rank is None or st.rank == rank:
            continue
        site = script_site(st)
        if site is not None:
            sites[st.rank] = site
    where = {s[0] for s in sites.values()}
    # Outside torch.distributed (autograd's backward: DDP's buckets), or an explicit collective whose sender sent
    # a hundred times what a scalar holds: no scalar collective at that line, for one rank padded or not.
    big = int(sizes.group(1)) >= BIG_RATIO * int(sizes.group(2))
    if len(sites) < 2 or len(where) != 1 or (any(s[3] for s in sites.values()) and not big):
        return None
    return rank, [torn[0], *(s[1] for s in list(sites.values())[:2])]
