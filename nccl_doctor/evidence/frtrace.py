"""What the Flight Recorder analyzer's saved output (``torchfrtrace``) says: blocks, culprits, missing ranks.

The analyzer prints one block per collective it could not match: a header (``Not all ranks joining
collective, sequence number: 11``, ``Collective sequence number: 10 has errors``, ...) and ``key:
value`` lines (``group info``, ``collective``, ``missing ranks: {2}``, ``expected ranks``, ``error msg:
Culprit rank 2; Error type: ...``). ``blocks(job)`` reads them back from the ``frtrace_*`` events in
line order. Ranks there are *global* ranks.

After the first mismatch of a process group the analyzer stops pairing that group's entries, so a
later block can blame ranks that did nothing wrong (a real run: rank 2 stalled after collective 10,
the block for #11 says ``missing ranks: {2}``, the one for #12 ``{0, 2}``). Only the first block of
each group is evidence:

* ``missing(job)``: the ranks missing at a group's first "not all ranks joining" block, and the
  ranks whose dumps were missing (``Missing dump files from ranks {1}``, ``we missed FR dumps from
  ranks ({1})``: a killed rank writes none) -- RK2;
* ``culprits(job)``: the odd ranks of a group's first "has errors" block whose error is a different
  collective, size or dtype -- DSY1. "Culprit" is relative to the first rank the analyzer loaded: when
  every other member is named, the first one is the odd one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..events import Event
from ..model import JobModel
from .facts import _per_job

KINDS = ("frtrace_header", "frtrace_field", "frtrace_note")
#: Error types that mean the ranks issued different collectives (a desync); a state mismatch does not.
DESYNC_TYPES = ("COLLECTIVE_TYPE_MISMATCH", "SIZE_OR_SYNTAX_MISMATCH", "COLLECTIVE_DTYPE_MISMATCH")
_CULPRIT = re.compile(r"Culprit rank (\d{1,10}); Error type: ([A-Z_]{1,64})(?:, )?")
#: key: value lines are consecutive; a block's stack trace lines are not parsed, so allow a gap.
_GAP = 200


def rank_set(text: object) -> list[int]:
    """``'{0, 2}'`` -> [0, 2]."""
    return sorted({int(x) for x in re.findall(r"\d{1,10}", str(text or ""))})


@dataclass(slots=True, eq=False)
class Block:
    what: str  # not_joining | io_mismatch | errors
    event: Event
    seq: int | None = None
    group: str | None = None  # "0:default_pg" as printed
    collective: str | None = None
    missing: list[int] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)
    state: str | None = None
    errors: list[tuple[int, str, str]] = field(default_factory=list)  # (culprit rank, type, detail)
    events: list[Event] = field(default_factory=list)

    @property
    def label(self) -> str:
        what = (self.collective or "a collective").split(":", 1)[-1]
        where = f" of group {self.group}" if self.group else ""
        return f"{what} #{self.seq}{where}" if self.seq is not None else f"{what}{where}"


def _culprits(text: str) -> list[tuple[int, str, str]]:
    out = []
    marks = list(_CULPRIT.finditer(text))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out.append((int(m.group(1)), m.group(2), text[m.end():end].rstrip(", ")))
    return out


@_per_job
def blocks(job: JobModel) -> list[Block]:
    out: list[Block] = []
    cur: Block | None = None
    last_line = 0
    for ev in job.by_kind(*KINDS):
        if ev.kind == "frtrace_header":
            what = ev.get("what") or ("not_joining" if ev.get("notall") else "io_mismatch" if ev.get("io") else "errors")
            cur = Block(str(what), ev, ev.get("seq"), ev.get("pg"), ev.get("name"), rank_set(ev.get("missing")))
            cur.events.append(ev)
            out.append(cur)
            last_line = ev.line
            continue
        if ev.kind != "frtrace_field" or cur is None or ev.file != cur.event.file or ev.line - last_line > _GAP:
            if ev.kind == "frtrace_note":
                cur = None
            continue
        last_line = ev.line
        key, value = ev.get("key"), str(ev.get("value") or "")
        if key == "group info":
            cur.group = value.strip()
        elif key == "collective":
            cur.collective = value.strip()
        elif key == "missing ranks":
            cur.missing = rank_set(value)
            cur.events.append(ev)
        elif key == "expected ranks":
            cur.expected = rank_set(value) if "{" in value else []  # older analyzers print a count
        elif key == "collective state":
            cur.state = value.strip()
        elif key in ("error msg", "error message"):
            cur.errors = _culprits(value)
            cur.events.append(ev)
    return out


def _group_key(b: Block) -> tuple:
    return (b.event.file, (b.group or "").split(":", 1)[0])


@_per_job
def first_blocks(job: JobModel) -> list[Block]:
    """The first block of each process group (per analyzer output file)."""
    seen: set[tuple] = set()
    out = []
    for b in blocks(job):
        key = _group_key(b)
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


@dataclass(slots=True, eq=False)
class Named:
    """Ranks the analyzer names (missing at a first mismatch, without a dump, or culprits), and why."""

    ranks: list[int]
    reason: str
    events: list[Event]
    confidence: str = "high"
    majority: bool = False  # culprits: they differ from a majority of the group


@_per_job
def missing(job: JobModel) -> list[Named]:
    out = []
    for b in first_blocks(job):
        if b.what == "not_joining" and b.missing:
            out.append(Named(b.missing, f"the Flight Recorder analyzer says it never joined {b.label} "
                             "(missing ranks at the group's first mismatch)", b.events[:3]))
    seen: set[int] = set()
    for ev in job.by_kind("frtrace_note"):
        if ev.get("what") in ("missing_dumps", "no_dumps"):
            ranks = [r for r in rank_set(ev.get("ranks")) if r not in seen]
            seen.update(ranks)
            if ranks:
                out.append(Named(ranks, "the Flight Recorder analyzer found no dump of it while the other ranks "
                                 "left one (a killed or hung process writes none)", [ev], "medium"))
    return out


@_per_job
def culprits(job: JobModel) -> list[Named]:
    out = []
    for b in first_blocks(job):
        named = [(r, t, d) for r, t, d in b.errors if t in DESYNC_TYPES]
        if b.what != "errors" or not named:
            continue
        ranks = sorted({r for r, _t, _d in named})
        majority = False
        others = sorted(set(b.expected) - set(ranks))
        if len(b.expected) >= 3 and len(others) == 1:
            ranks, majority = others, True  # every other member differs from the first-loaded rank: it is the odd one
        elif len(b.expected) >= 3 and len(ranks) * 2 < len(b.expected):
            majority = True
        rank_word = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"
        detail = named[0][2] or named[0][1]
        out.append(Named(ranks, f"the Flight Recorder analyzer names {rank_word} at {b.label}: {named[0][1]}"
                         + (f" ({detail})" if detail != named[0][1] else ""), b.events[:4], majority=majority))
    return out
