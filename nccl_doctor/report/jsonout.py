"""The JSON contract (schema_version 3); the library's ``Report.to_dict()`` returns the same dict.

Version 3 (from 2): ``ranks[].status`` may be ``echo``: the rank ended in an error that is what it
saw of another's failure (version 2 called such a rank ``ok``), and ``timed_out`` also covers a
rank that gave up waiting at the store or a barrier. Nothing else changed: a version-2
report is read as it was.

Version 2 (from 1): ``verdict`` has ``headline`` (one line: who, what, what followed, the rules)
and ``rules`` (the findings it joins, in causal order); ``ranks[]`` has ``last_coll`` (the rank's
last NCCL COLL line: op, opCount, communicator size). ``summary`` is unchanged.

Text that came from the inputs (summaries, host and file names, log lines, skip reasons) is made
inert by ``report.safe.plain`` like on every other face; numbers that JSON cannot hold (NaN,
infinities, integers of thousands of digits) become null rather than ending the run.
"""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from .reach import last_coll
from .safe import plain

SCHEMA_VERSION = 3
#: The versions a saved report may have to be read back (version 3 only adds a status).
READABLE_VERSIONS = (2, 3)


def _rank_dict(r) -> dict[str, Any]:
    ll = r.last_line
    return {
        "rank": r.rank, "host": _opt(r.host), "pid": r.pid, "cuda_dev": r.cuda_dev, "local_rank": r.local_rank,
        "rank_source": r.rank_source,
        "last_line": {"file": plain(ll.file, 1000), "line": ll.line, "text": plain(ll.text, 800)} if ll else None,
        "last_ts": _iso(ll.ts) if ll and ll.ts is not None else None,
        "stage": r.stage, "last_seq": dict(r.last_seq),
        "last_enqueued": dict(r.enqueued), "last_completed": dict(r.completed),
        "last_coll": last_coll(r), "last_step": r.last_step, "status": r.status,
    }


def _opt(text: str | None, limit: int = 200) -> str | None:
    return None if text is None else plain(text, limit)


def _iso(ts: float) -> str | None:
    """UTC time of a timestamp; None when it is no date a calendar holds (a hostile dump's 10^32 ns)."""
    import datetime as _dt

    try:
        return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return None


def inert(d: dict[str, Any] | None) -> dict[str, Any] | None:
    """A verdict or last-rank dict with its free text (summary, why, host names) made inert."""
    if d is None:
        return None
    out = dict(d)
    for key, limit in (("summary", 4000), ("headline", 400), ("why", 4000), ("host", 200)):
        if isinstance(out.get(key), str):
            out[key] = plain(out[key], limit)
    if isinstance(out.get("hosts"), list):
        out["hosts"] = [plain(h, 200) for h in out["hosts"]]
    return out


def report_dict(report) -> dict[str, Any]:
    job = report.job
    pgs = sorted({pg for r in job.ranks for pg in list(r.last_seq) + list(r.enqueued)})
    inputs = dict(report.inputs)
    inputs["skipped"] = [{"path": plain(s["path"], 1000), "reason": plain(s["reason"], 1000)}
                         for s in report.inputs.get("skipped", [])]
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "nccl-doctor", "version": __version__},
        "inputs": inputs,
        "job": {
            "ranks_expected": job.ranks_expected,
            "ranks_seen": job.ranks_seen,
            "hosts": [plain(h, 200) for h in _hosts(report)],
            "nccl_versions": [plain(v, 100) for v in job.versions("nccl")],
            "torch_versions": [plain(v, 100) for v in job.versions("torch")],
            "process_groups": [plain(p, 200) for p in pgs],
        },
        "verdict": inert(report.verdict),
        "findings": [f.to_dict() for f in report.findings],
        "ranks": [_rank_dict(r) for r in job.ranks],
        "last_rank_to_report": inert(report.last_rank_to_report),
        "notes": [plain(n, 2000) for n in report.notes],
    }


def _hosts(report) -> list[str]:
    """The hosts the lines name, and any other the verdict places a rank on (a node known only by its file's
    name, a lost node its peers' lines point to): the job line counts the hosts the report speaks of."""
    known = list(report.job.hosts)
    told = (report.verdict or {}).get("hosts") or []
    return known + sorted({str(h) for h in told if h and h not in known})


def to_json(report, indent: int | None = 2) -> str:
    data = report_dict(report)
    try:
        return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    except (ValueError, OverflowError):  # NaN/inf, or an int too long to print: never end the run on it
        return json.dumps(_jsonable(data), indent=indent, ensure_ascii=False, allow_nan=False)


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A copy that JSON can hold: non-finite floats and huge ints become None (iterative depth is
    bounded by the report's own shape, a few levels)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else None
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if depth > 32:
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    return plain(str(value), 400)
