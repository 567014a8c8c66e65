"""What singles out the rank that deviated when the ranks' own lines only say a desync happened (DSY1's medium-
confidence readings, strongest first as DSY1 tries them): a rank that said it skipped a collective, one whose step ran
ahead or that waited at another line of the script, gloo's aborted rank on the node whose unlabelled console says a
rank there skipped a collective, gloo's ring neighbour that logged its deviation, gloo's lone
aborted rank the others left behind, an uneven epoch, a lone warning or setting, an all_gather's short receiver, and
last every rank waiting after one lone warning, or in one broadcast after one rank said it took the data from another.
Each names one rank with its own words as evidence (two ranks at two collectives, or ranks stuck together in one
collective the others passed: none); DSY1 says the others only tell that a desync happened."""

from __future__ import annotations

import re

from ..events import Event
from ..model import JobModel
from . import facts
from .behind import stopped_short_of_output
from .callsites import barrier_alone, branch_alone, odd_call_site, two_sites
from .facts import name_ranks
from .oddsetting import odd_setting
from .oddwarn import WARN_KINDS, odd_warning, skipped_batch, skipped_collective, unnamed_skip
from .ring import ring_deviation, short_receiver
from .statements import TRANSPORT_MISMATCH, lone_abort, mismatch_reports, waited_together
from .steps import step_outlier, uneven_epoch

#: (summary, the ranks at odds with the others, their hosts, evidence, the ranks to blame: the odd
#: ones against a clear majority, none when nothing says which side deviated)
Mismatch = tuple[str, list, list, list, list]


def _quoted(ev: Event) -> str:
    """What a rank's own line said, as a hint quotes it."""
    return str(ev.get("msg") or ev.text)[:160]


def one_rank(job: JobModel, rank: int, summary: str, events: list) -> list[Mismatch]:
    """A hint that names one rank (and its host): the others say a desync happened, this says who."""
    host = job.rank_hosts.get(rank)
    return [(summary, [rank], [host] if host else [], events, [rank])]


def ran_ahead(job: JobModel) -> list[Mismatch]:
    """Every rank printed its step; one went past the step where all the others stopped, waiting."""
    odd = step_outlier(job)
    if odd is None or not odd.ahead:
        return []
    return one_rank(job, odd.rank, f"rank {odd.rank} ran ahead of the others: {odd.reason}", odd.events)


def uneven(job: JobModel) -> list[Mismatch]:
    """Every rank printed its step out of its epoch's length; one rank's epoch had another length."""
    odd = uneven_epoch(job)
    if odd is None:
        return []
    return one_rank(job, odd.rank, f"rank {odd.rank} had uneven inputs: {odd.reason}", odd.events)


def warned(job: JobModel) -> list[Mismatch]:
    """The one rank whose own warning, no other rank's, came right before the desync (evidence.oddwarn)."""
    odd = odd_warning(job)
    if odd is None:
        return []
    text = _quoted(odd.event)
    when = "right before" if odd.recent else "before the desync"
    return one_rank(job, odd.rank, f"rank {odd.rank} alone warned, {when}: \"{text}\"; it likely ran a collective "
                "of another size or skipped one the others made", [odd.event])


def skipped(job: JobModel) -> list[Mismatch]:
    """The one rank that said it skipped a collective (evidence.oddwarn): whatever came after is that skip's."""
    odd = skipped_collective(job)
    if odd is None:
        return []
    text = _quoted(odd.event)
    return one_rank(job, odd.rank, f"rank {odd.rank} alone said it skipped a collective: \"{text}\"; from then on its "
                "collectives were out of step with its peers', and the mismatch the job ended in is that skip's",
                [odd.event])


def skipped_on_its_node(job: JobModel) -> list[Mismatch]:
    """gloo's lone aborted rank, on the node whose console (no rank on its lines) says a rank skipped a collective
    (evidence.oddwarn.unnamed_skip): the aborted receiver was in the smaller collective, where the skip led."""
    a = lone_abort(job)
    ev = unnamed_skip(job, a)
    if ev is None or a is None:
        return []
    torn, _ = mismatch_reports(job)
    return one_rank(job, a, f"gloo aborted rank {a} on more data than its collective expected "
                f"(\"{TRANSPORT_MISMATCH.search(torn[0].text).group(0)}\"): it was in a smaller collective than its "
                f"peer, and its node's console says a rank there skipped one: \"{_quoted(ev)}\"; the rank that "
                f"skipped the larger collective went on into the smaller one, so rank {a} is the one that skipped",
                [ev, torn[0]])


def skipped_a_batch(job: JobModel) -> list[Mismatch]:
    """Ranks left at two sites (``odd_site``), and the one rank that said it skipped a whole batch
    (evidence.oddwarn.skipped_batch): its collectives ran one ahead from then on, and the rank left alone at
    another collective is where that showed, not who caused it."""
    odd = skipped_batch(job) if odd_call_site(job) is not None else None
    if odd is None:
        return []
    return one_rank(job, odd.rank, f"rank {odd.rank} alone said it skipped a batch: \"{_quoted(odd.event)}\"; from "
                "then on its collectives ran one ahead of its peers', and the rank left waiting at another collective "
                "than the others is where that showed", [odd.event])


def ring(job: JobModel) -> list[Mismatch]:
    """gloo's ring puts the deviation between the aborted rank and the neighbour it receives from; of the two, the
    one that logged something of its own just before (evidence.ring)."""
    dev = ring_deviation(job)
    if dev is None:
        return []
    torn, _ = mismatch_reports(job)
    text = _quoted(dev.event)
    pair = f"rank {dev.aborted} and rank {dev.neighbour}" if dev.neighbour != dev.aborted else f"rank {dev.aborted}"
    return one_rank(job, dev.rank, f"gloo aborted rank {dev.aborted} on data of another size than its collective expected "
                f"(\"{TRANSPORT_MISMATCH.search(torn[0].text).group(0)}\"): gloo's ring receives from one neighbour, "
                f"so the ranks that disagreed are {pair}, and rank {dev.rank} alone of them logged, just before: "
                f"\"{text}\"; it likely ran a collective of another size or skipped one", [dev.event, torn[0]])


def left_behind(job: JobModel) -> list[Mismatch]:
    """gloo aborted one rank of three or more, and every other rank wrote one more line of the job's own than it
    did (evidence.behind): they went on past the point where it stopped, so the collective it died in completed
    for them (a broadcast's other receivers, or a later collective it was not in); they agree, it is the odd one."""
    a, world = lone_abort(job), job.ranks_expected
    odd = stopped_short_of_output(job) if a is not None and world is not None and world >= 3 else None
    if odd is None or odd.rank != a:
        return []
    torn, _ = mismatch_reports(job)
    return one_rank(job, a, f"gloo aborted rank {a} on data of another size than its collective expected "
                f"(\"{TRANSPORT_MISMATCH.search(torn[0].text).group(0)}\"), and every other rank went on past the "
                f"point where it stopped (its last line \"{odd.last[:100]}\", theirs \"{odd.others[:100]}\"): they "
                f"agreed with each other; rank {a} ran a collective of another size or kind", [*odd.events, torn[0]])


def short(job: JobModel) -> list[Mismatch]:
    """The aborted receiver of an all_gather or broadcast, whose own tensor was the smaller (evidence.ring)."""
    odd = short_receiver(job)
    if odd is None:
        return []
    torn, _ = mismatch_reports(job)
    why = (f"the root's data was what every other receiver posted, so rank {odd.rank}'s buffer was short" if odd.alone
           else "the likelier reading is that its own tensor was the smaller (a short last batch, a shard run out, "
           "padding to its own longest instead of the global); else the peer it received from sent a larger one")
    return one_rank(job, odd.rank, f"gloo aborted rank {odd.rank} in {odd.op}, which sizes each rank's receive buffers by "
                f"its own tensor: it posted {odd.posted} bytes and was sent {odd.sent}; {why}", torn[:1])


def all_waited_after_a_lone_warning(job: JobModel) -> list[Mismatch]:
    """Every rank of the job timed out in one group (none missing, none elsewhere), and one
    rank alone had warned of something right before (evidence.oddwarn): nobody hung outside the collective, so
    the ranks passed it different sizes or calls (gloo's reduce_scatter of unequal chunks waits, it does not
    abort); the lone warning is the likely deviation. Medium confidence."""
    groups = facts.timeouts_by_pg(job)
    world = job.ranks_expected
    if len(groups) != 1 or world is None or world < 3:
        return []
    pt = next(iter(groups.values()))
    odd = odd_warning(job) if pt.ranks == list(range(world)) else None
    if odd is None:
        return []
    text = _quoted(odd.event)
    return one_rank(job, odd.rank, f"all {world} ranks timed out in {facts.waited_in(pt)}, none missing, and rank "
                f"{odd.rank} alone warned right before: \"{text}\"; it likely passed the collective another size or "
                "skipped one the others made", [odd.event, *pt.lead_events()[:2]])


#: A rank's own word that it takes a broadcast's data from another rank ("taking zone weights from rank 1", "using
#: rank 2's copy", "src=1"): it named another root than its peers' broadcast.
_FROM_RANK = re.compile(r"\b(?:from|of) rank (\d{1,7})\b|\brank (\d{1,7})'s (?:copy|weights|data|values|state)\b"
                        r"|\bsrc(?:_rank)?\s?=\s?(\d{1,7})\b")


def another_root(job: JobModel) -> list[Mismatch]:
    """Every rank of the job timed out in one broadcast, none missing, and one rank alone said right before that it
    took the data from another rank (t440_bcast: "taking zone weights from rank 1"): it called the broadcast with
    another root than its peers, so each side waited for the other to send. Two ranks too: the root is a word of
    its own, not a lone warning among many."""
    groups = facts.timeouts_by_pg(job)
    world = job.ranks_expected
    if len(groups) != 1 or not world or world < 2:
        return []
    pt = next(iter(groups.values()))
    if pt.ranks != list(range(world)) or facts.waited_in(pt) != "broadcast":
        return []
    said: dict[int, Event] = {}
    for st in job.ranks:
        if st.rank is None:
            continue
        for e in st.events:
            m = _FROM_RANK.search(e.text) if e.kind in WARN_KINDS else None
            if m is not None and int(next(g for g in m.groups() if g is not None)) != st.rank:
                said.setdefault(st.rank, e)
    if len(said) != 1:
        return []
    rank, ev = next(iter(said.items()))
    return one_rank(job, rank, f"all {world} ranks timed out in one broadcast, none missing, and rank {rank} alone said "
                    f"it took the data from another rank: \"{_quoted(ev)}\"; it called the broadcast with another root "
                    "than its peers, and each side waited for the other to send", [ev, *pt.lead_events()[:2]])


def set_otherwise(job: JobModel) -> list[Mismatch]:
    """The one rank whose start-up setting differs from every other rank's (evidence.oddsetting)."""
    odd = odd_setting(job)
    if odd is None:
        return []
    return one_rank(job, odd.rank, f"rank {odd.rank} alone started with {odd.said()}: it was built or configured "
                "otherwise, and likely ran a collective of another size or skipped one the others made",
                [odd.event, odd.usual])


def odd_site(job: JobModel) -> list[Mismatch]:
    """Every rank that says where it waited gave up at one line of its script; one at another."""
    odd = odd_call_site(job)
    if odd is None:
        return []
    return one_rank(job, odd.rank, f"rank {odd.rank} timed out waiting at {odd.site} while {name_ranks(odd.majority)} "
                f"gave up at {odd.others}: it was in another collective than the others (a rank-dependent code "
                "path, or another number of elements or calls)", odd.events)


def apart(job: JobModel) -> list[Mismatch]:
    """The two ranks waited in two collectives of the script: a desync, naming no rank."""
    two = two_sites(job)
    if two is None:
        return []
    said = " and ".join(f"rank {rank} at {site}" for rank, site in two.sides)
    return [(f"the two ranks waited in two different collectives, {said}: one took a code path the other did "
             "not (a collective in a rank-dependent branch, or one skipped), or one collective's sizes differed and "
             "the side with the smaller buffer went on; nothing in the logs says which strayed", [], [], two.events, [])]


def alone_in_a_branch(job: JobModel) -> list[Mismatch]:
    """Of two ranks at two collectives, the one that waited right after an action only it took (callsites.branch_alone)."""
    odd = branch_alone(job)
    if odd is None:
        return []
    return one_rank(job, odd.rank, f"rank {odd.rank} waited at {odd.site} right after \"{_quoted(odd.said)}\", a "
                    f"{odd.said.get('phase') or 'phase'} line rank {odd.other} never wrote, while rank {odd.other} had "
                    f"gone on to its next step's collective at {odd.other_site}: a collective in a branch only rank "
                    f"{odd.rank} took (a barrier or an all_reduce inside `if rank == {odd.rank}:`)", odd.events)


def alone_in_a_barrier(job: JobModel) -> list[Mismatch]:
    """Of two ranks at two collectives, the one waiting in a barrier while the other was still in its training step's
    gradient all-reduce (callsites.barrier_alone)."""
    odd = barrier_alone(job)
    if odd is None:
        return []
    return one_rank(job, odd.rank, f"rank {odd.rank} waited in a barrier at {odd.site} while rank {odd.other} was still "
                    f"in its training step's gradient all-reduce (under backward, at {odd.other_site}): rank {odd.rank} "
                    "left the training loop early (its batches ran out, it ended its epoch after an error it handled) or "
                    f"took a branch with a barrier rank {odd.other} did not (a rank that skipped a barrier every other "
                    "rank calls would read the same, and is rarer)", odd.events)


def stuck_together(job: JobModel) -> list[Mismatch]:
    """The ranks a monitored barrier names timed out together at one collective the others had passed (the
    statements' ``waited_together``): they disagreed in it, and nothing says which of them strayed."""
    stuck = waited_together(job)
    if stuck is None:
        return []
    ranks, site, events = stuck
    passed = sorted({st.rank for st in job.ranks if st.rank is not None} - set(ranks))
    return [(f"{name_ranks(ranks)} timed out together in one collective at {site} that {name_ranks(passed)} had "
             "passed (a monitored barrier names them as missing, yet each waited in that collective): they disagreed "
             "in it (a broadcast's root, a size), and nothing in the logs says which of them strayed", [], [], events, [])]
