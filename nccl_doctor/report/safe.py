"""Log text is untrusted: neutralise control characters before it reaches a terminal."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ESC_SEQ = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


def plain(text: str, limit: int = 400) -> str:
    """Printable text only: escape sequences and C0/C1 controls removed, tabs kept as spaces."""
    text = _ESC_SEQ.sub("", text)
    text = _CONTROL.sub("", text.replace("\t", " "))
    return text if len(text) <= limit else text[: limit - 1] + "…"
