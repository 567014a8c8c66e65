"""A non-finite value spread by the collectives (the catalogue's "rank failed first" seen through an
all-reduce): every rank fails alike at once (a NaN loss, NaN weights, a non-finite gradient norm)
because the gradient all-reduce averaged one rank's NaN/inf into everyone's. Those failures echo one
value; the rank it came from is the one whose own numbers went bad first: its loss non-finite, or
far off the others', at a step where theirs were fine, or its own warning (a script's check, numpy's
RuntimeWarning, a local overflow) that no other rank printed. When nothing singles a rank out the
failures are left as they are: every rank failing alike reads the same whether one rank's value was
spread or every rank's own data was bad."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel
from .facts import fmt_ranks, global_rank, plural
from .failure_record import Failure

#: A failure about a non-finite value.
NUMERIC = re.compile(r"(?i)\bnan\b|\binf\b|non-?finite|not finite|overflow|loss scale reached minimum|FloatingPointError")
#: A step line's loss ("loss 2.3204", "loss: nan", "loss=inf").
_LOSS = re.compile(r"(?i)\bloss[:=]? {0,3}(?P<v>[-+]?(?:nan|inf|\d{1,30}(?:\.\d{1,30})?(?:e[-+]?\d{1,3})?))(?![\w.])")
#: A loss this many times the other ranks' (their median) at the same step is off.
FAR = 10.0


@dataclass(slots=True)
class Spread:
    """The ranks that failed alike on a non-finite value, and the rank it came from."""

    failed: list[int]
    source: int
    events: list[Event]  # the source's first signs
    what: str
    sent: bool = False  # the value reached the others as the source's own (a broadcast), not through an all-reduce


def numeric_spread(job: JobModel, failed: dict[int, str]) -> Spread | None:
    """``failed``: rank -> what its own (non-echo) failure was. None unless the ranks that failed all
    failed on a non-finite value and one rank's own numbers went bad before any other's: two ranks or
    more, or one that stopped on another rank's value ("a process reported a non-finite loss", the
    others exiting with it)."""
    if not failed or not all(NUMERIC.search(what) for what in failed.values()):
        return None
    first: dict[int, tuple[float, int, list[Event], str]] = {}  # rank -> (step or inf, order, signs, why)
    for r, (step, e, why) in _off_losses(job).items():
        first[r] = (step, 0, [e], why)
    warned: dict[int, list[Event]] = defaultdict(list)
    for e in job.by_kind("numeric_warning"):
        r = global_rank(job, e)
        if r is not None:
            warned[r].append(e)
    if len(warned) == 1:  # a warning only one rank printed (the others ran the same code)
        (r, evs), = warned.items()
        if r not in first:
            first[r] = (math.inf, 1, evs[:2], f"its own warning, which no other rank printed: {evs[0].text[:160]}")
    relayed = _relayed_from(job)
    if relayed is not None and relayed[0] not in first:
        r, evs, why = relayed
        first[r] = (math.inf, 2, evs, why)
    if not first:
        return None
    best = min(first.values(), key=lambda v: v[:2])
    sources = [r for r, v in first.items() if v[:2] == best[:2]]
    if len(sources) != 1 or (len(failed) == 1 and sources[0] in failed):
        return None
    return Spread(sorted(failed), sources[0], best[2], best[3], sent=best[1] == 2)


#: A record's word for where its value came from ("validation from rank 2: ... nan").
_FROM_RANK = re.compile(r"\bfrom [Rr]ank[ :=#]?(\d{1,7})\b")


def _relayed_from(job: JobModel) -> tuple[int, list[Event], str] | None:
    """(rank, its first record of a non-finite value and a receiver's, why) when one rank's first such record
    is its own ("epoch 1 validation: ... bare nan; broadcast to 3 ranks") and every other rank's first says it
    had the value from that rank ("validation from rank 2: ... bare nan"): a value it computed and sent, not an
    all-reduce's; else None."""
    firsts: dict[int, tuple[tuple, Event]] = {}
    for e in job.by_kind("nonfinite_value"):
        r = global_rank(job, e)
        key = (e.ts is None, e.ts or 0.0, e.line)
        if r is not None and (r not in firsts or key < firsts[r][0]):
            firsts[r] = (key, e)
    named = {r: int(m.group(1)) for r, (_k, e) in firsts.items() if (m := _FROM_RANK.search(e.text))}
    own = [r for r in firsts if r not in named]
    if len(firsts) < 2 or len(own) != 1 or set(named.values()) != {own[0]}:
        return None
    src = own[0]
    said, heard = firsts[src][1], firsts[min(named)][1]
    return src, [said, heard], (f"its own record shows the non-finite value first (\"{said.text[:120]}\"), and "
                                f"{plural(len(named), 'rank')} say they had it from rank {src}")


def _off_losses(job: JobModel) -> dict[int, tuple[int, Event, str]]:
    """rank -> (the first step where its loss was non-finite or FAR off while another rank's was fine
    there, that step line, why)."""
    by_step: dict[int, dict[int, tuple[float, str, Event]]] = defaultdict(dict)  # step -> rank -> (loss, as written, line)
    for e in job.by_kind("train_step"):
        r, step = global_rank(job, e), e.get("step")
        m = _LOSS.search(e.text) if isinstance(step, int) and r is not None else None
        if m is not None:
            v = float(m.group("v"))
            seen = by_step[step].get(r)
            if seen is None or (math.isfinite(seen[0]) and not math.isfinite(v)):  # (a bar's later redraw of one step)
                by_step[step][r] = (v, m.group("v"), e)
    out: dict[int, tuple[int, Event, str]] = {}
    for step in sorted(by_step):
        row = by_step[step]
        for r, (v, said, e) in row.items():
            fine = sorted(abs(w) for q, (w, _s, _e) in row.items() if q != r and math.isfinite(w))
            if r in out or not fine:
                continue
            usual = fine[len(fine) // 2]
            if not math.isfinite(v):
                out[r] = (step, e, f"its loss was {said} at step {step} "
                                   f"while {'another rank' if len(fine) == 1 else 'the others'} had a finite one")
            elif abs(v) > FAR * max(usual, 1e-6):
                out[r] = (step, e, f"its loss at step {step} was {v:.4g}, over {FAR:.0f}x the others' ({usual:.4g})")
    return out


def spread_what(spread: Spread) -> str:
    """The source rank's failure, as the report says it."""
    n = len(spread.failed)
    if n == 1:  # the one rank that stopped the job on it, another rank's value
        return (f"a non-finite value that rank {spread.failed[0]} stopped the job on came from rank "
                f"{spread.source}: {spread.what}")
    carrier = "reached" if spread.sent else "the all-reduce spread to"
    return (f"a non-finite value that {carrier} {n} ranks ({fmt_ranks(spread.failed)}), which "
            f"failed alike: it came from rank {spread.source}: {spread.what}")


def spread_failures(job: JobModel, out: list[Failure]) -> list[Failure]:
    """Ranks failing alike on a non-finite value (see numerics): one failure, the source rank's (its
    first signs as evidence). When nothing tells whose value it was, the failures stay as they are:
    every rank's own data may have been bad as well (every replica's batch holding an inf)."""
    own = {f.rank: f for f in out if f.rank is not None and not f.exit_only and f.category != "network"}
    spread = numeric_spread(job, {r: f.what for r, f in own.items()})
    if spread is None:
        return out
    echo = {id(f) for f in own.values()}
    rest = [f for f in out if id(f) not in echo and not (f.exit_only and f.rank in own)]
    first = min(own.values(), key=lambda f: (f.ts is None, f.ts or 0.0, f.events[0].line))
    src = own.get(spread.source)
    st = job.known_ranks().get(spread.source)
    return [Failure(rank=spread.source, state=st, host=src.host if src else (st.host if st else None),
                    category="exception", what=spread_what(spread),
                    events=[*spread.events, *(src.events[:1] if src else first.events[:1])])] + rest
