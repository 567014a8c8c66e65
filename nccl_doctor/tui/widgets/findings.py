"""The findings list: choosing one highlights its ranks on the timeline."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ..text import SEVERITY_STYLE, join, literal


class FindingsList(OptionList):
    DEFAULT_CSS = """
    FindingsList {
        width: 42;
        height: 1fr;
        border: round $primary 50%;
        border-title-color: $text-muted;
    }
    FindingsList:focus { border: round $accent; }
    """

    class FindingChosen(Message):
        """A finding highlighted (``selected``: Enter or a click, which also opens its detail)."""

        def __init__(self, index: int | None, finding: dict | None, selected: bool = False) -> None:
            super().__init__()
            self.index = index
            self.finding = finding
            self.selected = selected

    def __init__(self, findings: list[dict], **kwargs) -> None:
        super().__init__(*[Option(self.prompt(f)) for f in findings], **kwargs)
        self.findings = findings
        self.one_line = False  # not ``compact``: OptionList's own reactive of that name drops the border

    def set_one_line(self, one_line: bool) -> None:
        """One line per finding (a narrow screen: the detail panel shows the rest), or three."""
        if one_line == self.one_line:
            return
        self.one_line = one_line
        keep = self.highlighted
        self.clear_options()
        self.add_options([Option(self.prompt(f, one_line)) for f in self.findings])
        if keep is not None:
            self.highlighted = keep

    def on_mount(self) -> None:
        self.border_title = f"findings ({len(self.findings)})"

    @staticmethod
    def prompt(f: dict, one_line: bool = False) -> Text:
        """Rule, severity, title and how many ranks; then (unless ``one_line``) the summary. The
        detail panel shows a chosen finding in full, with its evidence and fix."""
        sev = f["severity"]
        n = len(f["rows"])
        head = join((f"{f['rule']:<5}", "bold"), (f"{sev:<8}", SEVERITY_STYLE.get(sev, "")),
                    literal(f["title"], "bold", 120), (f" · {n} rank{'s' if n != 1 else ''}", "dim"))
        return head if one_line else join(head, "\n     ", literal(f["summary"], "", 300))

    def on_focus(self) -> None:
        i = self.highlighted
        if i is not None and 0 <= i < len(self.findings):
            self.post_message(self.FindingChosen(i, self.findings[i]))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if not self.has_focus:  # a highlight the user did not make (mount, clear) marks nothing
            return
        i = event.option_index
        self.post_message(self.FindingChosen(i, self.findings[i] if 0 <= i < len(self.findings) else None))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        i = event.option_index
        self.post_message(self.FindingChosen(i, self.findings[i] if 0 <= i < len(self.findings) else None,
                                             selected=True))
