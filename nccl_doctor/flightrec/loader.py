"""Read one Flight Recorder dump safely and normalise it across format versions.

Decoding (``decode.py``) turns the bytes into plain objects without running anything and within
budgets. Normalising then builds only what the analysis reads, and charges a budget for every value
it looks at (``MAX_WORK``; a value reached through several shared references is charged each time,
so a dump that reuses one huge entry a million times is refused, not copied a million times):

* every entry's process group and position (to pick the entries kept); the newest ``MAX_ENTRIES``
  only when a dump holds more (read in part);
* the full fields of the newest ``MAX_ENTRIES_PER_PG`` entries of each process group (at most
  ``MAX_KEPT`` in all), the only ones the job events are made of;
* the process-group config (each group's size and this rank's place in it; the member list only for
  groups of up to ``MAX_RANKS_LISTED``) and status.

Numbers are range-checked (integers within 64 bits, timestamps between 2000 and 2100, durations
finite): a value out of range or of the wrong type is ignored and counted. Nothing is walked recursively and nothing is
turned into text but strings (cut to a few hundred characters). What was left out is said in
``Dump.partial``, which the report lists under ``inputs.skipped`` as "partly read".

Versions (``version`` key; ../shared/FORMATS.md section 3): a bare list (torch 2.2), "1.4" (2.3),
"2.1" (2.4), "2.4" (2.5-2.7), "2.9" (2.8), "2.10" (2.9+). Fields are read by presence, not by the
version string, so forks and future minors load too.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from .decode import (  # noqa: F401 - the loader's API since before decoding had its own module
    MAX_DUMP_BYTES,
    SAFE_OPCODES,
    DumpError,
    _PlainUnpickler,
    check_pickle,
    decode,
    loads_json,
    loads_pickle,
    read_bytes,
    sniff,
)

#: Entries of one dump looked at (the ring buffer's newest; torch keeps 2000 by default).
MAX_ENTRIES = 1_000_000
#: Newest entries read in full per process group (the job events are made of these).
MAX_ENTRIES_PER_PG = 128
#: Entries read in full per dump, over all its process groups.
MAX_KEPT = 20_000
#: Process groups of one dump's config and status.
MAX_PGS = 10_000
#: Members listed for a process group (larger groups keep their size and this rank's place only).
MAX_RANKS_LISTED = 4096
#: Values the normalisation may look at in one dump, shared references counted as often as used.
MAX_WORK = 4_000_000
#: Plausible timestamps (ns since the epoch): 2000-01-01 .. 2100-01-01.
TS_RANGE_NS = (946_684_800 * 10**9, 4_102_444_800 * 10**9)
_INT_RANGE = (-(1 << 63), 1 << 63)

#: Default file-name prefixes of torch's DebugInfoWriter (TORCH_NCCL_DEBUG_INFO_TEMP_FILE /
#: TORCH_FR_DUMP_TEMP_FILE): ``/tmp/nccl_trace_rank_`` (2.2-2.6), ``~/.cache/torch/nccl_trace_rank_`` (2.7+).
DEFAULT_PREFIXES = ("nccl_trace_rank_",)
#: ``nccl_trace_rank_<N>`` with any extension (``.json``, ``.pkl``, ``.gz``, ...).
DUMP_NAME = re.compile("^(?:" + "|".join(map(re.escape, DEFAULT_PREFIXES)) + r")(\d{1,7})(?:\.[A-Za-z0-9]{1,10}){0,3}$")
_RANK_AT_END = re.compile(r"(\d{1,7})(?:\.(?:json|pkl|pickle|bin|gz|zst|zstd|dump)){0,3}$", re.I)


@dataclass(slots=True)
class Dump:
    """One dump, normalised: entries use the current (2.10) field names; see ``normalise_entry``.

    ``entries`` are the entries read in full, in dump order (``pos`` = position in the dump);
    ``total_entries`` counts them all and ``pg_entries`` per process group.
    """

    path: str
    rank: int
    version: str
    encoding: str  # "pickle" | "json"
    entries: list[dict[str, Any]]
    pg_config: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> name, desc, ranks, size, pg_rank
    pg_status: dict[int, dict[str, int]] = field(default_factory=dict)  # pg_id -> enqueued, started, completed
    comm_lib_version: str | None = None
    keys: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    total_entries: int = 0
    pg_entries: dict[int | None, int] = field(default_factory=dict)
    partial: list[str] = field(default_factory=list)  # what was left out, and why

    @property
    def backend(self) -> str | None:
        """``nccl``/``gloo``/... from the entries' profiling names (``gloo:all_reduce``)."""
        for e in self.entries:
            name = e.get("profiling_name") or ""
            if ":" in name:
                return name.split(":", 1)[0]
        return None


def is_dump_name(name: str) -> bool:
    """True for file names of the default dump prefix (``nccl_trace_rank_<N>``, any extension)."""
    return DUMP_NAME.match(os.path.basename(name)) is not None


def rank_from_name(name: str) -> int | None:
    """The global rank at the end of a dump's file name (``<prefix><rank>[.ext]``), as torch's analyzer does."""
    m = _RANK_AT_END.search(os.path.basename(name))
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------- normalisation
class _Reader:
    """Range-checked conversions, a budget of values looked at, and a count of values ignored."""

    __slots__ = ("left", "ignored")

    def __init__(self, work: int = MAX_WORK) -> None:
        self.left = work
        self.ignored = 0

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise DumpError(f"too large: reading it would look at more than {MAX_WORK:,} values "
                            "(shared references counted as often as they are used)")

    def int(self, v: Any) -> int | None:
        """An int from an int, or from a numeric string (JSON dumps write pg_status values as strings);
        None for absent, and for the wrong type or out of range (counted)."""
        if v is None:
            return None
        if type(v) is int:
            n = v
        elif isinstance(v, str) and len(v) <= 24 and re.fullmatch(r"-?\d{1,20}", v.strip()):
            n = int(v)
        elif isinstance(v, float) and math.isfinite(v) and v.is_integer():
            n = int(v)
        else:
            self.ignored += 1
            return None
        if _INT_RANGE[0] <= n < _INT_RANGE[1]:
            return n
        self.ignored += 1
        return None

    def ns(self, v: Any, scale: int = 1) -> int | None:
        """A timestamp in ns; None for absent (pickle), 0 (JSON writes unset times as 0) and out of range."""
        n = self.int(v)
        if not n:
            return None
        n *= scale
        if TS_RANGE_NS[0] <= n < TS_RANGE_NS[1]:
            return n
        self.ignored += 1
        return None

    def str(self, v: Any, cap: int = 400) -> str | None:
        """A string cut to ``cap`` characters (bytes decoded); None for absent or another type (counted:
        a list where a name should be is never turned into text)."""
        if isinstance(v, bytes):
            v = v[: cap * 4].decode("utf-8", "replace")
        if isinstance(v, str):
            return v[:cap]
        if v is not None:
            self.ignored += 1
        return None

    def sizes(self, v: Any) -> list[list[int]]:
        """``[[3, 4], [5]]``: a list of shapes, each a list of ints; anything else is dropped (never recursed)."""
        out: list[list[int]] = []
        if not isinstance(v, (list, tuple)):
            return out
        shapes = v[:4096]
        self.take(len(shapes))
        for shape in shapes:
            if isinstance(shape, (list, tuple)):
                dims = shape[:64]
                self.take(len(dims))
                ok = [d for d in dims if type(d) is int and _INT_RANGE[0] <= d < _INT_RANGE[1]]
                self.ignored += len(dims) - len(ok)
                out.append(ok)
        return out

    def strs(self, v: Any) -> list[str]:
        if not isinstance(v, (list, tuple)):
            return []
        items = v[:4096]
        self.take(len(items))
        return [s[:100] for s in items if isinstance(s, str)]

    def frames(self, v: Any) -> list[dict[str, Any]]:
        out = []
        if isinstance(v, (list, tuple)):
            items = v[:64]
            self.take(len(items))
            for fr in items:
                if isinstance(fr, dict):
                    self.take(3)
                    out.append({"name": self.str(fr.get("name"), 200) or "",
                                "filename": self.str(fr.get("filename"), 400) or "", "line": self.int(fr.get("line"))})
        return out


_P2P_NAME = re.compile(r"(?:^|:)(?:send|recv)\b")


def normalise_entry(e: dict[str, Any], rd: _Reader | None = None, pos: int = 0) -> dict[str, Any]:
    """One entry of any version -> the 2.10 field names (``seq``/``p2p_seq`` short names added).

    2.2/2.3 had ``seq_id`` (one counter for every op) and no ``is_p2p``/``process_group``/dtypes;
    2.2 had ``time_created_us``. JSON dumps write tuples as lists, unset times as 0.
    """
    rd = rd or _Reader()
    rd.take(24)
    name = rd.str(e.get("profiling_name"), 200) or ""
    pg = e.get("process_group")
    guid = desc = None
    if isinstance(pg, (list, tuple)) and pg:
        guid = rd.str(pg[0], 200)
        desc = rd.str(pg[1], 200) if len(pg) > 1 else None
    is_p2p = e.get("is_p2p")
    if not isinstance(is_p2p, bool):
        is_p2p = bool(_P2P_NAME.search(name))
    coll = rd.int(e.get("collective_seq_id"))
    p2p = rd.int(e.get("p2p_seq_id"))
    legacy = rd.int(e.get("seq_id"))
    if coll is None and p2p is None and legacy is not None:  # torch 2.2/2.3: one counter
        if is_p2p:
            p2p = legacy
        else:
            coll = legacy
    created = rd.ns(e.get("time_created_ns"))
    if created is None and e.get("time_created_ns") is None:
        created = rd.ns(e.get("time_created_us"), 1000)
    duration = _duration(e.get("duration_ms"), rd)
    return {
        "pos": pos,
        "record_id": rd.int(e.get("record_id")),
        "pg_id": rd.int(e.get("pg_id")),
        "pg_guid": guid,
        "pg_desc": desc,
        "collective_seq_id": coll,
        "p2p_seq_id": p2p,
        "op_id": rd.int(e.get("op_id")),
        "profiling_name": name,
        "is_p2p": is_p2p,
        "input_sizes": rd.sizes(e.get("input_sizes")),
        "output_sizes": rd.sizes(e.get("output_sizes")),
        "input_dtypes": rd.strs(e.get("input_dtypes")),
        "output_dtypes": rd.strs(e.get("output_dtypes")),
        "state": rd.str(e.get("state"), 40),
        "retired": e.get("retired") if isinstance(e.get("retired"), bool) else None,
        "time_created_ns": created,
        "time_discovered_started_ns": rd.ns(e.get("time_discovered_started_ns")),
        "time_discovered_completed_ns": rd.ns(e.get("time_discovered_completed_ns")),
        "duration_ms": duration,
        "timeout_ms": rd.int(e.get("timeout_ms")),
        "thread_name": rd.str(e.get("thread_name"), 200),
        "frames": rd.frames(e.get("frames")),
    }


def _duration(v: Any, rd: _Reader) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        if math.isfinite(v) and 0 <= v < 1e12:
            return float(v)
    except OverflowError:  # an int of hundreds of digits
        pass
    rd.ignored += 1
    return None


def _ranks(v: Any, rd: _Reader) -> list[int] | None:
    """pg_config ``ranks``: a string ``"[0, 1, 2]"`` in real dumps (a list tolerated)."""
    if isinstance(v, str):
        body = v.strip().strip("[]").strip()
        if not body:
            return []
        rd.take(body.count(",") + 1)
        try:
            out = [int(x) for x in body.split(",")]
        except ValueError:
            return None
    elif isinstance(v, (list, tuple)):
        rd.take(len(v))
        out = [rd.int(x) for x in v]  # type: ignore[misc]
    else:
        return None
    return None if any(x is None or not 0 <= x < (1 << 31) for x in out) else out


def _pick(entries: list[Any], rd: _Reader, partial: list[str]) -> tuple[list[int], dict[int | None, int], int]:
    """Positions of the entries to read in full (the newest per process group), the number of entries
    per process group, and the number of malformed (non-dict) entries."""
    base = max(0, len(entries) - MAX_ENTRIES)
    if base:
        partial.append(f"the newest {MAX_ENTRIES:,} of its {len(entries):,} entries were read")
    rd.take(len(entries) - base)
    by_pg: dict[int | None, list[int]] = {}
    malformed = 0
    for pos in range(base, len(entries)):
        e = entries[pos]
        if isinstance(e, dict):
            by_pg.setdefault(rd.int(e.get("pg_id")), []).append(pos)
        else:
            malformed += 1
    counts = {pg: len(p) for pg, p in by_pg.items()}
    picked = sorted(p for ps in by_pg.values() for p in ps[-MAX_ENTRIES_PER_PG:])
    if len(picked) > MAX_KEPT:
        partial.append(f"the newest {MAX_KEPT:,} of the entries of its {len(by_pg):,} process groups were read")
        picked = picked[-MAX_KEPT:]
    return picked, counts, malformed


def _pg_config(cfg: Any, rank: int, rd: _Reader, partial: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(cfg, dict):
        return out
    if len(cfg) > MAX_PGS:
        partial.append(f"{MAX_PGS:,} of its {len(cfg):,} process-group configs were read")
    for i, (name, c) in enumerate(cfg.items()):
        if i >= MAX_PGS:
            break
        rd.take(1)
        key = name if isinstance(name, str) else rd.int(name)
        if key is None or not isinstance(c, dict):
            continue
        ranks = _ranks(c.get("ranks"), rd)
        out[str(key)[:200]] = {"name": rd.str(c.get("name"), 200), "desc": rd.str(c.get("desc"), 200),
                          "ranks": ranks if ranks is None or len(ranks) <= MAX_RANKS_LISTED else None,
                          "size": len(ranks) if ranks is not None else None,
                          "pg_rank": _index(ranks, rank)}
    return out


def _index(ranks: list[int] | None, rank: int) -> int | None:
    try:
        return ranks.index(rank) if ranks else None
    except ValueError:
        return None


def _pg_status(st: Any, rd: _Reader) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    if not isinstance(st, dict):
        return out
    for i, (pgid, s) in enumerate(st.items()):
        if i >= MAX_PGS:
            break
        rd.take(4)
        pid = rd.int(pgid)
        if pid is None or not isinstance(s, dict):
            continue
        out[pid] = {k: v for k, v in (("enqueued", rd.int(s.get("last_enqueued_collective"))),
                                      ("started", rd.int(s.get("last_started_collective"))),
                                      ("completed", rd.int(s.get("last_completed_collective"))))
                    if v is not None}
    return out


def _version(v: Any, rd: _Reader) -> str:
    if isinstance(v, str):
        return v[:20]
    if isinstance(v, float) and math.isfinite(v):
        return repr(v)[:20]
    n = rd.int(v)
    return str(n) if n is not None else "0"


def normalise(obj: Any, path: str, rank: int, encoding: str) -> Dump:
    """A decoded dump of any version -> Dump. Raises DumpError when it is not a dump at all, or when
    reading it would pass the budget (see the module docstring)."""
    notes: list[str] = []
    partial: list[str] = []
    rd = _Reader()
    if isinstance(obj, list):  # torch 2.2: the entries themselves
        top: dict[str, Any] = {"entries": obj, "version": "0"}
    elif isinstance(obj, dict):
        top = obj
    else:
        raise DumpError(f"not a flight-recorder dump: the top level is {type(obj).__name__}, not a dict or list")
    entries = top.get("entries")
    if not isinstance(entries, list):
        raise DumpError("not a flight-recorder dump: no list of entries")
    picked, counts, malformed = _pick(entries, rd, partial)
    if malformed:
        notes.append(f"{malformed} malformed entries ignored")
    norm = [normalise_entry(entries[p], rd, p) for p in picked]
    if norm and not any(n["profiling_name"] or n["collective_seq_id"] is not None or n["p2p_seq_id"] is not None
                        for n in norm):
        raise DumpError("not a flight-recorder dump: its entries have no op names or sequence ids")
    pg_config = _pg_config(top.get("pg_config"), rank, rd, partial)
    pg_status = _pg_status(top.get("pg_status"), rd)
    lib = rd.str(top.get("comm_lib_version", top.get("nccl_version")), 100) or None
    version = _version(top.get("version"), rd)
    if rd.ignored:
        partial.append(f"{rd.ignored:,} value{'s' if rd.ignored != 1 else ''} of the wrong type or out of range "
                       "(numbers beyond 64 bits, timestamps outside 2000-2100, durations not finite) ignored")
    keys = tuple(k[:100] for k in list(top)[:64] if isinstance(k, str)) if isinstance(obj, dict) else ()
    return Dump(path=path, rank=rank, version=version, encoding=encoding, entries=norm,
                pg_config=pg_config, pg_status=pg_status, comm_lib_version=lib, keys=keys,
                notes=notes, total_entries=len(entries) - malformed, pg_entries=counts, partial=partial)


def load_dump(path: str, rank: int | None = None, data: bytes | bytearray | None = None,
              obj: tuple[Any, str] | None = None) -> Dump:
    """Read, check and normalise one dump (``data``: its bytes, ``obj``: already decoded, with its
    encoding). Raises DumpError with a one-line reason."""
    if rank is None:
        rank = rank_from_name(path)
    if obj is None:
        obj = decode(read_bytes(path) if data is None else data)
    obj, encoding = obj
    if rank is None:
        raise DumpError("cannot tell the rank: the file name does not end in a rank number (<prefix><rank>)")
    return normalise(obj, path, rank, encoding)
