"""How long the TUI takes to show the main screen once the logs are read.

    python benchmarks/tui_paint.py [--ranks 4096] [--reps 3]

The analysis runs first (that is "loading"); then the app is started on the finished report, headless
at 160x48, and the time is taken until the main screen (verdict, findings, rank timeline with the last
rank to report selected) has been composed and rendered: building the rank timeline, the screen
switch and the first paint. Uses the corpora of bench.py. Never run from the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


async def first_paint(report) -> tuple[float, str]:
    from nccl_doctor.tui.app import DoctorApp
    from nccl_doctor.tui.screens import MainScreen
    from nccl_doctor.tui.widgets import RankTimeline

    app = DoctorApp(report=report)
    start = time.perf_counter()
    async with app.run_test(size=(160, 48)) as pilot:
        while not isinstance(app.screen, MainScreen):
            await pilot.pause(0.005)
        await pilot.pause()  # the screen is composed, laid out and drawn; then the last rank to
        await pilot.pause()  # report is selected after that first refresh, and drawn again
        took = time.perf_counter() - start
        timeline = app.screen.query_one(RankTimeline)
        row = timeline.current_row
        rank = timeline.tl.info(row).get("rank") if row is not None else None
        await pilot.press("q")
    return took, f"selected rank {rank}"


def main() -> int:
    from bench import corpus

    from nccl_doctor.analysis import analyze

    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--corpus", default="mn3", help="a corpus of bench.py: mn3 or steps")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    path = corpus(args.corpus, args.ranks)
    t = time.perf_counter()
    report = analyze(str(path))
    loading = time.perf_counter() - t
    paints = []
    what = ""
    for _ in range(args.reps):
        took, what = asyncio.run(first_paint(report))
        paints.append(took)
    print(json.dumps({"ranks": args.ranks, "loading_s": round(loading, 2),
                      "first_paint_after_loading_s": round(statistics.median(paints), 2),
                      "runs": [round(p, 2) for p in paints], "shown": what}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
