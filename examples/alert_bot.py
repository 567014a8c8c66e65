#!/usr/bin/env python3
"""A chat alert bot for training jobs, built on the nccl_doctor library.

    python examples/alert_bot.py logs/ --webhook https://hooks.slack.com/services/T0/B0/XYZ
    python examples/alert_bot.py logs/ --once      # e.g. from a Slurm epilog: one message, then exit
    python examples/alert_bot.py logs/             # no webhook: print the messages

Live, it follows the job's logs (new files, rotation and truncation included) and posts one message
per new or changed finding at warning or above, with the current verdict, and one when a finding
goes away (a stalled job that resumed). ``--once`` posts the
verdict of a finished job. Messages are ``{"text": ...}``, which Slack, Mattermost and Rocket.Chat
incoming webhooks accept; delivery retries with back-off in a background thread.
"""

from __future__ import annotations

import argparse
import time

import nccl_doctor
from nccl_doctor.watch import Watcher, WebhookSender


def message(finding: nccl_doctor.Finding, verdict: dict | None, job: str) -> str:
    icon = {"error": ":red_circle:", "warning": ":warning:"}.get(finding.severity.value, ":information_source:")
    lines = [f"{icon} *{job}*: {finding.rule} {finding.title}", finding.summary]
    if verdict:
        lines.append(f"verdict: {verdict['summary']}")
    if finding.evidence:
        ev = finding.evidence[0]
        lines.append(f"`{ev.file}:{ev.line}` {ev.text[:200]}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="log files or folders of one job")
    ap.add_argument("--webhook", help="chat incoming-webhook URL (default: print)")
    ap.add_argument("--once", action="store_true", help="analyse what is there, post once, exit")
    ap.add_argument("--job", default=None, help="job name shown in messages (default: the first path)")
    args = ap.parse_args()
    job = args.job or args.logs[0]
    sender = WebhookSender(args.webhook) if args.webhook else None

    def post(text: str) -> None:
        if sender is not None:
            sender.send({"text": text})
        else:
            print(text, end="\n\n", flush=True)

    try:
        if args.once:
            report = nccl_doctor.analyze(args.logs, min_severity="warning")
            headline = report.verdict["summary"] if report.verdict else "no failure found"
            post(f"*{job}*: {headline}\n" + "\n".join(f"- {f.rule} {f.title}: {f.summary}" for f in report.findings))
            return report.exit_status
        analyzer = nccl_doctor.Analyzer(min_severity="warning", settle=5.0)
        watcher = Watcher(args.logs, analyzer)
        while True:
            watcher.poll()
            for update in analyzer.updates():
                if update.status == "resolved":  # e.g. a stall (ST1) whose job made progress again
                    post(f":white_check_mark: *{job}*: resolved {update.finding.rule} {update.finding.title}: "
                         f"{update.note}")
                else:
                    post(message(update.finding, analyzer.report().verdict, job))
            time.sleep(2.0)
    except KeyboardInterrupt:
        return 0
    finally:
        if sender is not None:
            sender.close()


if __name__ == "__main__":
    raise SystemExit(main())
