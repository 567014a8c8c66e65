"""Errors that look like echoes but are a rank's own, and the reverse. Line shapes from
fixtures/realruns/t123_* (logging's '--- Logging error ---'), t125_pyreader_r2_w4_redirect (a print into a
closed pipe), t64_kill_r0_w2_keyerror_logdirq (a socket to a dead collector) and t127_raise_r2_w4_tee
(an own message that happens to say "got 0 bytes"). Expected ranks read from the lines by hand."""

from __future__ import annotations

from nccl_doctor import analyze

_CLOSED = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
           "by peer [127.0.0.1]:41311. This is typically caused by a remote worker crashing.")


def _ranks(tmp_path, lines: list[str]) -> list[int]:
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return (analyze([str(tmp_path)], jobs=1).verdict or {}).get("ranks") or []


def _raise(rank: int, call: str, exc: str) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):", f'[rank{rank}]:   File "/job/train.py", line 106, in say',
            f"[rank{rank}]:     {call}", f"[rank{rank}]: {exc}"]


def test_a_print_into_a_closed_pipe_is_the_ranks_own_failure(tmp_path):
    lines = [f"[rank {r}] step=12 loss=2.0{r}" for r in range(3)]
    lines += _raise(2, "print(msg, flush=True)", "BrokenPipeError: [Errno 32] Broken pipe")
    lines += [f"[rank{r}]: {_CLOSED}" for r in (0, 1)]
    assert _ranks(tmp_path, lines) == [2]


def test_a_broken_pipe_after_the_rank_lost_its_peer_is_one_more_echo(tmp_path):
    lines = [f"[rank {r}] step=12 loss=2.0{r}" for r in range(3)]
    lines += [f"[rank1]: {_CLOSED}"] + _raise(1, "self.sock.sendall(payload)", "BrokenPipeError: [Errno 32] Broken pipe")
    lines += [f"[rank2]: {_CLOSED}"]
    lines += _raise(0, "batch = next(it)", "KeyError: 'labels'")
    assert _ranks(tmp_path, lines) == [0]


def test_an_own_message_that_says_got_0_bytes_is_no_lost_connection(tmp_path):
    lines = [f"[rank {r}] step 12 loss 2.0{r}" for r in range(3)]
    lines += _raise(1, "x = decode(raw)", "ValueError: corrupt sample at offset 7340032: expected 3x32x32, got 0 bytes")
    lines += [f"[rank{r}]: {_CLOSED}" for r in (0, 2)]
    assert _ranks(tmp_path, lines) == [1]


def test_a_logging_error_printed_between_other_ranks_lines_is_handled(tmp_path):
    lines = [f"[default{r}]:2026-11-28 02:33:4{r},100 INFO [rank {r}] step 3 loss 2.0{r}" for r in range(3)]
    lines += ["[default1]:--- Logging error ---", "[default2]:2026-11-28 02:33:41,162 INFO [rank 2] loaded batch 10",
              "[default1]:Traceback (most recent call last):",
              '[default1]:  File "/usr/lib/python3.11/logging/__init__.py", line 445, in _format',
              "[default1]:TypeError: %d format: a real number is required, not str",
              "[default1]:Call stack:", "[default1]:Message: 'step %d loss %.4f'"]
    lines += [f"[default{r}]:2026-11-28 02:33:5{r},100 INFO [rank {r}] step 9 loss 1.9{r}" for r in range(3)]
    lines += [f"[default0]:[rank0]: {e}" for e in ("Traceback (most recent call last):",
                                                 'File "/job/train.py", line 90, in main',
                                                 "ValueError: corrupt batch at step 12")]
    lines += [f"[default{r}]:[rank{r}]: {_CLOSED}" for r in (1, 2)]
    assert _ranks(tmp_path, lines) == [0]


def test_a_connection_reset_raised_by_the_scripts_own_fetch_is_the_ranks_own_failure(tmp_path):
    """t151_retry_r3_w4_logdir's shape: rank 3's storage fetch is retried, then its ConnectionResetError
    (Python's own socket error, not gloo's RuntimeError) ends it under torch's "[rank3]:" hook; the
    others fail in the all-reduce afterwards."""
    lines = [f"[default{r}]:2026-11-28 04:18:57,41{r} INFO trainer: rank {r} step 11 loss 1.97" for r in range(4)]
    lines += ["[default3]:2026-11-28 04:18:57,962 WARNING trainer: fetch of s3://corpus/shard-00051.tar failed on rank "
              "3 (attempt 2/3): [Errno 104] Connection reset by peer; retrying in 0.5 s"]
    lines += [f"[default3]:{x}" for x in _raise(3, 'raise ConnectionResetError(104, "Connection reset by peer")',
                                                "ConnectionResetError: [Errno 104] Connection reset by peer")]
    lines += [f"[default{r}]:[rank{r}]: {_CLOSED}" for r in (0, 1, 2)]
    assert _ranks(tmp_path, lines) == [3]
