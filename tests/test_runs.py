"""Several runs of one job in one folder (model/runs.py): the latest is analysed, never nodes or reports."""

from __future__ import annotations

from nccl_doctor.analysis import analyze


def _run(tmp_path, name: str, start: int, rank_lines: list[str]) -> None:
    (tmp_path / name).write_text("\n".join(f"2026-11-27 15:{start // 60:02d}:{start % 60:02d},000 INFO {ln}"
                                           for ln in rank_lines) + "\n", encoding="utf-8")


STEPS = [f"[rank {r}] starting on vm pid {100 + r}, world size 2" for r in (0, 1)]


def test_an_earlier_run_that_crashed_is_left_out_of_a_healthy_latest_run(tmp_path):
    # run 1 (15:10-15:12): rank 1 logs an error and aborts; run 2 (15:30-15:32) is healthy
    _run(tmp_path, "train.20261127-151000.log", 600,
         STEPS + ["[rank 1] step 3/10 loss 2.1", "[rank 0] step 3/10 loss 2.1"])
    with (tmp_path / "train.20261127-151000.log").open("a") as fh:
        fh.write("2026-11-27 15:10:02,000 ERROR [rank 1] shard 3 is truncated; aborting\n")
    _run(tmp_path, "train.20261127-153000.log", 1800,
         STEPS + ["[rank 0] step 10/10 loss 0.4", "[rank 1] step 10/10 loss 0.4"])
    report = analyze([str(tmp_path)])
    assert not [f for f in report.findings if f.severity.value == "error"]
    assert any("more than one run" in n and "train.20261127-151000.log" in n for n in report.notes)


def test_nodes_whose_clocks_differ_are_one_run(tmp_path):
    # node A (ranks 0-1) and node B (ranks 2-3) an hour apart: other ranks, so not a rerun
    _run(tmp_path, "node-a.log", 600, ["[rank 0] step 3/10 loss 2.1", "[rank 1] step 3/10 loss 2.1"])
    _run(tmp_path, "node-b.log", 3000, ["[rank 2] step 3/10 loss 2.1", "[rank 3] step 3/10 loss 2.1"])
    report = analyze([str(tmp_path)])
    assert not any("more than one run" in n for n in report.notes)
    assert {st.rank for st in report.job.ranks} == {0, 1, 2, 3}


def test_overlapping_files_are_one_run(tmp_path):
    _run(tmp_path, "rank0.log", 600, ["[rank 0] step 3/10 loss 2.1", "[rank 0] step 4/10 loss 2.0"])
    _run(tmp_path, "rank1.log", 601, ["[rank 1] step 3/10 loss 2.1", "[rank 1] step 4/10 loss 2.0"])
    report = analyze([str(tmp_path)])
    assert not any("more than one run" in n for n in report.notes)


# ---- reruns told apart by torchrun's own report (shapes from fixtures/realruns/t138_*) ----------------

from torchrun_lines import failure_table  # noqa: E402

_LOST = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
         "by peer [127.0.0.1]:{port}. This is typically caused by a remote worker crashing.")


def _raise(rank: int, exc: str) -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):", f'[rank{rank}]:   File "/job/train.py", line 145, in main',
            f"[rank{rank}]:     fault(step)", f"[rank{rank}]: {exc}"]


def _glog(hms: str, agent: int) -> str:
    return f"W1128 {hms}.476000 {agent} torch/distributed/elastic/multiprocessing/api.py:1028] "


def test_a_run_appended_after_torchruns_table_is_the_one_analysed_even_when_its_banners_name_no_rank(tmp_path):
    # run 1: rank 1 raised (table, root cause rank 1); run 2, appended to the same file: healthy
    lines = ["[03:41:54] attempt 1: world size 3, 14 steps, timeout 15 s", "[03:41:59] step 0 loss 2.1261"]
    lines += _raise(1, "ValueError: corrupt shard 00003") + [f"[rank{r}]: " + _LOST.format(port=4957) for r in (0, 2)]
    lines += [_glog("03:42:00", 9299) + f"Sending process {9307 + r} closing signal SIGTERM" for r in (0, 2)]
    lines += failure_table([(1, 1, ""), (0, -15, "SIGTERM"), (2, -15, "SIGTERM")], agent=9299, hms="03:42:00")
    lines += ["[03:42:15] attempt 2: world size 3, 14 steps, timeout 15 s", "[03:42:20] step 0 loss 2.1261",
              "[03:42:29] step 13 loss 0.4121", "training done"]
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert not [f for f in report.findings if f.severity.value == "error"]
    assert any("more than one run" in n for n in report.notes)


def test_an_earlier_runs_folder_in_a_reused_log_dir_is_left_out_with_its_console_part(tmp_path):
    # --tee copies each worker's lines into the console; the earlier run's folder holds the errors cut off
    run1 = _raise(1, "RuntimeError: CUDA error: an illegal memory access was encountered")
    run1_lost = "[rank0]: " + _LOST.format(port=4957)
    run2_lost = "[rank1]: " + _LOST.format(port=1399)
    lines = ["[default0]:[03:42:54] attempt 1: world size 2, 14 steps"] + [f"[default1]:{x}" for x in run1]
    lines += [f"[default0]:{run1_lost}"]
    lines += failure_table([(1, 1, ""), (0, 1, "")], agent=10018, hms="03:42:59")
    lines += ["[default0]:[03:43:08] attempt 2: world size 2, 14 steps", "[default0]:[03:43:15] step 6 loss 2.0873",
              f"[default1]:{run2_lost}"]
    lines += failure_table([(0, -9, "SIGKILL"), (1, 1, "")], agent=10289, hms="03:43:16", pid0=10318)
    (tmp_path / "train.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for run, files in (("none_5j60qbjt", {0: [run1_lost], 1: run1}), ("none_0s4o_ds6", {0: [], 1: [run2_lost]})):
        for local, text in files.items():
            d = tmp_path / "logs" / run / "attempt_0" / str(local)
            d.mkdir(parents=True)
            (d / "stderr.log").write_text("\n".join(text) + "\n", encoding="utf-8")
    v = analyze([str(tmp_path)], jobs=1).verdict or {}
    assert v.get("ranks") == [0] and "CUDA" not in v.get("headline", "")


def test_a_rerun_whose_hung_rank_said_nothing_is_still_a_rerun_of_the_earlier_failed_run(tmp_path):
    # train-<start>.log per run; the latest run's rank 2 hung and printed nothing with its rank
    run1 = ["[rank 0] step 3 loss 2.1", "[rank 1] step 3 loss 2.1", "[rank 2] step 3 loss 2.1"]
    run1 += _raise(0, "OSError: [Errno 5] Input/output error") + [f"[rank{r}]: " + _LOST.format(port=77) for r in (1, 2)]
    run1 += failure_table([(0, 1, ""), (1, 1, ""), (2, 1, "")], hms="03:43:31", when="2026-11-28_03:43:31")
    timeout = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed "
               "out waiting 12000ms for recv operation to complete")
    run2 = ["[rank 0] step 6 loss 2.0", "[rank 1] step 6 loss 2.0"] + [f"[rank{r}]: {timeout}" for r in (0, 1)]
    run2 += failure_table([(0, 1, ""), (1, 1, ""), (2, -15, "SIGTERM")], hms="03:44:25", when="2026-11-28_03:44:25")
    (tmp_path / "train-20261128-034329.log").write_text("\n".join(run1) + "\n", encoding="utf-8")
    (tmp_path / "train-20261128-034354.log").write_text("\n".join(run2) + "\n", encoding="utf-8")
    v = analyze([str(tmp_path)], jobs=1).verdict or {}
    assert v.get("ranks") == [2]


def test_workers_own_files_that_stop_before_their_consoles_table_are_the_same_run(tmp_path):
    # worker-N.txt (dated lines up to the hang) and the console (the table 15 s later): one run
    for r in range(3):
        _run(tmp_path, f"worker-{r}.txt", 600, [f"[rank {r}] step 3/10 loss 2.1"] if r != 1 else ["[rank 1] step 2/10"])
    lines = [f"[rank{r}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
             "Timed out waiting 15000ms for recv operation to complete" for r in (0, 2)]
    lines += failure_table([(0, 1, ""), (1, -15, "SIGTERM"), (2, 1, "")], hms="15:10:30", when="2026-11-27_15:10:30")
    (tmp_path / "console.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert not any("more than one run" in n for n in report.notes)


def test_a_node_whose_report_came_seconds_after_the_others_is_the_same_run(tmp_path):
    # t429_kill9_r2_n2_rankfilter_files: the ranks' own dated files (15:10:00-15:10:05), node-b's console with
    # rank 2's SIGKILL in its table (15:10:06), node-a's with its ranks' lost peers and its table 11 s later.
    # node-a's console holds a run's end only (tracebacks, its agent's report): no rerun of the dated run.
    (tmp_path / "logs").mkdir()
    for r in range(4):
        (tmp_path / f"logs/train_rank{r}.log").write_text(
            f"2026-11-28 15:10:00,1{r}0 INFO [rank {r}] step 5/50 loss 0.67\n"
            f"2026-11-28 15:10:05,4{r}0 INFO [rank {r}] step 25/50 loss 0.65\n", encoding="utf-8")
    node_b = ["[rank3]: " + _LOST.format(port=81)]
    node_b += failure_table([(2, -9, "SIGKILL"), (3, -15, "SIGTERM")], hms="15:10:06", when="2026-11-28_15:10:06")
    node_a = _raise(0, _LOST.format(port=82)) + _raise(1, _LOST.format(port=83))
    node_a += failure_table([(1, 1, ""), (0, 1, "")], hms="15:10:17", when="2026-11-28_15:10:17")
    (tmp_path / "node-b.log").write_text("\n".join(node_b) + "\n", encoding="utf-8")
    (tmp_path / "node-a.log").write_text("\n".join(node_a) + "\n", encoding="utf-8")
    report = analyze([str(tmp_path)], jobs=1)
    assert not any("more than one run" in n for n in report.notes)
    assert (report.verdict or {}).get("ranks") == [2]
