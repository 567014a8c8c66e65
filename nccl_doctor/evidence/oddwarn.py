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
from .facts import _per_job, file_host
from .launcher_facts import error_signature

#: The kinds of a rank's own warning lines (what it said it noticed or did differently).
WARN_KINDS = ("log_warning", "log_carry_on", "numeric_warning", "shape_note", "dtype_note")
#: Lines of a rank's own log that show it logs as the job runs (so a warning of its own would show).
_LOGGING = ("train_step", "train_epoch", "train_phase", "rank_world", *WARN_KINDS)


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
    shapes = {st.rank: {error_signature(e) for e in st.events if e.kind in WARN_KINDS} for st in ranks}
    lone: dict[int, Event] = {}
    for st in ranks:
        others = set().union(*(s for r, s in shapes.items() if r != st.rank))
        warns = [e for e in st.events if e.kind in WARN_KINDS and error_signature(e) not in others
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


#: A whole step skipped, the word right after the skip ("skipping batch at step 14: truncated record", "skipped this
#: iteration"): its forward, backward and every collective of it (not "skipped 3 samples while building batch 12",
#: nor AMP's "loss scale overflow, skipping step": the optimizer step alone, its gradients all-reduced as ever).
_SKIPPED_STEP = re.compile(r"\b(?:[Ss]kip(?:ping|ped|s)?|SKIP(?:PING|PED)?) (?:the |this |that )?(?:batch|iteration)\b")


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
            if e.kind in WARN_KINDS and (m := _SKIPPED.search(e.text)) is not None and _COLLECTIVE.search(e.text, m.end()):
                said.setdefault(st.rank, e)
    if len(said) != 1:
        return None
    rank, ev = next(iter(said.items()))
    return OddWarning(rank, ev, _recent(next(st for st in ranks if st.rank == rank).events, ev))


#: The large collective of a step, whose skip leads into a smaller one: the gradients' sync (a skipped metric or a
#: barrier leads into a larger one instead: then the skipping rank sent, and gloo aborted its peer).
_LARGE = re.compile(r"\b(?:grad(?:ient)?s?|DP|data[- ]parallel) (?:sync|all[-_ ]?reduce)|\b(?:optimi[sz]er|training|train) step\b"
                    r"|\b(?:parameter|weight) update\b")


@_per_job
def skipped_batch(job: JobModel) -> OddWarning | None:
    """The one rank whose own warning says it skipped a whole batch (``_SKIPPED_STEP``); no other rank said so. A
    hint only where ranks are seen at two collectives (desync_hints.skipped_a_batch): a loop may skip a bad batch
    and fetch another for the same step."""
    said: dict[int, Event] = {}
    for st in job.ranks:
        if st.rank is not None:
            for e in st.events:
                if e.kind in WARN_KINDS and _SKIPPED_STEP.search(e.text):
                    said.setdefault(st.rank, e)
    if len(said) != 1:
        return None
    rank, ev = next(iter(said.items()))
    return OddWarning(rank, ev, True)


def unnamed_skip(job: JobModel, aborted: int | None) -> Event | None:
    """A warning that its writer skipped a collective ("overflow in local gradients, skipping the gradient
    all-reduce"), in a node's console whose lines name no rank, where gloo aborted one rank of that node on a size
    mismatch. gloo aborts the receiver of more data than its collective posted, so that rank was in the smaller
    collective; the rank that skipped the large one (a gradient sync, ``_LARGE``) went on into a smaller one: that is
    the aborted rank. Only when no rank's own lines say they skipped one, and every such warning is on that node."""
    if aborted is None or skipped_collective(job) is not None:
        return None
    host = job.rank_hosts.get(aborted)
    if host is None:
        return None
    found = [e for e in job.by_kind(*WARN_KINDS) if e.rank is None and (m := _SKIPPED.search(e.text)) is not None
             and _LARGE.search(e.text, m.end()) and (job.index.get(id(e)) is None or job.index[id(e)].rank is None)]
    if not found or {file_host(job, e.file) for e in found} != {host}:
        return None
    return found[-1]
