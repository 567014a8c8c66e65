"""Ranks that fail alike while their errors name one rank as the odd one: that rank is the cause.

DDP checks at construction that every rank holds the same model (torch/csrc/distributed/c10d/comm.cpp,
``verify_params_across_processes``), and every rank raises when one differs, each naming a peer whose
parameters disagree with its own:

    DDP expects same model across all ranks, but Rank 0 has 4 params, while rank 2 has inconsistent 6 params.
    [1]: params[3] in this process with sizes [64, 64] appears not to match sizes of the same param in process 2.

The rank with another model (an older checkout on one node, another config) is the one every other
rank names; it names someone else. With two ranks each names the other and nothing tells which model
is the odd one: the failures then stay as they are (both ranks, alike).
"""

from __future__ import annotations

import re
from collections import Counter

from ..model import JobModel
from .failure_record import Failure

_NAMES_ODD = re.compile(r"DDP expects same model across all ranks, but Rank \d{1,7} has \d{1,12} params, "
                        r"while rank (?P<a>\d{1,7}) has inconsistent"
                        r"|appears not to match (?:sizes|strides) of the same param in process (?P<b>\d{1,7})")


def _named(f: Failure) -> int | None:
    for ev in f.events:
        m = _NAMES_ODD.search(ev.text)
        if m is not None:
            return int(m.group("a") or m.group("b"))
    return None


def accused_failures(job: JobModel, out: list[Failure]) -> list[Failure]:
    """One failure, the named rank's, when at least two failing ranks name the same rank and no
    failing rank but that one names another (see module doc); else ``out`` as it is."""
    own = {f.rank: f for f in out if f.rank is not None and not f.exit_only}
    names = {r: n for r, f in own.items() if (n := _named(f)) is not None and n != r}
    if not names:
        return out
    odd, votes = Counter(names.values()).most_common(1)[0]
    accusers = sorted(r for r, n in names.items() if n == odd)
    if votes < 2 or any(n != odd for r, n in names.items() if r != odd):
        return out
    src = own.get(odd)
    st = job.known_ranks().get(odd)
    first = own[accusers[0]]
    what = (f"its model differs from every other rank's: DDP's check on ranks {', '.join(map(str, accusers))} "
            f"names rank {odd}'s parameters as inconsistent with theirs")
    events = [*(src.events[:1] if src else []), *first.events[:1]]
    kept = [f for f in out if f.rank not in names and f.rank != odd]
    return [Failure(rank=odd, state=st, host=src.host if src else (st.host if st else None), category="config",
                    what=what, events=events)] + kept
