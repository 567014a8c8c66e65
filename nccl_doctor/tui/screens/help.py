"""``?``: the keys, on one page."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = [
    ("↑ ↓ j k, PgUp PgDn, Home End", "move along the ranks (grouped by host)"),
    ("Enter, click", "show the rank's last lines and evidence"),
    ("l", "jump to the last rank to report (pinned under the ruler)"),
    ("Tab / Shift+Tab", "findings ↔ timeline ↔ detail"),
    ("f", "focus the findings; choosing one highlights its ranks (●)"),
    ("m", "show only the chosen finding's ranks"),
    ("Esc", "clear the finding highlight and the search"),
    ("/", "search a rank (37, r37) or a host (part of its name)"),
    ("1 2 3 4 5", "toggle failed, timed_out, silent, lagging, ok; 0 shows all"),
    ("x", "switch the x-axis: wall clock ↔ logical progress"),
    ("?", "this help"),
    ("q", "quit"),
]
LEGEND = "✖ error   ◆ watchdog timeout   ▲ warning   • collective (SeqNum)   · init stage   ┃ last line   ★ last to report"


class HelpScreen(ModalScreen):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 96;
        height: auto;
        border: thick $accent;
        background: $surface;
        padding: 1 2;
    }
    """
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in KEYS:
            table.add_row(key, what)
        with Vertical():
            yield Static("[b]nccl-doctor[/b] · keys", markup=True)
            yield Static(table)
            yield Static(LEGEND, markup=False)
