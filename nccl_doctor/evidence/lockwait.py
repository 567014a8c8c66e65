"""A rank that gave up waiting for a file lock failed on what another process kept: the one that held it.

A job's ranks share work through files behind a lock (rank 2 refreshes a feature cache under
``val_features.lock`` that the evaluation rank reads; ``filelock``'s ``FileLock``, a ``fcntl`` lock): the
holder takes the lock, does the work, lets go. A holder whose work failed and was only logged ("cache refresh
failed for epoch 1: KeyError ...; keeping the cache of epoch 0") may never let go, and the reader's wait ends
in an error of its own: ``filelock._core._errors.Timeout: The file lock '.../val_features.lock' could not be
acquired``. That error names no holder. It comes first and reads as the reader's own failure, but a wait given
up on is what the others see: an expert looks for the rank that was doing something of its own with the shared
work just before, and finds it in the one rank that logged a handled failure (a warning or error record that says
something failed, not an echo of a lost peer or a timeout) before the reader gave up. Exactly one such rank
(never the reader itself) is named, with both lines; none, or several, leave the failures as they are.

The same holds for a store key the job's own code sets and another rank waits for (``store.wait(["val/epoch-1"])``:
``DistStoreError: wait timeout after 12000ms, keys: /default_pg/0//val/epoch-1``; a process group's own keys end in
the rank that never set them, which evidence.statements reads): the one rank that logged a failure of its own before
never set it. With no such rank the wait names no one (the rank that should have set the key may have hung in
silence: evidence.silent).
"""

from __future__ import annotations

import re

from ..events import Event
from ..model import JobModel
from .causes import _PEER_GONE
from .facts import global_rank, known_by, rank_host, record_text
from .failure_record import Failure
from .ring import RECORD_ECHO
from .statements import SUBGROUP_KEY, key_rank, one_waited_key

#: A wait for a file lock given up on (filelock's Timeout; a script's own words for the same).
LOCK_WAIT = re.compile(r"[Ff]ile lock '[^'\n]{1,400}' could not be acquired|"
                       r"(?:[Tt]imed out|[Tt]imeout) (?:waiting )?(?:for|to acquire) (?:the )?(?:file )?lock\b")
#: A rank's record that says something of its own failed (and it carried on).
_FAILED = re.compile(r"\b(?:failed|failure|[Ee]rror|[Ee]xception|could not|cannot|unable to)\b")
#: What a record says when it only echoes the others' trouble (ring's words for it), or another wait for the lock.
_ECHO = re.compile(RECORD_ECHO.pattern + r"|could not be acquired")
_RECORDS = ("log_warning", "log_carry_on", "log_error")


def lock_holder_failures(job: JobModel, out: list[Failure]) -> list[Failure]:
    """The failures with a lock wait given up on replaced by the one rank that logged a failure of its own before it
    (see module doc); ``out`` as it is otherwise."""
    waits = [(f.rank, next(e for e in f.events[:2] if LOCK_WAIT.search(e.text))) for f in out
             if f.rank is not None and not f.exit_only and any(LOCK_WAIT.search(e.text) for e in f.events[:2])]
    waits += _store_waits(job)
    if not waits:
        return out
    waiter, gave_up = min(waits, key=lambda w: ((t := known_by(job, w[1])) is None, t or 0.0))
    wait = next((f for f in out if f.rank == waiter and gave_up in f.events), None)
    by = known_by(job, gave_up)  # (a traceback's line has no time: the first dated line after it bounds it)
    said: dict[int, Event] = {}
    for st in job.ranks:
        if st.rank is None or st.rank == waiter:
            continue
        for e in st.events:
            if e.kind not in _RECORDS or not _before(e, gave_up, by):
                continue
            text = record_text(e)
            if _FAILED.search(text) and not _ECHO.search(text) and not _PEER_GONE.search(text):
                said.setdefault(st.rank, e)
    if len(said) != 1:
        # (a store wait alone names no one: the rank that should have set the key may have hung in silence, which
        # evidence.silent tells, storewait_r0)
        return out
    rank, ev = next(iter(said.items()))
    st = job.known_ranks().get(rank)
    kept = "kept the file lock" if LOCK_WAIT.search(gave_up.text) else "never set the store key"
    what = (f"it {kept} rank {waiter} gave up waiting for: its own failure before, "
            f"\"{record_text(ev)[:160]}\", left the work behind it unfinished ({gave_up.text[:160]})")
    holder = Failure(rank=rank, state=st, host=rank_host(job, st, ev), category="exception", what=what,
                     events=[ev, gave_up])
    return [holder] + [f for f in out if f is not wait and f.rank != rank]


def _store_waits(job: JobModel) -> list[tuple[int, Event]]:
    """(rank, its error) of the ranks that gave up waiting for one store key that names no rank (``/val/epoch-1``: a
    key the job's own code sets, not a process group's rendezvous key, which ends in the rank that never set it)."""
    out = []
    for e in job.by_kind("torch_store_timeout", "python_exception"):
        key = one_waited_key(str(e.get("err") or e.get("msg") or e.text))
        rank = global_rank(job, e)
        if key is not None and rank is not None and key_rank(key) is None and not SUBGROUP_KEY.search(key):
            out.append((rank, e))
    return out


def _before(e: Event, gave_up: Event, by: float | None) -> bool:
    """Whether record ``e`` was written before the wait was given up: line order in one file, else time."""
    if e.file == gave_up.file:
        return e.line < gave_up.line
    return e.ts is not None and by is not None and e.ts < by
