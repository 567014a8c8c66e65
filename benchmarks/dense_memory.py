"""Peak memory on an event-dense log: one file where every line is recognised (issue 16).

    python benchmarks/dense_memory.py --gb 0.6,2.5 [--engine auto]

The file (made once under benchmarks/corpora/dense-<GB>g/, git-ignored) is one process's output
with nothing but lines the parsers recognise, numbers varied: per 20 lines, 12 torchtitan step
lines, 4 NCCL INFO lines of several kinds (environment, connections, trees, communicator), 2 COLL
lines and 2 c10d watchdog lines. Prints wall and CPU time and the peak RSS of the whole analyze
process tree per input byte (the target: at most 1 byte of RSS per input byte at 2.5 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench import CORPORA, peak_rss  # noqa: E402

HOST = "gpu-node-017:2918273:2918{tid} [3] NCCL INFO "


def _block(i: int) -> str:
    """Twenty recognised lines; ``i`` varies the numbers."""
    s = i * 12
    steps = "".join(f"step: {s + k:2}  loss: {2 + (s + k) % 97 / 100:7.4f}  memory: 45.{k:02d}GiB(56.34%)  "
                    f"tps: 3,{k:03d}  mfu: 40.{k:02d}%\n" for k in range(12))
    t = f"{300 + i % 500}"
    nccl = (HOST.format(tid=t) + f"NCCL_SOCKET_IFNAME set by environment to eth{i % 4}\n"
            + HOST.format(tid=t) + "Connected all rings\n"
            + HOST.format(tid=t) + f"Trees [0] {i % 8}/-1/-1->3->2 [1] {i % 8}/-1/-1->3->2\n"
            + HOST.format(tid=t) + f"comm 0x55d5c7f{i % 99999:05x} rank 3 nRanks 64 nNodes 8 localRanks 8 localRank 3 MNNVL 0\n")
    coll = "".join(HOST.format(tid=t) + f"AllReduce: opCount {i * 2 + k:x} sendbuff 0x7f9ba105a00000 recvbuff "
                   f"0x7f9ba105a00000 count {1024 * (k + 1)} datatype 7 op 0 root 0 comm 0x55d5c7f7e0b0 [nranks=64] "
                   "stream 0x55d5c8a1c2d0\n" for k in range(2))
    torch = "".join(f"[E1218 20:27:{(i + k) % 60:02d}.426415540 ProcessGroupNCCL.cpp:629] [Rank 3] Timeout at NCCL "
                    f"work: {i + k}, last enqueued NCCL work: {i + k}, last completed NCCL work: {i + k - 1}.\n"
                    for k in range(2))
    return steps + nccl + coll + torch


def corpus(gb: float) -> Path:
    out = CORPORA / f"dense-{gb:g}g"
    log = out / "worker.log"
    want = int(gb * 1e9)
    if log.exists() and log.stat().st_size >= want:
        return out
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(log, "w") as fh:
        i = 0
        while written < want:
            text = "".join(_block(i + k) for k in range(500))
            fh.write(text)
            written += len(text)
            i += 500
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", default="0.6,2.5")
    ap.add_argument("--engine", default="auto")
    args = ap.parse_args()
    for gb in [float(x) for x in args.gb.split(",")]:
        path = corpus(gb)
        size = sum(p.stat().st_size for p in path.iterdir())
        env = {**os.environ, "NCCL_DOCTOR_ENGINE": args.engine}
        cmd = [sys.executable, "-m", "nccl_doctor", "analyze", "--format", "json", str(path)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        rss = peak_rss(cmd, env) * 1024  # one run: timed and sampled (sampling costs little)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        print(json.dumps({"GB": round(size / 1e9, 2), "engine": args.engine, "analyze_s": round(wall, 1),
                          "analyze_cpu_s": round(cpu, 1), "peak_rss_MB": round(rss / 2**20),
                          "rss_bytes_per_input_byte": round(rss / size, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
