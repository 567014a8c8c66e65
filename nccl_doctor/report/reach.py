"""How far one rank really got: the SeqNum it waited in or enqueued last (per process group) and
the last collective of its NCCL ``COLL`` trace, not only the init stage it reached.

A rank that went silent after issuing collectives has no timeout line and often no torch line at
all, but its COLL trace says which collective it issued last (``AllReduce: opCount 25``) while the
others reached ``opCount 28``. ``last_coll`` goes into the JSON report (``ranks[].last_coll``,
beside ``last_seq`` and ``last_enqueued``); the labels are what every face prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import RankState


def last_coll(r: RankState) -> dict[str, Any] | None:
    """The rank's last NCCL COLL line: ``{"op", "opcount", "comm_ranks"}``, or None."""
    # events are in line order: the last one wins
    coll = next((e for e in reversed(r.events) if e.kind == "nccl_coll"), None)
    if coll is None:
        return None
    n = coll.get("nranks")
    return {"op": coll.get("op"), "opcount": _hex(coll.get("opcount")), "comm_ranks": n if isinstance(n, int) else None}


def _hex(text: Any) -> int | None:
    try:
        return int(str(text), 16)
    except (TypeError, ValueError):
        return None


def main_pg(ranks: list[Mapping[str, Any]]) -> str | None:
    """The process group most ranks report a SeqNum in (the default group on a tie), or None."""
    count: dict[str, int] = {}
    for r in ranks:
        for pg in {*(r.get("last_seq") or {}), *(r.get("last_enqueued") or {})}:
            count[pg] = count.get(pg, 0) + 1
    return max(count, key=lambda pg: (count[pg], pg == "default")) if count else None


def reach_label(r: Mapping[str, Any], pg: str | None, short: bool = False) -> str:
    """How far a rank (a ``ranks[]`` entry of the JSON report) got in ``pg`` and in its COLL trace.

    Long: 'waited in SeqNum 39, enqueued up to 41 · AllReduce opCount 0x28 (1024-rank comm)';
    short (a table column): '#39 0x28'. '' when nothing is known.
    """
    seq = (r.get("last_seq") or {}).get(pg) if pg else None
    enq = (r.get("last_enqueued") or {}).get(pg) if pg else None
    coll = r.get("last_coll") or {}
    opcount = coll.get("opcount")
    if short:
        bits = [f"#{seq if seq is not None else enq}" if seq is not None or enq is not None else "",
                f"0x{opcount:x}" if opcount is not None else ""]
        return " ".join(b for b in bits if b)
    bits = []
    if seq is not None:
        bits.append(f"waited in SeqNum {seq}" + (f", enqueued up to {enq}" if enq is not None and enq != seq else ""))
    elif enq is not None:
        bits.append(f"enqueued up to SeqNum {enq}")
    if bits and pg and pg != "default":
        bits[0] += f" of {_pg(pg)}"
    if opcount is not None:
        comm = f" ({coll['comm_ranks']}-rank comm)" if coll.get("comm_ranks") else ""
        bits.append(f"{coll.get('op') or 'collective'} opCount 0x{opcount:x}{comm}")
    return " · ".join(bits)


#: The init stages of ``model.job.STAGES`` in words.
STAGE_WORDS = {"none": "no NCCL init seen", "started": "NCCL started", "bootstrap": "bootstrapping",
               "init_start": "communicator init started", "topology": "topology detected",
               "connected": "peers connected", "init_complete": "communicator ready",
               "running": "reached training", "finished": "finished (communicator destroyed)"}


def stage_label(stage: str) -> str:
    return STAGE_WORDS.get(stage, stage)


def _pg(pg: str) -> str:
    return f"process group {pg[2:]}" if pg.startswith("pg") and pg[2:].isdigit() else f"process group {pg}"
