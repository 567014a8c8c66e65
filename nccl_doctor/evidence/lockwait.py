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

A rank's own error on a file another rank makes (cut short: ``JSONDecodeError``, ``PytorchStreamReader failed reading
zip archive``; missing: ``FileNotFoundError``) is the same kind of failure: the one rank that logged a failure of its
own before left the file broken. With none, the ties evidence.artifact reads (a lock's holder named by its pid, a file
named after a rank, a writer killed while saving, a writer's own line naming the file, the config's roles) name the
owner; the lock's holder named by its pid comes before everything.
"""

from __future__ import annotations

import re

from ..events import Event
from ..model import JobModel
from .artifact import Owner, artifact_owner, holder_named, read_failure
from .causes import _PEER_GONE
from .facts import global_rank, known_by, rank_host, record_text
from .failure_record import Failure
from .ring import RECORD_ECHO
from .statements import SUBGROUP_KEY, key_rank, one_waited_key

#: A wait for a file lock given up on (filelock's Timeout; a script's own words for the same).
LOCK_WAIT = re.compile(r"[Ff]ile lock '[^'\n]{1,400}' could not be acquired|"
                       r"(?:[Tt]imed out|[Tt]imeout) (?:waiting )?(?:for|to acquire) (?:the )?(?:file )?lock\b|"
                       r"[Cc]ould not (?:acquire|take|lock)\b[^\n]{0,400}?\block\b|\block\b[^\n]{0,80}? still held\b")
_STORE = re.compile(r"DistStoreError|wait timeout after")
#: A rank's own error lines (its exception, not a record that mentions one).
_ERRORS = ("python_exception", "torch_store_timeout")
#: A rank's record that says something of its own failed (and it carried on).
_FAILED = re.compile(r"\b(?:failed|failure|[Ee]rror|[Ee]xception|could not|cannot|unable to)\b")
#: What a record says when it only echoes the others' trouble (ring's words for it), or another wait for the lock.
_ECHO = re.compile(RECORD_ECHO.pattern + r"|could not be acquired")
_RECORDS = ("log_warning", "log_carry_on", "log_error")


def lock_holder_failures(job: JobModel, out: list[Failure]) -> list[Failure]:
    """The failures of a rank that gave up on a lock or a store key, or failed reading a file another rank makes,
    replaced by the rank it depended on (see module doc and evidence.artifact); ``out`` as it is otherwise."""
    waits = [(f.rank, e) for f in out if f.rank is not None and not f.exit_only
             for e in f.events[:2] if _gave_up(e)][:64]
    waits += _store_waits(job)
    if not waits:
        return out
    waiter, gave_up = min(waits, key=lambda w: ((t := known_by(job, w[1])) is None, t or 0.0))
    wait = next((f for f in out if f.rank == waiter and gave_up in f.events), None)
    errors = [e for e in (wait.events if wait is not None else [gave_up]) if e.kind in _ERRORS][:4] or [gave_up]
    owner = holder_named(job, waiter, errors) if LOCK_WAIT.search(gave_up.text) else None
    # (a garbled read alone is no wait: only a tie to what it read names another rank, never a warning before it)
    garbled = read_failure(gave_up.text) == "garbled" and not LOCK_WAIT.search(gave_up.text)
    said = _failed_before(job, waiter, gave_up) if owner is None and not garbled else {}
    if len(said) > 1:
        return out
    if said:
        rank, ev = next(iter(said.items()))
        kept = "kept the file lock rank {} gave up waiting for" if LOCK_WAIT.search(gave_up.text) else \
            "never set the store key rank {} gave up waiting for" if _STORE.search(gave_up.text) \
            or gave_up.kind == "torch_store_timeout" else "left the file rank {} failed reading broken"
        what = (f"it {kept.format(waiter)}: its own failure before, \"{record_text(ev)[:160]}\", left the work "
                f"behind it unfinished ({gave_up.text[:160]})")
        owner = Owner(rank, ev, what)
    else:
        owner = owner or artifact_owner(job, waiter, errors)
        if owner is None:
            # (a store wait alone names no one: the rank that should have set the key may have hung in silence,
            # which evidence.silent tells, storewait_r0)
            return out
        owner.how = f"rank {waiter}'s error is about what this rank makes for it: {owner.how} ({gave_up.text[:160]})"
    st = job.known_ranks().get(owner.rank)
    own = owner.event if global_rank(job, owner.event) == owner.rank else None  # (not the reader's line's host)
    # (an owner tied by a pid, a name or a role may have logged no failure before the reader's: not "failed first")
    holder = Failure(rank=owner.rank, state=st, host=rank_host(job, st, own), category="exception",
                     what=owner.how, events=[owner.event, gave_up] if owner.event is not gave_up else [gave_up],
                     doing=None if said else "is the likeliest cause")
    return [holder] + [f for f in out if f is not wait and f.rank != owner.rank]


def _gave_up(e: Event) -> bool:
    """Whether a failure's event is a rank giving up on what another provides: a lock, or a file cut short or
    missing (a rank's own exception, not a log line that mentions one)."""
    return bool(LOCK_WAIT.search(e.text)) or (e.kind in _ERRORS and read_failure(e.text) is not None)


def _failed_before(job: JobModel, waiter: int, gave_up: Event) -> dict[int, Event]:
    """rank -> its first record of a failure of its own (a warning or error, not an echo) before ``gave_up``."""
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
    return said


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
