"""Throughput and memory of `nccl-doctor analyze` against real `grep -E` passes over the same files.

    python benchmarks/bench.py --ranks 1024,4096,16384 [--corpus mn3,steps] [--reps 3] [--engines auto,python]

Corpora are generated once under benchmarks/corpora/ (git-ignored) with the fixture generator:
``mn3-N``: NCCL-INFO-heavy per-rank logs (per-collective COLL lines), 3 communicators per rank,
torch lines, Megatron step lines on rank 0 and an MN3 hang; ``steps-N``: every rank prints its own
torchtitan-style step line (about 600 per rank before the hang), no COLL lines.

grep is timed as a REAL pass: its output (counts per file) goes to a file. With stdout on
/dev/null GNU grep stops at the first match of each file, which is not a pass over the data. Two
greps: the 11 markers a person greps for in a hang (MARKERS) and the literal set the parsers
prefilter on. Page cache warmed by a first untimed read. Each figure is the median of ``--reps``
runs; CPU time (user+system of the whole process tree) is printed beside wall time, because the
machine is shared and wall time moves by up to 2x from one minute to the next. Never run from
the tests: timings are not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "benchmarks" / "corpora"
sys.path.insert(0, str(ROOT / "fixtures"))
sys.path.insert(0, str(ROOT))

#: What a person greps a hung job's logs for: the baseline pass of issue 14.
MARKERS = ["NCCL WARN", "Watchdog caught collective", "Timeout at NCCL work", "ncclCommInitRank", "Init COMPLETE",
           "Traceback (most recent call last)", "RuntimeError", "CUDA error", "out of memory", "SIGTERM",
           "ChildFailedError"]


def corpus(kind: str, ranks: int) -> Path:
    out = CORPORA / f"{kind}-{ranks}"
    if not (out / "expected.json").exists():
        from generator import generate_job

        if out.exists():
            shutil.rmtree(out)
        t = time.perf_counter()
        if kind == "mn3":
            generate_job(out, "MN3", ranks, layout="per-rank", nccl_era="2.21", torch_era="2.4", seed=7,
                         comms_per_rank=3, steps=50, info_lines=True)
        elif kind == "steps":  # the MN3 hang comes at 2/3 of the steps: about 600 step lines per rank
            generate_job(out, "MN3", ranks, layout="per-rank", nccl_era="2.21", torch_era="2.4", seed=7,
                         comms_per_rank=3, steps=900, info_lines=False, step_lines="all")
        else:
            raise SystemExit(f"unknown corpus {kind!r} (mn3, steps)")
        print(f"generated {kind}-{ranks} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return out


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def timed(cmd: list[str], env: dict | None = None, stdout=subprocess.DEVNULL) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system of the process and every descendant it waited for), status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[-400:]}")
    return wall, cpu, r.returncode


def peak_rss(cmd: list[str], env: dict | None = None) -> int:
    """Peak RSS in KB of the command and all its descendants (sampled from /proc: GNU time's maximum
    is per process, and a pool's workers add up)."""
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


def prefilter_literals() -> list[str]:
    from nccl_doctor.formats import load_formats
    from nccl_doctor.records import BLOCK_LITERALS

    return sorted(set(load_formats().literals) | set(BLOCK_LITERALS))


def grep_pass(path: Path, literals: list[str], reps: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `grep -r -E -c` over the folder, counts written to a file."""
    pattern = "|".join(re.escape(x) for x in literals)
    env = {**os.environ, "LC_ALL": "C"}
    walls, cpus = [], []
    with tempfile.TemporaryFile() as out:
        for _ in range(reps):
            out.seek(0)
            out.truncate()
            w, c, _ = timed(["grep", "-r", "-E", "-c", pattern, str(path)], env, stdout=out)
            walls.append(w)
            cpus.append(c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="1024,4096,16384")
    ap.add_argument("--corpus", default="mn3", help="mn3, steps or both (comma-separated)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engines", default="auto", help="NCCL_DOCTOR_ENGINE values to time, comma-separated")
    ap.add_argument("--no-rss", action="store_true", help="skip the separate peak-RSS run")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "out" / "results.json"))
    args = ap.parse_args()
    rows = []
    lits = prefilter_literals()
    for kind in args.corpus.split(","):
        for n in [int(x) for x in args.ranks.split(",")]:
            path = corpus(kind, n)
            mb = size_of(path) / 1e6
            for p in path.rglob("*"):  # warm the page cache
                if p.is_file():
                    p.read_bytes()
            g11, g11cpu = grep_pass(path, MARKERS, args.reps)
            gall, gallcpu = grep_pass(path, lits, args.reps)
            for engine in args.engines.split(","):
                env = {**os.environ, "NCCL_DOCTOR_ENGINE": engine}
                cmd = [sys.executable, "-m", "nccl_doctor", "analyze", "--format", "json", str(path)]
                runs = [timed(cmd, env) for _ in range(args.reps)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                rss = 0 if args.no_rss else peak_rss(cmd, env) / 1024
                row = {"corpus": kind, "ranks": n, "MB": round(mb, 1), "engine": engine,
                       "analyze_s": round(wall, 2), "analyze_cpu_s": round(cpu, 2), "MB_per_s": round(mb / wall, 1),
                       "grep11_s": round(g11, 2), "grep11_cpu_s": round(g11cpu, 2),
                       "grep_literals_s": round(gall, 2), "grep_literals_cpu_s": round(gallcpu, 2),
                       "ratio_to_grep11": round(wall / g11, 2), "ratio_to_grep_literals": round(wall / gall, 2),
                       "peak_rss_MB": round(rss), "rss_bytes_per_input_byte": round(rss * 1024 * 1024 / (mb * 1e6), 3),
                       "cores": os.cpu_count()}
                rows.append(row)
                print(json.dumps(row), flush=True)
    for kind in args.corpus.split(","):
        for engine in args.engines.split(","):
            sel = sorted((r for r in rows if r["corpus"] == kind and r["engine"] == engine), key=lambda r: r["ranks"])
            if len(sel) >= 2:
                a, b = sel[0], sel[-1]
                print(f"scaling {kind} {a['ranks']} -> {b['ranks']} ({engine}): bytes x{b['MB'] / a['MB']:.2f}, "
                      f"wall x{b['analyze_s'] / a['analyze_s']:.2f}, CPU x{b['analyze_cpu_s'] / a['analyze_cpu_s']:.2f}")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
