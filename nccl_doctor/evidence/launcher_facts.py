"""Launcher-level facts shared by the elastic / launcher rules (MN5, MN6, DS1, WB1).

Small questions over the job model that several of those rules ask: did training progress after
this event, which step counter does a progress line carry, which torchrun attempt wrote a file,
and what makes two errors "the same" across restarts. Formatting and rank/host helpers come from
``facts`` / ``nccl_facts``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..events import Event
from ..model import JobModel
from .facts import fmt_ranks, int_in

#: torchrun's log directory layout ``.../attempt_<restart_count>/<local_rank>/stdout.log``.
_ATTEMPT_IN_PATH = re.compile(r"(?:^|[/\\])attempt_(\d+)(?=[/\\])")
_DIGITS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def ints_in(value: object) -> list[int]:
    """All integers listed in a field such as ``'1, 3'`` or ``'[0, 1]'`` (order kept, no repeats)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if not isinstance(value, str):
        return []
    out: list[int] = []
    for m in re.finditer(r"\d+", value):
        n = int(m.group())
        if n not in out:
            out.append(n)
    return out


def ranks_text(ranks: Iterable[int], none: str = "") -> str:
    """``rank 1`` / ``ranks 0-3, 7``; ``none`` when the list is empty."""
    vals = sorted(set(ranks))
    if not vals:
        return none
    return f"rank{'s' if len(vals) > 1 else ''} {fmt_ranks(vals)}"


def step_of(ev: Event) -> int | None:
    """The progress counter of a train_step / train_epoch event."""
    if ev.kind == "train_step":
        return int_in(ev.get("step"))
    if ev.kind == "train_epoch":
        return int_in(ev.get("epoch"))
    return None


def progress_key(ev: Event) -> tuple[int, int] | None:
    """How far a progress line got, comparable across lines: (epoch, step). A step counter that
    starts again every epoch ("Epoch 2, Step 0") is read with its epoch; -1 where a line names none."""
    s = step_of(ev)
    if s is None:
        return None
    if ev.kind == "train_epoch":
        return s, -1
    epoch = int_in(ev.get("epoch"))
    return (-1 if epoch is None else epoch), s


def progress_text(ev: Event) -> str:
    """'step 30', or 'epoch 2 step 30' when the step counter starts again every epoch."""
    key = progress_key(ev)
    if key is None:
        return "?"
    if ev.kind == "train_epoch":
        return f"epoch {key[0]}"
    return f"epoch {key[0]} step {key[1]}" if key[0] >= 0 else f"step {key[1]}"


def is_after(a: Event, b: Event) -> bool:
    """True when event ``a`` was written after ``b``: line order within one file, time across files."""
    if a.file == b.file:
        return a.line > b.line
    return a.ts is not None and b.ts is not None and a.ts > b.ts


def progress_after(job: JobModel, ev: Event) -> list[Event]:
    """Training-progress lines written after ``ev`` (same file by line, other files by timestamp).

    Used to tell a planned scale-in or a recovered stall (training goes on) from a job that
    stopped making progress.
    """
    return [p for p in job.by_kind("train_step", "train_epoch") if step_of(p) is not None and is_after(p, ev)]


def attempt_in_path(path: str) -> int | None:
    """The torchrun restart count encoded in a worker log path (``attempt_2/0/stdout.log``)."""
    m = _ATTEMPT_IN_PATH.search(path)
    return int(m.group(1)) if m else None


def strip_attempt(path: str) -> str:
    """A path with its ``attempt_N`` component removed, so one worker's logs line up across attempts."""
    return _ATTEMPT_IN_PATH.sub("/attempt_*", path)


def short(ev: Event, limit: int = 110) -> str:
    """A one-line description of an error event for a summary, cut at a word boundary."""
    f = ev.fields
    exc, msg = f.get("exc_type"), f.get("msg") or f.get("err") or f.get("detail")
    text = f"{exc}: {msg}" if exc and msg else str(msg or ev.text)
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def error_signature(ev: Event) -> str:
    """An error's identity across restarts and ranks: kind + message with numbers, addresses and pids
    masked."""
    f = ev.fields
    parts = [ev.kind]
    for name in ("exc_type", "msg", "err", "detail", "code", "signal"):
        if f.get(name) not in (None, ""):
            parts.append(str(f[name]))
    text = " ".join(parts) if len(parts) > 1 else f"{ev.kind} {ev.text}"
    return numbers_masked(text)[:160]


def numbers_masked(text: str) -> str:
    """A line's words with its numbers and addresses masked: the same line of another rank, step or pid."""
    return _DIGITS.sub("#", text)
