"""The wheel carries the formats (parsers/*.toml as nccl_doctor.parsers), the rule docs and every
module, and the installed `nccl-doctor` runs from a fresh venv, away from the source tree."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = out.glob("nccl_doctor-*.whl")
    return whl


def test_wheel_contents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for toml in (ROOT / "parsers").glob("*.toml"):
        assert f"nccl_doctor/parsers/{toml.name}" in names
    for doc in (ROOT / "nccl_doctor" / "rules" / "docs").glob("*.md"):
        assert f"nccl_doctor/rules/docs/{doc.name}" in names
    assert "nccl_doctor/rules/catalogue.toml" in names and "nccl_doctor/py.typed" in names
    for py in (ROOT / "nccl_doctor").rglob("*.py"):
        assert str(py.relative_to(ROOT)) in names, f"{py} missing from the wheel (package list in pyproject?)"


def test_installed_cli_runs_from_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = venv / "bin" / "pip"
    r = subprocess.run([str(pip), "install", "-q", "--no-deps", "--no-index", str(wheel)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    # Dependencies come from this interpreter's site-packages via PYTHONPATH (.pth files there are not
    # processed, so the editable checkout is not importable); the package itself comes from the wheel.
    deps = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PYTHONPATH": ":".join(deps), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    cmd = [str(venv / "bin" / "nccl-doctor"), "analyze", "--format", "json", str(ROOT / "fixtures" / "real" / "077_other_nccl_errors.log")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 1, r.stderr
    assert '"NC1"' in r.stdout
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import nccl_doctor; print(nccl_doctor.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert str(venv) in where.stdout
