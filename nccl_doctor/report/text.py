"""The terminal report, drawn from the JSON contract (``report_dict``) so that a saved report and
a fresh one read the same.

Untrusted log text is appended as plain ``rich.text.Text`` (never parsed as markup) after control
characters are removed. Colour is the caller's choice (the CLI: ``--color``, NO_COLOR, FORCE_COLOR).
With a ``width`` (a terminal) every row wraps at it with a hanging indent under its label, and an
evidence line takes at most ``EVIDENCE_LINES`` rows unless ``verbose``; without one (a pipe or a
file) each row stays one line, for grep.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.text import Text

from ..evidence.facts import fmt_ranks
from .reach import main_pg, reach_label, stage_label
from .safe import plain

_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
LABEL = 9  # VERDICT, JOB, LAST, INPUTS, NOTE
HEAD = 13  # "MN3  error   "
EVIDENCE = 15  # "     evidence  "
EVIDENCE_LINES = 3


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def job_line(d: dict[str, Any]) -> str:
    job = d["job"]
    hosts = len(job["hosts"])
    bits = [f"{job['ranks_expected']} ranks expected" if job["ranks_expected"] is not None
            else "ranks expected: unknown", f"{job['ranks_seen']} seen",
            plural(hosts, "host") if hosts else "no host named in the logs"]
    if job["nccl_versions"]:
        bits.append("NCCL " + ", ".join(job["nccl_versions"]))
    if job["torch_versions"]:
        bits.append("torch " + ", ".join(job["torch_versions"]))
    return " · ".join(bits)


def last_line(d: dict[str, Any]) -> str:
    """Where the last rank to report stopped: its last line and how far it got (the verdict says
    why it is named; this row does not say it again)."""
    last = d["last_rank_to_report"]
    if not last:
        return ""
    rank, host = last.get("rank"), last.get("host")
    if rank is not None:
        who = f"rank {rank}"
    elif last.get("ranks"):
        who = f"ranks {fmt_ranks(last['ranks'])}"  # ranges with a count, never thousands of numbers
    else:
        who = "a process" if host else "a process (rank and host not in the logs)"
    who += f" ({host})" if host and (rank is not None or last.get("ranks")) else (f" on {host}" if host else "")
    mine = [r for r in d["ranks"] if (rank is not None and r["rank"] == rank) or
            (rank is None and not last.get("ranks") and host and r["host"] == host)]
    if rank is None and not host and not last.get("ranks") and len(d["ranks"]) == 1:
        mine = d["ranks"]  # the only process of the logs
    bits = [who]
    if mine and (rank is not None or len(mine) == 1):  # several generations of one rank: the latest
        r = mine[-1]
        if r["last_line"]:
            bits.append(f"last line {r['last_line']['file']}:{r['last_line']['line']}")
        got = reach_label(r, main_pg(d["ranks"]))
        if got or r["stage"] != "none" or any(x["stage"] != "none" for x in d["ranks"]):
            bits.append(got or stage_label(r["stage"]))  # (a job with no NCCL line at all: no NCCL stage)
    elif not mine and rank is not None:
        bits.append("no line of its own")
    return " · ".join(bits)


def inputs_line(d: dict[str, Any]) -> str:
    inp = d["inputs"]
    text = (f"{plural(inp['files'], 'file')}, {plural(inp['lines'], 'line')}, {inp['bytes'] / 1e6:.1f} MB, "
            f"{plural(inp['unparsed_lines'], 'line')} not recognised")
    if inp["skipped"]:
        text += f"; {len(inp['skipped'])} skipped or partly read: " + "; ".join(
            f"{s['path']} ({s['reason']})" for s in inp["skipped"][:5])
        if len(inp["skipped"]) > 5:
            text += f"; {len(inp['skipped']) - 5} more"
    return text


def ordered_findings(d: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdict's findings first, in its causal order; then the rest as the rules sorted them."""
    order = {rid: i for i, rid in enumerate((d["verdict"] or {}).get("rules") or [])}
    return sorted(d["findings"], key=lambda f: order.get(f["rule"], len(order)))


class _Rows:
    """Rows of a label (or indent) and a body that wraps under its own first column."""

    def __init__(self, width: int | None) -> None:
        self.width = width
        self.out = Text()
        self._console = Console(width=width or 80, no_color=True, markup=False, emoji=False, highlight=False)

    def row(self, head: Text | str, body: Text | str, indent: int, max_lines: int | None = None) -> None:
        head = head if isinstance(head, Text) else Text(head)
        body = body if isinstance(body, Text) else Text(body)
        if head.cell_len < indent:
            head.pad_right(indent - head.cell_len)
        if self.width is None or self.width - indent < 20:
            self.out.append_text(head)
            self.out.append_text(body)
            self.out.append("\n")
            return
        lines = body.wrap(self._console, self.width - indent, overflow="fold")
        if max_lines is not None and len(lines) > max_lines:
            lines = lines[:max_lines]
            last = lines[-1]
            last.truncate(self.width - indent - 1)
            last.append("…", style="dim")
        for i, line in enumerate(lines):
            self.out.append_text(head if i == 0 else Text(" " * indent))
            line.rstrip()
            self.out.append_text(line)
            self.out.append("\n")

    def blank(self) -> None:
        self.out.append("\n")


def build(report, verbose: bool = False, width: int | None = None) -> Text:
    d = report if isinstance(report, dict) else report.to_dict()
    rows = _Rows(width)
    v = d["verdict"]
    if v:
        rows.row(Text("VERDICT", style="bold magenta"), Text(plain(v["headline"], 400), style="bold"), LABEL)
    else:
        rows.row(Text("VERDICT", style="bold green"), "no failure found in these logs", LABEL)
    rows.row(Text("JOB", style="bold"), job_line(d), LABEL)
    last = last_line(d)
    if last:
        rows.row(Text("LAST", style="bold"), plain(last, 600), LABEL)
    rows.blank()
    for i, f in enumerate(ordered_findings(d)):
        if i and width is not None:
            rows.blank()
        sev = f["severity"]
        head = Text(f"{f['rule']:<5}", style="bold")
        head.append(f"{sev:<8}", style=_SEV_STYLE[sev])
        body = Text(plain(f"{f['title']} — {f['summary']}", 2000))
        if f["confidence"] != "high":
            body.append(f"  [{f['confidence']} confidence]", style="dim")
        rows.row(head, body, HEAD)
        shown = f["evidence"] if verbose else f["evidence"][:3]
        for ev in shown:
            body = Text(plain(f"{ev['file']}:{ev['line']}", 300), style="underline")
            body.append("  ")
            body.append(plain(ev["text"], 400 if verbose else 240))
            rows.row(Text("     evidence  ", style="dim"), body, EVIDENCE, None if verbose else EVIDENCE_LINES)
        if len(f["evidence"]) > len(shown):
            rows.row(Text("     …         ", style="dim"),
                     Text(f"{len(f['evidence']) - len(shown)} more (--verbose)", style="dim"), EVIDENCE)
        if f["remedy"]:
            rows.row(Text("     fix       ", style="dim"), Text(plain(" ".join(f["remedy"].split()), 1200),
                                                             style="green"), EVIDENCE)
    rows.blank()
    rows.row(Text("INPUTS", style="dim"), inputs_line(d), LABEL)
    for note in d["notes"]:
        rows.row(Text("NOTE", style="dim"), plain(note, 2000), LABEL)
    return rows.out


def to_text(report, color: bool | None = None, width: int | None = None, verbose: bool = False) -> str:
    """The report as text; ``width``: wrap at that many columns (None: one line per row)."""
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=bool(color), no_color=not color, color_system="standard" if color else None,
                      width=10_000, highlight=False, markup=False, emoji=False, soft_wrap=True)
    console.print(build(report, verbose=verbose, width=width), end="")
    return buf.getvalue()
