"""Throughput and memory of `nccl-doctor analyze` against one `grep -E` pass over the same files.

    python benchmarks/bench.py --ranks 1024,4096,16384 [--reps 3] [--engines auto,re]

Corpora are generated once under benchmarks/corpora/ (git-ignored) with the fixture generator:
NCCL-INFO-heavy per-rank logs, several communicators per rank, torch lines, training lines on
rank 0, and an MN3 hang. Page cache is warmed by a first untimed read. Reports the median wall time
of several repetitions, MB/s, the ratio to grep, peak RSS (of the analyze process tree) and the
4k -> 16k scaling. Never run from the tests: timings are not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "benchmarks" / "corpora"
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT))


def corpus(ranks: int) -> Path:
    out = CORPORA / f"mn3-{ranks}"
    if not (out / "expected.json").exists():
        from generator import generate_job

        if out.exists():
            shutil.rmtree(out)
        t = time.perf_counter()
        generate_job(out, "MN3", ranks, layout="per-rank", nccl_era="2.21", torch_era="2.4", seed=7,
                     comms_per_rank=3, steps=50, info_lines=True)
        print(f"generated {ranks} ranks in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return out


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, int, int]:
    """Wall seconds, peak RSS of the process tree in KB (max over children), exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before), r.returncode


def peak_rss(cmd: list[str], env: dict | None = None) -> int:
    """Peak RSS in KB of the command and all its descendants (GNU time's max of the tree is not
    available for pools, so sample /proc)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = 0
    while proc.poll() is None:
        total = 0
        for pid in _tree(proc.pid):
            try:
                with open(f"/proc/{pid}/status") as fh:
                    for line in fh:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                pass
        peak = max(peak, total)
        time.sleep(0.02)
    return peak


def _tree(root: int) -> list[int]:
    out = [root]
    try:
        kids = Path(f"/proc/{root}/task/{root}/children").read_text().split()
    except OSError:
        return out
    for k in kids:
        out += _tree(int(k))
    return out


def grep_cmd(path: Path) -> list[str]:
    from nccl_doctor.formats import load_formats
    from nccl_doctor.records import BLOCK_LITERALS

    lits = sorted(set(load_formats().literals) | set(BLOCK_LITERALS))
    import re

    pattern = "|".join(re.escape(x) for x in lits)
    return ["grep", "-r", "-E", "-c", pattern, str(path)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1024,4096,16384")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engines", default="auto,re")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "out" / "results.json"))
    args = ap.parse_args()
    rows = []
    for n in [int(x) for x in args.ranks.split(",")]:
        path = corpus(n)
        mb = size_of(path) / 1e6
        subprocess.run(["cat"], stdin=subprocess.DEVNULL)
        for p in path.rglob("*"):  # warm the page cache
            if p.is_file():
                p.read_bytes()
        genv = {**os.environ, "LC_ALL": "C"}
        grep = statistics.median(timed(grep_cmd(path), genv)[0] for _ in range(args.reps))
        for engine in args.engines.split(","):
            env = {**os.environ, "NCCL_DOCTOR_ENGINE": engine}
            cmd = [sys.executable, "-m", "nccl_doctor", "analyze", "--format", "json", str(path)]
            walls = [timed(cmd, env)[0] for _ in range(args.reps)]
            wall = statistics.median(walls)
            rss = peak_rss(cmd, env) / 1024
            row = {"ranks": n, "MB": round(mb, 1), "engine": engine, "analyze_s": round(wall, 2),
                   "MB_per_s": round(mb / wall, 1), "grep_s": round(grep, 2), "ratio_to_grep": round(wall / grep, 2),
                   "peak_rss_MB": round(rss), "cores": os.cpu_count()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    by = {(r["ranks"], r["engine"]): r for r in rows}
    for engine in args.engines.split(","):
        if (4096, engine) in by and (16384, engine) in by:
            s = by[(16384, engine)]["analyze_s"] / by[(4096, engine)]["analyze_s"]
            print(f"scaling 4k -> 16k ({engine}): x{s:.2f} (bytes x{by[(16384, engine)]['MB'] / by[(4096, engine)]['MB']:.2f})")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
