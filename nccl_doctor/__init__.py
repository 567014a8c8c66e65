"""nccl-doctor: diagnose hung or failed distributed training jobs from their logs.

Library entry points (typed, stable)::

    import nccl_doctor

    report = nccl_doctor.analyze(["logs/"])          # -> Report
    report.verdict, report.findings, report.to_dict()  # to_dict() == `analyze --format json`
    events = nccl_doctor.parse("logs/rank-3.log")     # -> list[Event], one per meaningful line
    for rule in nccl_doctor.rules.registry: ...        # the rule registry (Rule objects)

    live = nccl_doctor.Analyzer()                      # incremental, for bots that tail logs
    live.feed("logs/rank-3.log", line)
    for finding in live.new_findings(): ...            # each new or changed finding once

Importing this package loads neither Textual nor matplotlib nor pandas: everything beyond the small
data types below is imported on first use.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

__version__ = "0.1.0"

from .discover import InputError  # noqa: E402
from .events import Event  # noqa: E402
from .findings import Evidence, Finding, Severity  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover - for type checkers; at run time these load lazily
    from . import rules
    from .analysis import Report
    from .incremental import Analyzer, Update
    from .rules.base import Rule

#: name -> (module, attribute); attribute None means the module itself.
_LAZY = {
    "Analyzer": (".incremental", "Analyzer"),
    "Update": (".incremental", "Update"),
    "Report": (".analysis", "Report"),
    "Rule": (".rules.base", "Rule"),
    "rules": (".rules", None),
}


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    mod = importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def analyze(paths: str | os.PathLike | Iterable[str | os.PathLike], **kwargs: Any) -> Report:
    """Analyse log files, folders (recursive), globs or ``-`` (stdin); return a :class:`Report`.

    Keyword arguments: ``select``/``ignore`` (rule ids), ``min_severity`` (``info``, ``warning``,
    ``error``), ``jobs`` (reading processes), ``progress`` (callback ``(done, total, path)``).
    ``Report.to_dict()`` is the JSON of ``nccl-doctor analyze --format json`` (see :func:`schema`).
    Raises :class:`InputError` when nothing analysable was found.
    """
    from .analysis import analyze as _analyze

    return _analyze(_path_list(paths), **kwargs)


def parse(paths: str | os.PathLike | Iterable[str | os.PathLike] | None = None, *,
          lines: Iterable[str | bytes] | IO | None = None, source: str = "<lines>") -> list[Event]:
    """Parse logs into events (one per meaningful line), without building the job or running rules.

    Give ``paths`` (as for :func:`analyze`), or ``lines`` (any iterable of lines, or an open file)
    named ``source`` in the events. ``Event.rank`` is set only where the line or its launcher prefix
    says so; :func:`analyze` (``report.job.events``) also fills it from the job's identity model.
    """
    if (paths is None) == (lines is None):
        raise TypeError("parse() takes paths or lines=, not both")
    if lines is not None:
        from .incremental import parse_lines

        return parse_lines(lines, source)
    from .analysis import scan_files
    from .discover import discover

    files, skipped = discover(_path_list(paths))
    scans = scan_files(files)
    read = [s for s in scans if not s.skipped]
    if not read:
        reasons = "; ".join(f"{k.path}: {k.reason}" for k in skipped[:3]) or "no readable log file"
        raise InputError(f"nothing to parse ({reasons})")
    return [e for s in read for e in s.events]


def schema() -> dict[str, Any]:
    """The JSON Schema of ``Report.to_dict()`` (shipped as ``nccl_doctor/report.schema.json``)."""
    import json
    from importlib.resources import files

    return json.loads(files(__name__).joinpath("report.schema.json").read_text(encoding="utf-8"))


def _path_list(paths: str | os.PathLike | Iterable[str | os.PathLike] | None) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths or ()]


__all__ = ["Analyzer", "Event", "Evidence", "Finding", "InputError", "Report", "Rule", "Severity", "Update",
           "__version__", "analyze", "parse", "rules", "schema"]
