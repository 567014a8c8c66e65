"""Report renderers: JSON (the contract), text (terminal), markdown (tickets)."""

from __future__ import annotations

from .jsonout import report_dict, to_json
from .markdown import to_markdown
from .text import to_text

__all__ = ["report_dict", "to_json", "to_markdown", "to_text"]
