"""How long `nccl-doctor plot` takes on a large job: from the logs, and from a saved JSON report.

    python benchmarks/plot.py [--ranks 1024] [--reps 3]

Uses the corpora of bench.py (generated MN3 hangs, NCCL-INFO-heavy). Prints, for each way, the
median wall time and the CPU time of the whole process tree (user + system, the reading workers
included): the machine is shared, so wall time moves with the neighbours and CPU time does not.
Never run from the tests.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system of the child and its children) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    from bench import corpus

    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    logs = corpus(args.ranks)
    tool = [sys.executable, "-m", "nccl_doctor"]
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "r.json"
        png = Path(tmp) / "t.png"
        ways = {
            "analyze --format json -o r.json": tool + ["analyze", "--format", "json", "-o", str(saved), str(logs)],
            "plot LOGS": tool + ["plot", str(logs), "-o", str(png)],
            "plot r.json": tool + ["plot", str(saved), "-o", str(png)],
        }
        for name, cmd in ways.items():
            runs = [run(cmd) for _ in range(args.reps)]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{args.ranks} ranks  {name:<34} wall {wall:6.2f} s  CPU {cpu:6.2f} s (median of {args.reps})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
