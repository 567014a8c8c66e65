"""Findings: what a rule concludes, with its evidence (file:line + text) and the exact fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .events import MAX_TEXT, Event
from .report.safe import plain


class Severity(StrEnum):
    """``error`` explains a failure, ``warning`` is a latent trap, ``info`` is context."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def level(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]

    @classmethod
    def parse(cls, value: str | Severity) -> Severity:
        if isinstance(value, Severity):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(f"unknown severity {value!r} (use info, warning or error)") from None


@dataclass(slots=True, frozen=True)
class Evidence:
    file: str
    line: int
    rank: int | None
    text: str

    @classmethod
    def of(cls, ev: Event) -> Evidence:
        return cls(ev.file, ev.line, ev.rank, ev.text[:MAX_TEXT])

    def to_dict(self) -> dict[str, Any]:
        """Inert text: the file name and the line as every face shows them (report.safe)."""
        return {"file": plain(self.file, 1000), "line": self.line, "rank": self.rank, "text": plain(self.text, 2 * MAX_TEXT)}


@dataclass(slots=True)
class Finding:
    rule: str
    title: str
    severity: Severity
    confidence: str  # high | medium | low
    summary: str
    ranks: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    remedy: str = ""
    references: list[str] = field(default_factory=list)
    #: Causal order hint for the verdict: time or position of the first evidence (smaller = earlier).
    first_seen: float | None = None
    #: What the finding blames, when narrower than everything it involves (MN2: the host that
    #: advertised docker0, not the ranks that failed to connect to it). Used by the verdict.
    blame_ranks: list[int] = field(default_factory=list)
    blame_hosts: list[str] = field(default_factory=list)
    #: Who it names when that is no rank or host ("a node that --nnodes expects", "the next
    #: rendezvous round"): the verdict's headline says it.
    subject: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "title": self.title,
            "severity": self.severity.value,
            "confidence": self.confidence,
            "summary": plain(self.summary, 4000),
            "ranks": sorted(set(self.ranks)),
            "hosts": sorted({plain(h, 200) for h in self.hosts}),
            "evidence": [e.to_dict() for e in self.evidence],
            "remedy": self.remedy,
            "references": list(self.references),
        }

    @property
    def material(self) -> tuple:
        """What makes a finding worth reporting again: who (the key) and how bad."""
        return self.key + (self.severity.value, self.confidence)

    @property
    def key(self) -> tuple:
        """Identity for de-duplication and for 'new or changed' in incremental mode."""
        return (self.rule, tuple(sorted(set(self.ranks))), tuple(sorted(set(self.hosts))))
