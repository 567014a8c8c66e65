"""Status filters (keys 1–5) and the ``/`` search box."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input, Static

from ...timeline import STATUSES
from ..text import STATUS_STYLE, literal


class FilterBar(Static):
    DEFAULT_CSS = """
    FilterBar {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    """

    def show(self, counts: dict[str, int], active: set[str], query: str, only_marked: bool, shown: int) -> None:
        out = Text(end="")
        for i, s in enumerate(STATUSES, 1):
            on = s in active
            out.append(f"{i}", style="bold reverse" if on else "dim")
            out.append(f" {s} {counts.get(s, 0)}  ", style=STATUS_STYLE[s] if on else "dim strike")
        out.append("│ ", style="dim")
        out.append("m ", style="bold reverse" if only_marked else "dim")
        out.append("finding's ranks only  ", style="" if only_marked else "dim")
        out.append("│ / ", style="dim")
        out.append_text(literal(query, "bold", 60) if query else Text("search", style="dim"))
        out.append(f"  │ {shown} shown", style="dim")
        self.update(out)


class SearchBox(Input):
    """Type a rank (``37``, ``r37``) or part of a host name; Enter keeps it, Escape clears it."""

    DEFAULT_CSS = """
    SearchBox {
        dock: bottom;
        display: none;
        height: 3;
        border: tall $accent;
    }
    SearchBox.-open { display: block; }
    """
    BINDINGS = [Binding("escape", "cancel", "clear search", show=False)]

    class Done(Message):
        """Search closed (Enter keeps the query, Escape clears it)."""

        def __init__(self, query: str) -> None:
            super().__init__()
            self.query = query

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="rank number or host (Enter keeps, Esc clears)", **kwargs)

    def open(self) -> None:
        self.add_class("-open")
        self.focus()

    def action_cancel(self) -> None:
        self.value = ""
        self.remove_class("-open")
        self.post_message(self.Done(""))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.remove_class("-open")
        self.post_message(self.Done(self.value))
