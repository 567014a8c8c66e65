"""The rule registry: one module per catalogue id, metadata in catalogue.toml, docs in docs/.

``registry`` lists every rule; ``run(job, ...)`` runs a selection over a job model.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from ..findings import Finding, Severity
from ..model import JobModel
from .base import DOC_HEADINGS, Registry, Rule, gpu_hints, load_catalogue, make_rule

registry = Registry()
for _rid in load_catalogue():
    if importlib.util.find_spec(f"{__name__}.{_rid}") is not None:
        registry.register(make_rule(_rid))


#: Event kinds (prefixes) only a GPU job writes: NCCL's lines, CUDA errors, Xids, ProcessGroupNCCL's
#: watchdog and its flight recorder.
_GPU_KINDS = ("nccl", "cuda", "xid", "torch_wd", "torch_nccl", "torch_heartbeat", "torch_watchdog", "torch_monitor",
              "torch_exception_hit", "fr_", "frtrace")


def _cpu_job(job: JobModel) -> bool:
    """A job on CPU: its lines show gloo (its transport errors, its timeouts, a backend named) and
    nothing only a GPU job writes."""
    if any(job.kinds(p) for p in _GPU_KINDS):
        return False
    return bool(job.kinds("gloo")) or any("gloo" in e.text for e in job.by_kind(
        "python_exception", "cpp_terminate", "rank_world", "torch_store_timeout")[:2000])


def run(job: JobModel, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None,
        min_severity: Severity | str = Severity.INFO, live_only: bool = False) -> tuple[list[Finding], list[str]]:
    """Run rules over a job. Returns (findings, notes); a rule that crashes yields a note, not a crash.

    ``live_only``: only the rules judged on arrival times (``Rule.live``), re-run as time passes.
    """
    floor = Severity.parse(min_severity).level
    findings: list[Finding] = []
    notes: list[str] = []
    for rule in registry.select(select, ignore):
        if live_only and not rule.live:
            continue
        try:
            got = rule.check(job, rule)
        except Exception as exc:  # a bug in one rule must not hide the others' findings
            notes.append(f"rule {rule.id} failed: {type(exc).__name__}: {exc}")
            continue
        findings.extend(f for f in got if f.severity.level >= floor)
    if _cpu_job(job):  # no GPU advice
        for f in findings:
            if any(hint.split()[0] in f.remedy for hint in gpu_hints()):
                f.remedy = " ".join(f.remedy.split())  # (the hints are matched on single-spaced text)
                for hint in gpu_hints():
                    f.remedy = f.remedy.replace(hint, "")
    return sort_findings(findings), notes


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """The report's order: most severe first, then by rule id."""
    findings.sort(key=lambda f: (-f.severity.level, f.rule))
    return findings


__all__ = ["DOC_HEADINGS", "Registry", "Rule", "registry", "run", "sort_findings"]
