"""The verdict in one line: who, what, what followed, [rules]; at most 140 characters; the text
report prints no sentence twice. Expected values come from each fixture's expected.json (the
injected culprit, the SeqNum the others timed out in) and its log lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_doctor import analyze
from nccl_doctor.headline import LIMIT, _short
from nccl_doctor.report import to_text

GEN = Path(__file__).resolve().parent.parent / "fixtures" / "generated"
REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _timeout_seq(expected: dict) -> tuple[int, int]:
    """(SeqNum most ranks timed out in, how many) in the group with the most timeouts."""
    pg, ranks = max(expected["timeout_seq"].items(), key=lambda kv: len(kv[1]))
    seqs = list(ranks.values())
    seq = max(set(seqs), key=seqs.count)
    return seq, seqs.count(seq)


@pytest.mark.parametrize("case, doing", [("hang-mn3-16", "went silent"), ("crash-rk1-kubectl-16", "failed first"),
                                         ("lag-rk3-subgroup-16", "lagged behind")])
def test_who_what_and_what_followed(case, doing):
    expected = json.loads((GEN / case / "expected.json").read_text())
    v = analyze(str(GEN / case)).verdict
    rank, host = expected["culprit"]["ranks"][0], expected["culprit"]["hosts"][0]
    seq, n = _timeout_seq(expected)
    head = v["headline"]
    assert head.startswith(f"rank {rank} ({host}) {doing}")
    assert f"{n} ranks then timed out in ALLREDUCE #{seq}" in head
    assert head.endswith("]") and v["rules"][-1] == "MN3" and head.endswith(f"[{', '.join(v['rules'])}]")
    assert len(head) <= LIMIT


def test_a_class_that_explains_the_failure_is_named():
    """fabric-mn1: the 8 ranks of r9i2n4 hit CUDA failure 802 (fabric manager) in init; the other
    host's ranks timed out in BARRIER SeqNum 1."""
    v = analyze(str(GEN / "fabric-mn1-ncclfile-16")).verdict
    assert v["headline"].startswith("ranks 8-15 (r9i2n4) failed first (Fabric manager / NVSwitch init failure)")
    assert "8 ranks then timed out in BARRIER #1" in v["headline"] and v["rules"] == ["RK1", "MN1", "MN3"]


def test_the_culprits_own_error_is_quoted():
    """crash-rk1-kubectl-16: rank 13's line is 'torch.OutOfMemoryError: CUDA out of memory. Tried to
    allocate 2.50 GiB ...': the headline keeps its first sentence."""
    v = analyze(str(GEN / "crash-rk1-kubectl-16")).verdict
    assert "failed first: CUDA out of memory;" in v["headline"]


def test_every_real_excerpt_fits():
    for log in sorted(REAL.glob("*.log")):
        v = analyze(str(log)).verdict
        if v:
            assert 0 < len(v["headline"]) <= LIMIT, log.name
            assert "\n" not in v["headline"]


def test_no_sentence_is_printed_twice():
    text = to_text(analyze(str(GEN / "hang-mn3-16")))
    rows = text.splitlines()
    verdict = rows[0].split(None, 1)[1]
    assert sum(verdict in r for r in rows) == 1
    last = next(r for r in rows if r.startswith("LAST"))
    rk2 = next(r for r in rows if r.startswith("RK2"))
    summary = rk2.split(" — ", 1)[1]
    assert summary not in last and summary not in rows[0]
    assert last == "LAST     rank 12 (dgx-h100-44) · last line " + str(GEN / "hang-mn3-16" / "rank-00012.log") + \
        ":22 · communicator ready"  # rank 12's log ends at its line 22, 'Init COMPLETE'


def test_long_details_are_cut_at_a_word():
    assert _short("CUDA out of memory. Tried to allocate 2.50 GiB", 60) == "CUDA out of memory"
    cut = _short("ValueError: Expected input batch_size (8) to match target batch_size (7)", 40)
    assert cut.endswith("…") and len(cut) <= 40 and cut[:-1] == cut[:-1].rstrip()
    assert "ValueError: Expected input batch_size".startswith(cut[:-1])
