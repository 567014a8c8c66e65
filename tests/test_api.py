"""The public library API: names, types, the JSON contract and its schema, and a light import."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest

import nccl_doctor
from nccl_doctor import Analyzer, Event, Finding, InputError, Report, Rule, Severity, Update

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
REAL_LOGS = sorted(REAL.glob("*.log"))
HEAVY = ("textual", "matplotlib", "pandas")


def _validator() -> jsonschema.Draft202012Validator:
    schema = nccl_doctor.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _assert_valid(report_dict: dict, what: str) -> None:
    errors = sorted(_validator().iter_errors(report_dict), key=lambda e: list(e.path))
    assert not errors, f"{what}: " + "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors[:5])


def _generate(tmp_path: Path, scenario: str, ranks: int = 8, layout: str = "per-rank", seed: int = 1) -> Path:
    generator = pytest.importorskip("generator", reason="fixtures/generator not available")
    if not hasattr(generator, "generate_job"):
        pytest.skip("fixtures/generator has no generate_job yet")
    out = tmp_path / f"{scenario}-{layout}-{seed}"
    generator.generate_job(out, scenario, ranks, layout=layout, seed=seed)
    return out


# ---- names and types -------------------------------------------------------------------------

def test_public_names_resolve_and_are_listed():
    for name in nccl_doctor.__all__:
        assert getattr(nccl_doctor, name) is not None, name
        assert name in dir(nccl_doctor)
    assert nccl_doctor.Report.__module__ == "nccl_doctor.analysis"
    assert nccl_doctor.rules.registry is nccl_doctor.rules.registry  # cached after the first access
    with pytest.raises(AttributeError):
        nccl_doctor.no_such_name  # noqa: B018


def test_package_ships_types_and_schema():
    pkg = files("nccl_doctor")
    assert pkg.joinpath("py.typed").is_file()
    assert pkg.joinpath("report.schema.json").is_file()
    assert nccl_doctor.schema()["properties"]["schema_version"] == {"const": 3}


def test_analyze_returns_typed_report():
    report = nccl_doctor.analyze(REAL / "005_mn3_timeout.log")  # a PathLike works too
    assert isinstance(report, Report)
    assert report.findings and all(isinstance(f, Finding) for f in report.findings)
    assert all(isinstance(f.severity, Severity) for f in report.findings)
    assert "MN3" in {f.rule for f in report.findings}
    assert report.exit_status == 1
    assert all(isinstance(e, Event) for e in report.job.events)
    ev = report.findings[0].evidence[0]
    assert ev.file.endswith("005_mn3_timeout.log") and ev.line >= 1


def test_analyze_raises_input_error_when_nothing_to_read(tmp_path):
    with pytest.raises(InputError):
        nccl_doctor.analyze([str(tmp_path / "missing")])


def test_rules_registry_lists_selects_and_runs():
    registry = nccl_doctor.rules.registry
    assert len(registry) >= 1 and all(isinstance(r, Rule) for r in registry)
    assert "MN3" in registry and registry.get("mn3").id == "MN3"
    assert [r.id for r in registry.select(["MN3"])] == ["MN3"]
    assert "MN3" not in [r.id for r in registry.select(ignore=["MN3"])]
    with pytest.raises(KeyError):
        registry.get("NOPE1")
    job = nccl_doctor.analyze(REAL / "005_mn3_timeout.log").job
    findings, notes = nccl_doctor.rules.run(job, select=["MN3"])
    assert [f.rule for f in findings] == ["MN3"] and notes == []
    assert nccl_doctor.rules.run(job, select=["MN3"], min_severity="error")[0] == findings


def test_parse_paths_and_lines_agree():
    path = REAL / "019_mn3_timeout.log"
    from_path = nccl_doctor.parse(str(path))
    with open(path, encoding="utf-8", errors="replace") as fh:
        from_lines = nccl_doctor.parse(lines=fh, source=str(path))
    assert from_path and all(isinstance(e, Event) for e in from_path)
    assert [e.to_dict() for e in from_lines] == [e.to_dict() for e in from_path]
    with pytest.raises(TypeError):
        nccl_doctor.parse(str(path), lines=[])
    with pytest.raises(InputError):
        nccl_doctor.parse(lines=[b"\x00\x01\x02" * 100], source="core")


# ---- the JSON contract ---------------------------------------------------------------------------

@pytest.mark.parametrize("target", ["005_mn3_timeout.log", "011_slurm_or_prefixed.log", "."])
def test_to_dict_equals_cli_json(target):
    path = str(REAL / target)
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "analyze", "--format", "json", path],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout) == nccl_doctor.analyze(path).to_dict()


@pytest.mark.parametrize("log", REAL_LOGS, ids=[p.stem for p in REAL_LOGS])
def test_reports_on_real_excerpts_match_schema(log):
    _assert_valid(nccl_doctor.analyze(str(log)).to_dict(), log.name)


def test_report_on_all_real_excerpts_matches_schema():
    _assert_valid(nccl_doctor.analyze(str(REAL)).to_dict(), "fixtures/real")


GENERATED = [("MN3", "per-rank"), ("MN3", "srun-interleaved"), ("RK1", "kubectl"), ("healthy", "nccl-debug-file"),
             ("NET1", "per-rank"), ("MN5", "srun-interleaved")]


@pytest.mark.parametrize("scenario,layout", GENERATED)
def test_reports_on_generated_jobs_match_schema(tmp_path, scenario, layout):
    job = _generate(tmp_path, scenario, layout=layout)
    _assert_valid(nccl_doctor.analyze(str(job)).to_dict(), f"{scenario}/{layout}")


def test_schema_rejects_a_broken_report():
    d = nccl_doctor.analyze(str(REAL / "005_mn3_timeout.log")).to_dict()
    d["findings"][0]["severity"] = "fatal"
    assert list(_validator().iter_errors(d))


# ---- incremental ---------------------------------------------------------------------------------

def test_analyzer_reports_each_finding_once():
    live = Analyzer()
    assert live.findings() == [] and live.updates() == []
    seen: list[Update] = []
    live.on_update = seen.append
    with open(REAL / "005_mn3_timeout.log", "rb") as fh:
        for line in fh:
            live.feed("rank-0.log", line)
    first = live.updates()
    assert first and all(u.status == "new" for u in first) and seen == first
    assert {u.finding.rule for u in first} >= {"MN3"}
    assert live.updates() == [] and live.new_findings() == []
    assert [f.to_dict() for f in live.findings()] == [u.finding.to_dict() for u in first]


# ---- a light import --------------------------------------------------------------------------

def test_import_loads_no_ui_or_dataframe_library():
    code = (
        "import sys, nccl_doctor\n"
        f"heavy = {HEAVY!r}\n"
        "loaded = lambda: sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "assert not loaded(), loaded()\n"
        f"nccl_doctor.analyze({str(REAL / '005_mn3_timeout.log')!r}).to_dict()\n"
        "a = nccl_doctor.Analyzer(); a.feed('r0.log', 'x'); a.findings(); nccl_doctor.rules.registry\n"
        "assert not loaded(), loaded()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
