"""A rank's last line: where its process stopped, from the last lines of its files' writers (a file of
its own: that file's last line; a shared file: its own label's, else its own last event there)."""

from __future__ import annotations

import re

from ..events import LastLine
from .identity import Proc


def rank_last_line(p: Proc, last_by_file: dict[str, dict], shared: set[str] = frozenset(),
                   agent_files: set[str] = frozenset()) -> LastLine | None:
    """``agent_files``: files a launcher's agent wrote into too (torchrun's lines in a console)."""
    cands: list[LastLine] = []
    # A file holding nothing of the rank's but stack dumps (py-spy's, taken from outside) is no output
    # of its: its last line says where the dump ended, not how far the rank got.
    written = {e.file for e in p.events if e.kind not in _DUMP_KINDS}
    for fpath in p.files:
        if written and fpath not in written:
            continue
        ll = last_by_file.get(fpath) or {}
        keys = []
        if p.host is not None and p.pid is not None:
            keys.append(("proc", p.host, p.pid))
        if p.rank is not None:
            keys.append(("rank", p.rank))
        if p.local_rank is not None:
            keys.append(("local_rank", p.local_rank))
        if p.pid is not None:  # its records' own pid ("INFO 15257 train: ..."): lines no rank label marks
            keys.append(("writer", p.pid))
        own = [ll[k] for k in keys if k[0] != "proc" and k in ll]
        # its lines carry a label: an unlabelled last line is someone else's where a relay labels every
        # line its process writes, or where the launcher's agent wrote into the file too (torchrun's
        # table after torch's "[rank0]:" lines); otherwise it may be its own (C++ writes bypass torch's)
        labelled = bool(own) and (own[0].relayed or fpath in agent_files)
        if fpath not in shared and _single_writer(p, fpath, ll) and None in ll and not labelled:
            # a file of its own (rank-12.log): its last line, whatever wrote it
            hit = ll[None]
        else:
            hit = next((ll[k] for k in keys if k in ll), None)
        if hit is None and fpath in shared:  # no label of its own there: its own last event in that file
            ev = max(_own_events(p, fpath) if fpath in agent_files else (e for e in p.events if e.file == fpath),
                     key=lambda e: e.line, default=None)
            hit = LastLine(ev.file, ev.line, ev.text, ev.ts) if ev is not None else None
        if hit is not None:
            cands.append(hit)
    if not cands:
        ev = max(p.events, key=lambda e: (e.ts or 0, e.line), default=None)
        return LastLine(ev.file, ev.line, ev.text, ev.ts) if ev else None
    newest = _current_rotations(cands)
    return max(newest, key=lambda c: (c.ts or 0, c.line))


def _own_events(p: Proc, fpath: str) -> list:
    """Its events in a file torchrun's agent wrote into too, without the agent's: its reports (``elastic_*``) and
    its own traceback (``by_agent``: relays.agent_tracebacks), which the rank's unlabelled lines took for the rank's."""
    return [e for e in p.events if e.file == fpath and not e.kind.startswith("elastic_") and not e.get("by_agent")]


#: The kinds of a stack dump's lines.
_DUMP_KINDS = frozenset(("py_stack", "pyspy_process", "py_stack_timeout", "stack_frame_collective"))

#: logrotate's numbered copies: ``x.log.1``, ``x.log.2.gz`` (the higher the number, the older).
_ROTATED = re.compile(r"(.+)\.([1-9][0-9]{0,3})(?:\.(?:gz|zst|xz|bz2))?")


def _current_rotations(cands: list[LastLine]) -> list[LastLine]:
    """Candidates from numbered copies of one log lose to its newer copies (the current log is
    newest): a current log that ends on an undated traceback line must not lose to the dated step
    line an older copy ends on. Copies of other logs compare as before (by time, then line)."""
    newest: dict[str, int] = {}
    keyed = []
    for c in cands:
        m = _ROTATED.fullmatch(c.file)
        base, age = (m.group(1), int(m.group(2))) if m else (c.file, 0)
        keyed.append((c, base, age))
        newest[base] = min(age, newest.get(base, age))
    return [c for c, base, age in keyed if age == newest[base]]


def _single_writer(p: Proc, fpath: str, ll: dict) -> bool:
    """A file's overall last line belongs to this process only if no other writer is in the file."""
    writers = [k for k in ll if k is not None and k[0] in ("proc", "rank")]
    return len(writers) <= 1
