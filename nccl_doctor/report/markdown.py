"""Markdown report for tickets and chat. Log text goes into code spans / fenced blocks."""

from __future__ import annotations

from .safe import plain


def _code(text: str) -> str:
    t = plain(text, 400).replace("`", "ˋ")
    return f"`{t}`"


def to_markdown(report) -> str:
    v = report.verdict
    job = report.job
    lines = ["# nccl-doctor report", ""]
    lines.append(f"**Verdict:** {plain(v['summary'], 2000)}" if v else "**Verdict:** no failure found in these logs")
    lines.append("")
    lines.append(f"- ranks expected: {job.ranks_expected if job.ranks_expected is not None else 'unknown'}, "
                 f"seen: {job.ranks_seen}, hosts: {len(job.hosts)}")
    if job.versions("nccl"):
        lines.append(f"- NCCL: {', '.join(job.versions('nccl'))}")
    last = report.last_rank_to_report
    if last:
        lines.append(f"- last rank to report: {last.get('rank')} on {last.get('host')} ({plain(last['why'], 400)})")
    lines.append("")
    if report.findings:
        lines += ["| rule | severity | summary |", "|---|---|---|"]
        for f in report.findings:
            lines.append(f"| {f.rule} | {f.severity.value} | {plain(f.summary, 400).replace('|', '/')} |")
        lines.append("")
        for f in report.findings:
            lines.append(f"## {f.rule}: {f.title}")
            lines.append("")
            lines.append(plain(f.summary, 2000))
            lines.append("")
            for ev in f.evidence[:5]:
                lines.append(f"- {_code(f'{ev.file}:{ev.line}')} {_code(ev.text)}")
            if f.remedy:
                lines += ["", f"**Fix:** {' '.join(f.remedy.split())}"]
            lines.append("")
    inp = report.inputs
    lines.append(f"_Inputs: {inp['files']} files, {inp['lines']} lines, {inp['unparsed_lines']} not recognised, "
                 f"{len(inp['skipped'])} skipped._")
    return "\n".join(lines) + "\n"
