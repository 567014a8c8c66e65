"""The desync report's rank lists (``TORCH_NCCL_DESYNC_DEBUG``; FORMATS-2.md 3.4).

``[0, 1, 2] joined but didn't finish collective #5121`` and ``ranks [1, 3] are the lagging ranks
that caused this timeout. They never joined any collectives`` name every rank of the list: the
parser keeps the first in ``rank`` and the rest in ``more``. (torch's other statements that name
ranks, the monitored barrier and the store keys, are read in ``statements``.)
"""

from __future__ import annotations

import re

from ..events import Event
from .facts import int_in


def desync_ranks(ev: Event) -> list[int]:
    """``rank`` plus the rest of the list in ``more`` (', 3, 7')."""
    first = int_in(ev.get("rank"))
    rest = [int(x) for x in re.findall(r"\d{1,10}", str(ev.get("more") or ""))]
    return sorted({r for r in [first, *rest] if r is not None})
