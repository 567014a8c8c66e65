"""Markdown report for tickets and chat, drawn from the JSON contract like the text report.
Log text goes into code spans; nothing unknown is printed as ``None``."""

from __future__ import annotations

import re

from .safe import plain
from .text import inputs_line, job_line, last_line, ordered_findings


def _code(text: str) -> str:
    t = plain(text, 400).replace("`", "ˋ")
    return f"`{t}`"


_MARKUP = re.compile(r"([\\`*_\[\]<>|#!~])")


def _prose(text: str, limit: int = 2000) -> str:
    """Untrusted text outside code spans: markdown characters escaped, so nothing links, embeds or formats."""
    return _MARKUP.sub(r"\\\1", plain(text, limit))


def to_markdown(report) -> str:
    d = report if isinstance(report, dict) else report.to_dict()
    v = d["verdict"]
    lines = ["# nccl-doctor report", ""]
    lines.append(f"**Verdict:** {_code(v['headline'])}" if v else "**Verdict:** no failure found in these logs")
    lines.append("")
    lines.append(f"- job: {job_line(d)}")
    last = last_line(d)
    if last:
        lines.append(f"- last rank to report: {_code(last)}")
    lines.append("")
    found = ordered_findings(d)
    if found:
        lines += ["| rule | severity | summary |", "|---|---|---|"]
        for f in found:
            lines.append(f"| {f['rule']} | {f['severity']} | {_prose(f['summary'], 400)} |")
        lines.append("")
        for f in found:
            lines.append(f"## {f['rule']}: {f['title']}")
            lines.append("")
            lines.append(_prose(f["summary"]))
            lines.append("")
            for ev in f["evidence"][:5]:
                where = f"{ev['file']}:{ev['line']}"
                lines.append(f"- {_code(where)} {_code(ev['text'])}")
            if f["remedy"]:
                lines += ["", f"**Fix:** {' '.join(f['remedy'].split())}"]
            lines.append("")
    lines.append(f"_Inputs: {_prose(inputs_line(d))}._")
    for note in d["notes"]:
        lines.append(f"_Note: {_prose(note)}_")
    return "\n".join(lines) + "\n"
