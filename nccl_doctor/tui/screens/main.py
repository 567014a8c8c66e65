"""The main screen: verdict on top, findings beside the rank timeline, the chosen rank below."""

from __future__ import annotations

from functools import partial

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Input

from ...timeline import STATUSES, Timeline
from ..tail import lines_before
from ..widgets import FilterBar, FindingsList, RankDetail, RankTimeline, SearchBox, VerdictPanel

TAIL_DELAY = 0.15


class MainScreen(Screen):
    """Wide (>= 120 columns): findings beside the timeline. Narrower: the findings above it, one
    finding per two lines. Short (< 36 rows): no title bar, and the detail panel opens on Enter
    (or when a finding is chosen) in place of the findings and the lower part of the timeline,
    Escape closes it:
    at 80x24 the verdict, the findings and at least 5 rank rows are on screen at once."""

    AUTO_FOCUS = "RankTimeline"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    DEFAULT_CSS = """
    MainScreen #middle { height: 1fr; }
    MainScreen.-narrow #middle { layout: vertical; }
    MainScreen.-narrow FindingsList { width: 1fr; }
    MainScreen.-short Header { display: none; }
    MainScreen.-short RankDetail { display: none; height: 1fr; }
    MainScreen.-short.-detail RankDetail { display: block; }
    MainScreen.-short.-detail FindingsList { display: none; }
    """
    BINDINGS = [
        Binding("slash", "search", "search"),
        *[Binding(str(i), f"toggle('{s}')", s, show=False) for i, s in enumerate(STATUSES, 1)],
        Binding("0", "show_all", "all statuses", show=False),
        Binding("m", "only_marked", "finding's ranks"),
        Binding("l", "last", "last to report"),
        Binding("f", "focus_findings", "findings"),
        Binding("x", "axis", "x-axis"),
        Binding("escape", "clear", "clear", show=False),
        Binding("question_mark", "app.help", "help"),
    ]

    def __init__(self, report, tl: Timeline) -> None:
        super().__init__()
        self.report = report
        self.tl = tl
        self._tail_timer = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield VerdictPanel(self.tl, getattr(self.report, "inputs", None))
        with Horizontal(id="middle"):
            yield FindingsList(self.tl.findings)
            yield RankTimeline(self.tl)
        yield RankDetail(self.tl)
        yield FilterBar()
        yield SearchBox()
        yield Footer()

    @property
    def timeline(self) -> RankTimeline:
        return self.query_one(RankTimeline)

    def on_mount(self) -> None:
        self.call_after_refresh(self._initial_view)
        self._update_bar()

    def on_resize(self, event) -> None:
        findings = self.query_one(FindingsList)
        findings.set_one_line(event.size.width < 120 or event.size.height < 36)
        narrow = event.size.width < 120  # findings above the timeline: as many rows as they need, up to 4
        findings.styles.height = min(4 if event.size.height < 36 else 6, max(1, len(findings.findings))) + 2 \
            if narrow else "1fr"

    def _initial_view(self) -> None:
        if not self.timeline.goto_last():
            self.timeline.cursor = 0

    def _update_bar(self) -> None:
        tv = self.timeline
        self.query_one(FilterBar).show(self.tl.status_counts(), tv.statuses, tv.query, tv.only_marked,
                                       len(tv.visible_rows))

    # ---- messages ---------------------------------------------------------------------------------

    def on_rank_timeline_rank_highlighted(self, msg: RankTimeline.RankHighlighted) -> None:
        if self.query_one(FindingsList).has_focus or self.query_one(RankDetail).has_focus:
            return  # the cursor moved to a chosen finding's ranks: the detail keeps the finding
        self.query_one(RankDetail).show_rank(msg.row, msg.host)
        if self._tail_timer is not None:
            self._tail_timer.stop()
        if msg.row is not None:
            self._tail_timer = self.set_timer(TAIL_DELAY, partial(self._start_tail, msg.row))

    def on_rank_timeline_rank_chosen(self, msg: RankTimeline.RankChosen) -> None:
        self.add_class("-detail")
        self.query_one(RankDetail).focus()

    def _start_tail(self, row: int) -> None:
        r = self.tl.info(row)
        if r["last_file"] is None or r["last_line"] is None:
            return
        path, line = str(r["last_file"]), int(r["last_line"])
        needles: tuple[str, ...] = ()
        if int((self.tl.ranks["last_file"] == path).sum()) > 1:  # a shared file: this rank's lines only
            needles = tuple(n for n in (
                f"{r['host']}:{r['pid']}:" if r["host"] and r["pid"] is not None else "",
                f"[rank{r['rank']}]:" if r["rank"] is not None else "",
                f"{r['rank']}: " if r["rank"] is not None else "") if n)

        def work() -> None:
            lines = lines_before(path, line, needles=needles)
            if lines:
                self.app.call_from_thread(self.query_one(RankDetail).show_tail, row, lines)

        self.run_worker(work, thread=True, exclusive=True, group="tail")

    def on_findings_list_finding_chosen(self, msg: FindingsList.FindingChosen) -> None:
        if msg.finding is None:
            return
        self.timeline.set_marked(msg.finding["rows"])
        self.query_one(RankDetail).show_finding(msg.finding)
        if msg.selected:
            self.add_class("-detail")
            self.query_one(RankDetail).focus()
        self._update_bar()

    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, SearchBox):
            self.timeline.set_query(event.value)
            self._update_bar()

    def on_search_box_done(self, msg: SearchBox.Done) -> None:
        self.timeline.set_query(msg.query)
        self.timeline.focus()
        self._update_bar()

    # ---- actions ----------------------------------------------------------------------------------

    def action_search(self) -> None:
        box = self.query_one(SearchBox)
        box.open()

    def action_toggle(self, status: str) -> None:
        tv = self.timeline
        tv.set_filter(tv.statuses ^ {status})
        self._update_bar()

    def action_show_all(self) -> None:
        self.timeline.set_filter(set(STATUSES))
        self._update_bar()

    def action_only_marked(self) -> None:
        tv = self.timeline
        tv.set_marked(sorted(tv.marked), only=not tv.only_marked)
        self._update_bar()

    def action_clear(self) -> None:
        if self.has_class("-detail") and self.has_class("-short"):  # Escape closes the detail first
            self.remove_class("-detail")
            self.timeline.focus()
            return
        tv = self.timeline
        tv.set_marked([], only=False)
        tv.set_query("")
        self.query_one(SearchBox).value = ""
        self.query_one(FindingsList).highlighted = None
        self._update_bar()
        tv.focus()

    def action_last(self) -> None:
        tv = self.timeline
        if not tv.goto_last() and self.tl.last:
            tv.set_filter(set(STATUSES))
            tv.set_query("")
            tv.goto_last()
        tv.focus()
        self._update_bar()

    def action_focus_findings(self) -> None:
        self.query_one(FindingsList).focus()

    def action_axis(self) -> None:
        self.timeline.toggle_axis()
