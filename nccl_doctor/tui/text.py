"""Log text is untrusted: it reaches the screen only as ``rich.text.Text`` built from plain strings.

Never build a markup string from log text: ``[bold]``/``[link=...]`` in a line must show literally,
and escape sequences (OSC 52 clipboard writes, CSI colours) must not reach the terminal.
"""

from __future__ import annotations

from rich.text import Text

from ..report.safe import plain

STATUS_STYLE = {"failed": "bold red", "timed_out": "dark_orange", "silent": "magenta", "lagging": "cyan",
                "echo": "yellow", "ok": "green"}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def literal(text: object, style: str = "", limit: int = 400) -> Text:
    """``text`` as shown: control characters and escape sequences removed, markup left as characters."""
    return Text(plain(str(text), limit), style=style, no_wrap=False, end="")


def join(*parts: Text | tuple[str, str] | str) -> Text:
    """Join fixed (trusted) labels and literal pieces: tuples are (trusted text, style)."""
    out = Text(end="")
    for p in parts:
        if isinstance(p, Text):
            out.append_text(p)
        elif isinstance(p, tuple):
            out.append(p[0], style=p[1])
        else:
            out.append(p)
    return out
