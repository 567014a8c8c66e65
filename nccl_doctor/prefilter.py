"""Find candidate lines in a whole buffer: lines that contain at least one literal of the formats.

This is the hot path. It runs over whole chunks in C and hands Python only the lines that can
matter. Two engines give identical results: Hyperscan (when its wheel is installed) and a pure
``re`` engine built as a trie so that the alternation of a few hundred literals stays fast.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from operator import itemgetter

from .formats import trie_regex

#: Distinct literal sets kept (see Prefilter._literal_set).
SETS_MAX = 4096


class Prefilter:
    """``spans(chunk)`` returns (start, end) of each line holding a literal, ``end`` excluding the newline.

    ``lines(chunk)`` adds, per line, the set of literals it holds when the engine reports them all
    (Hyperscan reports every occurrence of every literal) and None otherwise (the ``re`` trie finds
    one per line): the formats use it to pick candidate patterns without re-scanning the line.
    """

    def __init__(self, literals: Iterable[str], engine: str | None = None):
        self.literals = tuple(sorted({lit.encode() for lit in literals if lit}))
        if not self.literals:
            raise ValueError("no prefilter literals")
        self._names = tuple(lit.decode() for lit in self.literals)
        self._sets: dict[frozenset[int], frozenset[str]] = {}
        choice = (engine or os.environ.get("NCCL_DOCTOR_ENGINE") or "auto").lower()
        self._hs = None
        if choice in ("auto", "hyperscan"):
            self._hs = _hyperscan_db(self.literals)
            if self._hs is None and choice == "hyperscan":
                raise RuntimeError("hyperscan engine requested but the hyperscan package is not usable")
        self.engine = "hyperscan" if self._hs is not None else "re"
        # The same trie as the formats' literal scanner, over bytes (UTF-8 literals stay exact).
        self._rx = re.compile(trie_regex(list(self._names)).encode())

    def spans(self, chunk: bytes) -> list[tuple[int, int]]:
        return [(s, e) for s, e, _hits in self.lines(chunk)]

    def lines(self, chunk: bytes) -> list[tuple[int, int, frozenset[str] | None]]:
        if self._hs is not None:
            return list(self.hit_lines(chunk))  # one grouping of Hyperscan's hits: HitLines, read through
        return self._lines_re(chunk)

    def _lines_re(self, chunk: bytes) -> list[tuple[int, int, None]]:
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
            out.append((s, e, None))
            pos = e + 1
            if pos >= n:
                return out

    def hit_lines(self, chunk: bytes, extra: list | None = None) -> HitLines | None:
        """``lines(chunk)`` (plus ``extra`` lines) grouped as the caller reaches them (see HitLines);
        None when the engine does not report every literal (the ``re`` trie)."""
        if self._hs is None:
            return None
        return HitLines(chunk, self._hs, self._literal_set, extra or [])

    def literals_in(self, data: bytes) -> frozenset[str] | None:
        """Every literal that occurs in ``data`` (one short buffer: a record), or None when the
        engine does not report them all (the ``re`` trie)."""
        if self._hs is None:
            return None
        ids: list[int] = []
        self._hs.scan(data, match_event_handler=lambda lit_id, _f, _t, _fl, _c: ids.append(lit_id))
        return self._literal_set(ids)

    def _literal_set(self, ids: list[int]) -> frozenset[str]:
        """The literals of these ids, one shared frozenset per distinct set (lines repeat theirs)."""
        key = frozenset(ids)
        got = self._sets.get(key)
        if got is None:
            if len(self._sets) >= SETS_MAX:  # bounded whatever the input
                self._sets.clear()
            got = self._sets[key] = frozenset(self._names[i] for i in key)
        return got


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


_TO = itemgetter(0)
#: Bytes of the first window HitLines scans, and after a run of lines taken in one go; the window
#: doubles while no such run comes, up to WINDOW_MAX.
WINDOW_MIN = 16 << 10
WINDOW_MAX = 1 << 20


class _Found(Exception):
    """Ends a scan at its first hit (see HitLines.__bool__)."""


class HitLines:
    """A chunk's candidate lines (start, end, literals), in order, found as the caller reaches them:
    Hyperscan scans the chunk a window of whole lines at a time, and the caller sets ``floor`` to the
    newline ending the last line it consumed (a run of lines taken in one go, see fastscan), from
    where the next window starts. The lines of a run are thus never scanned, nor their literals
    grouped (a step line per training step holds one hit or two: a callback into Python each).
    ``extra``: more (start, end, literals) lines in order, merged in (a line in both gets the union
    of its literals). The lines yielded are those of ``Prefilter.lines`` merged with ``extra``, but
    for lines at or before the floor, which the caller skips anyway. Literals hold no newline, so a
    window of whole lines finds every literal of its lines."""

    __slots__ = ("chunk", "db", "extra", "floor", "literal_set")

    def __init__(self, chunk: bytes, db, literal_set, extra: list):
        self.chunk, self.db, self.literal_set, self.extra = chunk, db, literal_set, extra
        self.floor = -1

    def __bool__(self) -> bool:
        if self.extra:
            return True

        def found(*_args) -> bool:
            raise _Found

        try:
            self.db.scan(self.chunk, match_event_handler=found)
        except _Found:
            return True
        return False

    def _window(self, start: int, end: int) -> list[tuple[int, int]]:
        """(end of the hit in the chunk, literal id) of the literals in chunk[start:end], sorted."""
        hits: list[tuple[int, int]] = []
        append = hits.append

        def on_match(lit_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            append((start + to, lit_id))

        self.db.scan(memoryview(self.chunk)[start:end], match_event_handler=on_match)
        hits.sort()
        return hits

    def __iter__(self) -> Iterator[tuple[int, int, frozenset[str]]]:
        chunk, extra, literal_set = self.chunk, self.extra, self.literal_set
        find, rfind = chunk.find, chunk.rfind
        n, n_x = len(chunk), len(extra)
        hits: list[tuple[int, int]] = []
        n_h = i = j = 0
        scanned = 0  # the chunk is scanned up to here (a line start)
        size = WINDOW_MIN // 2  # (doubled before the first window)
        while True:
            floor = self.floor
            if i < n_h and hits[i][0] <= floor:  # a hit ending by the floor lies in a consumed line
                i = bisect_right(hits, floor, lo=i, key=_TO)
            if i >= n_h:
                start = max(scanned, floor + 1)
                if start >= n:
                    while j < n_x:
                        yield extra[j]
                        j += 1
                    return
                # a run took lines past the window: small windows again, else larger ones
                size = WINDOW_MIN if floor >= scanned else min(size * 2, WINDOW_MAX)
                end = find(b"\n", min(start + size, n) - 1)
                scanned = n if end < 0 else end + 1
                hits = self._window(start, scanned)
                n_h, i = len(hits), 0
                continue
            to = hits[i][0]
            s = rfind(b"\n", 0, to - 1) + 1
            e = find(b"\n", to - 1)
            if e < 0:
                e = n
            ids = [hits[i][1]]
            i += 1
            while i < n_h and hits[i][0] <= e:  # literals hold no newline: a hit ending by e is in this line
                ids.append(hits[i][1])
                i += 1
            lits = literal_set(ids)
            while j < n_x and extra[j][0] < s:
                yield extra[j]
                j += 1
            if j < n_x and extra[j][0] == s:
                lits = lits | extra[j][2]
                j += 1
            yield s, e, lits
