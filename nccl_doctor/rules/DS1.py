"""DS1: DeepSpeed's device binding with several process groups, and the hang it causes.

Since v0.17.3 DeepSpeed passes ``device_id`` to ``init_process_group`` (eager NCCL init); with a
second NCCL group (a vLLM/sglang weight-sync group in RL training) collectives of either group can
deadlock. Without ``device_id`` torch warns that it guesses the barrier's GPU, and a wrong guess
hangs too. The rule needs three things together:

* DeepSpeed is in play: version / ``Initializing TorchBackend in DeepSpeed`` / launcher lines, or
  ``deepspeed/`` frames in a stack dump;
* a hang in a collective: a py-spy / faulthandler stack inside a broadcast/barrier, a watchdog
  timeout of a BROADCAST/BARRIER, ranks stuck in ``TCPStore::get`` / ``broadcastUniqueNCCLID``;
* the device / process-group condition: a second process group, the ``using GPU N to perform
  barrier as devices used by this process are currently unknown`` warning, or DeepSpeed >= 0.17.3.

The barrier warning alone is benign (info): torch prints it whenever ``device_id`` is not given.
"""

from __future__ import annotations

from ..events import Event
from ..evidence.facts import first_ts
from ..evidence.launcher_facts import ranks_text
from ..evidence.nccl_facts import int_in, ranks_hosts
from ..model import JobModel
from .base import Rule

DEVICE_ID_SINCE = (0, 17, 3)
_DS_KINDS = ("ds_version", "ds_init_backend", "ds_mpi", "ds_rank_map", "ds_spawn")
#: Collectives DeepSpeed issues at start-up and that the device-binding hang shows up in.
_HANG_OPS = ("BROADCAST", "BARRIER", "_ALLGATHER_BASE", "ALLGATHER")
#: Independent failures that would explain a hang better than DS1 does.
_OTHER_CAUSES = ("cuda_oom", "cuda_error", "xid", "oom_killer", "nccl_cuda_fail", "nccl_shm", "nccl_alloc_fail",
                 "nccl_dup_gpu", "nccl_ib_cqe", "nccl_ofi_error")


def _version(text: object) -> tuple[int, ...] | None:
    parts: list[int] = []
    for piece in str(text or "").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) if parts else None


def _is_deepspeed_frame(ev: Event) -> bool:
    return "deepspeed" in str(ev.get("file") or ev.text).lower()


def _startup_collective(frame: Event) -> bool:
    """A frame in the collectives start-up runs (broadcast/barrier) or in communicator creation."""
    func = str(frame.get("func") or "").lower()
    return "broadcast" in func or "barrier" in func or func.startswith("c10d::")


def _hang_evidence(job: JobModel) -> list[Event]:
    """Where ranks are stuck, every line of it: collective stack frames, broadcast/barrier
    timeouts, communicator-creation and store waits (cite a few with ``_cite``)."""
    frames = job.by_kind("stack_frame_collective")
    timeouts = [e for e in job.by_kind("torch_wd_timeout", "torch_wd_status", "torch_desync_timeout")
                if str(e.get("op") or "").upper() in _HANG_OPS]
    stuck_init = [e for e in job.events if e.kind != "stack_frame_collective"
                  and ("broadcastUniqueNCCLID" in e.text or "TCPStore::get" in e.text)]
    # A store *get* that timed out is a rank waiting for a peer's NCCL id; a connect or rendezvous
    # timeout (a rank never started) is not this hang.
    store = [e for e in job.by_kind("torch_store_timeout")
             if "wait timeout" in str(e.get("err") or e.text) and e not in stuck_init]
    return frames + timeouts + stuck_init + store


def _cite(hang: list[Event]) -> list[Event]:
    """A readable selection: the innermost torch frame, the DeepSpeed frames that called it, then
    the first two lines of each other kind of hang evidence."""
    frames = [e for e in hang if e.kind == "stack_frame_collective"]
    out = [e for e in frames if not _is_deepspeed_frame(e)][:1] + [e for e in frames if _is_deepspeed_frame(e)][:2]
    for kinds in (("torch_wd_timeout", "torch_wd_status", "torch_desync_timeout"), ("torch_store_timeout",)):
        out += [e for e in hang if e.kind in kinds][:2]
    out += [e for e in hang if e.kind not in ("stack_frame_collective", "torch_wd_timeout", "torch_wd_status",
                                               "torch_desync_timeout", "torch_store_timeout")][:2]
    return out


def check(job: JobModel, rule: Rule) -> list:
    ds_lines = job.by_kind(*_DS_KINDS)
    ds_frames = [e for e in job.by_kind("stack_frame_collective") if _is_deepspeed_frame(e)]
    versions = [v for v in (_version(e.get("version")) for e in job.by_kind("ds_version")) if v]
    new_ds = any(v >= DEVICE_ID_SINCE for v in versions)
    old_ds = bool(versions) and not new_ds
    second_pg = job.by_kind("second_pg")
    guessed_gpu = job.by_kind("torch_barrier_device_unknown")
    hang = _hang_evidence(job)
    deepspeed = bool(ds_lines or ds_frames)
    condition = second_pg or guessed_gpu or new_ds

    if deepspeed and hang and condition:
        return [_deadlock(job, rule, ds_lines, versions, new_ds, old_ds, second_pg, guessed_gpu, hang)]
    dumped = [e for e in hang if e.kind == "stack_frame_collective" and _startup_collective(e)]
    if dumped and (second_pg or guessed_gpu):
        # A stack dump idle in a start-up collective after torch guessed the device (or a second
        # group was made), but nothing here says DeepSpeed runs: the binding hang, less certain.
        return [_deadlock(job, rule, ds_lines, versions, new_ds, old_ds, second_pg, guessed_gpu, hang,
                          deepspeed=False)]
    if deepspeed and new_ds and second_pg:
        # The combination that deadlocks, with no hang in these logs (yet): a latent trap.
        evidence = job.by_kind("ds_version")[:1] + job.by_kind("ds_init_backend")[:1] + second_pg[:2]
        return [rule.finding(
            f"DeepSpeed {_fmt(max(versions))} passes device_id to init_process_group and a second process "
            f"group is created ({_pg_name(second_pg)}): this combination can deadlock collectives",
            severity="warning", confidence="medium", ranks=ranks_hosts(job, second_pg)[0],
            hosts=ranks_hosts(job, evidence)[1],
            evidence=evidence, first_seen=first_ts(evidence))]
    if guessed_gpu:
        ranks, hosts = ranks_hosts(job, guessed_gpu)
        # Without a launcher prefix, the rank inside the default group is the global rank.
        ranks = ranks or sorted({r for r in (int_in(e.get("pg_rank")) for e in guessed_gpu) if r is not None})
        who = ranks_text(ranks, none="a rank")
        return [rule.finding(
            f"{who} let torch guess the GPU for barrier() (no device_id): harmless while every rank calls "
            "torch.cuda.set_device(local_rank) before the first collective",
            severity="info", confidence="high", ranks=ranks, hosts=hosts,
            evidence=guessed_gpu[:3], first_seen=first_ts(guessed_gpu))]
    return []


def _deadlock(job: JobModel, rule: Rule, ds_lines: list[Event], versions: list, new_ds: bool, old_ds: bool,
              second_pg: list[Event], guessed_gpu: list[Event], hang: list[Event], deepspeed: bool = True):
    where = _where(hang)
    causes = []
    if new_ds:
        causes.append(f"DeepSpeed {_fmt(max(versions))} passes device_id to init_process_group")
    elif versions:
        causes.append(f"DeepSpeed {_fmt(max(versions))}")
    if second_pg:
        causes.append(f"a second process group was created ({_pg_name(second_pg)})")
    if guessed_gpu:
        causes.append("torch guessed the barrier GPU (devices unknown: no device_id)")
    ranks = ranks_hosts(job, hang + guessed_gpu + second_pg)[0]
    who = ranks_text(ranks, none="ranks") + " hung"
    summary = f"{who} in {where}{' under DeepSpeed' if deepspeed else ''}: " \
        + "; ".join(causes or ["DeepSpeed device binding"])
    confidence = "high" if (new_ds and second_pg) else "medium"
    severity = "error"
    if not deepspeed:
        severity = "warning"
        summary += " (no DeepSpeed line in these logs: with DeepSpeed >= 0.17.3 this is its device_id hang)"
    other = job.by_kind(*_OTHER_CAUSES)
    if other:
        # Something else failed on its own (OOM, Xid, IB error...): that is the likelier cause.
        severity, confidence = "warning", "low"
        summary += f"; but {other[0].kind} at {job.place(other[0])} is a likelier cause of the hang"
    elif old_ds and not second_pg:
        confidence = "low"
    evidence = (job.by_kind("ds_version")[:1] + job.by_kind("ds_init_backend")[:1] + second_pg[:1]
                + guessed_gpu[:1] + _cite(hang))
    return rule.finding(summary, severity=severity, confidence=confidence,
                        ranks=ranks, hosts=ranks_hosts(job, hang + guessed_gpu)[1],
                        evidence=evidence, first_seen=first_ts(evidence))


def _where(hang: list[Event]) -> str:
    """The collective the ranks are stuck in, with the DeepSpeed frame that called it when dumped."""
    frames = [e for e in hang if e.kind == "stack_frame_collective"]
    if frames:
        inner = frames[0]
        text = f"{inner.get('func') or 'a collective'} ({inner.get('file') or 'stack dump'})"
        caller = next((e for e in frames[1:] if _is_deepspeed_frame(e)), None)
        return text + (f" called from {caller.get('file')}" if caller is not None and caller is not inner else "")
    for ev in hang:
        if ev.get("op"):
            return f"{ev.get('op')} (watchdog timeout)"
        if "broadcastUniqueNCCLID" in ev.text:
            return "broadcastUniqueNCCLID (NCCL communicator creation)"
    return "a store wait (TCPStore::get)"


def _pg_name(second_pg: list[Event]) -> str:
    return str(second_pg[0].get("name") or second_pg[0].text.strip()[:60])


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))
