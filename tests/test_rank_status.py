"""Each rank's status on real runs, from what each rank's own lines say (checked by hand in the logs).

A rank whose only error is what it saw of another's failure is "echo", never "ok" (which reads as healthy); a rank
that gave up waiting at the store is "timed_out"; a rank the launcher stopped without a word of its own stays "ok";
a rank the verdict names keeps its own status."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor import analyze

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def statuses(run: str) -> dict[int, str]:
    report = analyze([str(RUNS / run)], jobs=1)
    return {r.rank: r.status for r in report.job.ranks if r.rank is not None}


@pytest.mark.parametrize(("run", "expected"), [
    # rank 0 hung holding the checkpoint's sync lock (its host edge-c3); rank 2 gave up on the lock (filelock's Timeout,
    # edge-c4.err:14), rank 1's backward lost its peer (edge-c3.err:1-10 "Connection closed by peer"), rank 3 was
    # SIGTERMed by its agent with no line of its own (edge-c4.err:41-44)
    ("t483_synclock_hang_a0_b2_2n_print_split", {0: "failed", 1: "echo", 2: "echo", 3: "ok"}),
    # rank 0's evaluator was killed; rank 1 gave up waiting for the store key /eval/epoch-001/val_loss
    # (console.log:33) and is the reader whose failure names rank 0: its wait, its own, a consequence
    ("t487_evalkey_kill_a0_b1_w2_json_redirect", {0: "failed", 1: "timed_out"}),
])
def test_consequences_are_not_ok(run: str, expected: dict[int, str]):
    assert statuses(run) == expected
