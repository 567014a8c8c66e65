"""Reports before and after an engine change: capture them, then compare (exact, but the tool version).

    python benchmarks/identity.py capture OUT_DIR [--engine python|columnar|auto] [--big] [--only SUBSTR]
    python benchmarks/identity.py compare DIR_A DIR_B

Inputs: every folder of fixtures/generated and fixtures/flightrec, every real excerpt of
fixtures/real (one report per file), every recorded real run in fixtures/realruns (when present),
and generated corpora made once under benchmarks/corpora/identity/ (every scenario x layout at 48
ranks, plus NCCL/torch eras without INFO lines, and jobs whose ranks all print step lines). With
``--big`` the benchmark corpora already generated under benchmarks/corpora/ (mn3-*, steps-*) too.

To capture the reports of an older checkout, run this script with that checkout first on the path:
``PYTHONPATH=/tmp/old-src python benchmarks/identity.py capture /tmp/old`` (with that checkout's parsers: see
_own_parsers). Timings are not taken
here: see bench.py. Runs with PYTHONHASHSEED=0: a few reports depend on set iteration order.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "benchmarks" / "corpora"
sys.path.insert(0, str(ROOT / "fixtures"))
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))

IDENTITY_RANKS = 48
ERAS = [("2.7", "1.13"), ("2.18", "2.1"), ("2.26", "2.6"), ("2.29", "2.8")]


def generated_corpora() -> list[tuple[str, list[str]]]:
    """Scenario x layout jobs (made once, deterministic by seed), and a few era / option variants."""
    from generator import LAYOUTS, SCENARIOS, TORCH_ERAS, generate_job

    base = CORPORA / "identity"
    out = []
    plans = [(f"{s}-{lay}", dict(scenario=s, layout=lay)) for s in SCENARIOS for lay in LAYOUTS]
    eras = [(n, t) for n, t in ERAS if t in TORCH_ERAS]
    for i, (nccl, torch) in enumerate(eras):
        for s in ("MN3", "RK1", "MN5", "healthy"):
            plans.append((f"{s}-era{nccl}-{torch}", dict(scenario=s, layout="per-rank", nccl_era=nccl,
                                                         torch_era=torch, info_lines=bool(i % 2), seed=3)))
    for s in ("MN3", "RK3", "MN5", "healthy"):
        plans.append((f"{s}-allsteps", dict(scenario=s, layout="per-rank", steps=40, step_lines="all", seed=5)))
    for name, kw in plans:
        path = base / name
        if not (path / "expected.json").exists():
            kw = {"seed": 1, **kw}
            try:
                generate_job(path, ranks=IDENTITY_RANKS, **kw)
            except TypeError:  # an older generator without some option: skip that corpus
                continue
        out.append((f"gen/{name}", [str(path)]))
    return out


def inputs(big: bool) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for d in sorted((ROOT / "fixtures" / "generated").iterdir()):
        if d.is_dir():
            out.append((f"generated/{d.name}", [str(d)]))
    for d in sorted((ROOT / "fixtures" / "flightrec").iterdir()):
        if d.is_dir():
            out.append((f"flightrec/{d.name}", [str(d)]))
    for f in sorted((ROOT / "fixtures" / "real").glob("*.log")):
        out.append((f"real/{f.stem}", [str(f)]))
    runs = ROOT / "fixtures" / "realruns"
    if runs.is_dir():
        for d in sorted(runs.iterdir()):
            if d.is_dir():
                out.append((f"realruns/{d.name}", [str(d)]))
    out += generated_corpora()
    if big:
        for d in sorted(CORPORA.glob("*-*")):
            if d.is_dir() and d.name != "identity" and (d / "expected.json").exists():
                out.append((f"big/{d.name}", [str(d)]))
    return out


def report_json(paths: list[str], engine: str | None) -> str:
    from nccl_doctor import analysis
    from nccl_doctor.discover import InputError

    kw = {"engine": engine} if engine else {}
    try:
        rep = analysis.analyze(paths, **kw)
    except InputError as exc:
        return json.dumps({"input_error": str(exc)})
    d = rep.to_dict()
    d.get("tool", {}).pop("version", None)
    return json.dumps(d, indent=1, sort_keys=True, ensure_ascii=False)


def capture(out_dir: Path, engine: str | None, big: bool, only: str | None) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    n = 0
    for name, paths in inputs(big):
        if only and only not in name:
            continue
        dest = out_dir / (name.replace("/", "__") + ".json")
        dest.write_text(report_json(paths, engine) + "\n")
        n += 1
    print(f"{n} reports in {out_dir} ({time.perf_counter() - t0:.0f} s)")
    return 0


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.glob("*.json")} | {p.name for p in b.glob("*.json")})
    bad = 0
    for name in names:
        pa, pb = a / name, b / name
        if not pa.exists() or not pb.exists():
            print(f"only in {'B' if not pa.exists() else 'A'}: {name}")
            continue
        if pa.read_text() != pb.read_text():
            bad += 1
            la, lb = pa.read_text().splitlines(), pb.read_text().splitlines()
            first = next((i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y), min(len(la), len(lb)))
            print(f"DIFFERS {name} at line {first + 1}:\n  A: {la[first][:200] if first < len(la) else ''}"
                  f"\n  B: {lb[first][:200] if first < len(lb) else ''}")
    print(f"{len(names) - bad}/{len(names)} reports identical")
    return 1 if bad else 0


def _own_parsers() -> None:
    """Capture an older checkout with ITS parsers/*.toml: an editable install maps ``nccl_doctor.parsers`` to the
    installed checkout whatever PYTHONPATH says, so run again without site's .pth files (the dependencies' own
    site-packages appended to the path) when the parsers found are not the code's."""
    import nccl_doctor
    from nccl_doctor.resources import parsers_dir

    code = Path(nccl_doctor.__file__).resolve().parent.parent
    if parsers_dir().resolve().is_relative_to(code):
        return
    if sys.flags.no_site:
        raise SystemExit(f"identity.py: the parsers of {code} are not found ({parsers_dir()} is another checkout's)")
    import site

    path = os.pathsep.join([os.environ.get("PYTHONPATH", ""), *site.getsitepackages()])
    os.execve(sys.executable, [sys.executable, "-S", *sys.argv], {**os.environ, "PYTHONPATH": path})


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Some reports depend on set iteration order (string hashing is salted per process): compare
        # engines, not salts.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    _own_parsers()
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("out")
    c.add_argument("--engine")
    c.add_argument("--big", action="store_true")
    c.add_argument("--only")
    m = sub.add_parser("compare")
    m.add_argument("a")
    m.add_argument("b")
    args = ap.parse_args()
    if args.cmd == "capture":
        return capture(Path(args.out), args.engine, args.big, args.only)
    return compare(Path(args.a), Path(args.b))


if __name__ == "__main__":
    raise SystemExit(main())
