"""The rule contract: metadata as data (catalogue.toml), detection as one function per rule file.

A rule module ``nccl_doctor/rules/<ID>.py`` defines ``check(job: JobModel) -> list[Finding]`` and
nothing else that the engine needs (a live rule may add ``resolved(job, finding) -> str``: why a
finding it reported went away); its metadata (title, severity, references, the event kinds it
uses) lives in ``catalogue.toml`` and its documentation in ``docs/<ID>.md``. Rules never read files.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..findings import Evidence, Finding, Severity
from ..model import JobModel

HERE = Path(__file__).resolve().parent
DOC_HEADINGS = ("What it means", "Why it happens", "Evidence it uses", "Example lines", "What to do",
                "False positives")


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    name: str
    title: str
    severity: Severity
    status: str
    remedy: str
    references: tuple[str, ...]
    needs: tuple[str, ...]
    check: Callable[[JobModel], list[Finding]]
    #: Judged on arrival times (``watch``): re-run as time passes, silent in a batch analysis.
    live: bool = False
    #: ``resolved(job, finding) -> str``: why a finding it reported went away (optional).
    resolved: Callable | None = None

    def doc(self) -> str:
        path = HERE / "docs" / f"{self.id}.md"
        return path.read_text(encoding="utf-8") if path.is_file() else f"# {self.id}: {self.title}\n"

    def finding(self, summary: str, *, severity: Severity | str | None = None, confidence: str = "high",
                ranks: Iterable[int | None] = (), hosts: Iterable[str | None] = (), evidence: Iterable = (),
                remedy: str | None = None, first_seen: float | None = None,
                blame_ranks: Iterable[int | None] = (), blame_hosts: Iterable[str | None] = (),
                subject: str = "") -> Finding:
        """Build a finding with this rule's metadata filled in."""
        ev_list = [e if isinstance(e, Evidence) else Evidence.of(e) for e in evidence]
        return Finding(rule=self.id, title=self.title,
                       severity=Severity.parse(severity) if severity else self.severity,
                       confidence=confidence, summary=summary,
                       ranks=sorted({r for r in ranks if r is not None}),
                       hosts=sorted({short_host(h) for h in hosts if h}), evidence=ev_list[:8],
                       remedy=remedy if remedy is not None else self.remedy,
                       references=list(self.references), first_seen=first_seen,
                       blame_ranks=sorted({r for r in blame_ranks if r is not None}),
                       blame_hosts=sorted({short_host(h) for h in blame_hosts if h}), subject=subject)


_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def short_host(host: str) -> str:
    """Host names as NCCL prints them (cut at the first dot), so that ``node-17.cluster`` from a
    ChildFailedError and ``node-17`` from an NCCL line are one host; IP addresses stay whole."""
    return host if _IPV4.match(host) or ":" in host else host.split(".", 1)[0]


class Registry:
    """An explicit registry: ids are unique, refused when registered twice."""

    def __init__(self) -> None:
        self._rules: dict[str, Rule] = {}

    def register(self, rule: Rule) -> None:
        if rule.id in self._rules:
            raise ValueError(f"duplicate rule id {rule.id}")
        self._rules[rule.id] = rule

    def __iter__(self):
        return iter(self._rules.values())

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, rule_id: str) -> bool:
        return rule_id.upper() in self._rules

    def get(self, rule_id: str) -> Rule:
        try:
            return self._rules[rule_id.upper()]
        except KeyError:
            raise KeyError(f"unknown rule {rule_id!r}; `nccl-doctor rules` lists them") from None

    def ids(self) -> list[str]:
        return list(self._rules)

    def expand(self, ids: Iterable[str]) -> list[str]:
        """Rule ids from ids or id prefixes (``RK`` -> RK1, RK2, RK3; ``MN3`` -> MN3), like ruff's
        ``--select``; a prefix that matches no rule is an error."""
        out: list[str] = []
        for given in ids:
            key = given.strip().upper()
            hits = [key] if key in self._rules else [rid for rid in self._rules if rid.startswith(key)]
            if not key or not hits:
                raise KeyError(f"unknown rule {given!r}; `nccl-doctor rules` lists them")
            out += [h for h in hits if h not in out]
        return out

    def select(self, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> list[Rule]:
        """The rules chosen by ``select`` (all when None) minus ``ignore``; both take ids or prefixes."""
        chosen = set(self.expand(select)) if select else None
        dropped = set(self.expand(ignore or ()))
        return [r for r in self._rules.values() if (chosen is None or r.id in chosen) and r.id not in dropped]


@lru_cache(maxsize=1)
def _catalogue_data() -> dict:
    return tomllib.loads((HERE / "catalogue.toml").read_text(encoding="utf-8"))


def load_catalogue() -> dict[str, dict]:
    return {item["id"]: item for item in _catalogue_data()["rule"]}


def gpu_hints() -> tuple[str, ...]:
    """Fragments of remedies that only fit a GPU job (catalogue.toml ``gpu_hints``)."""
    return tuple(_catalogue_data().get("gpu_hints", ()))


def make_rule(rule_id: str) -> Rule:
    meta = load_catalogue()[rule_id]
    module = importlib.import_module(f"{__package__}.{rule_id}")
    return Rule(id=rule_id, name=meta["name"], title=meta["title"], severity=Severity.parse(meta["severity"]),
                status=meta.get("status", "stable"), remedy=meta.get("remedy", "").strip(),
                references=tuple(meta.get("references", ())), needs=tuple(meta.get("needs", ())),
                check=module.check, live=bool(meta.get("live", False)), resolved=getattr(module, "resolved", None))
