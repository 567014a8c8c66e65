"""Command line: ``nccl-doctor analyze|tui|plot|watch|rules|explain|completion``.

Exit status: 0 nothing at warning or above, 1 findings at warning or above, 2 usage or input error
(one line on stderr, never a traceback; ``NCCL_DOCTOR_DEBUG=1`` shows tracebacks of internal errors).
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__

EPILOG = """\
exit status:
  0    analysed; no finding at warning or above (or --exit-zero)
  1    findings at warning or above
  2    usage error, or nothing to analyse (no file, empty files, no line
       nccl-doctor knows): one line on stderr, never a traceback
  130  interrupted

environment:
  NO_COLOR           non-empty: no colour (an explicit --color wins)
  FORCE_COLOR        non-empty and not 0: colour even when the output is not
                     a terminal (NO_COLOR wins over it; --color wins over both)
  NCCL_DOCTOR_DEBUG  non-empty: show the traceback of an internal error
"""

#: The most reading processes --jobs accepts (each holds one batch of files in memory).
MAX_JOBS = 256


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too; keep it short)
        from .output import say

        say(message)
        raise SystemExit(2)


class _Help(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout; shows each option's default where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in text \
                and action.option_strings:
            text += " (default: %(default)s)"
        return text


def _ids(value: str) -> list[str]:
    ids = [v.strip().upper() for v in value.split(",") if v.strip()]
    if not ids:
        raise argparse.ArgumentTypeError("give rule ids or prefixes, comma-separated (e.g. RK,MN3)")
    return ids


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1 to {MAX_JOBS}")
    return n


def _positive(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = -1.0
    if not x > 0 or x != x or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive number of seconds")
    return x


PATHS_HELP = "log files, folders (read recursively), globs, or - for standard input"


def _rule_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--select", type=_ids, metavar="IDS",
                   help="run only these rules: ids or prefixes, comma-separated (RK = RK1, RK2, RK3)")
    p.add_argument("--ignore", type=_ids, metavar="IDS", help="skip these rules: ids or prefixes, comma-separated")
    p.add_argument("--min-severity", choices=("info", "warning", "error"), default="info",
                   help="leave out findings below this severity")


def _analysis_options(p: argparse.ArgumentParser, json_report: bool = True) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help=PATHS_HELP + (", or one JSON report saved by `analyze --format json -o FILE`"
                                      if json_report else ""))
    _rule_options(p)
    p.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help=f"processes that read the logs, 1 to {MAX_JOBS} (default: one per core)")


def _color_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the text: auto = on a terminal, unless NO_COLOR is set or FORCE_COLOR forces it")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nccl-doctor", description="Diagnose hung or failed distributed training jobs from their logs.",
                epilog=EPILOG, formatter_class=_Help)
    p.add_argument("--version", action="version", version=f"nccl-doctor {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", epilog=EPILOG,
                              formatter_class=_Help)

    a = command("analyze", "analyse logs and print a report")
    _analysis_options(a, json_report=False)
    a.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                   help="text for a terminal, json for programs (nccl_doctor/report.schema.json), "
                        "markdown for tickets")
    a.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of standard output")
    a.add_argument("--plot", metavar="FILE.png", help="also write the rank timeline as a PNG")
    a.add_argument("-v", "--verbose", action="store_true", help="show every evidence line, not the first three")
    _color_option(a)
    a.add_argument("--exit-zero", action="store_true",
                   help="exit 0 even when findings are at warning or above (2 still means nothing was analysed)")

    t = command("tui", "browse the verdict, findings and ranks on a timeline (full screen)")
    _analysis_options(t)

    pl = command("plot", "write the rank timeline as a PNG")
    _analysis_options(pl)
    pl.add_argument("-o", "--output", required=True, metavar="FILE.png", help="where to write the PNG")

    w = command("watch", "follow growing logs and report new or changed findings as JSON lines")
    w.add_argument("paths", nargs="+", metavar="PATH", help=PATHS_HELP)
    w.add_argument("--webhook", metavar="URL", help="POST each new or changed finding to URL instead of printing it")
    w.add_argument("--interval", type=_positive, default=1.0, metavar="SECONDS", help="time between two reads")
    w.add_argument("--once", action="store_true", help="read what is there, report every finding, and exit")
    w.add_argument("--settle", type=_positive, default=None, metavar="SECONDS",
                   help="how long a finding must stay unchanged before it is reported (default: 3 intervals, "
                        "at least 1 s)")
    w.add_argument("--stall-after", type=_positive, default=60.0, metavar="SECONDS",
                   help="report a stall (ST1) after this long without progress at least (longer when the job's "
                        "usual interval, or a pause it recovered from, says so)")
    _rule_options(w)

    r = command("rules", "list the rules: id, severity, name, title")
    r.add_argument("--select", type=_ids, metavar="IDS", help="only these ids or prefixes, comma-separated")
    e = command("explain", "print one rule's documentation")
    e.add_argument("rule_id", metavar="ID", help="a rule id, as listed by `nccl-doctor rules` (e.g. MN3)")
    _color_option(e)
    c = command("completion", "print a shell completion script (bash, zsh or tcsh)")
    c.add_argument("shell", choices=("bash", "zsh", "tcsh"),
                   help="the shell; e.g. `nccl-doctor completion bash > ~/.local/share/bash-completion/"
                        "completions/nccl-doctor`")
    return p


def use_color(choice: str, stream) -> bool:
    """``--color`` first; then NO_COLOR (no-color.org), FORCE_COLOR (force-color.org), the terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0", "false"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command is None:
        build_parser().print_help(sys.stderr)
        return 2
    from .output import say

    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except SystemExit:
        raise
    except Exception as exc:
        from .discover import InputError
        from .output import OutputError

        if os.environ.get("NCCL_DOCTOR_DEBUG"):
            raise
        if isinstance(exc, (InputError, OutputError, KeyError, ValueError, OSError)):
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            say(msg)
        else:
            say(f"internal error: {type(exc).__name__}: {exc} (set NCCL_DOCTOR_DEBUG=1 for a traceback)")
        return 2


def entry() -> None:
    """Console-script and ``python -m`` entry: run, flush, and leave at once. A large analysis
    holds millions of small objects; freeing them one by one at interpreter exit took a second at
    4k ranks and several at 16k, after the answer was already out."""
    from .output import say

    try:
        status = main()
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    try:
        if sys.stdout is not None:  # None: started with stdout closed (>&-)
            sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader left (| head); nothing more to say to it
    except (OSError, ValueError) as exc:  # a full disk or a closed terminal: the report is not out
        say(f"cannot write the report: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
        status = 2
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)


def _dispatch(args) -> int:
    cmd = args.command
    if cmd == "analyze":
        return _analyze(args)
    if cmd == "rules":
        from .rules import registry

        chosen = set(registry.expand(args.select)) if args.select else None
        for r in registry:
            if chosen is None or r.id in chosen:
                print(f"{r.id:<5} {r.severity.value:<8} {r.name:<32} {r.title}")
        return 0
    if cmd == "explain":
        from .rules import registry

        doc = registry.get(args.rule_id).doc()
        if use_color(args.color, sys.stdout):
            from rich.console import Console
            from rich.markdown import Markdown

            Console(force_terminal=True).print(Markdown(doc))  # our own docs, not log text: markdown is safe here
        else:
            sys.stdout.write(doc if doc.endswith("\n") else doc + "\n")
        return 0
    if cmd == "plot":
        from .output import check_target, say
        from .plot import write_png

        check_target(args.output)  # a folder or a missing folder: said before the work
        report = _report(args)
        size = write_png(report, args.output)
        say(f"wrote {args.output} ({size[0]}x{size[1]} px)")
        return 0
    if cmd == "tui":
        from .tui import run_tui

        report = _report(args)  # bad paths and empty input fail here, before the screen opens
        return run_tui(report=report)
    if cmd == "watch":
        from .output import OutputError
        from .watch import run_watch

        if not args.webhook and sys.stdout is None:
            raise OutputError("cannot write the alerts: standard output is closed")

        return run_watch(args.paths, webhook=args.webhook, interval=args.interval, once=args.once,
                         settle=args.settle, select=args.select, ignore=args.ignore,
                         min_severity=args.min_severity, stall_after=args.stall_after)
    if cmd == "completion":
        return _completion(args.shell)
    return 2


def _report(args):
    """The report every face shows: read from a saved JSON report, or analysed from the logs.
    Raises InputError (exit 2, one line) when there is nothing to analyse."""
    from .analysis import _stderr_progress, analyze
    from .discover import InputError

    saved = _saved_report(args.paths)
    if saved is not None:
        return saved
    report = analyze(args.paths, select=args.select, ignore=args.ignore, min_severity=args.min_severity,
                     jobs=args.jobs, progress=_stderr_progress())
    if report.nothing_found:
        raise InputError(report.nothing_found)
    return report


def _saved_report(paths: list[str]):
    """A JSON report given instead of logs (``tui r.json``), or None."""
    if len(paths) != 1 or not paths[0].endswith(".json") or not os.path.isfile(paths[0]):
        return None
    from .report.load import looks_like_report, report_from_json

    if not looks_like_report(paths[0]):
        return None
    return report_from_json(paths[0])


def _analyze(args) -> int:
    from .analysis import _stderr_progress, analyze, gc_paused
    from .discover import InputError
    from .output import OutputError, check_target, to_stdout, write_file
    from .report import to_json, to_markdown, to_text

    for target in (args.output, args.plot):  # a wrong output path costs nothing: said before the work
        if target:
            check_target(target)
    if not args.output and sys.stdout is None:
        raise OutputError("cannot write the report: standard output is closed")
    # The collector stays paused while the report is written too: with millions of events alive,
    # each full collection would walk them all again (seconds at 16k ranks) and free nothing.
    with gc_paused():
        report = analyze(args.paths, select=args.select, ignore=args.ignore, min_severity=args.min_severity,
                         jobs=args.jobs, progress=_stderr_progress())
        if report.nothing_found:
            raise InputError(report.nothing_found)
        if args.format == "json":
            body = to_json(report) + "\n"
        elif args.format == "markdown":
            body = to_markdown(report)
        else:
            stream = sys.stdout if args.output is None else None
            color = use_color(args.color, stream or _NotATerminal())
            body = to_text(report, color=color, verbose=args.verbose, width=_width(stream))
    if args.output:
        write_file(args.output, body)  # a temporary file renamed over it: never a truncated report
    else:
        to_stdout(body)
    if args.plot:
        from .plot import write_png

        write_png(report, args.plot)
    return 0 if args.exit_zero else report.exit_status


class _NotATerminal:
    """A report written to a file: colour only when forced."""

    @staticmethod
    def isatty() -> bool:
        return False


def _width(stream) -> int | None:
    """The terminal's width when writing to one (COLUMNS wins), else None: a file or a pipe gets
    lines as long as they are, for grep."""
    if stream is None:
        return None
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    import shutil

    return max(40, shutil.get_terminal_size((100, 24)).columns)


def _completion(shell: str) -> int:
    import shtab

    parser = build_parser()
    for action in _actions(parser):
        if action.dest in ("paths",):
            action.complete = shtab.FILE
        elif action.dest in ("output", "plot"):
            action.complete = shtab.FILE
    sys.stdout.write(shtab.complete(parser, shell=shell))
    return 0


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
