"""A saved JSON report (``analyze --format json -o r.json``) read back, so that ``tui r.json`` and
``plot r.json`` show a large job without parsing its logs again.

The report is untrusted input like any log: it is read with ``json`` only (never unpickled), its
size is capped, and every value is checked for its type before use; anything that is not a
report of this schema version is one clear error. The job model is rebuilt from ``ranks[]`` with a
few events per rank standing for what the report says (the init stage reached, the SeqNum and
opCount, the evidence lines of the findings that name the rank), which is what the timeline draws.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from typing import Any

from ..analysis import Report
from ..discover import InputError
from ..events import Event, LastLine
from ..findings import Evidence, Finding, Severity
from ..model.job import STAGES, JobModel, RankState
from .jsonout import READABLE_VERSIONS

#: A saved report larger than this is refused (a 16k-rank report is about 30 MB).
MAX_BYTES = 1 << 30
#: An event kind that puts a rank at each init stage on the timeline.
_STAGE_EVENT = {"started": ("nccl_version", {}), "bootstrap": ("nccl_bootstrap", {}),
                "init_start": ("nccl_init", {"what": "Init", "phase": "START"}), "topology": ("nccl_topo", {}),
                "connected": ("nccl_connected", {}), "init_complete": ("nccl_init", {"what": "Init", "phase": "COMPLETE"}),
                "running": ("train_step", {}), "finished": ("nccl_init", {"what": "Destroy", "phase": "COMPLETE"})}


#: Rules whose evidence shows where a rank stopped or what it had not reached, not an error of it.
QUIET_RULES = ("RK2", "RK3")


class SavedJob(JobModel):
    """A job model rebuilt from a report: versions are the report's, not the ranks' lines'."""

    __slots__ = ("saved_versions",)

    def versions(self, what: str) -> list[str]:
        return list(self.saved_versions.get(what, []))


def looks_like_report(path: str) -> bool:
    """A JSON object that starts like an nccl-doctor report (cheap: the first 4 KB)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and b'"schema_version"' in head


def report_from_json(path: str) -> Report:
    """The Report a saved JSON report describes; InputError (one line) when it is not one."""
    try:
        if os.path.getsize(path) > MAX_BYTES:
            raise InputError(f"{path}: a saved report larger than {MAX_BYTES >> 20} MB is not read")
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable JSON report ({exc})") from None
    if not isinstance(d, dict) or d.get("schema_version") not in READABLE_VERSIONS or \
            (d.get("tool") or {}).get("name") != "nccl-doctor":
        version = d.get("schema_version") if isinstance(d, dict) else None
        raise InputError(f"{path}: not an nccl-doctor report of schema version {' or '.join(map(str, READABLE_VERSIONS))} "
                         f"(found {version!r}); run `nccl-doctor analyze --format json -o FILE` again")
    try:
        return _report(d)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: a malformed report ({type(exc).__name__}: {exc})") from None


def _report(d: dict[str, Any]) -> Report:
    findings = [_finding(f) for f in d["findings"]]
    ranks = [_rank(r, findings) for r in d["ranks"]]
    job_d = d["job"]
    job = SavedJob(ranks=ranks, events=[e for r in ranks for e in r.events], ranks_expected=_int(job_d["ranks_expected"]),
                   hosts=[str(h) for h in job_d["hosts"]], files=[], last_lines={})
    job.saved_versions = {"nccl": [str(v) for v in job_d["nccl_versions"]],
                          "torch": [str(v) for v in job_d["torch_versions"]]}
    job.index = {id(e): r for r in ranks for e in r.events}
    inputs = d["inputs"]
    return Report(job=job, findings=findings, verdict=d["verdict"] if isinstance(d["verdict"], dict) else None,
                  last_rank_to_report=d["last_rank_to_report"] if isinstance(d["last_rank_to_report"], dict) else None,
                  inputs=inputs, notes=[str(n) for n in d.get("notes") or []])


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _finding(f: dict[str, Any]) -> Finding:
    return Finding(rule=str(f["rule"]), title=str(f["title"]), severity=Severity.parse(f["severity"]),
                   confidence=str(f["confidence"]), summary=str(f["summary"]),
                   ranks=[r for r in f["ranks"] if _int(r) is not None], hosts=[str(h) for h in f["hosts"]],
                   evidence=[Evidence(str(e["file"]), int(e["line"]), _int(e["rank"]), str(e["text"]))
                             for e in f["evidence"]],
                   remedy=str(f["remedy"]), references=[str(x) for x in f["references"]])


def _ts(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=_dt.UTC).timestamp()
    except ValueError:
        return None


def _seqs(v: Any) -> dict[str, int]:
    return {str(k): n for k, n in (v or {}).items() if _int(n) is not None}


def _rank(r: dict[str, Any], findings: list[Finding]) -> RankState:
    rank, host, pid = _int(r["rank"]), r["host"] if isinstance(r["host"], str) else None, _int(r["pid"])
    ll = r["last_line"]
    last = LastLine(str(ll["file"]), int(ll["line"]), str(ll["text"]), _ts(r["last_ts"])) if isinstance(ll, dict) else None
    stage = r["stage"] if r["stage"] in STAGES else "none"
    st = RankState(rank=rank, host=host, pid=pid, cuda_dev=_int(r["cuda_dev"]), local_rank=_int(r["local_rank"]),
                   rank_source=r.get("rank_source") if isinstance(r.get("rank_source"), str) else None,
                   files=[last.file] if last else [], events=[], stage=stage, last_line=last,
                   last_seq=_seqs(r["last_seq"]), enqueued=_seqs(r["last_enqueued"]), completed=_seqs(r["last_completed"]),
                   last_step=_int(r["last_step"]), status=str(r["status"]))
    st.events = _events(st, r, findings)
    return st


def _events(st: RankState, r: dict[str, Any], findings: list[Finding]) -> list[Event]:
    """What the report says about one rank, as the events the timeline draws (in causal order)."""
    where = (st.last_line.file, st.last_line.line) if st.last_line else ("(saved report)", 1)

    def ev(kind: str, fields: dict, text: str = "", file: str = where[0], line: int = where[1]) -> Event:
        return Event(kind=kind, file=file, line=line, host=st.host, pid=st.pid, cuda_dev=st.cuda_dev, rank=st.rank,
                     fields=dict(fields), text=text or "(as the saved report says)")

    out: list[Event] = []
    if st.stage in _STAGE_EVENT:
        kind, fields = _STAGE_EVENT[st.stage]
        out.append(ev(kind, fields))
    for pg in sorted(set(st.last_seq) | set(st.enqueued)):
        seq = st.last_seq.get(pg)
        out.append(ev("torch_work_update", {"pg_id": 0 if pg == "default" else None, "pg_guid": None if pg == "default" else pg,
                                            "enqueued": max(v for v in (seq, st.enqueued.get(pg)) if v is not None)}))
    coll = r.get("last_coll")
    if isinstance(coll, dict) and _int(coll.get("opcount")) is not None:
        out.append(ev("nccl_coll", {"op": coll.get("op"), "opcount": f"{coll['opcount']:x}",
                                    "nranks": _int(coll.get("comm_ranks"))}))
    for f in findings:  # the findings' evidence lines of this rank: errors, timeouts, warnings
        if f.rule in QUIET_RULES:
            continue
        for e in f.evidence:
            if st.rank is not None and e.rank == st.rank:
                kind = "torch_wd_timeout" if f.rule == "MN3" else (
                    "python_exception" if f.severity is Severity.ERROR else "nccl_warn")
                out.append(ev(kind, {}, e.text, e.file, e.line))
    return out
