"""Output that reached the engineer through everyday shell tools, end to end on small hand-made folders
whose line shapes come from the real runs of families 51 (train51.py, wrap51.sh) and 52 (train52.py,
wrap52.py), with other host names, pids and ports.

Expected values come from what the text says, read by hand: which run of an appended file is the
latest, whose pid a shell's "Killed" line names, which rank xargs' signal left quiet.
"""

from __future__ import annotations

from nccl_doctor import analyze

_PEER = ("[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
         "Connection closed by peer [127.0.0.1]:2{r}30. This is typically caused by a remote worker crashing.")


def _table(rows: list[tuple[int, int, int]], root: tuple[int, int, int]) -> list[str]:
    """torchrun's failure table: (rank, exit code, pid) of each failure, then the root cause."""
    def row(i: int, rank: int, code: int, pid: int) -> list[str]:
        sig = "  (SIGTERM)" if code == -15 else " "
        return [f"[{i}]:", "  time      : 2026-11-27_17:52:51", "  host      : localhost",
                f"  rank      : {rank} (local_rank: {rank})", f"  exitcode  : {code} (pid: {pid}){sig}",
                "  error_file: <N/A>", "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]
    out = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 60, "/srv/train.py FAILED",
           "-" * 60, "Failures:"]
    for i, r in enumerate(rows, 1):
        out += row(i, *r)
    return out + ["-" * 60, "Root Cause (first observed failure):", *row(0, *root), "=" * 60]


def _banner(ranks, pid0: int) -> list[str]:
    return [f"INFO [rank{r}] host vm pid {pid0 + r} local_rank {r} world_size {len(ranks)}" for r in ranks]


def test_a_run_appended_after_a_finished_one_is_the_one_analysed(tmp_path):
    # nohup.out: a first run dies at once on a command-line typo (every rank exit 2); the job is run
    # again into the same file; this time rank 2 raises at step 12 and the others lose it.
    lines = ["usage: train.py [-h] [--batch-size BATCH_SIZE]",
             "train.py: error: unrecognized arguments: --batch-sz 64"] * 2
    lines += _table([(1, 2, 3020), (2, -15, 3021), (3, -15, 3022)], (0, 2, 3019))
    lines += _banner(range(4), 3026)
    lines += [f"INFO [rank{r}] step {s}/40 loss 2.3354" for s in (2, 4, 6) for r in range(4)]
    lines += ["[rank2]: Traceback (most recent call last):", '[rank2]:   File "/srv/train.py", line 147, in main',
              "[rank2]: ValueError: Expected input batch_size (64) to match target batch_size (48)."]
    lines += [_PEER.format(r=r) for r in (1, 3, 0)]
    lines += _table([(0, -15, 3026), (1, -15, 3027), (3, -15, 3029)], (2, 1, 3028))
    (tmp_path / "nohup.out").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [2]
    assert "ValueError" in report.verdict["headline"]
    assert any("more than one run" in n for n in report.notes)


def test_a_shell_s_killed_line_of_the_launcher_is_a_stop_from_outside(tmp_path):
    # The job script ran torchrun ("$@"); an operator kill -9'ed it (pid 7140, none of the ranks' 7142-
    # 7143); its workers, orphaned, trained on to the end. Nothing failed.
    lines = ["[rank 0] rank 0/2 ready (pid 7142)", "[rank 1] rank 1/2 ready (pid 7143)"]
    lines += [f"[rank {r}] step {s} loss 2.31 grad norm 0.28" for s in range(1, 20) for r in (0, 1)]
    lines += ['/srv/job.sh: line 14:  7140 Killed                  "$@"']
    lines += [f"[rank {r}] step {s} loss 2.31 grad norm 0.28" for s in range(20, 40) for r in (0, 1)]
    lines += ["[rank 0] training done"]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert not [f for f in report.findings if f.severity.value == "error"]
    assert any("stopped from outside" in n and "7140" in n for n in report.notes)


def test_xargs_signal_report_names_the_one_rank_that_wrote_no_error(tmp_path):
    # xargs -P started every rank; rank 1 was SIGKILLed (xargs: "terminated by signal 9"); ranks 0 and
    # 2 lost their connection to it; rank 1 wrote nothing after its step 10.
    lines = _banner(range(3), 4100)
    lines += [f"INFO [rank{r}] step {s}/30 loss 2.3110" for s in (8, 10) for r in range(3)]
    lines += [_PEER.format(r=r) for r in (2, 0)]
    lines += ["xargs: env: terminated by signal 9"]
    (tmp_path / "job.out").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
    assert "signal 9" in report.verdict["headline"]


def test_a_node_tag_is_one_of_several_nodes_a_program_s_own_tag_is_no_node():
    from nccl_doctor.launchers import detect_modes

    two = [f"[node{n}] [rank{r}] step {s}/30 loss 2.3" for s in range(20) for n, r in ((0, 0), (1, 2))]
    assert "bracket_node" in detect_modes(two)
    one = [f"[node1] [rank{r}] step {s}/30 loss 2.3" for s in range(20) for r in (2, 3)]
    assert "bracket_node" not in detect_modes(one)
    titan = [f"[titan] 2025-06-10 09:00:{s:02d},123 - root - INFO - step: {s}  loss:  0.37" for s in range(40)]
    assert "bracket_node" not in detect_modes(titan)


def test_the_one_rank_torchrun_still_had_to_stop_after_training_never_exited(tmp_path):
    # Every rank printed its last step and "training done"; the job was stopped from outside 40 s
    # later and torchrun had one process left to stop: pid 13022, which rank 1's start-up line names.
    lines = [f"[rank {r}] started on vm pid {13021 + r}" for r in range(3)]
    lines += [f"[rank {r}] step {s} loss 2.0{r}{s:02d}" for s in range(25, 30) for r in range(3)]
    lines += [f"[rank {r}] training done: 30 steps in 1.6 s" for r in range(3)]
    lines += ["W1127 18:40:51.520000 13018 torch/distributed/elastic/agent/server/api.py:753] Received 15 death "
              "signal, shutting down workers",
              "W1127 18:40:51.521000 13018 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process "
              "13022 closing signal SIGTERM"]
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert report.verdict["ranks"] == [1]
