"""nccl-doctor: diagnose hung or failed distributed training jobs from their logs.

Library entry points (typed, stable)::

    import nccl_doctor
    report = nccl_doctor.analyze(["logs/"])
    report.verdict, report.findings, report.to_dict()

Importing this package loads neither Textual nor matplotlib (nor pandas).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .discover import InputError  # noqa: E402
from .events import Event  # noqa: E402
from .findings import Evidence, Finding, Severity  # noqa: E402


def analyze(paths, **kwargs):  # noqa: ANN001, ANN201 - documented in analysis.analyze
    """Analyse log paths and return a :class:`nccl_doctor.analysis.Report` (see ``analysis.analyze``)."""
    from .analysis import analyze as _analyze

    return _analyze(paths, **kwargs)


__all__ = ["Event", "Evidence", "Finding", "InputError", "Severity", "__version__", "analyze"]
