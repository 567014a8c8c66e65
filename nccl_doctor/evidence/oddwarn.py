"""The one rank that warned of something no other rank did, right before the job came apart.

In a desync the receivers' errors say only that the ranks ran different collectives (gloo: "Received
data size doesn't match expected size"), never who deviated. What an expert looks for then is the
rank whose own log says it did something the others did not, just before: "short record in shard
... using a partial batch", "Non-finite input in batch 12, skipping", "quick eval at step 10: no usable
held-out record, skipped". That warning is the likely deviation; a hint, not a statement (DSY1 names
the rank at medium confidence, as for uneven epochs).

Only with three ranks or more known, when other ranks log as well (a job that logs on rank 0 alone
makes any of its warnings lone), when exactly one rank has such a warning, and when it came at most
one step line of its own before that rank stopped. With two ranks nothing is odd against a majority:
only a warning that the rank skipped something ("non-finite loss (nan), skipping batch"), whenever it
came (a skipped step puts its collectives one behind the other's until they part at the epoch's end).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel
from .facts import _per_job
from .launcher_facts import error_signature

_WARNS = ("log_warning", "log_carry_on", "numeric_warning", "shape_note", "dtype_note")
#: Lines of a rank's own log that show it logs as the job runs (so a warning of its own would show).
_LOGGING = ("train_step", "train_epoch", "train_phase", "rank_world", *_WARNS)


@dataclass(slots=True)
class OddWarning:
    rank: int
    event: Event
    recent: bool = True  # at most one step line of its own after it


def _recent(events: list[Event], ev: Event) -> bool:
    """At most one of the rank's own step lines follows the warning in its file (another file of the rank, its
    --log-dir copy beside the console, has its own order)."""
    return sum(1 for e in events if e.kind == "train_step" and e.file == ev.file and e.line > ev.line) <= 1


#: A warning that its rank skipped what the others did (a batch, a step, an update).
_SKIPPED = re.compile(r"\b(?:[Ss]kip(?:ping|ped|s)?|SKIP(?:PING|PED)?)\b")


@_per_job
def odd_warning(job: JobModel) -> OddWarning | None:
    ranks = [st for st in job.ranks if st.rank is not None]
    two = len(ranks) == 2 and job.ranks_expected == 2
    if len(ranks) < 3 and not two:
        return None
    shapes = {st.rank: {error_signature(e) for e in st.events if e.kind in _WARNS} for st in ranks}
    lone: dict[int, Event] = {}
    for st in ranks:
        others = set().union(*(s for r, s in shapes.items() if r != st.rank))
        warns = [e for e in st.events if e.kind in _WARNS and error_signature(e) not in others
                 and (_SKIPPED.search(e.text) is not None if two else _recent(st.events, e))]
        if warns:
            lone[st.rank] = warns[-1]
    if len(lone) != 1:
        return None
    rank, ev = next(iter(lone.items()))
    if not any(e.kind in _LOGGING for st in ranks if st.rank != rank for e in st.events):
        return None  # the others never log: a warning of theirs would not show either
    st = next(st for st in ranks if st.rank == rank)
    return OddWarning(rank, ev, _recent(st.events, ev))


#: A collective named after a skip ("skipping gradient all-reduce and optimizer step", "skipped the barrier"), or
#: the step or update whose gradient sync it skipped with it ("found inf/nan in local gradients, skipping optimizer
#: step": a rank alone skipping a step the others took; where every rank skips alike, no rank says it alone).
_COLLECTIVE = re.compile(r"\b(?:all[-_ ]?reduce|allreduce|all[-_ ]?gather|allgather|reduce[-_ ]?scatter|broadcast|barrier"
                         r"|collective|(?:grad(?:ient)?s?|DP|data[- ]parallel) (?:sync|all[-_ ]?reduce)"
                         r"|(?:optimi[sz]er|training|train) step|(?:parameter |weight )?update)\b")


@_per_job
def skipped_collective(job: JobModel) -> OddWarning | None:
    """The one rank whose own warning says it skipped a collective ("grad norm is nan, skipping gradient all-reduce
    and optimizer step"), whenever it came: from then on its collectives ran one behind its peers' (or ahead), so
    the mismatch the job ended in, however late and wherever the others waited, is that skip's. Two ranks or more;
    no other rank said it skipped one."""
    ranks = [st for st in job.ranks if st.rank is not None]
    if len(ranks) < 2:
        return None
    said: dict[int, Event] = {}
    for st in ranks:
        for e in st.events:
            if e.kind in _WARNS and (m := _SKIPPED.search(e.text)) is not None and _COLLECTIVE.search(e.text, m.end()):
                said.setdefault(st.rank, e)
    if len(said) != 1:
        return None
    rank, ev = next(iter(said.items()))
    return OddWarning(rank, ev, _recent(next(st for st in ranks if st.rank == rank).events, ev))
