"""The rank that the job's own hang monitor saw stop.

Training code often watches itself: a heartbeat per rank (a file, a store key) and a monitor (a thread
of rank 0, a process of the job script) that, when one rank's heartbeat goes stale, says so in its own
words ("rank 2 heartbeat stale for 8.5 s (last step 11)", "no progress from rank 1 since 03:29:54")
and then acts: it exits (``os._exit(17)``), raises in rank 0, or sends SIGTERM to every rank. What the
launcher then reports (the monitor's rank exiting 17, every rank's SIGTERM) is the monitor's act; the
cause is the rank it named. Read only when every report names one rank, that rank is in the job and
did not write the report, and no rank failed of its own in another way (evidence.accused).
"""

from __future__ import annotations

import re

from ..events import Event
from ..model import JobModel
from .facts import _per_job, int_in
from .failure_record import Failure


def _named(ev: Event) -> int | None:
    for key in ("stale", "stale_from", "stale_adj"):
        if (r := int_in(ev.get(key))) is not None:
            return r
    return None


@_per_job
def monitor_named(job: JobModel) -> tuple[int, list[Event]] | None:
    """(the rank every stall report names, those reports) or None."""
    reports = job.by_kind("stall_report")
    named = {_named(e) for e in reports}
    if len(named) != 1 or None in named:
        return None
    rank = next(iter(named))
    world = job.ranks_expected or len(job.known_ranks())
    if not 0 <= rank < max(world, 1) or any(getattr(job.rank_of(e), "rank", None) == rank for e in reports):
        return None
    return rank, reports


def _ended_abnormally(job: JobModel) -> bool:
    """A launcher reported failed workers, or a rank timed out: the job did not end well."""
    return bool(job.by_kind("elastic_cfe", "elastic_failed", "gloo_timeout", "torch_wd_timeout"))


def monitor_failures(job: JobModel, out: list[Failure]) -> list[Failure] | None:
    """The named rank's failure first, with the monitor's acts dropped (its rank's exit, a raise that
    repeats the report, the SIGTERMs it sent); None when the monitor names no one or another rank
    failed of its own in another way."""
    named = monitor_named(job)
    if named is None or not (out or _ended_abnormally(job)):
        return None
    rank, reports = named
    says = re.compile(rf"\b(?:[Rr]ank|RANK)[ :=#]{{0,3}}{rank}\b")

    def act(f: Failure) -> bool:
        return f.exit_only or (f.rank != rank and bool(f.events) and bool(says.search(f.events[0].text)))

    if any(not act(f) for f in out if f.rank != rank):
        return None
    saw = f"the job's own hang monitor saw it stop: {str(reports[0].text).strip()[:200]}"
    own = [f for f in out if f.rank == rank and not f.exit_only]
    if own:  # (what then ended it, a SIGTERM or SIGKILL the monitor sent, follows the monitor's word)
        own[0].what, own[0].events = f"{saw}; then {own[0].what}", [*reports[:1], *own[0].events]
        return own
    return [Failure(rank=rank, state=job.known_ranks().get(rank), host=job.rank_hosts.get(rank), category="timeout",
                    what=saw, events=reports[:1])]
