"""Log formats as data: load ``parsers/*.toml`` and match records against them.

The schema and the matching semantics are described in ``parsers/README.md``. In short: every
format file has a ``[format]`` table (name, priority, optional line ``prefixes``) and a list of
``[[pattern]]`` tables (event ``kind``, literal ``contains`` prefilter, ``regex`` with named groups,
``ints``, ``severity`` and ``samples``). :func:`load_formats` compiles them once into a
:class:`FormatSet` whose :meth:`FormatSet.match` turns one record (a line whose launcher prefixes
were already stripped) into ``(kind, fields)``.

Extensions of the schema understood here (all optional):

* ``[format.fragments]``: named regex pieces, inserted into prefixes and pattern regexes wherever
  ``{{name}}`` occurs (e.g. the PyTorch ``[PG ... Rank r]`` prefix used by many patterns).
* pattern ``priority``: overrides the format priority for that pattern (a generic fallback can
  be tried after every other format).
* pattern ``const = { what = "signal" }``: constant fields added to the event when the pattern
  matches (captured groups win on a name clash).
* pattern ``bools = ["root_cause"]``: fields set to ``True`` when the group matched non-empty
  text, else ``False``.
* ``[[pattern.counter_samples]] line = "..."``: lines that must not give this pattern's kind.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FormatError", "FormatSet", "Pattern", "load_formats"]

_MAX_INT_DIGITS = 18


class FormatError(Exception):
    """A format file is unusable (bad TOML, bad regex, unknown kind, duplicate name...)."""


@dataclass(frozen=True, slots=True)
class Pattern:
    kind: str
    format: str
    priority: int
    contains: tuple[str, ...]
    regex: re.Pattern[str]
    ints: frozenset[str]
    severity: str | None
    samples: tuple[dict, ...]


@dataclass(frozen=True, slots=True)
class _Format:
    name: str
    priority: int
    prefixes: tuple[re.Pattern[str], ...]
    prefix_required: bool
    ints: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Extra:
    """Per-pattern data that is not part of the public :class:`Pattern` record."""

    consts: tuple[tuple[str, Any], ...]
    bools: frozenset[str]
    counter_samples: tuple[str, ...]
    source: str


def _to_int(text: str) -> int | None:
    if text.isdecimal() and len(text) <= _MAX_INT_DIGITS:  # the common case, without strip or sign
        return int(text)
    text = text.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isdecimal() or len(digits) > _MAX_INT_DIGITS:  # int() takes exactly these
        return None
    return int(text)


#: A logging record at error level (a few columns of time, host or logger name first): whatever step it names, it
#: is no progress line.
_ERROR_RECORD = re.compile(r"(?:[^\s\[]{1,30} {1,8}){0,3}\[?(?:ERROR|CRITICAL|FATAL)\]?(?:[ :|]|$)")
_PROGRESS_KINDS = frozenset(("train_step", "train_epoch"))


def progress_in_error(kind: str, record: str) -> bool:
    """A progress pattern's match in a logging record at error level ("ERROR trainer: non-finite loss at epoch 0 step
    19; aborting"): a failure, not progress, so the pattern does not take it (every matcher asks this)."""
    return kind in _PROGRESS_KINDS and ("ERROR" in record or "CRITICAL" in record or "FATAL" in record) \
        and _ERROR_RECORD.match(record) is not None
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_DIGITS = re.compile(r"\d+")


def _shape(text: str) -> str:
    """``gpu-12:4711:4790 [3] ... comm 0x55d5c7f7e0b0 rank 12`` -> ``gpu-0:0:0 [0] ... comm 0x0 rank 0``."""
    return _DIGITS.sub("0", _HEX.sub("0x0", text))


def _intern(text: str) -> str:
    return sys.intern(text) if len(text) <= 48 else text


def trie_regex(literals: Iterable[str]) -> str:
    """One regex matching any of ``literals``, preferring the longest at a given position."""
    trie: dict = {}
    for lit in literals:
        node = trie
        for ch in lit:
            node = node.setdefault(ch, {})
        node[""] = True

    def build(node: dict) -> str:
        end = "" in node
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if end:
            return "(?:" + body + ")?"
        return body

    return build(trie)


def _partners(lits: list[str]) -> dict[str, tuple[str, ...]]:
    """For each literal, the literals that can start inside it and run past its end: a proper suffix
    of it is a prefix of theirs (and they are not inside it). Indexed by prefix so that a few
    hundred literals take milliseconds, not a quadratic scan with ``startswith`` per offset."""
    by_prefix: dict[str, list[str]] = {}
    for other in lits:
        for k in range(1, len(other) + 1):
            by_prefix.setdefault(other[:k], []).append(other)
    out: dict[str, tuple[str, ...]] = {}
    for lit in lits:
        found: dict[str, None] = {}
        for k in range(1, len(lit)):
            for other in by_prefix.get(lit[k:], ()):
                if other not in lit:
                    found[other] = None
        out[lit] = tuple(o for o in lits if o in found)  # in the order of ``lits``, as before
    return out


class FormatSet:
    """The compiled formats: patterns in trial order plus a literal scanner."""

    patterns: tuple[Pattern, ...]
    literals: tuple[str, ...]

    def __init__(self, patterns: list[Pattern], formats: dict[str, _Format], extras: list[_Extra]):
        order = sorted(range(len(patterns)), key=lambda i: (patterns[i].priority, formats[patterns[i].format].priority, i))
        self.patterns = tuple(patterns[i] for i in order)
        self._extras = tuple(extras[i] for i in order)
        self._formats = formats
        lits = sorted({lit for p in self.patterns for lit in p.contains}, key=lambda s: (-len(s), s))
        self.literals = tuple(lits)
        by_literal: dict[str, set[int]] = {lit: set() for lit in lits}
        for idx, p in enumerate(self.patterns):
            for lit in p.contains:
                by_literal[lit].add(idx)
        self._by_literal = {lit: tuple(sorted(idxs)) for lit, idxs in by_literal.items()}
        self._hit_cache: dict[frozenset[str], tuple[int, ...]] = {}
        # The scanner reports, left to right and without overlap, the longest literal starting at
        # each position it tries. A literal found implies every literal inside it (closure); a
        # literal that starts inside a reported one and runs past its end (a "partner": a suffix of
        # the reported literal is a prefix of it) is checked with `in`.
        self._closure: dict[str, tuple[int, ...]] = {}
        self._partners: dict[str, tuple[str, ...]] = {}
        for lit in lits:
            idxs: set[int] = set()
            for other in lits:
                if other in lit:
                    idxs |= by_literal[other]
            self._closure[lit] = tuple(sorted(idxs))
        self._partners = _partners(lits)
        self._scanner = re.compile(trie_regex(lits)) if lits else None
        # Candidate patterns depend on which literals occur, and most records differ from many
        # others only in numbers (pids, ranks, pointers, sizes). The literal scan therefore runs on
        # a "shape" with every hex pointer and digit run collapsed, over literals collapsed the same
        # way (a superset of the true candidates, re-checked with `in`), and is cached per shape.
        sig_lits = sorted({_shape(lit) for lit in lits}, key=lambda x: (-len(x), x))
        self._sig_scanner = re.compile(trie_regex(sig_lits)) if sig_lits else None
        self._sig_to_idx: dict[str, set[int]] = {}
        for lit in lits:
            self._sig_to_idx.setdefault(_shape(lit), set()).update(self._closure[lit])
        self._sig_partners = _partners(sig_lits)
        self._shape_cache: dict[str, tuple[int, ...]] = {}
        self._plans = tuple(_FieldPlan.of(p, e, formats[p.format]) for p, e in zip(self.patterns, self._extras, strict=True))
        self._heads = {name: tuple((rx, _groups(rx)) for rx in fmt.prefixes) for name, fmt in formats.items()}
        self._head_cache: dict[tuple, dict] = {}

    @property
    def counter_samples(self) -> tuple[tuple[Pattern, str], ...]:
        """(pattern, line) pairs: lines that must not produce that pattern's kind."""
        return tuple((p, line) for p, e in zip(self.patterns, self._extras, strict=True) for line in e.counter_samples)

    def source_of(self, pattern: Pattern) -> str:
        """File name the pattern was loaded from (for messages)."""
        return self._extras[self.patterns.index(pattern)].source

    def candidates(self, record: str) -> tuple[int, ...]:
        """Indices (into :attr:`patterns`) of the patterns whose literal prefilter passes."""
        if self._scanner is None:
            return ()
        hits = set(self._scanner.findall(record))
        if not hits:
            return ()
        for lit in tuple(hits):
            for other in self._partners[lit]:
                if other not in hits and other in record:
                    hits.add(other)
        if len(hits) == 1:
            return self._closure[hits.pop()]
        cand: set[int] = set()
        for lit in hits:
            cand.update(self._closure[lit])
        return tuple(sorted(cand))

    def _shape_candidates(self, record: str) -> tuple[int, ...]:
        """A superset of :meth:`candidates`, cached per record shape (see ``__init__``)."""
        shape = _shape(record)
        cached = self._shape_cache.get(shape)
        if cached is not None:
            return cached
        hits = set(self._sig_scanner.findall(shape)) if self._sig_scanner is not None else set()
        for lit in tuple(hits):
            for other in self._sig_partners.get(lit, ()):
                if other not in hits and other in shape:
                    hits.add(other)
        cand: set[int] = set()
        for lit in hits:
            for other in self._sig_to_idx:
                if other in lit:
                    cand.update(self._sig_to_idx[other])
        out = tuple(sorted(cand))
        if len(self._shape_cache) > 20000:  # bounded: hostile input makes every shape new
            self._shape_cache.clear()
        self._shape_cache[shape] = out
        return out

    def _hit_candidates(self, hits: frozenset[str]) -> tuple[int, ...]:
        """Patterns with a literal among ``hits`` (literals the prefilter saw in the line)."""
        cached = self._hit_cache.get(hits)
        if cached is None:
            cand: set[int] = set()
            for lit in hits:
                cand.update(self._by_literal.get(lit, ()))
            cached = tuple(sorted(cand))
            if len(self._hit_cache) > 4096:  # bounded: combinations of literals are few in practice
                self._hit_cache.clear()
            self._hit_cache[hits] = cached
        return cached

    def match(self, record: str, hits: frozenset[str] | None = None) -> tuple[str, dict] | None:
        """Return ``(kind, fields)`` of the first pattern matching ``record``, or None.

        ``hits``: every literal that occurs in the line ``record`` was cut from, when the caller
        knows them (Hyperscan reports them all); the candidates then come from them directly
        instead of from a scan of the record's shape. Either way each candidate's literal is
        checked in ``record`` itself, so both give the same answer.
        """
        cand = self._shape_candidates(record) if hits is None else self._hit_candidates(hits)
        if not cand:
            return None
        headers: dict[str, tuple[int, tuple] | None] = {}
        patterns = self.patterns
        for idx in cand:
            pat = patterns[idx]
            contains = pat.contains
            if not (contains[0] in record if len(contains) == 1 else any(lit in record for lit in contains)):
                continue  # the shape admitted it; the real text must hold one of its literals
            plan = self._plans[idx]
            name = pat.format
            if name in headers:
                head = headers[name]
            else:
                head = headers[name] = self._header(name, record)
            if head is None:
                if plan.prefix_required:
                    continue
                start, hnames, hvalues = 0, (), ()
            else:
                start, hnames, hvalues = head
            m = pat.regex.search(record[start:] if start else record)
            if m is None:
                continue
            if progress_in_error(pat.kind, record):
                continue
            return pat.kind, plan.fields(self._head_fields(plan.ints, hnames, hvalues) if hnames else None, m)
        return None

    def _header(self, name: str, record: str) -> tuple[int, tuple, tuple] | None:
        for prefix, (gidx, names) in self._heads[name]:
            m = prefix.match(record)
            if m is not None:
                return m.end(), names, _group_values(m, gidx)
        return None

    def _head_fields(self, ints: frozenset[str], names: tuple[str, ...], values: tuple) -> dict:
        """A line prefix's fields, converted once per distinct prefix: a file's NCCL lines mostly
        share theirs (``host:pid:tid [dev] NCCL INFO``). The dict is shared: callers copy it."""
        key = (ints, names, values)
        out = self._head_cache.get(key)
        if out is None:
            out = {name: _to_int(value) if name in ints else _intern(value.strip())
                   for name, value in zip(names, values, strict=True) if value is not None}
            if len(self._head_cache) > 4096:  # bounded: hostile input makes every prefix new
                self._head_cache.clear()
            self._head_cache[key] = out
        return out


def _groups(rx: re.Pattern[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Group numbers and names of a regex's named groups, in group order."""
    pairs = sorted((i, n) for n, i in rx.groupindex.items())
    return tuple(i for i, _ in pairs), tuple(n for _, n in pairs)


def _group_values(m: re.Match[str], gidx: tuple[int, ...]) -> tuple:
    if len(gidx) > 1:
        return m.group(*gidx)
    return (m.group(gidx[0]),) if gidx else ()


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    """How one pattern turns its match (and its format's header match) into event fields,
    precomputed so the hot path does no per-field lookups of names or int sets."""

    consts: tuple[tuple[str, Any], ...]
    gidx: tuple[int, ...]
    names: tuple[str, ...]
    is_int: tuple[bool, ...]
    ints: frozenset[str]
    bools: frozenset[str]
    prefix_required: bool

    @classmethod
    def of(cls, pat: Pattern, extra: _Extra, fmt: _Format) -> _FieldPlan:
        gidx, names = _groups(pat.regex)
        ints = pat.ints | fmt.ints
        return cls(extra.consts, gidx, names, tuple(n in ints for n in names), ints, extra.bools,
                   fmt.prefix_required)

    def fields(self, head: dict | None, m: re.Match[str]) -> dict:
        # Header fields first, then the pattern's groups (which win a name clash), then booleans.
        fields: dict[str, Any] = dict(self.consts) if self.consts else {}
        if head:
            fields.update(head)
        fields.update(self.group_fields(m))
        for name in self.bools:
            value = fields.get(name)
            fields[name] = bool(value.strip()) if isinstance(value, str) else bool(value)
        return fields

    def group_fields(self, m: re.Match[str]) -> dict:
        """The pattern's groups as fields (groups that did not take part are left out)."""
        # strict=False: the three have one entry per named group by construction (checked per call cost time)
        return field_dict(zip(self.names, _group_values(m, self.gidx), self.is_int, strict=False))


def field_dict(triples) -> dict[str, Any]:
    """Fields from (name, text or None, is_int) triples, converted once: ints parsed, short values
    interned (host names, levels and op names repeat across a job's events: one shared copy each
    keeps a 16k-rank job's events small). The conversions are written out (not calls to
    _to_int/_intern) for the common case: this runs once per event."""
    out: dict[str, Any] = {}
    intern = sys.intern
    for name, value, is_int in triples:
        if value is None:
            continue
        if is_int:
            out[name] = int(value) if value.isdecimal() and len(value) <= _MAX_INT_DIGITS else _to_int(value)
        else:
            value = value.strip()
            out[name] = intern(value) if len(value) <= 48 else value
    return out


def load_formats(directory: str | os.PathLike | None = None) -> FormatSet:
    """Load and compile the format files (``None``: the packaged ones). Cached per directory."""
    from .format_files import load  # the TOML reading and checking lives there

    return load(None if directory is None else str(Path(directory).resolve()))
