"""The one rank of the world no line names: a launcher's worker whose lines name no rank, when every
other rank of the world is known (identity's last reading, on its ``Proc`` objects)."""

from __future__ import annotations


def the_one_rank_left(procs: list, world: int | None) -> None:
    """Every rank of the world but one is known, and one launcher's worker (a local rank's label or
    its --log-dir folder) names no rank: it is that rank (a hung rank's node, whose script names no
    rank and which never printed torch's "[rankN]:" traceback its peers did). Not when its label says
    another number on the same node."""
    if not world or world > len(procs) + 1:
        return
    taken = {p.rank for p in procs if p.rank is not None}
    if len(taken) != world - 1 or not taken <= set(range(world)):
        return
    workers = [p for p in procs if p.rank is None and p.local_rank is not None]
    # (one process told twice, by its --log-dir folder and by the console torchrun tees it to: the same lines)
    told = {(p.local_rank, _told(p)) for p in workers}
    if len(told) != 1:
        return  # (several processes)
    # (a copy of a known rank's lines, its --log-dir file beside the console: only a rank with as many events can be)
    n, sig = len(workers[0].events), next(iter(told))[1]
    if any(len(q.events) == n and _told(q) == sig for q in procs if q.rank is not None):
        return
    left = next(iter(set(range(world)) - taken))
    local = workers[0].local_rank
    # (a local rank that is not the rank left is another node's, seen by a known rank of that number on
    # another node; on one named host it says another number)
    if local != left and (len({q.host for q in procs if q.host}) == 1
                          or not any(q.rank is not None and q.local_rank == local for q in procs)):
        return
    for p in workers:
        p.rank, p.rank_source = left, "the one rank left"


def _told(p) -> tuple:
    """What a process's lines say, as kinds and steps: the same in each copy of its output (whose
    files may come in another order: stderr.log and stdout.log apart, one console)."""
    return tuple(sorted(f"{e.kind} {e.fields.get('step')}" for e in p.events))
