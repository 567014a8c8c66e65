"""Every catalogue rule is registered, documented with the fixed headings, and has at least one
firing and one non-firing case in its case file."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from nccl_doctor.rules import DOC_HEADINGS, registry
from nccl_doctor.rules.base import load_catalogue

CASES = Path(__file__).resolve().parent / "cases"
CATALOGUE_IDS = ["MN1", "MN2", "MN3", "MN4", "MN5", "MN6", "DS1", "TO1", "TO2", "WB1", "RK1", "RK2", "RK3",
                 "DSY1", "NET1", "NC1", "NC2", "CFG1", "CFG2", "CFG3", "NV1", "NV2", "WD1", "NCX", "ST1", "ST2"]


def test_every_catalogue_id_is_registered_once():
    assert sorted(registry.ids()) == sorted(CATALOGUE_IDS)
    assert sorted(load_catalogue()) == sorted(CATALOGUE_IDS)


@pytest.mark.parametrize("rule_id", CATALOGUE_IDS)
def test_doc_has_fixed_headings_in_order(rule_id):
    rule = registry.get(rule_id)
    doc = rule.doc()
    assert doc.splitlines()[0] == f"# {rule_id}: {rule.title}"
    headings = re.findall(r"^## (.+)$", doc, flags=re.M)
    assert headings == list(DOC_HEADINGS), headings
    for heading in DOC_HEADINGS:  # no empty section
        body = doc.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
        assert len(body.strip()) > 40, f"{rule_id}: section {heading!r} is empty"
    assert "```" in doc.split("## Example lines", 1)[1].split("\n## ", 1)[0], "example lines in a fenced block"


@pytest.mark.parametrize("rule_id", CATALOGUE_IDS)
def test_case_file_has_firing_and_non_firing_cases(rule_id):
    data = tomllib.loads((CASES / f"{rule_id}.toml").read_text(encoding="utf-8"))
    assert data["rule"] == rule_id
    fires = [c["fires"] for c in data["case"]]
    assert True in fires and False in fires


def test_registry_refuses_duplicates():
    from nccl_doctor.rules.base import Registry

    reg = Registry()
    rule = registry.get("MN3")
    reg.register(rule)
    with pytest.raises(ValueError, match="duplicate rule id MN3"):
        reg.register(rule)


def test_rules_and_explain_commands():
    out = subprocess.run([sys.executable, "-m", "nccl_doctor", "rules"], capture_output=True, text=True, check=True)
    assert [line.split()[0] for line in out.stdout.splitlines()] == CATALOGUE_IDS
    exp = subprocess.run([sys.executable, "-m", "nccl_doctor", "explain", "mn2"], capture_output=True, text=True)
    assert exp.returncode == 0 and exp.stdout.startswith("# MN2: Wrong network interface selected")
    assert "NCCL_SOCKET_IFNAME" in exp.stdout
    bad = subprocess.run([sys.executable, "-m", "nccl_doctor", "explain", "XX9"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown rule" in bad.stderr and bad.stderr.count("\n") == 1
