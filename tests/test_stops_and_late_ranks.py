"""A rank that was elsewhere while the others timed out, and an agent stopped from outside beside a job
that failed of its own. Line shapes from fixtures/realruns/t97_stalescale_r1_w3_split (gloo timeouts in a
barrier, one rank's closed peer in its backward) and t96_early_raise_t2_r0_w2_dirs (a sweep driver's
SIGTERM to one trial's torchrun, another trial's own exception), with other pids, ports and lines.
Expected ranks are read from the lines by hand."""

from __future__ import annotations

from nccl_doctor import analyze

_TIMEOUT = {"recv": "unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete",
            "send": "unbound_buffer.cc:129] Timed out waiting 20000ms for send operation to complete"}


def _traceback(rank: int, line: int, call: str, error: str) -> list[str]:
    lib = "/opt/venv/lib/python3.11/site-packages/torch"
    inner = ([f'  File "{lib}/distributed/c10d_logger.py", line 83, in wrapper', "    return func(*args, **kwargs)",
              f'  File "{lib}/distributed/distributed_c10d.py", line 5356, in barrier', "    work.wait()"]
             if call == "dist.barrier()" else
             [f'  File "{lib}/_tensor.py", line 623, in backward', "    torch.autograd.backward("])
    body = ["Traceback (most recent call last):", '  File "/job/train.py", line 201, in <module>', "    main()",
            f'  File "/job/train.py", line {line}, in main', f"    {call}", *inner,
            f"RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/{error}"]
    return [f"[rank{rank}]: {b}" for b in body]


def _hang(tmp_path, rank1_line: int, rank1_call: str) -> list[int]:
    # ranks 0 and 2 time out in the barrier at line 180; rank 1's closed peer is written between them
    lines = [f"[rank {r}] step {s} loss 2.{r}{s}1" for s in range(8) for r in range(3)]
    lines += _traceback(0, 180, "dist.barrier()", _TIMEOUT["send"])
    lines += _traceback(1, rank1_line, rank1_call, "pair.cc:553] Connection closed by peer [127.0.0.1]:41177. This "
                        "is typically caused by a remote worker crashing.")
    lines += _traceback(2, 180, "dist.barrier()", _TIMEOUT["recv"])
    (tmp_path / "console.err").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict.get("ranks") or []


def test_a_rank_that_lost_its_peer_at_another_line_than_where_the_others_timed_out_was_elsewhere(tmp_path):
    assert _hang(tmp_path, 163, "scaled.backward()") == [1]


def test_a_closed_peer_at_the_line_where_the_others_timed_out_is_one_more_waiter(tmp_path):
    assert _hang(tmp_path, 180, "dist.barrier()") == []


_AGENT_STOPPED = [
    "W1128 03:12:41.118000 61402 torch/distributed/elastic/agent/server/api.py:753] Received 15 death signal, "
    "shutting down workers",
    "W1128 03:12:41.119000 61402 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 61410 "
    "closing signal SIGTERM",
    "W1128 03:12:41.121000 61402 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 61411 "
    "closing signal SIGTERM",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 61402 got signal: 15",
]
_OWN_ERROR = [
    "2026-11-28 03:12:52,410 INFO [rank 0] step 3/30 loss 0.4431",
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/job/train.py", line 201, in <module>',
    "[rank0]:     main()",
    '[rank0]:   File "/job/train.py", line 188, in main',
    "[rank0]:     loss = F.mse_loss(out, y)",
    "[rank0]: RuntimeError: The size of tensor a (48) must match the size of tensor b (24) at non-singleton dimension 0",
    "[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
    "by peer [127.0.0.1]:40412. This is typically caused by a remote worker crashing.",
    "E1128 03:12:53.102000 61520 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
    "local_rank: 0 (pid: 61530) of binary: /opt/venv/bin/python3",
]


def test_a_trial_stopped_from_outside_does_not_hide_another_trials_own_exception(tmp_path):
    for name, lines in (("trial_1", _AGENT_STOPPED), ("trial_2", _OWN_ERROR)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert analyze([str(tmp_path)], jobs=1).verdict.get("ranks") == [0]


def test_an_agent_stopped_from_outside_still_explains_the_echoes_of_the_others(tmp_path):
    (tmp_path / "node-a.log").write_text("\n".join(_AGENT_STOPPED) + "\n", encoding="utf-8")
    (tmp_path / "node-b.log").write_text("\n".join(_OWN_ERROR[-2:]) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict.get("ranks") == [] and "signal 15" in report.verdict["summary"]


def _phase_console(tmp_path, ready: tuple[int, ...], world: int = 4) -> list[int]:
    # Shapes of t92_hang_r3_w4_tcp_print_tee: every rank enters a phase of its own words and says when it
    # is done; the ranks that left it time out in their next collective (one traceback, no rank on it).
    lines = []
    for step in (5, 10):
        lines += [f"[rank {r}] refreshing data shard shard-0000{r} for step {step}" for r in range(world)]
        lines += [f"[rank {r}] shard shard-0000{r} ready" for r in range(world) if step == 5 or r in ready]
        lines += [f"[rank {r}] step {step + 1}/20 loss 0.{r}81" for r in range(world) if step == 5]
    lines += ["Traceback (most recent call last):", '  File "/job/train.py", line 91, in main', "    loss.backward()",
              "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] Timed out "
              "waiting 20000ms for send operation to complete"]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict.get("ranks") or []


def test_the_rank_that_never_left_a_phase_every_other_rank_left_is_the_one_they_waited_for(tmp_path):
    assert _phase_console(tmp_path, ready=(0, 1, 3)) == [2]


def test_two_ranks_still_in_the_phase_single_out_none(tmp_path):
    assert _phase_console(tmp_path, ready=(0, 1)) == []


def _alike_console(tmp_path, messages: dict[int, str]) -> list[int]:
    # Shapes of t100_nowait_r2_w3_split: every rank gathers a checksum per rank and raises the same error
    lines = []
    for r, msg in messages.items():
        lines += [f"[rank{r}]: Traceback (most recent call last):", f'[rank{r}]:   File "/job/train.py", line 120, in main',
                  f'[rank{r}]:     raise RuntimeError(f"replica check failed at step {{step}}: ..."',
                  f"[rank{r}]: RuntimeError: {msg}"]
    (tmp_path / "console.err").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict.get("ranks") or []


def test_the_one_rank_that_every_ranks_same_error_names_is_accused(tmp_path):
    msg = "replica check failed at step 9: parameter checksum of rank(s) [1] differs ([0.25, -0.5, 0.25])"
    assert _alike_console(tmp_path, dict.fromkeys(range(3), msg)) == [1]


def test_an_error_naming_two_ranks_or_not_raised_by_every_rank_accuses_none_alone(tmp_path):
    two = "replica check failed at step 9: parameter checksum of rank(s) [1, 2] differs"
    assert _alike_console(tmp_path, dict.fromkeys(range(4), two)) == [0, 1, 2, 3]
    one = "replica check failed at step 9: parameter checksum of rank(s) [1] differs"
    assert sorted(_alike_console(tmp_path, dict.fromkeys((0, 2), one))) != [1]


def _one_check(tmp_path, msg: str) -> list[int]:
    # Shapes of t99_straggler_r3_w8_tee: rank 0's own step-time check raises; the others lose it
    lines = [f"[rank{r}]: step 9 loss 0.{r}1" for r in range(4)]
    lines += ["[rank0]: Traceback (most recent call last):", '[rank0]:   File "/job/train.py", line 140, in main',
              '[rank0]:     raise RuntimeError(f"mean step time ...")', f"[rank0]: RuntimeError: {msg}"]
    lines += [f"[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
              f"Connection closed by peer [127.0.0.1]:4{r}21" for r in (1, 2, 3)]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict.get("ranks") or []


def test_a_ranks_own_check_that_calls_another_rank_the_slowest_names_that_rank(tmp_path):
    assert _one_check(tmp_path, "mean step time 0.476s over the 0.3s budget; slowest rank 2 (0.454s)") == [2]


def test_a_ranks_own_error_that_only_mentions_another_rank_is_its_own(tmp_path):
    assert _one_check(tmp_path, "checkpoint of step 10 from rank 2 could not be merged: shape [4, 8] vs [4, 16]") == [0]


def _retry(r: int, shard: str, attempt: int = 1) -> list[str]:
    # Shapes of t106_*: a handler logs the failed fetch with its traceback (log.exception) and retries
    return [f"[default{r}]:2026-11-28 01:20:15,886 [rank{r}] ERROR train: fetch of {shard} failed (attempt {attempt}/4), "
            "retrying", f"[default{r}]:Traceback (most recent call last):",
            f'[default{r}]:  File "/job/train.py", line 87, in _get',
            f"[default{r}]:ConnectionError: GET s3://shards/{shard}: connection reset by peer (read 0 of 4096 bytes)"]


def _steps(r: int, steps) -> list[str]:
    return [f"[default{r}]:2026-11-28 01:20:1{s % 10},000 [rank{r}] INFO train: step {s} loss 0.{r}{s}" for s in steps]


def test_exceptions_a_rank_retried_and_trained_past_are_no_failure_of_a_healthy_job(tmp_path):
    lines = []
    for r in range(3):
        retry = _retry(r, f"part-0000{r}.bin")
        # another rank's warning lands between the handler's record and its traceback (one pipe, two writers)
        retry.insert(1, f"[default{(r + 1) % 3}]:/job/train.py:112: UserWarning: sample {r}: truncating")
        # no step lines (a progress bar draws them), no warnings: what it went on writing is its
        # library's debug lines and more handled retries
        lines += _debug(r, range(0, 3)) + retry + _debug(r, range(3, 8)) + _retry(r, f"part-0001{r}.bin") \
            + _retry(r, f"part-0002{r}.bin") + _debug(r, range(8, 12))
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert analyze([str(tmp_path)], jobs=1).verdict is None


def _debug(r: int, requests) -> list[str]:
    return [f"[default{r}]:2026-11-28 01:20:15,90{n % 10} [rank{r}] DEBUG blobstore.client: GET "
            f"s3://shards/part-{n:05d}.bin -> 200 (4096 bytes, 3.2 ms)" for n in requests]


def test_a_hung_rank_whose_only_errors_were_retried_is_the_one_the_others_waited_for(tmp_path):
    # rank 1 retried fetches like the others, then hung; ranks 0 and 2 time out and exit 1; torchrun
    # SIGTERMs rank 1 and calls rank 2, the first to exit, the root cause
    lines = []
    for r in range(3):
        lines += _steps(r, range(0, 4)) + _retry(r, f"part-0000{r}.bin") + [
            f"[default{r}]:2026-11-28 01:20:16,100 [rank{r}] ERROR train: fetch of part-0000{r}.bin failed "
            "(attempt 2/4), retrying"]
    for r in (2, 0):
        lines += _steps(r, range(4, 6)) + [
            f"[default{r}]:[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
            f"unbound_buffer.cc:78] Timed out waiting 20000ms for recv operation to complete"]
    lines += ["E1128 01:22:21.213000 10302 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
              "local_rank: 2 (pid: 10340) of binary: /usr/bin/python3",
              "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
              "============================================================", "train.py FAILED",
              "------------------------------------------------------------", "Failures:"]
    for i, (rank, code, pid) in enumerate(((0, 1, 10338), (1, -15, 10339)), 1):
        sig = "  (SIGTERM)" if code < 0 else ""
        lines += [f"[{i}]:", "  time      : 2026-11-28_01:22:21", "  host      : localhost",
                  f"  rank      : {rank} (local_rank: {rank})", f"  exitcode  : {code} (pid: {pid}){sig}",
                  "  error_file: <N/A>", "  traceback : " + (f"Signal 15 (SIGTERM) received by PID {pid}" if code < 0
                                                              else "To enable traceback see: https://pytorch.org")]
    lines += ["------------------------------------------------------------", "Root Cause (first observed failure):",
              "[0]:", "  time      : 2026-11-28_01:22:20", "  host      : localhost", "  rank      : 2 (local_rank: 2)",
              "  exitcode  : 1 (pid: 10340)", "  error_file: <N/A>",
              "  traceback : To enable traceback see: https://pytorch.org",
              "============================================================"]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert analyze([str(tmp_path)], jobs=1).verdict.get("ranks") == [1]


def _attempt(attempt: int, t0: int, steps, fail: tuple[int, str] | None = None) -> list[str]:
    # Shapes of t108_once_r2_w3_mr1_logdir: the script's own banner per attempt, dated step lines
    lines = [f"2026-11-28 01:38:{t0:02d},100 INFO [rank{r}] process group ready: world size 3, attempt {attempt}"
             for r in range(3)]
    for i, s in enumerate(steps):
        lines += [f"2026-11-28 01:38:{t0 + 1 + i:02d},200 INFO [rank{r}] step {s} loss 0.{r}{s}" for r in range(3)]
    if fail is not None:
        rank, err = fail
        lines += [f"[rank{rank}]: {err}",
                  f"E1128 01:38:{t0 + 2 + len(steps):02d}.688000 17773 torch/distributed/elastic/multiprocessing/api.py:1002]"
                  f" failed (exitcode: 1) local_rank: {rank} (pid: 1779{rank}) of binary: /usr/bin/python3"]
    return lines


def test_a_failure_the_restarted_group_trained_past_is_still_the_restarts_cause(tmp_path):
    # The job finished, but rank 2's error cost it an attempt: the verdict names it, and says the restarted group got
    # over it (the real runs' label since cases190.py: t190_once, t241_once, t279_once, and t108_once relabelled).
    lines = _attempt(0, 10, range(0, 5), (2, "OSError: [Errno 5] Input/output error: '/data/shard-00002.bin'"))
    lines += ["[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
              "closed by peer [127.0.0.1]:41311. This is typically caused by a remote worker crashing."]
    lines += _attempt(1, 30, range(5, 12))
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [2]
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert "OSError" in rk1.summary and "restarted the worker group, which got over it" in rk1.summary


def test_a_restarted_group_that_failed_again_keeps_the_failure(tmp_path):
    lines = _attempt(0, 10, range(0, 5), (2, "OSError: [Errno 5] Input/output error: '/data/shard-00002.bin'"))
    lines += _attempt(1, 30, range(5, 8), (2, "OSError: [Errno 5] Input/output error: '/data/shard-00002.bin'"))
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert analyze([str(tmp_path)], jobs=1).verdict.get("ranks") == [2]


def test_a_node_stopped_from_outside_after_its_peer_timed_out_is_not_the_first_failure():
    # t237_hang_r0_2n: rank 0 (trn-a01) polls for a file from step 29; rank 1 times out at 15:07:04 (trn-a02.err:11-12,
    # its agent's exit report at 15:07:05); the job script's `timeout -s TERM 60` stops trn-a01's agent at 15:07:37
    # (trn-a01.err:1-2): the stop ended the hang, rank 0 is the one that never reached the collective
    from pathlib import Path

    from nccl_doctor.analysis import analyze

    run = Path(__file__).resolve().parent.parent / "fixtures" / "realruns" / "t237_hang_r0_2n_filter_split"
    report = analyze([str(run)], jobs=1)
    assert report.verdict["ranks"] == [0] and report.verdict["hosts"] == ["trn-a01"]


# A hung rank stopped by torchrun whose SIGTERM handler ran a collective (Lightning's signal connector broadcasts
# the signal): the shape of fixtures/realruns/t312_lit_getitem_poll_r3_w4_down_split and t6_hang_r1_w4_tr, with
# other pids, ports and lines. Its lost peer comes from inside the handler: it was stopped, not late.
_LIB = "/opt/venv/lib/python3.11/site-packages"
_STOPPED = ("W1128 23:24:08.314000 10706 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process "
            "10712 closing signal SIGTERM")


def _in_handler(handler: list[str], error: str) -> list[str]:
    body = ["Traceback (most recent call last):", '  File "/job/train.py", line 230, in main', "    trainer.fit(model)",
            f'  File "{_LIB}/torch/utils/data/_utils/fetch.py", line 54, in fetch',
            "    data = [self.dataset[idx] for idx in possibly_batched_index]",
            '  File "/job/train.py", line 119, in __getitem__', "    self._stall(idx)",
            '  File "/job/train.py", line 114, in _stall', "    time.sleep(0.5)", *handler, error]
    return [f"[rank1]: {b}" for b in body]


_LIGHTNING = [f'  File "{_LIB}/lightning/pytorch/trainer/connectors/signal_connector.py", line 36, in __call__',
              "    signal_handler(signum, frame)",
              f'  File "{_LIB}/lightning/pytorch/trainer/connectors/signal_connector.py", line 118, in '
              "_sigterm_notifier_fn", "    dist.broadcast(sigterm_tensor, src=0)",
              f'  File "{_LIB}/torch/distributed/distributed_c10d.py", line 3151, in broadcast', "    work.wait()"]
_LOST = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
         "peer [127.0.0.1]:3304. This is typically caused by a remote worker crashing.")


def _stopped_in_handler(tmp_path, said: list[str], handler: list[str], error: str):
    lines = [f"[rank {r}] step {s} loss 2.{r}{s}1" for s in range(8) for r in range(3)]
    lines += _traceback(0, 180, "dist.barrier()", _TIMEOUT["send"]) + _traceback(2, 180, "dist.barrier()",
                                                                                  _TIMEOUT["recv"])
    lines += [_STOPPED, *said, *_in_handler(handler, error)]
    (tmp_path / "console.err").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(tmp_path)], jobs=1).verdict


def test_a_lost_peer_raised_in_a_sigterm_handler_is_a_hung_rank_stopped_where_the_signal_found_it(tmp_path):
    verdict = _stopped_in_handler(tmp_path, [], _LIGHTNING, _LOST)
    assert verdict["ranks"] == [1], verdict
    assert "lagged behind" not in verdict["summary"] and "had to stop it (SIGTERM)" in verdict["summary"], verdict
    assert "shows it in _stall (train.py:114), called from __getitem__ (:119)" in verdict["summary"], verdict


def test_a_lost_peer_after_the_ranks_own_word_that_sigterm_reached_it_is_no_late_arrival(tmp_path):
    # no handler frame in its traceback (a handler in a package the trace leaves out), only its own line
    plain = [f'  File "{_LIB}/torch/distributed/distributed_c10d.py", line 3151, in broadcast', "    work.wait()"]
    verdict = _stopped_in_handler(tmp_path, ["[rank: 1] Received SIGTERM: 15"], plain, _LOST)
    assert verdict["ranks"] == [1] and "lagged behind" not in verdict["summary"], verdict
    assert "had to stop it (SIGTERM)" in verdict["summary"], verdict


def test_without_the_handler_or_its_word_the_same_lost_peer_is_a_late_arrival(tmp_path):
    plain = [f'  File "{_LIB}/torch/distributed/distributed_c10d.py", line 3151, in broadcast', "    work.wait()"]
    verdict = _stopped_in_handler(tmp_path, [], plain, _LOST)
    assert verdict["ranks"] == [1] and "lagged behind" in verdict["summary"], verdict


def test_an_error_of_its_own_raised_in_its_handler_stays_its_own(tmp_path):
    # a handler that saves a checkpoint on SIGTERM and finds the disk full: that is a failure of its own
    save = ['  File "/job/train.py", line 377, in on_sigterm', "    torch.save(state, path)"]
    verdict = _stopped_in_handler(tmp_path, [], save, "OSError: [Errno 28] No space left on device")
    assert verdict["ranks"] == [1] and "No space left on device" in verdict["summary"], verdict


def test_a_ranks_start_up_line_naming_its_pid_ties_the_launchers_sigterm_to_it(tmp_path):
    # shape of fixtures/realruns/t320_hang_r0_w2_mr1_fresh_split: no line of rank 0 carries a pid but its start-up
    # line ("starting on vm pid 23606: rank 0 ..."); torchrun SIGTERMs pid 23606 after rank 1 timed out
    out = ["[rank 0/2] starting on vm pid 23606: rank 0 local_rank 0 world_size 2 restart_count 0",
           "[rank 1/2] starting on vm pid 23607: rank 1 local_rank 1 world_size 2 restart_count 0",
           *[f"[rank {r}/2] step {s}/30 loss 7.6{r}{s} (0.2s)" for s in range(0, 14, 2) for r in (0, 1)]]
    err = [*_traceback(1, 207, "loss.backward()", _TIMEOUT["recv"]),
           "W1128 23:38:48.639000 23597 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 23606 "
           "closing signal SIGTERM",
           "E1128 23:38:48.711000 23597 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) "
           "local_rank: 1 (pid: 23607) of binary: /venv/bin/python3"]
    (tmp_path / "console.out").write_text("\n".join(out) + "\n", encoding="utf-8")
    (tmp_path / "console.err").write_text("\n".join(err) + "\n", encoding="utf-8")
    verdict = analyze([str(tmp_path)], jobs=1).verdict
    assert verdict["ranks"] == [0] and verdict["hosts"] == ["vm"], verdict
    assert "the launcher had to stop it (SIGTERM)" in verdict["summary"], verdict
