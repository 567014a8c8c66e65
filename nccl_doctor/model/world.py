"""The job's world size, from the strongest evidence its lines give."""

from __future__ import annotations

from collections import defaultdict

from ..events import Event
from .identity import logdir_slot

_WORLD_KINDS = frozenset(("nccl_init", "nccl_topo", "torch_pg_options", "ds_mpi", "fr_dump", "rank_world", "elastic_cfe",
                          "elastic_rdzv"))


def world_size(events: list[Event]) -> int | None:
    """The job's world size from the strongest evidence available; negative when it is only a lower
    bound (torchrun's failure table, --log-dir folders: see build_job).

    A communicator's ``nranks`` is the world only if no rank number of it is claimed by processes
    on different hosts: three 4-rank tensor-parallel groups on three hosts are not a 4-rank job.
    """
    sizes: list[int] = []
    table = 0
    claims: dict[int, dict[int, set]] = defaultdict(lambda: defaultdict(set))
    for e in events:
        k = e.kind
        if k not in _WORLD_KINDS:
            continue
        if k in ("nccl_init", "nccl_topo") and isinstance(e.get("nranks"), int):
            if isinstance(e.get("rank"), int):
                claims[e.get("nranks")][e.get("rank")].add(e.host)
            else:
                sizes.append(e.get("nranks"))
        elif k == "torch_pg_options" and isinstance(e.get("size"), int):
            sizes.append(e.get("size"))
        elif k in ("ds_mpi", "fr_dump", "rank_world") and isinstance(e.get("world_size"), int):
            # fr_dump: the default group of a flight-recorder dump; rank_world: the script's own print
            sizes.append(e.get("world_size"))
        elif k == "elastic_cfe" and isinstance(e.get("rank"), int):
            table = max(table, e.get("rank") + 1)  # torchrun's failure table: a lower bound
        elif k == "elastic_rdzv":
            w = e.get("global_world_sizes")
            if isinstance(w, str) and w.strip("[] "):
                try:
                    sizes.append(int(w.strip("[] ").split(",")[0]))
                except ValueError:
                    pass
    for f in {e.file: None for e in events}:
        slot = logdir_slot(f)
        if slot is not None:  # torchrun --log-dir: a folder per local rank, a lower bound too
            table = max(table, slot[1] + 1)
    for n, by_rank in claims.items():
        if all(len(hosts) <= 1 for hosts in by_rank.values()):
            sizes.append(n)
    if table and not sizes:
        sizes.append(-table)  # the ranks torchrun listed: a lower bound (negative), no stronger source said
    sizes = [s for s in sizes if 0 < abs(s) < 10_000_000]
    return max(sizes, key=abs) if sizes else None
