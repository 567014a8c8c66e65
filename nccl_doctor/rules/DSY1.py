"""DSY1 collective desync: ranks issued different collectives at the same SeqNum of one group.

Evidence, strongest first: flight-recorder dumps in which ranks recorded different collectives at
the same sequence number of a group (op, then tensor sizes, then dtypes; a rank whose collective is
the one the others issue next *skipped* theirs); the watchdog lines of two ranks in the same process
group and SeqNum disagree on OpType or on the element count; a desync report says a rank "is running
inconsistent collective"; or ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` raised "Detected mismatch between
collectives on ranks". That is an application bug (a rank-dependent code path), not a slow rank: a
mismatch the dumps show against a clear majority blames the odd rank(s).

Element counts are only compared where every rank passes the same count: point-to-point ops,
gather/scatter (root and non-root differ), all-to-all and coalesced groups (``NumelIn=-1``) are
left out.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from ..evidence import desync_hints as hints
from ..evidence import facts, frtrace
from ..evidence.desync_hints import Mismatch
from ..evidence.dumps import Mismatch as DumpMismatch
from ..evidence.dumps import dump_facts
from ..evidence.facts import name_ranks, pg_label, plural
from ..evidence.ring import ring_pair
from ..evidence.statements import (
    TRANSPORT_MISMATCH,
    aborted_in_tables,
    lone_abort,
    mismatch_apart,
    mismatch_reports,
    mismatch_sender,
    mismatch_spared,
    subgroup_waits,
)
from ..findings import Finding
from ..model import JobModel
from .base import Rule

#: Ops whose element counts legitimately differ across ranks (or are not counts at all).
_UNEVEN = ("SEND", "RECV", "RECVANYSOURCE", "GATHER", "SCATTER", "ALLTOALL", "ALLTOALL_BASE", "COALESCED",
           "ALLGATHER_COALESCED", "ALLREDUCE_COALESCED", "REDUCESCATTER_COALESCED", "_ALLREDUCE_SPARSE",
           "UNKNOWN")
_P2P = {"SEND", "RECV", "RECVANYSOURCE"}


def check(job: JobModel, rule: Rule) -> list[Finding]:
    dumps = dump_facts(job).mismatches
    shown = {(m.pg, m.seq) for m in dumps}
    analyzed = frtrace.culprits(job)
    found = [_from_dump(job, m) for m in dumps] + [_from_analyzer(job, c) for c in analyzed] + \
        _watchdog_mismatch(job, shown) + _reported_mismatch(job) + _group_creation(job)
    confidence = dumps[0].confidence if dumps else "high"
    # a rank that said it skipped a collective; else, weakest: a rank whose step ran ahead, or that waited elsewhere
    ahead = hints.skipped(job) or hints.skipped_a_batch(job) or (hints.ran_ahead(job) + hints.odd_site(job)) \
        or hints.alone_in_a_branch(job) or hints.alone_in_a_barrier(job)
    if not found and not ahead:  # and weaker: every rank waited in one collective, none missing, one had warned alone
        found = hints.all_waited_after_a_lone_warning(job) or hints.another_root(job) or hints.apart(job) \
            or hints.stuck_together(job)
        confidence = "medium" if found else confidence
    if not ahead and found and not any(m[4] for m in found):  # of gloo's two ranks, the one that logged its deviation
        ahead = hints.skipped_on_its_node(job) or hints.ring(job)
    if not ahead and found and not any(m[4] for m in found):  # or gloo's lone aborted rank, which the others left behind
        ahead = hints.left_behind(job)
    if not ahead and found:  # a desync is seen: a rank whose epoch has another length than the others' ran it
        ahead = hints.uneven(job)
    if not ahead and found and not any(m[4] for m in found):  # or the one rank that warned of something just before
        ahead = hints.warned(job) or hints.set_otherwise(job)
    if not ahead and found and not any(m[4] for m in found):  # or, in an all_gather or broadcast, the short receiver
        ahead = hints.short(job)
    if ahead and not dumps and not any(m[4] for m in found):
        found, confidence = ahead + found, "medium"  # the others say a desync happened, not who
    if not found:
        return []
    summary, ranks, hosts, evidence, blame = found[0]
    if len(found) > 1:
        summary += f" (and {len(found) - 1} more mismatch{'es' if len(found) > 2 else ''})"
    lead = dumps[0] if dumps else None
    # The dumps against a clear majority name the odd rank(s): the root cause, whoever exited first.
    if lead is not None:
        blame = ranks if lead.majority and lead.confidence == "high" else []
    return [rule.finding(summary, confidence=confidence, ranks=ranks,
                         hosts=hosts, evidence=evidence, first_seen=facts.first_ts(evidence),
                         blame_ranks=blame)]  # not its host: other ranks there did nothing wrong


def _from_dump(job: JobModel, m: DumpMismatch) -> Mismatch:
    known = job.known_ranks()
    return m.summary, list(m.ranks), [known[r].host for r in m.ranks if r in known], list(m.evidence), []


def _from_analyzer(job: JobModel, c: frtrace.Named) -> Mismatch:
    """The analyzer's culprits, blamed when they differ from a majority of the group."""
    known = job.known_ranks()
    return (c.reason, list(c.ranks), [known[r].host for r in c.ranks if r in known], list(c.events),
            list(c.ranks) if c.majority else [])


def _watchdog_mismatch(job: JobModel, shown: set[tuple[str, int]]) -> list[Mismatch]:
    """Watchdog lines that disagree (``shown``: (group, SeqNum) the dumps already tell)."""
    out = []
    for pg, pt in facts.timeouts_by_pg(job).items():
        by_seq: dict[int, list[facts.RankTimeout]] = defaultdict(list)
        for r in pt.reports:
            if r.seq is not None and r.op and (pg, r.seq) not in shown:
                by_seq[r.seq].append(r)
        for seq, reps in sorted(by_seq.items()):
            ops = {r.op for r in reps}
            if len(ops) > 1 and not ops <= _P2P:
                odd = _odd_ones(reps, lambda r: r.op)
                detail = "; ".join(f"{op} on {name_ranks(r.rank for r in reps if r.op == op) or '?'}"
                                   for op in sorted(ops))
                out.append((f"ranks issued different collectives at SeqNum {seq} of {pg_label(pg, pt.desc)}: "
                            f"{detail}", [r.rank for r in odd], [r.host for r in odd], _lead(odd, reps), []))
                continue
            op = next(iter(ops))
            if op in _UNEVEN:
                continue
            sized = [r for r in reps if r.numel_in is not None and r.numel_in >= 0]
            if len({r.numel_in for r in sized}) > 1:
                odd = _odd_ones(sized, lambda r: r.numel_in)
                detail = "; ".join(f"NumelIn={i} on {name_ranks(r.rank for r in sized if r.numel_in == i) or '?'}"
                                   for i in sorted({r.numel_in for r in sized}))
                out.append((f"ranks called {op} at SeqNum {seq} of {pg_label(pg, pt.desc)} with different sizes: "
                            f"{detail}", [r.rank for r in odd], [r.host for r in odd], _lead(odd, reps), []))
    return out


def _odd_ones(reps: list[facts.RankTimeout], value) -> list[facts.RankTimeout]:
    """The ranks that disagree with the majority (all of them when there is no majority)."""
    counts = Counter(value(r) for r in reps)
    (top, n), *rest = counts.most_common()
    if rest and n == rest[0][1]:
        return reps
    return [r for r in reps if value(r) != top]


def _lead(odd: list[facts.RankTimeout], reps: list[facts.RankTimeout]) -> list:
    """The odd ranks' watchdog lines first, then one of the majority's for comparison."""
    others = [r for r in reps if r not in odd][:1]
    return [next((e for e in r.events if e.kind == "torch_wd_timeout"), r.events[0]) for r in odd[:7] + others]


def _group_creation(job: JobModel) -> list[Mismatch]:
    """Ranks that timed out creating a process group, each waiting in the store for a member of a
    group its peers were not creating: the ranks called ``new_group`` (or built a device mesh) in
    another order or number. Who deviated is not said (the keys number groups and ranks within them)."""
    waits = subgroup_waits(job)
    if len(waits) < 2:
        return []
    evs = [waits[r][0] for r in sorted(waits)]
    keys = sorted({key for _ev, key in waits.values()})
    return [(f"{plural(len(waits), 'rank')} timed out creating process groups, waiting in the store for "
             f"{', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}: the ranks created their groups (new_group, "
             "a device mesh) in another order or number", [], [], evs[:4], [])]


def _reported_mismatch(job: JobModel) -> list[Mismatch]:
    """torch's own checks: the desync report and TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints."""
    out = []
    inconsistent = [e for e in job.by_kind("torch_desync_rank") if e.get("state") == "inconsistent"]
    if inconsistent:
        ranks = [e.get("rank") for e in inconsistent]
        detail = inconsistent[0].get("detail") or ""
        out.append((f"the desync report says {name_ranks(ranks)} ran an inconsistent collective"
                    + (f": {detail}" if detail else ""), ranks, [facts.host_of(job, e) for e in inconsistent],
                    inconsistent[:8], ranks))  # torch names them: "the ranks that caused the desync"
    strays = job.by_kind("torch_not_in_group")
    if strays:
        ranks = sorted({r for r in (facts.int_in(e.get("rank")) for e in strays) if r is not None})  # (the warning's)
        ops = sorted({str(e.get("op")) for e in strays})
        out.append((f"{name_ranks(ranks) or 'a rank'} ran {', '.join(ops)} on a process group it does not belong "
                    "to (torch warns and skips the call): that group's members waited for a collective it never "
                    "joined", ranks, [facts.host_of(job, e) for e in strays[:1]], strays[:4], ranks))
    torn, fingerprints = mismatch_reports(job)
    sender = mismatch_sender(job)
    back = lone_abort(job) if torn and sender is not None else None
    said = TRANSPORT_MISMATCH.search(torn[0].text).group(0) if torn else ""  # gloo's own words, quoted in each branch
    if back is not None and sender[0] > back:
        # Sent back down the pipeline (the sender after the receiver in rank order: a gradient for the activation
        # the receiver sent forward). What a later stage sends back is shaped like the buffer it received into;
        # gloo takes a message shorter than the buffer without a word, so a stage that sent too little forward is
        # only caught here, by its own receive: the receiver's tensor was the odd one (t423_wrongsize).
        rank, frame = sender
        st = job.known_ranks().get(back)
        out.append((f"gloo aborted rank {back} on more data than it posted (\"{said}\") "
                    f"from rank {rank}, after it in the pipeline, sending back (its traceback stops in {frame.get('op')}): "
                    f"what a later stage sends back is shaped like the buffer it received into, and gloo takes a message "
                    f"shorter than the buffer without a word, so rank {back}'s own tensor sent forward was the short one",
                    [back], [st.host if st is not None else facts.host_of(job, torn[0])], [*torn[:2], frame], [back]))
    elif torn and sender is not None:
        # Point-to-point: the one rank whose traceback stops in send sent it (see mismatch_sender).
        rank, frame = sender
        who = _receivers(job, torn)
        out.append((f"gloo on {who} received data of another size than it posted "
                    f"(\"{said}\"), and rank {rank} is the one rank "
                    f"that was sending point-to-point when the receiver died (its traceback stops in "
                    f"{frame.get('op')}): it sent a tensor of another size than its peer expected",
                    [rank], [facts.host_of(job, frame)], [*torn[:2], frame], [rank]))
    elif torn and (spared := mismatch_spared(job)) is not None:
        # Every rank but one aborted on the data it received: the one they have in common sent it.
        rank, receivers, cut = spared
        st = job.known_ranks().get(rank)
        also = f" and {name_ranks(cut)} lost them in the same broadcast" if cut else ""
        out.append((f"gloo aborted {name_ranks(receivers)} on data of another size than their collective expected "
                    f"(\"{said}\"){also}, every rank but rank {rank}: the "
                    f"data came from the one rank they have in common, which ran a collective of another size or kind",
                    [rank], [st.host if st is not None else None], torn[:4], [rank]))
    elif torn and (apart := mismatch_apart(job)) is not None:
        # One rank aborted on its scalar collective while every other rank was in the gradient all-reduce.
        rank, evs = apart
        st = job.known_ranks().get(rank)
        out.append((f"gloo aborted rank {rank} on data of another size than its collective expected "
                    f"(\"{said}\": it posted a scalar) while every other "
                    "rank that says where it was lost its peer in the gradient all-reduce of one backward call: rank "
                    f"{rank} was alone in another collective (an extra one, or one its peers had left behind)",
                    [rank], [st.host if st is not None else None], evs, [rank]))
    elif torn:
        # The receiver cannot tell which side deviated: name no culprit, only what happened.
        who = _receivers(job, torn)
        ring = ring_pair(job)
        # (a subgroup's ring is not the world's, and two ranks are their own pair: said only as far as it goes)
        between = f"; if that collective spanned every rank, gloo's ring puts the difference between rank {ring[0]} and " \
            f"the neighbour it receives from, rank {ring[1]}, and nothing either logged says which of the two" \
            if ring is not None and (job.ranks_expected or 0) > 2 else ""
        out.append((f"gloo on {who} received data of another size than its collective expected "
                    f"(\"{said}\"): the ranks ran different "
                    f"collectives{between}", [], [], torn[:4], []))
    if fingerprints:
        out.append(_fingerprint_mismatch(job, fingerprints))
    return out


def _receivers(job: JobModel, torn: list) -> str:
    """Who gloo aborted: the ranks its reports name; else, for one report, the one rank a launcher's table says
    died by SIGABRT (gloo's enforce ends in abort); else "a process"."""
    named = name_ranks(facts.global_rank(job, e) for e in torn)
    aborted = aborted_in_tables(job)
    return named or (name_ranks(aborted) if len(torn) == 1 and len(aborted) == 1 else "a process")


#: "Rank 2 is running collective: CollectiveFingerPrint(SequenceNumber=34, OpType=ALLREDUCE, TensorShape=[4], ..."
_FP = re.compile(r"Rank (?P<me>\d{1,7}) is running collective: CollectiveFingerPrint\((?P<mine>[^()]{0,400})"
                 r"[^\n]{0,4000}?, but Rank (?P<other>\d{1,7}) is running collective")
_FP_FIELD = re.compile(r"(OpType|TensorShape)=(\[[^\]]{0,200}\]|\w{1,40})")
_FP_DTYPE = re.compile(r"TensorDtypes=(\w{1,40})")
#: Floating dtypes a training step's collectives run in; float64 ("Double") is none of torch's defaults.
_TRAINING_FLOATS = frozenset(("Float", "BFloat16", "Half"))


def _fingerprint_mismatch(job: JobModel, reports: list) -> Mismatch:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: each rank compares its collective's fingerprint with the
    others' and names one rank that differs. The ranks whose own collective differs from what the
    clear majority runs deviated; failing that, the rank the other reporters all name."""
    mine: dict[int, str] = {}
    named: dict[int, int] = {}
    dtypes: dict[int, str] = {}
    for e in reports:
        m = _FP.search(" ".join(str(v) for v in (e.get("msg"), e.get("exc")) if v) or e.text)
        if m is None:
            continue
        me = int(m.group("me"))
        mine.setdefault(me, " ".join(f"{k}={v}" for k, v in _FP_FIELD.findall(m.group("mine"))))
        named.setdefault(me, int(m.group("other")))
        if (d := _FP_DTYPE.search(m.group("mine"))) is not None:
            dtypes.setdefault(me, d.group(1))
    blame: list[int] = []
    counts = Counter(mine.values())
    if len(counts) > 1:
        (top, n), (_, second) = counts.most_common(2)
        if n > second and n * 2 > len(mine):
            blame = sorted(r for r, fp in mine.items() if fp != top)
    if not blame:
        pointed = Counter(o for me, o in named.items() if o != me)
        if pointed:
            (rank, n), *rest = pointed.most_common()
            if n >= 2 and (not rest or n > rest[0][1]) and n >= len(named) - 1:
                blame = [rank]
    doubled = _the_float64_one(mine, dtypes) if not blame else None
    if doubled is not None:
        rank, other = doubled
        known = job.known_ranks()
        return (f"TORCH_DISTRIBUTED_DEBUG=DETAIL detected a mismatch between collectives that differ only in dtype: "
                f"rank {rank} ran it on a float64 (Double) tensor where the others' is {other}; float64 is none of "
                f"torch's training dtypes (numpy's default and Python floats bring it in): rank {rank}'s tensor is the "
                "odd one", [rank], [known[rank].host] if rank in known else [],
                sorted(reports, key=lambda e: facts.global_rank(job, e) != rank)[:4], [rank])
    ranks = blame or sorted(mine)
    if blame:
        odd = mine.get(blame[0]) or "another collective"
        usual = counts.most_common(1)[0][0] if counts else "the others' collective"
        summary = (f"TORCH_DISTRIBUTED_DEBUG=DETAIL detected a mismatch between collectives: {name_ranks(blame)} "
                   f"ran {odd} while the others ran {usual}" if odd != usual or not counts else
                   f"TORCH_DISTRIBUTED_DEBUG=DETAIL detected a mismatch between collectives: the other ranks all "
                   f"name {name_ranks(blame)}")
    else:
        summary = ("TORCH_DISTRIBUTED_DEBUG=DETAIL detected a mismatch between collectives"
                   + (f" on {name_ranks(ranks)}" if ranks else ""))
    lead = sorted(reports, key=lambda e: facts.global_rank(job, e) not in blame)[:4]
    known = job.known_ranks()
    # Without a majority or a rank the others all name, the reporters only say a mismatch happened:
    # the finding names no rank (each reporter names itself and one other; that singles out nobody).
    return (summary, blame, [known[r].host for r in blame if r in known], lead, blame)


def _the_float64_one(mine: dict[int, str], dtypes: dict[int, str]) -> tuple[int, str] | None:
    """(rank, the others' dtype) when every reporter ran the same op and shape, one rank's tensor is float64 and every
    other's one training float dtype (t424_double, t432_unlab_r1: two ranks, no majority to go by)."""
    if len(set(mine.values())) != 1 or len(dtypes) != len(mine) or len(dtypes) < 2:
        return None
    doubles = [r for r, d in dtypes.items() if d == "Double"]
    others = {d for d in dtypes.values() if d != "Double"}
    if len(doubles) != 1 or len(others) != 1 or not others <= _TRAINING_FLOATS:
        return None
    return doubles[0], next(iter(others))
