"""Untrusted text made inert: ONE cleaning function for every face.

Log lines, host names, file names and flight-recorder contents are written by whatever ran on the
cluster. ``plain()`` is applied to them before they reach any face — the text and markdown reports,
the JSON report's text fields, webhook messages, the TUI and PNG labels — so that none of them can:

* drive a terminal: ANSI/ECMA-48 escape sequences (7-bit ``ESC [`` and 8-bit ``U+009B`` CSI, OSC,
  DCS ...) are removed (logs are full of colour codes); any other C0/C1 control, DEL, line/paragraph
  separator, or invisible format character (bidi overrides like U+202E, zero-width characters, tag
  characters) is shown as a visible escape (``\\x0b``, ``\\u202e``), so a newline in a file name shows
  as ``\\n`` and cannot start a forged ``VERDICT`` line;
* ping or redirect a chat: Slack/Mattermost tokens ``<!channel>``, ``<@U123>``, ``<#C1>`` and links
  ``<https://x|label>`` lose their opening ``<`` (shown as ``‹``); ``@channel``/``@here``/``@all``/
  ``@everyone`` mentions get a full-width ``＠``; a markdown link ``[label](url)`` loses its ``](``.

Tabs become spaces; text is cut to ``limit`` characters. The module imports only ``re`` so that
every layer may use it (tests/test_import_hygiene.py places it with the readers).
"""

from __future__ import annotations

import re
import unicodedata

#: Terminal escape sequences: CSI (ESC [ or U+009B) with parameters; OSC/DCS/PM/APC/SOS strings up
#: to BEL or ST (ESC \ or U+009C); any other two-character ESC sequence.
_ESC_SEQ = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
                      r"|(?:\x1b[\]P^_X]|[\x9d\x90\x9e\x9f\x98])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)?"
                      r"|\x1b[ -~]?")
#: Chat markup: Slack/Mattermost special tokens and links, @-mentions, markdown links.
_CHAT = re.compile(r"<(?=[!@#]|[A-Za-z][A-Za-z0-9+.-]{0,30}:)"
                   r"|(?<![\w@.])@(?=(?:channel|here|all|everyone)\b)"
                   r"|\]\(", re.IGNORECASE)
_CHAT_SUB = {"<": "‹", "@": "＠", "](": "] ("}
#: Unicode categories shown as escapes: controls, format characters (bidi, zero-width, tags),
#: line/paragraph separators, lone surrogates (from surrogateescape decoding).
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _escape(ch: str) -> str:
    n = ord(ch)
    if ch == "\t":
        return " "
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if n < 0x100:
        return f"\\x{n:02x}"
    return f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def plain(text: object, limit: int = 400) -> str:
    """``text`` made inert for any face (see the module docstring), at most ``limit`` characters."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if len(text) > 4 * limit + 64:
        text = text[: 4 * limit + 64]  # never clean megabytes to show a few hundred characters
    if not text.isprintable():
        if "\x1b" in text or "\x9b" in text or any("\x90" <= c <= "\x9f" for c in text):
            text = _ESC_SEQ.sub("", text)
        text = "".join(_escape(c) if not c.isprintable() and (c == "\t" or unicodedata.category(c) in _HIDDEN)
                       else c for c in text)
    if "<" in text or "@" in text or "](" in text:
        text = _CHAT.sub(lambda m: _CHAT_SUB[m.group(0)], text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
