"""Which findings to report, and when: each new or changed finding once it has settled, and each
reported finding once it has gone away (resolved), so that an alert bot can open and close incidents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .findings import Finding


@dataclass(frozen=True, slots=True)
class Update:
    """A finding reported by :meth:`Analyzer.updates`: ``status`` is ``"new"``, ``"changed"`` or
    ``"resolved"`` (the finding is gone: progress resumed, the file that showed it was truncated);
    ``note`` says why it was resolved."""

    status: str
    finding: Finding
    note: str = ""

    def to_dict(self) -> dict:
        out = {"status": self.status, "finding": self.finding.to_dict()}
        if self.note:
            out["note"] = self.note
        return out


def overlaps(a: tuple, b: tuple) -> bool:
    """Two finding keys (rule, ranks, hosts) of one rule that are about the same thing: they share a
    rank or a host, or one of them names nobody (a job-level finding, refined or generalised)."""
    if a[0] != b[0]:
        return False
    ranks_a, hosts_a, ranks_b, hosts_b = set(a[1]), set(a[2]), set(b[1]), set(b[2])
    return bool(ranks_a & ranks_b or hosts_a & hosts_b or not (ranks_a or hosts_a) or not (ranks_b or hosts_b))


class Alerts:
    """The reporting state of one stream of findings.

    ``settle``: a finding is reported once it has stayed the same (same rule, ranks, hosts, severity
    and confidence) that long, so that a cascade of timeouts gives one alert, not one per rank; a
    reported finding is resolved once no finding of its rule has covered it for that long.
    """

    def __init__(self, settle: float = 0.0):
        self.settle = settle
        self._since: dict[tuple, float] = {}  # material fingerprint -> when it (last) appeared
        self._reported: dict[tuple, tuple] = {}  # finding key -> material fingerprint reported
        self._shown: dict[tuple, Finding] = {}  # finding key -> the finding reported under it
        self._gone: dict[tuple, float] = {}  # reported key -> since when no finding covers it

    def step(self, current: list[Finding], now: float, *, final: bool = False,
             why_resolved: Callable[[Finding], str] | None = None) -> list[Update]:
        """The updates due at ``now`` for the findings ``current`` (``final``: ignore ``settle``)."""
        marks = {f.material: f for f in current}
        self._since = {m: self._since.get(m, now) for m in marks}
        out: list[Update] = []
        for mark, f in marks.items():
            if self._reported.get(f.key) == mark:
                continue
            if not final and now - self._since[mark] < self.settle:
                continue
            before = [k for k in self._reported if k != f.key and overlaps(k, f.key)]
            status = "changed" if before or f.key in self._reported else "new"
            for k in before:  # superseded: resolving it later would be a false all-clear
                self._drop(k)
            self._reported[f.key] = mark
            self._shown[f.key] = f
            out.append(Update(status, f))
        for key in list(self._reported):
            if any(f.key == key or overlaps(key, f.key) for f in current):
                self._gone.pop(key, None)
                continue
            since = self._gone.setdefault(key, now)
            if final or now - since >= self.settle:
                f = self._shown[key]
                self._drop(key)
                out.append(Update("resolved", f, why_resolved(f) if why_resolved else ""))
        return out

    def _drop(self, key: tuple) -> None:
        self._reported.pop(key, None)
        self._shown.pop(key, None)
        self._gone.pop(key, None)


__all__ = ["Alerts", "Update", "overlaps"]
