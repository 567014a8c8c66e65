"""The CLI contract: exit statuses, formats, -o, --select/--ignore/--min-severity, no colour in pipes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
HANG = ROOT / "fixtures" / "generated" / "hang-mn3-16"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nccl_doctor", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)


def test_healthy_log_exits_0_and_findings_exit_1():
    assert run("analyze", str(REAL / "008_healthy.log")).returncode == 0
    r = run("analyze", str(REAL / "077_other_nccl_errors.log"))
    assert r.returncode == 1 and "NC1" in r.stdout and r.stderr == ""


def test_json_contract_on_a_generated_hang():
    r = run("analyze", "--format", "json", str(HANG))
    assert r.returncode == 1
    d = json.loads(r.stdout)
    expected = json.loads((HANG / "expected.json").read_text())
    assert d["schema_version"] == 3 and d["tool"]["name"] == "nccl-doctor"
    assert d["job"]["ranks_expected"] == expected["ranks_expected"]
    assert d["job"]["hosts"] == expected["hosts"]
    assert {f["rule"] for f in d["findings"]} >= set(expected["rules"])
    assert set(expected["culprit"]["ranks"]) <= set(d["verdict"]["ranks"])
    assert d["last_rank_to_report"]["rank"] in expected["culprit"]["ranks"]
    seen = {r["rank"]: r for r in d["ranks"] if r["rank"] is not None}
    assert sorted(seen) == list(range(expected["ranks_expected"]))
    for rank in seen.values():  # the CUDA device is never reported as the rank
        assert rank["cuda_dev"] == rank["rank"] % expected["gpus_per_node"]


def test_output_file_markdown_and_no_colour(tmp_path):
    out = tmp_path / "report.md"
    r = run("analyze", "--format", "markdown", "-o", str(out), str(REAL / "077_other_nccl_errors.log"))
    assert r.returncode == 1 and r.stdout == ""
    text = out.read_text()
    assert text.startswith("# nccl-doctor report") and "## NC1" in text
    plain = run("analyze", str(REAL / "077_other_nccl_errors.log"))
    assert "\x1b[" not in plain.stdout  # a pipe gets no colour


def test_select_ignore_and_min_severity():
    one = json.loads(run("analyze", "--format", "json", "--select", "NC1", str(REAL / "077_other_nccl_errors.log")).stdout)
    assert {f["rule"] for f in one["findings"]} == {"NC1"}
    none = run("analyze", "--format", "json", "--ignore", "NC1,RK1,NCX,NET1", str(REAL / "077_other_nccl_errors.log"))
    assert "NC1" not in {f["rule"] for f in json.loads(none.stdout)["findings"]}
    info = json.loads(run("analyze", "--format", "json", str(REAL / "058_mn2_wrong_nic.log")).stdout)
    errors = json.loads(run("analyze", "--format", "json", "--min-severity", "error", str(REAL / "058_mn2_wrong_nic.log")).stdout)
    assert all(f["severity"] == "error" for f in errors["findings"])
    assert len(errors["findings"]) <= len(info["findings"])
    bad = run("analyze", "--select", "ZZ1", str(REAL / "058_mn2_wrong_nic.log"))
    assert bad.returncode == 2 and "unknown rule" in bad.stderr and "Traceback" not in bad.stderr


def test_usage_errors_are_one_line():
    for args in (["analyze", "--format", "yaml", "x"], ["nonsense"], []):
        r = run(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr


def test_stdin():
    data = (REAL / "077_other_nccl_errors.log").read_bytes()
    r = subprocess.run([sys.executable, "-m", "nccl_doctor", "analyze", "-"], input=data, capture_output=True, timeout=60)
    assert r.returncode == 1 and b"NC1" in r.stdout


def test_last_line_when_the_log_names_no_rank_or_host():
    # 048: torchelastic's worker failed with "NCCL error: invalid argument" and the excerpt names
    # neither its rank nor its host.
    r = run("analyze", str(REAL / "048_mn5_elastic_restart.log"))
    last = next(ln for ln in r.stdout.splitlines() if ln.startswith("LAST"))
    assert last.split(None, 1)[1].startswith("a process (rank and host not in the logs) · last line ")
    assert "048_mn5_elastic_restart.log:" in last and "RK1" not in last  # where it stopped; the why is the verdict's


def test_full_disk_is_a_one_line_error():
    import os

    import pytest

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "nccl_doctor", "analyze", str(HANG)], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2
    assert r.stderr.startswith("nccl-doctor: ") and "No space left on device" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
