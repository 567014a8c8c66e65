"""Records hard-wrapped by a terminal: cut at the terminal's width, continued on the next line.

A log copied from a terminal (tmux/screen captures, a console pasted into a ticket) arrives with every
record longer than the terminal cut into pieces of exactly that width, mid-word, the continuation
carrying no prefix of its own::

    [rank3]:[E0304 11:20:07.512330418 ProcessGroupNCCL.cpp:760] [PG GUID 0(default_pg) Rank 3] Watchdog caught c
    ollective operation timeout: WorkNCCL(SeqNum=5121, OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, Time
    out(ms)=600000) ran for 600043 milliseconds before timing out.

No line of such a file is longer than the width, so the width is the length of the longest line of
the file's head. A run of lines of that width (or one less: a trimmed blank at the cut) and the line
after it are joined back -- as they are, or with the blank a copy trimmed at the cut put back --
when the joined text matches a known pattern and no piece alone matches one. A continuation that
repeats the first piece's launcher label (wrapping done before a launcher prefixed each line) is
joined without it.

Cost: a large file is looked at again only when a record cut at its head's longest length joins
back in the head (``detect_width``); the lines of that width are then found by one regex pass per
chunk, and a file whose first tries join nothing stops trying.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .records import is_continuation

#: Shorter lines are not a terminal's width (and too many records would be "wrapped").
MIN_WIDTH = 60
#: Pieces joined into one record at most (a 16-line record at width 60 is ~1000 characters).
MAX_PIECES = 16
#: A file whose first tries join nothing is not wrapped: stop trying.
GIVE_UP_AFTER = 100
#: Files up to this size (pastes, captures) are tried on a weaker sign of wrapping than a join in
#: the head; a larger file pays for the width's regex pass only when its head shows a cut record.
SMALL_FILE = 16 << 20

Match = Callable[[str], "tuple[str, dict] | None"]
Strip = Callable[[str], "tuple[dict, str]"]

#: The head lines looked at: as many non-blank lines as launcher detection uses, so that the batch
#: scanner and the incremental one (whose heads differ in length) find the same width.
HEAD_NONBLANK = 200


def detect_width(lines: list[str], strip: Strip, match: Match, small: bool = True) -> int | None:
    """The terminal width of a wrapped file, from its first lines; None when nothing looks wrapped.

    The width is the longest line's length. A line of that length that is a record by itself is no
    sign of wrapping (a log's longest lines are usually whole records). One that is not counts when
    it joins back with the lines after it into a record; in a ``small`` file (a paste) also when the
    line after it starts no record of its own (the first cut record may come after the head)."""
    head: list[str] = []
    nonblank = 0
    for ln in lines:
        head.append(ln.rstrip("\r"))
        nonblank += bool(ln.strip())
        if nonblank >= HEAD_NONBLANK:
            break
    if len(head) < 2:
        return None
    width = max(map(len, head))
    if width < MIN_WIDTH:
        return None
    cut = [i for i in range(len(head) - 1) if len(head[i]) == width and head[i + 1].strip() and match(head[i]) is None]
    probe = TerminalWrap(width)
    for i in cut[:8]:
        text = "\n".join(head[i:i + MAX_PIECES + 1]).encode("utf-8", "surrogateescape")
        for _ in probe.join(text, lambda b: b.decode("utf-8", "replace"), strip, match):
            return width
    if small and any(is_continuation(strip(head[i + 1])[1]) for i in cut):
        return width
    return None


@dataclass(slots=True)
class Joined:
    """One record joined back: where its pieces are in the chunk and what it matched."""

    start: int  # offset of the first piece
    end: int  # offset just past the last piece (before its newline)
    starts: tuple[int, ...]  # line starts of every piece (the scanner skips them)
    label: dict  # the launcher fields of the first piece
    text: str
    kind: str
    fields: dict


class TerminalWrap:
    """Per file: the width, and the budget of tries left."""

    def __init__(self, width: int):
        self.width = width
        # a line of `width` characters (bytes: terminal logs are ASCII in practice), CRLF or not; one less
        # when the copy trimmed the space the cut fell on (tmux and most terminals drop trailing blanks)
        self._line = re.compile(rb"(?m)^[^\r\n]{%d,%d}\r?$" % (width - 1, width))
        self.tries = 0
        self.joins = 0

    @property
    def active(self) -> bool:
        return self.joins > 0 or self.tries < GIVE_UP_AFTER

    def join(self, chunk: bytes, clean: Callable[[bytes], str], strip: Strip, match: Match) -> Iterator[Joined]:
        """Wrapped records of a chunk, in order."""
        n = len(chunk)
        pos = 0
        while self.active:
            m = self._line.search(chunk, pos)
            if m is None:
                return
            starts = [m.start()]
            end = m.end()
            # the run of full-width lines, then the line that ends the record
            while len(starts) < MAX_PIECES and end < n:
                nxt = end + 1
                stop = chunk.find(b"\n", nxt)
                stop = n if stop < 0 else stop
                starts.append(nxt)
                end = stop
                if not self._line.fullmatch(chunk, nxt, stop):
                    break
            pos = end + 1
            if len(starts) < 2:
                continue
            self.tries += 1
            got = self._try(chunk, starts, end, clean, strip, match)
            if got is not None:
                self.joins += 1
                yield got

    def _try(self, chunk: bytes, starts: list[int], end: int, clean: Callable[[bytes], str], strip: Strip,
             match: Match) -> Joined | None:
        bounds = [(s, (starts[i + 1] - 1) if i + 1 < len(starts) else end) for i, s in enumerate(starts)]
        label, first = strip(clean(chunk[bounds[0][0]:bounds[0][1]]).rstrip("\r"))
        pieces = [first]
        # a piece one short of the width lost the blank the cut fell on: put it back after that piece
        seps = []
        for i, (s, e) in enumerate(bounds[1:]):
            prev = bounds[i]
            seps.append(" " if len(chunk[prev[0]:prev[1]].rstrip(b"\r")) < self.width else "")
            text = clean(chunk[s:e]).rstrip("\r")
            lf, rest = strip(text)
            if lf and lf != label:
                break  # a line of another writer: the record ended before it
            pieces.append(rest if lf else text)
        if len(pieces) < 2 or not pieces[-1].strip():
            return None
        # The join is tried first (most runs of a log that is not wrapped join into nothing: one or two
        # matches), the pieces alone only when it reads as a record.
        alone: list[bool] | None = None
        for k in range(len(pieces), 1, -1):  # the longest join that reads as one record
            joins = ["".join(p + s for p, s in zip(pieces[:k], [*seps[:k - 1], ""], strict=True))]
            if "".join(pieces[:k]) != joins[0]:
                joins.append("".join(pieces[:k]))
            for text in joins:
                got = match(text)
                if got is None:
                    continue
                if alone is None:
                    alone = [match(piece) for piece in pieces]
                if any(alone[1:k]) or (alone[0] is not None and alone[0][0] == got[0]):
                    # A piece is a record of its own (a long line, not a cut one). The first one may read
                    # as a record when cut too ("RuntimeError: ... Timed out waiting" + " 15000ms for
                    # recv ..."): then only a join that reads as another kind of record is one.
                    break
                return Joined(bounds[0][0], bounds[k - 1][1], tuple(s for s, _ in bounds[:k]), label, text,
                              got[0], got[1])
        return None
