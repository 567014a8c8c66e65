"""Find candidate lines in a whole buffer: lines that contain at least one literal of the formats.

This is the hot path. It runs over whole chunks in C and hands Python only the lines that can
matter. Two engines give identical results: Hyperscan (when its wheel is installed) and a pure
``re`` engine built as a trie so that the alternation of a few hundred literals stays fast.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from .formats import trie_regex


class Prefilter:
    """``spans(chunk)`` returns (start, end) of each line holding a literal, ``end`` excluding the newline."""

    def __init__(self, literals: Iterable[str], engine: str | None = None):
        self.literals = tuple(sorted({lit.encode() for lit in literals if lit}))
        if not self.literals:
            raise ValueError("no prefilter literals")
        choice = (engine or os.environ.get("NCCL_DOCTOR_ENGINE") or "auto").lower()
        self._hs = None
        if choice in ("auto", "hyperscan"):
            self._hs = _hyperscan_db(self.literals)
            if self._hs is None and choice == "hyperscan":
                raise RuntimeError("hyperscan engine requested but the hyperscan package is not usable")
        self.engine = "hyperscan" if self._hs is not None else "re"
        # The same trie as the formats' literal scanner, over bytes (UTF-8 literals stay exact).
        self._rx = re.compile(trie_regex([lit.decode() for lit in self.literals]).encode())

    def spans(self, chunk: bytes) -> list[tuple[int, int]]:
        if self._hs is not None:
            return self._spans_hs(chunk)
        return self._spans_re(chunk)

    def _spans_re(self, chunk: bytes) -> list[tuple[int, int]]:
        out = []
        search = self._rx.search
        find, rfind = chunk.find, chunk.rfind
        pos = 0
        n = len(chunk)
        while True:
            m = search(chunk, pos)
            if m is None:
                return out
            s = rfind(b"\n", 0, m.start()) + 1
            e = find(b"\n", m.end())
            if e < 0:
                e = n
            out.append((s, e))
            pos = e + 1
            if pos >= n:
                return out

    def _spans_hs(self, chunk: bytes) -> list[tuple[int, int]]:
        hits: list[int] = []
        append = hits.append

        def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            append(to)

        self._hs.scan(chunk, match_event_handler=on_match)
        if not hits:
            return []
        hits.sort()
        out = []
        find, rfind = chunk.find, chunk.rfind
        n = len(chunk)
        line_end = -1
        for to in hits:
            if to <= line_end:
                continue
            s = rfind(b"\n", 0, to - 1) + 1
            e = find(b"\n", to - 1)
            if e < 0:
                e = n
            if s <= line_end:  # a literal spanning a newline cannot happen: literals hold no newline
                continue
            out.append((s, e))
            line_end = e
        return out


def _hyperscan_db(literals: tuple[bytes, ...]):
    try:
        import hyperscan
    except Exception:
        return None
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        exprs = [re.escape(lit) for lit in literals]
        db.compile(expressions=exprs, ids=list(range(len(exprs))),
                   flags=[hyperscan.HS_FLAG_SINGLEMATCH * 0 for _ in exprs])
        return db
    except Exception:
        return None
