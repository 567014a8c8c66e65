"""A rank's last line: where its process stopped, from the last lines of its files' writers (a file of
its own: that file's last line; a shared file: its own label's, else its own last event there)."""

from __future__ import annotations

from ..events import LastLine
from .identity import Proc


def rank_last_line(p: Proc, last_by_file: dict[str, dict], shared: set[str] = frozenset()) -> LastLine | None:
    cands: list[LastLine] = []
    for fpath in p.files:
        ll = last_by_file.get(fpath) or {}
        keys = []
        if p.host is not None and p.pid is not None:
            keys.append(("proc", p.host, p.pid))
        if p.rank is not None:
            keys.append(("rank", p.rank))
        if p.local_rank is not None:
            keys.append(("local_rank", p.local_rank))
        if fpath not in shared and _single_writer(p, fpath, ll) and None in ll:
            hit = ll[None]  # a file of its own (rank-12.log): its last line, whatever wrote it
        else:
            hit = next((ll[k] for k in keys if k in ll), None)
        if hit is None and fpath in shared:  # no label of its own there: its own last event in that file
            ev = max((e for e in p.events if e.file == fpath), key=lambda e: e.line, default=None)
            hit = LastLine(ev.file, ev.line, ev.text, ev.ts) if ev is not None else None
        if hit is not None:
            cands.append(hit)
    if not cands:
        ev = max(p.events, key=lambda e: (e.ts or 0, e.line), default=None)
        return LastLine(ev.file, ev.line, ev.text, ev.ts) if ev else None
    return max(cands, key=lambda c: (c.ts or 0, c.line))


def _single_writer(p: Proc, fpath: str, ll: dict) -> bool:
    """A file's overall last line belongs to this process only if no other writer is in the file."""
    writers = [k for k in ll if k is not None and k[0] in ("proc", "rank")]
    return len(writers) <= 1
