"""The rank timeline: one line per rank under a line per host, drawn with the Line API.

Only the visible lines are rendered, so 16k ranks scroll as fast as 16. The first two lines stay put:
the axis ruler and the last rank to report, which is therefore always in view.
"""

from __future__ import annotations

import math

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...report.safe import plain
from ...timeline import MARKS, RUNNING_X, STATUSES, Timeline, fmt_duration, nice_step
from ..text import STATUS_STYLE

GLYPH = {"stage": "·", "collective": "•", "warning": "▲", "timeout": "◆", "error": "✖", "last": "┃"}
MARK_STYLE = {"stage": Style(color="grey50"), "collective": Style(color="bright_blue"),
              "warning": Style(color="yellow"), "timeout": Style(color="dark_orange", bold=True),
              "error": Style(color="red", bold=True), "last": Style(color="white", bold=True)}
_STATUS = {s: Style.parse(v) for s, v in STATUS_STYLE.items()}
_DIM = Style(color="grey50")
_CURSOR = Style(bgcolor="grey23")
_LAST = Style(color="magenta", bold=True)
_MARKED = Style(color="yellow", bold=True)
LEFT = 32  # marker(1) label(9) status(10) reached(10) gap(1) bar-edge(1)
REACHED = 10


class RankTimeline(ScrollView, can_focus=True):
    """Ranks × (progress or wall clock). Arrow keys move, Enter selects, ``l`` jumps to the last rank."""

    DEFAULT_CSS = """
    RankTimeline {
        height: 1fr;
        overflow-x: hidden;
        border: round $primary 50%;
        border-title-color: $text-muted;
    }
    RankTimeline:focus { border: round $accent; }
    """
    BINDINGS = [
        Binding("up,k", "move(-1)", "up", show=False),
        Binding("down,j", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "jump(0)", "first", show=False),
        Binding("end", "jump(-1)", "last line", show=False),
        Binding("enter", "choose", "details", show=False),
    ]
    HEADER = 2
    cursor: reactive[int] = reactive(0, always_update=True)

    class RankHighlighted(Message):
        """The cursor is on a rank (``row``) or on a host line (``host``)."""

        def __init__(self, row: int | None, host: str | None) -> None:
            super().__init__()
            self.row = row
            self.host = host

    class RankChosen(RankHighlighted):
        """Enter on a rank or host line."""

    def __init__(self, tl: Timeline, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tl = tl
        df = tl.ranks
        self.statuses: set[str] = set(STATUSES)
        self.query = ""
        self.marked: set[int] = set()
        self.only_marked = False
        self._label = df["label"].astype(str).to_numpy()
        self._reached = df["reached"].fillna("").astype(str).to_numpy()
        self._status = df["status"].to_numpy()
        self._host = df["host"].fillna("(no host)").astype(str).to_numpy()
        self._host_lc = np.char.lower(self._host.astype(str))
        self._label_lc = np.char.lower(self._label.astype(str))
        self._rank = df["rank"].to_numpy(dtype=float, na_value=np.nan)
        self._hosts = list(dict.fromkeys(self._host))
        self._host_idx = {h: i for i, h in enumerate(self._hosts)}
        self._host_counts = {h: g.value_counts().to_dict() for h, g in df.groupby(self._host)["status"]}
        self._kinds = tl.marks["mark"].map({m: i for i, m in enumerate(MARKS)}).to_numpy()
        self._bounds = np.searchsorted(tl.marks["row"].to_numpy(), np.arange(tl.n + 1))
        self.axis = tl.axis
        self._items: list[int] = []
        self._set_axis(tl.axis)
        self._rebuild()

    # ---- view state -------------------------------------------------------------------------------

    def _set_axis(self, axis: str) -> None:
        self.axis = axis
        col = "t" if axis == "time" else "x"
        self._x = self.tl.marks[col].to_numpy(dtype=float)
        ok = self._x[~np.isnan(self._x)]
        self._lo = 0.0 if axis == "progress" or not len(ok) else float(ok.min())
        self._hi = float(ok.max()) if len(ok) else 1.0
        self.border_title = f"ranks by host · x = {'wall clock' if axis == 'time' else 'progress'}"

    def toggle_axis(self) -> None:
        self._set_axis("progress" if self.axis == "time" else "time")
        self.refresh()

    def _rebuild(self, keep: int | None = None) -> None:
        mask = np.isin(self._status, list(self.statuses))
        q = self.query.strip().lower()
        if q:
            num = q.lstrip("r")
            hit = np.char.find(self._host_lc, q) >= 0
            hit |= self._label_lc == q
            if num.isdigit():
                hit |= self._rank == int(num)
            mask &= hit
        if self.only_marked:
            mask &= np.isin(np.arange(self.tl.n), list(self.marked))
        items: list[int] = []
        prev = None
        for r in np.flatnonzero(mask).tolist():
            h = self._host[r]
            if h != prev:
                items.append(-1 - self._host_idx[h])
                prev = h
            items.append(r)
        self._items = items
        self.virtual_size = Size(0, len(items) + self.HEADER)
        if keep is not None and keep in items:
            self.cursor = items.index(keep)
        else:  # the first rank shown (not its host line)
            self.cursor = 1 if len(items) > 1 else 0
        self._scroll_to_cursor()
        self.refresh()

    def set_filter(self, statuses: set[str]) -> None:
        self.statuses = set(statuses)
        self._rebuild(self.current_row)

    def set_query(self, query: str) -> None:
        self.query = query
        self._rebuild(self.current_row)

    def set_marked(self, rows: list[int], only: bool | None = None) -> None:
        self.marked = set(rows)
        if only is not None:
            self.only_marked = only
        self._rebuild(self.current_row)
        if rows:
            self.goto_row(min(rows))

    @property
    def visible_rows(self) -> list[int]:
        return [i for i in self._items if i >= 0]

    @property
    def current_row(self) -> int | None:
        if not self._items:
            return None
        item = self._items[min(self.cursor, len(self._items) - 1)]
        return item if item >= 0 else None

    def goto_row(self, row: int, center: bool = True) -> bool:
        if row not in self._items:
            return False
        self.cursor = self._items.index(row)
        self._scroll_to_cursor(center=center)
        return True

    def goto_last(self) -> bool:
        rows = (self.tl.last or {}).get("rows") or []
        return bool(rows) and self.goto_row(rows[0])

    # ---- cursor -----------------------------------------------------------------------------------

    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - self.HEADER)

    def _scroll_to_cursor(self, center: bool = False) -> None:
        top = round(self.scroll_offset.y)
        h = self._page
        if center:
            self.scroll_to(y=max(0, self.cursor - h // 2), animate=False, immediate=True)
        elif self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + h:
            self.scroll_to(y=self.cursor - h + 1, animate=False, immediate=True)

    def watch_cursor(self, value: int) -> None:
        if not self._items:
            self.post_message(self.RankHighlighted(None, None))
            return
        item = self._items[min(value, len(self._items) - 1)]
        self.post_message(self.RankHighlighted(item if item >= 0 else None,
                                               self._hosts[-1 - item] if item < 0 else None))
        self.refresh()

    def action_move(self, delta: int) -> None:
        if self._items:
            self.cursor = max(0, min(len(self._items) - 1, self.cursor + delta))
            self._scroll_to_cursor()

    def action_page(self, direction: int) -> None:
        self.action_move(direction * self._page)

    def action_jump(self, where: int) -> None:
        self.action_move(len(self._items) if where < 0 else -len(self._items))

    def action_choose(self) -> None:
        row = self.current_row
        item = self._items[self.cursor] if self._items else 0
        self.post_message(self.RankChosen(row, self._hosts[-1 - item] if item < 0 else None))

    def on_click(self, event) -> None:
        idx = round(self.scroll_offset.y) + event.y - self.HEADER
        if event.y == 1:
            self.goto_last()
        elif 0 <= idx < len(self._items):
            self.cursor = idx
        self.focus()

    # ---- drawing ----------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._ruler(width)
        if y == 1:
            rows = (self.tl.last or {}).get("rows") or []
            if not rows:
                return Strip([Segment("  no single rank stands out as the last to report", _DIM)]).adjust_cell_length(width)
            return self._rank_line(rows[0], width, cursor=False, pinned=True)
        idx = round(self.scroll_offset.y) + y - self.HEADER
        if idx >= len(self._items):
            return Strip.blank(width)
        item = self._items[idx]
        cur = idx == self.cursor
        return self._rank_line(item, width, cur) if item >= 0 else self._host_line(-1 - item, width, cur)

    def _col(self, x: np.ndarray, width: int) -> np.ndarray:
        span = (self._hi - self._lo) or 1.0
        return np.clip(np.round((x - self._lo) / span * (width - 1)), 0, width - 1).astype(int)

    def _rank_line(self, row: int, width: int, cursor: bool, pinned: bool = False) -> Strip:
        status = str(self._status[row])
        st = _STATUS.get(status, _DIM)
        is_last = bool(self.tl.ranks.at[row, "is_last"])
        lead = ("★", _LAST) if is_last else (("●", _MARKED) if row in self.marked else (" ", _DIM))
        segs = [Segment(lead[0], lead[1]),
                Segment(f"{self._label[row][:8]:<9}", _LAST if is_last else Style(bold=cursor)),
                Segment(f"{status:<10}", st), Segment(f"{self._reached[row][:REACHED - 1]:<{REACHED}}", _DIM),
                Segment(" │", _DIM)]
        if pinned:
            segs[:2] = [Segment("★", _LAST), Segment(f"{self._label[row][:8]:<9}", _LAST)]
        bw = max(1, width - LEFT)
        cells = self._bar_cells(row, bw, st)
        free = len(cells) - len("".join(ch for ch, _ in cells).rstrip())
        tag = next((t for t in (" ◀ last to report", " ◀ last") if free > len(t) + 1), "")
        if pinned and tag:  # only where it hides nothing
            cells[bw - len(tag) - 1: bw - 1] = [(ch, _LAST) for ch in tag]
        segs.extend(Segment(ch, style) for ch, style in _runs(cells))
        strip = Strip(segs).adjust_cell_length(width)
        return strip.apply_style(_CURSOR) if cursor else strip

    def _bar_cells(self, row: int, bw: int, st: Style) -> list[tuple[str, Style]]:
        cells: list[tuple[str, Style]] = [(" ", Style())] * bw
        a, b = self._bounds[row], self._bounds[row + 1]
        xs = self._x[a:b]
        ok = ~np.isnan(xs)
        if not ok.any():
            note = "no timestamps" if self.axis == "time" and b > a else ("no lines" if b == a else "")
            return [(ch, _DIM) for ch in note[:bw]] + cells[len(note[:bw]):]
        cols = self._col(xs[ok], bw)
        kinds = self._kinds[a:b][ok]
        line = Style(color=st.color, dim=True)
        for c in range(int(cols.min()), int(cols.max()) + 1):
            cells[c] = ("─", line)
        for k in range(len(MARKS)):
            name = MARKS[k]
            for c in cols[kinds == k].tolist():
                cells[c] = (GLYPH[name], MARK_STYLE[name])
        return cells

    def _host_line(self, hidx: int, width: int, cursor: bool) -> Strip:
        host = self._hosts[hidx]
        counts = self._host_counts.get(host, {})
        segs = [Segment("▾ ", _DIM), Segment(f"{plain(host, LEFT - 4):<{LEFT - 4}}", Style(bold=True)),
                Segment(" │", _DIM), Segment(f" {sum(counts.values())} rank{'s' if sum(counts.values()) != 1 else ''} ", _DIM)]
        for s in STATUSES:
            if counts.get(s):
                segs.append(Segment(f" {s} {counts[s]}", _STATUS[s]))
        strip = Strip(segs).adjust_cell_length(width)
        return strip.apply_style(_CURSOR) if cursor else strip

    def _ruler(self, width: int) -> Strip:
        bw = max(1, width - LEFT)
        cells = [" "] * bw
        for x, label in self._ticks(bw):
            c = int(self._col(np.array([x]), bw)[0])
            c = min(c, bw - len(label))
            if c >= 0 and all(ch == " " for ch in cells[max(0, c - 1): c + len(label) + 1]):
                cells[c: c + len(label)] = list(label)
        head = f" {'rank':<9}{'status':<10}{'reached':<{REACHED}} │"
        return Strip([Segment(head, _DIM), Segment("".join(cells), Style(color="grey70", bold=True))]).adjust_cell_length(width)

    def _ticks(self, bw: int) -> list[tuple[float, str]]:
        if self.axis == "time":
            span = self._hi - self._lo
            step = nice_step(span / max(1, bw // 14))
            first = math.ceil(self._lo / step) * step
            return [(first + i * step, "+" + fmt_duration(first + i * step))
                    for i in range(int((self._hi - first) // step) + 1)]
        ticks = [(3.0, "init"), (6.0, "ready"), (RUNNING_X, "run")]
        if self.tl.counter is not None and self._hi > RUNNING_X:
            n = int(self._hi - RUNNING_X)
            base = self.tl.counter_base or 0
            for v in sorted({1, n, *range(1, n + 1, max(1, n // 4))}):
                ticks.append((RUNNING_X + v, self.tl.counter_tick(base + v - 1)))
        return ticks


def _runs(cells: list[tuple[str, Style]]):
    """Merge neighbouring cells of one style into one segment."""
    text, style = "", None
    for ch, st in cells:
        if st is style or st == style:
            text += ch
        else:
            if text:
                yield text, style
            text, style = ch, st
    if text:
        yield text, style
