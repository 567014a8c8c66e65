"""A console saved from a browser as an HTML page: Jenkins' "Console Output" (``consoleFull``: a
``<pre>`` of escaped lines in spans, the Timestamper's ``<b>HH:MM:SS</b>``), a GitLab job page (one
``<div class="log-line">`` per log line, maybe all on one line of the file), ``jupyter nbconvert --to
html``, a plain ``<pre>`` page. Read as the text it shows: scripts and styles dropped, tags removed,
entities unescaped, a line per line break the page draws (``<br>``, the end of a ``div``, ``p``,
``tr`` or ``li``), each at the file line it starts on (``line_map``). Bounded: a page larger than
HTML_MAX is not read.
"""

from __future__ import annotations

import html
import re

#: Largest page read (decoded whole, in memory).
HTML_MAX = 64 << 20
_HEAD = re.compile(rb"<!doctype html|<html[\s>]|<pre[\s>]|<div[\s>]", re.I)
#: What a browser does not show, its lines kept as blank ones (line numbers stay the file's).
_HIDDEN = re.compile(r"<(script|style|head)\b[^>]{0,2000}>.*?</\1\s{0,8}>", re.I | re.S)
#: Where a browser starts a new line.
_BREAK = re.compile(r"<br\s{0,8}/?>|</(?:div|p|tr|li|h[1-6])\s{0,8}>", re.I)
_TAG = re.compile(r"<[^<>]{0,4000}>")
#: A log viewer's own line numbers (GitLab's "<a class=... line-number>12</a>"): not the log's text.
_LINE_NUMBER = re.compile(r"<a\b[^<>]{0,400}line-number[^<>]{0,400}>\s{0,4}\d{0,9}\s{0,4}</a>", re.I)


def looks_like(head: bytes) -> bool:
    """A page: its first bytes are markup (a log that quotes an HTML error body somewhere is no page)."""
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return start[:1] == b"<" and _HEAD.match(start) is not None


def page_lines(data: bytes) -> tuple[bytes, list[int]] | None:
    """The text the page shows, line by line, and the file line of each; None when it shows none."""
    if len(data) > HTML_MAX:
        return None
    text = data.decode("utf-8", "replace")
    text = _HIDDEN.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = _LINE_NUMBER.sub("", text)
    out: list[str] = []
    line_map: list[int] = []
    for n, physical in enumerate(text.split("\n"), 1):
        for piece in _BREAK.split(physical):
            shown = html.unescape(_TAG.sub("", piece)).rstrip("\r")
            if shown.strip():
                out.append(shown)
                line_map.append(n)
    return (("\n".join(out) + "\n").encode("utf-8", "surrogatepass"), line_map) if out else None
