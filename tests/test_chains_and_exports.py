"""Exception chains, logged tracebacks, log shippers' records and newest-first exports, end to end on
small hand-made folders whose line shapes come from the real runs of families 47 (train47.py) and
49 (train49.py, collect49.py), with other host names, pids and ports.

Expected values come from what the text says, read by hand: whose chain starts with its own error,
which rank an error record names above its traceback, which pod a record came from, which line of
a newest-first file holds the exception.
"""

from __future__ import annotations

import json

from nccl_doctor import analyze
from nccl_doctor.reading import newest_first, oldest_first

_PEER = ("[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
         "Connection closed by peer [10.0.0.7]:4{r}11. This is typically caused by a remote worker crashing.")


def _frames(r: int) -> list[str]:
    return [f"[rank{r}]: Traceback (most recent call last):",
            f'[rank{r}]:   File "/srv/train.py", line 287, in train',
            f"[rank{r}]:     loss = guarded_step(step)"]


def _wrapped(r: int, cause: list[str]) -> list[str]:
    """A rank's traceback: ``cause`` (its own lines), then the wrapper raised from it."""
    return cause + ["", f"[rank{r}]: The above exception was the direct cause of the following exception:", ""] \
        + _frames(r) + [f"[rank{r}]:     raise StepFailed(f'training step {{step}} failed') from exc",
                        f"[rank{r}]: StepFailed: training step 8 failed"]


def _steps(ranks, step: int) -> list[str]:
    return [f"[rank {r}] step {step}/30 loss 2.0{r}61 lr 0.0500 (0.12s/it)" for r in ranks]


def test_a_wrapper_raised_from_a_lost_peer_is_an_echo_and_the_chain_with_an_own_cause_names_its_rank(tmp_path):
    # Every rank ends with the same "StepFailed: training step 8 failed"; what each was raised from
    # differs: rank 1's chain starts with its own KeyError, ranks 0 and 2's with a lost peer.
    lines = _steps(range(3), 7)
    lines += _wrapped(1, _frames(1) + ["[rank1]: KeyError: 'caption'"])
    lines += _wrapped(0, _frames(0) + [_PEER.format(r=0)])
    lines += _wrapped(2, _frames(2) + [_PEER.format(r=2)])
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert "KeyError" in report.verdict["headline"]


def test_an_exception_group_behind_its_margin_is_read_as_the_rank_s_own_cause(tmp_path):
    # Python 3.11's TaskGroup draws the group and its sub-exceptions behind "  + " / "  | " margins.
    group = [
        "[rank3]:   + Exception Group Traceback (most recent call last):",
        '[rank3]:   |   File "/srv/train.py", line 198, in run',
        "[rank3]:   |     async with asyncio.TaskGroup() as tg:",
        "[rank3]:   | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
        "[rank3]:   +-+---------------- 1 ----------------",
        "[rank3]:     | Traceback (most recent call last):",
        '[rank3]:     |   File "/srv/train.py", line 184, in fetch',
        "[rank3]:     |     reader, writer = await asyncio.open_connection(*SHARD_PROXY)",
        "[rank3]:     | ConnectionRefusedError: [Errno 111] Connect call failed ('10.0.0.9', 8181)",
        "[rank3]:     +------------------------------------",
    ]
    lines = _steps(range(4), 7) + _wrapped(3, group)
    for r in (0, 2):
        lines += _wrapped(r, _frames(r) + [_PEER.format(r=r)])
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [3]
    assert "ConnectionRefusedError" in report.verdict["headline"]


def _logged(r: int, ms: int, last: str) -> list[str]:
    """log.critical(..., exc_info=True): the record names the rank, the traceback below it does not."""
    return [f"2026-11-27 17:43:10,{ms:03d} CRITICAL [rank{r}] train: unrecoverable error on rank {r}, aborting",
            "Traceback (most recent call last):",
            '  File "/srv/train.py", line 272, in train_step',
            "    loss.backward()", last]


def test_a_traceback_under_an_error_record_is_the_rank_the_record_names(tmp_path):
    # Every rank aborts (SIGABRT) after logging its exception: rank 1's is its own (a NaN loss), ranks
    # 0 and 2's a peer resetting the connection; the table lists all three as SIGABRT.
    reset = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
             "[127.0.0.1]:38605: Connection reset by peer.")
    lines = [f"2026-11-27 17:43:10,28{r} INFO [rank{r}] train: step 12/30 loss 2.0650" for r in range(3)]
    lines += _logged(1, 291, "FloatingPointError: non-finite loss nan at step 13")
    lines += _logged(0, 345, reset) + _logged(2, 352, reset)
    lines += ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 60, "/srv/train.py FAILED",
              "-" * 60, "Failures:"]
    for i, (rank, pid) in enumerate(((1, 12056), (2, 12057)), 1):
        lines += [f"[{i}]:", "  time      : 2026-11-27_17:43:10", "  host      : node-b", f"  rank      : {rank} "
                  f"(local_rank: {rank})", f"  exitcode  : -6 (pid: {pid})  (SIGABRT)", "  error_file: <N/A>",
                  f"  traceback : Signal 6 (SIGABRT) received by PID {pid}"]
    lines += ["-" * 60, "Root Cause (first observed failure):", "[0]:", "  time      : 2026-11-27_17:43:10",
              "  host      : node-b", "  rank      : 0 (local_rank: 0)", "  exitcode  : -6 (pid: 12055)  (SIGABRT)",
              "  error_file: <N/A>", "  traceback : Signal 6 (SIGABRT) received by PID 12055", "=" * 60]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert "FloatingPointError" in report.verdict["headline"]


def test_a_shipper_s_records_keep_the_line_as_written_and_name_the_pod(tmp_path):
    # Vector's kubernetes_logs records: the line in "message" (torchrun's table rows with their
    # indentation, "[0]:" one word), the pod in kubernetes.pod_name.
    def rec(pod: str, msg: str, t: int) -> str:
        return json.dumps({"kubernetes": {"pod_name": pod, "pod_namespace": "ads"}, "message": msg,
                           "source_type": "kubernetes_logs", "stream": "stderr",
                           "timestamp": f"2026-11-27T17:44:{t:02d}.5Z"})
    pod = "wide-deep-81-worker-0"
    rows = ["Root Cause (first observed failure):", "[0]:", "  time      : 2026-11-27_17:44:26",
            f"  host      : {pod}", "  rank      : 3 (local_rank: 1)", "  exitcode  : -9 (pid: 13584)  (SIGKILL)",
            "  error_file: <N/A>", "  traceback : Signal 9 (SIGKILL) received by PID 13584"]
    lines = [rec("wide-deep-81-master-0", "[rank0]: " + _PEER.format(r=0).split(": ", 1)[1], 20)]
    lines += [rec(pod, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", 21)]
    lines += [rec(pod, row, 21) for row in rows]
    (tmp_path / "vector.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [3]
    assert report.verdict["hosts"] == [pod]


def test_newest_first_is_told_from_the_times_lines_start_with():
    older = [f"2026-11-27T17:42:{s:02d}Z {{pod=\"p-0\"}} step {s}".encode() for s in range(40)]
    newest = b"\n".join(reversed(older)) + b"\n"
    assert newest_first(newest[:400], newest[-400:])
    forward = b"\n".join(older) + b"\n"
    assert not newest_first(forward[:400], forward[-400:])
    # logcli prints whole seconds: a head of one second says nothing by itself, the tail is older
    same = [b"2026-11-27T17:43:08Z {pod=\"p-1\"} exitcode  : 1"] * 30
    assert newest_first(b"\n".join(same) + b"\n", b"\n".join(reversed(older[:5])) + b"\n")
    # two writers interleaved in a forward log go up most of the time
    mixed = [older[i + (1 if i % 2 == 0 else -1)] for i in range(1, 39)]
    text = b"\n".join(mixed) + b"\n"
    assert not newest_first(text[:2000], text[-2000:])
    assert not newest_first(b"gpu-node-1:42:42 [0] NCCL INFO Bootstrap\n" * 50, b"")


def test_oldest_first_numbers_lines_backwards():
    data, n = oldest_first(b"c\nb\na\n")
    assert (data, n) == (b"a\nb\nc\n", 3)
    assert oldest_first(b"c\nb\na") == (b"a\nb\nc\n", 3)  # (no newline at the end)


def test_a_newest_first_export_is_read_oldest_first_and_quoted_with_its_own_line_numbers(tmp_path):
    # logcli's default order: newest first. Read forward, rank 1's traceback would run upside down
    # (its exception above its frames) and the peers' echoes would come before the cause.
    forward = [(0, "p-0", "starting on p-0: local_rank 0, world_size 2")]
    forward += [(0, "p-1", "starting on p-1: local_rank 0, world_size 2")]
    forward += [(s, p, f"[rank {r}] step {s}/30 loss 0.69") for s in range(1, 12) for r, p in ((0, "p-0"), (1, "p-1"))]
    forward += [(12, "p-1", line) for line in _frames(1) + ["[rank1]: ValueError: step 12: 32 labels outside [0, 1]"]]
    forward += [(13, "p-0", line) for line in _frames(0) + [_PEER.format(r=0)]]
    lines = [f"2026-11-27T17:43:{10 + s:02d}Z {{pod=\"{pod}\", stream=\"stderr\"}} {text}" for s, pod, text in forward]
    newest = list(reversed(lines))
    (tmp_path / "logcli.txt").write_text("\n".join(newest) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert report.verdict["hosts"] == ["p-1"]
    where = 1 + next(i for i, line in enumerate(newest) if "ValueError: step 12" in line)
    rk1 = next(f for f in report.findings if f.rule == "RK1")
    assert any(e.line == where and "ValueError" in e.text for e in rk1.evidence)
    assert any("newest first" in n for n in report.notes)


def test_a_checkpoint_exception_every_rank_raises_names_the_rank_that_failed(tmp_path):
    # torch.distributed.checkpoint gathers rank 2's exception and every rank raises it again, rank 2's
    # traceback inside, headed "(RANK 2)"; the rank list says whose it was.
    lines = _steps(range(3), 9)
    for r in (0, 1, 2):
        lines += [f"[rank{r}]: Traceback (most recent call last):", f'[rank{r}]:   File "/srv/train.py", line 210, in save',
                  f"[rank{r}]:     dcp.save(state, checkpoint_id=path)",
                  f"[rank{r}]: torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([2])",
                  f"[rank{r}]: Traceback (most recent call last): (RANK 2)",
                  f'[rank{r}]:   File "/opt/torch/distributed/checkpoint/filesystem.py", line 470, in _write_files',
                  f"[rank{r}]:     stream.write(data)",
                  f"[rank{r}]: OSError: [Errno 28] No space left on device"]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [2]
    assert "No space left on device" in report.verdict["headline"]


def _nan_job(losses: dict[int, str]) -> list[str]:
    """Four ranks train; at step 14 each prints ``losses[rank]`` (its own loss, before the all-reduce);
    then every rank raises the same NaN error."""
    lines = [f"[rank {r}] step {s} loss 2.{r}{s:02d}" for s in range(10, 14) for r in range(4)]
    lines += [f"[rank {r}] step 14 loss {losses[r]}" for r in range(4)]
    for r in range(4):
        lines += _frames(r) + [f"[rank{r}]: FloatingPointError: NaN/inf in model weights after step 14: fc1.weight"]
    return lines


def test_ranks_failing_alike_on_a_nan_name_the_rank_whose_own_loss_went_nan_first(tmp_path):
    (tmp_path / "console.log").write_text("\n".join(_nan_job({0: "2.13", 1: "2.14", 2: "nan", 3: "2.09"})) + "\n",
                                          encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [2]


def test_ranks_failing_alike_on_a_nan_with_no_local_sign_are_all_named(tmp_path):
    # Nothing local: whether one rank's value was spread or every rank's data was bad, the logs read
    # the same; every rank failed on its own line, and all are named (none singled out).
    (tmp_path / "console.log").write_text("\n".join(_nan_job({r: "nan" for r in range(4)})) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [0, 1, 2, 3]


def test_a_capitalised_loss_that_went_nan_names_its_rank_too(tmp_path):
    # ("step 14/30 | Loss: nan": the word as the script wrote it)
    lines = [line.replace(" loss ", "/30 | Loss: ") for line in _nan_job({0: "2.13", 1: "nan", 2: "2.21", 3: "2.09"})]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
