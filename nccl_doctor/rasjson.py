"""NCCL RAS reports in JSON (``ncclras -f json``, NCCL 2.28.7+; ``ncclras -m -f json`` monitor events).

A JSON report is one pretty-printed document (FORMATS-2.md 1.8): ``nccl_version``, the CUDA versions,
``communicators[]`` in arrival order, each with ``ranks[]`` (status flags and per-collective
``collective_counts``) and ``missing_ranks[]`` (``unresponsive``, ``considered_dead``). Monitor mode
prints one object per event (a stream, not JSON Lines). The document carries no Status/Errors words:
they are recomputed here as the text report computes them, and the document becomes the same
``ras_*`` events a text report gives (``parsers/ras.toml``), so one reader (``evidence.ras``) serves
both. Which keys make a document a RAS report is data: ``parsers/ras_json.toml``, with its samples.

The input is untrusted: the size read is bounded, the decoder is the standard ``json`` module (no
object hooks that run code), and the number of communicators and ranks looked at is capped.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .events import MAX_TEXT, Event, Skipped
from .resources import parsers_dir

if TYPE_CHECKING:
    from .discover import InputFile

MAX_BYTES = 64 << 20
MAX_RANKS = 200_000  # rank entries looked at per document (a 16k-GPU job has 16k per communicator)


@lru_cache(maxsize=1)
def spec() -> dict[str, Any]:
    """The data that says what a RAS JSON document is (parsers/ras_json.toml)."""
    return tomllib.loads((parsers_dir() / "ras_json.toml").read_text(encoding="utf-8"))


def looks_like(head: bytes) -> bool:
    """The first bytes of a file are a RAS JSON report or monitor stream."""
    text = head.lstrip()
    if not text.startswith(b"{"):
        return False
    keys = spec()["document"]
    return any(k.encode() in head for k in keys["report_keys"]) or \
        all(k.encode() in head for k in keys["event_keys"])


def looks_like_file(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return looks_like(fh.read(4096))
    except OSError:
        return False


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any, limit: int = 128) -> str | None:
    return value[:limit] if isinstance(value, str) and value and value != "unknown" else None


def _dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class _Lines:
    """Line numbers of the document's keys, in document order, so that evidence points at real lines."""

    def __init__(self, text: str):
        self.marks = [(m.group(1), text.count("\n", 0, m.start()) + 1)
                      for m in re.finditer(r'"(hash|rank|nccl_version|timestamp|event)"\s{0,8}:', text)]
        self.pos = 0

    def next(self, key: str, default: int) -> int:
        for i in range(self.pos, len(self.marks)):
            if self.marks[i][0] == key:
                self.pos = i + 1
                return self.marks[i][1]
        return default


def _status(rank: dict) -> str:
    st = rank.get("status") if isinstance(rank.get("status"), dict) else {}
    if st.get("abort_flag"):
        return "ABORT"
    if st.get("finalize_called") or st.get("destroy_flag"):
        return "FINALIZE"
    if _int(st.get("init_state")) not in (0, None):
        return "INIT"
    return "RUNNING"


_ORDER = {"INIT": 0, "RUNNING": 1, "FINALIZE": 2, "ABORT": 3}


def _failed(rank: dict) -> bool:
    st = rank.get("status") if isinstance(rank.get("status"), dict) else {}
    return any(_int(st.get(k)) not in (None, 0, 7) for k in ("init_state", "async_error"))  # 7: in progress


def report_events(path: str, text: str, doc: dict) -> list[Event]:
    """The events of one JSON status report."""
    lines = _Lines(text)
    out: list[Event] = []

    def ev(kind: str, line: int, shown: str, **fields: Any) -> None:
        out.append(Event(kind, path, line, fields={k: v for k, v in fields.items() if v is not None},
                         text=shown[:MAX_TEXT]))

    version = _str(doc.get("nccl_version"), 32)
    ev("ras_banner", lines.next("nccl_version", 1), f"ncclras JSON report, NCCL {version or '?'}", version=version,
       runtime=_int(doc.get("cuda_runtime_version")), driver=_int(doc.get("cuda_driver_version")),
       ts=_str(doc.get("timestamp"), 32))
    comms = _dicts(doc.get("communicators"))
    sizes = Counter(_int(c.get("size")) for c in comms)
    seen = 0
    for j, comm in enumerate(comms):
        ranks, gone = _dicts(comm.get("ranks")), _dicts(comm.get("missing_ranks"))
        seen += len(ranks) + len(gone)
        if seen > MAX_RANKS:
            break
        chash = str(_str(comm.get("hash"), 20) or "?").removeprefix("0x")
        line = lines.next("hash", 1)
        size = _int(comm.get("size"))
        statuses = {_status(r) for r in ranks}
        counts = _counts(ranks)
        unresponsive = [m for m in gone if (m.get("status") or {}).get("unresponsive", True)]
        errors = [w for w, on in (("INCOMPLETE", unresponsive), ("ERROR", any(_failed(r) for r in ranks)),
                                  ("MISMATCH", len(statuses) > 1 or len(gone) > len(unresponsive)
                                   or any(len(set(v.values())) > 1 for v in counts.values()))) if on]
        status = max(statuses, key=lambda s: _ORDER[s]) if statuses else "INIT"
        nodes = {_str(r.get("host")) for r in ranks + gone} - {None}
        ev("ras_comm", line, f"ncclras JSON: communicator 0x{chash}: {size} ranks, {len(ranks)} answered, "
           f"{status} {','.join(errors) or 'OK'}", group=j, ncomms=sizes[size], nodes=len(nodes), size=size,
           ranks=_int(comm.get("ranks_count")) or len(ranks), status=status, errors=",".join(errors) or "OK")
        rank_lines = {id(r): lines.next("rank", line) for r in ranks + gone}
        dead = [m for m in gone if (m.get("status") or {}).get("considered_dead")]
        # Entries point at their own lines, which interleave: each names the block (and the collective)
        # it belongs to, instead of following its header as the text report's lines do.
        dead = [m for m in gone if (m.get("status") or {}).get("considered_dead")]
        for m in dead:
            ev("ras_process", rank_lines[id(m)], _shown(chash, m, "considered dead"), pid=_pid(m),
               node=_str(m.get("host")), gpus=_gpu(m), block="DEAD")
        for m in unresponsive:
            if m not in dead:
                ev("ras_rank", rank_lines[id(m)], _shown(chash, m, "unresponsive"), rank=_int(m.get("rank")),
                   pid=_pid(m), node=_str(m.get("host")), gpu=_gpu(m), block="INCOMPLETE", group=j, comm_hash=chash)
        by_id = {id(r): r for r in ranks}
        for coll, per in counts.items():
            if len(set(per.values())) > 1:
                for rid, c in per.items():
                    r = by_id[rid]
                    ev("ras_rank", rank_lines[rid], _shown(chash, r, f"launched {coll} up to {c}"),
                       rank=_int(r.get("rank")), pid=_pid(r), node=_str(r.get("host")), gpu=_gpu(r), op=c,
                       block="MISMATCH", group=j, comm_hash=chash, coll=coll)
    return out


def _counts(ranks: list[dict]) -> dict[str, dict[int, int]]:
    """collective type -> {id(rank entry): count}."""
    out: dict[str, dict[int, int]] = {}
    for r in ranks:
        cc = r.get("collective_counts")
        if isinstance(cc, dict):
            for coll, n in cc.items():
                if isinstance(coll, str) and _int(n) is not None:
                    out.setdefault(coll[:32], {})[id(r)] = n
    return out


def _pid(r: dict) -> int | None:
    pid = _int(r.get("pid"))
    return pid if pid is not None and pid >= 0 else None


def _gpu(r: dict) -> str | None:
    dev = _int(r.get("cuda_dev"))
    return str(dev) if dev is not None and dev >= 0 else None


def _shown(chash: str, r: dict, what: str) -> str:
    return (f"ncclras JSON: communicator 0x{chash} rank {_int(r.get('rank'))}: {what} (pid {_pid(r)} on "
            f"{_str(r.get('host')) or '?'}, GPU {_gpu(r) or '?'})")


def monitor_events(path: str, text: str, docs: list[dict]) -> list[Event]:
    lines = _Lines(text)
    out = []
    for doc in docs:
        line = lines.next("timestamp", 1)
        event = _str(doc.get("event"), 40)
        if not event:
            continue
        peer = doc.get("peer") if isinstance(doc.get("peer"), dict) else {}
        devs = [d for d in peer.get("cuda_devs") or [] if _int(d) is not None] if isinstance(peer.get("cuda_devs"), list) else []
        fields = {"ts": _str(doc.get("timestamp"), 32), "event": event, "pid": _pid(peer), "node": _str(peer.get("host")),
                  "gpus": ",".join(map(str, devs[:64])) or None, "addr": _str(peer.get("addr")),
                  "details": _str(doc.get("details"), 400)}
        out.append(Event("ras_event", path, line, fields={k: v for k, v in fields.items() if v is not None},
                         text=f"ncclras monitor: {event} {fields['node'] or fields['addr'] or ''} pid {fields['pid']}"[:MAX_TEXT]))
    return out


def _documents(text: str, limit: int = 100_000) -> list[Any]:
    """Every JSON value in the text, one after the other (a monitor stream holds many)."""
    dec = json.JSONDecoder()
    out: list[Any] = []
    pos = 0
    n = len(text)
    while len(out) < limit:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        value, pos = dec.raw_decode(text, pos)
        out.append(value)
    return out


def read(path: str, data: bytes) -> list[Event]:
    """The events of a RAS JSON file; ValueError when it is not one (or not JSON)."""
    text = data.decode("utf-8", "replace")
    try:
        docs = _documents(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not valid JSON: {str(exc)[:80]}") from None
    keys = spec()["document"]
    reps = [d for d in docs if isinstance(d, dict) and all(k in d for k in keys["report_required"])]
    if reps:
        return [e for d in reps for e in report_events(path, text, d)]
    events = [d for d in docs if isinstance(d, dict) and all(k in d for k in keys["event_required"])]
    if events:
        return monitor_events(path, text, events)
    raise ValueError("JSON without the keys of a RAS report")


def split_ras_json(files: list[InputFile]) -> tuple[list[Event], list[InputFile], list[Skipped]]:
    """(events of the RAS JSON files, the remaining inputs, RAS JSON files that could not be read)."""
    from .flightrec.loader import DumpError, read_bytes

    events: list[Event] = []
    rest: list[InputFile] = []
    skipped: list[Skipped] = []
    for f in files:
        if f.real == "-" or not looks_like_file(f.real):
            rest.append(f)
            continue
        try:
            events.extend(read(f.path, read_bytes(f.real, MAX_BYTES)))
        except (DumpError, OSError, ValueError) as exc:
            skipped.append(Skipped(f.path, f"ncclras JSON report not read: {exc}"))
    return events, rest, skipped
