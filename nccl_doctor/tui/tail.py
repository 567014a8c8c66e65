"""The lines a rank wrote last, read back from its log on demand (in a worker, never on paint)."""

from __future__ import annotations

import os
from collections import deque

from ..reading import ReadIssue, clean_line, iter_chunks, open_binary

#: Files larger than this are not re-read for context (the last line is already in the model).
MAX_BYTES = 256 << 20


def lines_before(path: str, line: int, n: int = 8, needles: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    """Up to ``n`` lines ending at 1-based ``line`` of ``path`` (decompressed, cleaned); [] if unreadable.

    With ``needles`` (a file several ranks write to), only lines containing one of them are kept.
    """
    raw_needles = tuple(x.encode() for x in needles)
    if not path or path == "-" or not os.path.isfile(path) or os.path.getsize(path) > MAX_BYTES:
        return []
    keep: deque[tuple[int, str]] = deque(maxlen=n)
    no = 0
    try:
        with open_binary(path) as fp:
            for chunk in iter_chunks(fp, chunk_size=1 << 20):
                for raw in chunk.splitlines():
                    no += 1
                    if raw_needles:
                        if any(x in raw for x in raw_needles):
                            keep.append((no, clean_line(raw)))
                    elif no > line - n:
                        keep.append((no, clean_line(raw)))
                    if no >= line:
                        return list(keep)
    except (OSError, ReadIssue, ValueError):
        pass
    return list(keep)
