"""Who owned the file, lock or key a rank failed on: the shared artifacts of a job, and the rank each belongs to.

Ranks hand work to each other outside the collectives: rank 0 writes a checkpoint the evaluation rank loads, a cache
rank refreshes a feature cache under a lock, every rank writes a heartbeat file a monitor rank reads. When the
owner's part goes wrong (killed half-way through a copy, a write cut short, a lock kept), the reader fails with an
error of its own, often first: ``JSONDecodeError: Expecting value``, ``PytorchStreamReader failed reading zip
archive``, numpy's ``could only read 20840 elements (file seems not fully written?)``, ``FileNotFoundError``,
``TimeoutError: could not lock .../sync.lock (held by vm:3728)``. That error is what the reader saw; the cause is
the owner, and an expert finds it by what ties the two:

- the lock's holder, named by host and pid in the reader's error ("held by vm:3728", "owner: cpu-b2 8087"): the
  rank whose own lines carry that pid (evidence.pids);
- a file named after one rank (``heartbeat/rank-0.json``);
- the one rank that died by a signal (SIGKILL, the OOM killer) while its last line said it was saving;
- the one rank whose own line says it wrote that very file ("async EMA save to .../ema/epoch-001.pt started");
- the job's config, that gives ranks roles (``"cache_rank": 1``, ``snapshot_rank=1``), when the reader failed in
  code named for that role (``read_cache``, ``load_snapshot``, the store key ``final/checkpoint``).

Each tie is asked in that order and one names a rank only when it gives exactly one (never the reader itself); a tie
that gives several stops the search, and none leaves the reader's failure as it is. evidence.lockwait decides which
failures are a reader's and replaces them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..events import Event
from ..model import JobModel
from .facts import global_rank, int_in, record_text
from .pids import state_for_pid
from .tracebacks import EXCEPTION_LINES, frames_above

#: A reader's error that says the file it read was cut short or corrupt (not that it could not be opened).
BROKEN_READ = re.compile(
    r"JSONDecodeError|Expecting (?:value|property name|'[,:]' delimiter)|Unterminated string|"
    r"PytorchStreamReader failed|failed finding central directory|file seems not fully written|"
    r"[Cc]ould only read \d+ elements|Failed to read all data|Ran out of input|EOFError|pickle data was truncated|"
    r"UnpicklingError|BadZipFile|[Nn]ot a zip file|[Uu]nexpected end of (?:file|data|stream|JSON input)|"
    r"[Tt]runcated (?:file|archive|header|data)|(?:file|archive) (?:was |is |looks |seems )?truncated\b|"
    r"SafetensorError|EmptyDataError|No columns to parse")
#: A reader's error that says what it read had the wrong shape (a line of three fields where it wants four, a number
#: that is not one): a file cut short or garbled, when a tie shows another rank makes what it read (not by itself:
#: the same words come of a rank's own bug).
MALFORMED = re.compile(r"(?:not enough|too many) values to unpack|could not convert string to (?:float|int)|"
                       r"invalid literal for int\(\)|dictionary update sequence element")
#: torch.load's reader failing on its zip archive: the file was written by torch.save, most often a checkpoint.
_TORCH_ARCHIVE = re.compile(r"PytorchStreamReader failed|failed finding central directory")
#: A reader's error that says the file another rank should have made is not there.
MISSING_FILE = re.compile(r"FileNotFoundError|No such file or directory|did not appear")


def read_failure(text: str) -> str | None:
    """What a reader's error says of the file it read: "broken" (cut short or corrupt), "missing", "garbled" (only a
    wrong shape: a tie to its owner must say whose), or None."""
    if BROKEN_READ.search(text):
        return "broken"
    if MISSING_FILE.search(text):
        return "missing"
    return "garbled" if MALFORMED.search(text) else None


#: A lock's holder named in the waiter's error: "held by vm:3728", "owner: cpu-b2 8087", "locked by pid 4711".
_HOLDER = re.compile(r"\b(?:(?:held|locked|owned) by|owner:?|holder:?)")
_HOLDER_AT = re.compile(r" ?(?:pid )?(?:(?P<host>[A-Za-z][\w.-]{0,252})[ :])?(?:pid )?(?P<pid>\d{2,10})\b")
#: A path's file or directory name that carries a rank: ``rank-0.json``, ``rank3``, ``hb_rank_2.txt``.
_RANK_IN_NAME = re.compile(r"(?<![A-Za-z])rank[-_]?(\d{1,6})(?!\d)")
_PATH = re.compile(r"(?<![\w.-])/[^\s'\",;()]{1,4095}")
_ROLE = re.compile(r"(?<![\w-])(?P<role>[A-Za-z][A-Za-z0-9_]{1,40})_rank(?:\\?['\"]: |=)(?P<rank>\d{1,6})\b")
#: A launcher's own rank numbers in a config, which give no role.
_NO_ROLE = frozenset(("local", "global", "node", "group", "world", "role", "dp", "tp", "pp", "cp", "ep", "src", "dst",
                      "my", "this", "own", "master", "root", "parallel", "data_parallel", "tensor", "pipeline", "expert"))
#: Words a script abbreviates in one place and spells out in another (``ckpt_rank``, ``final/checkpoint``).
_ALIASES = {"ckpt": ("checkpoint",), "checkpoint": ("ckpt",), "eval": ("evaluation", "val", "validation"),
            "val": ("validation", "eval", "evaluation"),
            "hb": ("heartbeat",), "heartbeat": ("hb",), "prep": ("prepare", "preparation"), "stats": ("statistics",)}
_WRITES = ("artifact_write", "train_phase")


@dataclass(slots=True)
class Owner:
    """The rank a reader's failure came from, the line that ties it, and how it does."""

    rank: int
    event: Event
    how: str


def holder_named(job: JobModel, reader: int, gave_up: list[Event]) -> Owner | None:
    """The rank whose process holds the lock, when the reader's error names it by pid (and host)."""
    for ev in gave_up:
        text = ev.text
        for m in _HOLDER.finditer(text):
            at = _HOLDER_AT.match(text, m.end())
            if at is None:
                continue
            st = state_for_pid(job, at.group("pid"), at.group("host"))
            if st is not None and st.rank is not None and st.rank != reader:
                return Owner(st.rank, ev, f"the lock's holder it names ({text[m.start():at.end()].strip()}) is "
                                          f"rank {st.rank}'s process")
    return None


def artifact_owner(job: JobModel, reader: int, gave_up: list[Event]) -> Owner | None:
    """The one other rank a reader's failure on a file ties to (see module doc), else None."""
    texts = [str(e.get("err") or e.get("msg") or e.text) for e in gave_up]
    paths = [p for t in texts for p in _PATH.findall(t)]
    for ask in (_named_after, _killed_writing, _wrote_it, _role_of):
        found = ask(job, reader, gave_up, paths)
        if found is not None:
            return found or None
    return None


def _one(cands: dict[int, Owner]) -> Owner | bool | None:
    """One rank's tie; False when several ranks tie (the search stops); None when none does."""
    if not cands:
        return None
    return next(iter(cands.values())) if len(cands) == 1 else False


def _named_after(job: JobModel, reader: int, gave_up: list[Event], paths: list[str]) -> Owner | bool | None:
    cands: dict[int, Owner] = {}
    for p in paths:
        for part in _last_two(p).split("/"):
            for m in _RANK_IN_NAME.finditer(part):
                if (r := int(m.group(1))) != reader and r in job.known_ranks():
                    cands.setdefault(r, Owner(r, gave_up[0], f"the file it failed on, {part}, is rank {r}'s"))
    return _one(cands)


def _killed_writing(job: JobModel, reader: int, gave_up: list[Event], paths: list[str]) -> Owner | bool | None:
    """The rank that died by a signal (not the launcher's SIGTERM) with a save or write as its last line."""
    if not any(read_failure(e.text) for e in gave_up):
        return None
    cands: dict[int, Owner] = {}
    for ev in job.by_kind("elastic_failed", "elastic_cfe"):
        code = int_in(ev.get("exitcode") if ev.kind == "elastic_cfe" else ev.get("code"))  # (the table's, the line's)
        if code is None or code >= 0 or code == -15:
            continue
        st = state_for_pid(job, ev.get("pid")) if ev.get("pid") is not None else None
        rank = st.rank if st is not None else int_in(ev.get("rank"))
        st = st or job.known_ranks().get(rank)
        if rank is None or rank == reader or st is None:
            continue
        own = [e for e in st.events if e.kind not in ("rank_world", "self_pid") and global_rank(job, e) == rank]
        last = own[-1] if own else None
        if last is not None and last.kind in _WRITES and (last.kind == "artifact_write" or last.get("state") == "start"):
            cands.setdefault(rank, Owner(rank, last, f"it died by signal {-code} while it was writing "
                                                     f"(\"{record_text(last)[:120]}\")"))
    return _one(cands)


def _wrote_it(job: JobModel, reader: int, gave_up: list[Event], paths: list[str]) -> Owner | bool | None:
    """The one other rank whose own line says it wrote a file the reader's error names."""
    tails = {_tail(p) for p in paths if len(_tail(p)) > 4}
    if not tails:
        return None
    cands: dict[int, Owner] = {}
    for ev in job.by_kind(*_WRITES):
        path = str(ev.get("path") or "")
        rank = global_rank(job, ev)
        if path and _tail(path) in tails and rank is not None and rank != reader:
            cands.setdefault(rank, Owner(rank, ev, f"it writes {_tail(path)} (\"{record_text(ev)[:120]}\")"))
    return _one(cands)


def _role_of(job: JobModel, reader: int, gave_up: list[Event], paths: list[str]) -> Owner | bool | None:
    """The rank the job's config gives the role the reader's failing code is named for."""
    words = _context_words(job, reader, gave_up, paths)
    stems = {_stem(w) for w in words}
    cands: dict[int, Owner] = {}
    for ev in job.by_kind("job_role"):
        for m in _ROLE.finditer(ev.text):
            role, rank = m.group("role").lower(), int(m.group("rank"))
            parts = [w for w in role.split("_") if w]
            if role in _NO_ROLE or _NO_ROLE & set(parts) or rank == reader or rank not in job.known_ranks():
                continue
            # (a role of several words, "heldout_prep_rank", is named by any of its words of three letters or more; a
            # role's noun by the verb the reader's code or file says: the "miner" rank's "mined/epoch-002.pt")
            if any(w in words or any(a in words for a in _ALIASES.get(w, ())) or _stem(w) in stems
                   for w in parts if len(w) >= 3):
                cands.setdefault(rank, Owner(rank, ev, f"the job's config makes it the {role} rank "
                                                       f"({role}_rank {rank}), and the reader failed in its {role.replace('_', ' ')}"))
    return _one(cands)


def _context_words(job: JobModel, reader: int, gave_up: list[Event], paths: list[str]) -> set[str]:
    """The words of what the reader was doing when it failed: its traceback's own function names, the file (and its
    folder) and store keys its error names (``read_cache``, ``ema/epoch-001.pt``, ``final/checkpoint``), split at
    ``_ / . -``."""
    names: list[str] = [_last_two(p) for p in paths]  # (not /data/ or /scratch/ above)
    names += [str(e.get("key") or "") for e in gave_up]
    # (what torch.save wrote and torch.load failed on, with no name in the error: most often a checkpoint)
    names += ["checkpoint" for e in gave_up[:1] if _TORCH_ARCHIVE.search(e.text)]
    names += re.findall(r"keys?: ([^\s,]{1,400})", " ".join(e.text for e in gave_up))
    evs = st.events if (st := job.known_ranks().get(reader)) is not None else []
    i = next((k for k in range(len(evs) - 1, -1, -1) if evs[k] is gave_up[0]), None)
    frames = list(frames_above(evs, i, EXCEPTION_LINES)) if i is not None else []
    names += [str(f.get("func") or "") for f in frames if f.kind == "py_script_frame"]
    # The reader's own line right above its traceback, when it says which file it was waiting for or reading
    # ("waiting for /run/ckpt/.sync.lock"): the file its error (a JSONDecodeError, a bad unpack) is about.
    top = i - len(frames) - 1 if i is not None else -1
    said = evs[top - 1] if top >= 1 and evs[top].kind == "traceback_start" else None
    if said is not None and said.kind == "artifact_read" and said.file == evs[top].file:
        names.append(_last_two(str(said.get("path") or "")))
    return {w.lower() for n in names for w in re.split(r"[_/.\-\s]+", n) if len(w) >= 2}


def _stem(word: str) -> str:
    """A word without the endings a role's noun and the verb of what it makes take ("miner", "mined", "mining":
    "min"; "loader", "loaded": "load"), when three letters or more are left; else the word itself."""
    stem = re.sub(r"(?:ers?|ed|ing|e)$", "", word)
    return stem if len(stem) >= 3 else word


def _tail(path: str) -> str:
    """A path's last two parts, numbers masked (``ema/epoch-001.pt``: ``ema/epoch-#.pt``): the same file, or the
    next of its series (epoch 1's after epoch 0's), however each rank spelled its root."""
    return re.sub(r"\d+", "#", _last_two(path))


def _last_two(path: str) -> str:
    """A path's last two parts (``ema/epoch-001.pt``): what names a file, whatever root each rank spelled."""
    return "/".join(path.rstrip("/").split("/")[-2:])
