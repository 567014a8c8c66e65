"""CPU cost of `nccl-doctor watch` following a 1k-rank job between events.

    python benchmarks/live_idle.py [--ranks 1024] [--quiet 60] [--live 30] [--interval 1]

A healthy per-rank job is generated once (fixture generator, under benchmarks/corpora/, git-ignored)
and copied to a temporary folder; `nccl-doctor watch FOLDER --interval 1` follows it, and:

1. first read: until its CPU time stops growing (the whole job read and analysed once);
2. idle: its CPU time over ``--quiet`` seconds while nothing is written (no rhythm learned yet);
3. live: one step line appended to every rank's file every second for ``--live`` seconds (the
   job's heartbeat: the progress model learns its rhythm); once those lines are read and analysed
   (catch-up), its CPU time over ``--quiet`` seconds with nothing written: between events, while the
   live rules (ST1 stall, ST2 straggler) are judged again at every poll and the stall gets reported
   (60 s after the last line).

CPU time is user + system of the watch process (``/proc/PID/stat``), beside wall time; the
machine is shared, so CPU time is the number to read. Never run from the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "benchmarks" / "corpora"
sys.path.insert(0, str(ROOT / "fixtures"))
TICK = os.sysconf("SC_CLK_TCK")


def corpus(ranks: int) -> Path:
    out = CORPORA / f"healthy-{ranks}"
    if not (out / "expected.json").exists():
        from generator import generate_job

        if out.exists():
            shutil.rmtree(out)
        generate_job(out, "healthy", ranks, layout="per-rank", nccl_era="2.21", torch_era="2.4", seed=3,
                     comms_per_rank=2, steps=20, info_lines=True)
    return out


def start_watch(path: Path, interval: float) -> tuple[subprocess.Popen, list[tuple[float, dict]]]:
    """`nccl-doctor watch PATH`, and the list its JSON lines are added to (with their arrival time)."""
    alerts: list[tuple[float, dict]] = []
    proc = subprocess.Popen([sys.executable, "-m", "nccl_doctor", "watch", str(path), "--interval", str(interval)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            alerts.append((time.monotonic(), json.loads(line)))

    threading.Thread(target=read, daemon=True).start()
    return proc, alerts


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15 of stat)


def measure(pid: int, seconds: float) -> tuple[float, float]:
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return time.monotonic() - t0, cpu_seconds(pid) - c0


def settle(pid: int, quiet_for: float = 5.0, limit: float = 900.0) -> tuple[float, float]:
    """Wait until the process used (almost) no CPU for ``quiet_for`` seconds."""
    c_start, t_start = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - t_start < limit:
        wall, cpu = measure(pid, quiet_for)
        if cpu < 0.02 * wall:
            break
    return time.monotonic() - t_start, cpu_seconds(pid) - c_start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--quiet", type=float, default=60.0, help="seconds measured with nothing written")
    ap.add_argument("--live", type=float, default=30.0, help="seconds of step lines before the quiet period")
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    src = corpus(args.ranks)
    work = Path(tempfile.mkdtemp(prefix="live-idle-"))
    job = work / "job"
    shutil.copytree(src, job, ignore=shutil.ignore_patterns("expected.json"))
    files = sorted(job.glob("rank-*.log"))
    proc, alerts = start_watch(job, args.interval)
    result: dict = {"ranks": args.ranks, "files": len(files), "interval": args.interval}
    try:
        wall, cpu = settle(proc.pid)
        result["first_read"] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 2)}
        wall, cpu = measure(proc.pid, args.quiet)
        result["idle"] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 3), "cpu_pct_of_core": round(100 * cpu / wall, 3)}
        c0, t0 = cpu_seconds(proc.pid), time.monotonic()
        step = 1000
        handles = [open(f, "a") for f in files]  # noqa: SIM115 - kept open while the job "runs"
        try:
            while time.monotonic() - t0 < args.live:
                tick = time.monotonic()
                step += 1
                for h in handles:
                    h.write(f"step {step}/100000 | loss 0.5\n")
                    h.flush()
                time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        finally:
            for h in handles:
                h.close()
        live_wall, live_cpu = time.monotonic() - t0, cpu_seconds(proc.pid) - c0
        result["live_steps"] = {"wall_s": round(live_wall, 1), "cpu_s": round(live_cpu, 2),
                                "lines": len(files) * (step - 1000)}
        last_write = time.monotonic()
        wall, cpu = settle(proc.pid, quiet_for=15.0)  # the last lines read and analysed (analyses are spaced out)
        result["catch_up"] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 2)}
        slices = [measure(proc.pid, args.quiet / 6) for _ in range(6)]
        wall, cpu = sum(w for w, _ in slices), sum(c for _, c in slices)
        result["between_events"] = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 3),
                                    "cpu_pct_of_core": round(100 * cpu / wall, 3),
                                    "cpu_s_per_slice": [round(c, 3) for _, c in slices]}
        stalls = [a for a in alerts if a[1]["finding"]["rule"] == "ST1" and a[1]["status"] == "new"]
        result["stall_reported_after_s"] = round(stalls[0][0] - last_write, 1) if stalls else None
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
