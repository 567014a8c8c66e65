"""CLI conventions: help for every option, exit codes and environment variables in --help,
--color with NO_COLOR and FORCE_COLOR, --exit-zero, --jobs validated, rule prefixes, shell
completion, plot's exit status and message, and saved JSON reports read by tui and plot."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES, REAL, ROOT

from nccl_doctor.cli import build_parser

HANG = FIXTURES / "generated" / "hang-mn3-16"
NC1 = REAL / "077_other_nccl_errors.log"  # an NC1 error finding


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "nccl_doctor", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=full)


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def test_every_option_and_argument_has_help():
    missing = [f"{name}: {a.dest}" for name, sub in _subparsers(build_parser()) for a in sub._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert missing == []


def test_help_lists_exit_codes_and_environment():
    for args in (["--help"], ["analyze", "--help"], ["tui", "--help"]):
        out = run(*args).stdout
        assert "exit status:" in out and "  2 " in out and "130" in out
        for var in ("NO_COLOR", "FORCE_COLOR", "NCCL_DOCTOR_DEBUG"):
            assert var in out


def test_color_flag_and_environment():
    esc = "\x1b["
    assert esc not in run("analyze", str(NC1)).stdout  # a pipe: no colour
    assert esc in run("analyze", "--color", "always", str(NC1)).stdout
    assert esc in run("analyze", str(NC1), env={"FORCE_COLOR": "1"}).stdout
    assert esc not in run("analyze", str(NC1), env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout
    assert esc in run("analyze", "--color", "always", str(NC1), env={"NO_COLOR": "1"}).stdout
    assert esc not in run("analyze", "--color", "never", str(NC1), env={"FORCE_COLOR": "1"}).stdout
    assert esc not in run("analyze", str(NC1), env={"FORCE_COLOR": "0"}).stdout


def test_exit_zero():
    assert run("analyze", str(NC1)).returncode == 1
    r = run("analyze", "--exit-zero", str(NC1))
    assert r.returncode == 0 and "NC1" in r.stdout


@pytest.mark.parametrize("value", ["0", "-3", "two", "100000"])
def test_jobs_is_validated(value):
    r = run("analyze", "--jobs", value, str(NC1))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--jobs" in r.stderr and "1 to 256" in r.stderr


def test_select_by_prefix():
    d = json.loads(run("analyze", "--format", "json", "--select", "RK", str(HANG)).stdout)
    assert {f["rule"] for f in d["findings"]} == {"RK2"}  # RK1, RK3 are selected but find nothing here
    d = json.loads(run("analyze", "--format", "json", "--select", "MN,RK", "--ignore", "MN3", str(HANG)).stdout)
    assert "MN3" not in {f["rule"] for f in d["findings"]} and "RK2" in {f["rule"] for f in d["findings"]}
    r = run("analyze", "--select", "QQ", str(HANG))
    assert r.returncode == 2 and "unknown rule 'QQ'" in r.stderr
    assert [ln.split()[0] for ln in run("rules", "--select", "RK").stdout.splitlines()] == ["RK1", "RK2", "RK3"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "tcsh"])
def test_shell_completion(shell):
    r = run("completion", shell)
    assert r.returncode == 0 and "analyze" in r.stdout and "--min-severity" in r.stdout


def test_plot_exits_0_and_says_where(tmp_path):
    out = tmp_path / "t.png"
    r = run("plot", str(HANG), "-o", str(out))  # a job with findings: still 0, the PNG is written
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert r.stdout == "" and r.stderr.startswith(f"nccl-doctor: wrote {out} (") and r.stderr.count("\n") == 1


def test_plot_and_tui_refuse_empty_input_before_anything(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    r = run("plot", str(tmp_path), "-o", str(tmp_path / "t.png"))
    assert r.returncode == 2 and "nothing to analyse" in r.stderr and not (tmp_path / "t.png").exists()
    r = run("tui", str(tmp_path / "missing"))  # fails before the screen opens: no terminal needed
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr


def test_saved_json_report_serves_plot_and_text(tmp_path):
    saved = tmp_path / "r.json"
    assert run("analyze", "--format", "json", "-o", str(saved), str(HANG)).returncode == 1
    from nccl_doctor.report import to_text
    from nccl_doctor.report.load import report_from_json

    again = report_from_json(str(saved))
    assert again.to_dict() == json.loads(saved.read_text())  # the same contract, read back
    assert to_text(again) == run("analyze", str(HANG)).stdout
    r = run("plot", str(saved), "-o", str(tmp_path / "t.png"))
    assert r.returncode == 0 and (tmp_path / "t.png").stat().st_size > 0


def test_a_json_file_that_is_not_a_report_is_one_line(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"schema_version": 1, "tool": {"name": "nccl-doctor"}}))
    r = run("plot", str(bad), "-o", str(tmp_path / "t.png"))
    assert r.returncode == 2 and "schema version 2 or 3" in r.stderr and r.stderr.count("\n") == 1


def test_a_saved_version_2_report_still_loads(tmp_path):
    """Version 3 only added the status "echo": a report saved by the version before reads back as it was."""
    from nccl_doctor.report.load import report_from_json

    saved = tmp_path / "r.json"
    assert run("analyze", "--format", "json", "-o", str(saved), str(HANG)).returncode == 1
    d = json.loads(saved.read_text())
    assert d["schema_version"] == 3 and "echo" not in {r["status"] for r in d["ranks"]}  # (no echo in this hang)
    d["schema_version"] = 2
    saved.write_text(json.dumps(d))
    again = report_from_json(str(saved))
    assert [r.status for r in again.job.ranks] == [r["status"] for r in d["ranks"]]


def test_readme_shows_current_output(monkeypatch):
    """README's "What you get" is the real report of its fixture on a 100-column terminal."""
    from nccl_doctor import analyze
    from nccl_doctor.report import to_text

    readme = (ROOT / "README.md").read_text()
    block = readme.split("## What you get", 1)[1].split("```", 2)[1]
    shown = [ln for ln in block.strip("\n").splitlines()[1:] if ln != "…"]
    monkeypatch.chdir(ROOT)  # the README runs it from the repository root, with a relative path
    current = to_text(analyze("fixtures/generated/hang-mn3-16/"), width=100).splitlines()
    assert shown == current[: len(shown)]
