"""Ranks that kept working while the others waited. A rank stuck in a retry loop or a skip-and-continue loop (family t199): it writes no error of its own and
its file keeps growing while the others time out waiting for it. The verdict names it as stuck repeating the
failure it handled, quoting that failure, not as a rank that "wrote no error" (evidence.retrying). Expected
values are read from the recorded logs (the quoted lines and their counts were counted by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor.analysis import analyze
from nccl_doctor.findings import Severity

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def _rk2(run: str):
    report = analyze([str(RUNS / run)], jobs=1)
    return report, next(f for f in report.findings if f.rule == "RK2")


@pytest.mark.parametrize(("run", "rank", "quoted", "times", "last"), [
    # console.log:30-120, "retry 1/1000" .. "retry 61/1000" (a hand-written loop)
    ("t199_readloop_r2_w4_tee", 2, "read of shard-00010 failed (OSError: [Errno 5]", 61, "console.log:120"),
    # console.err:10-40, logging's default format "WARNING:ckpt:[rank0] save of checkpoint ... retrying in 1.0s"
    ("t199_ckptsave_r0_w3_split", 0, "save of checkpoint step-000020.pt failed (OSError: [Errno 116]", 31,
     "console.err:40"),
    # console.log, log.exception(...) then continue: steps 15 to 41, one record each (27)
    ("t199_skip_r3_w4_logdir", 3, "could not build the batch, skipping it", 27, "console.log:460"),
    # tenacity's "Retrying ... as it raised URLError" with exc_info (two chained tracebacks each), in a side file
    ("t199_download_r2_w3_sidefile_tee", 2, "Retrying __main__.fetch_shard_forever", 15, "objstore-rank2.log:704"),
])
def test_the_rank_stuck_repeating_a_handled_failure_is_named_with_it(run, rank, quoted, times, last):
    report, rk2 = _rk2(run)
    assert report.verdict["ranks"] == [rank]
    assert report.verdict["summary"].startswith(f"rank {rank} ")
    assert "kept handling one" in rk2.summary and quoted in rk2.summary
    assert f"({times} times, the last at " in rk2.summary and rk2.summary.split("the last at ")[1].split(")")[0] \
        .endswith(last)
    assert "wrote no error of its own while" not in rk2.summary


def test_a_retry_that_succeeded_is_no_loop_and_no_finding():
    # rank 1 retried twice ("retry 1/1000", "retry 2/1000"), then "ok after 3 attempts"; every rank exited 0
    report = analyze([str(RUNS / "t199_healthy_transient_w3_tee3")], jobs=1)
    assert report.verdict is None
    assert not [f for f in report.findings if f.rule in ("RK1", "RK2", "RK3")]


def test_a_retried_traceback_chained_to_another_is_handled_not_the_rank_s_death():
    # each "Retrying ... as it raised URLError" heads a ConnectionRefusedError traceback and, after "During
    # handling of the above exception", a URLError one: the handler caught both; the rank never died of them
    report = analyze([str(RUNS / "t199_download_r2_w3_sidefile_tee")], jobs=1)
    assert "failed first" not in report.verdict["summary"]
    # (an info note that it failed and went on may stay; nothing says it died of it)
    assert not [f for f in report.findings if f.rule == "RK1" and f.severity.level >= Severity.WARNING.level]


# ---- evidence.still_writing: of one node's late ranks, the one still at work when the others waited ----

def test_the_slow_rank_of_a_node_is_named_alone_when_its_node_mate_had_stopped_writing():
    # t198_straggler: ranks 0-1 (trn-b01, 10 s timeout) time out; ranks 2-3 (trn-b02, 60 s) only lose a peer.
    # trn-b02.log: rank 2's last record "[2/4] step 2 micro 12/16 0.40 s/micro" at 10:59:59.217 (line 27), as the
    # waiters' last at 10:59:59.2; rank 3 (pid 15887) writes "1.20 s/micro" until 11:00:08.819 (line 29)
    report = analyze([str(RUNS / "t198_straggler_r3_w4_nodeyaml_redirect")], jobs=1)
    assert report.verdict["ranks"] == [3]
    rk3 = next(f for f in report.findings if f.rule == "RK3")
    assert "it was still writing (" in rk3.summary and "trn-b02.log:29, 10 s after" in rk3.summary


@pytest.mark.parametrize("run", ["t186_freeze_n2_plain_logdir", "t190_node_sigstop_split", "t28_node_sigstop_n2_redirect"])
def test_a_frozen_node_is_still_named_whole(run):
    # SIGSTOP of a node's agent and workers: every rank of it stopped writing together, none after the waiters
    report = analyze([str(RUNS / run)], jobs=1)
    assert "that node stalled" in report.verdict["summary"] or "stalled" in next(
        f.summary for f in report.findings if f.rule == "RK3")


# ---- statements.mismatch_apart: gloo aborted the one rank in a scalar collective amid a gradient all-reduce ----

@pytest.mark.parametrize(("run", "rank"), [
    # rank 1 alone all-reduces a 4-byte counter: gloo aborts it ("77748 vs 4"); ranks 0 and 2 lose their peer at
    # train67.py:319 "loss.backward()" (DDP's gradient all-reduce)
    ("t67_desync_r1_w4_redirect", 1),
    # rank 2 calls one extra all_reduce ("14876 vs 4"); ranks 1 and 3 lose it at train68.py:925 "loss.backward()"
    ("t68_desync_extra_r2_w4_det_redirect", 2),
])
def test_the_rank_aborted_in_a_scalar_collective_amid_a_gradient_all_reduce_is_named(run, rank):
    report = analyze([str(RUNS / run)], jobs=1)
    assert report.verdict["ranks"] == [rank]
    dsy = next(f for f in report.findings if f.rule == "DSY1")
    assert f"gloo aborted rank {rank} on data of another size" in dsy.summary


def test_an_aborted_rank_whose_peers_were_in_another_scalar_collective_is_not_blamed():
    # t68_desync_r1: rank 0 aborted ("14876 vs 4") inside the 1-element reduce_mean that rank 3 also lost (an
    # explicit all_reduce at train68.py:407), ranks 1 and 2 left no line: the culprit (rank 1) cannot be told
    report = analyze([str(RUNS / "t68_desync_r1_w4_det_tee")], jobs=1)
    assert not (report.verdict or {}).get("ranks")


# ---- messages that name other ranks (family t206) ----

def test_the_rank_every_other_rank_s_error_names_is_accused():
    # console.log:32 and :40: ranks 2 and 1 raise "rank N: checksum mismatch with rank 0's broadcast of EMA
    # shard 0/3 ..."; rank 0 only lost its peers (":46-53", Connection closed by peer in its next broadcast)
    report = analyze([str(RUNS / "t206_bcast_r0_w3_redirect")], jobs=1)
    assert report.verdict["ranks"] == [0]


def test_the_rank_a_given_up_wait_names_is_accused_not_the_waiter():
    # console.err:8: rank 0's "TimeoutError: rank 0: checkpoint step 20 incomplete after 20 s: no shard from
    # ranks [2]"; rank 2's last line is "writing checkpoint shard 2/3 for step 20" (console.out:31)
    report = analyze([str(RUNS / "t206_ckptwait_hang_r2_w3_split")], jobs=1)
    assert report.verdict["ranks"] == [2]


def test_a_rank_naming_the_peer_it_compared_with_is_still_its_own_culprit():
    # rank 1 alone raises "rank 1: data manifest mismatch at epoch 1: expected 4 shards from rank 0, got 3":
    # its own cache lost a shard; rank 0 is only the reference
    report = analyze([str(RUNS / "t206_shards_r1_w4_tee")], jobs=1)
    assert report.verdict["ranks"] == [1]


def test_a_step_line_one_rank_alone_prints_is_no_position_to_compare():
    # rank 0 alone prints "eval step 19: loss ... from 4 ranks" as the evaluation's aggregator; every rank's
    # last "step N/40" is 15: no rank "ran ahead" (DSY1 must not fire); rank 0's monitored barrier names rank 1
    report = analyze([str(RUNS / "t206_monbarrier_hang_r1_w4_logdir")], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert not [f for f in report.findings if f.rule == "DSY1"]


# ---- launchers.slash_rank: "[r/w]" tags read as ranks only where no counter could have written them ----

def test_interleaved_rank_of_world_tags_are_ranks_and_a_counter_is_not():
    from nccl_doctor.launchers import detect_modes

    tagged = [f"[{r}/4] step {s} loss 2.1" for s in range(1, 4) for r in (2, 0, 3, 1)]
    assert "slash_rank" in detect_modes(tagged)
    epochs = [f"[{e}/10] epoch {e} loss 2.1" for e in range(1, 10)]  # a counter: in order, up to its total
    assert "slash_rank" not in detect_modes(epochs)
    one_based = [f"[{r}/4] step {s}" for s in range(1, 4) for r in (4, 1, 3, 2)]  # 4/4: no rank of 4
    assert "slash_rank" not in detect_modes(one_based)


def test_a_broadcast_source_every_receiver_names_as_src_is_accused():
    # t214_bcast: ranks 2, 0 and 3 raise "class-weight sync round 5: payload from src=1 failed validation"
    # (console.log:155, 164, 173); rank 1 only lost its peers afterwards (console.log:175-199)
    report = analyze([str(RUNS / "t214_bcast_r1_w4_tee")], jobs=1)
    assert report.verdict["ranks"] == [1]
