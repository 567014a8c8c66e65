"""Of the two ranks a gloo size mismatch lies between, the one that logged a deviation of its own.

gloo's enforce ("op.preamble.length <= op.nbytes. 2020 vs 32. Received data size doesn't match expected
size") fires in the *receiving* process, which cannot tell whether it or the peer that sent the data ran
the odd collective. gloo's ring algorithms fix that peer: allreduce's ring receives from the next rank
(``(rank + 1) % size``), allgather's from the previous one. So the rank that deviated is the aborted rank
or that neighbour, and nothing in gloo's words says which. (Measured with torch 2.13's gloo, 3 and 4 ranks, one
rank's tensor of another size: in all_reduce the deviator is aborted when its tensor is the smaller, else the rank
before it is; in all_gather the deviator, else the rank after it.)

What an expert reads then is which of the two logged something of its own just before: a failure it
handled and skipped ("step 12 failed on rank 2: cannot decode sample 195 ..., skipping batch"), a warning
that it did something otherwise ("quick eval at step 10: no usable held-out record, skipped"). A record
that quotes a lost peer or a timeout is an echo of the abort; a record that every rank prints is no
deviation; one printed before the rank's first step line is start-up noise. Exactly one of the two
candidates with such a record, written before the other's first record, is named (a hint, medium
confidence in DSY1), never a rank outside the pair.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel, RankState
from .causes import _PEER_GONE
from .facts import _per_job, record_text
from .launcher_facts import error_signature, is_after
from .statements import _SIZES, BROADCASTS, TRANSPORT_MISMATCH, lone_abort, mismatch_reports
from .timeouts import c10d_call

#: A rank's own records that can say it did something the others did not.
_RECORDS = ("log_warning", "log_carry_on", "numeric_warning", "log_error", "dtype_note")
#: gloo's allgather ring receives from the previous rank; its allreduce ring (and DDP's buckets) from the next.
_GATHERS = frozenset(("all_gather", "all_gather_into_tensor", "all_gather_object", "_all_gather_base"))
#: What a record says when it only reports the abort, a lost peer, a wait given up or the launcher's stop.
RECORD_ECHO = re.compile(r"[Tt]imed out|[Tt]imeout|SIGTERM|[Ss]ignal 15|[Cc]onnection (?:closed|reset|refused)|"
                   r"[Ss]ocket closed|terminate called|gloo::EnforceNotMet")


@dataclass(slots=True)
class Deviation:
    rank: int
    aborted: int
    neighbour: int
    event: Event


@_per_job
def ring_pair(job: JobModel) -> tuple[int, int] | None:
    """(the rank gloo aborted alone, the ring neighbour it receives from): the two between which the sizes
    differed (the previous rank in a gather, the next in an all_reduce's ring)."""
    world = job.ranks_expected
    a = lone_abort(job)
    if a is None or world is None or not 0 <= a < world:
        return None
    calls = {c10d_call(st) for st in job.ranks if st.rank is not None and st.rank != a} - {None}
    step = -1 if calls and calls <= _GATHERS else 1
    return a, (a + step) % world


@_per_job
def ring_deviation(job: JobModel) -> Deviation | None:
    ring = ring_pair(job)
    if ring is None:
        return None
    a, n = ring
    states = {st.rank: st for st in job.ranks if st.rank is not None}
    pair = (a, n) if n != a else (a,)
    own = {r: rec for r in pair if (rec := _own_record(states.get(r))) is not None}
    if not own:
        return None
    # The first of the two to log one, before anything the other logged; no rank outside the pair had said the
    # same by then (the other's records after it are its echoes: "step 15 failed on rank 3: Connection reset").
    rank, ev = min(own.items(), key=lambda kv: sum(is_after(kv[1], e) for e in own.values()))
    other = next((r for r in pair if r != rank), None)
    if other is not None and states.get(other) is not None and any(
            e.kind in _RECORDS and not is_after(e, ev) for e in states[other].events):
        return None
    sig = error_signature(ev)
    for r, st in states.items():
        if r not in pair and any(e.kind in _RECORDS and error_signature(e) == sig and not is_after(e, ev)
                                 for e in st.events):
            return None
    return Deviation(rank, a, n, ev)


def _own_record(st: RankState | None) -> Event | None:
    """The rank's first record of something of its own during training: not an echo, not at start-up."""
    if st is None:
        return None
    first_step = next((e for e in st.events if e.kind == "train_step"), None)
    for e in st.events:
        if e.kind not in _RECORDS or (first_step is not None and not is_after(e, first_step)):
            continue
        text = record_text(e)
        if RECORD_ECHO.search(text) or _PEER_GONE.search(text) or TRANSPORT_MISMATCH.search(text):
            continue
        return e
    return None


#: The collectives in which a receive buffer is sized by the receiving rank's own tensor.
_OWN_SIZED = _GATHERS | BROADCASTS


@dataclass(slots=True)
class ShortReceiver:
    rank: int
    op: str
    sent: int
    posted: int
    alone: bool  # a broadcast receiver alone aborted among several: the root's data was what the others expected


@_per_job
def short_receiver(job: JobModel) -> ShortReceiver | None:
    """The aborted rank of a gloo all_gather or broadcast, taken for the one whose tensor was the odd one.

    In these collectives a rank sizes its receive buffers by its own tensor, and gloo aborts a receiver
    sent more than it posted. So either the aborted rank's tensor was the smaller, or the peer it
    received from had the larger (the rank before it in all_gather's ring, the root in a broadcast).
    The first is what such a mistake usually is: a short last batch, a validation shard run out,
    padding to its own longest sequence instead of the global one (never longer than the global).
    Of a broadcast with three ranks or more, a single aborted receiver settles it: a root sending
    more than everyone posted would have aborted every receiver. Every rank that says where it was
    must be in one such collective. A message exactly twice what was posted is left alone: a dtype twice as wide
    (numpy's float64 beside torch's float32) is the usual cause, and makes the deviator's tensor the larger."""
    torn, _ = mismatch_reports(job)
    world = job.ranks_expected
    a = lone_abort(job)
    sizes = next((m for e in torn if (m := _SIZES.search(e.text)) is not None), None)
    if a is None or world is None or world < 2 or sizes is None:
        return None
    calls = {c10d_call(st) for st in job.ranks if st.rank is not None and st.rank != a}
    calls.discard(None)
    if len(calls) != 1 or not calls <= _OWN_SIZED:
        return None
    op = next(iter(calls))
    if op.startswith("broadcast") and world < 3:
        return None  # two ranks: the root's tensor the larger (a config only its node reads) is as likely
    if int(sizes.group(1)) == 2 * int(sizes.group(2)):
        return None  # exactly twice: a dtype twice as wide (numpy's float64 beside float32), the deviator the larger
    return ShortReceiver(a, op, int(sizes.group(1)), int(sizes.group(2)),
                         op.startswith("broadcast") and world >= 3)
