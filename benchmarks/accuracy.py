"""Culprit accuracy on generated hangs: every scenario x layout x size, verdict vs expected.json.

    python benchmarks/accuracy.py --sizes 64,256,1024 [--layouts per-rank,...] [--json out.json]

A case passes when the verdict names the injected culprit: its ranks (rank-level classes) or its
hosts (host-level classes) are in the verdict, and the scenario's rules fire. Healthy jobs pass when
no finding has severity error.
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

from generator import LAYOUTS, SCENARIOS, generate_job  # noqa: E402

from nccl_doctor import analyze  # noqa: E402


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
    args = ap.parse_args()
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
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
