"""Flight Recorder dumps of every format version, built as torch writes them (FORMATS.md section 3).

``build(version, rank, ops)`` returns the plain structure (a list for torch 2.2, a dict after) of one
rank's dump; ``ops`` is that rank's sequence of collectives ``(name, sizes, dtype)``, or
``("send"|"recv", peer)`` for point-to-point ops.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

VERSIONS = ("2.2", "1.4", "2.1", "2.4", "2.9", "2.10")
T0 = 1_724_779_239_936_775_119

#: A training step: gradient all_reduce, parameter broadcast, loss all_reduce.
STEP = [("all_reduce", [[1024]], "Float"), ("broadcast", [[256]], "Float"), ("all_reduce", [[1]], "Float")]


def frames(line: int) -> list[dict[str, Any]]:
    return [{"name": "all_reduce", "filename": "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
             "line": 3245},
            {"name": "train_step", "filename": "/job/train.py", "line": line}]


def entry(version: str, i: int, op: tuple, coll: int, p2p: int, rank: int, state: str = "completed",
          backend: str = "nccl") -> dict[str, Any]:
    """One entry in the layout of ``version``."""
    is_p2p = op[0] in ("send", "recv")
    if is_p2p:
        peer = op[1]
        name = f"{backend}:send {rank}->{peer}" if op[0] == "send" else f"{backend}:recv {rank}<-{peer}"
        sizes, dtype = [[16]], "Float"
    else:
        name, sizes, dtype = f"{backend}:{op[0]}", op[1], op[2]
    done = state == "completed"
    if version == "2.2":
        return {"pg_id": 0, "seq_id": i + 1, "profiling_name": name, "time_created_us": (T0 + i * 1000) // 1000,
                "input_sizes": sizes, "output_sizes": sizes, "state": state, "retired": done, "frames": frames(10 + i)}
    e: dict[str, Any] = {
        "record_id": i, "pg_id": 0, "op_id": i + 1, "profiling_name": name, "time_created_ns": T0 + i * 1000,
        "input_sizes": sizes, "output_sizes": sizes, "state": state, "time_discovered_started_ns": None,
        "time_discovered_completed_ns": T0 + i * 1000 + 500 if done else None, "retired": done,
        "frames": frames(10 + i),
    }
    if version == "1.4":
        e["seq_id"] = i + 1
        return e
    e.update({"process_group": ("0", "default_pg"), "collective_seq_id": coll, "p2p_seq_id": p2p, "is_p2p": is_p2p,
              "input_dtypes": [dtype], "output_dtypes": [dtype]})
    if version in ("2.4", "2.9", "2.10"):
        e["timeout_ms"] = 600000
    if version in ("2.9", "2.10"):
        e.update({"thread_id": "140397146213248", "thread_name": "pt_main_thread"})
    return e


def build(version: str, rank: int, ops: list[tuple], world: int = 4, pending_last: bool = True,
          backend: str = "nccl") -> Any:
    """One rank's dump; the last op is left 'started' (the one it is stuck in) when ``pending_last``."""
    entries = []
    coll = p2p = 0
    for i, op in enumerate(ops):
        if op[0] in ("send", "recv"):
            p2p += 1
        else:
            coll += 1
        state = "started" if pending_last and i == len(ops) - 1 else "completed"
        entries.append(entry(version, i, op, coll, p2p, rank, state, backend))
    if version == "2.2":
        return entries
    dump: dict[str, Any] = {"entries": entries, "version": version,
                            "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                "ranks": str(list(range(world)))}}}
    if version in ("2.4", "2.9", "2.10"):
        done = coll - 1 if pending_last else coll
        dump["pg_status"] = {"0": {"last_enqueued_collective": coll, "last_started_collective": coll,
                                   "last_completed_collective": done}}
    if version == "2.9":
        dump["nccl_version"] = "2.21.5"
    if version == "2.10":
        dump["comm_lib_version"] = "2.21.5"
    return dump


def as_json(dump: dict[str, Any]) -> bytes:
    """The JSON form (``_dump_fr_trace_json``): tuples become lists, pg_status values strings, unset times 0."""
    d = json.loads(json.dumps(dump))
    for st in d.get("pg_status", {}).values():
        for k in list(st):
            st[k] = str(st[k])
    for e in d["entries"]:
        e.pop("frames", None)
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            if e.get(k) is None:
                e[k] = 0
    return json.dumps(d).encode()


def write_job(folder: Path, version: str, ops_by_rank: dict[int, list[tuple]], protocol: int = 2,
              fmt: str = "pickle", **kw: Any) -> list[Path]:
    """Write one dump per rank as ``nccl_trace_rank_<rank>`` (``.json`` for JSON)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    world = kw.pop("world", max(ops_by_rank) + 1)
    for rank, ops in ops_by_rank.items():
        dump = build(version, rank, ops, world=world, **kw)
        if fmt == "json":
            path = folder / f"nccl_trace_rank_{rank}.json"
            path.write_bytes(as_json(dump))
        else:
            path = folder / f"nccl_trace_rank_{rank}"
            path.write_bytes(pickle.dumps(dump, protocol=protocol))
        out.append(path)
    return out
