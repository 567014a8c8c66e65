"""CFG2: ranks were started with different launch settings: one states another world size.

Evidence: each process's own statement of the world size it was given (``rank_world``: "world_size
3", "rank 1 of 3", Lightning's "MEMBER: 2/4"). Every rank of one job is given the same WORLD_SIZE;
a process that states another one than a clear majority was started wrong (a per-rank environment,
a typo in a job script, a launcher flag): torch 2.13 on gloo lets it join and the job then hangs
in its first collective, or it waits at init for a rank that cannot exist. Jobs whose membership
changes (elastic restarts, a rank seen in two generations) are left out: there the world size
legitimately changes between generations.
"""

from __future__ import annotations

from collections import defaultdict

from ..evidence.facts import first_ts, int_in, name_ranks
from ..model import JobModel
from .base import Rule


def check(job: JobModel, rule: Rule) -> list:
    if job.kinds("elastic_restart") or job.kinds("elastic_rdzv"):
        return []
    stated: dict[int, list] = defaultdict(list)  # world size -> (rank, its statement)
    ranks_seen = [st.rank for st in job.ranks if st.rank is not None]
    if len(ranks_seen) != len(set(ranks_seen)):
        return []  # a rank seen in two generations (a restart): its world may have changed
    for st in job.ranks:
        sizes = {int_in(e.get("world_size")): e for e in st.events if e.kind == "rank_world"}
        sizes.pop(None, None)
        if st.rank is not None and len(sizes) == 1:
            (size, ev), = sizes.items()
            stated[size].append((st.rank, ev))
    if len(stated) < 2:
        return []
    ranked = sorted(stated.items(), key=lambda kv: -len(kv[1]))
    top, majority = ranked[0]
    if len(majority) < 2 or len(ranked[1][1]) == len(majority):
        return []  # no clear majority: nothing says which setting was meant
    odd = [(r, ev) for _size, items in ranked[1:] for r, ev in items]
    what = "; ".join(f"{name_ranks([r for r, _ev in items])} stated {size}" for size, items in ranked[1:])
    evidence = [ev for _r, ev in odd][:4] + [ev for _r, ev in majority][:2]
    ranks = sorted(r for r, _ev in odd)
    return [rule.finding(f"ranks were started with different world sizes: {what}, while {len(majority)} ranks "
                         f"stated {top}: {'it was' if len(ranks) == 1 else 'they were'} given another WORLD_SIZE "
                         "than the job", ranks=ranks, evidence=evidence, first_seen=first_ts(evidence),
                         blame_ranks=ranks)]
