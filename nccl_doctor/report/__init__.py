"""Report renderers: JSON (the contract), text (terminal), markdown (tickets).

Loaded lazily: ``report.safe`` (the one cleaning function) is used by every layer, and importing it
must not pull in the renderers (and rich) with it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["report_dict", "to_json", "to_markdown", "to_text"]

_WHERE = {"report_dict": "jsonout", "to_json": "jsonout", "to_markdown": "markdown", "to_text": "text"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
