"""The verdict in one glance: the headline, the last rank to report, and what was read."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...timeline import Timeline
from ..text import STATUS_STYLE, join, literal


class VerdictPanel(Static):
    DEFAULT_CSS = """
    VerdictPanel {
        height: auto;
        max-height: 8;
        padding: 0 1;
        border: round $error 60%;
        border-title-color: $text;
        border-title-style: bold;
    }
    VerdictPanel.-healthy { border: round $success 60%; }
    """

    def __init__(self, tl: Timeline, inputs: dict | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tl = tl
        self.inputs = inputs or {}

    def on_mount(self) -> None:
        self.border_title = "VERDICT"
        self.set_class(self.tl.verdict is None and not self.tl.last, "-healthy")
        self.update(self.build())

    def build(self) -> Text:
        tl = self.tl
        v = tl.verdict
        if v:
            head = literal(v["summary"], "bold", 600)
        elif any(f["severity"] in ("error", "warning") for f in tl.findings):
            head = Text("the rules single out no cause: see the findings", style="bold yellow")
        elif tl.last:
            head = Text("no rule fired, but one rank stands apart on the timeline", style="bold yellow")
        else:
            head = Text("no failure found in these logs", style="bold green")
        last = tl.last
        who = literal(last["label"], "bold magenta", 300) if last else Text("no single rank stands out", style="dim")
        counts = tl.status_counts()
        tally = Text(end="")
        for s, n in counts.items():
            if n:
                tally.append(f"{s} {n}  ", style=STATUS_STYLE[s])
        inp = self.inputs
        read = (f"{inp.get('files', '?')} files · {inp.get('lines', 0):,} lines · "
                f"{len(tl.ranks)} ranks on {tl.ranks['host'].nunique()} hosts") if inp else f"{len(tl.ranks)} ranks"
        return join(head, "\n", ("LAST TO REPORT  ", "bold magenta"), who, "\n", tally, (f"· {read}", "dim"))
