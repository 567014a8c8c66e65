"""A logging record at ERROR level that carries its writer's rank (Accelerate's logger adds "[RANK n]"):
that rank's own words, a failure only when the job failed otherwise and it was the rank's last word.
Expected values come from the lines below (what each rank wrote), not from the code's output."""

from __future__ import annotations

import nccl_doctor
from nccl_doctor.records import split_glued

PREFIX = "11/27/2026 08:12:21 - {level} - __main__ - [RANK {rank}] "


def _line(level: str, rank: int, msg: str) -> str:
    return PREFIX.format(level=level, rank=rank) + msg


def test_a_rank_tag_after_a_logging_prefix_is_that_records_own_not_a_second_record():
    line = _line("ERROR", 2, "shard 2 is truncated at step 8, giving up")
    assert split_glued(line) == [line]
    # the logger's name before the level (t271: "%(asctime)s - %(name)s - %(levelname)s - [RANK %(rank)s] ...")
    named = "2026-11-28 18:54:59,143 - train - ERROR - [RANK 0] corrupt record in shard-00000.tar; giving up"
    assert split_glued(named) == [named]
    # a progress bar that never ended its line, a record written after it (t281: tqdm on stderr, logging on stdout)
    bar = "Epoch 0:  70%|##   | 21/30 [00:02<00:01, 8.06it/s, loss=1.8052]"
    record = "11/28/2026 19:38:24 - ERROR - __main__ - could not save checkpoint at step 20"
    assert split_glued("Epoch 0:  67%|#    | 20/30\r" + bar + record)[-2:] == [bar, record]
    glued = "step 3/30 loss 2.0[rank 1] step 3/30 loss 2.1"  # two prints on one line: still cut
    assert split_glued(glued) == ["step 3/30 loss 2.0", "[rank 1] step 3/30 loss 2.1"]


def test_a_logged_error_in_a_job_that_ran_to_its_end_is_no_failure(tmp_path):
    log = tmp_path / "console.log"
    log.write_text("\n".join([
        _line("INFO", 0, "step 29/30: loss 2.0"),
        _line("INFO", 0, "step 30/30: loss 2.0"),
        _line("ERROR", 3, "could not upload the final metrics"),
    ]) + "\n")
    report = nccl_doctor.analyze(str(log), jobs=1)
    assert not [f for f in report.findings if f.severity.value == "error"], [f.summary for f in report.findings]


def test_a_logged_error_that_is_a_ranks_last_word_while_its_peers_lose_it_names_that_rank(tmp_path):
    log = tmp_path / "console.log"
    log.write_text("\n".join([
        _line("INFO", 0, "step 7/30: loss 2.0699"),
        _line("ERROR", 2, "shard 2 is truncated at step 8, giving up"),
        "[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:33187",
        "[rank3]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:33187",
    ]) + "\n")
    report = nccl_doctor.analyze(str(log), jobs=1)
    assert report.verdict["ranks"] == [2], report.verdict
    assert "shard 2 is truncated" in report.verdict["headline"]


def test_an_error_record_with_host_and_rank_before_its_level_is_that_ranks_quoted_error():
    # fixtures/realruns/t326_exit1_nan_r2_short_3p1_redirect, trn32-console.txt:26: "2026-11-29 00:09:13,825 trn32
    # rank=2 ERROR train | non-finite loss nan at step 17 (lr 0.05); stopping training", then sys.exit(1)
    from pathlib import Path
    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / "t326_exit1_nan_r2_short_3p1_redirect"
    verdict = nccl_doctor.analyze(str(run)).verdict
    assert verdict["ranks"] == [2] and verdict["hosts"] == ["trn32"], verdict
    assert "logged error: non-finite loss nan at step 17" in verdict["summary"], verdict


def test_a_glog_error_record_with_no_rank_is_its_pids_rank_error():
    # fixtures/realruns/t328_exit1_r1_w2_glog_tee, console.log:20: "E1129 00:23:40.334 11787 train328.py:275]
    # non-finite gradient norm (nan) at step 35; aborting this worker"; torchrun's table: rank 1 is pid 11787, exit 1
    from pathlib import Path
    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / "t328_exit1_r1_w2_glog_tee"
    verdict = nccl_doctor.analyze(str(run)).verdict
    assert verdict["ranks"] == [1], verdict
    assert "logged error: non-finite gradient norm (nan) at step 35" in verdict["summary"], verdict
