"""The training step each rank reached, and the one rank that stands apart from all the others.

When every rank prints its step and the job broke (ranks timed out or lost their peers), the ranks
that waited in the same collective printed the same last step. One rank whose last step differs
from all the others' (who agree) is where the job came apart:

* ahead: it went past a collective the others are still waiting in: it skipped that collective, or
  ran another one in its place (a desync, DSY1);
* behind: it stopped before a collective the others entered (a lagging rank, RK3).

The odd rank must have ended in an echo like the others (a timeout or a lost peer; a rank the
launcher killed may have lost its last prints in a buffer), or be behind while a rank that ended as
it did (stopped by the launcher, or with no word) printed further, and every rank of the world must
have printed its steps. Results are cached per job like the facts.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..events import Event, by_place
from ..model import JobModel
from .behind import line_shape
from .endings import endings
from .facts import _per_job, plural
from .launcher_facts import progress_key, progress_text


@dataclass(slots=True, eq=False)
class StepOutlier:
    rank: int
    step: int
    others: int  # the step every other rank reached
    ahead: bool
    reason: str
    events: list[Event] = field(default_factory=list)


@_per_job
def step_outlier(job: JobModel) -> StepOutlier | None:
    ends = endings(job)
    if len(ends) < 3 or any(e.how == "cause" for e in ends.values()):
        return None
    last: dict[int, Event] = {}
    shared = _shared_shapes(ends)
    for rank, end in ends.items():
        steps = [e for e in end.state.events if e.kind == "train_step" and e.get("step") is not None
                 and (line_shape(e.text) in shared or not _EVAL.search(e.text))] if end.state is not None else []
        if len(steps) < 2:
            return None  # every rank must print its steps, or nothing can be compared
        last[rank] = max(steps, key=by_place)
    if len({e.get("epoch") is None for e in last.values()}) > 1:
        return None  # "step 20: train loss (all ranks)" beside "epoch 1 step 20 loss": two counts, not one
    counts = Counter(progress_key(e) for e in last.values())
    if len(counts) != 2:
        return None
    (common, n), (odd_key, m) = counts.most_common()
    if m != 1 or n != len(last) - 1:
        return None
    rank = next(r for r, e in last.items() if progress_key(e) == odd_key)
    ahead = odd_key > common
    how = ends[rank].how
    if not ahead and how in ("timeout", "echo") and any(ends[r].how in ("killed", "none") for r in last if r != rank):
        # Behind, it waited and gave up like the others, while another rank ended with no error at all: that
        # quiet one is whom they waited for (RK2); a print the waiting rank seems to lack can be one
        # glued to another rank's line, or still in a buffer.
        return None
    if how not in ("timeout", "echo") and not (
            not ahead and any(ends[r].how == how for r in last if r != rank)
            and any(e.how in ("timeout", "echo") for e in ends.values())):
        # Stopped by the launcher: a SIGTERM may have cut its last prints from a buffer. Unless it is
        # behind and a rank stopped the same way printed further: the stop did not cut its lines.
        return None
    others = plural(n, "rank")
    peer = next(e for r, e in last.items() if r != rank)
    odd_text, common_text = progress_text(last[rank]), progress_text(peer)
    if ahead:
        reason = (f"its last step line is {odd_text} while the {others} that waited with it all stopped at "
                  f"{common_text}: it went past a collective they were still waiting in (it skipped it, or ran "
                  "another one in its place)")
    else:
        reason = (f"its last step line is {odd_text} while the other {others} all reached {common_text}: it "
                  "stopped before a collective they entered")
    return StepOutlier(rank, odd_key[1], common[1], ahead, reason, [last[rank], peer])


#: An evaluation's own count ("eval step 19: loss ..."), not the training step's.
_EVAL = re.compile(r"\b(?:[Ee]val\w{0,8}|EVAL|[Vv]al(?:id\w{0,7})?|[Tt]est(?:ing)?)\b")


def _shared_shapes(ends: dict) -> set[str]:
    """The shapes of step lines that more than one rank printed. An evaluation's line one rank alone prints
    (rank 0's "eval step 19: loss ... from 4 ranks" as the evaluation's aggregator) counts another loop than
    the training steps every rank prints: its number is no position to compare. (Any other line of one rank's
    own shape is kept: two ranks' prints torn into one line are still their steps.)"""
    seen: Counter = Counter()
    for end in ends.values():
        if end.state is not None:
            seen.update({line_shape(e.text) for e in end.state.events if e.kind == "train_step"})
    return {shape for shape, n in seen.items() if n > 1}


@dataclass(slots=True, eq=False)
class UnevenEpoch:
    rank: int
    total: int  # its steps per epoch
    others: int  # every other rank's
    reason: str
    events: list[Event] = field(default_factory=list)


@_per_job
def uneven_epoch(job: JobModel) -> UnevenEpoch | None:
    """Every rank prints its step with the epoch's length ("step 12/24"), and one rank's epoch has
    another length than all the others' (who agree): uneven inputs (a shorter or longer data shard, a
    sampler given another world), so that rank reaches the epoch's end, and the collectives that
    follow it, at another step than the others. Only with three ranks or more (a majority) and no
    rank failing of its own."""
    ends = endings(job)
    if len(ends) < 3 or any(e.how == "cause" for e in ends.values()):
        return None
    last: dict[int, Event] = {}
    for rank, end in ends.items():
        steps = [e for e in end.state.events if e.kind == "train_step" and isinstance(e.get("total"), int)] \
            if end.state is not None else []
        if not steps:
            return None
        last[rank] = max(steps, key=by_place)
    if len({e.get("epoch") for e in last.values()}) != 1:
        return None  # (epochs of another length are compared only within one epoch)
    counts = Counter(e.get("total") for e in last.values())
    if len(counts) != 2:
        return None
    (common, n), (odd, m) = counts.most_common()
    if m != 1 or n != len(last) - 1:
        return None
    rank = next(r for r, e in last.items() if e.get("total") == odd)
    peer = next(e for r, e in last.items() if r != rank)
    reason = (f"its epoch is {odd} steps long where the other {plural(n, 'rank')} all count {common} "
              f"({progress_text(last[rank])} against {progress_text(peer)}): uneven inputs (its data shard or "
              "sampler gives it another number of batches), so it reached the end of the epoch, and the "
              "collectives that follow it, at another step than the others")
    return UnevenEpoch(rank, odd, common, reason, [last[rank], peer])
