"""Cost of hostile inputs (issue 16): CPU and wall time, peak RSS and exit status of each case.

    python benchmarks/hostile.py [--cases bombs,world,deep,closed,webhook] [--json out.json]

* bombs: each Flight Recorder bomb of tests/flightrec/fr_bombs.py beside a good log, in a process
  limited to 2 GB of address space (RLIMIT_AS), and all of them at once;
* world: a ``nranks N`` line beside the 16 rank logs of fixtures/generated/hang-mn3-16 (N = 16 to
  9,999,999), and a dump claiming 100,000 ranks;
* deep: a folder 1500 levels deep;
* closed: ``analyze`` with stdout closed, stderr closed;
* webhook: ``watch --once --webhook`` against local slow, 429-with-huge-Retry-After, endless-body and
  307 endpoints (time to exit, status, what stderr says).

CPU time (user + sys of the child) is printed beside wall time: the machine may be shared and wall
time moves with its load. Never run from the tests: timings are not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "flightrec"))
sys.path.insert(0, str(ROOT / "tests" / "hostile"))
GOOD = ROOT / "fixtures" / "real" / "019_mn3_timeout.log"
HANG = ROOT / "fixtures" / "generated" / "hang-mn3-16"
LIMIT = 2 << 30
CLAIM = ("dgx-h100-43:1522247:1522320 [0] NCCL INFO ncclCommInitRank comm 0x554da7913099 rank 0 nranks {n} "
         "cudaDev 0 nvmlDev 0 busId 18000 commId 0x98e19065240d2b99 - Init START\n")


def run(args: list[str], close: tuple[int, ...] = (), limit: int | None = LIMIT) -> dict:
    """Run ``nccl-doctor ARGS``; CPU (user+sys), wall, peak RSS (MB), status, last stderr line."""
    def setup() -> None:
        if limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        for fd in close:
            os.close(fd)

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "nccl_doctor", *args], stdout=out, stderr=err,
                             preexec_fn=setup, cwd=ROOT, text=True)
        _, status, usage = os.wait4(p.pid, 0)  # this child's own CPU time and peak RSS
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    lines = stderr.strip().splitlines()
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "wall_s": round(wall, 2),
            "peak_rss_mb": usage.ru_maxrss // 1024, "status": p.returncode, "stderr": lines[-1][:160] if lines else "",
            "traceback": "Traceback" in stderr, "stdout": stdout}


def show(name: str, row: dict) -> dict:
    row = {k: v for k, v in row.items() if k != "stdout"}
    print(f"{name:<44} cpu {row['cpu_s']:>6.2f} s  wall {row['wall_s']:>6.2f} s  rss {row['peak_rss_mb']:>5} MB  "
          f"exit {row['status']}  {row['stderr'][:90]}", flush=True)
    return {"case": name, **row}


def bombs(tmp: Path) -> list[dict]:
    from test_fr_budgets import BOMBS

    rows = []
    for name, (data, _, _) in BOMBS.items():
        d = tmp / f"bomb-{name}"
        d.mkdir()
        (d / "train.log").write_bytes(GOOD.read_bytes())
        (d / name).write_bytes(data)
        r = run(["analyze", "--format", "json", str(d)])
        skipped = {Path(s["path"]).name: s["reason"] for s in json.loads(r["stdout"])["inputs"]["skipped"]} \
            if r["stdout"] else {}
        r["stderr"] = f"{len(data):,} B: " + skipped.get(name, "NOT LISTED")
        rows.append(show(f"bomb {name} + good log (2 GB limit)", r))
    d = tmp / "all-bombs"
    d.mkdir()
    (d / "train.log").write_bytes(GOOD.read_bytes())
    for name, (data, _, _) in BOMBS.items():
        (d / name).write_bytes(data)
    rows.append(show("all bombs + good log (2 GB limit)", run(["analyze", str(d)])))
    return rows


def world(tmp: Path) -> list[dict]:
    import fr_bombs

    rows = []
    for n in (16, 10_000, 100_000, 1_000_000, 9_999_999):
        d = tmp / f"world-{n}"
        shutil.copytree(HANG, d, ignore=shutil.ignore_patterns("*.json"))
        (d / "extra.log").write_text(CLAIM.format(n=n))
        r = run(["analyze", str(d)])
        note = [line for line in r["stdout"].splitlines() if line.startswith("NOTE")]
        r["stderr"] = note[0][9:100] if note else "(no note)"
        rows.append(show(f"nranks {n:,} + 16 rank logs", r))
    d = tmp / "world-dump"
    shutil.copytree(HANG, d, ignore=shutil.ignore_patterns("*.json"))
    (d / "nccl_trace_rank_3.json").write_bytes(fr_bombs.long_ranks_json(100_000))
    rows.append(show("dump claiming 100,000 ranks + 16 rank logs", run(["analyze", str(d)])))
    return rows


def deep(tmp: Path) -> list[dict]:
    from test_contained import _deep, _remove_deep  # the test's own builder and its bottom-up removal

    base = tmp / "deep"
    path = _deep(base, 1500)
    try:
        return [show("folder 1500 levels deep", run(["analyze", str(base)]))]
    finally:
        _remove_deep(path, 1500)  # rmtree recurses and would fail on it


def closed(tmp: Path) -> list[dict]:
    return [show("analyze >&-", run(["analyze", str(GOOD)], close=(1,))),
            show("analyze /nonexistent 2>&-", run(["analyze", "/nonexistent"], close=(2,))),
            show("analyze -o /dev/full", run(["analyze", str(GOOD), "-o", "/dev/full"])),
            show("plot -o /dev/full", run(["plot", str(GOOD), "-o", "/dev/full"]))]


class _Endpoint(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.server.mode
        if mode == "slow":
            time.sleep(60)
            return
        if mode == "endless":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"1000\r\n" + b"x" * 4096 + b"\r\n")
            except OSError:
                return
        code, headers = {"429": (429, {"Retry-After": "100000000"}),
                         "307": (307, {"Location": "http://127.0.0.1:1/x"})}[mode]
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def webhook(tmp: Path) -> list[dict]:
    rows = []
    d = tmp / "watch"
    d.mkdir()
    (d / "rank0.log").write_bytes(GOOD.read_bytes())
    for mode in ("slow", "429", "endless", "307"):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoint)
        server.daemon_threads = True
        server.mode = mode
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        rows.append(show(f"watch --once --webhook ({mode})", run(["watch", "--once", "--webhook", url, str(d)],
                                                                 limit=None)))
        server.shutdown()
        server.server_close()
    return rows


CASES = {"bombs": bombs, "world": world, "deep": deep, "closed": closed, "webhook": webhook}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            sub = Path(tmp) / case
            sub.mkdir()
            rows += CASES[case](sub)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
