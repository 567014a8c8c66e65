"""`nccl-doctor watch` on a live real job: how soon the stall is reported, whom it names, and when it
is resolved.

    python benchmarks/live_stall.py [--case stall_recovers] [--torchrun /work/torchvenv/bin/torchrun]

Runs one case of ``fixtures/liveruns/record.py`` for real (torch's gloo backend on CPU, 4 ranks, the
default 30-minute collective timeout) into a temporary folder, with `nccl-doctor watch FOLDER
--interval 1` following that folder from before the job starts. ``stall_recovers``: after step 50
rank 3 alone saves a checkpoint for 150 s while the others wait in a collective, then the job goes
on. ``healthy_ckpt``: a checkpoint of about 18 s every 40 steps (no stall may be reported).
``phase_stall``: rank 2 alone hangs for ever in an evaluation (the recorder stops the job after
210 s of silence).

Reports, from the recorder's arrival times and the time each JSON line of watch arrived (both
``time.monotonic()`` on this machine): seconds from the last step line before the stall to the
stall alert, the ranks named, seconds from the first step line after it to the resolution, and
watch's CPU time beside wall time. Needs torch (a CPU build) for the job only. Never run from the
tests: one torch job at a time, and it takes minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures"))
STEP = re.compile(rb"step (\d+)/\d+")
CASES = ("stall_recovers", "healthy_ckpt", "phase_stall")


def main() -> int:
    from live_idle import cpu_seconds, start_watch
    from liveruns import record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=CASES, default="stall_recovers")
    ap.add_argument("--torchrun", default="/work/torchvenv/bin/torchrun")
    ap.add_argument("--port", type=int, default=29623)
    args = ap.parse_args()
    dest = Path(tempfile.mkdtemp(prefix="live-stall-"))
    watch, alerts = start_watch(dest, 1.0)
    t_watch = time.monotonic()
    try:
        run = record.run_case(args.case, args.torchrun, dest, args.port)
        time.sleep(8)  # a resolution needs a poll and the settle time after the last line
        cpu = cpu_seconds(watch.pid)
    finally:
        watch.terminate()
        watch.wait(timeout=60)
    wall = time.monotonic() - t_watch
    out = dest / args.case
    timing = json.loads((out / "timing.json").read_text())
    t0 = timing["monotonic_start"]
    steps = []  # (seconds since start, step) of every step line, from the recorded bytes
    for name, marks in timing["files"].items():
        data, start = (out / name).read_bytes(), 0
        for end, t in marks:
            steps.extend((t, int(m.group(1))) for m in STEP.finditer(data[start:end]))
            start = end
    steps.sort()
    result: dict = {"case": args.case, "torch_exit": run["exit_code"], "job_seconds": run["ended_at"],
                    "watch_wall_s": round(wall, 1), "watch_cpu_s": round(cpu, 2)}
    stall_at = None
    for t_alert, payload in alerts:
        f = payload["finding"]
        if f["rule"] not in ("ST1", "ST2"):
            continue
        at = t_alert - t0
        entry = {"rule": f["rule"], "status": payload["status"], "at_s": round(at, 1), "ranks": f["ranks"],
                 "summary": f["summary"]}
        if payload["status"] == "new":
            before = [s for s in steps if s[0] <= at]
            if before:
                entry["after_last_step_s"] = round(at - before[-1][0], 1)
                entry["last_step"] = before[-1][1]
            if f["rule"] == "ST1" and stall_at is None:
                stall_at = at
        if payload["status"] == "resolved":
            entry["note"] = payload.get("note")
            resumed = [s for s in steps if stall_at is not None and s[0] > stall_at]
            if resumed:
                entry["after_resume_s"] = round(at - resumed[0][0], 1)
                entry["resumed_at_step"] = resumed[0][1]
        result.setdefault("alerts", []).append(entry)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
