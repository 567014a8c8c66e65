"""Reading and checking the format files (``parsers/*.toml``) into a :class:`FormatSet`.

The schema is described in :mod:`nccl_doctor.formats` and ``parsers/README.md``; every problem is
a :class:`FormatError` naming the file, the pattern and what is wrong, on one line.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Any

from .formats import FormatError, FormatSet, Pattern, _Extra, _Format
from .kinds import KINDS
from .resources import parsers_dir

_FRAGMENT_RE = re.compile(r"\{\{(\w+)\}\}")
_FORMAT_KEYS = {
    "name", "priority", "description", "prefixes", "prefix_required", "ints", "kind", "fragments",
}
_PATTERN_KEYS = {
    "kind", "contains", "regex", "ints", "severity", "samples", "counter_samples", "priority",
    "const", "bools", "description",
}
_SEVERITIES = {"info", "warning", "error"}


def _compile(src: str, where: str, fragments: dict[str, str], strict: bool = False) -> re.Pattern[str]:
    def expand(m: re.Match) -> str:
        if m.group(1) not in fragments:
            raise FormatError(f"{where}: unknown fragment {{{{{m.group(1)}}}}}")
        return fragments[m.group(1)]

    text = _FRAGMENT_RE.sub(expand, src)
    try:
        # Both engines must accept every format regex (the README promises it, and users' format
        # files may be reused with either): a user's folder is checked here, the packaged files by
        # a test (checking them on every start cost a fifth of a second). Matching runs on `re`:
        # for these anchored, bounded patterns its match + groupdict is about 1.5x faster than
        # `regex` on the hot path.
        if strict:
            import regex

            try:
                regex.compile(text)
            except regex.error as exc:
                raise FormatError(f"{where}: bad regex: {exc}") from None
        return re.compile(text)
    except re.error as exc:
        raise FormatError(f"{where}: bad regex: {exc}") from None


def _str_list(value: Any, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FormatError(f"{where}: '{key}' must be a list of strings")
    return tuple(value)


def _load_file(name: str, text: str, strict: bool = False) -> tuple[_Format, list[Pattern], list[_Extra]] | None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{name}: bad TOML: {exc}") from None
    head = data.get("format")
    if not isinstance(head, dict) or not isinstance(head.get("name"), str):
        raise FormatError(f"{name}: missing [format] table with a 'name'")
    if head.get("kind") in ("launcher", "json"):
        return None  # launcher prefixes (launchers.py) and JSON documents (rasjson.py) are read elsewhere
    unknown = set(head) - _FORMAT_KEYS
    if unknown:
        raise FormatError(f"{name}: unknown [format] keys {sorted(unknown)}")
    fname = head["name"]
    priority = head.get("priority", 100)
    if not isinstance(priority, int):
        raise FormatError(f"{name}: format priority must be an integer")
    fragments = head.get("fragments", {})
    if not isinstance(fragments, dict) or not all(isinstance(v, str) for v in fragments.values()):
        raise FormatError(f"{name}: [format.fragments] must map names to regex strings")
    prefixes = tuple(
        _compile(src, f"{name}: prefix #{i + 1}", fragments, strict)
        for i, src in enumerate(_str_list(head.get("prefixes", []), name, "prefixes"))
    )
    fmt = _Format(
        name=fname,
        priority=priority,
        prefixes=prefixes,
        prefix_required=bool(head.get("prefix_required", False)),
        ints=frozenset(_str_list(head.get("ints", []), name, "ints")),
    )
    raw_patterns = data.get("pattern", [])
    if not isinstance(raw_patterns, list):
        raise FormatError(f"{name}: 'pattern' must be an array of tables ([[pattern]])")
    patterns: list[Pattern] = []
    extras: list[_Extra] = []
    for i, raw in enumerate(raw_patterns):
        kind = raw.get("kind")
        where = f"{name}: pattern #{i + 1} ({kind})"
        unknown = set(raw) - _PATTERN_KEYS
        if unknown:
            raise FormatError(f"{where}: unknown keys {sorted(unknown)}")
        if kind not in KINDS:
            raise FormatError(f"{where}: unknown kind {kind!r} (not in nccl_doctor.kinds.KINDS)")
        if not isinstance(raw.get("regex"), str):
            raise FormatError(f"{where}: missing 'regex'")
        contains = _str_list(raw.get("contains", []), where, "contains")
        if not contains or not all(contains):
            raise FormatError(f"{where}: 'contains' needs at least one non-empty literal")
        compiled = _compile(raw["regex"], where, fragments, strict)
        ints = frozenset(_str_list(raw.get("ints", []), where, "ints"))
        missing = ints - set(compiled.groupindex)
        if missing:
            raise FormatError(f"{where}: 'ints' names no group of the regex: {sorted(missing)}")
        bools = frozenset(_str_list(raw.get("bools", []), where, "bools"))
        severity = raw.get("severity")
        if severity is not None and severity not in _SEVERITIES:
            raise FormatError(f"{where}: severity must be one of {sorted(_SEVERITIES)}")
        consts = raw.get("const", {})
        if not isinstance(consts, dict):
            raise FormatError(f"{where}: 'const' must be a table")
        samples = raw.get("samples", [])
        counter = raw.get("counter_samples", [])
        for s in (*samples, *counter):
            if not isinstance(s, dict) or not isinstance(s.get("line"), str):
                raise FormatError(f"{where}: every sample needs a 'line' string")
            if set(s) - {"line", "fields"} or not isinstance(s.get("fields", {}), dict):
                raise FormatError(f"{where}: sample keys are 'line' and 'fields' (a table): {sorted(s)}")
        prio = raw.get("priority", priority)
        if not isinstance(prio, int):
            raise FormatError(f"{where}: priority must be an integer")
        patterns.append(
            Pattern(
                kind=kind,
                format=fname,
                priority=prio,
                contains=contains,
                regex=compiled,
                ints=ints,
                severity=severity,
                samples=tuple(samples),
            )
        )
        extras.append(
            _Extra(
                consts=tuple(sorted(consts.items())),
                bools=bools,
                counter_samples=tuple(s["line"] for s in counter),
                source=name,
            )
        )
    return fmt, patterns, extras


def _packaged_files() -> list[tuple[str, str]]:
    return _directory_files(parsers_dir())  # (the one place that knows where the packaged format files are)


def _directory_files(directory: Path) -> list[tuple[str, str]]:
    if not directory.is_dir():
        raise FormatError(f"{directory}: not a directory of format files")
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.toml"))]


@functools.lru_cache(maxsize=16)
def load(key: str | None) -> FormatSet:
    """The packaged formats (``None``) or those of a resolved folder path, compiled once."""
    files = _packaged_files() if key is None else _directory_files(Path(key))
    formats: dict[str, _Format] = {}
    origin: dict[str, str] = {}
    patterns: list[Pattern] = []
    extras: list[_Extra] = []
    for name, text in files:
        if name == "launchers.toml":
            continue
        loaded = _load_file(name, text, strict=key is not None)
        if loaded is None:
            continue
        fmt, pats, exts = loaded
        if fmt.name in formats:
            raise FormatError(f"{name}: duplicate format name {fmt.name!r} (also in {origin[fmt.name]})")
        formats[fmt.name] = fmt
        origin[fmt.name] = name
        patterns.extend(pats)
        extras.extend(exts)
    return FormatSet(patterns, formats, extras)

