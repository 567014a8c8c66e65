"""Ranks whose DDP model check failed: the ranks holding another model than the rest are the cause.

DDP checks at construction that every rank holds the same model (torch/csrc/distributed/c10d/comm.cpp,
``verify_params_across_processes``), in two ways, and the ranks that differ raise:

* the number of parameters, gathered from every rank: each rank that differs from another raises,
  stating its own count and the first rank whose count differs from it::

      DDP expects same model across all ranks, but Rank 0 has 4 params, while rank 2 has inconsistent 6 params.

  With every rank's count known (its own, or a peer's as another rank states it), the ranks in the
  smaller group hold the odd model (an older checkout on one node, another config).
* the parameters' sizes, each rank against the reference rank's (rank 0's, broadcast)::

      [1]: params[3] in this process with sizes [64, 64] appears not to match sizes of the same param in process 0.

  The ranks that raise differ from the reference; the others (silent) match it. When the raisers are
  no more than the ranks that match, they hold the odd model; when all but the reference raise (three
  ranks at least), the reference does.

Anything less clear (two ranks naming each other, counts of some ranks unknown, an even split of
counts) leaves the failures as they are: every raising rank, alike.

The job's own checks do the same in their own words: every rank raising one error (the same message)
that names one rank, "replica consistency check failed at step 9: parameter checksum of rank(s) [2]
differs", accuses that rank (a gathered check every rank runs alike). Only when every rank of the
world raised it, the message names exactly one rank, and that rank is in the job. And when a single
rank failed of its own, with a check of the job's that says which other rank is the trouble ("mean step
time 0.476s over the 0.3s budget; slowest rank 3", "rank 5 is lagging behind"): the rank it names,
with the words that say so next to it (a wait it gave up on: "no shard from ranks [2]"), or with the rank as the
subject of "differs", "disagrees",
"is inconsistent" ("rank 1 differs from rank 0": rank 1; the reference it was compared with is not
accused). And when every rank but one raised one error that names that one rank ("checksum mismatch with rank
0's broadcast"), it is accused: they checked what it sent. A listing of every rank's value ("(rank 0: 9398.48, rank 1: 9398.48, ...)") names no one.

An object collective whose receivers cannot unpickle what the source sent (pickle's "Can't get
attribute 'Vocab' on <module '__main__' ...>": the class is defined only in the sender's branch of
the script): when every rank but one failed so, alike, the one that did not is the sender.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ..model import JobModel
from .facts import VARYING, fmt_ranks, rank_host
from .failure_record import Failure
from .monitor import monitor_failures
from .oddsetting import overridden

_COUNTS = re.compile(r"DDP expects same model across all ranks, but Rank (?P<me>\d{1,7}) has (?P<mine>\d{1,12}) params, "
                     r"while rank (?P<peer>\d{1,7}) has inconsistent (?P<theirs>\d{1,12}) params")
_NAMED = re.compile(r"\b(?:[Rr]anks?|RANKS?)(?:\(s\))?[ :=#]{0,3}(\[[\d, ]{1,200}\]|\d{1,7}\b)")
_CUE = (r"(?:slowest|straggl\w{0,4}|laggard|lagging|behind|stuck|hung|hanging|unresponsive|not responding|stalled|"
        r"diverg\w{0,5}|faulty|offending|heartbeats?)")
#: Words of a wait given up on, before the rank waited for ("no shard from ranks [2]", "still waiting for rank 3").
_WAITED_FOR = r"(?:waiting for|waited for|no (?:[\w-]{1,30} ){0,2}from|nothing from|missing from)"
_BLAMED = re.compile(rf"\b(?:{_CUE}|{_WAITED_FOR})\b[^.;:]{{0,40}}?\b(?:[Rr]anks?|RANKS?)[ :=#]{{0,3}}"
                     rf"(?:\[(\d{{1,7}})\]|(?<!\[)(\d{{1,7}})\b)|"
                     rf"\b(?:[Rr]ank|RANK)[ :=#]{{0,3}}(\d{{1,7}})\b(?: (?:is|was|looks|seems))?(?: the)? {_CUE}\b")
#: Words that accuse the rank named before them only: "rank 1 differs from rank 0" accuses rank 1
#: (rank 0 is the reference it was compared with).
_SUBJECT_CUE = r"(?:differs|disagrees|mismatch(?:es|ed)?|(?:is|was) (?:inconsistent|out of sync|different))"
_ACCUSED = re.compile(rf"\b(?:[Rr]ank|RANK)[ :=#]{{0,3}}(\d{{1,7}})\b {_SUBJECT_CUE}\b")
#: A rank named as the key of a listing of every rank's value ("(rank 0: 9398.48, rank 1: ...)"):
#: a table, not an accusation.
_LISTED = re.compile(r"\s?[:=]\s?[-+]?\d")
#: A collective's source rank as its receivers name it ("payload from src=1 failed validation", "token id ... outside
#: the vocabulary in the (16, 24) batch received from rank 0").
_SENDER = re.compile(r"\b(?:(?:src|source|sender)(?: rank)?[ =:]{1,3}|(?:received|got) from (?:[Rr]ank|RANK)[ :=#]{0,3})"
                     r"(\d{1,7})\b")
_UNPICKLED = re.compile(r"\bCan't get attribute '[\w.]{1,200}' on <module '")
#: Errors decoding serialized data (JSON, pickle, text): what a rank received was cut short or corrupt.
_UNDECODED = re.compile(r"\b(?:json\.decoder\.)?JSONDecodeError: |\b(?:_pickle\.)?UnpicklingError: |\bUnicodeDecodeError: ")
_SIZES = re.compile(r"appears not to match (?:sizes|strides) of the same param in process (?P<ref>\d{1,7})")


def _odd_by_counts(own: dict[int, Failure], world: int) -> list[int] | None:
    counts: dict[int, int] = {}
    for f in own.values():
        for ev in f.events:
            m = _COUNTS.search(ev.text)
            if m is not None:
                counts[int(m.group("me"))] = int(m.group("mine"))
                counts.setdefault(int(m.group("peer")), int(m.group("theirs")))
    if not counts or set(counts) != set(range(world)):
        return None
    groups: dict[int, list[int]] = defaultdict(list)
    for rank, n in counts.items():
        groups[n].append(rank)
    if len(groups) != 2:
        return None
    small, large = sorted(groups.values(), key=len)
    return sorted(small) if len(small) < len(large) else None


def _odd_by_sizes(own: dict[int, Failure], world: int) -> list[int] | None:
    refs = {int(m.group("ref")): r for r, f in own.items() for ev in f.events if (m := _SIZES.search(ev.text))}
    if len(refs) != 1:
        return None
    ref = next(iter(refs))
    raisers = sorted(r for r, f in own.items() if any(_SIZES.search(ev.text) for ev in f.events))
    if ref in raisers:
        return None
    if len(raisers) == world - 1 and world >= 3:
        return [ref]
    return raisers if len(raisers) <= world - len(raisers) else None


def _named_alike(own: dict[int, Failure], world: int) -> tuple[list[int], Failure, str] | None:
    """The one rank that the one error every rank raised names (see module doc)."""
    if world < 3 or set(own) != set(range(world)):
        return None
    texts = {f.events[0].text for f in own.values() if f.events}
    if len(texts) != 1 or len(own) != world:
        return None
    text = next(iter(texts))
    named = {int(n) for m in _NAMED.finditer(text) if not _LISTED.match(text, m.end())
             for n in re.findall(r"\d{1,7}", m.group(1))}
    if len(named) != 1 or not 0 <= next(iter(named)) < world:
        return None
    return [next(iter(named))], own[min(own)], "every rank's own check names it"


def _named_by_the_rest(own: dict[int, Failure], world: int) -> tuple[list[int], Failure, str] | None:
    """The one rank that every other rank's one error names ("rank 2: checksum mismatch with rank 0's broadcast",
    "payload from src=1 failed validation",
    raised by every rank but rank 0): what they all received from it, or checked against it, was wrong, while it
    raised nothing of its own (only lost its peers when they stopped). Three ranks at least, one error (its
    numbers aside), and each message names that one rank besides its writer."""
    if world < 3 or len(own) != world - 1:
        return None
    texts = {r: f.events[0].text for r, f in own.items() if f.events}
    if len(texts) != len(own) or len({VARYING.sub("#", t) for t in texts.values()}) != 1:
        return None
    named: set[int] = set()
    for me, text in texts.items():
        theirs = ({int(n) for m in _NAMED.finditer(text) if not _LISTED.match(text, m.end())
                   for n in re.findall(r"\d{1,7}", m.group(1))} | {int(m.group(1)) for m in _SENDER.finditer(text)}) - {me}
        if len(theirs) != 1:
            return None
        named |= theirs
    if len(named) != 1 or next(iter(named)) in own or not 0 <= next(iter(named)) < world:
        return None
    return sorted(named), own[min(own)], "every other rank's error names it"


def _sent_unpicklable(own: dict[int, Failure], world: int, job: JobModel | None = None
                      ) -> tuple[list[int], Failure, str] | None:
    """The one rank that did not fail, when every other rank failed alike unpickling an object of a
    class their ``__main__`` does not define (pickle's "Can't get attribute 'Vocab' on <module
    '__main__' ...>"): an object collective (``broadcast_object_list``) from that rank, whose script
    defines the class only where it runs (see module doc); or decoding, word for word alike, what they
    received (a JSONDecodeError at one offset: a shard plan it broadcast cut short)."""
    if world < 3 or len(own) != world - 1:
        return None
    texts = {f.events[0].text for f in own.values() if f.events}
    if len(texts) != 1:
        return _failed_alike_on_its_data(own, world, job)
    text = next(iter(texts))
    said = "every other rank failed to unpickle the object it sent them" if _UNPICKLED.search(text) else \
        "every other rank failed alike decoding the data it sent them (the same error at the same place: what they " \
        "all received was cut short or corrupt, and it alone did not receive it)" if _UNDECODED.search(text) else None
    if said is None:
        return _failed_alike_on_its_data(own, world, job)
    sender = set(range(world)) - set(own)
    return (sorted(sender), own[min(own)], said) if len(sender) == 1 else None


def _failed_alike_on_its_data(own: dict[int, Failure], world: int, job: JobModel | None
                              ) -> tuple[list[int], Failure, str] | None:
    """The one rank that did not fail, when every other rank, after training, raised one exception (one type,
    one message but for its numbers), and it raised nothing of its own: they failed
    on what they had in common from it (a shard plan or a sample order it broadcast corrupt, a checkpoint path
    it sent as None). A bug every rank but one hits reads alike, and is rarer mid-run; at start-up (no step
    line yet: one rank creates what the others read) it is the likelier reading, so only after training."""
    firsts = [f.events[0] for f in own.values() if f.events]
    if len(firsts) != len(own) or any(e.kind != "python_exception" for e in firsts):
        return None
    if len({(e.get("exc_type"), _DIGITS.sub("#", str(e.get("msg") or ""))) for e in firsts}) != 1:
        return None
    sender = set(range(world)) - set(own)
    if len(sender) != 1 or job is None:
        return None
    # (read last, only when the rest holds: it walks the failed ranks' events)
    trained = {st.rank for st in job.ranks if st.rank in own and any(e.kind == "train_step" for e in st.events)}
    if not set(own) <= trained:
        return None
    return (sorted(sender), own[min(own)], f"ranks {fmt_ranks(sorted(own))} raised {firsts[0].get('exc_type')} alike after "
            "training, not it; on what they had from it, the likeliest a collective it was the source of "
            "(one error, the same but for its numbers)")


_DIGITS = re.compile(r"\d+")


def _named_by_one(own: dict[int, Failure], world: int) -> tuple[list[int], Failure, str] | None:
    """The other rank that the one rank's own failure calls the trouble (see module doc)."""
    if len(own) != 1:
        return None
    (me, f), = own.items()
    if not f.events or f.events[0].kind not in ("python_exception", "log_error"):
        return None
    text = f.events[0].text
    sent = {int(m.group(1)) for m in _SENDER.finditer(text)}
    named = {int(next(g for g in m.groups() if g)) for m in _BLAMED.finditer(text)} | \
        {int(m.group(1)) for m in _ACCUSED.finditer(text)} | sent
    if len(named) != 1 or me in named or not 0 <= next(iter(named)) < world:
        return None
    said = f"rank {me}'s own check of what it received from it failed" if named == sent else f"rank {me}'s own check names it"
    return [next(iter(named))], f, said


def accused_failures(job: JobModel, out: list[Failure]) -> list[Failure]:
    """The failures of the ranks holding the odd model (see module doc), each as a config failure; the
    other ranks' failures of the check dropped. ``out`` as it is when the logs do not tell."""
    watched = monitor_failures(job, out)
    if watched is not None:  # the job's own hang monitor named the rank it saw stop (evidence.monitor)
        return watched
    own = {f.rank: f for f in out if f.rank is not None and not f.exit_only}
    world = job.ranks_expected
    checked = {r for r, f in own.items() if any(_COUNTS.search(e.text) or _SIZES.search(e.text) for e in f.events)}
    seen = set(job.known_ranks())
    size = world or (len(seen) if seen == set(range(len(seen))) else 0)
    alike = (_named_alike(own, size) or _named_by_the_rest(own, size) or _named_by_one(own, size)
             or _sent_unpicklable(own, size, job)) if not checked else None
    if alike is None and (world is None or world < 2):
        return out
    # (of two ranks whose models differ, each the other's mirror: the one whose own line says it overrode a setting)
    changed = overridden(job, {0, 1}) if checked and world == 2 else None
    if alike is not None:
        (odd, first, said), checked = alike, set(own)
        ev = first.events[0]
        what = f"{said}: {((ev.get('msg') if ev.kind == 'log_error' else None) or ev.text)[:200]}"
    elif checked and (odd := _odd_by_counts(own, world) or ([changed[0]] if changed is not None else None)
                      or _odd_by_sizes(own, world)):
        first = own[min(checked)]
        what = (f"its model differs from the other ranks' (DDP's parameter check at construction: "
                f"{first.events[0].text[:160]})")
        if changed is not None and odd == [changed[0]]:
            what = (f"its model differs from the other rank's, and its own start-up line says it overrode a setting: "
                    f"\"{changed[1][:160]}\" (DDP's parameter check at construction: {first.events[0].text[:120]})")
    else:
        return out
    known = job.known_ranks()
    blamed = [Failure(rank=r, state=known.get(r), host=(own[r].host if r in own else None) or job.rank_hosts.get(r)
                      or rank_host(job, known.get(r)),
                      category="config", what=what, events=[*(own[r].events[:1] if r in own else []), *first.events[:1]],
                      doing=None if r in own else "is the likeliest cause")  # (it failed on nothing of its own)
              for r in odd]
    return blamed + [f for f in out if f.rank not in checked and f.rank not in odd]
