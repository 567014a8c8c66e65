"""Command line: ``nccl-doctor analyze|tui|plot|rules|explain|watch``.

Exit status: 0 nothing at warning or above, 1 findings at warning or above, 2 usage or input error
(one line on stderr, never a traceback; ``NCCL_DOCTOR_DEBUG=1`` shows tracebacks of internal errors).
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too; keep it short)
        sys.stderr.write(f"nccl-doctor: {message}\n")
        raise SystemExit(2)


def _ids(value: str) -> list[str]:
    return [v.strip().upper() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nccl-doctor", description="Diagnose hung or failed distributed training jobs from their logs.")
    p.add_argument("--version", action="version", version=f"nccl-doctor {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    a = sub.add_parser("analyze", help="analyse logs and print a report")
    a.add_argument("paths", nargs="+", help="files, folders (recursive), globs, or - for stdin")
    a.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    a.add_argument("-o", "--output", help="write the report to this file instead of stdout")
    a.add_argument("--select", type=_ids, help="only these rule ids (comma-separated)")
    a.add_argument("--ignore", type=_ids, help="skip these rule ids (comma-separated)")
    a.add_argument("--min-severity", choices=("info", "warning", "error"), default="info")
    a.add_argument("--plot", metavar="FILE.png", help="also write the rank timeline as a PNG")
    a.add_argument("--jobs", type=int, default=None, help="processes for reading (default: all cores)")
    a.add_argument("--verbose", "-v", action="store_true", help="show all evidence lines")

    t = sub.add_parser("tui", help="browse ranks on a timeline (Textual)")
    t.add_argument("paths", nargs="+")

    pl = sub.add_parser("plot", help="write the rank timeline as a PNG")
    pl.add_argument("paths", nargs="+")
    pl.add_argument("-o", "--output", required=True, metavar="FILE.png")

    sub.add_parser("rules", help="list the rules")
    e = sub.add_parser("explain", help="print one rule's documentation")
    e.add_argument("rule_id")

    w = sub.add_parser("watch", help="follow growing logs and report new findings as JSON lines")
    w.add_argument("paths", nargs="+")
    w.add_argument("--webhook", help="POST each new or changed finding to this URL")
    w.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    w.add_argument("--once", action="store_true", help="read what is there, report, and exit")
    w.add_argument("--settle", type=float, default=None,
                   help="seconds a finding must stay unchanged before it is reported (default: the watcher's)")
    w.add_argument("--select", type=_ids, help="only these rule ids (comma-separated)")
    w.add_argument("--ignore", type=_ids, help="skip these rule ids (comma-separated)")
    w.add_argument("--min-severity", choices=("info", "warning", "error"), default="info")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help(sys.stderr)
        return 2
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        sys.stderr.write("nccl-doctor: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except SystemExit:
        raise
    except Exception as exc:
        from .discover import InputError

        if os.environ.get("NCCL_DOCTOR_DEBUG"):
            raise
        if isinstance(exc, (InputError, KeyError, ValueError, OSError)):
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            sys.stderr.write(f"nccl-doctor: {msg}\n")
        else:
            sys.stderr.write(f"nccl-doctor: internal error: {type(exc).__name__}: {exc} "
                             "(set NCCL_DOCTOR_DEBUG=1 for a traceback)\n")
        return 2


def entry() -> None:
    """Console-script and ``python -m`` entry: run, flush, and leave at once. A large analysis
    holds millions of small objects; freeing them one by one at interpreter exit took a second at
    4k ranks and several at 16k, after the answer was already out."""
    status = main()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader left (| head); nothing more to say to it
    except OSError as exc:  # a full disk or a closed terminal: the report is not out
        sys.stderr.write(f"nccl-doctor: cannot write the report: {exc.strerror or exc}\n")
        status = 2
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(status)


def _dispatch(args) -> int:
    cmd = args.command
    if cmd == "analyze":
        return _analyze(args)
    if cmd == "rules":
        from .rules import registry

        for r in registry:
            print(f"{r.id:<5} {r.severity.value:<8} {r.name:<32} {r.title}")
        return 0
    if cmd == "explain":
        from .rules import registry

        doc = registry.get(args.rule_id).doc()
        if sys.stdout.isatty() and "NO_COLOR" not in os.environ:
            from rich.console import Console
            from rich.markdown import Markdown

            Console().print(Markdown(doc))  # our own docs, not log text: markdown is safe here
        else:
            sys.stdout.write(doc if doc.endswith("\n") else doc + "\n")
        return 0
    if cmd == "plot":
        from .analysis import _stderr_progress, analyze
        from .plot import write_png

        report = analyze(args.paths, progress=_stderr_progress())
        write_png(report, args.output)
        return report.exit_status
    if cmd == "tui":
        from .tui import run_tui

        return run_tui(args.paths)
    if cmd == "watch":
        from .watch import run_watch

        return run_watch(args.paths, webhook=args.webhook, interval=args.interval, once=args.once,
                         settle=args.settle, select=args.select, ignore=args.ignore,
                         min_severity=args.min_severity)
    return 2


def _analyze(args) -> int:
    from .analysis import _stderr_progress, analyze
    from .report import to_json, to_markdown, to_text

    report = analyze(args.paths, select=args.select, ignore=args.ignore, min_severity=args.min_severity,
                     jobs=args.jobs, progress=_stderr_progress())
    if args.format == "json":
        body = to_json(report) + "\n"
    elif args.format == "markdown":
        body = to_markdown(report)
    else:
        color = args.output is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        body = to_text(report, color=color, verbose=args.verbose)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(body)
    else:
        sys.stdout.write(body)
        sys.stdout.flush()
    if args.plot:
        from .plot import write_png

        write_png(report, args.plot)
    return report.exit_status
