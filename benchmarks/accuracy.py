"""Accuracy: real runs first, then real excerpts, then generated hangs.

    python benchmarks/accuracy.py [--sizes 64,256,1024] [--layouts per-rank,...] [--real-only] [--json out.json]

* Real runs (fixtures/realruns/*/expected.json: real torchrun jobs with one injected fault) and
  real excerpts (fixtures/real/*.json labels) are judged by fixtures/realruns/judge.py, the same
  judge the tests use.
* Generated hangs: every scenario x layout x size; a case passes when the verdict names the injected
  culprit: its ranks (rank-level classes) or its hosts (host-level classes) are in the verdict, and
  the scenario's rules fire. Healthy jobs pass when no finding has severity error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "fixtures" / "realruns"))

from generator import LAYOUTS, SCENARIOS, generate_job  # noqa: E402
from judge import judge_labels, judge_run  # noqa: E402

from nccl_doctor import analyze  # noqa: E402
from nccl_doctor.discover import InputError  # noqa: E402


def real_accuracy(verbose: bool = True) -> list[dict]:
    """Every recorded real run and every real excerpt, judged; prints a line per miss and the totals."""
    rows = []
    for exp in sorted((ROOT / "fixtures" / "realruns").glob("*/expected.json")):
        expected = json.loads(exp.read_text(encoding="utf-8"))
        try:
            report = analyze([str(exp.parent)], jobs=1)
        except InputError as exc:  # nothing read (the CLI's exit 2): a miss of that run, not of the harness
            rows.append({"set": "real runs", "case": exp.parent.name, "ok": False, "why": f"input error: {exc}",
                         "verdict": None})
            continue
        ok, why = judge_run(report, expected)
        rows.append({"set": "real runs", "case": exp.parent.name, "ok": ok, "why": why,
                     "verdict": (report.verdict or {}).get("summary")})
    for sidecar in sorted((ROOT / "fixtures" / "real").glob("*.json")):
        labels = json.loads(sidecar.read_text(encoding="utf-8")).get("rules")
        if not labels:
            continue
        ok, why = judge_labels(analyze([str(sidecar.with_suffix(".log"))], jobs=1), labels)
        rows.append({"set": f"real excerpts ({labels.get('tier', 'core')})", "case": sidecar.stem, "ok": ok, "why": why})
    for row in rows:
        if not row["ok"] and verbose:
            print(f"FAIL {row['set']:<22} {row['case']:<32} {row['why']}", flush=True)
    for name in sorted({r["set"] for r in rows}, key=lambda n: (not n.startswith("real runs"), n)):
        sub = [r for r in rows if r["set"] == name]
        print(f"{name}: {sum(r['ok'] for r in sub)}/{len(sub)} judged right")
    return rows


def judge(report, expected: dict) -> tuple[bool, str]:
    errors = [f for f in report.findings if f.severity.value == "error"]
    fired = {f.rule for f in report.findings if f.severity.value in ("warning", "error")}
    if expected["scenario"] == "healthy":
        return (not errors, "errors: " + ",".join(sorted({f.rule for f in errors})) if errors else "ok")
    missing_rules = [r for r in expected.get("rules", []) if r not in fired]
    wrong_rules = [r for r in expected.get("rules_not", []) if r in fired]
    v = report.verdict or {}
    culprit = expected.get("culprit", {})
    level = culprit.get("level", "none")
    ok_culprit = True
    if level == "rank":
        ok_culprit = bool(culprit["ranks"]) and set(culprit["ranks"]) <= set(v.get("ranks", []))
    elif level == "host":
        ok_culprit = bool(culprit["hosts"]) and set(culprit["hosts"]) <= set(v.get("hosts", []))
    ok = ok_culprit and not missing_rules and not wrong_rules
    why = []
    if not ok_culprit:
        why.append(f"verdict {v.get('ranks')}/{v.get('hosts')} != culprit {culprit.get('ranks')}/{culprit.get('hosts')}")
    if missing_rules:
        why.append("missing " + ",".join(missing_rules))
    if wrong_rules:
        why.append("unexpected " + ",".join(wrong_rules))
    return ok, "; ".join(why) or "ok"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--real-only", action="store_true", help="only the real runs and real excerpts")
    args = ap.parse_args()
    real = real_accuracy()
    if args.real_only:
        if args.json:
            Path(args.json).write_text(json.dumps(real, indent=1))
        return 0
    rows = []
    t0 = time.perf_counter()
    for size in [int(s) for s in args.sizes.split(",")]:
        for layout in args.layouts.split(","):
            for scenario in args.scenarios.split(","):
                with tempfile.TemporaryDirectory() as tmp:
                    expected = generate_job(Path(tmp) / "job", scenario, size, layout=layout, seed=args.seed)
                    report = analyze([str(Path(tmp) / "job")], jobs=1)
                ok, why = judge(report, expected)
                rows.append({"size": size, "layout": layout, "scenario": scenario, "ok": ok, "why": why})
                if not ok:
                    print(f"FAIL {size:>5} {layout:<17} {scenario:<8} {why}", flush=True)
    faults = [r for r in rows if r["scenario"] != "healthy"]
    healthy = [r for r in rows if r["scenario"] == "healthy"]
    acc = sum(r["ok"] for r in faults) / max(1, len(faults))
    print(f"\nculprit accuracy: {sum(r['ok'] for r in faults)}/{len(faults)} = {acc:.1%} "
          f"(sizes {args.sizes}, layouts {args.layouts})")
    print(f"healthy jobs without error findings: {sum(r['ok'] for r in healthy)}/{len(healthy)}")
    print(f"elapsed {time.perf_counter() - t0:.0f} s")
    for size in sorted({r['size'] for r in faults}):
        sub = [r for r in faults if r["size"] == size]
        print(f"  {size:>5} ranks: {sum(r['ok'] for r in sub)}/{len(sub)}")
    if args.json:
        Path(args.json).write_text(json.dumps(real + rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
