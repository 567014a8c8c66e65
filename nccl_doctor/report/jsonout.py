"""The JSON contract (schema_version 2); the library's ``Report.to_dict()`` returns the same dict.

Version 2 (from 1): ``verdict`` has ``headline`` (one line: who, what, what followed, the rules)
and ``rules`` (the findings it joins, in causal order); ``ranks[]`` has ``last_coll`` (the rank's
last NCCL COLL line: op, opCount, communicator size). ``summary`` is unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from .reach import last_coll

SCHEMA_VERSION = 2


def _rank_dict(r) -> dict[str, Any]:
    ll = r.last_line
    return {
        "rank": r.rank, "host": r.host, "pid": r.pid, "cuda_dev": r.cuda_dev, "local_rank": r.local_rank,
        "rank_source": r.rank_source,
        "last_line": {"file": ll.file, "line": ll.line, "text": ll.text} if ll else None,
        "last_ts": _iso(ll.ts) if ll and ll.ts is not None else None,
        "stage": r.stage, "last_seq": dict(r.last_seq),
        "last_enqueued": dict(r.enqueued), "last_completed": dict(r.completed),
        "last_coll": last_coll(r), "last_step": r.last_step, "status": r.status,
    }


def _iso(ts: float) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def report_dict(report) -> dict[str, Any]:
    job = report.job
    pgs = sorted({pg for r in job.ranks for pg in list(r.last_seq) + list(r.enqueued)})
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "nccl-doctor", "version": __version__},
        "inputs": report.inputs,
        "job": {
            "ranks_expected": job.ranks_expected,
            "ranks_seen": job.ranks_seen,
            "hosts": job.hosts,
            "nccl_versions": job.versions("nccl"),
            "torch_versions": job.versions("torch"),
            "process_groups": pgs,
        },
        "verdict": report.verdict,
        "findings": [f.to_dict() for f in report.findings],
        "ranks": [_rank_dict(r) for r in job.ranks],
        "last_rank_to_report": report.last_rank_to_report,
        "notes": list(report.notes),
    }


def to_json(report, indent: int | None = 2) -> str:
    return json.dumps(report_dict(report), indent=indent, ensure_ascii=False)
