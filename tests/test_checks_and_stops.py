"""The job's own consistency checks, object collectives whose receivers cannot unpickle, debugger
prompts left in the code, and the workers torch.multiprocessing.spawn stops by pid. Line shapes from
fixtures/realruns/t132_seed_r2_w4_allraise_tee, t132_skipinf_r1_w3_rank0exit_redirect,
t130_vocab_mainclass_r0_w4_redirect, t129_bp_eof_r2_w4_tee and t120_fn_hang_r1_w2_tee; expected ranks
read from the lines by hand (the rank the check names, the sender, the rank at the prompt)."""

from __future__ import annotations

from torchrun_lines import failure_table

from nccl_doctor import analyze

_CLOSED = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
           "by peer [127.0.0.1]:41311. This is typically caused by a remote worker crashing.")


def _verdict(tmp_path, lines: list[str]) -> dict:
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict or {}


def _raise(rank: int, call: str, exc: str) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):", f'[rank{rank}]:   File "/job/train.py", line 88, in check',
            f"[rank{rank}]:     {call}", f"[rank{rank}]: {exc}"]


def _steps(world: int) -> list[str]:
    return [f"2026-11-28 03:01:58,10{r} INFO [rank {r}] trainer: step 0 loss 2.1{r}" for r in range(world)]


def test_every_rank_raising_a_check_that_lists_every_ranks_value_accuses_the_rank_it_says_differs(tmp_path):
    msg = ("RuntimeError: parameter checksum mismatch at step 0: rank 2 differs (rank 0: 9398.482018, "
           "rank 1: 9398.482018, rank 2: 9550.886843, rank 3: 9398.482018)")
    lines = _steps(4)
    for r in (2, 3, 1, 0):
        lines += _raise(r, "raise RuntimeError(msg)", msg)
    assert _verdict(tmp_path, lines).get("ranks") == [2]


def test_a_listing_of_every_ranks_value_alone_accuses_no_one(tmp_path):
    msg = "RuntimeError: checksums at step 0 (rank 0: 9398.48, rank 1: 9398.48, rank 2: 9550.88, rank 3: 9398.48)"
    lines = _steps(4)
    for r in range(4):
        lines += _raise(r, "raise RuntimeError(msg)", msg)
    assert _verdict(tmp_path, lines).get("ranks") != [2]


def test_one_ranks_logged_check_that_says_another_rank_differs_names_that_rank(tmp_path):
    lines = _steps(3) + [
        "2026-11-28 03:02:39,546 WARNING [rank 1] trainer: step 7: non-finite local gradient, skipping the optimizer step",
        "2026-11-28 03:02:39,969 ERROR [rank 0] trainer.consistency: parameter checksum mismatch at step 10: rank 1 "
        "differs from rank 0 (rank 0: 9484.678940, rank 1: 9444.479620, rank 2: 9484.678940); aborting the job",
        f"[rank2]: {_CLOSED}", f"[rank1]: {_CLOSED}"]
    assert _verdict(tmp_path, lines).get("ranks") == [1]


def test_the_reference_a_rank_is_compared_with_is_not_accused(tmp_path):
    # rank 1's own check says that it differs from rank 0: it accuses itself, not rank 0
    lines = _steps(3) + [
        "2026-11-28 03:02:39,969 ERROR [rank 1] trainer.consistency: my checksum at step 10 differs from rank 0; "
        "aborting", f"[rank2]: {_CLOSED}", f"[rank0]: {_CLOSED}"]
    assert _verdict(tmp_path, lines).get("ranks") == [1]


def test_receivers_that_cannot_unpickle_what_one_rank_broadcast_point_at_the_sender(tmp_path):
    exc = ("AttributeError: Can't get attribute 'Vocab' on <module '__main__' from "
           "'/work/main/fixtures/realruns/train130.py'>")
    lines = _steps(4)
    for r in (1, 2, 3):
        lines += _raise(r, "dist.broadcast_object_list(payload, src=0)", exc)
    lines += _raise(0, "dist.scatter_object_list(out, shards, src=0)", _CLOSED)
    assert _verdict(tmp_path, lines).get("ranks") == [0]


def test_a_debugger_quitting_at_end_of_input_is_the_ranks_own_failure(tmp_path):
    lines = _steps(4) + ["--Return--", "> /job/train.py(90)debug_hook()->None", "-> breakpoint()", "(Pdb) "]
    lines += _raise(2, "if self.quitting: raise BdbQuit", "bdb.BdbQuit")
    lines += [f"[rank{r}]: {_CLOSED}" for r in (3, 1)]
    v = _verdict(tmp_path, lines)
    assert v.get("ranks") == [2] and "BdbQuit" in v.get("headline", "")


def test_a_worker_spawn_stopped_by_pid_was_running_not_gone(tmp_path):
    """elastic_launch with a function entrypoint: the table lists only the first failure (rank 0's
    timeout); spawn terminated pid 32530 (rank 1's, as its own line says) while it hung."""
    agent = "E1128 02:09:17.067000 32485 torch/distributed/elastic/multiprocessing/api.py:836]"
    lines = ["2026-11-28 02:08:46,394 INFO train: rank 1/2 (local 1, pid 32530) joined (function entrypoint)",
             "2026-11-28 02:08:46,425 INFO train: rank 0/2 (local 0, pid 32529) joined (function entrypoint)",
             "2026-11-28 02:08:56,240 INFO train: rank 0/2 step 8 loss 1.3818",
             "2026-11-28 02:08:56,240 INFO train: rank 1/2 step 8 loss 1.3461",
             "W1128 02:09:17.035000 32485 torch/multiprocessing/spawn.py:165] Terminating process 32530 via signal SIGTERM",
             f"{agent} failed (exitcode: 1) local_rank: 0 (pid: 32529) of fn: train (start_method: spawn)",
             f"{agent} Traceback (most recent call last):",
             f"{agent} torch.multiprocessing.spawn.ProcessRaisedException: ", f"{agent} ",
             f"{agent} -- Process 0 terminated with the following error:",
             f"{agent} Traceback (most recent call last):",
             f'{agent}   File "/job/train120.py", line 78, in train', f"{agent}     loss.backward()",
             f"{agent} RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
             "Timed out waiting 20000ms for recv operation to complete",
             "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
             "============================================================", "train FAILED",
             "------------------------------------------------------------", "Failures:", "  <NO_OTHER_FAILURES>",
             "------------------------------------------------------------", "Root Cause (first observed failure):",
             "[0]:", "  time      : 2026-11-28_02:09:16", "  host      : localhost", "  rank      : 0 (local_rank: 0)",
             "  exitcode  : 1 (pid: 32529)", "  error_file: <N/A>", "  traceback : Traceback (most recent call last):",
             "  RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
             "waiting 20000ms for recv operation to complete",
             "============================================================"]
    v = _verdict(tmp_path, lines)
    assert v.get("ranks") == [1]
    assert "left the job early" not in v.get("headline", "") and "exit status 0" not in v.get("headline", "")


def _beats(world: int) -> list[str]:
    return [f"[rank {r}] 03:27:37 step 8 loss 2.0{r}" for r in range(world)] + ["[hangwatch] all 4 ranks alive (steps 11..12)"]


def test_the_rank_the_jobs_hang_monitor_names_is_the_cause_not_the_monitor_that_exited(tmp_path):
    lines = _beats(4) + ["[hangwatch] rank 2 heartbeat stale for 8.5 s (last step 11)",
                         "[hangwatch] job is hung, aborting all ranks (exit 17)"]
    lines += failure_table([(0, 17, ""), (1, -15, "SIGTERM"), (2, -15, "SIGTERM"), (3, -15, "SIGTERM")])
    assert _verdict(tmp_path, lines).get("ranks") == [2]


def test_a_monitor_that_stopped_every_rank_itself_still_names_the_stale_one(tmp_path):
    lines = _beats(4) + ["hangwatch 03:30:03 no progress from rank 1 since 03:29:54 (step 11, last beat 0.5 s ago)",
                         "hangwatch 03:30:03 sending SIGTERM to all 4 ranks: pids [4270, 4271, 4272, 4273]"]
    lines += failure_table([(0, -15, "SIGTERM"), (1, -15, "SIGTERM"), (2, -15, "SIGTERM"), (3, -15, "SIGTERM")])
    assert _verdict(tmp_path, lines).get("ranks") == [1]


def test_a_monitors_word_does_not_hide_another_ranks_own_error(tmp_path):
    # rank 3 raised first; the monitor then saw rank 1 (waiting for rank 3) stop beating
    lines = _beats(4) + _raise(3, "batch = next(it)", "KeyError: 'labels'")
    lines += ["[hangwatch] rank 1 heartbeat stale for 8.5 s (last step 11)"] + [f"[rank{r}]: {_CLOSED}" for r in (0, 2)]
    lines += failure_table([(3, 1, ""), (0, 1, ""), (1, -15, "SIGTERM"), (2, 1, "")])
    assert _verdict(tmp_path, lines).get("ranks") == [3]


def test_a_log_servers_columns_name_each_records_rank(tmp_path):
    """A logging server's file (t135_hang_r2_w3_split): "time | logger | LEVEL | message" with the rank in
    the logger's name; ranks 0 and 1 time out in their ERROR records, rank 2 stopped after step 10."""
    lines = [f"2026-11-28 03:27:04.80{r} | train.rank{r} | INFO     | step 10 loss 2.3{r}" for r in range(3)]
    for r, op in ((0, "send"), (1, "recv")):
        lines += [f"2026-11-28 03:27:25.12{r} | train.rank{r} | ERROR    | training failed on rank {r}",
                  "Traceback (most recent call last):",
                  '  File "/job/train.py", line 145, in train', "    loss.backward()",
                  "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
                  f"Timed out waiting 20000ms for {op} operation to complete"]
    assert _verdict(tmp_path, lines).get("ranks") == [2]
