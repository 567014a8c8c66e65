"""The verdict in one glance: the headline, where the last rank to report stopped, the tally."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...timeline import Timeline
from ..text import STATUS_STYLE, join, literal


class VerdictPanel(Static):
    DEFAULT_CSS = """
    VerdictPanel {
        height: auto;
        max-height: 6;
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
            head = literal(v.get("headline") or v["summary"], "bold", 400)
        elif any(f["severity"] in ("error", "warning") for f in tl.findings):
            head = Text("the rules single out no cause: see the findings", style="bold yellow")
        elif tl.last:
            head = Text("no rule fired, but one rank stands apart on the timeline", style="bold yellow")
        else:
            head = Text("no failure found in these logs", style="bold green")
        last = tl.last
        if last and last.get("rows"):
            r = tl.info(last["rows"][0])
            who = literal(last.get("who") or last["label"], "bold magenta", 200)
            got = r.get("reached_text") or ""
            if got:
                who.append_text(literal(f" · {got}", "magenta", 200))
        elif last:
            who = literal(last["label"], "bold magenta", 300)
        else:
            who = Text("no single rank stands out", style="dim")
        tally = Text(end="")
        for s, n in tl.status_counts().items():
            if n:
                tally.append(f"{s} {n}  ", style=STATUS_STYLE[s])
        inp = self.inputs
        n_files, hosts = inp.get("files", 0), tl.ranks["host"].nunique()
        read = f"{len(tl.ranks)} rank{'s' if len(tl.ranks) != 1 else ''} on {hosts} host{'s' if hosts != 1 else ''}"
        if inp:
            read += f" · {n_files} file{'s' if n_files != 1 else ''}"
        return join(head, "\n", ("LAST ", "bold magenta"), who, "\n", tally, (f"· {read}", "dim"))
