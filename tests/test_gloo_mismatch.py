"""gloo's size mismatch ("op.preamble.length <= op.nbytes. A vs B. Received data size doesn't match expected
size") aborts the receiving rank, which cannot say who deviated. gloo's ring fixes the sender (all_reduce: the
next rank, all_gather: the previous one; measured with torch 2.13, see evidence/ring.py), so the deviator is the
aborted rank or that neighbour. And gloo's other abort: a rank's own uncaught error that its teardown ends in SIGABRT
("terminate called without an active exception"). Expected values come from the recorded logs and each run's
injected fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor.analysis import analyze

RUNS = Path(__file__).resolve().parent.parent / "fixtures" / "realruns"


def _dsy1(run: str):
    report = analyze([str(RUNS / run)], jobs=1)
    return report, next(f for f in report.findings if f.rule == "DSY1")


@pytest.mark.parametrize(("run", "rank", "aborted", "neighbour", "quoted"), [
    # console.log:23 "[default0]:... ERROR trainer: step 9 failed on rank 0, skipping batch" (its ValueError below);
    # console.log:31 gloo aborts rank 0 ("2632 vs 4"); rank 1's records come after, with lost-peer tracebacks
    ("t151_skip_mismatch_r0_w2_logexc_tee3", 0, 0, 1, "step 9 failed on rank 0, skipping batch"),
    # console.log:56 "WARNING trainer: step 12 failed on rank 2: cannot decode sample 195 ...": no prefix, its rank
    # only in the message; torchrun's table: local_rank 2 exitcode -6; ranks 1 and 3 warn later of a reset peer
    ("t151_skip_mismatch_r2_w4_tee", 2, 2, 3, "step 12 failed on rank 2: cannot decode sample 195"),
    # 0/stdout.log:6 "quick eval at step 10: no usable held-out record, skipped"; 3/stderr.log: gloo aborts rank 3
    # ("2020 vs 32"); rank 0 is the rank rank 3's all_reduce ring receives from
    ("t81_syncbn_evalmode_r0_w4_zero_logdirq", 0, 3, 0, "quick eval at step 10: no usable held-out record"),
    # console.log:12 "... WARNING [rank2] tagger.train: eval step 12: validation shard exhausted, last batch has 13
    # sequences" (a warning behind a logging prefix); the all_gather's ring: rank 2 receives from rank 1
    ("t222_allgather_r2_w3_logrank_redirect", 2, 2, 1, "validation shard exhausted, last batch has 13 sequences"),
])
def test_of_the_aborted_rank_and_its_neighbour_the_one_that_logged_its_own_deviation_is_named(
        run, rank, aborted, neighbour, quoted):
    report, dsy = _dsy1(run)
    assert report.verdict["ranks"] == [rank]
    assert f"gloo aborted rank {aborted} on data" in dsy.summary
    assert f"the ranks that disagreed are rank {aborted} and rank {neighbour}" in dsy.summary
    assert quoted in dsy.summary


@pytest.mark.parametrize(("run", "rank", "sizes"), [
    # console.log:10-11 "4096 vs 3456": rank 3's predictions padded to 27 tokens, the others' to 32 (2x16x27x8 bytes)
    ("t222_pad_r3_w4_logplain_redirect", 3, "it posted 3456 bytes and was sent 4096"),
    # rank 0 pads to its own longest sequence: "1344 vs 704" in the evaluation all_gather
    ("t119_localpad_r0_w3_rank0_logdir", 0, "it posted 704 bytes and was sent 1344"),
])
def test_an_all_gather_s_aborted_receiver_is_taken_for_the_rank_with_the_short_tensor(run, rank, sizes):
    report, dsy = _dsy1(run)
    assert report.verdict["ranks"] == [rank]
    assert f"gloo aborted rank {rank} in all_gather" in dsy.summary and sizes in dsy.summary
    assert dsy.confidence == "medium"


def test_a_broadcast_between_two_ranks_is_not_taken_for_a_short_receiver():
    # rank 0's traceback is already in the next collective (an all_reduce): nothing says the broadcast was it
    report, dsy = _dsy1("t222_bcast_r1_w2_logplain_split")
    assert not report.verdict.get("ranks")
    assert "gloo on rank 1 received data" in dsy.summary  # torchrun's table: local_rank 1 exitcode -6


def test_a_warning_record_behind_a_logging_prefix_reads_as_a_warning():
    from nccl_doctor.launchers import LauncherStripper

    cut = LauncherStripper().strip  # (a launcher prefix off a line)
    fields, rest = cut("2026-11-28 13:40:42,902 WARNING [rank2] tagger.train: eval step 12: validation "
                       "shard exhausted")
    assert fields["rank"] == 2 and rest.startswith("WARNING: ")
    _, rest = cut("2026-11-28 13:40:42,665 INFO [rank0] tagger.train: step 10/40 loss 2.1388")
    assert rest == "tagger.train: step 10/40 loss 2.1388"


def test_an_untimed_error_is_not_put_after_a_later_one_by_its_launcher_s_late_exit_report():
    # console.log:52 rank 2's "training failed ... at step 10" (19:47:45,429), :55 rank 0's (19:47:46,576); rank 2's
    # evidence also holds torchrun's exit report at 19:47:52: rank 2 failed first
    report = analyze([str(RUNS / "t64_two_ema_r2_then_r0_w4_tee")], jobs=1)
    assert report.verdict["ranks"] == [2]


def test_an_uncaught_traceback_torch_s_hook_printed_is_not_trained_on_by_a_step_line_relayed_after_it():
    # console.log:37-50 rank 3's "[default3]:[rank3]: Traceback ..." ending in FileNotFoundError (batch-000026.npy),
    # :51 "terminate called without an active exception"; its "step 25/50" line (14:03:04,555) reaches the console
    # at :79, after the traceback: torchrun's tee relays stdout and stderr apart. Rank 3 failed first.
    report = analyze([str(RUNS / "t226_raise_r3_w4_filter_logdir")], jobs=1)
    assert report.verdict["ranks"] == [3]
    assert "FileNotFoundError" in report.verdict["summary"]


def test_an_all_gather_message_exactly_twice_the_posted_size_names_no_short_receiver():
    # console.log:26 "12 vs 6": rank 2's float64 stats (a numpy window) against the others' float32; gloo aborted rank
    # 0, and nothing in the logs (no rank in any record, rank 2 logged nothing) says which side deviated
    report, dsy = _dsy1("t234_gather_dtype_r2_w3_norank_tee")
    assert not report.verdict.get("ranks")


def test_every_rank_timed_out_in_one_collective_after_one_rank_alone_warned():
    # console.log:20 rank 1's JSON WARNING "label id 12 seen in local shard; growing class-count buffer to 15
    # classes"; :28, :41, :54 every rank times out in dist.reduce_scatter (25 s): nobody is missing
    report, dsy = _dsy1("t234_rs_shape_r1_w3_json_redirect")
    assert report.verdict["ranks"] == [1] and dsy.confidence == "medium"
    assert "all 3 ranks timed out in reduce_scatter, none missing" in dsy.summary


def test_a_scalar_posted_against_a_small_models_gradient_chunk_is_the_aborted_ranks_own_extra_collective():
    # t297_extra_metric_r1: console.log:20-21 gloo aborts rank 1 on "3396 vs 4" (849 times its 1-element buffer;
    # torchrun's table: rank 1, exitcode -6) while ranks 0 and 2 lose it in the hand-written gradient all_reduce
    # (train297.py:274, dist.all_reduce(flat)): rank 1 was alone in another collective (its extra loss all_reduce)
    report, dsy = _dsy1("t297_extra_metric_r1_w4_tee")
    assert report.verdict["ranks"] == [1]
    assert "gloo aborted rank 1 on data of another size" in dsy.summary and "it posted a scalar" in dsy.summary


def test_a_teardown_abort_after_a_lost_peer_is_not_the_rank_gloo_aborted():
    # t297_extra_metric_r2: two SIGABRTs in torchrun's table (ranks 0 and 2). console.log:16-17 gloo's enforce
    # ("4528 vs 4", no rank) and console.log:31 "terminate called without an active exception" right after rank 0's
    # own lost-peer traceback (:18-30): rank 0 aborted tearing down; the rank the enforce aborted is rank 2, which
    # posted a scalar while ranks 0 and 1 lost it in backward (train297.py:271). The line at :31 is no rank 2's.
    report, dsy = _dsy1("t297_extra_metric_r2_w3_tee")
    assert report.verdict["ranks"] == [2]
    assert "gloo aborted rank 2 on data of another size" in dsy.summary and "it posted a scalar" in dsy.summary
    assert not any(e.line == 31 for f in report.findings if f.rule == "RK1" for e in f.evidence)


@pytest.mark.parametrize(("run", "aborted", "neighbour"), [
    # console.log:22-23: the untagged gloo abort ("8 vs 4"), rank 0 by torchrun's table (exitcode -6); rank 0's
    # histogram had 9 bins (the injected fault), nothing logged by rank 0 or rank 1 says so
    ("t369_sizehist_r0_w4_tee", 0, 1),
    # rank 2 aborts ("192 vs 128"); rank 3, the neighbour its ring receives from, padded its histogram to 192 bins
    ("t273_pad_allreduce_r3_w4_redirect", 2, 3),
])
def test_a_lone_abort_with_nothing_logged_names_the_ring_pair_and_no_rank(run, aborted, neighbour):
    report, dsy = _dsy1(run)
    assert report.verdict["ranks"] == []
    assert (f"gloo's ring puts the difference between rank {aborted} and the neighbour it receives from, "
            f"rank {neighbour}") in dsy.summary
