"""An error every rank logged alike, while the ranks then parted ways: no rank's own failure.

A job-wide complaint (a stall watchdog in every rank logging that it "could not dump stacks", a
shared service every rank reports as down) is printed by every rank within moments. When the
ranks then part ways, most of them timing out in a collective while one did not, that complaint
explains nothing about the difference: the rank that did not time out is the one to look at (the
hang's evidence says so), not "every rank failed first", and that rank is no less silent for having
logged it. When no rank stands apart (every rank timed out, or none did), an error they all logged
may well be the cause and stays one.
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from ..model import JobModel
from .facts import _per_job, owner
from .failure_record import Failure
from .launcher_facts import error_signature
from .timeouts import timed_out_states


@_per_job
def common_complaints(job: JobModel) -> frozenset[int]:
    """id() of the logged errors of a message every known rank (three at least) logged, when some of
    those ranks timed out afterwards and some did not (see module doc)."""
    ranks = {st.rank for st in job.ranks if st.rank is not None}
    timed = timed_out_states(job)
    if len(ranks) < 3 or not timed:
        return frozenset()
    by_shape: dict[str, dict] = defaultdict(dict)
    for ev in job.by_kind("log_error"):
        st = owner(job, ev)
        if st is not None and st.rank is not None:
            by_shape[error_signature(ev)].setdefault(st.rank, (st, []))[1].append(ev)
    out: set[int] = set()
    for per_rank in by_shape.values():
        if set(per_rank) != ranks:
            continue
        timed_here = sum(1 for st, _evs in per_rank.values() if id(st) in timed)
        if 0 < timed_here < len(per_rank):
            out |= {id(e) for _st, evs in per_rank.values() for e in evs}
    return frozenset(out)


@_per_job
def said_by_every_rank(job: JobModel) -> frozenset[str]:
    """Error signatures (exceptions and logged errors) that every known rank (three at least) wrote: a
    complaint of the whole job (a shared service down), which tells no rank's own failure apart."""
    ranks = {st.rank for st in job.ranks if st.rank is not None}
    if len(ranks) < 3:
        return frozenset()
    by_shape: dict[str, set] = defaultdict(set)
    for ev in job.by_kind("python_exception", "log_error"):
        st = owner(job, ev)
        if st is not None and st.rank is not None:
            by_shape[error_signature(ev)].add(st.rank)
    return frozenset(sig for sig, who in by_shape.items() if who == ranks)


def everyones(job: JobModel, ev: Event) -> bool:
    """An exception or logged error that every known rank wrote alike (see alike.said_by_every_rank)."""
    return ev.kind in ("python_exception", "log_error") and error_signature(ev) in said_by_every_rank(job)


def without_common_complaints(job: JobModel, out: list[Failure], reports: tuple[str, ...]) -> list[Failure]:
    """``out`` without the failures whose own lines (not a launcher's ``reports`` of their exit) are
    all such complaints."""
    common = common_complaints(job)
    if not common:
        return out
    return [f for f in out
            if not (own := [e for e in f.events if e.kind not in reports]) or not all(id(e) in common for e in own)]


#: gloo failing to connect its full mesh in init_process_group ("Gloo connectFullMesh failed with
#: [.../pair.h:311] Connect timeout"): a rank that could not reach the addresses the rendezvous gave it.
_MESH = "connectFullMesh failed"


def mesh_never_formed(job: JobModel) -> list[Failure]:
    """Every rank of the job failed to connect gloo's mesh at start-up and nothing else failed: one
    failure per rank, alike (the rendezvous handed out addresses nobody could reach: a leftover
    ``file://`` init file, another interface, a firewall), not an echo of a peer that went away. The
    ranks are the launcher table's rows, every rank of the world, as many as the
    messages (no rank prefix exists before the process group does; which message is whose, nothing
    says: the ranks that printed theirs last were stopped by the launcher meanwhile)."""
    world = job.ranks_expected
    said = [e for e in job.by_kind("python_exception") if _MESH in e.text]
    rows = {r: e for e in job.by_kind("elastic_cfe") if isinstance(r := e.get("rank"), int)}
    if not rows:  # a launcher of the job's own, by index: "rank 2 (pid 23861) exited with status 1"
        rows = {r: e for e in job.by_kind("worker_exit") if str(e.get("word") or "").lower() == "rank"
                and isinstance(r := e.get("who"), int)}
    if world is None or world < 2 or len(said) < world or set(rows) != set(range(world)):
        return []
    known = job.known_ranks()
    what = ("could not connect gloo's full mesh at start-up (\"Connect timeout\"), as every rank: the addresses "
            "the rendezvous handed out were unreachable (a stale init file, another interface, a firewall)")
    return [Failure(rank=r, state=known.get(r), host=job.rank_hosts.get(r), category="config", what=what,
                    events=[said[min(i, len(said) - 1)], rows[r]]) for i, r in enumerate(sorted(rows))]
