"""MN5: an elastic (torchrun / torchelastic) restart that restored no training state.

torchrun's ``--max-restarts`` re-forms the worker group and re-runs the script from the top; unless
the script loads a checkpoint, training starts again at step 0. Evidence, in order of strength:

* a restart: ``Worker group FAILED. k/N attempts left; will restart worker group``, a rendezvous
  block with ``restart_count=k`` (k > 0), ``attempt_k`` paths (reply files, log directories);
* after it, progress counters that went back below the level reached before, with no
  checkpoint-load line in between (a reset), or nothing after it that shows a resume;
* the same error in several attempts: a crash loop, where restarting cannot help.

A restart after which training resumes from a loaded checkpoint (or keeps counting up) is not a
fault: at most an info finding. ``restart_count=0`` is the first start, not a restart.
"""

from __future__ import annotations

from collections import defaultdict

from ..events import Event, by_place
from ..evidence.facts import Failure, classify, failures, first_ts
from ..evidence.launcher_facts import (
    error_signature,
    ranks_text,
    short,
    step_of,
    strip_attempt,
)
from ..evidence.nccl_facts import int_in, ranks_hosts
from ..evidence.restarts import Restarts, segment_restarts
from ..model import JobModel
from .base import Rule

#: Errors whose repetition across attempts means a crash loop (a deterministic failure). Signals
#: are left out: every attempt's teardown repeats them whatever the cause.
_LOOP_ERROR_KINDS = ("python_exception", "cuda_oom", "cuda_error", "torch_nccl_error", "nccl_cuda_fail",
                     "nccl_alloc_fail", "nccl_dup_gpu", "nccl_shm")
def _stream(ev: Event) -> tuple:
    """One worker's progress across attempts: its log path without ``attempt_N``, and its rank."""
    who = ev.rank if ev.rank is not None else ev.local_rank
    return strip_attempt(ev.file), who


def _resets(job: JobModel, rs: Restarts) -> tuple[list[tuple[Event, Event]], list[Event], list[Event]]:
    """Progress after each restart: (before, after) pairs that went back without a checkpoint load,
    checkpoint loads seen after a restart, and the first progress line of each stream after one."""
    loads = [e for e in job.by_kind("checkpoint_load") if rs.gen_of.get(id(e), 0) > 0]
    # A checkpoint is often announced by rank 0 only: a load in a generation restores all of it.
    loaded_gens = {rs.gen_of[id(e)] for e in loads}
    peak: dict[tuple, Event] = {}  # stream -> highest progress line of earlier generations
    first_after: dict[tuple, Event] = {}
    resets: list[tuple[Event, Event]] = []
    progress = [e for e in job.by_kind("train_step") if step_of(e) is not None]
    if not progress:  # fall back to epochs only when no finer counter is logged
        progress = [e for e in job.by_kind("train_epoch") if step_of(e) is not None]
    for ev in sorted(progress, key=lambda e: (rs.gen_of.get(id(e), 0), e.file, e.line)):
        key, gen = _stream(ev), rs.gen_of.get(id(ev), 0)
        before = peak.get(key)
        if gen > 0 and (key, gen) not in first_after:
            first_after[(key, gen)] = ev
            went_back = before is not None and rs.gen_of.get(id(before), 0) < gen and step_of(ev) < step_of(before)
            # Counting from scratch (0/1) after a load means the load restored weights only (a
            # pretrained model, --finetune, no optimizer/step state): still a reset.
            from_scratch = step_of(ev) <= 1 < step_of(before) if before is not None else False
            if went_back and (gen not in loaded_gens or from_scratch):
                resets.append((before, ev))
        if before is None or step_of(ev) >= step_of(before):
            peak[key] = ev
    return resets, loads, list(first_after.values())


def _crash_loop(job: JobModel, rs: Restarts) -> list[Event]:
    """The first occurrence, per generation, of an error that recurs in two or more generations."""
    seen: dict[str, dict[int, Event]] = defaultdict(dict)
    for ev in job.by_kind(*_LOOP_ERROR_KINDS):
        # Echoes (teardown signals, watchdog timeouts, ChildFailedError) repeat in every attempt
        # whatever the cause: only causes count.
        if classify(ev, job_timed_out=True, rank_timed_out=False) is None:
            continue
        seen[error_signature(ev)].setdefault(rs.gen_of.get(id(ev), 0), ev)
    recurring = [gens for gens in seen.values() if len(gens) >= 2]
    if not recurring:
        return []
    best = max(recurring, key=len)
    return [best[g] for g in sorted(best)]


def _describe_restart(rs: Restarts) -> str:
    bits = []
    counts = sorted({int_in(e.get("restart_count")) for e in rs.markers if e.kind == "elastic_rdzv"} - {None})
    if counts:
        bits.append(f"restart_count={counts[-1]}")
    attempts = sorted({int_in(e.get("attempt")) for e in rs.markers if e.kind == "elastic_attempt"} - {None})
    if attempts:
        bits.append(f"attempt_{attempts[-1]}")
    if rs.attempts_left is not None:
        left, most = rs.attempts_left.get("left"), rs.attempts_left.get("max")
        if left is not None and most is not None:
            bits.append(f"{left}/{most} restarts left at the first")
    times = "once" if rs.count <= 1 else f"{rs.count} times"
    return f"torchrun restarted the worker group {times}" + (f" ({', '.join(bits)})" if bits else "")


def _trigger(job: JobModel, rs: Restarts) -> Failure | None:
    """The job's first failure, when it happened before the first restart (why it restarted): one the restarted
    group got over too (training went on after it because torchrun restarted the group)."""
    failed = next(iter(failures(job)), None)
    if failed is None or not failed.events or rs.gen_of.get(id(failed.events[0]), 0) != 0:
        return None
    return failed


def _why(failed: Failure | None) -> str:
    if failed is None:
        return ""
    who = f"rank {failed.rank}" if failed.rank is not None else "a worker"
    return f" after {who}{f' on {failed.host}' if failed.host else ''} failed ({failed.what})"


def check(job: JobModel, rule: Rule) -> list:
    rs = segment_restarts(job)
    if not rs.markers:
        return _group_failed_only(job, rule, rs)
    restart_text = _describe_restart(rs)
    first_marker = min(rs.markers, key=by_place)
    failed = _trigger(job, rs)
    trigger = failed.events[0] if failed is not None else None
    restart_text += _why(failed)
    lead = [trigger, first_marker] if trigger is not None else [first_marker]
    culprit = ([failed.rank] if failed is not None and failed.rank is not None else [],
               [failed.host] if failed is not None and failed.host else [])

    loop = _crash_loop(job, rs)
    if loop:
        what = short(loop[0])
        ranks, hosts = ranks_hosts(job, loop)
        evidence = lead + [e for e in loop if e is not trigger]
        _, loads, _ = _resets(job, rs)
        resumed = f"; the restarted attempts resumed from a checkpoint ({short(loads[0])})" if loads else ""
        found = rule.finding(
            f"crash loop: the same error recurred in {len(loop)} attempts after {restart_text}: {what} "
            f"— restarting cannot fix a deterministic failure{resumed}",
            severity="error", confidence="high", ranks=ranks, hosts=hosts,
            evidence=evidence, first_seen=first_ts(evidence))
        found.title = "Elastic restart into a crash loop"  # (restored state or not: the error comes back)
        return [found]

    resets, loads, resumed = _resets(job, rs)
    saves = [e for e in job.by_kind("train_phase") if e.get("phase") == "checkpoint" and e.get("state") == "end"]
    if resets and saves and not any(rs.gen_of.get(id(e), 0) == 0 for e in saves):
        # the job logs its checkpoint saves, and none came before the restart: there was no state to
        # restore yet, and starting over was all a restart could do
        before, after = resets[0]
        evidence = lead + [before, after, saves[0]]
        return [_restored(rule.finding(
            f"{restart_text}; progress started over (step {step_of(before)} to {step_of(after)}), but no checkpoint "
            f"had been saved before the restart (the first: {short(saves[0])}): nothing was lost that could be "
            "restored", severity="info", confidence="medium", evidence=evidence, first_seen=first_ts(evidence)))]
    if resets:
        before, after = resets[0]
        who, where = ranks_hosts(job, [e for _, e in resets])
        whom = ranks_text(who) + " " if who else ""
        loaded_here = [e for e in loads if rs.gen_of.get(id(e)) == rs.gen_of.get(id(after))]
        how = "although a checkpoint was loaded (weights only, not the training state)" if loaded_here \
            else "with no checkpoint load"
        evidence = lead + loaded_here[:1] + [before, after] + [e for pair in resets[1:4] for e in pair]
        return [rule.finding(
            f"{restart_text}, and {whom}progress went back from step {step_of(before)} to "
            f"{step_of(after)} {how}: the work since the last start was lost",
            severity="error", confidence="high", ranks=culprit[0] or who, hosts=culprit[1] or where,
            evidence=evidence, first_seen=first_ts(evidence))]

    if loads:
        evidence = lead + loads[:2] + resumed[:2]
        return [_restored(rule.finding(
            f"{restart_text}; training state was restored after the restart ({short(loads[0])})",
            severity="info", confidence="high", evidence=evidence, first_seen=first_ts(evidence)))]
    if resumed:
        evidence = lead + resumed[:3]
        return [_restored(rule.finding(
            f"{restart_text}; progress after the restart continued at step {step_of(resumed[0])} "
            "(not below the level reached before), so state was restored",
            severity="info", confidence="medium", evidence=evidence, first_seen=first_ts(evidence)))]

    # A restart and nothing after it shows a resume: torchrun re-runs the script from the top.
    evidence = lead + [e for e in rs.markers if e is not first_marker][:5]
    if all(e.get("state") == "NEW_NODES" for e in rs.markers if e.kind == "elastic_restart") \
            and not any(e.kind != "elastic_restart" for e in rs.markers):
        # Re-formed for new nodes (scale-up), not after a failure: a reminder, not an error.
        return [rule.finding(
            f"{restart_text} because new nodes joined; the script re-ran from the top, so it must restore "
            "its checkpoint (no load is logged)", severity="info", confidence="low", evidence=evidence,
            first_seen=first_ts(evidence))]
    return [rule.finding(
        f"{restart_text} and no checkpoint load is logged after the restart: the script started again "
        "from the top, so training restarts from step 0 unless it restores state itself",
        severity="error", confidence="medium", ranks=culprit[0], hosts=culprit[1], evidence=evidence,
        first_seen=first_ts(evidence))]


def _group_failed_only(job: JobModel, rule: Rule, rs: Restarts) -> list:
    """Pre-torchrun torchelastic: ``[default] Worker group failed`` without a visible restart."""
    if not rs.group_failed:
        return []
    failed = _trigger(job, rs)
    evidence = failed.events[:1] + rs.group_failed[:3] if failed is not None else rs.group_failed[:3]
    why = _why(failed)
    return [rule.finding(
        f"the torchelastic worker group failed{why}; whether the agent restarted it is not in the logs "
        "— if it did, the script re-ran from the top and must restore its checkpoint",
        severity="info", confidence="low", ranks=[failed.rank] if failed and failed.rank is not None else [],
        hosts=[failed.host] if failed and failed.host else [], evidence=evidence, first_seen=first_ts(evidence))]


def _restored(f):
    """An info finding that the restart did restore state: its heading says so (the rule's title
    names the failure it did not find)."""
    f.title = "Elastic restart (state restored)"
    return f
