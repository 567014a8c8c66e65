"""Processes that are one rank: the rank's lines under a launcher prefix in one file and from its world
communicator in another (NCCL_DEBUG_FILE), or its own file's unprefixed lines; two hosts claiming one
rank keep the better-sourced claim (identity's last step, on its ``Proc`` objects)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ..events import by_place

if TYPE_CHECKING:
    from .identity import Proc

#: How far each way of naming a process's rank is trusted (lower is better).
_TRUST = {"launcher": 0, "nccl communicator": 1, "torch options": 2, "file name": 3, "flight recorder": 3,
          "log folder": 3, "launcher label": 3, "default group": 4}


def merge_same_rank(procs: list[Proc]) -> list[Proc]:
    """A rank known from a launcher prefix in one file (torch lines) and from the world communicator
    in another (NCCL_DEBUG_FILE) is one process when only one of the two has a host:pid."""
    by_rank: dict[int, list[Proc]] = defaultdict(list)
    for p in procs:
        if p.rank is not None:
            by_rank[p.rank].append(p)
    dropped: set[int] = set()
    for ps in by_rank.values():
        if len(ps) < 2:
            continue
        located = [p for p in ps if p.pid is not None]
        hosts = {p.host for p in located}
        if len(hosts) > 1:
            # Two hosts claim one rank: keep the better-sourced claim, unset the weaker ones.
            located.sort(key=lambda p: _TRUST.get(p.rank_source or "", 9))
            for p in located[1:]:
                if _TRUST.get(p.rank_source or "", 9) > _TRUST.get(located[0].rank_source or "", 9):
                    p.rank, p.rank_source = None, None
            continue
        if len({p.pid for p in located}) == 1:
            target = located[0]  # (one pid: one process, whose lines several files hold, rotated parts)
        elif not located:
            # No pid anywhere: the rank's lines under a prefix and its own file's unprefixed lines (a
            # traceback its logger wrote to rank3.log) are one process, the best-sourced one.
            target = min(ps, key=lambda p: _TRUST.get(p.rank_source or "", 9))
        else:
            continue  # several pids on one host (restarts): separate generations of one rank
        for p in ps:
            if p is target:
                continue
            target.events.extend(p.events)
            target.files |= p.files
            dropped.add(id(p))
            if _TRUST.get(p.rank_source or "", 9) < _TRUST.get(target.rank_source or "", 9):
                target.rank_source = p.rank_source
            if target.local_rank is None:
                target.local_rank = p.local_rank
        target.events.sort(key=by_place)
    return [p for p in procs if id(p) not in dropped]
