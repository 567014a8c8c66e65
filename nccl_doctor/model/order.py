"""Files whose lines run newest first (Grafana Loki's ``logcli`` by default, a Grafana download) are
read oldest first (``scanner``: ``FileScan.flipped``), so that a traceback, a failure table and time
run as they were written, and every piece of evidence reasons on them as on any log. Their events
carry reading-order line numbers while the job is reasoned about (``JobModel.place`` says the file's
own number meanwhile); ``restore`` gives them the file's own numbers before the report is made."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .job import JobModel, file_line


def restore(job: JobModel, findings: list[Any] = ()) -> list[str]:
    """Give the events, last lines and findings' evidence of newest-first files the file's own line
    numbers; a note per such file (what the report says it did)."""
    flips = job.flipped
    if not flips:
        return []
    done: set[int] = set()

    def flip(obj) -> None:
        n = flips.get(obj.file)
        if n and id(obj) not in done:
            done.add(id(obj))
            obj.line = file_line(n, obj.line)

    for ev in job.events:
        flip(ev)
    for last in job.last_lines.values():
        for ll in last.values():
            flip(ll)
    for r in job.ranks:  # (their events are the job's, flipped above; a last line may be a new record)
        if r.last_line is not None:
            flip(r.last_line)
    for f in findings:  # (their evidence is a frozen copy of the events: copied again)
        f.evidence = [replace(e, line=file_line(flips[e.file], e.line)) if e.file in flips else e for e in f.evidence]
    for path, (first, last, line) in list(job.quiet.items()):
        if path in flips:
            job.quiet[path] = (first, last, file_line(flips[path], line))
    job.flipped = {}
    return [f"{path} lists its lines newest first (as logcli and Grafana export them): it was read oldest "
            "first; its evidence lines are the file's own" if isinstance(n, int) else
            f"{path} is a CSV export of log records (a search UI's): each row's message was read as the line "
            "its pod or host wrote, rows oldest first; its evidence lines are the file's own" for path, n in flips.items()]
