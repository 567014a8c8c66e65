"""The terminal report. Untrusted log text is appended as plain ``rich.text.Text`` (never parsed
as markup) after control characters are removed; colour only on a terminal, ``NO_COLOR`` respected.
"""

from __future__ import annotations

import io
import os

from rich.console import Console
from rich.text import Text

from .safe import plain

_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _job_line(report) -> str:
    job = report.job
    bits = [f"{job.ranks_expected if job.ranks_expected is not None else '?'} ranks expected",
            f"{job.ranks_seen} seen", f"{len(job.hosts)} host{'s' if len(job.hosts) != 1 else ''}"]
    if job.versions("nccl"):
        bits.append("NCCL " + ", ".join(job.versions("nccl")))
    if job.versions("torch"):
        bits.append("torch " + ", ".join(job.versions("torch")))
    return " · ".join(bits)


def build(report, verbose: bool = False) -> Text:
    out = Text()

    def row(label: str, body: str | Text, style: str = "bold") -> None:
        out.append(f"{label:<9}", style=style)
        out.append(body if isinstance(body, Text) else Text(plain(body, 2000)))
        out.append("\n")

    v = report.verdict
    if v:
        row("VERDICT", v["summary"], "bold magenta")
    else:
        row("VERDICT", "no failure found in these logs", "bold green")
    row("JOB", _job_line(report))
    last = report.last_rank_to_report
    if last:
        who = f"rank {last['rank']}" if last.get("rank") is not None else (
            "ranks " + ", ".join(map(str, last.get("ranks", []))) if last.get("ranks")
            else "a process" if last.get("host") else "a process (rank and host not in the logs)")
        row("LAST", f"{who}{' on ' + last['host'] if last.get('host') else ''}: {last['why']}")
    out.append("\n")
    for f in report.findings:
        sev = f.severity.value
        out.append(f"{f.rule:<5}", style="bold")
        out.append(f"{sev:<8}", style=_SEV_STYLE[sev])
        out.append(Text(plain(f"{f.title} — {f.summary}", 2000)))
        out.append(f"  [{f.confidence}]\n" if f.confidence != "high" else "\n", style="dim")
        shown = f.evidence if verbose else f.evidence[:3]
        for ev in shown:
            out.append("     evidence  ", style="dim")
            out.append(Text(plain(f"{ev.file}:{ev.line}", 300), style="underline"))
            out.append("  ")
            out.append(Text(plain(ev.text, 240)))
            out.append("\n")
        if len(f.evidence) > len(shown):
            out.append(f"     …         {len(f.evidence) - len(shown)} more (--verbose)\n", style="dim")
        if f.remedy:
            lines = " ".join(f.remedy.split())
            out.append("     fix       ", style="dim")
            out.append(Text(plain(lines, 1200), style="green"))
            out.append("\n")
    inp = report.inputs
    summary = (f"{inp['files']} files, {inp['lines']:,} lines, {inp['bytes'] / 1e6:.1f} MB, "
               f"{inp['unparsed_lines']:,} lines not recognised")
    if inp["skipped"]:
        summary += f"; {len(inp['skipped'])} skipped: " + "; ".join(
            f"{s['path']} ({s['reason']})" for s in inp["skipped"][:5])
    out.append("\n")
    row("INPUTS", summary, "dim")
    for note in report.notes:
        row("NOTE", note, "dim")
    return out


def to_text(report, color: bool | None = None, width: int | None = None, verbose: bool = False) -> str:
    if color is None:
        color = False
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color or "NO_COLOR" in os.environ,
                      width=width or 200, highlight=False, markup=False, emoji=False, soft_wrap=True)
    console.print(build(report, verbose=verbose), end="")
    return buf.getvalue()
