"""Flight Recorder dump -> events of the job model.

One dump gives, all with ``rank`` = the dump's global rank (from its file name) and ``file`` = the
dump's path:

* ``fr_dump`` (line 0): the dump itself (version, encoding, backend, entry counts, world size).
* ``fr_pg`` (line 0): one per process group of the dump: its config and status in *collective
  sequence* units, so it compares with the logs' watchdog ``SeqNum``/``last enqueued`` numbers.
* ``fr_collective`` / ``fr_p2p`` (line = 1-based position of the entry in the dump): one per entry
  kept (the newest ``loader.MAX_ENTRIES_PER_PG`` of each process group, the only entries the loader
  reads in full; the ring buffer's older entries rarely matter and 2000 x thousands of ranks would
  not fit in memory).

Field names follow the log kinds where the meaning is the same (``pg_id``, ``pg_guid``,
``pg_desc``, ``pg_rank``, ``seq``, ``op``, ``numel_in``, ``numel_out``, ``timeout_ms``, ``enqueued``,
``completed``) so that ``model.pg_key`` and the rules treat dump and log evidence alike.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from ..events import MAX_TEXT, Event
from .loader import MAX_ENTRIES_PER_PG, Dump

#: Kinds this package emits, with their fields (the same shape as nccl_doctor.kinds.KINDS).
KINDS: dict[str, str] = {
    "fr_dump": "version, encoding, backend, entries, entries_kept, world_size, pgs, comm_lib_version, keys, notes: "
    "one flight-recorder dump was read (line 0; rank = the dump's global rank)",
    "fr_pg": "pg_id, pg_guid, pg_desc, ranks, size, pg_rank, enqueued, started, completed, last_seq, last_op, "
    "status_units, entries: one process group of a dump (pg_config + pg_status + entries; sequence numbers "
    "in collective_seq_id units, comparable with the watchdog SeqNum)",
    "fr_collective": "pg_id, pg_guid, pg_desc, pg_rank, seq, p2p_seq, op_id, record_id, op, op_type, profiling_name, "
    "backend, numel_in, numel_out, input_sizes, output_sizes, input_dtypes, output_dtypes, state, retired, "
    "completed (True/False/None = unknown), timeout_ms, started_ns, completed_ns, duration_ms, frame, "
    "thread_name, is_last: one collective of a dump (seq = collective_seq_id)",
    "fr_p2p": "the fields of fr_collective plus peer, direction; seq = p2p_seq_id, collective_seq = "
    "collective_seq_id: one point-to-point op (send/recv) of a dump",
}

#: profiling_name (after ``nccl:``/``gloo:``) -> the watchdog's OpType spelling.
_OP_TYPE = {
    "all_reduce": "ALLREDUCE", "allreduce": "ALLREDUCE", "broadcast": "BROADCAST", "reduce": "REDUCE",
    "all_gather": "ALLGATHER", "allgather": "ALLGATHER", "_allgather_base": "_ALLGATHER_BASE",
    "all_gather_into_tensor": "_ALLGATHER_BASE", "all_gather_into_tensor_coalesced": "ALLGATHER_COALESCED",
    "allgather_coalesced": "ALLGATHER_COALESCED", "gather": "GATHER", "scatter": "SCATTER",
    "reduce_scatter": "REDUCE_SCATTER", "_reduce_scatter_base": "_REDUCE_SCATTER_BASE",
    "reduce_scatter_tensor": "_REDUCE_SCATTER_BASE", "reduce_scatter_tensor_coalesced": "REDUCESCATTER_COALESCED",
    "all_to_all": "ALLTOALL", "alltoall": "ALLTOALL", "all_to_all_single": "ALLTOALL_BASE",
    "alltoall_base": "ALLTOALL_BASE", "barrier": "BARRIER", "send": "SEND", "recv": "RECV",
    "recv_any_source": "RECVANYSOURCE", "coalesced": "COALESCED", "allreduce_coalesced": "ALLREDUCE_COALESCED",
    "all_reduce_coalesced": "ALLREDUCE_COALESCED", "_allreduce_sparse": "_ALLREDUCE_SPARSE",
}
_P2P = re.compile(r"^(?P<dir>send|recv)\s+(?P<a>-?\d+)\s*(?:->|<-)\s*(?P<b>-?\d+)")
_LIB_FRAME = re.compile(r"/torch/|^<frozen |/threading\.py$")


def op_of(profiling_name: str) -> tuple[str, str | None]:
    """``"nccl:all_reduce"`` -> ``("all_reduce", "nccl")``; ``"nccl:send 0->1"`` -> ``("send", "nccl")``."""
    backend, sep, op = profiling_name.partition(":")
    if not sep:
        backend, op = None, profiling_name  # type: ignore[assignment]
    op = op.strip()
    m = _P2P.match(op)
    if m:
        op = m.group("dir")
    return op.split(" ", 1)[0] or "?", backend


def op_type(op: str) -> str:
    return _OP_TYPE.get(op, re.sub(r"[^A-Za-z0-9_]", "_", op).upper())


def numel(sizes: list[list[int]]) -> int:
    total = 0
    for shape in sizes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def user_frame(frames: list[dict[str, Any]]) -> str | None:
    """The first stack frame outside torch: where the application issued the collective."""
    for fr in frames:
        fn = (fr.get("filename") or "").replace("\\", "/")
        if fn and not _LIB_FRAME.search(fn):
            base = fn.rsplit("/", 1)[-1]
            return f"{base}:{fr.get('line')} ({fr.get('name')})"
    return None


def _fmt_sizes(sizes: list[list[int]]) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in sizes[:4]) + (", ...]" if len(sizes) > 4 else "]")


def _pg_label(guid: str | None, desc: str | None, pg_id: int | None) -> str:
    name = guid if guid not in (None, "") else (str(pg_id) if pg_id is not None else "?")
    return f"pg {name}" + (f" ({desc})" if desc and desc != "undefined" else "")


def _units(entries: list[dict[str, Any]], status: dict[str, int]) -> str | None:
    """Does this PG's pg_status count collectives (NCCL) or every op (gloo counts op ids)?"""
    enq = status.get("enqueued")
    if enq is None or not entries:
        return None
    last = entries[-1]
    if last.get("collective_seq_id") == enq:
        return "collective"
    if last.get("op_id") == enq:
        return "op"
    return None


def _to_seq(entries: list[dict[str, Any]], value: int | None, units: str | None) -> int | None:
    """A pg_status number in collective_seq_id units."""
    if value is None or value < 0 or units != "op":
        return value
    seqs = [e["collective_seq_id"] for e in entries
            if not e["is_p2p"] and e.get("op_id") is not None and e["op_id"] <= value
            and e.get("collective_seq_id") is not None]
    return max(seqs) if seqs else value


def _state_tracked(d: Dump) -> bool:
    """NCCL moves entries scheduled -> started -> completed; gloo leaves every entry 'scheduled'."""
    return any(e["state"] not in (None, "scheduled") or e["time_discovered_completed_ns"] for e in d.entries) \
        or d.backend not in (None, "gloo")


def dump_events(d: Dump) -> list[Event]:
    """All events of one dump (see module docstring)."""
    out: list[Event] = []
    by_pg: dict[int | None, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    order = sorted(d.entries, key=lambda e: (e["record_id"] is None, e["record_id"] or 0, e["pos"]))
    for e in order:
        by_pg[e["pg_id"]].append((e["pos"], e))
    for pid in d.pg_status:
        by_pg.setdefault(pid, [])
    backend = d.backend
    tracked = _state_tracked(d)
    config_by_name = {k: v for k, v in d.pg_config.items() if k != ""}
    anon = d.pg_config.get("")  # gloo writes one config without a name
    world = None
    kept_total = 0
    pg_events: list[Event] = []
    entry_events: list[Event] = []
    for pid in sorted(by_pg, key=lambda p: (p is None, p or 0)):
        items = by_pg[pid]
        ents = [e for _, e in items]
        guid = next((e["pg_guid"] for e in ents if e["pg_guid"] is not None), None)
        desc = next((e["pg_desc"] for e in ents if e["pg_desc"] is not None), None)
        if guid is None and pid == 0:
            guid, desc = "0", desc or "default_pg"
        cfg = config_by_name.get(guid or "") or (anon if anon is not None and len(by_pg) == 1 else None)
        if cfg is None and pid is not None and str(pid) in config_by_name and guid is None:
            cfg = config_by_name[str(pid)]
        ranks = cfg.get("ranks") if cfg else None  # None for groups too large to list
        size = cfg.get("size") if cfg else None
        if cfg and desc is None:
            desc = cfg.get("desc")
        if size and (pid == 0 or guid in ("0", "default_pg")):
            world = max(world or 0, size)
        pg_rank = cfg.get("pg_rank") if cfg and cfg.get("pg_rank") is not None else (d.rank if pid == 0 else None)
        status = d.pg_status.get(pid, {}) if pid is not None else {}
        colls = [e for e in ents if not e["is_p2p"]]
        units = _units(colls, status) if colls else None
        enq = _to_seq(colls, status.get("enqueued"), units)
        comp = _to_seq(colls, status.get("completed"), units)
        started = _to_seq(colls, status.get("started"), units)
        seqs = [e["collective_seq_id"] for e in colls if e["collective_seq_id"] is not None]
        last_seq = max(seqs) if seqs else None
        if enq is None and last_seq is not None:
            enq = last_seq
        last_op = next((op_of(e["profiling_name"])[0] for e in reversed(colls)
                        if e["collective_seq_id"] == last_seq), None) if last_seq is not None else None
        common = {"pg_id": pid, "pg_guid": guid, "pg_desc": desc, "pg_rank": pg_rank}
        label = _pg_label(guid, desc, pid)
        pg_fields = dict(common, ranks=ranks, size=size or None, enqueued=enq, started=started,
                         completed=comp, last_seq=last_seq, last_op=last_op, status_units=units,
                         entries=d.pg_entries.get(pid, len(ents)),
                         status_raw=dict(status))
        txt = (f"rank {d.rank} {label}: last collective #{last_seq} {last_op}" if last_seq is not None
               else f"rank {d.rank} {label}: no collective recorded")
        if status:
            txt += (f"; pg_status last enqueued {status.get('enqueued')}, started {status.get('started')}, "
                    f"completed {status.get('completed')}")
        pg_events.append(Event(kind="fr_pg", file=d.path, line=0, rank=d.rank, fields=pg_fields, text=txt[:MAX_TEXT]))
        keep = items[-MAX_ENTRIES_PER_PG:]
        kept_total += len(keep)
        last_idx = keep[-1][0] if keep else None
        for idx, e in keep:
            entry_events.append(_entry_event(d, idx, e, common, label, backend, tracked, comp, idx == last_idx))
    fields = {"version": d.version, "encoding": d.encoding, "backend": backend, "entries": d.total_entries,
              "entries_kept": kept_total, "world_size": world, "pgs": len(pg_events),
              "comm_lib_version": d.comm_lib_version, "keys": list(d.keys), "notes": list(d.notes)}
    text = (f"flight-recorder dump of rank {d.rank}: version {d.version} ({d.encoding}"
            f"{', ' + backend if backend else ''}), {d.total_entries} entries, {len(pg_events)} process group"
            f"{'s' if len(pg_events) != 1 else ''}" + (f", world {world}" if world else ""))
    out.append(Event(kind="fr_dump", file=d.path, line=0, rank=d.rank, fields=fields, text=text[:MAX_TEXT]))
    out.extend(pg_events)
    out.extend(entry_events)
    return out


_DONE_TEXT = {True: " (completed)", False: " (not completed)", None: ""}


def _entry_event(d: Dump, idx: int, e: dict[str, Any], common: dict[str, Any], label: str, backend: str | None,
                 tracked: bool, completed_seq: int | None, is_last: bool) -> Event:
    op, _be = op_of(e["profiling_name"])
    p2p = e["is_p2p"]
    seq = e["p2p_seq_id"] if p2p else e["collective_seq_id"]
    if e["state"] == "completed" or e["time_discovered_completed_ns"]:
        done: bool | None = True
    elif tracked:
        done = False if e["state"] in ("scheduled", "started") else None
    elif not p2p and completed_seq is not None and e["collective_seq_id"] is not None:
        # gloo: only pg_status knows, and it counts an op that failed (timed out) as completed too:
        # an op before the last one counted has ended; the last one counted may have failed.
        s = e["collective_seq_id"]
        done = True if s < completed_seq else (False if s > completed_seq else None)
    else:
        done = None
    frame = user_frame(e["frames"])
    fields: dict[str, Any] = dict(common)
    fields.update({
        "seq": seq, "p2p_seq": e["p2p_seq_id"], "collective_seq": e["collective_seq_id"], "op_id": e["op_id"],
        "record_id": e["record_id"], "op": op, "op_type": op_type(op), "profiling_name": e["profiling_name"],
        "backend": backend, "numel_in": numel(e["input_sizes"]), "numel_out": numel(e["output_sizes"]),
        "input_sizes": e["input_sizes"], "output_sizes": e["output_sizes"], "input_dtypes": e["input_dtypes"],
        "output_dtypes": e["output_dtypes"], "state": e["state"], "retired": e["retired"], "completed": done,
        "timeout_ms": e["timeout_ms"], "started_ns": e["time_discovered_started_ns"],
        "completed_ns": e["time_discovered_completed_ns"], "duration_ms": e["duration_ms"], "frame": frame,
        "thread_name": e["thread_name"], "is_last": is_last,
    })
    if p2p:
        m = _P2P.match(e["profiling_name"].partition(":")[2].strip() or e["profiling_name"])
        if m:
            fields["direction"] = m.group("dir")
            fields["peer"] = int(m.group("b"))  # "send 0->1" / "recv 1<-0": the second number is the peer
    dt = ",".join(sorted(set(e["input_dtypes"]))) or "-"
    text = (f"rank {d.rank} {label} {'p2p' if p2p else 'collective'} #{seq} {e['profiling_name']} "
            f"in {_fmt_sizes(e['input_sizes'])} {dt} out {_fmt_sizes(e['output_sizes'])} state={e['state']}"
            f"{' retired' if e['retired'] else ''}{_DONE_TEXT[done]}"
            + (f" timeout {e['timeout_ms']}ms" if e["timeout_ms"] is not None else "")
            + (f" at {frame}" if frame else ""))
    ts = e["time_created_ns"] / 1e9 if e["time_created_ns"] else None
    return Event(kind="fr_p2p" if p2p else "fr_collective", file=d.path, line=idx + 1, rank=d.rank, ts=ts,
                 fields=fields, text=text[:MAX_TEXT])
