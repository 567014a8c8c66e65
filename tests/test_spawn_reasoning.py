"""torch.multiprocessing.spawn jobs and per-epoch step counters (line shapes copied from the
fixtures/realruns/t5_* recordings of train5.py, with other paths and numbers), end to end on small
hand-made files.

Expected values come from what the text says, read by hand: spawn's parent names the failed child
by its process index ("-- Process 2 terminated with the following error:") and relays the child's
own traceback right after; a per-epoch step counter is compared with its epoch.
"""

from __future__ import annotations

from nccl_doctor import analyze

_PARENT = [
    "Traceback (most recent call last):",
    '  File "/srv/job/main.py", line 40, in <module>',
    "    mp.spawn(run, args=(world,), nprocs=world, join=True)",
    '  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 211, in join',
    "    raise ProcessRaisedException(msg, error_index, failed_process.pid)",
    "torch.multiprocessing.spawn.ProcessRaisedException: ",
    "",
]


def _relayed(proc: int, exc: str) -> list[str]:
    return [f"-- Process {proc} terminated with the following error:",
            "Traceback (most recent call last):",
            '  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 87, in _wrap',
            "    fn(i, *args)",
            '  File "/srv/job/main.py", line 22, in run',
            "    loss = step(batch)",
            exc, ""]


def _write(tmp_path, lines: list[str]):
    p = tmp_path / "console.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(p)])


def test_the_relayed_traceback_is_the_child_that_spawn_names(tmp_path):
    r = _write(tmp_path, ["Spawning 4 processes", *_PARENT,
                          *_relayed(3, "ZeroDivisionError: float division by zero")])
    assert r.verdict["ranks"] == [3]
    assert "ZeroDivisionError" in r.verdict["summary"]
    assert "ProcessRaisedException" not in r.verdict["summary"]  # the parent's wrapper is an echo


def test_a_child_killed_by_a_signal_is_named_with_the_signal(tmp_path):
    r = _write(tmp_path, [
        "Spawning 4 processes",
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL"])
    assert r.verdict["ranks"] == [1]
    assert "SIGKILL" in r.verdict["summary"]


def test_a_relayed_timeout_is_an_echo_not_the_cause(tmp_path):
    timeout = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
               "Timed out waiting 10000ms for recv operation to complete")
    r = _write(tmp_path, ["Spawning 4 processes", *_PARENT, *_relayed(2, timeout)])
    assert "RK1" not in {f.rule for f in r.findings}
    assert not r.verdict["ranks"]  # the child that timed out waited for someone the log does not name


def test_an_elastic_agents_process_index_is_not_a_global_rank(tmp_path):
    # The standalone torchelastic agent spawned its workers with the same machinery: its index is a
    # local rank on some node (fixtures/real/048 is one such excerpt).
    r = _write(tmp_path, ["[default] Worker group failed", *_PARENT,
                          *_relayed(0, "subprocess.CalledProcessError: Command '['python', 'train.py']' "
                                       "returned non-zero exit status 1.")])
    assert not r.verdict or not r.verdict.get("ranks")


def test_a_step_counter_that_starts_again_every_epoch_is_compared_with_its_epoch(tmp_path):
    # Every rank prints "[rank r] epoch e step s: start"; rank 1's last is epoch 0 step 9, the
    # others started epoch 1 (their per-epoch counter is back at 0); all four timed out. Rank 1 is
    # behind (read as step counts alone, 9 > 0 would put it ahead of the others).
    lines = []
    for epoch, steps in ((0, (0, 3, 6, 9)), (1, (0,))):
        for s in steps:
            for r in range(4):
                if (epoch, s) == (1, 0) and r == 1:
                    continue
                lines.append(f"[rank {r}] epoch {epoch} step {s}: start")
    for r in (0, 1, 2, 3):
        lines.append(f"[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
                     "unbound_buffer.cc:78] Timed out waiting 10000ms for recv operation to complete")
    r = _write(tmp_path, lines)
    assert r.verdict["ranks"] == [1]
    assert "RK3" in {f.rule for f in r.findings}
    rk3 = next(f for f in r.findings if f.rule == "RK3")
    assert "epoch 0 step 9" in rk3.summary and "epoch 1 step 0" in rk3.summary
    assert "DSY1" not in {f.rule for f in r.findings}
