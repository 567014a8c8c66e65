"""A rank's losses of the store that say only that the job was coming apart: the TCPStore's "got 0 bytes" or "Broken
pipe", and the agent's rendezvous exception below them, dated after another rank's collective timeout had ended (that
rank's exit took its node's agent and the store with it). A rank whose only errors are these said nothing of its own:
in a one-rank-per-node hang, the hung node's agent loses the store when the other node's exits."""

from __future__ import annotations

import re

from ..events import Event
from ..model import JobModel
from ..model.relays import AGENT_EXCEPTION
from .causes import _PEER_GONE
from .facts import known_by, record_text
from .timeouts import timeouts_by_pg


def waits_ended(job: JobModel) -> dict[int, float]:
    """rank -> by when its collective timeout had ended (the line's time, else the next dated line's in its file)."""
    out: dict[int, float] = {}
    for pt in timeouts_by_pg(job).values():
        for r in pt.reports:
            for e in r.events:
                t = known_by(job, e)
                if r.rank is not None and t is not None:
                    out[r.rank] = min(out.get(r.rank, t), t)
    return out


def without_late_store_losses(own: list[Event], ended: float | None) -> list[Event]:
    """A rank's own errors without its losses of the store (TCPStore: "got 0 bytes", "Broken pipe") dated after
    another rank's collective timeout had ended: that rank's exit took its node's agent and the store with it, and
    the losses say only that the job was coming apart (an undated one right below a late one is late too)."""
    if ended is None or not own:
        return own
    kept, late_in = [], set()
    for e in own:
        text = record_text(e)
        # (torchrun's agent's own exception below its store losses, in a console it shares with the rank: its
        # rendezvous lost the store too)
        agents = str(e.get("exc_type") or text).startswith(AGENT_EXCEPTION) and e.ts is None and e.file in late_in
        lost = agents or ((e.kind == "torch_store_timeout" or (e.kind == "python_exception" and _STORE.search(text)))
                          and _PEER_GONE.search(text) is not None)
        if lost and ((e.ts is not None and e.ts >= ended) or (e.ts is None and e.file in late_in)):
            late_in.add(e.file)
            continue
        kept.append(e)
    return kept


#: An exception the store's client raised (not gloo's lost peer in a collective).
_STORE = re.compile(r"TCPStore|DistNetworkError|DistStoreError|recvValue|sendBytes|recvBytes")
