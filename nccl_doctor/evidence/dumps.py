"""What only flight-recorder dumps show, summarised over a job model for the rules (RK2, RK3, DSY1, MN3, MN4).

``dump_facts(job)`` reads the ``fr_*`` events (see ``flightrec.events``) and returns:

* ``positions``: the collective each rank is in (its last one) per process group;
* ``mismatches``: the first sequence number of a process group at which ranks issued different
  collectives (op, then sizes, then dtypes), the majority and the odd ranks, and whether the odd
  rank *skipped* the majority's collective (its op is the one that follows it);
* ``lags``: ranks that never entered a collective other ranks of the group entered;
* ``missing``: ranks of the job that left no dump while others did (a dead rank writes none).

``culprits``/``summary`` give the dumps' own answer to "which rank, which collective"; the rules
cite the facts' ``evidence`` events (dump path and entry position) and copy their ``summary``.
Sequence numbers compare only within one process group (``model.pg_key``).

Run ``python -m nccl_doctor.evidence.dumps_cli PATH...`` to print the facts of a folder of dumps.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..events import Event
from ..model.job import pg_key

#: Ops whose input shapes must be equal on every rank of the group.
SAME_SHAPE_OPS = frozenset({
    "all_reduce", "allreduce", "broadcast", "reduce", "all_gather", "allgather", "_allgather_base",
    "all_gather_into_tensor", "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor",
    "allreduce_coalesced", "all_reduce_coalesced", "barrier",
})
#: More missing dumps than this share of the job look like an incomplete collection, not dead ranks.
MISSING_SHARE = 0.5


@dataclass(slots=True)
class Position:
    """Where one rank is in one process group: its last recorded collective."""

    rank: int
    pg: str
    pg_label: str
    seq: int | None
    op: str | None
    event: Event | None  # the fr_collective entry (None: nothing recorded in this group)
    pg_event: Event
    largest_before: int | None = None  # largest numel_in of this rank's earlier collectives in the group

    @property
    def what(self) -> str:
        return f"{self.op} #{self.seq}" if self.seq is not None else "no collective"


@dataclass(slots=True)
class GroupFact:
    """What a fact about one process group carries for a rule: where, what it says, its evidence."""

    pg: str  # model.pg_key of the group
    pg_label: str
    seq: int
    summary: str  # a sentence naming the ranks ("rank 2 skipped all_reduce #10 of ...")
    reason: str  # the same without the subject, for "rank 2 lagged behind: <reason>"
    confidence: str
    evidence: list[Event]  # dump entries (file = dump path, line = entry position)
    first_seen: float | None  # creation time of the earliest entry cited


@dataclass(slots=True)
class Mismatch(GroupFact):
    """Ranks issued different collectives at one sequence number of one process group (DSY1)."""

    what: str  # "op" | "size" | "dtype"
    expected: str  # the majority's collective, described
    expected_op: str | None
    majority: list[int]
    odd: dict[int, str]  # rank -> its collective, described
    skipped: bool  # the odd rank's op is the one that follows the majority's: it skipped it

    @property
    def ranks(self) -> list[int]:
        return sorted(self.odd) if self.majority else sorted(set(self.odd) | set(self.majority))


@dataclass(slots=True)
class Lag(GroupFact):
    """Ranks whose last collective in a group is below one that other ranks entered (RK3).
    ``seq`` is the collective they never entered."""

    op: str | None
    behind: list[int]
    entered: list[int]
    behind_at: dict[int, int]  # rank -> its last seq in the group

    @property
    def ranks(self) -> list[int]:
        return list(self.behind)


@dataclass(slots=True)
class MissingDumps:
    """Ranks of the job without a dump while other ranks wrote one (RK2). ``ranks`` lists them all
    when few are missing, only the first six when most are (``count`` says how many; confidence low)."""

    ranks: list[int]
    world: int
    world_from: str
    present: list[int]
    evidence: list[Event]
    summary: str
    reason: str
    confidence: str
    count: int = 0


@dataclass(slots=True)
class DumpFacts:
    dumps: dict[int, Event] = field(default_factory=dict)  # rank -> fr_dump event
    world: int | None = None
    positions: dict[int, list[Position]] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    lags: list[Lag] = field(default_factory=list)
    missing: MissingDumps | None = None
    culprits: list[int] = field(default_factory=list)
    summary: str | None = None

    def position(self, rank: int, pg: str = "default") -> Position | None:
        return next((p for p in self.positions.get(rank, []) if p.pg == pg), None)

    def waiting(self, pg: str = "default") -> dict[str, list[int]]:
        """``"all_reduce #10"`` -> ranks whose last collective in the group it is."""
        out: dict[str, list[int]] = defaultdict(list)
        for rank in sorted(self.positions):
            p = self.position(rank, pg)
            if p is not None:
                out[p.what].append(rank)
        return dict(out)


# --------------------------------------------------------------------------------------- helpers
def ranks_text(ranks: list[int], total: int | None = None) -> str:
    """``ranks 0, 2, 3``; long lists show their first six and a count (``total``: how many there are
    when ``ranks`` holds only the first of them)."""
    ranks = sorted(ranks)
    total = max(total or 0, len(ranks))
    if total > 8:
        return f"ranks {', '.join(map(str, ranks[:6]))}, ... ({total} ranks)"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _pg_label(ev: Event) -> str:
    key = pg_key(ev)
    if key == "default":
        return "the default group"
    desc = ev.get("pg_desc")
    return f"group {key}" + (f" ({desc})" if desc and desc not in ("undefined", key) else "")


def _sig(ev: Event, what: str) -> Any:
    op = ev.get("op")
    if what == "op":
        return op
    if what == "size":
        return (op, tuple(tuple(s) for s in ev.get("input_sizes") or ())) if op in SAME_SHAPE_OPS else (op,)
    return (op, tuple(sorted(set(ev.get("input_dtypes") or ()))) if ev.get("input_dtypes") else ())


def describe(ev: Event, shapes: bool = True) -> str:
    """``all_reduce #10 ([1024] Float, at train.py:83 (step))``."""
    bits = []
    if shapes:
        sizes = ev.get("input_sizes") or []
        if sizes:
            bits.append(" ".join("[" + ", ".join(map(str, s)) + "]" for s in sizes[:3]) + (" ..." if len(sizes) > 3 else ""))
        dts = sorted(set(ev.get("input_dtypes") or ()))
        if dts:
            bits[-1:] = [((bits[-1] + " ") if bits else "") + ",".join(dts)]
    if ev.get("frame"):
        bits.append(f"at {ev.get('frame')}")
    return f"{ev.get('op')} #{ev.get('seq')}" + (f" ({', '.join(bits)})" if bits else "")


def _majority(groups: dict[Any, list[int]]) -> Any | None:
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    if len(ranked) == 1 or len(ranked[0][1]) > len(ranked[1][1]):
        return ranked[0][0]
    return None


# ---------------------------------------------------------------------------------------- facts
_CACHE: dict[str, Any] = {}


def dump_facts(job) -> DumpFacts:
    """The facts of the job's flight-recorder events (empty facts when there are none). Cached per job."""
    if _CACHE.get("job") is job and _CACHE.get("n") == len(job.events):
        return _CACHE["facts"]
    facts = facts_from_events(job.events, ranks_expected=getattr(job, "ranks_expected", None))
    _CACHE.update(job=job, n=len(job.events), facts=facts)
    return facts


def facts_from_events(events: list[Event], ranks_expected: int | None = None) -> DumpFacts:
    facts = DumpFacts()
    pgs: dict[int, dict[str, Event]] = defaultdict(dict)  # rank -> pg -> fr_pg
    entries: dict[str, dict[int, dict[int, Event]]] = defaultdict(lambda: defaultdict(dict))  # pg -> rank -> seq -> ev
    for ev in events:
        if ev.rank is None:
            continue
        if ev.kind == "fr_dump":
            facts.dumps[ev.rank] = ev
        elif ev.kind == "fr_pg":
            pgs[ev.rank][pg_key(ev)] = ev
        elif ev.kind == "fr_collective" and ev.get("seq") is not None:
            entries[pg_key(ev)][ev.rank][ev.get("seq")] = ev
    if not facts.dumps:
        return facts
    facts.world, world_from = _world(facts, pgs, ranks_expected)
    for rank in sorted(pgs):
        for key, pev in sorted(pgs[rank].items()):
            seq = pev.get("last_seq")
            ev = entries[key][rank].get(seq) if seq is not None else None
            earlier = [e.get("numel_in") or 0 for s, e in entries[key][rank].items() if seq is not None and s < seq]
            facts.positions.setdefault(rank, []).append(Position(
                rank=rank, pg=key, pg_label=_pg_label(pev), seq=seq, op=pev.get("last_op"), event=ev, pg_event=pev,
                largest_before=max(earlier) if earlier else None))
    for key in sorted({k for r in pgs.values() for k in r}, key=lambda k: (k != "default", k)):
        members = {r: p[key] for r, p in pgs.items() if key in p}
        mm = _first_mismatch(key, entries[key], facts)
        if mm is not None:
            facts.mismatches.append(mm)
        lag = _lag(key, members, entries[key], facts)
        if lag is not None:
            facts.lags.append(lag)
    facts.missing = _missing(facts, world_from)
    _headline(facts)
    return facts


def _world(facts: DumpFacts, pgs: dict[int, dict[str, Event]], ranks_expected: int | None) -> tuple[int | None, str]:
    cands: list[tuple[int, str]] = []
    for ev in facts.dumps.values():
        if isinstance(ev.get("world_size"), int):
            cands.append((ev.get("world_size"), "the dumps' process-group config"))
    if isinstance(ranks_expected, int) and ranks_expected > 0:
        cands.append((ranks_expected, "the logs"))
    if not cands:
        return None, ""
    return max(cands)


def _first_mismatch(key: str, by_rank: dict[int, dict[int, Event]], facts: DumpFacts) -> Mismatch | None:
    if len(by_rank) < 2:
        return None
    seqs = sorted({s for m in by_rank.values() for s in m})
    for seq in seqs:
        here = {r: m[seq] for r, m in by_rank.items() if seq in m}
        if len(here) < 2:
            continue
        for what in ("op", "size", "dtype"):
            groups: dict[Any, list[int]] = defaultdict(list)
            for r, ev in here.items():
                groups[_sig(ev, what)].append(r)
            if len(groups) > 1:
                return _mismatch(key, seq, what, groups, here, by_rank)
    return None


def _mismatch(key: str, seq: int, what: str, groups: dict[Any, list[int]], here: dict[int, Event],
              by_rank: dict[int, dict[int, Event]]) -> Mismatch:
    major = _majority(groups)
    majority = sorted(groups[major]) if major is not None else []
    odd_ranks = sorted(r for r in here if r not in majority)
    ref = here[majority[0]] if majority else None
    odd = {r: describe(here[r]) for r in odd_ranks}
    skipped = False
    if ref is not None:
        # Skipped rather than swapped: the odd rank's collective is the one the majority issues next
        # (at seq+1, or after an earlier occurrence of the same collective in this group).
        nxt = _majority_next(seq, ref, majority, by_rank)
        skipped = nxt is not None and all(_sig(here[r], "size") == _sig(nxt, "size") for r in odd_ranks)
    label = _pg_label(here[odd_ranks[0]] if odd_ranks else next(iter(here.values())))
    evidence = [here[r] for r in odd_ranks[:3]] + ([ref] if ref is not None else [])
    first = min((e.ts for e in evidence if e.ts is not None), default=None)
    if ref is not None:
        kind = {"op": "a different collective", "size": "different tensor sizes", "dtype": "different dtypes"}[what]
        odd_desc = "; ".join(f"{ranks_text([r])} issued {odd[r]}" for r in odd_ranks[:3])
        if skipped and what == "op":
            reason = (f"skipped {describe(ref)} of {label}: {odd_desc} instead, while {ranks_text(majority)} "
                      f"issued {ref.get('op')} #{seq}")
        else:
            reason = (f"issued {kind} at #{seq} of {label}: {odd_desc}, while {ranks_text(majority)} issued "
                      f"{describe(ref)}")
        summary = f"{ranks_text(odd_ranks)} {reason}"
        confidence = "high" if len(majority) >= 2 else "medium"
    else:
        parts = "; ".join(f"{ranks_text(rs)} issued {describe(here[rs[0]])}" for rs in
                          sorted(groups.values(), key=lambda rs: rs[0]))
        summary = reason = f"ranks disagree on collective #{seq} of {label} ({what}): {parts}"
        confidence = "medium"
    return Mismatch(pg=key, pg_label=label, seq=seq, what=what, expected=describe(ref) if ref is not None else "",
                    majority=majority, odd=odd, skipped=skipped, expected_op=ref.get("op") if ref is not None else None,
                    evidence=evidence, summary=summary, reason=reason, confidence=confidence, first_seen=first)


def _majority_next(seq: int, ref: Event, majority: list[int], by_rank: dict[int, dict[int, Event]]) -> Event | None:
    """The collective the majority issues after ``ref`` (known at seq+1, or from an earlier cycle)."""
    for r in majority:
        if seq + 1 in by_rank[r]:
            return by_rank[r][seq + 1]
    r = majority[0]
    sig = _sig(ref, "size")
    for s in sorted((s for s in by_rank[r] if s < seq), reverse=True):
        if _sig(by_rank[r][s], "size") == sig and s + 1 in by_rank[r]:
            return by_rank[r][s + 1]
    return None


def _lag(key: str, members: dict[int, Event], by_rank: dict[int, dict[int, Event]], facts: DumpFacts) -> Lag | None:
    last = {r: (p.get("last_seq") or 0) for r, p in members.items()}
    if len(last) < 2:
        return None
    lo, hi = min(last.values()), max(last.values())
    if lo == hi:
        return None
    seq = lo + 1
    behind = sorted(r for r, s in last.items() if s == lo)
    entered = sorted(r for r, s in last.items() if s >= seq)
    at = [by_rank[r][seq] for r in entered if seq in by_rank.get(r, {})]
    groups: dict[Any, list[Event]] = defaultdict(list)
    for ev in at:
        groups[_sig(ev, "size")].append(ev)
    ref = max(groups.values(), key=len)[0] if groups else None
    op = ref.get("op") if ref is not None else None
    label = _pg_label(members[behind[0]])
    own = [by_rank[r][lo] for r in behind if lo in by_rank.get(r, {})]
    evidence = own[:3] + ([ref] if ref is not None else [members[behind[0]]] if not own else [])
    what = describe(ref) if ref is not None else f"collective #{seq}"
    where = "; ".join(f"{ranks_text(rs)} in {w}" for w, rs in _waiting_in(key, entered, facts).items())
    last_txt = (f"its last collective there is {describe(own[0], shapes=False)}" if own and len(behind) == 1
                else f"their last collective there is #{lo}" if lo else "no collective recorded there")
    reason = f"never entered {what} of {label} that {ranks_text(entered)} entered ({last_txt}); the others wait: {where}"
    summary = f"{ranks_text(behind)} {reason}"
    # Ranks ahead whose last collective completed may just have been dumped later in a running job.
    ahead_last = [p.event for r in entered for p in facts.positions.get(r, []) if p.pg == key and p.event is not None]
    confidence = "low" if ahead_last and all(e.get("completed") is True for e in ahead_last) else "high"
    first = min((e.ts for e in evidence if e.ts is not None), default=None)
    return Lag(pg=key, pg_label=label, seq=seq, op=op, behind=behind, entered=entered,
               behind_at={r: last[r] for r in behind}, evidence=evidence, summary=summary, reason=reason,
               confidence=confidence, first_seen=first)


def _waiting_in(key: str, ranks: list[int], facts: DumpFacts) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for r in ranks:
        p = facts.position(r, key)
        if p is not None:
            out[p.what].append(r)
    return dict(out)


def _missing(facts: DumpFacts, world_from: str) -> MissingDumps | None:
    world = facts.world
    present = sorted(facts.dumps)
    if not world or not present:
        return None
    inside = {r for r in facts.dumps if 0 <= r < world}
    count = world - len(inside)
    if not count:
        return None
    where = "; ".join(f"{ranks_text(rs)} wait in {w}" for w, rs in facts.waiting("default").items())
    many = count > MISSING_SHARE * world
    # The world size is a claim: listed one by one only when few are missing (then at most as many as
    # the dumps present); else the first few and a count, whatever the claim.
    missing = [r for r in range(world) if r not in inside] if not many else \
        list(islice((r for r in range(world) if r not in inside), 6))
    reason = (f"left no flight-recorder dump (world of {world}) while {ranks_text(present)} did"
              + (f" ({where})" if where else "")
              + (": were all dumps collected?" if many else ": a rank that died (killed, crashed, OOM) writes none"))
    return MissingDumps(ranks=missing, world=world, world_from=world_from, present=present,
                        evidence=[facts.dumps[r] for r in present[:3]], summary=f"{ranks_text(missing, count)} {reason}",
                        reason=reason, confidence="low" if many else "medium", count=count)


def _headline(facts: DumpFacts) -> None:
    """The dumps' own answer: an op/size/dtype mismatch with a clear majority names the odd rank; a
    missing dump (few missing) names the dead rank, the others' lag being its consequence; else the
    lagging rank."""
    mm = next((m for m in facts.mismatches if m.majority), None)
    lag = next((lg for lg in facts.lags if lg.confidence != "low"), None)
    miss = facts.missing if facts.missing is not None and facts.missing.confidence != "low" else None
    pick: Any = mm or miss or lag or (facts.mismatches[0] if facts.mismatches else None)
    if pick is None:
        return
    facts.culprits = list(pick.ranks)
    facts.summary = pick.summary
