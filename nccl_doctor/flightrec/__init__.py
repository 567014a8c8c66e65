"""PyTorch Flight Recorder dumps: found among the inputs, read safely, turned into job events.

``split_dumps(files)`` is the hook the analysis calls before scanning logs: files named like a dump
(``nccl_trace_rank_<N>``, any extension) or starting with a pickle header are read as dumps;
everything else goes on to the log scanner. A dump that cannot be read (hostile, truncated,
corrupt) is reported as skipped with a one-line reason; no code in it ever runs.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..events import Event, Skipped
from .events import KINDS, dump_events
from .loader import Dump, DumpError, decode, is_dump_name, load_dump, rank_from_name, read_bytes, sniff

if TYPE_CHECKING:
    from ..discover import InputFile

__all__ = ["KINDS", "Dump", "DumpError", "is_dump_name", "load_dump", "split_dumps"]


_JSON_DUMP_KEY = re.compile(rb'"(?:entries|pg_config|pg_status|profiling_name)"\s*:')


class _NotADump(Exception):
    """The file is a log after all (named like a dump but text): give it to the scanner."""


def _head(real: str, n: int = 64) -> bytes:
    try:
        with open(real, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def _looks_text(data: bytes) -> bool:
    sample = data[:4096]
    if b"\x00" in sample:
        return False
    control = sum(1 for b in sample if b < 0x09 or 0x0e <= b < 0x20 and b != 0x1b)
    return control * 100 <= len(sample)


def _read(f: InputFile) -> Dump:
    """Load a candidate dump; a text file that is not one (a log named like a dump) raises _NotADump."""
    data = read_bytes(f.real)
    kind = sniff(data[:64])
    dumpish = kind == "pickle" or f.path.lower().endswith(".json") or (
        kind == "json" and _JSON_DUMP_KEY.search(data[:4096]) is not None)
    try:
        obj, encoding = decode(data)
    except DumpError as exc:
        if not dumpish and data and _looks_text(data) and not str(exc).startswith(("refused", "too ")):
            raise _NotADump from None
        raise
    # It decodes as a pickle or JSON (a protocol-0 pickle is text too): a dump, read or refused as one.
    return load_dump(f.path, rank_from_name(f.path), obj=(obj, encoding))


def _newest(d: Dump) -> int:
    return max((e["time_created_ns"] or 0 for e in d.entries), default=0)



def split_dumps(files: list[InputFile]) -> tuple[list[Event], list[InputFile], list[Skipped]]:
    """(events of the dumps, the remaining log files, dumps not read or read in part, with a reason).

    Nothing a dump holds ends the run: whatever goes wrong with one file is that file's reason.
    Each dump becomes events as soon as it is read, so only one dump's objects are in memory at once.
    """
    logs: list[InputFile] = []
    skipped: list[Skipped] = []
    newest: dict[int, tuple[tuple[int, float], str, list[Event], list[str]]] = {}  # rank -> (key, path, events, partial)
    for f in files:
        if f.real == "-":
            logs.append(f)
            continue
        try:
            named = is_dump_name(f.path)
            if not named and sniff(_head(f.real)) != "pickle":
                logs.append(f)
                continue
            try:
                dump = _read(f)
            except _NotADump:
                logs.append(f)
                continue
            except DumpError as exc:
                if not named and not str(exc).startswith(("refused", "too ")):
                    logs.append(f)  # merely starts like a pickle: the scanner reports what it is
                    continue
                skipped.append(Skipped(f.path, f"flight-recorder dump not read: {exc}"))
                continue
            key = (_newest(dump), _mtime(dump.path))
            events = dump_events(dump)
        except (MemoryError, RecursionError) as exc:
            skipped.append(Skipped(f.path, f"flight-recorder dump not read: too large or too deep to read ({type(exc).__name__})"))
            continue
        except Exception as exc:  # a bug must cost this file, not the run
            skipped.append(Skipped(f.path, f"flight-recorder dump not read: internal error: {type(exc).__name__}: "
                                           f"{str(exc)[:160]}"))
            continue
        old = newest.get(dump.rank)
        if old is not None:
            older, newer = sorted([old, (key, dump.path, events, dump.partial)], key=lambda t: t[0])
            skipped.append(Skipped(older[1], f"flight-recorder dump not used: {newer[1]} is a newer dump "
                                             f"of rank {dump.rank}"))
            newest[dump.rank] = newer
        else:
            newest[dump.rank] = (key, dump.path, events, dump.partial)
    out: list[Event] = []
    for rank in sorted(newest):
        _key, path, events, partial = newest[rank]
        if partial:
            skipped.append(Skipped(path, "flight-recorder dump partly read: " + "; ".join(partial)))
        out.extend(events)
    return out, logs, skipped


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
